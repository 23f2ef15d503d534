// SPDX-License-Identifier: GPL-2.0
/*
 * pzk-tool: what the kernel driver's expect cases need and busybox lacks.
 *
 *   pzk-tool list <path> [size]          llistxattr; prints names, one a line
 *   pzk-tool get <path> <name> [size]    lgetxattr; prints the value
 *   pzk-tool as <uid> <cmd> [args...]    runs cmd with uid/gid <uid>, no groups
 *   pzk-tool dirpos [-s] <dir>           directory positions: lseek + getdents64
 *                                        (see dirpos() below)
 *   pzk-tool readlink <path> <size>      readlink(2) with that buffer size
 *   pzk-tool ioctl <path> <what>         fibmap|fiemap|getflags|unknown: the errno
 *   pzk-tool odirect <path>              open(O_RDONLY|O_DIRECT) and read 4096 bytes
 *   pzk-tool nlinks <manifest> <root>    st_nlink of each non-directory of a
 *                                        `pzt-helper manifest` below <root> equals
 *                                        its number of names there; directories 1
 *   pzk-tool resident <file>...          pages of the files in the page cache
 *                                        (mincore): "resident=<n> pages=<n>",
 *                                        then a "<n> <file> <pages>" line per file
 *                                        with resident pages (their indexes, as
 *                                        ranges: "0-3,7")
 *   pzk-tool kmsg <seq>                  kernel log records numbered <seq> and up,
 *                                        one "<seq> <text>" line each, then
 *                                        "next=<seq>"; from /dev/kmsg, so
 *                                        `dmesg -c` does not hide them
 *
 * Errors print "errno=<name>" and exit 1, so cases can check ERANGE/ENODATA.
 * Built statically by board/qemu/post-fakeroot.d/30-puzzlefs-kernel-samples.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

static int fail(void)
{
	const char *name = errno == ERANGE ? "ERANGE" : errno == ENODATA ? "ENODATA" :
			   errno == ENOTSUP ? "ENOTSUP" : errno == EPERM ? "EPERM" :
			   errno == EACCES ? "EACCES" : errno == ENOENT ? "ENOENT" : NULL;

	if (name)
		printf("errno=%s\n", name);
	else
		printf("errno=%d\n", errno);
	return 1;
}


/*
 * dirpos: what any user can do to a directory's position, and what getdents64
 * gives back after it. Lines starting with "c " hold only facts every Linux
 * file system shares (checked against tmpfs by test/cases/40-*): lseek results
 * of SEEK_SET/SEEK_CUR, the listing from positions 0, 1 and 2, re-reading
 * after the end, resuming at every position telldir gave. Lines starting with
 * "s " (with -s) check a file system whose entry i is at position 2 + i (as
 * puzzlefs documents): every position from 0 to past the end, positions past
 * u32 and up to INT64_MAX, SEEK_END/SEEK_DATA/SEEK_HOLE. Any listing must be
 * made of the directory's names, each at most once. A failed check prints
 * FAIL and the exit status is 1.
 */
struct list {
	char **name;
	size_t n, cap;
	int err;	/* errno of a failed getdents64, else 0 */
};

static int dp_fail;

static void list_add(struct list *l, const char *name)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->name = realloc(l->name, l->cap * sizeof(*l->name));
		if (!l->name)
			exit(3);
	}
	l->name[l->n++] = strdup(name);
}

static void list_free(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->name[i]);
	free(l->name);
	memset(l, 0, sizeof(*l));
}

/* Reads from the current position to the end; bufsize 0: one call only, 4096 bytes. */
static void list_read(int fd, struct list *l, size_t bufsize, int once)
{
	static char buf[1 << 16];

	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, bufsize);

		if (n < 0) {
			l->err = errno;
			return;
		}
		if (n == 0)
			return;
		for (long off = 0; off < n;) {
			unsigned short reclen;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			list_add(l, buf + off + 19);
			off += reclen;
		}
		if (once)
			return;
	}
}

static const char *errname(int e)
{
	static char num[16];

	switch (e) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case ENOTTY: return "ENOTTY";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ERANGE: return "ERANGE";
	case EINVAL: return "EINVAL";
	case ENXIO: return "ENXIO";
	case EOVERFLOW: return "EOVERFLOW";
	case EUCLEAN: return "EUCLEAN";
	case EIO: return "EIO";
	}
	snprintf(num, sizeof(num), "%d", e);
	return num;
}

