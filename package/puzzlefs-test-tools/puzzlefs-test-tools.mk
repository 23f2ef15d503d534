################################################################################
#
# puzzlefs-test-tools
#
################################################################################

PUZZLEFS_TEST_TOOLS_VERSION = $(PUZZLEFS_VERSION)
PUZZLEFS_TEST_TOOLS_SITE = $(BR2_EXTERNAL_PUZZLEFS_PATH)/../test/samples
PUZZLEFS_TEST_TOOLS_SITE_METHOD = local
PUZZLEFS_TEST_TOOLS_LICENSE = GPL-2.0 (pzk-tool, pzt-difftest, pzv-tool), Apache-2.0 or MIT (pzt-helper)

# The host build (support/rootfs.sh) compiles the same files with
# gcc -O2 -Wall, linked against the C library it installs in the target.
define PUZZLEFS_TEST_TOOLS_BUILD_CMDS
	$(foreach t,pzk-tool pzt-helper pzt-difftest pzv-tool,\
		$(TARGET_CC) $(TARGET_CFLAGS) -Wall $(TARGET_LDFLAGS) \
			-o $(@D)/$(t) $(@D)/$(t).c$(sep))
endef

define PUZZLEFS_TEST_TOOLS_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(@D)/pzk-tool $(TARGET_DIR)/usr/libexec/pzk/pzk-tool
	$(INSTALL) -D -m 0755 $(@D)/pzt-helper $(TARGET_DIR)/usr/libexec/puzzlefs-test/pzt-helper
	$(INSTALL) -D -m 0755 $(@D)/pzt-difftest $(TARGET_DIR)/usr/libexec/puzzlefs-test/pzt-difftest
	$(INSTALL) -D -m 0755 $(@D)/pzv-tool $(TARGET_DIR)/usr/libexec/pzv/pzv-tool
endef

# The build machine's pzt-helper (post-fakeroot.d/50-*: the corpus's
# manifests, compared with what the guest's pzt-helper prints).
define HOST_PUZZLEFS_TEST_TOOLS_BUILD_CMDS
	$(HOSTCC) $(HOST_CFLAGS) -Wall $(HOST_LDFLAGS) \
		-o $(@D)/pzt-helper $(@D)/pzt-helper.c
endef

define HOST_PUZZLEFS_TEST_TOOLS_INSTALL_CMDS
	$(INSTALL) -D -m 0755 $(@D)/pzt-helper $(HOST_DIR)/bin/pzt-helper
endef

$(eval $(generic-package))
$(eval $(host-generic-package))
