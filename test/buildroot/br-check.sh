#!/bin/bash
# br-check.sh <buildroot-dir> <work-dir> [<host-build output dir>]: the
# Buildroot description of the appliance, checked by Buildroot's own code
# (a release or a checkout; nothing here downloads):
#  1. utils/check-package on every Buildroot file of this tree: 0 warnings;
#  2. each configs/*_defconfig loads through BR2_EXTERNAL with every BR2_
#     line kept, and savedefconfig gives it back unchanged (it is minimal);
#  3. list-defconfigs shows each of them;
#  4. printvars: the linux, puzzlefs and host-puzzlefs variables say what
#     the host build used (kernel version, fragments, patch dir, linux
#     extension, overlay, post scripts, package sources and versions);
#  5. show-info: every download of the configuration has a hash in the
#     package's hash files, the kernel crates are Cargo.lock's, and the
#     licence files of puzzlefs are hashed;
#  6. support/testing/run-tests --list finds the runtime test;
#  7. the kernel crates, vendored offline from .crate files as the linux
#     extension does, equal the host build's kernel tree.
# One line per check ("br-check: ok: ..." / "br-check: FAIL: ..."); exits 1
# on any failure. Buildroot's make output goes to <work-dir>/*.log. A run
# whose inputs (this tree's Buildroot files, overlay, cases, the host build's
# used settings, Buildroot itself) are those of the last passing run prints
# that run's report instead of redoing it (BR_CHECK_FORCE=1 redoes it).
set -u
BR=$(cd "$1" && pwd) || exit 1
W=$2
HOSTO=${3:-}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
EXT=$REPO/br2-external
PENDING=$REPO/test/buildroot/hashes-pending.txt
# Debian's python3 with python3-magic and python3-flake8 (support/deps.sh);
# the first python3 on PATH may be another interpreter without them.
PYTHON=${BR_CHECK_PYTHON:-/usr/bin/python3}
mkdir -p "$W"
W=$(cd "$W" && pwd)
bad=0
ok() { echo "br-check: ok: $*"; }
ko() { echo "br-check: FAIL: $*"; bad=1; }

# var <NAME>: its value in printvars' output (section 4).
var() { sed -n "s/^$1='\\(.*\\)'\$/\\1/p" "$W/printvars" | tr -s ' \t' ' ' | sed 's/^ //; s/ $//'; }

# brmake <name> <make args...>: Buildroot with this tree, output in $W/<name>.
brmake() {
	local name=$1
	shift
	make -s -C "$BR" BR2_EXTERNAL="$EXT" O="$W/$name" "$@"
}

echo ">>> br-check: Buildroot $(sed -n 's/^export BR2_VERSION := //p' "$BR/Makefile") in $BR"

# The sections run in parallel (each is several Buildroot make runs, which
# spend seconds parsing every package); their lines are printed in order.
defconfigs=$(cd "$REPO/configs" && ls -- *_defconfig)
main=puzzlefs_qemu_defconfig
start=$(date +%s)

