################################################################################
#
# puzzlefs
#
################################################################################

# Linux extension of the puzzlefs package: Buildroot adds puzzlefs to
# LINUX_PATCH_DEPENDENCIES (so its sources are synced first) and runs
# PUZZLEFS_PREPARE_KERNEL as a linux pre-patch hook, i.e. after the
# kernel is extracted and before BR2_GLOBAL_PATCH_DIR/linux/*.patch
# are applied (the glue patches expect the copied files to be there).
LINUX_EXTENSIONS += puzzlefs

ifeq ($(BR2_LINUX_KERNEL_EXT_PUZZLEFS),y)

# The variables below are linux ones; they are set here, and not from
# external.mk, because Buildroot includes this file from linux/linux.mk
# before it instantiates the linux package, while external.mk is read
# afterwards, too late for dependencies.

# prepare-tree.sh runs in the pre-patch hook: capnp (to generate the
# schema code) and cargo (to fetch the capnp and hex crate sources)
# must be installed before linux is extracted.
LINUX_EXTRACT_DEPENDENCIES += host-capnproto host-rustc

# Rust for Linux: Buildroot has no kernel Rust switch. The tools must
# be there by the time the kernel configuration is generated, or
# scripts/rust_is_available.sh fails and olddefconfig silently drops
# CONFIG_RUST. LLVM=1 makes Kbuild use clang, ld.lld and the llvm-*
# binutils; host-llvm installs those tools, host-clang also provides the
# libclang that bindgen loads.
LINUX_KCONFIG_DEPENDENCIES += \
	host-clang \
	host-lld \
	host-llvm \
	host-rust-bindgen \
	host-rustc

# Kbuild passes HOSTCC to rustc as -Clinker=$(HOSTCC) (proc macros and
# Rust host programs), which needs a single word: Buildroot's default
# HOSTCC="gcc <flags>" breaks it, so move the flags to HOSTCFLAGS and
# HOSTLDFLAGS, which Kbuild appends to its own.
LINUX_MAKE_FLAGS += \
	LLVM=1 \
	HOSTCC="$(HOSTCC_NOCCACHE)" \
	HOSTCFLAGS="$(HOST_CFLAGS)" \
	HOSTLDFLAGS="$(HOST_LDFLAGS)" \
	RUST_LIB_SRC=$(PUZZLEFS_RUST_LIB_SRC)

# bindgen (clang-sys) loads libclang at run time.
LINUX_MAKE_ENV += LIBCLANG_PATH=$(HOST_DIR)/lib

# The kernel builds `core` itself from the Rust standard library
# sources, which must match rustc exactly.
ifeq ($(BR2_PACKAGE_HOST_RUST),y)
# host-rust is built from the rustc source tarball, which has them.
PUZZLEFS_RUST_LIB_SRC = $(HOST_RUST_DIR)/library
else
# host-rust-bin installs no rust-src component: fetch the one released
# with the same pre-built compiler. Buildroot's linux.hash cannot list
# it (it is not ours), hence no hash check; upstream publishes
# $(PUZZLEFS_RUST_SRC).sha256 next to it.
PUZZLEFS_RUST_SRC = rust-src-$(RUST_BIN_VERSION).tar.xz
LINUX_EXTRA_DOWNLOADS += https://static.rust-lang.org/dist/$(PUZZLEFS_RUST_SRC)
BR_NO_CHECK_HASH_FOR += $(PUZZLEFS_RUST_SRC)
PUZZLEFS_RUST_LIB_SRC = $(LINUX_DIR)/.br-rust-src/rust-src/lib/rustlib/src/rust/library

define PUZZLEFS_EXTRACT_RUST_SRC
	rm -rf $(@D)/.br-rust-src
	mkdir -p $(@D)/.br-rust-src
	$(call suitable-extractor,$(PUZZLEFS_RUST_SRC)) $(LINUX_DL_DIR)/$(PUZZLEFS_RUST_SRC) | \
		$(TAR) --strip-components=1 -C $(@D)/.br-rust-src $(TAR_OPTIONS) -
endef
endif

endif # BR2_LINUX_KERNEL_EXT_PUZZLEFS

# $(@D) is the linux source directory. prepare-tree.sh copies the
# driver, the Rust VFS abstractions, the puzzlefs-format crate, the
# generated capnp code and the capnp and hex crate sources into it.
# Fetching those crates needs the network, as any cargo download does.
define PUZZLEFS_PREPARE_KERNEL
	$(PUZZLEFS_EXTRACT_RUST_SRC)
	$(HOST_MAKE_ENV) \
		CAPNP=$(HOST_DIR)/bin/capnp \
		CARGO=$(HOST_DIR)/bin/cargo \
		CARGO_HOME=$(BR_CARGO_HOME) \
		$(PUZZLEFS_DIR)/kernel/prepare-tree.sh $(@D)
endef
