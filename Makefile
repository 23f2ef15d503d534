# PuzzleFS test appliance: top-level entry point.
#
#   make puzzlefs_qemu_defconfig   select the appliance (writes $(O)/.config)
#   make                           build bzImage + rootfs.cpio
#   make run                       boot it in QEMU, console on this terminal
#   make test                      build what is missing, cargo tests, boot once, run test/cases
#   make test-debug                the suite (and test/debug) on a KASAN + kmemleak kernel, in $(O)/debug
#   make test-buildroot            (in make test) this tree checked by Buildroot's own code (../shared/buildroot)
#   make fuzz N=.. SEED=..         the mutation campaign: N mutants (seeded), appliance kernel
#   make fuzz-debug N=.. SEED=..   the same on the debug kernel ($(O)/debug)
#
# With BUILDROOT=<path to a Buildroot checkout> every target is delegated to
# that Buildroot with BR2_EXTERNAL=br2-external. Without it the host build
# runs: the same appliance from Debian packages, reading the same defconfig
# (kernel fragments, global patch dir, overlay, post-build/fakeroot/image scripts).

O ?= $(CURDIR)/output
override O := $(abspath $(O))
TOP := $(CURDIR)

ifneq ($(BUILDROOT),)
# ---------------------------------------------------------------- Buildroot
.DEFAULT_GOAL := all
BR_MAKE = $(MAKE) -C $(BUILDROOT) BR2_EXTERNAL=$(TOP)/br2-external O=$(O)
run: all
	board/qemu/start-qemu.sh $(O)/images
test: test-buildroot all
	IMAGES=$(O)/images expect test/run.exp
# The Buildroot-side checks of this tree, run by this checkout.
test-buildroot:
	@test/buildroot/br-check.sh $(BUILDROOT) $(O)/br-check $(O)
%:
	$(BR_MAKE) $@
all:
	$(BR_MAKE)
.PHONY: all run test test-buildroot
else
# ---------------------------------------------------------------- host build
.DEFAULT_GOAL := all
SHELL := /bin/bash

