#!/bin/bash
# `make bench`: the kernel read path of puzzlefs against tmpfs, erofs (plain
# and lz4hc, file-backed), squashfs (zstd, loop) in one boot of the appliance
# (not a test: prints figures, fails only if something could not run).
#
#   test/bench/bench.sh            (the Makefile passes O, IMAGES and PUZZLEFS)
#
# Host side, cached under BENCH_CACHE (default $O/bench-cache):
#   tree/           the bench tree: debian/ (Debian bookworm minbase + python3,
#                   made with debootstrap), big/{32M,128M}.bin (seeded random
#                   bytes), many/ (100,000 empty files file-NNNNNN.dat)
#   disk/img/       images of tree/: puzzlefs plain and zstd (PUZZLEFS),
#                   erofs plain and lz4hc, squashfs zstd; puzzlefs images of
#                   10, 10,000 and 100,000 inodes for the mount time
#   disk/tree.tar   tree/ as a tar archive (for the tmpfs copy: mkfs.ext4 -d
#                   takes quadratic time over a directory of 100,000 entries)
#   bench-<key>.ext4  disk/ as an ext4 image (sparse), attached as a virtio disk
# The guest mounts the bench disk, unpacks tree.tar into a tmpfs and mounts
# each image, then runs test/bench/guest.sh (a second small disk, rebuilt each
# run, carries guest.sh, the static pzbench helper and the settings).
#
# Settings (environment):
#   REPS=3            repetitions per workload and mode (medians reported)
#   FS="tmpfs erofs puzzlefs erofs-lz4hc squashfs-zstd puzzlefs-zstd"
#                     (also erofs-dio: the erofs image mounted -o directio,
#                     reading its image file with direct I/O; and
#                     puzzlefs-verity: a copy of the plain image, given
#                     fs-verity on every blob in the guest at each boot,
#                     mounted with verity=require: metadata read page by
#                     page, chunks checked by fs-verity)
#   WORKLOADS="readall stat seq32 seq128 rand neg pos mount10 mount10k mount100k
#              vmount10 vmount10k vmount100k versions"
#                     (vmount*: the mount images with fs-verity enabled, in
#                     the guest at each boot, mounted with verity=require:
#                     the driver reads their metadata page by page)
#                     (versions: three versions of debian/ mounted side by
#                     side and read whole one after the other, cold at the
#                     start: time, page-cache growth and disk reads of the
#                     three; puzzlefs and erofs only)
#   TIMEOUT_S=120     per run of a workload: a run that takes longer stops,
#                     is reported as a timeout with the operations it did, and
#                     the other runs of that workload on that file system are skipped
#   NEG_LOOKUPS=20000 POS_LOOKUPS=20000 RAND_READS=3000
#   BENCH_MEM=4096    guest memory, MiB
#   BENCH_DISK_CACHE=none  QEMU's cache mode for the bench disk (default: the
#                     host's page cache, which serves "cold" guest reads from
#                     host memory); none reads it with O_DIRECT, so cold
#                     reads wait for the host's disk
#   BENCH_IMAGES_PREV=<images dir of another build>: a second boot of that
#                     build's kernel + module in the same run (same bench disk,
#                     puzzlefs file systems, and erofs as each boot's yardstick
#                     when FS has it); its figures appear as "puzzlefs (prev)"
#                     columns (BENCH_PREV_LABEL names them)
#   BENCH_ROUNDS=<n>  boot this build (and the BENCH_IMAGES_PREV build) n times,
#                     alternating, and report the medians over every round's
#                     runs: the same build's cold figures move by up to 40%
#                     from one boot to the next (README, make bench), so a cur ÷
#                     prev ratio from one boot each is mostly that noise
#                     (default 1; console-<label>-<round>.log when n > 1)
#   BENCH_RA_KB=<n>   set read_ahead_kb of every puzzlefs mount to n (the
#                     driver's own window otherwise), to compare windows
#   BENCH_LABEL=cur   name of this build in the JSON, BENCH_OUT=$O/bench
#   BENCH_PROFILE=1   also profile this build's boot (test/bench/profile.py,
#                     through QEMU's gdb stub): $OUT/profile.md, per workload
#                     run; stopping the guest to sample slows it, so the
#                     timings of a profiled run are not figures to compare
#   BENCH_SYSTEM_MAP  the System.map of the kernel in IMAGES, when IMAGES is
#                     not this build's (default: $O's); the report checks it
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
O=${O:-$top/output}
IMAGES=${IMAGES:-$O/images}
PUZZLEFS=${PUZZLEFS:-$O/host/bin/puzzlefs}
CACHE=${BENCH_CACHE:-$O/bench-cache}
OUT=${BENCH_OUT:-$O/bench}
export REPS=${REPS:-3}
export FS=${FS:-tmpfs erofs puzzlefs erofs-lz4hc squashfs-zstd puzzlefs-zstd}
export WORKLOADS=${WORKLOADS:-readall stat seq32 seq128 rand neg pos mount10 mount10k mount100k vmount10 vmount10k vmount100k versions}
export TIMEOUT_S=${TIMEOUT_S:-120}
export NEG_LOOKUPS=${NEG_LOOKUPS:-20000} POS_LOOKUPS=${POS_LOOKUPS:-20000} RAND_READS=${RAND_READS:-3000}
MIRROR=${BENCH_MIRROR:-http://deb.debian.org/debian}

say() { echo ">>> bench: $*"; }
die() { echo "bench: $*" >&2; exit 1; }

[ -x "$PUZZLEFS" ] || die "$PUZZLEFS missing (run make first)"

# debootstrap is needed by this target only: installed here, not by make deps.
need_pkg() { # <command> <debian package>
	command -v "$1" >/dev/null && return 0
	while pgrep -x 'apt-get|dpkg|apt' >/dev/null; do
		say "waiting for another apt/dpkg to finish"; sleep 10
	done
	say "installing $2 (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null
}
need_pkg debootstrap debootstrap
need_pkg mkfs.erofs erofs-utils
need_pkg mksquashfs squashfs-tools
need_pkg mkfs.ext4 e2fsprogs
need_pkg gcc gcc

mkdir -p "$CACHE/disk" "$OUT"
tree=$CACHE/tree img=$CACHE/disk/img

# ---------------------------------------------------------------- the tree
if [ ! -f "$CACHE/debian.done" ]; then
	rm -rf "$tree/debian" "$CACHE/debian.tmp"
	rm -f "$CACHE/extra.done" "$CACHE/peers.done" "$CACHE/pz.key" "$CACHE"/bench-*.ext4
	mkdir -p "$tree"
	say "debootstrap bookworm (minbase + python3) from $MIRROR"
	nice -n 10 debootstrap --variant=minbase --include=python3 bookworm "$CACHE/debian.tmp" "$MIRROR" \
		>"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed, see $CACHE/debootstrap.log"
	# The apt lists and the downloaded .debs are not part of a root fs image.
	rm -rf "$CACHE/debian.tmp/var/cache/apt/archives/"*.deb "$CACHE/debian.tmp/var/lib/apt/lists/"*
	mv "$CACHE/debian.tmp" "$tree/debian"
	touch "$CACHE/debian.done"
fi
if [ ! -f "$CACHE/extra.done" ]; then
	say "random files and the 100,000-entry directory"
	rm -rf "$tree/big" "$tree/many"
	rm -f "$CACHE/peers.done" "$CACHE/pz.key" "$CACHE"/bench-*.ext4
	mkdir -p "$tree/big" "$tree/many"
	python3 - "$tree" <<-'EOF'
	import os, random, sys
	t = sys.argv[1]
	for name, mib, s in (("32M.bin", 32, 32), ("128M.bin", 128, 128)):
	    r = random.Random(s)
	    with open(os.path.join(t, "big", name), "wb") as f:
	        for _ in range(mib):
	            f.write(r.randbytes(1 << 20))
	for i in range(100000):
	    open(os.path.join(t, "many", "file-%06d.dat" % i), "wb").close()
	EOF
	touch "$CACHE/extra.done"
fi

# Three versions of debian/ that share most of their bytes, as successive
# images of one root filesystem do (the "versions" workload):
#   v1  debian/ without python3 (usr/lib/python3*, usr/bin/python3*, usr/share/python3)
#   v2  v1 with every 16th regular file of 1 KiB or more replaced by seeded
#       random bytes of the same size (an update that rebuilt 1 file in 16)
#   v3  v2 with python3 added back (debian/ with v2's changes)
if [ ! -f "$CACHE/versions.done" ]; then
	say "three versions of debian/"
	rm -rf "$CACHE/versions"
	rm -f "$CACHE/peers.done" "$CACHE/pz.key" "$CACHE"/bench-*.ext4
	mkdir -p "$CACHE/versions"
	cp -a "$tree/debian" "$CACHE/versions/v3"
	python3 - "$CACHE/versions/v3" <<-'EOF'
	import os, random, sys
	root = sys.argv[1]
	files = []
	for d, dirs, names in os.walk(root):
	    dirs.sort()
	    for n in sorted(names):
	        p = os.path.join(d, n)
	        if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) >= 1024:
	            files.append(p)
	for i, p in enumerate(files):
	    if i % 16 == 0:
	        size = os.path.getsize(p)
	        mode = os.stat(p).st_mode
	        with open(p, "wb") as f:
	            f.write(random.Random(i).randbytes(size))
	        os.chmod(p, mode)
	EOF
	cp -a "$CACHE/versions/v3" "$CACHE/versions/v2"
	rm -rf "$CACHE/versions/v2/usr/lib/python3"* "$CACHE/versions/v2/usr/bin/python3"* \
		"$CACHE/versions/v2/usr/share/python3"
	cp -a "$CACHE/versions/v2" "$CACHE/versions/v1"
	# v1 has the files v2 changed as they were in debian/.
	(cd "$tree/debian" && find . -type f) | while read -r f; do
		[ -f "$CACHE/versions/v1/$f" ] && ! cmp -s "$tree/debian/$f" "$CACHE/versions/v1/$f" &&
			cp -a "$tree/debian/$f" "$CACHE/versions/v1/$f"
		:
	done
	touch "$CACHE/versions.done"
