################################################################################
#
# puzzlefs
#
################################################################################

PUZZLEFS_VERSION = 0.1.0
PUZZLEFS_SITE = $(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/puzzlefs
PUZZLEFS_SITE_METHOD = local
PUZZLEFS_LICENSE = Apache-2.0 or MIT
PUZZLEFS_LICENSE_FILES = LICENSE-APACHE LICENSE-MIT
# format/build.rs and builder/build.rs run the capnp compiler on the schemas;
# host-puzzlefs-crates downloads the crates of Cargo.lock.
PUZZLEFS_DEPENDENCIES = host-capnproto host-puzzlefs-crates
HOST_PUZZLEFS_DEPENDENCIES = host-capnproto host-puzzlefs-crates

# The workspace Cargo.toml is a virtual manifest: build and install the
# puzzlefs binary from its member crate (the host variant defaults to
# the same subdirectory).
PUZZLEFS_SUBDIR = builder

# The site is rsynced: leave out the cargo target directories of a
# developer build.
PUZZLEFS_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = --exclude target
HOST_PUZZLEFS_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = --exclude target

# A local site is not downloaded, so the cargo download post-process
# that vendors the crates (support/download/cargo-post-process) never
# runs for it. Vendor them the same way, into VENDOR/ with a
# .cargo/config.toml pointing at it, from the .crate files
# host-puzzlefs-crates downloaded (hash-checked); the infrastructure's
# build then stays --offline --locked.
define PUZZLEFS_CARGO_VENDOR
	$(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/puzzlefs/vendor-crates.sh \
		$(@D)/Cargo.lock $(HOST_PUZZLEFS_CRATES_DL_DIR) $(@D)/VENDOR
	mkdir -p $(@D)/.cargo
	printf '%s\n' '[source.crates-io]' 'replace-with = "vendored-sources"' \
		'[source.vendored-sources]' 'directory = "VENDOR"' \
		> $(@D)/.cargo/config.toml
endef
PUZZLEFS_PRE_CONFIGURE_HOOKS += PUZZLEFS_CARGO_VENDOR
HOST_PUZZLEFS_PRE_CONFIGURE_HOOKS += PUZZLEFS_CARGO_VENDOR

$(eval $(cargo-package))
$(eval $(host-cargo-package))
