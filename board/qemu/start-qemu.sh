#!/bin/sh
# Boot the PuzzleFS appliance: start-qemu.sh [images-dir] [extra qemu args...]
# Console on this terminal (Ctrl-A X quits QEMU). `poweroff` in the guest
# ends QEMU (the guest resets, and -no-reboot exits on a reset). KVM is
# present on the project's machines but guests crash there, so TCG is the
# default; PUZZLEFS_ACCEL=kvm picks KVM where it works.
set -eu
IMAGES=${1:-$(dirname "$0")/../../output/images}
[ $# -gt 0 ] && shift
for f in bzImage rootfs.cpio; do
	[ -r "$IMAGES/$f" ] || { echo "start-qemu: $IMAGES/$f missing (run: make)" >&2; exit 1; }
done
# The data disk (board/qemu/post-fakeroot.d/99-data-disk.sh), if there is one:
# snapshot=on keeps guest writes in a temporary overlay, so every boot sees
# the disk as built. werror/rerror=report: if the host cannot write the
# overlay (a full disk), the guest gets EIO at once instead of QEMU pausing
# it, which a test would only see as a timeout.
# Extra disks for benchmarks come as QEMU arguments after the images dir.
[ -r "$IMAGES/disk.ext4" ] && set -- -drive "file=$IMAGES/disk.ext4,if=virtio,format=raw,snapshot=on,werror=report,rerror=report" "$@"
# One CPU per socket: without ACPI the kernel learns the CPUs from SeaBIOS's
# MP table, which lists the first CPU of each package only. With plain
# `-smp 2` (one socket of two cores) the guest ran on one CPU.
cpus=${PUZZLEFS_SMP:-2}
exec qemu-system-x86_64 \
	-accel "${PUZZLEFS_ACCEL:-tcg}" \
	-m "${PUZZLEFS_MEM:-1024}" -smp "cpus=$cpus,sockets=$cpus,cores=1,threads=1" \
	-kernel "$IMAGES/bzImage" -initrd "$IMAGES/rootfs.cpio" \
	-append "console=ttyS0 loglevel=5 panic=-1 ${PUZZLEFS_APPEND:-}" \
	-nographic -no-reboot -nic none \
	"$@"