fi

# ---------------------------------------------------------------- the images
# Images made by mkfs.erofs / mksquashfs depend on the tree only; puzzlefs
# images also on the puzzlefs tool (its hash is part of the key).
pzkey=$(sha256sum "$PUZZLEFS" | cut -c1-12)
digest_of() { # <oci dir> <tag>: the manifest digest of <tag> in index.json
	sed 's/},{/}\n{/g' "$1/index.json" | grep "\"org.opencontainers.image.ref.name\":\"$2\"" \
		| grep -o '"digest":"sha256:[0-9a-f]*"' | head -n1 | sed 's/.*sha256:\([0-9a-f]*\)"/\1/'
}
pzbuild() { # <name> <src> [build options]
	local name=$1 src=$2
	shift 2
	rm -rf "${img:?}/$name" "$img/$name.digest"
	nice -n 10 "$PUZZLEFS" -q build "$@" "$src" "$img/$name/oci" bench >/dev/null
	digest_of "$img/$name/oci" bench >"$img/$name.digest"
	[ -s "$img/$name.digest" ] || die "no tag bench in $img/$name/oci"
}
mkdir -p "$img"
if [ ! -f "$CACHE/peers.done" ]; then
	say "erofs, erofs lz4hc, squashfs zstd images"
	rm -f "$img"/tree*.erofs "$img"/tree*.sqfs "$CACHE/disk/tree.tar" "$CACHE"/bench-*.ext4
	tar -C "$tree" --numeric-owner -cf "$CACHE/disk/tree.tar" .
	nice -n 10 mkfs.erofs --quiet "$img/tree.erofs" "$tree"
	nice -n 10 mkfs.erofs --quiet -zlz4hc "$img/tree-lz4hc.erofs" "$tree"
	nice -n 10 mksquashfs "$tree" "$img/tree-zstd.sqfs" -comp zstd -noappend -quiet -no-progress >/dev/null
	for v in 1 2 3; do
		nice -n 10 mkfs.erofs --quiet "$img/tree-v$v.erofs" "$CACHE/versions/v$v"
	done
	touch "$CACHE/peers.done"
