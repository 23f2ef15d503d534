#!/bin/sh
# `make bench`, guest side (busybox sh): mounts each file system built from
# the bench tree, runs every workload through pzbench (cold = after a new
# mount and sync + drop_caches, warm = right after), prints one line per run:
#   @@R label=L fs=F wl=W mode=cold|warm rep=N ms=... ops=... bytes=... cached_kib=... timeout=0|1
# and @@bench-end@@ when done. The host (test/bench/report.py) takes the medians.
# Settings come from params.sh next to this script (written by bench.sh).
set -u
here=$(dirname "$0")
# shellcheck source=/dev/null
. "$here/params.sh"
PZB=$here/pzbench
export PZB_TIMEOUT_MS=$((TIMEOUT_S * 1000))

say() { echo "@@bench $*"; }
want() { # <workload>: is it in WORKLOADS?
	case " $WORKLOADS " in *" $1 "*) return 0 ;; esac
	return 1
}
want_fs() { # <file system>: is it in FS?
	case " $FS " in *" $1 "*) return 0 ;; esac
	return 1
}

# The bench data disk: the virtio disk whose root holds PZBENCH. Without a
# data disk it is /dev/vda, which rcS has already mounted on /disk.
# Before it is made read-only, fs-verity is enabled on the mount images for
# vmount* and on pz-verity, a copy of the plain image, for puzzlefs-verity
# (the disk is a QEMU snapshot: each boot enables it again).
verity_setup() { # <mount point of the bench disk>
	if want_fs puzzlefs-verity; then
		t0=$(date +%s)
		out=$(puzzlefs -q enable-fs-verity "$1/img/pz-verity/oci" bench 2>&1) ||
			say "error: enable-fs-verity pz-verity: $out"
		say "pz-verity: fs-verity enabled in $(($(date +%s) - t0)) s"
	fi
	want vmount10 || want vmount10k || want vmount100k || return 0
	for n in 10 10k 100k; do
		out=$(puzzlefs -q enable-fs-verity "$1/img/pz-m$n/oci" bench 2>&1) ||
			say "error: enable-fs-verity pz-m$n: $out"
	done
}
mkdir -p /bd
for d in /dev/vd?; do
	mp=$(awk -v d="$d" '$1 == d { print $2; exit }' /proc/mounts)
	if [ -n "$mp" ]; then
		[ -f "$mp/PZBENCH" ] || continue
		verity_setup "$mp"
		# Read-only, so that no ext4 background work (lazy inode
		# table init) runs during the measurements.
		mount -o remount,ro "$mp" && mount --bind "$mp" /bd && break
		continue
	fi
	mount -t ext4 "$d" /bd 2>/dev/null || continue
	if [ -f /bd/PZBENCH ]; then
		verity_setup /bd
		mount -o remount,ro /bd && break
	fi
	umount /bd
done
[ -f /bd/PZBENCH ] || { say "error: no bench data disk (a virtio disk with /PZBENCH)"; echo "@@bench-end@@"; exit 1; }
say "data disk: $(cat /bd/PZBENCH)"
modprobe puzzlefs || { say "error: modprobe puzzlefs failed"; echo "@@bench-end@@"; exit 1; }
# Profiled (bench.sh BENCH_PROFILE=1): the module's symbols for profile.py.
if [ -n "${PROFILE:-}" ]; then
	awk '$2 ~ /^[tT]$/ && $4 == "[puzzlefs]" { print "@@SYM", $1, $2, $3 }' /proc/kallsyms
	# A few of vmlinux's, for profile.py to check the System.map it is given.
	awk 'NF == 3 && ($3 == "filemap_read" || $3 == "vfs_read" || $3 == "schedule") { print "@@KSYM", $1, $3 }' /proc/kallsyms
fi
say "kernel $(uname -r), $(grep MemTotal /proc/meminfo | tr -s ' ')"
# Timings are as fine as the clock: jiffies would be 4 ms steps.
cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
say "clocksource $cs; $(dmesg | grep -E 'tsc: (Detected|Unable)' | sed 's/^\[[^]]*\] //' | tr '\n' ' ')"
# bench.sh boots again when this boot stops here (the TSC failed its
# calibration against the PIT, which a busy host makes happen under TCG).
case $cs in *jiffies*)
	say "error: clocksource $cs: timings would be in jiffies"
	echo "@@bench-end@@"
	exit 1
	;;
esac