# Settings come from the defconfig copy, exactly as Buildroot reads them.
BR2_EXTERNAL_PUZZLEFS_PATH := $(TOP)/br2-external
BR2_CONFIG := $(O)/.config
-include $(BR2_CONFIG)
qstrip = $(strip $(subst ",,$(1)))
# Paths in the defconfig are relative to the external tree's variable.
paths = $(foreach p,$(call qstrip,$(1)),$(abspath $(p)))

LINUX_FRAGMENTS := $(call paths,$(BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES))
LINUX_PATCH_DIRS := $(call paths,$(BR2_GLOBAL_PATCH_DIR))
ROOTFS_OVERLAYS := $(call paths,$(BR2_ROOTFS_OVERLAY))
POST_BUILD_SCRIPTS := $(call paths,$(BR2_ROOTFS_POST_BUILD_SCRIPT))
POST_FAKEROOT_SCRIPTS := $(call paths,$(BR2_ROOTFS_POST_FAKEROOT_SCRIPT))
POST_IMAGE_SCRIPTS := $(call paths,$(BR2_ROOTFS_POST_IMAGE_SCRIPT))
LINUX_EXT_SCRIPT := $(if $(BR2_LINUX_KERNEL_EXT_PUZZLEFS),$(TOP)/package/puzzlefs/kernel/prepare-tree.sh)

CARGO ?= cargo
CARGO_WORKSPACE := $(TOP)/package/puzzlefs
# One static build serves as the host tool and as the target binary.
PUZZLEFS_TARGET_DIR := $(O)/build/puzzlefs
PUZZLEFS_BIN := $(PUZZLEFS_TARGET_DIR)/x86_64-unknown-linux-gnu/release/puzzlefs
HOST_DIR := $(O)/host

# Target packages of this tree that the host build installs itself.
PUZZLEFS_TEST_TOOLS := $(BR2_PACKAGE_PUZZLEFS_TEST_TOOLS)
HOST_PUZZLEFS_TEST_TOOLS := $(BR2_PACKAGE_HOST_PUZZLEFS_TEST_TOOLS)
# Buildroot's python3 package; here Debian's python3.11 (support/rootfs.sh).
PYTHON3 := $(BR2_PACKAGE_PYTHON3)
export PUZZLEFS_TEST_TOOLS HOST_PUZZLEFS_TEST_TOOLS PYTHON3
export LINUX_FRAGMENTS LINUX_PATCH_DIRS LINUX_EXT_SCRIPT ROOTFS_OVERLAYS POST_BUILD_SCRIPTS POST_FAKEROOT_SCRIPTS POST_IMAGE_SCRIPTS HOST_DIR

.PHONY: all deps deps-check linux puzzlefs rootfs run test \
	test-cargo test-suite test-static test-buildroot test-debug test-debug-kernel test-debug-build test-debug-suite fuzz fuzz-debug linux-update-defconfig kernel-series kernel-check kernel-check-tree kernel-check-series bench-builder bench-versions bench clean help check-config ensure-config

all: check-config deps-check linux puzzlefs rootfs
	@echo ">>> images ready: $(O)/images/bzImage $(O)/images/rootfs.cpio"

help:
	@sed -n '2,12p' Makefile

deps:
	@support/deps.sh

# Other targets install what is missing, but only pay for the check.
deps-check:
	@support/deps.sh --check >/dev/null 2>&1 || support/deps.sh

%_defconfig: configs/%_defconfig
	@mkdir -p $(O)
	@cp $< $(BR2_CONFIG)
	@echo ">>> wrote $(BR2_CONFIG) from $<"

check-config:
	@test -f $(BR2_CONFIG) || { echo "no configuration: run 'make puzzlefs_qemu_defconfig' first" >&2; exit 1; }

# `make test` and `make run` do all set-up themselves: with no configuration
# yet they select the appliance's defconfig (and say so).
ensure-config:
	@test -f $(BR2_CONFIG) || { echo ">>> no configuration yet: using configs/puzzlefs_qemu_defconfig"; \
		mkdir -p $(O) && cp configs/puzzlefs_qemu_defconfig $(BR2_CONFIG); }

linux: check-config deps-check
	@support/linux.sh $(O)

puzzlefs: check-config deps-check
	@echo ">>> puzzlefs: cargo build (static) in $(CARGO_WORKSPACE)"
	@cd $(CARGO_WORKSPACE) && RUSTFLAGS="-C target-feature=+crt-static" \
		$(CARGO) build --quiet --release --locked --target x86_64-unknown-linux-gnu \
		--target-dir $(PUZZLEFS_TARGET_DIR) --bin puzzlefs
	@install -D -m 0755 $(PUZZLEFS_BIN) $(HOST_DIR)/bin/puzzlefs

rootfs: check-config linux puzzlefs
	@support/rootfs.sh $(O)

run: ensure-config
	@$(MAKE) --no-print-directory all
	board/qemu/start-qemu.sh $(O)/images

# `make test`: everything, in one go. CASES='<glob> ...' runs a subset of test/cases.
test: ensure-config
	@$(MAKE) --no-print-directory all test-static test-buildroot test-cargo test-suite

# The same appliance on a debug kernel (linux-debug.fragment: KASAN,
# kmemleak, lockdep), in its own output directory, running test/cases plus
# test/debug (kmemleak after mount, read and unload cycles). KASAN under
# TCG is slow: the guest gets more memory and the cases longer timeouts.
DEBUG_O := $(O)/debug
# The debug suite's share of issue 16's differential test and mutation campaign
# (cases 65-67): KASAN under TCG is several times slower than the appliance
# kernel (~1 ms per difftest operation, ~0.6 s per mutant there).
DEBUG_DIFFTEST_OPS ?= 1500
DEBUG_FUZZ_N ?= 12
# Guests the debug suite is split over (test/run-shards.sh): it is the longest
# step, one core per guest, and a two-core machine has a core to spare. They
# boot with kmemleak=off; test/debug (kmemleak) runs in one more guest.
DEBUG_SHARDS ?= 2
# test-debug = test-debug-build + test-debug-suite (CI overlaps the second
# with the other steps: .ci/run).
test-debug: test-debug-build
	@$(MAKE) --no-print-directory test-debug-suite
# The debug kernel alone: CI builds it beside the appliance (.ci/run), as
# either kernel build leaves one core idle for a while in its serial steps.
test-debug-kernel:
	@$(MAKE) --no-print-directory O=$(DEBUG_O) puzzlefs_qemu_debug_defconfig
	@$(MAKE) --no-print-directory O=$(DEBUG_O) linux
test-debug-build: test-debug-kernel
	@# The same puzzlefs tool (one cargo target dir) and so the same corpus as this
	@# build's, when it has made one: neither is built twice.
	@PZT_FUZZ_N=$(DEBUG_FUZZ_N) PZT_CORPUS_SHARED=$(O)/build/pzt-corpus \
		$(MAKE) --no-print-directory O=$(DEBUG_O) PUZZLEFS_TARGET_DIR=$(PUZZLEFS_TARGET_DIR) all test-static
test-debug-suite:
	@PUZZLEFS_MEM=2048 TIMEOUT_SCALE=4 PZT_DIFFTEST_OPS=$(DEBUG_DIFFTEST_OPS) \
		$(MAKE) --no-print-directory O=$(DEBUG_O) test-suite DEBUG_SUITE=1 SHARDS=$(DEBUG_SHARDS)

# The mutation campaign of issue 16 on its own: N mutants (default 1000) of the
# corpus images with seed SEED (default: a fresh one, printed) are made at build
# time (board/qemu/post-fakeroot.d/65-puzzlefs-difftest.sh, test/samples/mutate.py)
# onto the data disk, then case 66 mounts and walks every one. A normal build
# makes the CI share (300, fresh seed) again.
FUZZ_ENV = ROOTFS_FORCE=1 PZT_FUZZ_N=$(or $(N),1000) PZT_FUZZ_SEED='$(SEED)'
fuzz: ensure-config
	@$(FUZZ_ENV) $(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-suite CASES='66-*'
fuzz-debug:
	@$(MAKE) --no-print-directory O=$(DEBUG_O) puzzlefs_qemu_debug_defconfig
	@$(FUZZ_ENV) $(MAKE) --no-print-directory O=$(DEBUG_O) all
	@PUZZLEFS_MEM=2048 TIMEOUT_SCALE=4 $(MAKE) --no-print-directory O=$(DEBUG_O) test-suite CASES='66-*' DEBUG_SUITE=1

# Host-side checks: the Buildroot description is well-formed and the host
# build used exactly what it says.
test-static: check-config
	@echo ">>> static checks of the Buildroot description"
	@test/buildroot/check-br2.sh
	@support/check-drift.sh $(O)

# The same checks run by Buildroot's own code: the release at
# ../shared/buildroot is unpacked once into $(O)/buildroot (kept; only a
# new tarball unpacks again). Skipped, with the reason printed, where the
# tarball is absent: `make BUILDROOT=<checkout> test-buildroot` runs them
# with a checkout instead.
BR_TARBALL ?= $(abspath $(TOP)/../shared/buildroot/buildroot-2026.05.1.tar.xz)
BR_UNPACKED := $(O)/buildroot/$(basename $(basename $(notdir $(BR_TARBALL))))
$(BR_UNPACKED)/.stamp_unpacked: $(BR_TARBALL)
	@echo ">>> buildroot: unpacking $(notdir $<) into $(O)/buildroot"
	@rm -rf $(@D) $(@D).tmp && mkdir -p $(@D).tmp
	@tar -xJf $< -C $(@D).tmp --strip-components=1
	@mv $(@D).tmp $(@D) && touch $@
buildroot-unpack: $(BR_UNPACKED)/.stamp_unpacked
test-buildroot: check-config
	@if [ -f "$(BR_TARBALL)" ]; then \
		$(MAKE) --no-print-directory buildroot-unpack && \
		test/buildroot/br-check.sh $(BR_UNPACKED) $(O)/br-check $(O); \
	else \
		echo "SKIP test-buildroot: $(BR_TARBALL) not found (run: make BUILDROOT=<checkout> test-buildroot)"; \
	fi
.PHONY: buildroot-unpack

# board/qemu/linux.defconfig is what Buildroot starts from: the
# savedefconfig of the host build's allnoconfig + fragment configuration.
linux-update-defconfig: check-config deps-check
	@support/linux.sh $(O) configure
	@. support/kmake.sh && LINUX_DIR=$$(cat $(O)/build/linux-dir) && \
		kmake savedefconfig >/dev/null && cp $$LINUX_DIR/defconfig board/qemu/linux.defconfig
	@echo ">>> wrote board/qemu/linux.defconfig"

test-cargo: deps-check
	@echo ">>> cargo test (workspace)"
	@cd $(CARGO_WORKSPACE) && $(CARGO) test --quiet --locked --target-dir $(O)/build/puzzlefs-test

test-suite: check-config
	@mkdir -p $(O)/test
	@IMAGES=$(O)/images OUT=$(O)/test CASES='$(CASES)' DEBUG_SUITE='$(DEBUG_SUITE)' SHARDS='$(SHARDS)' \
		KERNEL_RELEASE_FILE=$$(cat $(O)/build/linux-dir)/include/config/kernel.release \
		test/run-shards.sh

# Benchmarks (never part of the tests): time and stored size against
# mkfs.erofs and mksquashfs, several repetitions in one run.
bench-builder: check-config deps-check puzzlefs
	@PUZZLEFS=$(HOST_DIR)/bin/puzzlefs test/bench/bench-builder.sh

# Storage of three successive debootstrap versions (made once, kept in
# $(O)/bench-versions) beside tar.gz layers, squashfs and erofs. Needs root
# and the Debian mirror apt uses. PUZZLEFS_PREV=<binary> adds its rows.
bench-versions: check-config deps-check puzzlefs
	@PUZZLEFS=$(HOST_DIR)/bin/puzzlefs CACHE=$(O)/bench-versions test/bench/bench-versions.sh

# The kernel read path against tmpfs, erofs and squashfs in one boot of this
# build (test/bench/bench.sh lists the settings: REPS, FS, WORKLOADS,
# TIMEOUT_S, BENCH_IMAGES_PREV, ...). Report in $(O)/bench/report.md.
bench: check-config
	@$(MAKE) --no-print-directory all
	@O=$(O) IMAGES=$(O)/images PUZZLEFS=$(HOST_DIR)/bin/puzzlefs test/bench/bench.sh

kernel-series: check-config
	@package/puzzlefs/kernel/export-series.sh $(O)/series

# The kernel side's lint bar: rustfmtcheck, CLIPPY=1, checkpatch over the
# exported series (support/kernel-check.sh says what is allowed).
kernel-check: check-config deps-check linux
	@support/kernel-check.sh $(O)

# Its two halves: the checks of the built tree, and those of the exported
# series, which need no build (CI runs that one beside the builds).
kernel-check-tree: check-config deps-check linux
	@support/kernel-check.sh $(O) tree

kernel-check-series: check-config deps-check
	@support/kernel-check.sh $(O) series

clean:
	rm -rf $(O)
endif
