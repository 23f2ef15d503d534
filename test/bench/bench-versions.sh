#!/bin/sh
# Storage of three successive versions of a real root filesystem (not a test:
# prints figures, fails only if a tool fails).
#
#   test/bench/bench-versions.sh
#
# The versions (made once with debootstrap, cached under $CACHE):
#   v1  debootstrap --variant=minbase bookworm
#   v2  v1 + apt-get upgrade from bookworm-updates and bookworm-security
#   v3  v2 + apt-get install python3 curl
# apt's caches and lists are removed from each. The mirror is the one apt
# uses on this machine (/etc/apt/sources.list*), deb.debian.org otherwise.
#
# For each way of storing the three versions: blob (file) count, bytes on
# disk (du, allocated 4 KiB blocks), apparent bytes, and the build time of
# the three versions together:
#   puzzlefs / puzzlefs-zstd          three independent tags in one OCI dir
#   puzzlefs-delta / -zstd-delta      v2 built -b v1, v3 built -b v2
#   the same for PUZZLEFS_PREV (e.g. main's binary), when given
#   tar.gz full                       one full tar.gz layer per version
#   tar.gz diff                       v1 full, then tar.gz of changed/new paths
#                                     (and .wh. whiteouts), as OCI layers
#   squashfs-zstd / erofs-lz4hc       one image per version
# Then what each version added: for puzzlefs rows the blobs its build
# created, split into chunk data, metadata layers and manifest
# (test/bench/increment.py); for the tar.gz diff rows each layer.
#
# PUZZLEFS       puzzlefs binary (default: build package/puzzlefs, release)
# PUZZLEFS_PREV  optional second binary, measured alongside as prev*
# CACHE          where the trees live (default output/bench-versions)
# LEVEL          zstd level for the -c builds (default: the tool's default)
# LEVELS         more zstd levels, each measured as puzzlefs-zstdN-delta
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)
cache=${CACHE:-$here/output/bench-versions}
trees=$cache/trees
mkdir -p "$trees"

[ "$(id -u)" = 0 ] || { echo "bench-versions: debootstrap needs root" >&2; exit 1; }

# What the bench needs that the build does not (not make deps).
need=""
command -v debootstrap >/dev/null || need="$need debootstrap"
command -v mksquashfs >/dev/null || need="$need squashfs-tools"
command -v mkfs.erofs >/dev/null || need="$need erofs-utils"
if [ -n "$need" ]; then
	echo ">>> installing$need"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null
fi

mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
security=$(echo "$mirror" | sed 's,/debian/*$,/debian-security,')

# in_chroot DIR CMD...: run CMD in DIR with /proc and /dev mounted, no
# service started.
in_chroot() {
	d=$1; shift
	mount -t proc proc "$d/proc"
	mount --bind /dev "$d/dev"
	printf '#!/bin/sh\nexit 101\n' >"$d/usr/sbin/policy-rc.d"
	chmod 755 "$d/usr/sbin/policy-rc.d"
	rc=0
	chroot "$d" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@" || rc=$?
	rm -f "$d/usr/sbin/policy-rc.d"
	umount "$d/dev" "$d/proc"
	return $rc
}

clean_apt() {
	rm -rf "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb \
		"$1"/var/cache/apt/archives/partial/* "$1"/var/lib/apt/lists/*
	mkdir -p "$1/var/lib/apt/lists/partial"
}

make_trees() {
	if [ ! -e "$trees/v1.done" ]; then
		rm -rf "$trees/v1"
		echo ">>> debootstrap bookworm minbase from $mirror"
		debootstrap --variant=minbase bookworm "$trees/v1" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
		clean_apt "$trees/v1"
		touch "$trees/v1.done"
	fi
	if [ ! -e "$trees/v2.done" ]; then
		rm -rf "$trees/v2"
		cp -a "$trees/v1" "$trees/v2"
		cat >"$trees/v2/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
		echo ">>> v2: apt-get upgrade"
		in_chroot "$trees/v2" sh -c 'apt-get -q update && apt-get -q -y upgrade' >"$cache/v2.log" 2>&1 ||
			{ tail -n 20 "$cache/v2.log" >&2; exit 1; }
		clean_apt "$trees/v2"
		touch "$trees/v2.done"
	fi
	if [ ! -e "$trees/v3.done" ]; then
		rm -rf "$trees/v3"
		cp -a "$trees/v2" "$trees/v3"
		echo ">>> v3: apt-get install python3 curl"
		in_chroot "$trees/v3" sh -c 'apt-get -q update && apt-get -q -y install python3 curl' >"$cache/v3.log" 2>&1 ||
			{ tail -n 20 "$cache/v3.log" >&2; exit 1; }
		clean_apt "$trees/v3"
		touch "$trees/v3.done"
	fi
}

