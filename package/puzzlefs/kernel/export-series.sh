#!/bin/sh
# export-series.sh [--build <config>] <out-dir>: writes the PuzzleFS kernel
# series as `git format-patch` files into <out-dir>.
#
#  1. A git repository holding the pristine kernel (extracted from
#     /usr/src/linux-source-6.12.tar.xz) is created once and kept in the work
#     directory (default <out-dir>/../build/kernel-series; KERNEL_SERIES_WORK).
#  2. The src/ files as they are after each commit are derived from src/ (the
#     state after the last one), backwards: the state before a stanza is the
#     state after it with the stanza's `edits:` (unified diffs in series.d/)
#     reverse-applied with `patch -R --fuzz=0` (failing if one no longer
#     applies exactly) and its `files:` removed. Then, forwards, for each
#     stanza: the src/ files of its state are copied into the tree (only those
#     that changed), its crates put in with prepare-tree.sh, its glue patches
#     applied, and the result committed with the stanza's subject and body
#     and a Signed-off-by. The last commit must hold src/ exactly.
#  3. `git format-patch` writes <out-dir>/NNNN-*.patch and the cover letter
#     0000-cover-letter.patch, its subject and text from cover-letter
#     (first line: subject; the rest: the text).
#  4. The patches are applied with `git am` onto a fresh branch at the
#     pristine commit; the result must equal the series branch.
#  5. scripts/checkpatch.pl runs over each patch; the report is written to
#     <out-dir>/checkpatch.txt and summarised (warnings do not fail the export).
#     --allow-missing: src/ files or glue patches that no stanza lists are
#     only reported (they are an error otherwise).
#  6. With --build <config>: every commit is built in turn (bzImage and
#     modules, incrementally, O=<work>/obj) with that .config, so that each
#     commit is known to build on its own. With --build-off as well, the
#     last commit is also built with CONFIG_PUZZLEFS_FS disabled
#     (O=<work>/obj-off), and its vmlinux must hold no symbol of the
#     crates the driver selects (capnp, puzzlefs_format).
#
# The identity (Signed-off-by, author) is this repository's git user.name and
# user.email; the date is that of this repository's HEAD, so the same
# repository state exports the same patches.
set -eu

usage() { echo "usage: $0 [--build <kernel-config> [--build-off]] [--allow-missing] <out-dir>" >&2; exit 2; }
BUILD_CONFIG=
BUILD_OFF=
ALLOW_MISSING=
while [ $# -gt 0 ]; do
	case $1 in
	--build) [ $# -ge 2 ] || usage; BUILD_CONFIG=$(realpath "$2"); shift 2 ;;
	--build-off) BUILD_OFF=1; shift ;;
	--allow-missing) ALLOW_MISSING=1; shift ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SERIES=$HERE/series
