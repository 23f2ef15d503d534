# Sourced: the one way this project invokes the kernel's make (host build,
# tests, series export), so the toolchain is named in one place.
# Kernel Rust needs rustc 1.96 with rust-src (Debian's rustc-web), not the
# rustup toolchain that may be first on PATH.
KERNEL_RUSTC=${KERNEL_RUSTC:-/usr/bin/rustc}
KERNEL_BINDGEN=${KERNEL_BINDGEN:-$(PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH" command -v bindgen || echo bindgen)}
KERNEL_RUST_LIB_SRC=${KERNEL_RUST_LIB_SRC:-/usr/lib/rustlib/src/rust/library}

# The kernel's own O= must not come from our make's command line (make
# passes it down in MAKEFLAGS): `make O=<dir>` places this project's output,
# the kernel is always built in its tree.
kmake() {
	env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS make -C "$LINUX_DIR" ARCH=x86_64 LLVM=-19 \
		RUSTC="$KERNEL_RUSTC" BINDGEN="$KERNEL_BINDGEN" \
		RUSTFMT=/usr/bin/rustfmt CLIPPY_DRIVER=/usr/bin/clippy-driver \
		RUSTDOC=/usr/bin/rustdoc \
		RUST_LIB_SRC="$KERNEL_RUST_LIB_SRC" \
		LIBCLANG_PATH=/usr/lib/llvm-19/lib "$@"
}