static int in_list(const struct list *all, const char *name)
{
	for (size_t i = 0; i < all->n; i++)
		if (!strcmp(all->name[i], name))
			return 1;
	return 0;
}

/* "dot=A dotdot=B names=C": C counts the other names; FAIL on strangers and repeats. */
static void describe(char *out, size_t size, const struct list *l, const struct list *all)
{
	size_t dot = 0, dotdot = 0, names = 0, bad = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (!strcmp(l->name[i], "."))
			dot++;
		else if (!strcmp(l->name[i], ".."))
			dotdot++;
		else {
			names++;
			if (!in_list(all, l->name[i]))
				bad++;
			for (size_t j = 0; j < i; j++)
				if (!strcmp(l->name[j], l->name[i]))
					bad++;
		}
	}
	if (dot > 1 || dotdot > 1 || bad)
		dp_fail = 1;
	snprintf(out, size, "dot=%zu dotdot=%zu names=%zu%s%s%s", dot, dotdot, names,
		 bad ? " FAIL:strange-or-repeated" : "", l->err ? " err=" : "",
		 l->err ? errname(l->err) : "");
}

/* lseek, then describe what getdents64 lists from there to the end. */
static void seek_and_list(const char *tag, int fd, int64_t off, int whence,
			  const struct list *all, int64_t *got)
{
	struct list l = { 0 };
	char d[160];
	off_t r = lseek(fd, off, whence);

	if (r < 0) {
		printf("%s lseek=%s\n", tag, errname(errno));
		if (got)
			*got = -1;
		return;
	}
	if (got)
		*got = r;
	list_read(fd, &l, 4096, 0);
	describe(d, sizeof(d), &l, all);
	if (whence == SEEK_SET && r != off) {
		dp_fail = 1;
		printf("%s lseek=%lld FAIL:not-the-offset %s\n", tag, (long long)r, d);
	} else if (whence == SEEK_SET) {
		printf("%s lseek=ok %s\n", tag, d);
	} else {
		printf("%s lseek=%lld %s\n", tag, (long long)r, d);
	}
	list_free(&l);
}