fi
if [ "$(cat "$CACHE/pz.key" 2>/dev/null)" != "$pzkey" ]; then
	say "puzzlefs images (tool $PUZZLEFS, $pzkey)"
	rm -f "$CACHE/pz.key"
	pzbuild pz-plain "$tree"
	pzbuild pz-zstd "$tree" -c
	# Mount-time images: directories of 10 and 10,000 empty files, and many/.
	for n in 10 10000; do
		rm -rf "$CACHE/m$n"
		mkdir -p "$CACHE/m$n"
		(cd "$CACHE/m$n" && seq -f 'file-%06g.dat' 0 $((n - 1)) | xargs touch)
	done
	pzbuild pz-m10 "$CACHE/m10"
	pzbuild pz-m10k "$CACHE/m10000"
	pzbuild pz-m100k "$tree/many"
	# The three versions as three tags of one image directory: the blobs
	# they share are stored once.
	rm -rf "${img:?}/pz-versions" "$img"/pz-versions.v*.digest
	for v in 1 2 3; do
		nice -n 10 "$PUZZLEFS" -q build "$CACHE/versions/v$v" "$img/pz-versions/oci" "v$v" >/dev/null
		digest_of "$img/pz-versions/oci" "v$v" >"$img/pz-versions.v$v.digest"
		[ -s "$img/pz-versions.v$v.digest" ] || die "no tag v$v in $img/pz-versions/oci"
	done
	echo "$pzkey" >"$CACHE/pz.key"
