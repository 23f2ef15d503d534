/*
 * pzbench: the timed part of `make bench`, run in the guest (static binary).
 * One workload per call; prints one line of key=value pairs:
 *
 *   ms=<elapsed> ops=<operations done> bytes=<bytes read> cached_kib=<growth
 *   of Cached in /proc/meminfo> timeout=<0|1>
 *
 * Workloads:
 *   readall DIR             read every regular file under DIR (no symlinks followed)
 *   stat DIR                readdir + lstat every entry under DIR
 *   seq FILE                read FILE sequentially (128 KiB reads)
 *   rand FILE N SEED        N preads of 4 KiB at random 4 KiB-aligned offsets
 *   lookup DIR N SEED COUNT pos|neg
 *                           N stat()s of names in DIR: pos = existing names
 *                           file-NNNNNN.dat (NNNNNN < COUNT), neg = missing ones
 *   mount SRC DIR TYPE OPTS time mount(2) (TYPE puzzlefs, erofs, ...)
 *   tsc-khz                 (run on the host) the TSC's rate in kHz, measured
 *                           against CLOCK_MONOTONIC_RAW over 200 ms; prints
 *                           only the number
 *
 * PZB_TIMEOUT_MS (environment): stop a workload once it has run that long and
 * report timeout=1 with the operations done so far (no signal, no kill: the
 * check sits between operations, so one slow operation can overrun it).
 * Clock: CLOCK_MONOTONIC. Nothing here asserts anything about the figures.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double t0;
static double timeout_ms;
static int timed_out;
static uint64_t ops, bytes;
static char buf[128 * 1024];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int over_time(void)
{
	if (timeout_ms > 0 && now_ms() - t0 > timeout_ms)
		timed_out = 1;
	return timed_out;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "pzbench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

/* Cached: in /proc/meminfo, KiB (page cache incl. tmpfs/shmem). */
static long cached_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Cached: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void read_fd(int fd, const char *path)
{
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0)
			die("read", path);
		if (n == 0)
			break;
		bytes += n;
		if (over_time())
			break;
	}
}

/* Depth-first walk of dirfd; readall reads regular files, stat lstats all. */
static void walk(int dirfd, const char *path, int do_read)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *e;

	if (!d)
		die("fdopendir", path);
	while (!timed_out && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			die("lstat", e->d_name);
		if (!do_read)
			ops++;
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (fd < 0)
				die("open dir", e->d_name);
			walk(fd, e->d_name, do_read);
		} else if (do_read && S_ISREG(st.st_mode)) {
			int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW);

			if (fd < 0)
				die("open", e->d_name);
			read_fd(fd, e->d_name);
			close(fd);
			ops++;
		}
		over_time();
	}
	closedir(d);
}

static uint64_t rng;

static uint64_t next_rand(void)
{
	/* xorshift64*: the same offsets/names on every file system. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

static void seed(const char *s)
{
	rng = strtoull(s, NULL, 0) * 0x9E3779B97F4A7C15ULL + 1;
}

int main(int argc, char **argv)
{
	const char *w = argc > 1 ? argv[1] : "";
	const char *to = getenv("PZB_TIMEOUT_MS");
	long c0, c1;
	double t1;

	if (!strcmp(w, "tsc-khz") && argc == 2) {
		/*
		 * Under TCG a guest's TSC counts at the host's rate: bench.sh passes
		 * it as tsc_early_khz, as the guest's own calibration against the
		 * PIT fails on a busy host, leaving it on jiffies.
		 */
		struct timespec a, b;
		unsigned long long c;
		double ns;

		clock_gettime(CLOCK_MONOTONIC_RAW, &a);
		c = __rdtsc();
		do {
			clock_gettime(CLOCK_MONOTONIC_RAW, &b);
			ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
		} while (ns < 2e8);
		c = __rdtsc() - c;
		printf("%.0f\n", c / ns * 1e6);
		return 0;
	}
	timeout_ms = to ? atof(to) : 0;
	c0 = cached_kib();
	t0 = now_ms();
	if ((!strcmp(w, "readall") || !strcmp(w, "stat")) && argc == 3) {
		int fd = open(argv[2], O_RDONLY | O_DIRECTORY);

		if (fd < 0)
			die("open", argv[2]);
		walk(fd, argv[2], !strcmp(w, "readall"));
	} else if (!strcmp(w, "seq") && argc == 3) {
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0)
			die("open", argv[2]);
		read_fd(fd, argv[2]);
		close(fd);
		ops = 1;
	} else if (!strcmp(w, "rand") && argc == 5) {
		int fd = open(argv[2], O_RDONLY);
		uint64_t n = strtoull(argv[3], NULL, 0), pages;
		struct stat st;

		if (fd < 0 || fstat(fd, &st) < 0)
			die("open", argv[2]);
		pages = st.st_size / 4096;
		if (!pages) {
			fprintf(stderr, "pzbench: %s is smaller than 4 KiB\n", argv[2]);
			return 1;
		}
		seed(argv[4]);
		t0 = now_ms();
		for (; ops < n && !over_time(); ops++) {
			ssize_t r = pread(fd, buf, 4096, (off_t)(next_rand() % pages) * 4096);

			if (r != 4096)
				die("pread", argv[2]);
			bytes += r;
		}
		close(fd);
	} else if (!strcmp(w, "lookup") && argc == 7) {
		uint64_t n = strtoull(argv[3], NULL, 0), count = strtoull(argv[5], NULL, 0);
		int neg = !strcmp(argv[6], "neg");
		int fd = open(argv[2], O_RDONLY | O_DIRECTORY);
		char name[64];
		struct stat st;

		if (fd < 0 || !count)
			die("open", argv[2]);
		seed(argv[4]);
		t0 = now_ms();
		for (; ops < n && !over_time(); ops++) {
			uint64_t i = next_rand() % count;
			int r;

			snprintf(name, sizeof(name), neg ? "file-%06" PRIu64 ".nope" : "file-%06" PRIu64 ".dat", i);
			r = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
			if (neg ? (r == 0 || errno != ENOENT) : r != 0) {
				fprintf(stderr, "pzbench: lookup %s: %s\n", name, r ? strerror(errno) : "exists");
				return 1;
			}
		}
		close(fd);
	} else if (!strcmp(w, "mount") && argc == 6) {
		if (mount(argv[2], argv[3], argv[4], MS_RDONLY, argv[5]) < 0)
			die("mount", argv[2]);
		ops = 1;
	} else {
		fprintf(stderr, "usage: pzbench readall|stat DIR | seq FILE | rand FILE N SEED |"
			" lookup DIR N SEED COUNT pos|neg | mount SRC DIR TYPE OPTS\n");
		return 2;
	}
	t1 = now_ms();
	c1 = cached_kib();
	printf("ms=%.3f ops=%" PRIu64 " bytes=%" PRIu64 " cached_kib=%ld timeout=%d\n",
	       t1 - t0, ops, bytes, c1 - c0, timed_out);
	return 0;
}