static int dirpos(const char *dir, int scheme)
{
	static const int64_t set[] = {
		0, 1, 2, -1, -2, INT32_MAX, (int64_t)UINT32_MAX - 1, UINT32_MAX,
		(int64_t)UINT32_MAX + 1, (int64_t)UINT32_MAX + 2, (int64_t)UINT32_MAX + 3,
		INT64_MAX - 1, INT64_MAX, INT64_MIN,
	};
	struct list all = { 0 }, names = { 0 }, l = { 0 };
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	char d[160], tag[96];
	off_t *pos = NULL;
	size_t npos = 0;

	if (fd < 0) {
		printf("c open=%s\n", errname(errno));
		return 1;
	}
	/* The whole listing, small calls: the reference for everything below. */
	list_read(fd, &all, 4096, 0);
	for (size_t i = 0; i < all.n; i++)
		if (strcmp(all.name[i], ".") && strcmp(all.name[i], ".."))
			list_add(&names, all.name[i]);
	describe(d, sizeof(d), &all, &all);
	printf("c full %s\n", d);
	if (all.err)
		dp_fail = 1;

	/* Reading again at the end lists nothing; rewinding lists everything again. */
	list_read(fd, &l, 4096, 0);
	printf("c again names=%zu%s\n", l.n, l.err ? " FAIL:error" : "");
	if (l.n || l.err)
		dp_fail = 1;
	list_free(&l);

	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		/* Positions 0..2 mean the same everywhere; others only "nothing strange". */
		snprintf(tag, sizeof(tag), "%c set %lld", set[i] >= 0 && set[i] <= 2 ? 'c' : 's',
			 (long long)set[i]);
		if (set[i] < 0)
			tag[0] = 'c';	/* negative: EINVAL everywhere */
		if (tag[0] == 's' && !scheme) {
			/* Still exercised: it must not crash or list strangers. */
			tag[0] = 'x';
		}
		seek_and_list(tag, fd, set[i], SEEK_SET, &all, NULL);
	}

	/* SEEK_CUR: relative moves, overflow past INT64_MAX, below 0. */
	lseek(fd, 0, SEEK_SET);
	printf("c cur -1: %s\n", lseek(fd, -1, SEEK_CUR) < 0 ? errname(errno) : "ok");
	printf("c cur +2: %lld\n", (long long)lseek(fd, 2, SEEK_CUR));
	printf("c cur +INT64_MAX: %s\n", lseek(fd, INT64_MAX, SEEK_CUR) < 0 ? errname(errno) : "ok");
	printf("c cur 0 after the failure: %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
	lseek(fd, INT64_MAX, SEEK_SET);
	printf("c cur +1 at INT64_MAX: %s\n", lseek(fd, 1, SEEK_CUR) < 0 ? errname(errno) : "ok");
	printf("c cur -INT64_MAX: %lld\n", (long long)lseek(fd, -INT64_MAX, SEEK_CUR));

	/* Resume at every position telldir gives: the rest of the listing, in order. */
	lseek(fd, 0, SEEK_SET);
	for (;;) {
		size_t before = l.n;

		list_read(fd, &l, 280, 1);
		if (l.n == before || l.err)
			break;
		pos = realloc(pos, (npos + 1) * sizeof(*pos));
		if (!pos)
			exit(3);
		pos[npos++] = lseek(fd, 0, SEEK_CUR);
	}
	{
		int ok = !l.err && l.n == all.n;

		for (size_t i = 0; ok && i < l.n; i++)
			ok = !strcmp(l.name[i], all.name[i]);
		for (size_t k = 0, done = 0; ok && k < npos; k++) {
			struct list rest = { 0 };
			size_t first;

			/* Entries listed before pos[k]: count them again from a fresh read. */
			lseek(fd, 0, SEEK_SET);
			done = 0;
			for (size_t j = 0; j <= k; j++) {
				struct list one = { 0 };

				list_read(fd, &one, 280, 1);
				done += one.n;
				list_free(&one);
			}
			first = done;
			if (lseek(fd, pos[k], SEEK_SET) != pos[k]) {
				ok = 0;
				break;
			}
			list_read(fd, &rest, 4096, 0);
			ok = !rest.err && rest.n == l.n - first;
			for (size_t i = 0; ok && i < rest.n; i++)
				ok = !strcmp(rest.name[i], l.name[first + i]);
			list_free(&rest);
		}
		printf("c resume at each telldir position: %s\n", ok ? "ok" : "FAIL");
		if (!ok)
			dp_fail = 1;
	}
	list_free(&l);

	if (scheme) {
		/* Entry i at 2 + i: from 2 + k, exactly the names after the first k. */
		size_t n = names.n;

		for (size_t k = 0; k <= n + 2; k++) {
			struct list rest = { 0 };
			size_t want = k <= n ? n - k : 0;
			int ok;

			lseek(fd, (off_t)(2 + k), SEEK_SET);
			list_read(fd, &rest, 4096, 0);
			ok = !rest.err && rest.n == want;
			for (size_t i = 0; ok && i < rest.n; i++)
				ok = !strcmp(rest.name[i], names.name[k + i]);
			if (!ok) {
				dp_fail = 1;
				printf("s pos %zu: FAIL got %zu names, want %zu\n", 2 + k, rest.n, want);
			}
			list_free(&rest);
		}
		printf("s positions 2..%zu checked\n", n + 4);
		{
			static const int64_t end[] = { 0, -1, -2, 1, (int64_t)UINT32_MAX + 1, INT64_MAX,
						       INT64_MIN };

			for (size_t i = 0; i < sizeof(end) / sizeof(end[0]); i++) {
				snprintf(tag, sizeof(tag), "s end %lld", (long long)end[i]);
				seek_and_list(tag, fd, end[i], SEEK_END, &all, NULL);
			}
			seek_and_list("s data 0", fd, 0, SEEK_DATA, &all, NULL);
			seek_and_list("s hole 0", fd, 0, SEEK_HOLE, &all, NULL);
		}
	}
	free(pos);
	list_free(&names);
	list_free(&all);
	close(fd);
	return dp_fail;
}

