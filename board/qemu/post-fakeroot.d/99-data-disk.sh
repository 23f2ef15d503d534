#!/bin/sh
# The appliance's data disk: an ext4 file system with the verity feature,
# made from $BASE_DIR/disk-tree (the scripts before this one put there what
# the suite needs on a real block device: fs-verity-capable blob stores, the
# reference copies the differential tests compare against, the sample images
# and trees moved out of the initramfs). start-qemu.sh attaches
# $BINARIES_DIR/disk.ext4 as a virtio disk (copy-on-write: the file itself
# never changes); the guest mounts it on /disk (overlay/etc/init.d/S10data-disk).
# It is made here, the last post-fakeroot script, rather than after the root
# filesystem: Buildroot runs post-fakeroot scripts inside the fakeroot session
# that made the trees' owners and device nodes, so mke2fs -d sees them as made
# (Buildroot's own ext2 rootfs is made the same way); a post-image script runs
# outside it and would see the build user's files.
# Usage: 99-data-disk.sh <TARGET_DIR> (a post-fakeroot script; unused: the
# disk is written to BINARIES_DIR).
set -eu
BINARIES_DIR=${BINARIES_DIR:?}
TREE=${BASE_DIR:?}/disk-tree
MKFS=mkfs.ext4
[ -x "${HOST_DIR:-}/sbin/mkfs.ext4" ] && MKFS=$HOST_DIR/sbin/mkfs.ext4
mkdir -p "$TREE"
printf 'puzzlefs appliance data disk\n' >"$TREE/README"
# Room for the tree plus a quarter, at least 64 MiB; 4 KiB blocks (fs-verity
# needs the block size to be the page size).
kib=$(du -sk "$TREE" | cut -f1)
size=$(( kib + kib / 4 + 65536 ))
rm -f "$BINARIES_DIR/disk.ext4.tmp"
"$MKFS" -q -F -t ext4 -b 4096 -O verity -L pzdisk -E root_owner=0:0 \
	-d "$TREE" "$BINARIES_DIR/disk.ext4.tmp" "${size}K"
mv "$BINARIES_DIR/disk.ext4.tmp" "$BINARIES_DIR/disk.ext4"
echo "data disk: $(du -h --apparent-size "$BINARIES_DIR/disk.ext4" | cut -f1) from $TREE"