# The result depends only on these inputs: when none changed since a run
# that passed, that run's report stands (printed again, marked as such).
key=$( {
	echo "$BR $(sed -n 's/^export BR2_VERSION := //p' "$BR/Makefile") $PYTHON"
	(cd "$BR" && cat Makefile package/pkg-*.mk linux/linux.mk utils/check-package utils/checkpackagelib/*.py \
		support/download/check-hash support/testing/run-tests package/busybox/busybox.config) | sha256sum
	cd "$REPO" && find br2-external configs board overlay package/puzzlefs/*.* package/puzzlefs/LICENSE* \
		package/puzzlefs/kernel/crates/Cargo.lock test/cases test/debug test/lib.tcl test/samples \
		test/buildroot support/testing .flake8 -type f -o -type l 2>/dev/null | LC_ALL=C sort | xargs sha256sum 2>/dev/null
	[ -n "$HOSTO" ] && cat "$HOSTO"/build/used-settings.* 2>/dev/null
	# what section 7 compares with
	kd=$(cat "$HOSTO/build/linux-dir" 2>/dev/null) && [ -d "$kd/rust" ] &&
		(cd "$kd/rust" && find capnp puzzlefs_format -type f 2>/dev/null | LC_ALL=C sort | xargs sha256sum)
	/bin/busybox --list 2>/dev/null
	ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/ 2>/dev/null
} | sha256sum | cut -d' ' -f1)
if [ -z "${BR_CHECK_FORCE:-}" ] && [ "$(cat "$W/passed.key" 2>/dev/null)" = "$key" ] && [ -s "$W/passed.out" ]; then
	echo "br-check: inputs unchanged since the run that passed at $(date -u -r "$W/passed.out" +%H:%M:%SZ) (key ${key%"${key#????????????}"}): its report:"
	cat "$W/passed.out"
	exit 0
fi
rm -f "$W/passed.key" "$W/passed.out"

section1() {
# --- 1. check-package -------------------------------------------------------
# Every file of the tree that Buildroot reads: Kconfig, make, hash, the
# defconfigs, the glue patches, and the scripts Buildroot runs.
files=$(cd "$REPO" && ls -d br2-external/external.desc br2-external/Config.in br2-external/external.mk \
	br2-external/linux/* package/*/Config.in* package/*/*.mk package/*/*.hash \
	package/puzzlefs/vendor-crates.sh package/puzzlefs/kernel/prepare-tree.sh \
	configs/*_defconfig board/qemu/patches/*/* board/qemu/*.sh board/qemu/post-*.d/* \
	support/testing/tests/*/*.py \
	2>/dev/null)
if ! "$PYTHON" -c 'import magic, flake8' 2>/dev/null; then
	ko "check-package needs python-magic and flake8 for $PYTHON (run: make deps)"
else
	# shellcheck disable=SC2086 # one word per file
	(cd "$REPO" && "$PYTHON" "$BR/utils/check-package" -b $files) >"$W/check-package.log" 2>&1
	warnings=$(sed -n 's/^\([0-9]*\) warnings generated$/\1/p' "$W/check-package.log")
	if [ "$warnings" = 0 ]; then
		ok "check-package: 0 warnings in $(echo "$files" | wc -w) files"
	else
		ko "check-package: ${warnings:-?} warnings:"
		sed 's/^/    /' "$W/check-package.log"
	fi
fi
}

# --- 2. defconfigs load, and are what savedefconfig writes ------------------
check_defconfig() {
	local d=$1 lost
	if ! brmake "$d" "$d" >"$W/$d.log" 2>&1; then
		ko "$d does not load (see $W/$d.log)"
		return
	fi
	lost=$(grep -v '^$' "$REPO/configs/$d" | while IFS= read -r line; do
		grep -qxF -- "$line" "$W/$d/.config" || echo "$line"
	done)
	if [ -z "$lost" ]; then
		ok "$d: every line kept in .config"
	else
		ko "$d: lines Buildroot dropped or changed:"
		echo "$lost" | sed 's/^/    /'
	fi
	brmake "$d" savedefconfig BR2_DEFCONFIG="$W/$d.saved" >>"$W/$d.log" 2>&1
	if diff -u "$REPO/configs/$d" "$W/$d.saved" >"$W/$d.diff"; then
		ok "$d: savedefconfig writes it back unchanged"
	else
		ko "$d: differs from what savedefconfig writes:"
		sed 's/^/    /' "$W/$d.diff"
	fi
}

section3() {
# --- 3. list-defconfigs ------------------------------------------------------
brmake list list-defconfigs >"$W/list-defconfigs.log" 2>&1
for d in $defconfigs; do
	# Buildroot prints "  <name> - Build for <name>" under the external's heading.
	if sed -n '/^External configs in "PuzzleFS/,/^$/p' "$W/list-defconfigs.log" | grep -q "^  $d "; then
		ok "list-defconfigs shows $d"
	else
		ko "list-defconfigs does not show $d (see $W/list-defconfigs.log)"
	fi
done
}

section45() {
# --- 2 (main defconfig), 4. printvars against what the host build used --------------------------
main=puzzlefs_qemu_defconfig
check_defconfig $main
brmake "$main" printvars VARS='LINUX_VERSION LINUX_KCONFIG_FRAGMENT_FILES LINUX_KCONFIG_FILE
	LINUX_PRE_PATCH_HOOKS LINUX_EXTENSIONS BR2_GLOBAL_PATCH_DIR BR2_ROOTFS_OVERLAY
	BR2_ROOTFS_POST_BUILD_SCRIPT BR2_ROOTFS_POST_FAKEROOT_SCRIPT BR2_ROOTFS_POST_IMAGE_SCRIPT
	PUZZLEFS_% HOST_PUZZLEFS_% LINUX_HASH_FILES LINUX_HEADERS_HASH_FILES BUSYBOX_KCONFIG_FRAGMENT_FILES
	LINUX_MAKE_FLAGS LINUX_POST_CONFIGURE_HOOKS LINUX_FINAL_DEPENDENCIES LINUX_KCONFIG_DEPENDENCIES
	BR2_PACKAGE_HOST_LLD' \
	QUOTED_VARS=YES >"$W/printvars" 2>"$W/printvars.log" || ko "printvars failed (see $W/printvars.log)"
abs() { local p; for p in $1; do realpath -m "$p"; done; }

used=$W/used-settings
if [ -n "$HOSTO" ] && [ -f "$HOSTO/build/used-settings.linux" ] && [ -f "$HOSTO/build/used-settings.rootfs" ]; then
	cat "$HOSTO/build/used-settings.linux" "$HOSTO/build/used-settings.rootfs" >"$used"
	from="the host build ($HOSTO)"
else
	# No host build to compare with (a Buildroot-only checkout): compare
	# with the defconfig as the host build's Makefile reads it.
	: >"$used"
	from=""
	echo "br-check: note: no host build in ${HOSTO:-?}: printvars compared with nothing but Buildroot's own values"
fi
settings() { sed -n "s/^$1=//p" "$used"; }
# same <what> <Buildroot's value> <host build key>
same() {
	local what=$1 br=$2 key=$3 host
	[ -n "$from" ] || return 0
	host=$(settings "$key" | tr '\n' ' ' | sed 's/ $//')
	if [ "$br" = "$host" ]; then
		ok "printvars $what = $from: ${br:-(none)}"
	else
		ko "printvars $what: Buildroot '$br', $from '$host'"
	fi
}
same "LINUX_VERSION" "$(var LINUX_VERSION)" linux_version
same "LINUX_KCONFIG_FRAGMENT_FILES" "$(abs "$(var LINUX_KCONFIG_FRAGMENT_FILES)" | tr '\n' ' ' | sed 's/ $//')" linux_fragment
same "BR2_GLOBAL_PATCH_DIR" "$(abs "$(var BR2_GLOBAL_PATCH_DIR | tr -d '"')" | tr '\n' ' ' | sed 's/ $//')" global_patch_dir
case " $(var LINUX_PRE_PATCH_HOOKS) " in
*" PUZZLEFS_PREPARE_KERNEL "*) ext=puzzlefs ;;
*) ext= ;;
esac
same "LINUX_PRE_PATCH_HOOKS (linux extension)" "$ext" linux_ext
same "BR2_ROOTFS_OVERLAY" "$(abs "$(var BR2_ROOTFS_OVERLAY | tr -d '"')" | tr '\n' ' ' | sed 's/ $//')" rootfs_overlay
for s in POST_BUILD POST_FAKEROOT POST_IMAGE; do
	key=$(echo "${s}_script" | tr 'A-Z' 'a-z')
	same "BR2_ROOTFS_${s}_SCRIPT" "$(abs "$(var "BR2_ROOTFS_${s}_SCRIPT" | tr -d '"')" | tr '\n' ' ' | sed 's/ $//')" "$key"