/* "\xHH" escapes of `pzt-helper manifest` back to bytes, in place. */
static void unescape(char *s)
{
	char *o = s;

	while (*s) {
		unsigned int c;

		if (s[0] == '\\' && s[1] == 'x' && sscanf(s + 2, "%2x", &c) == 1) {
			*o++ = (char)c;
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = 0;
}

/*
 * nlinks: for each line "path kind ... links" of a manifest, lstat <root>/path:
 * a non-directory must have st_nlink = the number of paths in its link group
 * (1 without one), a directory 1 (what puzzlefs reports, see fs/puzzlefs/nlink.rs).
 */
static int nlinks(const char *manifest, const char *root)
{
	static char line[1 << 16], path[(1 << 16) + 4096];
	size_t names = 0, linked = 0, dirs = 0, wrong = 0;
	FILE *f = fopen(manifest, "r");

	if (!f) {
		perror(manifest);
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' '), *last = strrchr(line, ' ');
		unsigned long want = 1;
		struct stat st;

		if (!sp || sp == last)
			continue;
		*sp = 0;
		last[strcspn(last, "\n")] = 0;
		if (strcmp(last + 1, "-")) {
			for (char *c = last + 1; *c; c++)
				want += *c == ',';
			linked++;
		}
		unescape(line);
		snprintf(path, sizeof(path), "%s/%s", root, line);
		if (lstat(path, &st)) {
			printf("ERROR %s: %s\n", line, strerror(errno));
			wrong++;
			continue;
		}
		if (!strncmp(sp + 1, "dir ", 4)) {
			dirs++;
			want = 1;
		} else {
			names++;
		}
		if (st.st_nlink != want) {
			printf("WRONG %s: st_nlink %lu, expected %lu\n", line,
			       (unsigned long)st.st_nlink, want);
			wrong++;
		}
	}
	fclose(f);
	printf("nlinks: %zu non-directories (%zu in link groups), %zu directories, %zu wrong\n",
	       names, linked, dirs, wrong);
	return wrong || !names;
}

static int do_readlink(const char *path, size_t size)
{
	static char buf[1 << 16];
	ssize_t n = readlink(path, buf, size);

	if (n < 0) {
		printf("errno=%s\n", errname(errno));
		return 1;
	}
	printf("n=%zd %.*s\n", n, (int)n, buf);
	return 0;
}

static int do_ioctl(const char *path, const char *what)
{
	int fd = open(path, O_RDONLY), r;

	if (fd < 0) {
		printf("open errno=%s\n", errname(errno));
		return 1;
	}
	if (!strcmp(what, "fibmap")) {
		int block = 0;

		r = ioctl(fd, FIBMAP, &block);
	} else if (!strcmp(what, "fiemap")) {
		static struct {
			struct fiemap f;
			struct fiemap_extent e[8];
		} m;

		m.f.fm_length = ~0ULL;
		m.f.fm_extent_count = 8;
		r = ioctl(fd, FS_IOC_FIEMAP, &m);
	} else if (!strcmp(what, "getflags")) {
		int flags = 0;

		r = ioctl(fd, FS_IOC_GETFLAGS, &flags);
	} else {
		r = ioctl(fd, _IOR('x', 0x7e, int), &fd);
	}
	printf("%s=%s\n", what, errname(r < 0 ? errno : 0));
	close(fd);
	return 0;
}

static int do_odirect(const char *path)
{
	static char buf[4096] __attribute__((aligned(4096)));
	int fd = open(path, O_RDONLY | O_DIRECT);
	ssize_t n;

	if (fd < 0) {
		printf("odirect open=%s\n", errname(errno));
		return 0;
	}
	n = read(fd, buf, sizeof(buf));
	printf("odirect open=ok read=%s\n", n < 0 ? errname(errno) : "ok");
	close(fd);
	return 0;
}

static int do_resident(int n, char **paths)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long resident = 0, pages = 0;
	static char lines[4096];
	size_t used = 0;

	for (int i = 0; i < n; i++) {
		int fd = open(paths[i], O_RDONLY);
		unsigned long long mine = 0;
		unsigned char *vec;
		struct stat st;
		size_t count;
		void *map;

		if (fd < 0 || fstat(fd, &st))
			return fail();
		if (!S_ISREG(st.st_mode) || st.st_size == 0) {
			close(fd);
			continue;
		}
		count = (st.st_size + page - 1) / page;
		/* Mapping a file faults nothing in: mincore only looks. */
		map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		vec = malloc(count);
		if (map == MAP_FAILED || !vec || mincore(map, st.st_size, vec))
			return fail();
		for (size_t j = 0; j < count; j++)
			mine += vec[j] & 1;
		munmap(map, st.st_size);
		resident += mine;
		pages += count;
		if (mine && used < sizeof(lines) - 512) {
			used += snprintf(lines + used, sizeof(lines) - used, "%llu %s ", mine, paths[i]);
			for (size_t j = 0; j < count && used < sizeof(lines) - 64; j++) {
				size_t k = j;

				if (!(vec[j] & 1))
					continue;
				while (k + 1 < count && (vec[k + 1] & 1))
					k++;
				used += snprintf(lines + used, sizeof(lines) - used, k > j ? "%zu-%zu," : "%zu,", j, k);
				j = k;
			}
			lines[used - 1] = '\n';
		}
		free(vec);
		close(fd);
	}
	printf("resident=%llu pages=%llu\n%s", resident, pages, lines);
	return 0;
}

