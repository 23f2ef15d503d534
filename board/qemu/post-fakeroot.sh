#!/bin/sh
# Buildroot post-fakeroot script: post-fakeroot.sh <TARGET_DIR>, run as
# (fake) root on the copy of the target tree a root filesystem image is made
# from, after Buildroot's `chown -h -R 0:0` and device tables: owners,
# device nodes and trusted.* xattrs set here end up in the image (those set
# by post-build scripts are lost). Same environment as post-build scripts.
# Runs every executable in post-fakeroot.d/ in name order with the same
# arguments: each makes the sample trees and images that need root.
# (post-build.d/ is the place for everything else: data that needs no owners
# or devices, in the target tree or in $BASE_DIR/disk-tree for the data disk.)
set -eu
TARGET_DIR=$1
for s in "$(dirname "$0")"/post-fakeroot.d/*; do
	[ -x "$s" ] || continue
	echo ">>> post-fakeroot.d/$(basename "$s")"
	"$s" "$TARGET_DIR"
done
