#!/bin/sh
# Buildroot post-build script: post-build.sh <TARGET_DIR>, with Buildroot's
# environment (HOST_DIR, BINARIES_DIR, BUILD_DIR, BASE_DIR, BR2_CONFIG).
# Runs every executable in post-build.d/ in name order with the same
# arguments: each prepares one kind of sample data in the target tree (or in
# $BASE_DIR/disk-tree, the data disk's contents), using the host puzzlefs
# tool ($HOST_DIR/bin/puzzlefs). Samples that need owners, device nodes or
# trusted.* xattrs are made later, by post-fakeroot.sh (post-fakeroot.d/):
# Buildroot resets every owner to root between the two.
set -eu
TARGET_DIR=$1
for s in "$(dirname "$0")"/post-build.d/*; do
	[ -x "$s" ] || continue
	echo ">>> post-build.d/$(basename "$s")"
	"$s" "$TARGET_DIR"
done
