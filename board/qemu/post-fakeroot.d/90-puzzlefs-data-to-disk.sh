#!/bin/sh
# Moves the large test data that the scripts before this one put into the
# target tree (/root/corpus, /root/pzk: 120 MB of images and source trees)
# onto the data disk, $BASE_DIR/disk-tree/rootfs/<same path>, and leaves an
# empty directory in its place: overlay/etc/init.d/S10data-disk bind-mounts
# each one back from /disk at boot. The initramfs the kernel unpacks at every
# boot shrinks from 138 MB to 23 MB (under KASAN and kmemleak unpacking took
# 51 of a 65 s boot);
# the data is read from the disk when a case uses it. Owners, modes, device
# nodes, hard links and xattrs survive mke2fs -d (99-data-disk.sh)
# as they survive cpio; hard links between symbolic links would not, so the
# move refuses trees that have them.
# Usage (as root): 90-puzzlefs-data-to-disk.sh <TARGET_DIR> (a post-fakeroot script).
set -eu
TARGET_DIR=$1
DEST=${BASE_DIR:?}/disk-tree/rootfs
rm -rf "$DEST"
mkdir -p "$DEST"
for p in root/corpus root/pzk; do
	[ -d "$TARGET_DIR/$p" ] || continue
	if [ -n "$(find "$TARGET_DIR/$p" -type l -links +1 -print -quit)" ]; then
		echo "90-puzzlefs-data-to-disk: $p has hard-linked symbolic links, which mke2fs -d does not keep" >&2
		exit 1
	fi
	mkdir -p "$DEST/$(dirname "$p")"
	mv "$TARGET_DIR/$p" "$DEST/$p"
	# The mount point keeps the moved directory's owner and mode.
	mkdir "$TARGET_DIR/$p"
	chown --reference="$DEST/$p" "$TARGET_DIR/$p"
	chmod --reference="$DEST/$p" "$TARGET_DIR/$p"
	echo "$p" >>"$DEST/binds"
	echo "moved /$p to the data disk ($(du -sh "$DEST/$p" | cut -f1))"
done