make_trees
[ "${TREES_ONLY:-}" ] && exit 0

if [ -z "${PUZZLEFS:-}" ]; then
	(cd "$here/package/puzzlefs" && cargo build --release -q -p puzzlefs)
	PUZZLEFS=$here/package/puzzlefs/target/release/puzzlefs
fi

work=$cache/run
rm -rf "$work"
mkdir -p "$work"

now() { date +%s.%N; }
# timed CMD...: run CMD (output discarded), add its seconds to $t
timed() {
	find "$trees" -type f -exec cat {} + >/dev/null 2>&1 || true
	sync
	t0=$(now)
	"$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; echo "bench-versions: $* failed" >&2; exit 1; }
	t1=$(now)
	t=$(echo "$t $t0 $t1" | awk '{ printf "%.3f", $1 + $3 - $2 }')
}

# report NAME PATH...: blob count, du (4 KiB blocks) and apparent bytes of PATHs
report() {
	name=$1; shift
	n=$(find "$@" -type f ! -name 'index.json' ! -name 'oci-layout' ! -name '.puzzlefs.lock' | wc -l)
	disk=$(du -s -B4096 -c "$@" | tail -n 1 | awk '{ print $1 * 4096 }')
	app=$(du -s -b -c "$@" | tail -n 1 | awk '{ print $1 }')
	printf '%-26s %8d %14d %14d %10s\n' "$name" "$n" "$disk" "$app" "$t" | tee -a "$work/table"
}

# increment NAME BIN OCI V: what building tag V added to OCI, by kind of
# blob, as a row of $work/increments
increment() {
	python3 "$here/test/bench/increment.py" "$2" "$3" "$4" "$work/$1.seen" |
		awk -v name="$1" -v v="$4" -F'\t' '{
			printf "%-26s %-3s %6d %12d %12d %12d %12d %12d\n", name, v, $2, $3, $7, $11,
				$3 + $7 + $11, $4 + $8 + $12 }' >>"$work/increments"
}

# puzzlefs_row NAME BIN DELTA FLAGS...
puzzlefs_row() {
	name=$1 bin=$2 delta=$3; shift 3
	o=$work/$name
	t=0
	prev=""
	for v in v1 v2 v3; do
		if [ "$delta" = 1 ] && [ -n "$prev" ]; then
			timed "$bin" -q build "$@" -b "$prev" "$trees/$v" "$o" "$v"
		else
			timed "$bin" -q build "$@" "$trees/$v" "$o" "$v"
		fi
		increment "$name" "$bin" "$o" "$v"
		prev=$v
	done
	report "$name" "$o/blobs"
}

# The paths of $2 that differ from $1 (new, changed contents, type, mode,
# owner or link target), and whiteouts for the paths of $1 gone from $2.
diff_list() {
	(cd "$1" && find . -printf '%p\t%y %m %U %G %s %l\n' | sort) >"$work/a.lst"
	(cd "$2" && find . -printf '%p\t%y %m %U %G %s %l\n' | sort) >"$work/b.lst"
	# new or metadata-changed
	comm -13 "$work/a.lst" "$work/b.lst" | cut -f1 >"$work/changed"
	# same metadata, maybe other contents
	comm -12 "$work/a.lst" "$work/b.lst" | awk -F'\t' '$2 ~ /^f / { print $1 }' |
		while IFS= read -r p; do cmp -s "$1/$p" "$2/$p" || echo "$p"; done >>"$work/changed"
	cut -f1 "$work/a.lst" >"$work/a.paths"
	cut -f1 "$work/b.lst" >"$work/b.paths"
	comm -23 "$work/a.paths" "$work/b.paths" >"$work/gone"
}