done

# The busybox fragment has every applet the overlay and the cases call.
frag=$(abs "$(var BUSYBOX_KCONFIG_FRAGMENT_FILES)")
if [ "$frag" != "$REPO/board/qemu/busybox.fragment" ]; then
	ko "printvars BUSYBOX_KCONFIG_FRAGMENT_FILES '$frag', want $REPO/board/qemu/busybox.fragment"
elif /bin/busybox --list >"$W/applets" 2>/dev/null && [ -s "$W/applets" ]; then
	if "$PYTHON" "$REPO/test/buildroot/check-applets.py" "$frag" "$W/applets" \
		"$BR/package/busybox/busybox.config" >"$W/applets.log" 2>&1; then
		ok "busybox fragment: $(sed -n 's/^applets: \([0-9]* applets called\):.*/\1/p' "$W/applets.log"), all in it ($(sed -n 's/^applets: the fragment turns on .*: //p' "$W/applets.log") beyond Buildroot's default)"
	else
		ko "busybox fragment:"
		sed 's/^/    /' "$W/applets.log"
	fi
else
	ko "busybox fragment: no applet list (/bin/busybox --list; Debian's busybox-static, make deps)"
fi

# The package: built from this repository's sources, at the workspace's version.
want_site=$REPO/package/puzzlefs
ws_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$REPO/package/puzzlefs/Cargo.toml")
ws_license=$(sed -n '/^\[workspace.package\]/,/^\[/s/^license = "\(.*\)"/\1/p' "$REPO/package/puzzlefs/Cargo.toml")
for p in PUZZLEFS HOST_PUZZLEFS; do
	[ "$(realpath -m "$(var ${p}_SITE)")" = "$want_site" ] && [ "$(var ${p}_SITE_METHOD)" = local ] \
		&& ok "printvars ${p}_SITE: $want_site (local)" || ko "printvars ${p}_SITE: '$(var ${p}_SITE)' ($(var ${p}_SITE_METHOD)), want $want_site (local)"
	# Buildroot names the host variant of a local site "custom".
	case $p,$(var ${p}_VERSION) in
	*,"$ws_version"|HOST_PUZZLEFS,custom) ok "printvars ${p}_VERSION: $(var ${p}_VERSION) (Cargo.toml: $ws_version)" ;;
	*) ko "printvars ${p}_VERSION '$(var ${p}_VERSION)', Cargo.toml says $ws_version" ;;
	esac
	# The cargo infrastructure appends a note on vendored licences.
	case "$(var ${p}_LICENSE)" in
	"$(echo "$ws_license" | sed 's/ OR / or /')"*) ok "printvars ${p}_LICENSE matches Cargo.toml ($ws_license)" ;;
	*) ko "printvars ${p}_LICENSE '$(var ${p}_LICENSE)', Cargo.toml says $ws_license" ;;
	esac