/*
 * The test runner checks each case's kernel messages for oopses here rather
 * than on the console: the console is kept quiet so that kernel lines never
 * land inside a command's output.
 */
static int do_kmsg(unsigned long long from)
{
	static char rec[8192];
	unsigned long long seq, next = from;
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd < 0)
		return fail();
	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		char *text, *end;

		if (n < 0 && errno == EPIPE)
			continue; /* overwritten while reading: go on with the next */
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return fail();
		rec[n] = 0;
		/* "<prio>,<seq>,<usec>,<flags>[,...];<text>\n[ KEY=value\n...]" */
		text = strchr(rec, ';');
		if (!text || sscanf(rec, "%*u,%llu,", &seq) != 1)
			continue;
		if (seq < from)
			continue;
		end = strchr(++text, '\n');
		if (end)
			*end = 0;
		printf("%llu %s\n", seq, text);
		next = seq + 1;
	}
	close(fd);
	printf("next=%llu\n", next);
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[65536];
	size_t size = sizeof(buf);
	ssize_t n;

	if (argc >= 3 && !strcmp(argv[1], "list")) {
		if (argc > 3)
			size = strtoul(argv[3], NULL, 0);
		n = llistxattr(argv[2], size ? buf : NULL, size);
		if (n < 0)
			return fail();
		if (!size) {
			printf("size=%zd\n", n);
			return 0;
		}
		for (ssize_t i = 0; i < n; i += strlen(buf + i) + 1)
			printf("%s\n", buf + i);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "get")) {
		if (argc > 4)
			size = strtoul(argv[4], NULL, 0);
		n = lgetxattr(argv[2], argv[3], size ? buf : NULL, size);
		if (n < 0)
			return fail();
		if (!size)
			printf("size=%zd\n", n);
		else
			printf("%.*s\n", (int)n, buf);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "as")) {
		uid_t id = strtoul(argv[2], NULL, 0);

		if (setgroups(0, NULL) || setgid(id) || setuid(id))
			return fail();
		execvp(argv[3], argv + 3);
		return fail();
	}
	if (argc == 3 && !strcmp(argv[1], "dirpos"))
		return dirpos(argv[2], 0);
	if (argc == 4 && !strcmp(argv[1], "dirpos") && !strcmp(argv[2], "-s"))
		return dirpos(argv[3], 1);
	if (argc == 4 && !strcmp(argv[1], "readlink"))
		return do_readlink(argv[2], strtoul(argv[3], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "ioctl"))
		return do_ioctl(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "odirect"))
		return do_odirect(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "nlinks"))
		return nlinks(argv[2], argv[3]);
	if (argc >= 3 && !strcmp(argv[1], "resident"))
		return do_resident(argc - 2, argv + 2);
	if (argc == 3 && !strcmp(argv[1], "kmsg"))
		return do_kmsg(strtoull(argv[2], NULL, 0));
	fprintf(stderr, "usage: pzk-tool list|get|as|dirpos|readlink|ioctl|odirect|nlinks|kmsg ...\n");
	return 2;
}