# Reads from the bench data disk so far: "<requests> <sectors>" (fields 1
# and 3 of /sys/block/<disk>/stat), to show what each run cost the disk;
# then the CPU time all CPUs spent busy and waiting for I/O, in ticks of
# /proc/stat (user+nice+system+irq+softirq, iowait), to tell the two apart.
bdisk=$(awk '$2 == "/bd" { sub("^/dev/", "", $1); print $1; exit }' /proc/mounts)
iost() {
	# shellcheck disable=SC2046 # the fields
	set -- $(cat "/sys/block/$bdisk/stat" 2>/dev/null || echo 0 0 0)
	echo "$1 $3 $(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $6; exit }' /proc/stat)"
}
# iodelta <before> <after>: the fields of an @@R line for what iost counted.
iodelta() {
	# shellcheck disable=SC2086 # the fields
	# /proc/stat counts in USER_HZ, 100 on x86.
	echo $1 $2 | awk -v hz=100 '{
		printf "io_reads=%d io_kib=%d cpu_ms=%d iowait_ms=%d",
			$5 - $1, ($6 - $2) / 2, ($7 - $3) * 1000 / hz, ($8 - $4) * 1000 / hz }'
}

drop() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# ra: BENCH_RA_KB, the readahead window of puzzlefs mounts (their bdi is
# puzzlefs-<n>; the mount of the previous file system is gone).
ra() {
	[ -n "${RA_KB:-}" ] || return 0
	for b in /sys/class/bdi/puzzlefs-*/read_ahead_kb; do
		[ -f "$b" ] && echo "$RA_KB" >"$b" && say "$b: $(cat "$b")"
	done
	return 0
}

# cold: what a cold run starts from: the file system mounted again, then the
# caches dropped. drop_caches alone leaves what a mount keeps for itself:
# puzzlefs keeps each metadata page it read and checked, and the link counts,
# for as long as it is mounted. tmpfs is not mounted again (its files would
# be gone).
cold() {
	if [ "$fs" != tmpfs ]; then
		umount $m && mnt "$fs" $m && ra || return 1
	fi
	drop
}

pzopts() { # <image name under /bd/img>
	echo "oci_root_dir=/bd/img/$1/oci,image_manifest=$(cat "/bd/img/$1.digest")"
}

# mnt <fs> <dir>: mount one file system of the bench tree on <dir>.
# erofs goes through mount(2) directly (file-backed: busybox mount would put
# a loop device under it); squashfs on a loop device.
mnt() {
	case $1 in
	tmpfs) mount -t tmpfs -o size=3g tmpfs "$2" && tar -C "$2" -xf /bd/tree.tar ;;
	erofs) $PZB mount /bd/img/tree.erofs "$2" erofs "" >/dev/null ;;
	# The same image read with direct I/O: no page cache for the image file.
	erofs-dio) $PZB mount /bd/img/tree.erofs "$2" erofs "directio" >/dev/null ;;
	erofs-lz4hc) $PZB mount /bd/img/tree-lz4hc.erofs "$2" erofs "" >/dev/null ;;
	squashfs-zstd) mount -t squashfs -o loop,ro /bd/img/tree-zstd.sqfs "$2" ;;
	puzzlefs) $PZB mount none "$2" puzzlefs "$(pzopts pz-plain)" >/dev/null ;;
	puzzlefs-zstd) $PZB mount none "$2" puzzlefs "$(pzopts pz-zstd)" >/dev/null ;;
	# A copy of the plain image with fs-verity on every blob: metadata read
	# page by page, every chunk checked by fs-verity as ext4 reads it.
	puzzlefs-verity) $PZB mount none "$2" puzzlefs "$(pzopts pz-verity),verity=require" >/dev/null ;;
	*) say "error: unknown file system $1"; return 1 ;;
	esac
}


# bench <workload> <pzbench args...>: REPS cold runs, then REPS warm runs.
# After a run that timed out, the other runs of that workload are skipped
# (the one that timed out says how far it got).
bench() {
	wl=$1
	shift
	want "$wl" || return 0
	for mode in cold warm; do
		rep=1
		while [ "$rep" -le "$REPS" ]; do
			if [ "$mode" = cold ] && ! cold; then
				echo "@@R label=$LABEL fs=$fs wl=$wl mode=$mode rep=$rep error=remount_failed"
				return 0
			fi
			s0=$(iost)
			echo "@@T"
			if r=$($PZB "$@" 2>&1); then :; else r="error=$(echo "$r" | tr ' \n' '__')"; fi
			s1=$(iost)
			io=$(iodelta "$s0" "$s1")
			echo "@@R label=$LABEL fs=$fs wl=$wl mode=$mode rep=$rep $r $io"
			case $r in *timeout=1*|error=*) return 0 ;; esac
			rep=$((rep + 1))
		done
	done
}