done

# The tree's other packages take puzzlefs's version. Buildroot expands a
# package's version when its .mk is included (in name order, puzzlefs-* before
# puzzlefs/): an empty one names its build directory and stamps "<pkg>-".
for p in PUZZLEFS_TEST_TOOLS HOST_PUZZLEFS_TEST_TOOLS HOST_PUZZLEFS_CRATES; do
	case $(var ${p}_VERSION) in
	"$ws_version"|custom) ok "printvars ${p}_VERSION: $(var ${p}_VERSION)" ;;
	*) ko "printvars ${p}_VERSION '$(var ${p}_VERSION)', want $ws_version (puzzlefs's)" ;;
	esac
done

# The linux extension as Buildroot evaluates it.
hostcflags=$(var LINUX_MAKE_FLAGS | grep -o 'HOSTCFLAGS="[^"]*"')
case $hostcflags in
*-isystem*) case $hostcflags in *" -I"*|*'"-I'*) ko "LINUX_MAKE_FLAGS: -I left in $hostcflags" ;; *) ok "LINUX_MAKE_FLAGS: $hostcflags" ;; esac ;;
*) ko "LINUX_MAKE_FLAGS: no -isystem in '$hostcflags'" ;;
esac
case " $(var LINUX_POST_CONFIGURE_HOOKS) " in
*" PUZZLEFS_CHECK_KERNEL_CONFIG "*) ok "LINUX_POST_CONFIGURE_HOOKS has PUZZLEFS_CHECK_KERNEL_CONFIG" ;;
*) ko "LINUX_POST_CONFIGURE_HOOKS lacks PUZZLEFS_CHECK_KERNEL_CONFIG: $(var LINUX_POST_CONFIGURE_HOOKS)" ;;
esac
[ "$(var BR2_PACKAGE_HOST_LLD)" = y ] && ok "BR2_PACKAGE_HOST_LLD=y (selected by the extension)" \
	|| ko "BR2_PACKAGE_HOST_LLD is '$(var BR2_PACKAGE_HOST_LLD)'"
