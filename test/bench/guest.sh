#!/bin/sh
# `make bench`, guest side (busybox sh): mounts each file system built from
# the bench tree, runs every workload through pzbench (cold = after
# sync + drop_caches, warm = right after), prints one line per run:
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

# The bench data disk: the virtio disk whose root holds PZBENCH. Without a
# data disk it is /dev/vda, which rcS has already mounted on /disk.
mkdir -p /bd
for d in /dev/vd?; do
	mp=$(awk -v d="$d" '$1 == d { print $2; exit }' /proc/mounts)
	if [ -n "$mp" ]; then
		# Read-only, so that no ext4 background work (lazy inode
		# table init) runs during the measurements.
		[ -f "$mp/PZBENCH" ] && mount -o remount,ro "$mp" && mount --bind "$mp" /bd && break
		continue
	fi
	mount -t ext4 -o ro "$d" /bd 2>/dev/null || continue
	[ -f /bd/PZBENCH ] && break
	umount /bd
done
[ -f /bd/PZBENCH ] || { say "error: no bench data disk (a virtio disk with /PZBENCH)"; echo "@@bench-end@@"; exit 1; }
say "data disk: $(cat /bd/PZBENCH)"
modprobe puzzlefs || { say "error: modprobe puzzlefs failed"; echo "@@bench-end@@"; exit 1; }
say "kernel $(uname -r), $(grep MemTotal /proc/meminfo | tr -s ' ')"

drop() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
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
	erofs-lz4hc) $PZB mount /bd/img/tree-lz4hc.erofs "$2" erofs "" >/dev/null ;;
	squashfs-zstd) mount -t squashfs -o loop,ro /bd/img/tree-zstd.sqfs "$2" ;;
	puzzlefs) $PZB mount none "$2" puzzlefs "$(pzopts pz-plain)" >/dev/null ;;
	puzzlefs-zstd) $PZB mount none "$2" puzzlefs "$(pzopts pz-zstd)" >/dev/null ;;
	*) say "error: unknown file system $1"; return 1 ;;
	esac
}

want() { # <workload>: is it in WORKLOADS?
	case " $WORKLOADS " in *" $1 "*) return 0 ;; esac
	return 1
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
			[ "$mode" = cold ] && drop
			if r=$($PZB "$@" 2>&1); then :; else r="error=$(echo "$r" | tr ' \n' '__')"; fi
			echo "@@R label=$LABEL fs=$fs wl=$wl mode=$mode rep=$rep $r"
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
	bench readall readall $m/debian
	bench stat stat $m/debian
	bench seq32 seq $m/big/32M.bin
	bench seq128 seq $m/big/128M.bin
	bench rand rand $m/big/128M.bin "$RAND_READS" 42
	bench neg lookup $m/many "$NEG_LOOKUPS" 7 100000 neg
	bench pos lookup $m/many "$POS_LOOKUPS" 11 100000 pos
	umount $m
done

# Mount time of puzzlefs images with 10, 10,000 and 100,000 inodes (the
# mount alone: each run mounts, is timed, then unmounts untimed).
fs=puzzlefs
for n in 10 10k 100k; do
	want "mount$n" || continue
	case " $FS " in *" puzzlefs "*) ;; *) continue ;; esac
	for mode in cold warm; do
		rep=1
		while [ "$rep" -le "$REPS" ]; do
			[ "$mode" = cold ] && drop
			r=$($PZB mount none /b/mt puzzlefs "$(pzopts pz-m$n)" 2>&1) || r="error=$(echo "$r" | tr ' \n' '__')"
			echo "@@R label=$LABEL fs=$fs wl=mount$n mode=$mode rep=$rep $r"
			umount /b/mt 2>/dev/null
			rep=$((rep + 1))
		done
	done
done
echo "@@bench-end@@"
