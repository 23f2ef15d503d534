################################################################################
#
# puzzlefs-crates
#
################################################################################

# The crates package/puzzlefs/Cargo.lock pins, as Buildroot downloads with
# hashes (puzzlefs-crates.hash: the lock file's checksums, which are the
# sha256 of the .crate files), so that 'make source', legal-info and the
# hash checks see them: puzzlefs is a local site, and the cargo
# infrastructure only vendors downloaded sources. Nothing is built here:
# puzzlefs and host-puzzlefs vendor them, offline, from this package's
# download directory (package/puzzlefs/vendor-crates.sh).
HOST_PUZZLEFS_CRATES_VERSION = $(PUZZLEFS_VERSION)
HOST_PUZZLEFS_CRATES_LOCK = $(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/puzzlefs/Cargo.lock
HOST_PUZZLEFS_CRATES_URLS = $(shell awk \
	'$$1 == "[[package]]" { n = v = s = "" } \
	$$1 == "name" { n = $$3 } $$1 == "version" { v = $$3 } $$1 == "source" { s = $$3 } \
	$$1 == "checksum" && s ~ /^"registry\+/ { gsub(/"/, "", n); gsub(/"/, "", v); \
		print "https://static.crates.io/crates/" n "/" n "-" v ".crate" }' \
	$(HOST_PUZZLEFS_CRATES_LOCK))
HOST_PUZZLEFS_CRATES_SITE = $(patsubst %/,%,$(dir $(firstword $(HOST_PUZZLEFS_CRATES_URLS))))
HOST_PUZZLEFS_CRATES_SOURCE = $(notdir $(firstword $(HOST_PUZZLEFS_CRATES_URLS)))
HOST_PUZZLEFS_CRATES_EXTRA_DOWNLOADS = $(wordlist 2,$(words $(HOST_PUZZLEFS_CRATES_URLS)),$(HOST_PUZZLEFS_CRATES_URLS))
# Each crate's own licence (mostly Apache-2.0 or MIT): see its Cargo.toml.
HOST_PUZZLEFS_CRATES_LICENSE = crates.io crates, see their Cargo.toml

# The .crate files are used as they are, by vendor-crates.sh.
define HOST_PUZZLEFS_CRATES_EXTRACT_CMDS
	mkdir -p $(@D)
endef

$(eval $(host-generic-package))