fi
# A copy of pz-plain to which the guest gives fs-verity (puzzlefs-verity):
# ext4 reads a file with fs-verity through its page cache, checking every
# block, whoever reads it, so pz-plain itself stays without.
if [ "$(cat "$img/pz-verity.digest" 2>/dev/null)" != "$(cat "$img/pz-plain.digest")" ]; then
	rm -rf "$img/pz-verity" "$img/pz-verity.digest"
	cp -a "$img/pz-plain" "$img/pz-verity"
	cp "$img/pz-plain.digest" "$img/pz-verity.digest"
	rm -f "$CACHE"/bench-*.ext4
fi

# ---------------------------------------------------------------- the disks
# "-dx": its directories are hash-indexed (below); older disks were not.
# "v": it has the verity feature (the guest enables fs-verity for vmount*);
# "c": it holds pz-verity, the copy of pz-plain.
disk=$CACHE/bench-$pzkey-dxvc.ext4
if [ ! -f "$disk" ]; then
	say "bench disk $disk"
	rm -f "$CACHE"/bench-*.ext4
	{ echo "bench tree + images, puzzlefs tool $pzkey"; } >"$CACHE/disk/PZBENCH"
	kib=$(du -sk "$CACHE/disk" | cut -f1)
	inodes=$(find "$CACHE/disk" | wc -l)
	nice -n 10 mkfs.ext4 -q -F -t ext4 -b 4096 -O verity -L pzbench -N $((inodes + inodes / 4 + 1000)) \
		-E root_owner=0:0 -d "$CACHE/disk" "$disk.tmp" "$((kib + kib / 4 + 262144))K" >/dev/null
	# mkfs.ext4 -d writes linear directories; the kernel hash-indexes a
	# directory once it outgrows a block, as an image directory copied or
	# pulled onto ext4 is. Without the index each blob lookup in
	# blobs/sha256 (3,834 entries) scans ~35 blocks. e2fsck -D builds it;
	# exit status 1 means "file system modified", here by that.
	rc=0
	nice -n 10 e2fsck -fyD "$disk.tmp" >/dev/null 2>&1 || rc=$?
	[ "$rc" -le 1 ] || die "e2fsck -fyD $disk.tmp exited $rc"
	mv "$disk.tmp" "$disk"
fi

tools=$OUT/tools
rm -rf "$tools"
mkdir -p "$tools"
gcc -O2 -Wall -static -o "$tools/pzbench" "$here/pzbench.c"
tsc_khz=$("$tools/pzbench" tsc-khz) || die "cannot measure the TSC's rate"
cp "$here/guest.sh" "$tools/guest.sh"
echo "bench tools" >"$tools/PZTOOLS"

