#!/bin/sh
# Host build of the root filesystem, in Buildroot's order:
#   skeleton (busybox-static + applet links) -> C library -> kernel modules
#   -> packages (puzzlefs, test tools, python3) -> rootfs overlays ->
#   post-build scripts -> owners reset to root -> post-fakeroot scripts ->
#   cpio image -> post-image scripts.
# Debian packages stand in for Buildroot's: the C library (Buildroot's
# toolchain installs its own into the target) and python3 are Debian's
# libc6 and python3.11, fetched with apt-get download (cached in
# $O/build/target-debs) and unpacked into the target tree.
# Usage: support/rootfs.sh <output-dir>; settings from the Makefile's exports.
set -eu

O=$1
REPO=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=$O/target
BINARIES_DIR=$O/images
step() { printf '>>> rootfs %s\n' "$*"; }
die() { printf 'rootfs: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "the host build needs root (device nodes, owners in the cpio)"

# The images are a function of this tree's files, the kernel modules, the
# builder, the shared fixtures and the settings below. When none changed since
# the last build and its images are as it left them, that build stands (`make
# test` right after `make` does not make them twice). ROOTFS_FORCE=1 builds
# anew; `make fuzz` does, as a build without PZT_FUZZ_SEED draws fresh mutants.
STAMP=$BINARIES_DIR/.rootfs-stamp
inputs_key() {
	{
		env | grep -E '^(PZT_|PUZZLEFS_FIXTURE=|PUZZLEFS_TEST_TOOLS=|HOST_PUZZLEFS_TEST_TOOLS=|PYTHON3=|ROOTFS_OVERLAYS=|POST_[A-Z]+_SCRIPTS=|HOST_DIR=)' | LC_ALL=C sort
		cat "$O/.config"
		(cd "$REPO" && find . \( -path ./.git -o -path './output*' -o -path "./${O#"$REPO"/}" \) -prune \
			-o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		(cd "$O/build/modules" && find . -printf '%p %l\n' -type f -exec sha256sum {} + | LC_ALL=C sort)
		sha256sum "$HOST_DIR/bin/puzzlefs"
		fixtures=${PUZZLEFS_FIXTURE:-$REPO/../shared/fixtures}
		[ -d "$fixtures" ] && (cd "$fixtures" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
	} | sha256sum | cut -d' ' -f1
}
# The images a build left: everything in BINARIES_DIR but the kernel, which
# support/linux.sh copies there on every build.
images_state() {
	(cd "$BINARIES_DIR" && find . -type f ! -name bzImage ! -name .rootfs-stamp -printf '%p %s %T@\n' | LC_ALL=C sort)
}
key=$(inputs_key)
if [ "${ROOTFS_FORCE:-0}" != 1 ] && [ -f "$BINARIES_DIR/rootfs.cpio" ] \
	&& [ "$(cat "$STAMP" 2>/dev/null)" = "$(printf '%s\n%s' "$key" "$(images_state)")" ]; then
	step "up to date: $BINARIES_DIR/rootfs.cpio (inputs unchanged since it was built; ROOTFS_FORCE=1 builds anew)"
	exit 0
fi
rm -f "$STAMP"

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

DEBS=$O/build/target-debs
mkdir -p "$DEBS"
# install_debs <package>...: the libraries, programs and python modules of
# Debian packages (lib/, lib64/, usr/bin/, usr/lib/python3*/; no docs, no
# gconv), as Buildroot's packages install them (its target-finalize drops
# documentation too).
install_debs() {
	stage=$O/build/target-debs.stage
	rm -rf "$stage"
	mkdir -p "$stage"
	for p in "$@"; do
		deb=
		for f in "$DEBS/$p"_*.deb; do [ -e "$f" ] && deb=$f; done
		if [ -z "$deb" ]; then
			(cd "$DEBS" && apt-get download -q "$p" >/dev/null 2>&1 || apt-get download "$p") || die "apt-get download $p failed"
			for f in "$DEBS/$p"_*.deb; do deb=$f; done
		fi
		dpkg-deb -x "$deb" "$stage"
	done
	for d in "$stage"/lib "$stage"/lib64 "$stage"/usr/bin "$stage"/usr/lib/python3*; do
		[ -d "$d" ] || continue
		mkdir -p "$TARGET_DIR/${d#"$stage"/}"
		cp -a "$d/." "$TARGET_DIR/${d#"$stage"/}/"
	done
	rm -rf "$stage"
}

step "C library (libc6, as Buildroot's toolchain installs its own)"
install_debs libc6

step "kernel modules"
cp -a "$O/build/modules/lib/modules/." lib/modules/
rm -f lib/modules/*/build lib/modules/*/source

step "puzzlefs (static)"
install -D -m 0755 "$HOST_DIR/bin/puzzlefs" usr/bin/puzzlefs

if [ -n "${PUZZLEFS_TEST_TOOLS:-}" ]; then
	# package/puzzlefs-test-tools: the guest-side test helpers, linked
	# against the C library installed above, as Buildroot links them.
	step "puzzlefs-test-tools"
	# <tool>:<directory>, as in package/puzzlefs-test-tools/puzzlefs-test-tools.mk.
	for t in pzk-tool:usr/libexec/pzk pzt-helper:usr/libexec/puzzlefs-test \
		pzt-difftest:usr/libexec/puzzlefs-test pzv-tool:usr/libexec/pzv; do
		name=${t%%:*} dir=${t#*:}
		mkdir -p "$dir"
		gcc -O2 -Wall -o "$dir/$name" "$REPO/test/samples/$name.c" || die "building $name failed"
	done
fi

if [ -n "${HOST_PUZZLEFS_TEST_TOOLS:-}" ]; then
	# host-puzzlefs-test-tools: pzt-helper for the build machine (the
	# corpus's manifests, post-fakeroot.d/50-*).
	step "host-puzzlefs-test-tools"
	mkdir -p "$HOST_DIR/bin"
	gcc -O2 -Wall -o "$HOST_DIR/bin/pzt-helper" "$REPO/test/samples/pzt-helper.c" || die "building pzt-helper failed"
fi

if [ -n "${PYTHON3:-}" ]; then
	step "python3 (python3.11-minimal and its libraries)"
	install_debs python3.11-minimal libpython3.11-minimal libexpat1 zlib1g
	ln -sf python3.11 usr/bin/python3
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
printf '%s\n%s' "$key" "$(images_state)" >"$STAMP"
