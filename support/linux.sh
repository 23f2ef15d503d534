#!/bin/sh
# Host build of the appliance kernel, doing what Buildroot's linux package does:
#   extract -> linux extension (copy sources in) -> global patch dir -> configure -> build.
# Usage: support/linux.sh <output-dir> [configure]
#   configure: stop once the tree is extracted, patched and configured.
# Reads the settings exported by the top-level Makefile from the defconfig:
#   LINUX_FRAGMENTS  space-separated kernel config fragments
#   LINUX_PATCH_DIRS BR2_GLOBAL_PATCH_DIR entries (patches in <dir>/linux/*.patch)
#   LINUX_EXT_SCRIPT the linux extension's prepare script (may be empty)
# Re-running is incremental: the tree is re-extracted only when the kernel
# version or a patch changed, reconfigured only when a fragment changed.
set -eu

O=$1
MODE=${2:-build}
TARBALL=/usr/src/linux-source-6.12.tar.xz
. "$(dirname "$0")/kmake.sh"

step() { printf '>>> linux %s\n' "$*"; }
die() { printf 'linux: %s\n' "$*" >&2; exit 1; }

[ -r "$TARBALL" ] || die "$TARBALL missing (run: make deps)"
version=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null | sed 's/-.*//')
[ -n "$version" ] || die "cannot read the version of linux-source-6.12"
LINUX_DIR=$O/build/linux-$version
mkdir -p "$O/build" "$O/images"
LOG=$O/build/linux.log

# Global patch dirs: every <dir>/linux/*.patch, in dir order then name order,
# as Buildroot's apply-patches does for BR2_GLOBAL_PATCH_DIR.
patches=""
for d in ${LINUX_PATCH_DIRS:-}; do
	for p in "$d"/linux/*.patch; do
		[ -e "$p" ] && patches="$patches $p"
	done
done

patch_sum=$( { echo "$version"; for p in $patches; do cat "$p"; done; } | sha256sum | cut -d' ' -f1)
APPLIED=$LINUX_DIR/.applied-patches

apply_patches() {
	rm -rf "$APPLIED"
	mkdir -p "$APPLIED"
	n=0
	for p in $patches; do
		step "applying $(basename "$p")"
		patch -g0 -p1 -E -N -t --no-backup-if-mismatch -d "$LINUX_DIR" -i "$p" >"$LOG" 2>&1 \
			|| die "patch $p failed (see $LOG)"
		# Keep what was applied, so a changed series can be swapped in
		# place (only the touched files get new times) instead of
		# re-extracting 80k files and rebuilding everything.
		n=$((n + 1))
		cp "$p" "$APPLIED/$(printf %03d $n)-$(basename "$p")"
	done
	echo "$patch_sum" >"$LINUX_DIR/.stamp_patched"
	rm -f "$LINUX_DIR/.stamp_configured"
}

# unapply_patches: reverse the recorded series, newest first; fails if the
# tree does not take it cleanly.
unapply_patches() {
	[ -d "$APPLIED" ] || return 1
	for p in $(ls -r "$APPLIED"); do
		patch -R -g0 -p1 -E -t --no-backup-if-mismatch -d "$LINUX_DIR" -i "$APPLIED/$p" >"$LOG" 2>&1 || return 1
	done
	rm -rf "$APPLIED"
}

run_extension() {
	if [ -n "${LINUX_EXT_SCRIPT:-}" ]; then
		# The script only rewrites files whose content changed, so
		# kbuild rebuilds only those.
		"$LINUX_EXT_SCRIPT" "$LINUX_DIR" >>"$LOG" 2>&1 || die "linux extension failed (see $LOG)"
	fi
}

if [ "$(cat "$LINUX_DIR/.stamp_patched" 2>/dev/null)" != "$patch_sum" ]; then
	old_version=$(cat "$LINUX_DIR/.stamp_version" 2>/dev/null || true)
	if [ "$old_version" = "$version" ] && unapply_patches; then
		step "patches changed: swapping the series in place"
	else
		step "extracting $version"
		rm -rf "$LINUX_DIR"
		mkdir -p "$LINUX_DIR"
		tar -xJf "$TARBALL" -C "$LINUX_DIR" --strip-components=1
		echo "$version" >"$LINUX_DIR/.stamp_version"
	fi
	step "linux extension${LINUX_EXT_SCRIPT:+: $LINUX_EXT_SCRIPT}"
	: >"$LOG"
	run_extension
	apply_patches
else
	: >"$LOG"
	run_extension
fi

conf_sum=$( { echo "$patch_sum"; for f in ${LINUX_FRAGMENTS:-}; do cat "$f"; done; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$LINUX_DIR/.stamp_configured" 2>/dev/null)" != "$conf_sum" ]; then
	step "configuring: allnoconfig +${LINUX_FRAGMENTS:+ }$(for f in ${LINUX_FRAGMENTS:-}; do printf '%s ' "$(basename "$f")"; done)"
	kmake allnoconfig >"$LOG" 2>&1 || die "allnoconfig failed (see $LOG)"
	# shellcheck disable=SC2086
	(cd "$LINUX_DIR" && ARCH=x86_64 ./scripts/kconfig/merge_config.sh -m .config ${LINUX_FRAGMENTS:-}) >>"$LOG" 2>&1 \
		|| die "merging fragments failed (see $LOG)"
	kmake olddefconfig >>"$LOG" 2>&1 || die "olddefconfig failed (see $LOG)"
	"$(dirname "$0")/check-kconfig.sh" "$LINUX_DIR/.config" ${LINUX_FRAGMENTS:-} \
		|| die "a fragment option did not survive olddefconfig (see above)"
	echo "$conf_sum" >"$LINUX_DIR/.stamp_configured"
fi

echo "$LINUX_DIR" >"$O/build/linux-dir"
[ "$MODE" = configure ] && exit 0

step "building bzImage and modules (log: $LOG)"
start=$(date +%s)
# One progress line every 250 build steps; the full output goes to the log.
if ! { kmake -j"$(nproc)" bzImage modules 2>&1; echo "rc=$?" >"$LOG.rc"; } \
	| tee "$LOG" | awk '/^  [A-Z]/ { n++; if (n % 250 == 0) printf "    ... %d build steps\n", n; fflush() }'; then
	:
fi
if [ "$(cat "$LOG.rc")" != "rc=0" ]; then
	grep -E 'error|Error' "$LOG" | head -20 >&2 || true
	die "kernel build failed (see $LOG)"
fi
step "built in $(( $(date +%s) - start ))s"

rm -rf "$O/build/modules"
kmake modules_install INSTALL_MOD_PATH="$O/build/modules" INSTALL_MOD_STRIP=1 DEPMOD=/usr/sbin/depmod >>"$LOG" 2>&1 \
	|| die "modules_install failed (see $LOG)"
cp "$LINUX_DIR/arch/x86/boot/bzImage" "$O/images/bzImage"
echo "$LINUX_DIR" >"$O/build/linux-dir"
# What this build used, for support/check-drift.sh.
{
	echo "linux_version=$version"
	for f in ${LINUX_FRAGMENTS:-}; do echo "linux_fragment=$f"; done
	for d in ${LINUX_PATCH_DIRS:-}; do echo "global_patch_dir=$d"; done
	echo "linux_ext=${LINUX_EXT_SCRIPT:+puzzlefs}"
} >"$O/build/used-settings.linux"