# ---------------------------------------------------------------- the runs
# boot <label> <images dir> <file systems> <console log>: one boot.
boot() {
	local label=$1 images=$2 fs=$3 log=$4
	{
		echo "LABEL=$label"
		echo "REPS=$REPS"
		echo "FS='$fs'"
		echo "WORKLOADS='$WORKLOADS'"
		echo "TIMEOUT_S=$TIMEOUT_S"
		echo "NEG_LOOKUPS=$NEG_LOOKUPS POS_LOOKUPS=$POS_LOOKUPS RAND_READS=$RAND_READS"
		echo "PROFILE=$profile"
		echo "RA_KB=${BENCH_RA_KB:-}"
	} >"$tools/params.sh"
	rm -f "$OUT/tools.ext4"
	mkfs.ext4 -q -F -t ext4 -L pztools -E root_owner=0:0 -d "$tools" "$OUT/tools.ext4" 16M
	say "boot $label ($images), file systems: $fs; REPS=$REPS"
	local gdb=() sampler=
	if [ -n "$profile" ]; then
		local port
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		gdb=(-gdb "tcp:127.0.0.1:$port")
		python3 "$here/profile.py" sample "$port" "$log" "$OUT/profile-samples.txt" &
		sampler=$!
	fi
	# tsc=reliable: under TCG the clocksource watchdog compares the TSC (host
	# time) with jiffies, whose timer interrupts come late while the vCPUs are
	# busy, and falls back to jiffies (4 ms steps at HZ=250): a 3 ms mount
	# then reads 0 or 4 ms. tsc_early_khz: the guest's TSC counts at the
	# host's rate, and its calibration against the PIT failed in 6 boots of 11
	# on a quiet two-core host ("tsc: Unable to calibrate against PIT"),
	# leaving it on jiffies as well. Should a boot still run on jiffies,
	# guest.sh stops at once and the boot is made again.
	local try
	for try in 1 2 3 4; do
		PUZZLEFS_APPEND="${PUZZLEFS_APPEND:-} tsc=reliable tsc_early_khz=$tsc_khz" \
			PUZZLEFS_MEM=${BENCH_MEM:-4096} nice -n 10 expect "$here/boot.exp" "$images" "$log" \
			"${BENCH_MAX_S:-21600}" \
			-drive "file=$disk,if=virtio,format=raw,snapshot=on${BENCH_DISK_CACHE:+,cache=$BENCH_DISK_CACHE}" \
			-drive "file=$OUT/tools.ext4,if=virtio,format=raw,snapshot=on" "${gdb[@]}" \
			|| die "the $label run did not finish (console: $log)"
		grep -aq '@@bench error: clocksource' "$log" || break
		[ "$try" -lt 4 ] || die "the $label boots ran on jiffies 4 times (console: $log)"
		say "the $label boot runs on jiffies (the TSC was not calibrated): booting again"
	done
	if [ -n "$sampler" ]; then
		wait "$sampler" || die "the profiler failed"
		python3 "$here/profile.py" report "$log" "$OUT/profile-samples.txt" \
			"${BENCH_SYSTEM_MAP:-$(cat "$O/build/linux-dir")/System.map}" "$OUT/profile.md"
	fi
}

# BENCH_PREPARE_ONLY=1: stop once the bench disk is made (no boot).
[ -n "${BENCH_PREPARE_ONLY:-}" ] && { say "bench disk ready: $disk"; exit 0; }
for f in "$IMAGES/bzImage" "$IMAGES/rootfs.cpio"; do
	[ -e "$f" ] || die "$f missing (run make first)"
done
rm -f "$OUT"/console-*.log "$OUT"/profile*
profile=${BENCH_PROFILE:-}
rounds=${BENCH_ROUNDS:-1}
case $rounds in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive number, not '$rounds'" ;; esac
cur=${BENCH_LABEL:-cur} prev=${BENCH_PREV_LABEL:-prev}
# The other build's boots run erofs too when this one does: a boot can be
# slower than another in everything (the same build's cold readdir + lstat
# took 1,050 ms in one boot and 490 in the next), so report.py also compares
# each boot's puzzlefs with its own erofs.
pfs=""
for f in $FS; do case $f in puzzlefs* | erofs) pfs="$pfs $f" ;; esac; done
logs=()
for ((round = 1; round <= rounds; round++)); do
	sfx=
	[ "$rounds" -eq 1 ] || sfx=-$round
	[ "$rounds" -eq 1 ] || say "round $round of $rounds"
	boot "$cur" "$IMAGES" "$FS" "$OUT/console-$cur$sfx.log"
	logs+=("$OUT/console-$cur$sfx.log")
	# Only the first boot is profiled.
	profile=
	if [ -n "${BENCH_IMAGES_PREV:-}" ]; then
		boot "$prev" "$BENCH_IMAGES_PREV" "${pfs# }" "$OUT/console-$prev$sfx.log"
		logs+=("$OUT/console-$prev$sfx.log")
	fi
done

{
	echo "tree: $(du -sm "$tree/debian" | cut -f1) MiB, $(find "$tree/debian" | wc -l) entries in debian/;" \
		"big/32M.bin, big/128M.bin; many/ with $(find "$tree/many" -type f | wc -l) entries"
	echo "images (KiB): $(cd "$img" && du -sk pz-plain pz-zstd tree.erofs tree-lz4hc.erofs tree-zstd.sqfs pz-versions tree-v[123].erofs | awk '{ printf "%s %s, ", $2, $1 }')"
	echo "guest: $(grep -ho 'kernel [^,]*' "${logs[0]}" | head -n1 | tr -d '\r'), ${BENCH_MEM:-4096} MiB, TCG;" \
		"REPS=$REPS ROUNDS=$rounds TIMEOUT_S=$TIMEOUT_S NEG_LOOKUPS=$NEG_LOOKUPS POS_LOOKUPS=$POS_LOOKUPS RAND_READS=$RAND_READS"
} >"$OUT/setup.txt"
python3 "$here/report.py" "$OUT" "${logs[@]}"