COVER=$HERE/cover-letter
PATCH_DIR=$ROOT/board/qemu/patches/linux
SERIES_D=$HERE/series.d
TARBALL=${KERNEL_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
WORK=${KERNEL_SERIES_WORK:-$(dirname "$OUT")/build/kernel-series}
TREE=$WORK/linux
LOG=$WORK/export.log

step() { printf '>>> kernel-series %s\n' "$*" >&2; }
die() { printf 'export-series: %s\n' "$*" >&2; exit 1; }
# git in the scratch tree, with this repository's identity and HEAD's date.
NAME=$(git -C "$ROOT" config user.name || echo "PuzzleFS developers")
EMAIL=$(git -C "$ROOT" config user.email || echo "puzzlefs@localhost")
DATE=$(git -C "$ROOT" log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)
g() {
	GIT_AUTHOR_NAME=$NAME GIT_AUTHOR_EMAIL=$EMAIL GIT_AUTHOR_DATE=$DATE \
	GIT_COMMITTER_NAME=$NAME GIT_COMMITTER_EMAIL=$EMAIL GIT_COMMITTER_DATE=$DATE \
		git -C "$TREE" -c core.autocrlf=false -c gc.auto=0 -c advice.detachedHead=false "$@"
}

[ -r "$TARBALL" ] || die "$TARBALL missing (run: make deps)"
[ -r "$SERIES" ] || die "$SERIES missing"
mkdir -p "$WORK"
# One export per work directory at a time: they share the scratch repository.
exec 9>"$WORK/.lock"
if ! flock -n 9; then
	step "waiting for the export already running in $WORK"
	flock 9
fi
: >"$LOG"

# --- 1. the pristine repository (cached) -----------------------------------
tar_id=$(stat -c '%s %Y' "$TARBALL")
if [ "$(cat "$WORK/.stamp_pristine" 2>/dev/null)" != "$tar_id" ] \
	|| ! g rev-parse -q --verify refs/tags/pristine >/dev/null 2>&1; then
	step "creating the pristine repository in $TREE (once; takes a few minutes)"
	rm -rf "$TREE" "$WORK/.stamp_pristine"
	mkdir -p "$TREE"
	tar -xJf "$TARBALL" -C "$TREE" --strip-components=1
	version=$(make -s -C "$TREE" kernelversion 2>/dev/null || echo 6.12)
	g init -q -b pristine-base
	# Every file of the tarball, even those the kernel's .gitignore names;
	# stored uncompressed: zlib over 1.2 GB was a third of this step's CPU
	# time (the repository is scratch, kept only in the work directory).
	g -c core.compression=0 -c core.looseCompression=0 add -A -f .
	g commit -q -m "Linux $version (from $(basename "$TARBALL"))"
	g tag pristine
	echo "$tar_id" >"$WORK/.stamp_pristine"
fi
g checkout -q -f -B series pristine
g clean -q -f -d -x

# --- 2. one commit per stanza ----------------------------------------------
# parse_series: writes $WORK/stanzas/NNN.{subject,files,crates,patches,edits,body}
rm -rf "$WORK/stanzas"
mkdir -p "$WORK/stanzas"
awk -v dir="$WORK/stanzas" '
	function out(ext) { return sprintf("%s/%03d.%s", dir, n, ext) }
	/^== / { n++; state = "keys"; sub(/^== /, ""); print > out("subject");
		 printf "" > out("files"); printf "" > out("crates"); printf "" > out("patches");
		 printf "" > out("edits");
		 printf "" > out("body"); next }
	n == 0 { next }
	state == "keys" && /^$/ { state = "body"; next }
	state == "keys" {
		key = $1; sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
		if (key != "files" && key != "crates" && key != "patches" && key != "edits") {
			printf "series: unknown key \"%s\" in stanza %d\n", key, n > "/dev/stderr"; exit 1 }
		if ($0 != "") print > out(key); next }
	{ print > out("body") }
' "$SERIES" || die "cannot parse $SERIES"
ls "$WORK/stanzas"/*.subject >/dev/null 2>&1 || die "$SERIES has no stanza"

# Every src/ file and every glue patch must be in exactly one commit.
check_coverage() {
	(cd "$HERE/src" 2>/dev/null && find . -type f | sed 's,^\./,,') | sort >"$WORK/src.all"
	: >"$WORK/src.listed"
	for f in $(cat "$WORK/stanzas"/*.files); do
		[ -e "$HERE/src/$f" ] || die "series lists src/$f, which does not exist"
		(cd "$HERE/src" && find "$f" -type f) >>"$WORK/src.listed"
	done
	sort "$WORK/src.listed" | uniq -d | sed 's,^,  in two commits: src/,' >"$WORK/coverage"
	sort -u "$WORK/src.listed" | comm -23 "$WORK/src.all" - | sed 's,^,  in no commit: src/,' >>"$WORK/coverage"
	(cd "$PATCH_DIR" 2>/dev/null && ls -- *.patch 2>/dev/null) | sort >"$WORK/patches.all" || true
	cat "$WORK/stanzas"/*.patches | tr ' ' '\n' | sed '/^$/d' >"$WORK/patches.listed"
	sort "$WORK/patches.listed" | uniq -d | sed 's,^,  in two commits: ,' >>"$WORK/coverage"
	sort -u "$WORK/patches.listed" | comm -23 "$WORK/patches.all" - | sed 's,^,  in no commit: ,' >>"$WORK/coverage"
	[ -s "$WORK/coverage" ] || return 0
	cat "$WORK/coverage" >&2
	if [ -n "$ALLOW_MISSING" ] && ! grep -q 'in two commits' "$WORK/coverage"; then
		step "warning: exporting a partial series (--allow-missing)"
	else
		die "series and src/ or $PATCH_DIR disagree (see above)"
	fi
}
check_coverage

# src/ is the state after the last commit. The state after each commit is
# derived from it backwards: going from the last stanza to the first, the
# state before a stanza is the one after it with its edits reversed
# (`patch -R --fuzz=0`: an edit that no longer applies exactly is an error)
# and the files it lists removed. $WORK/states/NNN holds the src/ files as
# they are after commit NNN.
src_files() { (cd "$HERE/src" && find "$@" -type f) | sed 's,^\./,,'; }
rm -rf "$WORK/states"
mkdir -p "$WORK/states/stage"
[ ! -d "$HERE/src" ] || cp -R "$HERE/src/." "$WORK/states/stage/"
for s in $(printf "%s\n" "$WORK/stanzas"/*.subject | sort -r); do
	base=${s%.subject}
	cp -R "$WORK/states/stage" "$WORK/states/$(basename "$base")"
	# Edits in reverse order, each reversed.
	for e in $(tr ' ' '\n' <"$base.edits" | sed '/^$/d' | tac); do
		[ -r "$SERIES_D/$e" ] || die "edits $e not found in $SERIES_D"
		patch -R -f -p1 --fuzz=0 --no-backup-if-mismatch -r - -d "$WORK/states/stage" \
			-i "$SERIES_D/$e" >>"$LOG" 2>&1 \
			|| die "series.d/$e (stanza \"$(cat "$s")\") does not reverse-apply to the state after it (src/ changed where the edit is?); see $LOG"
	done
	files=$(cat "$base.files")
	# shellcheck disable=SC2086 # a list of paths
	[ -z "$files" ] || for f in $(src_files $files); do
		[ -e "$WORK/states/stage/$f" ] || die "src/$f is listed in stanza \"$(cat "$s")\" but an edit of a later stanza removes it"
		rm -f "$WORK/states/stage/$f"
	done
done
left=$(cd "$WORK/states/stage" && find . -type f | sed 's,^\./,,')
[ -z "$left" ] || die "files an edit creates, listed by no stanza: $left"

# install_state <dir>: copies the files of <dir> into the tree, rewriting
# only those whose content differs (as prepare-tree.sh does).
install_state() {
	(cd "$1" && find . -type f | sed 's,^\./,,') | while IFS= read -r f; do
		if ! cmp -s "$1/$f" "$TREE/$f"; then
			mkdir -p "$(dirname "$TREE/$f")"
			cp "$1/$f" "$TREE/$f"
		fi
	done
}

export PUZZLEFS_KERNEL_CACHE=${PUZZLEFS_KERNEL_CACHE:-$WORK/crates}
for s in "$WORK/stanzas"/*.subject; do
	base=${s%.subject}
	subject=$(cat "$s")
	step "commit: $subject"
	install_state "$WORK/states/$(basename "$base")"
	case $(cat "$base.crates") in
	"") ;;
	yes) "$HERE/prepare-tree.sh" "$TREE" crates ;;
	*) die "crates: must be \"yes\" (stanza \"$subject\")" ;;
	esac
	for p in $(cat "$base.patches"); do
		[ -r "$PATCH_DIR/$p" ] || die "glue patch $p not found in $PATCH_DIR"
		patch -g0 -p1 -E -N -t --no-backup-if-mismatch -d "$TREE" -i "$PATCH_DIR/$p" >>"$LOG" 2>&1 \
			|| die "$p does not apply (see $LOG)"
	done
	# -f: Debian's linux-source .gitignore ignores everything at the top
	# level; the tree holds nothing but the pristine files and ours.
	g add -A -f .
	g diff --cached --quiet && die "commit \"$subject\" changes nothing"
	{ echo "$subject"; echo; cat "$base.body"; } >"$WORK/msg"
	g commit -q -s --cleanup=whitespace -F "$WORK/msg"
done

# The last commit holds src/ exactly as it is.
for f in $(src_files .); do
	cmp -s "$HERE/src/$f" "$TREE/$f" || die "the last commit's $f differs from src/$f"
done

# --- 3. format-patch -------------------------------------------------------
rm -f "$OUT"/*.patch
[ -r "$COVER" ] || die "$COVER missing"
g format-patch -q --zero-commit --no-signature --cover-letter -o "$OUT" pristine..series >/dev/null
# Fill in git's placeholders: the subject line, then the text.
awk -v cover="$COVER" '
	BEGIN { getline subject <cover; while ((getline line <cover) > 0) body = body line "\n" }
	/\*\*\* SUBJECT HERE \*\*\*/ { sub(/\*\*\* SUBJECT HERE \*\*\*/, subject) }
	/^\*\*\* BLURB HERE \*\*\*$/ { sub(/\n+$/, "", body); print body; next }
	{ print }
' "$OUT/0000-cover-letter.patch" >"$OUT/0000-cover-letter.patch.tmp"
mv "$OUT/0000-cover-letter.patch.tmp" "$OUT/0000-cover-letter.patch"
grep -q '\*\*\* .* HERE \*\*\*' "$OUT/0000-cover-letter.patch" && die "cover letter placeholders left"
count=$(ls "$OUT"/*.patch | grep -vc '/0000-cover-letter.patch$')
step "wrote $count patches and a cover letter to $OUT"

# --- 4. git am onto the pristine commit ------------------------------------
g checkout -q -f -B am-check pristine
g am -q --whitespace=nowarn $(ls "$OUT"/*.patch | grep -v '/0000-cover-letter.patch$') >>"$LOG" 2>&1 || { g am --abort || true; die "git am failed (see $LOG)"; }
g diff --quiet series am-check || die "the tree after git am differs from the series branch"
step "git am onto the pristine tree: OK, same tree as the series branch"

# --- 5. checkpatch ---------------------------------------------------------
# One checkpatch.pl per core (it is single-threaded, a second or two per
# patch and half a minute for the vendored crates), each into a file of its
# own; the report is then put together in patch order. Its SPDX check runs
# scripts/spdxcheck.py with the python3 on PATH, which needs Debian's ply and
# git modules: /usr/bin first (a python3 without them fails, and checkpatch
# then takes every license identifier as valid).
rm -rf "$WORK/checkpatch"
mkdir -p "$WORK/checkpatch"
# shellcheck disable=SC2016 # expanded by sh -c
for p in "$OUT"/*.patch; do
	[ "$(basename "$p")" = 0000-cover-letter.patch ] || printf '%s\0' "$p"
done | (cd "$TREE" && xargs -0 -P "$(nproc)" -I{} sh -c \
	'PATH=/usr/bin:$PATH ./scripts/checkpatch.pl --no-color --show-types "$1" >"$2/${1##*/}" 2>&1; true' \
	checkpatch {} "$WORK/checkpatch")
: >"$OUT/checkpatch.txt"
total_e=0 total_w=0
for p in "$OUT"/*.patch; do
	[ "$(basename "$p")" = 0000-cover-letter.patch ] && continue
	res=$(cat "$WORK/checkpatch/$(basename "$p")")
	printf '%s\n%s\n\n' "==== $(basename "$p")" "$res" >>"$OUT/checkpatch.txt"
	sum=$(printf '%s\n' "$res" | sed -n 's/^total: \([0-9]*\) errors, \([0-9]*\) warnings.*/\1 \2/p')
	e=${sum% *} w=${sum#* }
	total_e=$((total_e + ${e:-0})) total_w=$((total_w + ${w:-0}))
	printf '    %-70s %s errors, %s warnings\n' "$(basename "$p")" "${e:-?}" "${w:-?}" >&2
done
step "checkpatch: $total_e errors, $total_w warnings (details: $OUT/checkpatch.txt)"

# --- 6. optional: build every commit ---------------------------------------
if [ -n "$BUILD_CONFIG" ]; then
	. "$ROOT/support/kmake.sh"
	LINUX_DIR=$TREE
	mkdir -p "$WORK/obj"
	for c in $(g rev-list --reverse pristine..series); do
		step "building $(g log -1 --format=%s "$c")"
		g checkout -q -f "$c"
		cp "$BUILD_CONFIG" "$WORK/obj/.config"
		kmake O="$WORK/obj" olddefconfig >>"$LOG" 2>&1 || die "olddefconfig failed (see $LOG)"
		kmake O="$WORK/obj" -j"$(nproc)" bzImage modules >>"$LOG" 2>&1 \
			|| die "commit $(g log -1 --format='%h %s' "$c") does not build (see $LOG)"
		n=$(grep -cE '(warning|error)(\[[A-Za-z0-9]+\])?:' "$LOG" || true)
		[ "$n" -eq 0 ] || { grep -E '(warning|error)(\[[A-Za-z0-9]+\])?:' "$LOG" | head -20 | sed 's/^/    /' >&2
			step "  $n warning/error lines (full log: $LOG.$c)"; cp "$LOG" "$LOG.$c"; }
		: >"$LOG"
	done
	g checkout -q -f series
	step "every commit builds"
	if [ -n "$BUILD_OFF" ]; then
		step "building the last commit with CONFIG_PUZZLEFS_FS disabled"
		mkdir -p "$WORK/obj-off"
		cp "$BUILD_CONFIG" "$WORK/obj-off/.config"
		"$TREE/scripts/config" --file "$WORK/obj-off/.config" --disable PUZZLEFS_FS
		kmake O="$WORK/obj-off" olddefconfig >>"$LOG" 2>&1 || die "olddefconfig (off) failed (see $LOG)"
		grep -q '^CONFIG_RUST=y' "$WORK/obj-off/.config" || die "CONFIG_RUST did not survive (off)"
		kmake O="$WORK/obj-off" -j"$(nproc)" bzImage modules >>"$LOG" 2>&1 \
			|| die "the series does not build with PUZZLEFS_FS off (see $LOG)"
		leaked=$(nm "$WORK/obj-off/vmlinux" | grep -cE '(capnp|puzzlefs_format)' || true)
		[ "$leaked" -eq 0 ] || die "PUZZLEFS_FS off: vmlinux still holds $leaked capnp/puzzlefs_format symbols"
		step "PUZZLEFS_FS off: builds; vmlinux $(stat -c %s "$WORK/obj-off/vmlinux") bytes, no capnp/puzzlefs_format symbol"
	fi
fi