tar_rows() {
	o=$work/tar-full; mkdir -p "$o"; t=0
	for v in v1 v2 v3; do
		timed sh -c "tar --numeric-owner --xattrs -C '$trees/$v' -cf - . | gzip >'$o/$v.tar.gz'"
	done
	report "tar.gz full layers" "$o"

	o=$work/tar-diff; mkdir -p "$o"; t=0
	timed sh -c "tar --numeric-owner --xattrs -C '$trees/v1' -cf - . | gzip >'$o/v1.tar.gz'"
	prev=v1
	for v in v2 v3; do
		diff_list "$trees/$prev" "$trees/$v"
		wh=$work/wh-$v; rm -rf "$wh"; mkdir -p "$wh"
		while IFS= read -r p; do
			mkdir -p "$wh/$(dirname "$p")"
			: >"$wh/$(dirname "$p")/.wh.$(basename "$p")"
		done <"$work/gone"
		timed sh -c "{ tar --numeric-owner --xattrs --no-recursion -C '$trees/$v' -cf - -T '$work/changed'; } >'$work/l.tar' &&
			tar --numeric-owner -C '$wh' -rf '$work/l.tar' . && gzip -c '$work/l.tar' >'$o/$v.tar.gz' && rm '$work/l.tar'"
		echo "  $v: $(wc -l <"$work/changed") changed/new paths, $(wc -l <"$work/gone") gone" >>"$work/notes"
		prev=$v
	done
	report "tar.gz v1 + diff layers" "$o"
	for v in v1 v2 v3; do
		b=$(stat -c %s "$o/$v.tar.gz")
		printf '%-26s %-3s %6s %12s %12s %12s %12d %12d\n' "tar.gz v1 + diff layers" "$v" - - - - \
			"$b" "$(du -B4096 "$o/$v.tar.gz" | awk '{ print $1 * 4096 }')" >>"$work/increments"
	done
}

image_rows() {
	o=$work/squashfs; mkdir -p "$o"; t=0
	for v in v1 v2 v3; do
		timed mksquashfs "$trees/$v" "$o/$v.sqfs" -comp zstd -noappend -quiet -no-progress
	done
	report "squashfs-zstd" "$o"
	o=$work/erofs; mkdir -p "$o"; t=0
	for v in v1 v2 v3; do
		timed mkfs.erofs --quiet -zlz4hc "$o/$v.erofs" "$trees/$v"
	done
	report "erofs-lz4hc" "$o"
}

lvl=""
[ -n "${LEVEL:-}" ] && lvl="--level $LEVEL"
for v in v1 v2 v3; do
	echo "$v: $(find "$trees/$v" | wc -l) paths, $(du -s -b "$trees/$v" | cut -f1) bytes" >>"$work/notes"
done
printf '%-26s %8s %14s %14s %10s\n' storage blobs "du(bytes)" "apparent" "time(s)" | tee "$work/table"
puzzlefs_row puzzlefs "$PUZZLEFS" 0
puzzlefs_row puzzlefs-delta "$PUZZLEFS" 1
# shellcheck disable=SC2086
puzzlefs_row puzzlefs-zstd "$PUZZLEFS" 0 -c $lvl
# shellcheck disable=SC2086
puzzlefs_row puzzlefs-zstd-delta "$PUZZLEFS" 1 -c $lvl
for l in ${LEVELS:-}; do
	puzzlefs_row "puzzlefs-zstd$l-delta" "$PUZZLEFS" 1 -c --level "$l"
done
# One version alone, for the "no larger than before" comparison.
# shellcheck disable=SC2086
puzzlefs_row_one() {
	name=$1 bin=$2; shift 2
	o=$work/$name; t=0
	timed "$bin" -q build "$@" "$trees/v1" "$o" v1
	report "$name" "$o/blobs"
}
puzzlefs_row_one puzzlefs-zstd-v1only "$PUZZLEFS" -c
if [ -n "${PUZZLEFS_PREV:-}" ]; then
	puzzlefs_row prev "$PUZZLEFS_PREV" 0
	puzzlefs_row prev-zstd "$PUZZLEFS_PREV" 0 -c
	puzzlefs_row prev-zstd-delta "$PUZZLEFS_PREV" 1 -c
	puzzlefs_row_one prev-zstd-v1only "$PUZZLEFS_PREV" -c
fi
tar_rows
image_rows
cat "$work/notes"
# What each version added (puzzlefs: new blobs of that build; tar.gz: the
# layer). Chunk data, metadata layers and manifests in apparent bytes; the
# total also in du bytes (4 KiB blocks).
echo
printf '%-26s %-3s %6s %12s %12s %12s %12s %12s\n' increments ver chunks "chunk bytes" metadata \
	manifest total "total du"
cat "$work/increments"
