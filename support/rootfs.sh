#!/bin/sh
# Host build of the root filesystem, in Buildroot's order:
#   skeleton (busybox-static + applet links) -> kernel modules -> packages
#   (puzzlefs) -> rootfs overlays -> post-build scripts -> owners reset to
#   root -> post-fakeroot scripts -> cpio image -> post-image scripts.
# Usage: support/rootfs.sh <output-dir>; settings from the Makefile's exports.
set -eu

O=$1
REPO=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=$O/target
BINARIES_DIR=$O/images
step() { printf '>>> rootfs %s\n' "$*"; }
die() { printf 'rootfs: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "the host build needs root (device nodes, owners in the cpio)"

# The target tree is cheap to make, so it is made anew each time: nothing
# stale from an earlier build can hide in it.
rm -rf "$TARGET_DIR"
mkdir -p "$TARGET_DIR" "$BINARIES_DIR"
cd "$TARGET_DIR"
mkdir -p bin sbin usr/bin usr/sbin etc dev proc sys tmp run root mnt lib/modules var/log
chmod 1777 tmp
mknod -m 600 dev/console c 5 1
mknod -m 666 dev/null c 1 3

step "busybox (static, from busybox-static)"
cp /bin/busybox bin/busybox
# One link per applet, where busybox would install it.
/bin/busybox --list-full | while read -r applet; do
	[ "$applet" = bin/busybox ] && continue
	mkdir -p "$(dirname "$applet")"
	ln -sf /bin/busybox "$applet"
done

step "kernel modules"
cp -a "$O/build/modules/lib/modules/." lib/modules/
rm -f lib/modules/*/build lib/modules/*/source

step "puzzlefs (static)"
install -D -m 0755 "$HOST_DIR/bin/puzzlefs" usr/bin/puzzlefs

if [ -n "${PUZZLEFS_TEST_TOOLS:-}" ]; then
	# package/puzzlefs-test-tools: the guest-side test helpers.
	step "puzzlefs-test-tools (static)"
	# <tool>:<directory>, as in package/puzzlefs-test-tools/puzzlefs-test-tools.mk.
	for t in pzk-tool:usr/libexec/pzk pzt-helper:usr/libexec/puzzlefs-test \
		pzt-difftest:usr/libexec/puzzlefs-test pzv-tool:usr/libexec/pzv; do
		name=${t%%:*} dir=${t#*:}
		mkdir -p "$dir"
		gcc -static -O2 -Wall -o "$dir/$name" "$REPO/test/samples/$name.c" || die "building $name failed"
	done
fi

for overlay in ${ROOTFS_OVERLAYS:-}; do
	step "overlay $overlay"
	cp -a "$overlay/." .
done

# run_scripts <kind> <argument> <script>...: each script with the argument and
# the environment Buildroot gives post-build, post-fakeroot and post-image
# scripts.
run_scripts() {
	kind=$1 arg=$2
	shift 2
	for script in "$@"; do
		step "$kind $(basename "$script")"
		env TARGET_DIR="$TARGET_DIR" BINARIES_DIR="$BINARIES_DIR" HOST_DIR="$HOST_DIR" \
			BASE_DIR="$O" BUILD_DIR="$O/build" BR2_CONFIG="$O/.config" \
			"$script" "$arg" || die "$kind script $script failed"
	done
}

# shellcheck disable=SC2086 # space-separated lists, as in BR2_ variables
run_scripts post-build "$TARGET_DIR" ${POST_BUILD_SCRIPTS:-}

# Buildroot's fs/common.mk, on its copy of the target tree: every owner
# reset to root, then the post-fakeroot scripts run (under fakeroot there;
# as root here), so the owners, devices and xattrs they set are kept.
chown -h -R 0:0 "$TARGET_DIR"
# shellcheck disable=SC2086
run_scripts post-fakeroot "$TARGET_DIR" ${POST_FAKEROOT_SCRIPTS:-}

# What this build used, for support/check-drift.sh.
{
	for overlay in ${ROOTFS_OVERLAYS:-}; do echo "rootfs_overlay=$overlay"; done
	for script in ${POST_BUILD_SCRIPTS:-}; do echo "post_build_script=$script"; done
	for script in ${POST_FAKEROOT_SCRIPTS:-}; do echo "post_fakeroot_script=$script"; done
	for script in ${POST_IMAGE_SCRIPTS:-}; do echo "post_image_script=$script"; done
} >"$O/build/used-settings.rootfs"

step "cpio image"
find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc >"$BINARIES_DIR/rootfs.cpio.tmp"
mv "$BINARIES_DIR/rootfs.cpio.tmp" "$BINARIES_DIR/rootfs.cpio"
step "$(du -h "$BINARIES_DIR/rootfs.cpio" | cut -f1) $BINARIES_DIR/rootfs.cpio"

# Buildroot runs post-image scripts with BINARIES_DIR as argument.
# shellcheck disable=SC2086
run_scripts post-image "$BINARIES_DIR" ${POST_IMAGE_SCRIPTS:-}
