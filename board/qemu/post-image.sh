#!/bin/sh
# Buildroot post-image script: post-image.sh <BINARIES_DIR>, with Buildroot's
# environment (HOST_DIR, BUILD_DIR, BASE_DIR, BR2_CONFIG). Runs every
# executable in post-image.d/ in name order with the same arguments: each
# makes one image next to the kernel and the cpio (the data disk, ...).
set -eu
BINARIES_DIR=$1
for s in "$(dirname "$0")"/post-image.d/*; do
	[ -x "$s" ] || continue
	echo ">>> post-image.d/$(basename "$s")"
	"$s" "$BINARIES_DIR"
done