for dep in host-clang host-lld host-llvm host-rust-bindgen host-rustc; do
	case " $(var LINUX_KCONFIG_DEPENDENCIES) " in
	*" $dep "*) ;;
	*) ko "linux: $dep is not a kconfig dependency (LINUX_KCONFIG_DEPENDENCIES)" ;;
	esac
done

# The kernel crates Buildroot downloads are exactly Cargo.lock's.
lock=$REPO/package/puzzlefs/kernel/crates/Cargo.lock
locked=$(awk '$1 == "name" { n = $3 } $1 == "version" { v = $3 } $1 == "checksum" { gsub(/"/, "", n); gsub(/"/, "", v); print n "@" v }' "$lock" | sort | tr '\n' ' ')
crates=$(var PUZZLEFS_KERNEL_CRATES | tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ')
[ "$crates" = "$locked" ] && ok "printvars PUZZLEFS_KERNEL_CRATES = kernel/crates/Cargo.lock: $crates" \
	|| ko "printvars PUZZLEFS_KERNEL_CRATES '$crates', kernel/crates/Cargo.lock has '$locked'"

# Each crate's hash line is its lock file's checksum (check-hash below
# compares the files themselves where cargo's cache has them).
for pair in "package/puzzlefs/kernel/crates/Cargo.lock:board/qemu/patches/linux/linux.hash" \
	"package/puzzlefs/Cargo.lock:package/puzzlefs-crates/puzzlefs-crates.hash"; do
	lockf=${pair%%:*}
	hashf=${pair#*:}
	missing=$(awk '$1 == "[[package]]" { n = v = s = "" }
		$1 == "name" { n = $3 } $1 == "version" { v = $3 } $1 == "source" { s = $3 }
		$1 == "checksum" && s ~ /^"registry\+/ { gsub(/"/, "", n); gsub(/"/, "", v); gsub(/"/, "", $3);
			print "sha256  " $3 "  " n "-" v ".crate" }' "$REPO/$lockf" |
		while IFS= read -r line; do grep -qxF -- "$line" "$REPO/$hashf" || echo "$line"; done)
	if [ -z "$missing" ]; then
		ok "$hashf: every crate of $lockf with its checksum"
	else
		ko "$hashf lacks these lines of $lockf:"
		printf '%s\n' "$missing" | sed 's/^/    /'
	fi
done

# --- 5. every download has a hash --------------------------------------------
# Buildroot's own support/download/check-hash, with the hash files
# show-info lists for each package, as the download step would run it
# (BR2_DOWNLOAD_FORCE_CHECK_HASHES: no exceptions). Files at hand are
# checked for real: the kernel crates (cargo's cache) and puzzlefs's
# licence files; for the others an empty stand-in tells "has a hash"
# (exit 2, wrong hash) from "no hash" (3) and "no hash file" (0).
if brmake "$main" show-info >"$W/show-info.json" 2>"$W/show-info.log"; then
	"$PYTHON" -c '
import json, sys
for name, p in sorted(json.load(open(sys.argv[1])).items()):
    if p.get("type") in ("target", "host"):
        for d in p.get("downloads", []):
            print(name, d["source"], p.get("dl_dir", name), " ".join(p.get("hashes", [])))
