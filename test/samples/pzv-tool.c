// SPDX-License-Identifier: GPL-2.0
/*
 * pzv-tool: what the fs-verity cases (test/cases/8N-verity-*.exp) need and
 * busybox lacks.
 *
 *   pzv-tool enable <file>    FS_IOC_ENABLE_VERITY (sha256, 4 KiB blocks, no salt)
 *   pzv-tool measure <file>...  FS_IOC_MEASURE_VERITY: prints the hex digest, or
 *                             "none", a line per file (one process for a whole
 *                             blob directory: a process costs ~0.1 s under the
 *                             debug kernel)
 *   pzv-tool fiemap <file>    FS_IOC_FIEMAP: prints "<physical byte offset> <length>"
 *                             of each extent of the file, in file order
 *
 * Errors print "errno=<number>" and exit 1.
 * Built by package/puzzlefs-test-tools (the host build: support/rootfs.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int fail(const char *what)
{
	printf("errno=%d (%s: %s)\n", errno, what, strerror(errno));
	return 1;
}

static int measure(const char *path)
{
	struct {
		struct fsverity_digest d;
		unsigned char buf[64];
	} m = { .d.digest_size = 64 };
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail("open");
	if (ioctl(fd, FS_IOC_MEASURE_VERITY, &m)) {
		int rc = errno == ENODATA ? (printf("none\n"), 0) : fail("FS_IOC_MEASURE_VERITY");

		close(fd);
		return rc;
	}
	close(fd);
	for (unsigned int i = 0; i < m.d.digest_size; i++)
		printf("%02x", m.d.digest[i]);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	int fd;

	if (argc >= 3 && !strcmp(argv[1], "measure")) {
		int rc = 0;

		for (int i = 2; i < argc; i++)
			rc |= measure(argv[i]);
		return rc;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: pzv-tool enable|fiemap <file> | measure <file>...\n");
		return 2;
	}
	fd = open(argv[2], O_RDONLY);
	if (fd < 0)
		return fail("open");
	if (!strcmp(argv[1], "enable")) {
		struct fsverity_enable_arg arg = {
			.version = 1,
			.hash_algorithm = FS_VERITY_HASH_ALG_SHA256,
			.block_size = 4096,
		};

		if (ioctl(fd, FS_IOC_ENABLE_VERITY, &arg))
			return fail("FS_IOC_ENABLE_VERITY");
		return 0;
	}
	if (!strcmp(argv[1], "fiemap")) {
		struct {
			struct fiemap f;
			struct fiemap_extent e[64];
		} fm;

		memset(&fm, 0, sizeof(fm));
		fm.f.fm_start = 0;
		fm.f.fm_length = FIEMAP_MAX_OFFSET;
		fm.f.fm_flags = FIEMAP_FLAG_SYNC;
		fm.f.fm_extent_count = 64;
		if (ioctl(fd, FS_IOC_FIEMAP, &fm))
			return fail("FS_IOC_FIEMAP");
		if (fm.f.fm_mapped_extents == 0 || fm.f.fm_mapped_extents == 64) {
			fprintf(stderr, "pzv-tool: %u extents in %s\n", fm.f.fm_mapped_extents, argv[2]);
			return 1;
		}
		for (unsigned int i = 0; i < fm.f.fm_mapped_extents; i++) {
			if (fm.e[i].fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_ENCODED |
						FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED)) {
				fprintf(stderr, "pzv-tool: extent %u of %s is not plain\n", i, argv[2]);
				return 1;
			}
			printf("%llu %llu\n", (unsigned long long)fm.e[i].fe_physical,
			       (unsigned long long)fm.e[i].fe_length);
		}
		return 0;
	}
	fprintf(stderr, "pzv-tool: unknown command %s\n", argv[1]);
	return 2;
}