m=/b/fs
mkdir -p $m /b/mt
for fs in $FS; do
	say "fs $fs"
	t0=$(date +%s)
	mnt "$fs" $m || { echo "@@R label=$LABEL fs=$fs wl=mount-tree mode=cold rep=1 error=mount_failed"; continue; }
	say "fs $fs mounted in $(($(date +%s) - t0)) s"
	ra
	bench readall readall $m/debian
	bench stat stat $m/debian
	bench seq32 seq $m/big/32M.bin
	bench seq128 seq $m/big/128M.bin
	bench rand rand $m/big/128M.bin "$RAND_READS" 42
	bench neg lookup $m/many "$NEG_LOOKUPS" 7 100000 neg
	bench pos lookup $m/many "$POS_LOOKUPS" 11 100000 pos
	umount $m
done

# Three versions of debian/ side by side (bench.sh says how they differ):
# all three mounted, then each read whole in turn, cold at the start only, as
# three containers of successive versions of one image would. One line per
# repetition with the sums of the three reads and the growth of the page
# cache and the disk reads over all three.
if want versions; then
	for fs in $FS; do
		case $fs in puzzlefs | erofs) ;; *) continue ;; esac
		rep=1
		while [ "$rep" -le "$REPS" ]; do
			ok=1
			for v in 1 2 3; do
				mkdir -p /b/v$v
				case $fs in
				erofs) $PZB mount /bd/img/tree-v$v.erofs /b/v$v erofs "" >/dev/null || ok=0 ;;
				puzzlefs) $PZB mount none /b/v$v puzzlefs \
					"oci_root_dir=/bd/img/pz-versions/oci,image_manifest=$(cat /bd/img/pz-versions.v$v.digest)" \
					>/dev/null || ok=0 ;;
				esac
			done
			drop
			s0=$(iost)
			sums="0 0 0 0"
			echo "@@T"
			for v in 1 2 3; do
				[ "$ok" = 1 ] || break
				r=$($PZB readall /b/v$v/) || { ok=0; break; }
				case $r in *timeout=1*) ok=0; break ;; esac
				sums=$(echo "$sums $r" | awk '{
					for (i = 5; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
					printf "%.3f %d %d %d", $1 + f["ms"], $2 + f["ops"], $3 + f["bytes"], $4 + f["cached_kib"] }')
			done
			s1=$(iost)
			io=$(iodelta "$s0" "$s1")
			for v in 1 2 3; do umount /b/v$v 2>/dev/null; done
			if [ "$ok" = 1 ]; then
				# shellcheck disable=SC2086 # the four sums
				set -- $sums
				echo "@@R label=$LABEL fs=$fs wl=versions mode=cold rep=$rep ms=$1 ops=$2 bytes=$3 cached_kib=$4 timeout=0 $io"
			else
				echo "@@R label=$LABEL fs=$fs wl=versions mode=cold rep=$rep error=mount_or_read_failed"
				break
			fi
			rep=$((rep + 1))
		done
	done
fi

# Mount time of puzzlefs images with 10, 10,000 and 100,000 inodes (the
# mount alone: each run mounts, is timed, then unmounts untimed).
# vmount*: the same images with fs-verity and verity=require (their metadata
# is read page by page, not read and hashed whole).
fs=puzzlefs
for wl in mount10 mount10k mount100k vmount10 vmount10k vmount100k; do
	want "$wl" || continue
	case " $FS " in *" puzzlefs "*) ;; *) continue ;; esac
	n=${wl#*mount}
	opts=$(pzopts "pz-m$n")
	case $wl in v*) opts=$opts,verity=require ;; esac
	for mode in cold warm; do
		rep=1
		while [ "$rep" -le "$REPS" ]; do
			[ "$mode" = cold ] && drop
			echo "@@T"
			r=$($PZB mount none /b/mt puzzlefs "$opts" 2>&1) || r="error=$(echo "$r" | tr ' \n' '__')"
			echo "@@R label=$LABEL fs=$fs wl=$wl mode=$mode rep=$rep $r"
			umount /b/mt 2>/dev/null
			rep=$((rep + 1))
		done
	done
done
echo "@@bench-end@@"
