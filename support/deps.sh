#!/bin/sh
# Install, idempotently, everything the host build needs (Debian 12 packages
# and crates.io tools). One line per step. Without root or apt it stops with
# the exact list of what is missing.
#
#   support/deps.sh          install what is missing
#   support/deps.sh --check  only report; exit 1 if something is missing
set -eu

# Debian package -> a file it installs (how we tell it is there).
PKGS="
linux-source-6.12:/usr/src/linux-source-6.12.tar.xz
rustc-web:/usr/bin/rustc
rust-web-src:/usr/lib/rustlib/src/rust/library/core/src/lib.rs
rust-web-clippy:/usr/bin/clippy-driver
rustfmt-web:/usr/bin/rustfmt
clang-19:/usr/bin/clang-19
lld-19:/usr/bin/ld.lld-19
llvm-19:/usr/bin/llvm-ar-19
libclang-19-dev:/usr/lib/llvm-19/lib/libclang.so
qemu-system-x86:/usr/bin/qemu-system-x86_64
expect:/usr/bin/expect
busybox-static:/bin/busybox
capnproto:/usr/bin/capnp
cpio:/usr/bin/cpio
bc:/usr/bin/bc
flex:/usr/bin/flex
bison:/usr/bin/bison
libelf-dev:/usr/include/libelf.h
libssl-dev:/usr/include/openssl/ssl.h
kmod:/usr/sbin/depmod
xz-utils:/usr/bin/xz
patch:/usr/bin/patch
make:/usr/bin/make
erofs-utils:/usr/bin/mkfs.erofs
squashfs-tools:/usr/bin/mksquashfs
attr:/usr/bin/getfattr
gcc:/usr/bin/gcc
binutils:/usr/bin/readelf
libc6-dev:/usr/lib/x86_64-linux-gnu/libc.a
python3:/usr/bin/python3
python3-magic:/usr/lib/python3/dist-packages/magic/__init__.py
python3-flake8:/usr/lib/python3/dist-packages/flake8/__init__.py
shellcheck:/usr/bin/shellcheck
python3-nose2:/usr/lib/python3/dist-packages/nose2/__init__.py
python3-pexpect:/usr/lib/python3/dist-packages/pexpect/__init__.py
fsverity:/usr/bin/fsverity
zstd:/usr/bin/zstd
python3-docutils:/usr/lib/python3/dist-packages/docutils/__init__.py
python3-ply:/usr/lib/python3/dist-packages/ply/__init__.py
python3-git:/usr/lib/python3/dist-packages/git/__init__.py
e2fsprogs:/sbin/mkfs.ext4
"
BINDGEN_VERSION=0.73.2

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

note() { printf 'deps: %s\n' "$*"; }

missing=""
for entry in $PKGS; do
	pkg=${entry%%:*}
	file=${entry#*:}
	if [ -e "$file" ]; then
		note "$pkg: present"
	else
		missing="$missing $pkg"
	fi
done

cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
bindgen_ok=0
if PATH="$cargo_bin:$PATH" command -v bindgen >/dev/null 2>&1; then
	bindgen_ok=1
	note "bindgen-cli: present"
fi

if [ -z "$missing" ] && [ $bindgen_ok = 1 ]; then
	note "all present"
	exit 0
fi

if [ $check_only = 1 ]; then
	[ -n "$missing" ] && note "missing Debian packages:$missing"
	[ $bindgen_ok = 0 ] && note "missing crates.io tool: bindgen-cli $BINDGEN_VERSION"
	exit 1
fi

if [ -n "$missing" ] && { [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; }; then
	note "cannot install (need root and apt-get); install these Debian packages:$missing"
	[ $bindgen_ok = 0 ] && note "and: cargo install --locked bindgen-cli@$BINDGEN_VERSION"
	exit 1
fi
if [ $bindgen_ok = 0 ] && ! command -v cargo >/dev/null 2>&1; then
	note "cannot install bindgen-cli: no cargo on PATH"
	exit 1
fi

# bindgen-cli is built beside the Debian install (CI starts from a fresh
# machine: the two took 100 s each, one after the other). Its libclang is
# loaded at run time, so the build does not need libclang-19-dev yet.
bindgen_pid=
if [ $bindgen_ok = 0 ]; then
	note "cargo install --locked bindgen-cli@$BINDGEN_VERSION"
	LIBCLANG_PATH=/usr/lib/llvm-19/lib cargo install --quiet --locked "bindgen-cli@$BINDGEN_VERSION" &
	bindgen_pid=$!
fi
apt_status=0
if [ -n "$missing" ]; then
	note "apt-get update"
	# One transaction: apt and dpkg's fixed cost (reading their databases,
	# running triggers) once, not once per package.
	note "apt-get install$missing"
	# shellcheck disable=SC2086 # one word per package
	{ apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null; } ||
		apt_status=$?
fi
if [ -n "$bindgen_pid" ] && ! wait "$bindgen_pid"; then
	note "cargo install bindgen-cli@$BINDGEN_VERSION failed"
	exit 1
fi
if [ "$apt_status" != 0 ]; then
	note "apt-get failed (status $apt_status) installing:$missing"
	exit 1
fi
note "done"
