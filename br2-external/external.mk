# Package recipes of this tree. The Linux extension in linux/ is not
# included here: Buildroot's linux/linux.mk includes every
# <br2-external>/linux/linux-ext-*.mk itself, before it instantiates the
# linux package (external.mk is only read after linux/linux.mk).
#
# puzzlefs.mk comes first: the other packages take its PUZZLEFS_VERSION, and
# Buildroot expands a package's version when its .mk is included (in name
# order, package/puzzlefs-*/ would come before package/puzzlefs/).
include $(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/puzzlefs/puzzlefs.mk
include $(filter-out %/package/puzzlefs/puzzlefs.mk,\
	$(sort $(wildcard $(BR2_EXTERNAL_PUZZLEFS_PATH)/../package/*/*.mk)))