' "$W/show-info.json" >"$W/downloads.txt"
	dummy=$W/dummy
	mkdir -p "$dummy"
	: >"$W/hashes.txt"
	crate_cache=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/ 2>/dev/null | head -n1)
	while read -r name src _dldir hfiles; do
		# Buildroot's hash file paths are relative to its top directory.
		hf=$(for h in $hfiles; do case $h in /*) echo "$h" ;; *) echo "$BR/$h" ;; esac; done)
		case $name in puzzlefs|host-puzzlefs|puzzlefs-test-tools|host-puzzlefs-test-tools) continue ;; esac # local site: nothing downloaded
		if [ -n "$crate_cache" ] && [ -f "$crate_cache$src" ]; then
			file=$crate_cache$src
		else
			file=$dummy/$src
			: >"$file"
		fi
		# shellcheck disable=SC2086 # one word per hash file
		(cd "$BR" && BR_NO_CHECK_HASH_FOR='' support/download/check-hash "$file" "$src" $hf) >"$W/check-hash.out" 2>&1
		rc=$?
		case $file,$rc in
		"$dummy"/*,2) echo "HASH $name $src" ;;
		"$dummy"/*,3) echo "NOHASH $name $src: no hash in $hf" ;;
		"$dummy"/*,0) echo "NOHASH $name $src: no hash file" ;;
		*,0) echo "CHECKED $name $src: $(grep -o 'OK.*' "$W/check-hash.out")" ;;
		*) echo "BAD $name $src: $(cat "$W/check-hash.out")" ;;
		esac
	done <"$W/downloads.txt" >>"$W/hashes.txt"
	# puzzlefs: a local site; legal-info checks its licence files' hashes.
	for lic in $(var PUZZLEFS_LICENSE_FILES); do
		# shellcheck disable=SC2046 # one word per hash file
		if (cd "$BR" && support/download/check-hash "$REPO/package/puzzlefs/$lic" "$lic" \
			$(sed -n 's/^puzzlefs [^ ]* [^ ]* //p' "$W/downloads.txt")) >"$W/check-hash.out" 2>&1; then
			echo "CHECKED puzzlefs $lic: $(grep -o 'OK.*' "$W/check-hash.out")"
		else
			echo "BAD puzzlefs $lic: $(cat "$W/check-hash.out")"
		fi
	done >>"$W/hashes.txt"
	# Pending: known to lack a hash (reason in hashes-pending.txt).
	pend() { grep -v '^#' "$PENDING" 2>/dev/null | cut -d' ' -f1 | grep -qxF -- "$1"; }
	fails=$(while read -r kind name src rest; do
		src=${src%:}
		case $kind in
		NOHASH) if pend "$src"; then echo "br-check: note: hash pending for $src ($name): $(grep "^$src " "$PENDING" | cut -d' ' -f2-)" >&2
			else echo "$name: $src: $rest"; fi ;;
		BAD) echo "$name: $src $rest" ;;
		HASH|CHECKED) pend "$src" && echo "$src has a hash now: remove it from test/buildroot/hashes-pending.txt" ;;
		esac
	done <"$W/hashes.txt")
	n=$(wc -l <"$W/hashes.txt")
	n_real=$(grep -c '^CHECKED' "$W/hashes.txt")
	if [ -z "$fails" ]; then
		ok "show-info: $n sources, each with a hash (Buildroot's check-hash; $n_real checked against the real file; list: $W/hashes.txt)"
	else
		ko "show-info: sources without a (right) hash:"
		echo "$fails" | sed 's/^/    /'
	fi
	# RUST_LIB_SRC comes from the file host-rust downloads: same hash line.
	rs=$(var PUZZLEFS_RUST_SRC)
	if [ -n "$rs" ] && grep -qxF "$(grep " $rs\$" "$BR/package/rust/rust.hash")" "$REPO/board/qemu/patches/linux/linux.hash"; then
		ok "linux.hash: $rs as in Buildroot's package/rust/rust.hash"
	else
		ko "linux.hash: no line for '$rs' equal to Buildroot's package/rust/rust.hash"
	fi
else
	ko "show-info failed (see $W/show-info.log)"
fi
}

section6() {
# --- 6. the runtime test is found by Buildroot's run-tests -------------------
# run-tests discovers tests under its own directory only: a scratch copy of
# it whose tests/ links Buildroot's test directories and this tree's
# support/testing/tests/puzzlefs (what a user links in; see the test).
T=$W/testing
rm -rf "$T"
mkdir -p "$T/tests"
cp "$BR/support/testing/run-tests" "$T/"
for e in "$BR"/support/testing/*; do
	case ${e##*/} in tests|run-tests) ;; *) ln -s "$e" "$T/" ;; esac
