# Package recipes of this tree. The Linux extension in linux/ is not
# included here: Buildroot's linux/linux.mk includes every
# <br2-external>/linux/linux-ext-*.mk itself, before it instantiates the
# linux package (external.mk is only read after linux/linux.mk).
include $(sort $(wildcard $(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/*/*.mk))
