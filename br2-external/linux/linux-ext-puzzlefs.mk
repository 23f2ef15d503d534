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

# The LINUX_* variables below are set here, and not from external.mk,
# because Buildroot includes this file from linux/linux.mk before it
# instantiates the linux package, while external.mk is read afterwards,
# too late for dependencies and downloads.

# The third-party crates compiled into the kernel (capnp), and
# capnpc with its dependencies to generate the schema readers: exactly
# package/puzzlefs/kernel/crates/Cargo.lock (make test compares them).
# They are linux downloads, so 'make source', legal-info and the hash
# check (<global patch dir>/linux/linux.hash: the Cargo.lock checksums)
# see them; prepare-tree.sh vendors them from $(LINUX_DL_DIR).
PUZZLEFS_KERNEL_CRATES = \
	capnp@0.27.3 \
	capnpc@0.27.0 \
	embedded-io@0.7.1
# check-package TypoInPackageVariable
LINUX_EXTRA_DOWNLOADS += \
	$(foreach c,$(PUZZLEFS_KERNEL_CRATES),https://static.crates.io/crates/$(firstword $(subst @, ,$(c)))/$(subst @,-,$(c)).crate)

# prepare-tree.sh runs in the pre-patch hook: capnp (to generate the
# schema code) and cargo (to build the capnpc-rust plugin) must be
# installed before linux is extracted.
# check-package TypoInPackageVariable
LINUX_EXTRACT_DEPENDENCIES += host-capnproto host-rustc

# Rust for Linux: Buildroot has no kernel Rust switch. The tools must
# be there by the time the kernel configuration is generated, or
# scripts/rust_is_available.sh fails and olddefconfig silently drops
# CONFIG_RUST. LLVM=1 makes Kbuild use clang, ld.lld and the llvm-*
# binutils; host-llvm installs those tools, host-clang also provides the
# libclang that bindgen loads (host-lld is selected in Config.ext.in).
# check-package TypoInPackageVariable
LINUX_KCONFIG_DEPENDENCIES += \
	host-clang \
	host-lld \
	host-llvm \
	host-rust-bindgen \
	host-rustc

# Kbuild passes HOSTCC to rustc as -Clinker=$(HOSTCC) (proc macros and
# Rust host programs), which needs a single word: Buildroot's default
# HOSTCC="gcc <flags>" breaks it, so move the flags to HOSTCFLAGS and
# HOSTLDFLAGS, which Kbuild appends to its own. -isystem, not -I, for
# $(HOST_DIR)/include, as linux.mk does for HOSTCC (objtool).
# check-package TypoInPackageVariable
LINUX_MAKE_FLAGS += \
	LLVM=1 \
	HOSTCC="$(HOSTCC_NOCCACHE)" \
	HOSTCFLAGS="$(subst -I/,-isystem /,$(subst -I /,-isystem /,$(HOST_CFLAGS)))" \
	HOSTLDFLAGS="$(HOST_LDFLAGS)" \
	RUST_LIB_SRC=$(PUZZLEFS_RUST_LIB_SRC)

# bindgen (clang-sys) loads libclang at run time.
# check-package TypoInPackageVariable
LINUX_MAKE_ENV += LIBCLANG_PATH=$(HOST_DIR)/lib

# The kernel builds `core` itself from the Rust standard library
# sources, which must match rustc exactly.
ifeq ($(BR2_PACKAGE_HOST_RUST),y)
# host-rust is built from the rustc source tarball, which has them.
PUZZLEFS_RUST_LIB_SRC = $(HOST_RUST_DIR)/library
else
# host-rust-bin installs no rust-src component: take library/ from the
# source tarball of the same release, the file host-rust downloads (its
# hash, from package/rust/rust.hash, is in the tree's linux.hash).
PUZZLEFS_RUST_SRC = rustc-$(RUST_BIN_VERSION)-src.tar.xz
# check-package TypoInPackageVariable
LINUX_EXTRA_DOWNLOADS += https://static.rust-lang.org/dist/$(PUZZLEFS_RUST_SRC)
PUZZLEFS_RUST_LIB_SRC = $(LINUX_DIR)/.br-rust-src/library

define PUZZLEFS_EXTRACT_RUST_SRC
	rm -rf $(@D)/.br-rust-src
	mkdir -p $(@D)/.br-rust-src
	$(call suitable-extractor,$(PUZZLEFS_RUST_SRC)) $(LINUX_DL_DIR)/$(PUZZLEFS_RUST_SRC) | \
		$(TAR) --strip-components=1 -C $(@D)/.br-rust-src $(TAR_OPTIONS) - \
			rustc-$(RUST_BIN_VERSION)-src/library
endef
endif

# olddefconfig drops CONFIG_RUST without a word when a tool is missing
# or too old, and the driver with it: stop there instead of building a
# kernel without it.
define PUZZLEFS_CHECK_KERNEL_CONFIG
	for opt in CONFIG_RUST CONFIG_PUZZLEFS_FS; do \
		grep -Eq "^$$opt=[ym]$$" $(LINUX_DIR)/.config || { \
			echo "puzzlefs: $$opt is not enabled after olddefconfig" \
				"(see scripts/rust_is_available.sh)" >&2; \
			exit 1; \
		}; \
	done
endef
# check-package TypoInPackageVariable
LINUX_POST_CONFIGURE_HOOKS += PUZZLEFS_CHECK_KERNEL_CONFIG

endif # BR2_LINUX_KERNEL_EXT_PUZZLEFS

# $(@D) is the linux source directory. prepare-tree.sh copies the
# driver, the Rust VFS abstractions, the puzzlefs-format crate, the
# generated capnp code and the crate sources into it, offline: the
# crates come from $(LINUX_DL_DIR), already hash-checked.
define PUZZLEFS_PREPARE_KERNEL
	$(PUZZLEFS_EXTRACT_RUST_SRC)
	$(HOST_MAKE_ENV) \
		CAPNP=$(HOST_DIR)/bin/capnp \
		CARGO=$(HOST_DIR)/bin/cargo \
		CARGO_HOME=$(BR_CARGO_HOME) \
		PUZZLEFS_KERNEL_CRATES_DL=$(LINUX_DL_DIR) \
		$(PUZZLEFS_DIR)/kernel/prepare-tree.sh $(@D)
endef