done
for e in "$BR"/support/testing/tests/*; do ln -s "$e" "$T/tests/"; done
ln -s "$REPO/support/testing/tests/puzzlefs" "$T/tests/puzzlefs"
"$PYTHON" "$T/run-tests" --list >"$W/run-tests-list.log" 2>&1
if grep -q '^test_run (tests\.puzzlefs\.test_puzzlefs\.TestPuzzleFS[.a-z_]*) \.\.\. ok$' "$W/run-tests-list.log"; then
	ok "run-tests --list finds tests.puzzlefs.test_puzzlefs.TestPuzzleFS.test_run ($(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$W/run-tests-list.log") tests in all)"
else
	ko "run-tests --list does not find TestPuzzleFS (see $W/run-tests-list.log)"
fi
}

section7() {
# --- 7. the kernel crates, vendored offline as the extension does -----------
# prepare-tree.sh with PUZZLEFS_KERNEL_CRATES_DL (Buildroot's linux download
# directory) on the .crate files at hand must give the host build's kernel
# tree the same rust/capnp and rust/puzzlefs_format.
linux_dir=$(cat "$HOSTO/build/linux-dir" 2>/dev/null)
cache=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/ 2>/dev/null | head -n1)
if [ -z "$linux_dir" ] || [ ! -d "$linux_dir/rust/capnp" ]; then
	echo "br-check: note: no host-built kernel tree: the offline crate vendoring is not compared"
	return
fi
dl=$W/kernel-crates-dl
rm -rf "$dl" "$W/ktree"
mkdir -p "$dl" "$W/ktree"
for c in $(var PUZZLEFS_KERNEL_CRATES); do
	f=${c%@*}-${c#*@}.crate
	[ -f "$cache$f" ] && cp "$cache$f" "$dl/"
done
: >"$W/ktree/Makefile"
if PUZZLEFS_KERNEL_CRATES_DL=$dl PUZZLEFS_KERNEL_CACHE=$W/kernel-crates-cache \
	"$REPO/package/puzzlefs/kernel/prepare-tree.sh" "$W/ktree" crates >"$W/ktree.log" 2>&1; then
	for d in capnp puzzlefs_format; do
		if diff -r "$W/ktree/rust/$d" "$linux_dir/rust/$d" >"$W/ktree-$d.diff" 2>&1; then
			ok "kernel crates vendored offline from .crate files: rust/$d = the host build's"
		else
			ko "kernel crates vendored offline: rust/$d differs from $linux_dir/rust/$d (see $W/ktree-$d.diff)"
		fi
	done
else
	ko "prepare-tree.sh with PUZZLEFS_KERNEL_CRATES_DL failed (see $W/ktree.log)"
fi
}

section1 >"$W/s1.out" 2>&1 &
for d in $defconfigs; do
	[ "$d" = $main ] || check_defconfig "$d" >"$W/s2-$d.out" 2>&1 &
done
section3 >"$W/s3.out" 2>&1 &
section45 >"$W/s45.out" 2>&1 &
section6 >"$W/s6.out" 2>&1 &
wait
# Needs printvars (section 4); runs after the others.
section7 >"$W/s7.out" 2>&1
cat "$W/s1.out" "$W"/s2-*.out "$W/s45.out" "$W/s3.out" "$W/s6.out" "$W/s7.out" >"$W/report.out"
grep -q '^br-check: FAIL' "$W/report.out" && bad=1
echo "br-check: $([ $bad = 0 ] && echo 'all passed' || echo 'FAILED') in $(($(date +%s) - start)) s" >>"$W/report.out"
cat "$W/report.out"
if [ $bad = 0 ]; then
	mv "$W/report.out" "$W/passed.out"
	echo "$key" >"$W/passed.key"
fi
exit $bad
