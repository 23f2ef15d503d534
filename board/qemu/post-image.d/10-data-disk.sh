#!/bin/sh
# The appliance's data disk: an ext4 file system with the verity feature,
# made from $BASE_DIR/disk-tree (post-build scripts put there whatever the
# suite needs on a real block device: fs-verity-capable blob stores, the
# reference copies the differential tests compare against). start-qemu.sh
# attaches $BINARIES_DIR/disk.ext4 as a virtio disk (copy-on-write: the file
# itself never changes); the guest mounts it on /disk
# (overlay/etc/init.d/S10data-disk).
# Usage: 10-data-disk.sh <BINARIES_DIR> (Buildroot post-image environment).
set -eu
BINARIES_DIR=$1
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
