#!/bin/sh
# kernel-check.sh <output-dir>: the kernel side's lint bar (make kernel-check),
# on the host build's configured and built tree:
#  1. `make rustfmtcheck`: every Rust file of the tree, ours included, is
#     formatted as the kernel's .rustfmt.toml wants;
#  2. `CLIPPY=1`: rust/ (kernel, puzzlefs_format; capnp is
#     skip_clippy) and fs/puzzlefs/ rebuilt with clippy-driver, no warning
#     (clippy's, rustc's, nor a tool's such as objtool's "file.o: warning:");
#  3. the exported series (support for `make kernel-series`): `git am` onto
#     the pristine tree, then checkpatch.pl over every patch: no error, and
#     warnings only LONG_LINE* in vendored (rust/capnp) or
#     generated (rust/puzzlefs_format/generated) code, and FILE_PATH_CHANGES
#     ("added file(s), does MAINTAINERS need updating?", which checkpatch
#     says of every patch that adds a file without touching MAINTAINERS) in
#     a patch whose added files all have a MAINTAINERS entry at its commit
#     (a commit that adds rust/kernel/fs/dir.rs after the one that made the
#     rust/kernel/fs/ entry);
#  4. documentation: Documentation/filesystems/puzzlefs.rst parses with
#     docutils without a warning (the Sphinx-free part of `make htmldocs`),
#     and scripts/kernel-doc finds no problem in the series' C files;
#  5. with KERNEL_CHECK_BUILD=1 (`make kernel-check KERNEL_CHECK_BUILD=1`;
#     off by default: sixteen kernel builds do not fit CI's time budget): every
#     commit of the series builds with CONFIG_PUZZLEFS_FS=m (bisectable), and
#     the last one with it off, leaving no capnp/puzzlefs_format symbol in
#     vmlinux.
# One line per check; exits 1 if any fails. Step 2 leaves the Rust objects
# built by clippy-driver: the next `make` rebuilds them (kbuild sees the
# changed command line), which costs about 20 s.
# A second argument runs half of it: `tree` steps 1, 2 and 4 (on the built
# tree), `series` step 3 (and 5), which needs no build: the tarball and this
# repository (make kernel-check-tree, kernel-check-series; CI runs the
# series half beside the builds).
set -u
O=$1
PARTS=${2:-all}
case $PARTS in
all | tree | series) ;;
*) echo "usage: $0 <output-dir> [all|tree|series]" >&2; exit 2 ;;
esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/support/kmake.sh"
bad=0
ok() { echo "kernel-check: ok: $*"; }
ko() { echo "kernel-check: FAIL: $*" >&2; bad=1; }
mkdir -p "$O/build"

# Steps 1, 2 and 4.
tree_checks() {
	LINUX_DIR=$(cat "$O/build/linux-dir" 2>/dev/null) || { echo "kernel-check: no kernel tree (run: make)" >&2; exit 1; }
	LOG=$O/build/kernel-check.log
	: >"$LOG"

	if kmake rustfmtcheck >>"$LOG" 2>&1; then
		ok "rustfmtcheck"
	else
		ko "rustfmtcheck (diffs in $LOG)"
	fi

	if kmake CLIPPY=1 -j"$(nproc)" rust/ fs/puzzlefs/ >"$LOG.clippy" 2>&1; then
		n=$(grep -cE '^(warning|error)|^[^ ]+: (warning|error): ' "$LOG.clippy")
		if [ "$n" -eq 0 ]; then
			ok "CLIPPY=1 rust/ fs/puzzlefs/: no warning"
		else
			grep -E -A5 '^(warning|error)|^[^ ]+: (warning|error): ' "$LOG.clippy" | head -40 >&2
			ko "CLIPPY=1: $n warnings (full log $LOG.clippy)"
		fi
	else
		ko "CLIPPY=1 build failed (see $LOG.clippy)"
	fi

	RST=$LINUX_DIR/Documentation/filesystems/puzzlefs.rst
	if /usr/bin/python3 - "$RST" >"$LOG.rst" 2>&1 <<'PY'
import sys
import docutils.core
docutils.core.publish_doctree(open(sys.argv[1]).read(), source_path=sys.argv[1],
                              settings_overrides={"halt_level": 2, "report_level": 2})
PY
	then
		ok "Documentation/filesystems/puzzlefs.rst: docutils, no warning"
	else
		cat "$LOG.rst" >&2
		ko "Documentation/filesystems/puzzlefs.rst does not parse cleanly (see above)"
	fi
	kdoc=$(cd "$LINUX_DIR" && ./scripts/kernel-doc -none -Wall rust/helpers/fs.c rust/helpers/ratelimit.c 2>&1)
	if [ -z "$kdoc" ]; then
		ok "kernel-doc: no warning in rust/helpers/fs.c, ratelimit.c"
	else
		printf '%s\n' "$kdoc" >&2
		ko "kernel-doc warnings"
	fi
}

