#!/bin/sh
# Benchmark of the puzzlefs builder against mkfs.erofs and mksquashfs -comp zstd
# on one real tree (not a test: prints figures, fails only if a tool fails).
#
#   test/bench/bench-builder.sh [SRC_DIR]
#
# SRC_DIR   tree to pack (default: the whole Rust source tree that
#           rust-web-src installs, /usr/lib/rustlib/src/rust: ~36k files)
# REPS      repetitions per tool (default 3; the median is reported)
# PUZZLEFS  puzzlefs binary (default: build package/puzzlefs in release mode)
# JOBS      cargo -j when building puzzlefs (default 2)
# PUZZLEFS_PREV  optional second puzzlefs binary (e.g. the previous release),
#           timed and sized alongside as puzzlefs-prev / puzzlefs-prev-zstd
# LEVELS    optional zstd levels, each timed and sized as puzzlefs-zstdN
#           (puzzlefs build -c --level N), e.g. LEVELS="9 19"
#
# Each repetition of each tool writes to a new path, and nothing is deleted
# before the script exits: on an ext4 without a journal (this kind of
# machine's root fs) the inode allocator skips inodes freed in the last 60 s
# one by one, so a tool that creates thousands of files (one per blob) right
# after thousands were deleted pays a quadratic cost the first build into a
# directory never sees. Needs free space for REPS copies of every output.
# Before each timed command the tree is read once, untimed, so every tool
# reads it from memory.
# Sizes: puzzlefs = every blob of the OCI directory; erofs/squashfs = image file.
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)
# The package installs a symlink; find does not follow it.
src=$(realpath "${1:-/usr/lib/rustlib/src/rust}")
reps=${REPS:-3}
jobs=${JOBS:-2}

[ -d "$src" ] || { echo "bench-builder: no tree at $src (install rust-web-src or pass a directory)" >&2; exit 1; }
for t in mkfs.erofs mksquashfs; do
	command -v "$t" >/dev/null || { echo "bench-builder: $t not found (erofs-utils, squashfs-tools)" >&2; exit 1; }
done

if [ -z "${PUZZLEFS:-}" ]; then
	(cd "$here/package/puzzlefs" && cargo build --release -j "$jobs" -q -p puzzlefs)
	PUZZLEFS=$here/package/puzzlefs/target/release/puzzlefs
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-builder.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

now() { date +%s.%N; }

# run NAME OUTPUT CMD... : time one command, print seconds
run() {
	name=$1 out=$2; shift 2
	# Every tool starts with the tree in the page cache (this kind of machine
	# runs DAMON_RECLAIM, which evicts pages idle for a while) and nothing
	# dirty (our build ends with syncfs, which would otherwise also write
	# back the previous tool's output).
	find "$src" -type f -exec cat {} + >/dev/null
	sync
	t0=$(now)
	"$@" >/dev/null 2>"$work/$name.err" || { cat "$work/$name.err" >&2; echo "bench-builder: $name failed" >&2; exit 1; }
	t1=$(now)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

size_of() {
	if [ -d "$1" ]; then
		find "$1/blobs" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
	else
		stat -c %s "$1"
	fi
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

files=$(find "$src" -type f | wc -l)
bytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
echo "tree: $src ($files files, $bytes bytes), $reps repetitions, $(nproc) CPUs"

tools="puzzlefs puzzlefs-zstd erofs erofs-lz4hc squashfs-zstd"
[ -n "${PUZZLEFS_PREV:-}" ] && tools="$tools puzzlefs-prev puzzlefs-prev-zstd"
for l in ${LEVELS:-}; do tools="$tools puzzlefs-zstd$l"; done
for tool in $tools; do : >"$work/$tool.times"; done
# Repetitions outside, tools inside: whatever drifts on the machine during
# the run (other load, memory reclaim) hits every tool alike.
r=0
while [ "$r" -lt "$reps" ]; do
	for tool in $tools; do
		case $tool in
		puzzlefs)      o=$work/oci-plain.$r; run $tool "$o" "$PUZZLEFS" -q build "$src" "$o" bench ;;
		puzzlefs-zstd) o=$work/oci-zstd.$r;  run $tool "$o" "$PUZZLEFS" -q build -c "$src" "$o" bench ;;
		puzzlefs-prev) o=$work/oci-prev.$r;  run $tool "$o" "$PUZZLEFS_PREV" -q build "$src" "$o" bench ;;
		puzzlefs-prev-zstd) o=$work/oci-prev-zstd.$r; run $tool "$o" "$PUZZLEFS_PREV" -q build -c "$src" "$o" bench ;;
		erofs)         o=$work/img.erofs.$r; run $tool "$o" mkfs.erofs --quiet "$o" "$src" ;;
		erofs-lz4hc)   o=$work/img-lz4hc.erofs.$r; run $tool "$o" mkfs.erofs --quiet -zlz4hc "$o" "$src" ;;
		puzzlefs-zstd[0-9]*)
			l=${tool#puzzlefs-zstd}
			o=$work/oci-zstd$l.$r; run $tool "$o" "$PUZZLEFS" -q build -c --level "$l" "$src" "$o" bench ;;
		squashfs-zstd) o=$work/img.sqfs.$r;  run $tool "$o" mksquashfs "$src" "$o" -comp zstd -noappend -quiet -no-progress ;;
		esac >>"$work/$tool.times"
		size_of "$o" >"$work/$tool.size"
	done
	r=$((r + 1))
done

et=$(median <"$work/erofs.times")
ss=$(cat "$work/squashfs-zstd.size")
printf '%-15s %10s %14s %14s %14s %12s\n' tool "time(s)" "size(bytes)" "time/erofs" "size/sqfs-zstd" "size/tree"
for tool in $tools; do
	t=$(median <"$work/$tool.times")
	s=$(cat "$work/$tool.size")
	awk -v n="$tool" -v t="$t" -v s="$s" -v et="$et" -v ss="$ss" -v b="$bytes" 'BEGIN {
		printf "%-15s %10.3f %14d %14.3f %14.3f %12.3f\n", n, t, s, t / et, s / ss, s / b }'
done
echo "all times (s):"
for tool in $tools; do echo "  $tool: $(tr '\n' ' ' <"$work/$tool.times")"; done
