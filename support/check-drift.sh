#!/bin/sh
# check-drift.sh <output-dir>: the host build and the Buildroot description
# cannot drift apart.
#  1. output/.config is one of the committed configs/*_defconfig (no stale
#     copy); the checks below read that defconfig;
#  2. the settings the host build used (recorded by support/linux.sh and
#     support/rootfs.sh) are exactly those the defconfig names, read here
#     independently of the Makefile;
#  3. the kernel .config Buildroot would make (linux.defconfig + fragments,
#     olddefconfig) equals the host build's (allnoconfig + fragments).
# One line per check; exits 1 on any difference.
set -eu
O=$1
REPO=$(cd "$(dirname "$0")/.." && pwd)
DEFCONFIG=
for c in "$REPO"/configs/*_defconfig; do
	cmp -s "$c" "$O/.config" && DEFCONFIG=$c && break
done
. "$REPO/support/kmake.sh"
bad=0
ok() { echo "drift: ok: $*"; }
ko() { echo "drift: FAIL: $*" >&2; bad=1; }

if [ -n "$DEFCONFIG" ]; then
	ok "$O/.config is configs/$(basename "$DEFCONFIG")"
else
	ko "$O/.config is none of configs/*_defconfig (run: make puzzlefs_qemu_defconfig)"
	exit 1
fi

# value <SYMBOL>: the defconfig's string value, quotes stripped, the
# external's path variable expanded as Buildroot does.
value() {
	sed -n "s/^$1=\"\\(.*\\)\"\$/\\1/p" "$DEFCONFIG" \
		| sed "s|\$(BR2_EXTERNAL_PUZZLEFS_PATH)|$REPO/br2-external|g"
}
abs() { for p in $1; do realpath -m "$p"; done; }
enabled() { grep -qx "$1=y" "$DEFCONFIG"; }

expected=$(mktemp)
used=$(mktemp)
trap 'rm -f "$expected" "$used"; rm -rf "${kdir:-}"' EXIT
{
	for f in $(abs "$(value BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES)"); do echo "linux_fragment=$f"; done
	for d in $(abs "$(value BR2_GLOBAL_PATCH_DIR)"); do echo "global_patch_dir=$d"; done
	if enabled BR2_LINUX_KERNEL_EXT_PUZZLEFS; then echo "linux_ext=puzzlefs"; else echo "linux_ext="; fi
	for d in $(abs "$(value BR2_ROOTFS_OVERLAY)"); do echo "rootfs_overlay=$d"; done
	for s in $(abs "$(value BR2_ROOTFS_POST_BUILD_SCRIPT)"); do echo "post_build_script=$s"; done
	for s in $(abs "$(value BR2_ROOTFS_POST_FAKEROOT_SCRIPT)"); do echo "post_fakeroot_script=$s"; done
	for s in $(abs "$(value BR2_ROOTFS_POST_IMAGE_SCRIPT)"); do echo "post_image_script=$s"; done
} >"$expected"
cat "$O/build/used-settings.linux" "$O/build/used-settings.rootfs" | grep -v '^linux_version=' >"$used"
if diff -u "$expected" "$used" >/dev/null; then
	ok "host build used the defconfig's fragments, patch dir, linux extension, overlay, post-build/post-fakeroot/post-image scripts"
else
	ko "host build settings differ from the defconfig:"
	diff -u "$expected" "$used" | sed 's/^/    /' >&2 || true
fi

want=$(value BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE)
have=$(sed -n 's/^linux_version=//p' "$O/build/used-settings.linux")
case $have in
"$want") ok "kernel version $have" ;;
"${want%.*}".*) ok "kernel version: defconfig $want, host build $have (Debian's linux-source-6.12; only the sublevel differs)" ;;
*) ko "kernel version: defconfig $want, host build $have" ;;
esac

# 3. Buildroot's kernel configuration, made in a scratch copy of the
# kconfig inputs of the host build's (configured) tree.
LINUX_DIR=$(cat "$O/build/linux-dir")
base=$(abs "$(value BR2_LINUX_KERNEL_CUSTOM_CONFIG_FILE)")
if [ ! -f "$base" ]; then
	ko "$base missing (run: make linux-update-defconfig)"
else
	kdir=$(mktemp -d)
	(cd "$LINUX_DIR" && ARCH=x86_64 ./scripts/kconfig/merge_config.sh -m -O "$kdir" "$base" \
		$(abs "$(value BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES)")) >/dev/null 2>&1 \
		|| ko "merging $base with the fragments failed"
	kmake KCONFIG_CONFIG="$kdir/.config" olddefconfig >/dev/null 2>&1 \
		|| ko "olddefconfig of Buildroot's configuration failed"
	strip() { grep -v -E '^# (Automatically generated|Linux/|Compiler:)' "$1"; }
	strip "$LINUX_DIR/.config" >"$kdir/host.config"
	strip "$kdir/.config" >"$kdir/br.config"
	if diff "$kdir/host.config" "$kdir/br.config" >"$kdir/diff"; then
		ok "kernel .config: Buildroot's (linux.defconfig + fragments) = host build's (allnoconfig + fragments)"
	else
		ko "kernel .config differs between Buildroot's and the host build's (run: make linux-update-defconfig):"
		head -20 "$kdir/diff" | sed 's/^/    /' >&2
	fi
fi
exit $bad