# Step 3 (and 5).
series_checks() {
	LOG=$O/build/kernel-check-series.log
	: >"$LOG"
	SERIES=$O/series
	build_args=
	if [ "${KERNEL_CHECK_BUILD:-0}" = 1 ]; then
		LINUX_DIR=$(cat "$O/build/linux-dir" 2>/dev/null) || { echo "kernel-check: KERNEL_CHECK_BUILD=1 needs a configured tree (run: make)" >&2; exit 1; }
		build_args="--build $LINUX_DIR/.config --build-off"
	fi
	# shellcheck disable=SC2086 # options
	if "$REPO/package/puzzlefs/kernel/export-series.sh" $build_args "$SERIES" >>"$LOG" 2>&1; then
		ok "series exported to $SERIES; git am onto the pristine tree gives the same tree"
		[ -n "$build_args" ] && ok "every commit builds with PUZZLEFS_FS=m; the last with it off: $(grep -o 'PUZZLEFS_FS off: builds.*' "$LOG" | tail -1)"
		# checkpatch.txt: "==== <patch>", then checkpatch's findings, each a
		# "WARNING:TYPE: ..." or "ERROR:TYPE: ..." line followed by "#N: FILE: <path>:<line>:".
		# Patches whose added files a MAINTAINERS F: pattern of their own commit covers.
		covered=$LOG.maintained
		: >"$covered"
		stree=$O/build/kernel-series/linux
		n=0
		for c in $(git -C "$stree" rev-list --reverse pristine..series 2>/dev/null); do
			n=$((n + 1))
			p=$(ls "$SERIES"/"$(printf %04d $n)"-*.patch 2>/dev/null) || continue
			added=$(git -C "$stree" diff --name-only --diff-filter=A "$c^" "$c")
			[ -n "$added" ] || continue
			# shellcheck disable=SC2086 # one word per file
			if git -C "$stree" show "$c:MAINTAINERS" | /usr/bin/python3 -c '
import fnmatch, sys
pats = [l[2:].strip() for l in sys.stdin if l.startswith("F:\t")]
def covered(f):
    for p in pats:
        if p.endswith("/") and f.startswith(p):
            return True
        if fnmatch.fnmatchcase(f, p):
            return True
    return False
sys.exit(0 if all(covered(f) for f in sys.argv[1:]) else 1)
' $added; then
				basename "$p" >>"$covered"
			fi
		done
		awk -v covered="$covered" '
			BEGIN { while ((getline l <covered) > 0) maintained[l] = 1 }
			/^==== / { patch = $2; next }
			# A helper checkpatch runs (spdxcheck.py) that crashed: its check was not made.
			/^Traceback |^[A-Za-z]+Error: / { printf "%s: a checker failed: %s\n", patch, $0; next }
			/^(ERROR|WARNING|CHECK):/ { kind = $0; sub(/: .*/, "", kind); what = $0; next }
			kind != "" && /^#[0-9]+: FILE: / {
				file = $3; sub(/:[0-9]+:$/, "", file)
				allowed = kind ~ /^WARNING:LONG_LINE/ &&
					file ~ /^rust\/(capnp|puzzlefs_format\/generated)\//
				if (!allowed) printf "%s: %s (%s)\n", patch, what, file
				kind = ""; next
			}
			kind != "" && /^$/ {
				if (!(kind == "WARNING:FILE_PATH_CHANGES" && (patch in maintained)))
					printf "%s: %s\n", patch, what
				kind = ""
			}
		' "$SERIES/checkpatch.txt" >"$LOG.checkpatch"
		if [ -s "$LOG.checkpatch" ]; then
			head -20 "$LOG.checkpatch" >&2
			ko "checkpatch: $(wc -l <"$LOG.checkpatch") findings outside vendored/generated long lines ($SERIES/checkpatch.txt)"
		else
			ok "checkpatch: no error; warnings only long lines of vendored or generated code ($(grep -c '^WARNING:LONG_LINE' "$SERIES/checkpatch.txt")) and added files MAINTAINERS covers ($(grep -c '^WARNING:FILE_PATH_CHANGES' "$SERIES/checkpatch.txt"))"
		fi
	else
		tail -5 "$LOG" >&2
		ko "export-series failed (see $LOG)"
	fi
}

case $PARTS in
all) tree_checks; series_checks ;;
tree) tree_checks ;;
series) series_checks ;;
esac
exit $bad
