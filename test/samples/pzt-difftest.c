// SPDX-License-Identifier: GPL-2.0
/*
 * pzt-difftest: differential tester of the puzzlefs driver (issue 16).
 *
 *   pzt-difftest [-s seed] [-n ops] [-u uid:gid] [-o op,op..] [-v] [-l lastfile]
 *                [-m max-diffs] [-e] [-L] <ref-dir> <test-dir>
 *
 * Both trees must be on read-only mounts (the operations include O_TRUNC and
 * O_CREAT opens; a read-only bind mount of the reference does).
 * <ref-dir> is a tree on a trusted file system (ext4 on the data disk), <test-dir>
 * the same tree mounted from a puzzlefs image. Seeded (the seed is printed; the same
 * seed, op count and options replay the same operations), it applies <ops> random
 * operations with hostile values to both trees and compares every return value,
 * errno and byte:
 *   open/openat (O_DIRECTORY, O_NOFOLLOW, O_DIRECT, O_PATH, O_CREAT, write modes...)
 *     and a probe of the fd (fstat, read, fgetxattr, getdents64, mmap);
 *   read/pread/readv/preadv/preadv2 at hostile offsets (0, 1, EOF-1, EOF, EOF+1,
 *     2^32, 0x100000001, i64::MAX, negative...) and sizes (0, 1, exact, huge counts
 *     into a buffer followed by a guard page);
 *   lseek on files (SET/CUR/END/DATA/HOLE) then a read at the new position;
 *   lseek on directories with the same values, then getdents64 with buffer sizes
 *     0, 1, small, exact, huge; complete listings with every buffer size; seekdir to
 *     a cookie a previous getdents64 returned;
 *   splice and sendfile into a pipe, copy_file_range into a tmpfs file;
 *   mmap at offsets incl. past EOF, touching every page (SIGBUS caught with
 *     sigsetjmp; bytes past EOF in the last page must be zero);
 *   readahead(2) and posix_fadvise (every advice) over hostile ranges, then a pread
 *     of what was read ahead or dropped;
 *   getxattr/lgetxattr/fgetxattr/listxattr/llistxattr with buffer sizes 0, 1,
 *     exact-1, exact, exact+1, huge, real and hostile names;
 *   readlink with sizes 0, 1, exact-1, exact, exact+1, huge;
 *   statx with random masks and flags, stat/lstat/fstatat, access/faccessat2;
 *   ioctls FIEMAP, FIBMAP, FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, FIGETBSZ, FIONREAD,
 *     ext4-only and unknown ones.
 * Paths are the entries of the reference tree (walked as root before dropping
 * privileges) and hostile variants (trailing "/", "/.", a missing name, a 256-byte
 * component, non-UTF-8 bytes).
 *
 * The differences a correct puzzlefs still shows against ext4 are the rows of
 * `legit[]` below, each with its reason and what the puzzlefs side must give
 * instead; nothing else may differ. -L prints the table and the use count of each
 * row; -e (both trees on the same kind of file system: checks this program
 * itself) turns the table off.
 *
 * pzt-difftest -W <dir> walks a possibly corrupt tree instead (the mutation
 * campaign): readdir, stat, xattrs, readlink, bounded reads and mmap of every
 * file, one summary line of the errors met.
 *
 * -u drops to that uid:gid (no supplementary groups) after the walk. -l names a
 * file that always holds the operation being run (a crash in the kernel leaves the
 * culprit there). -o runs only the named operations (see ops[]), to replay a
 * failure in fewer steps. -x <pos> never seeks a directory to <pos> (to look
 * past a known bug; changes the values drawn). Exit status: 0 no difference, 1 differences, 2 usage or
 * set-up error. Built like pzt-helper (package/puzzlefs-test-tools); uses nothing from PuzzleFS.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>

#ifndef RWF_HIPRI
#define RWF_HIPRI 0x1
#endif
#ifndef FS_IOC_GETFSUUID
#define FS_IOC_GETFSUUID _IOC(_IOC_READ, 0x15, 0, 17)
#endif
#ifndef FS_IOC_GETFSSYSFSPATH
#define FS_IOC_GETFSSYSFSPATH _IOC(_IOC_READ, 0x15, 1, 129)
#endif
#define ENOIOCTLCMD 515	/* kernel-internal; must never reach user space */

/* ------------------------------------------------------------ legitimate differences */

enum {
	L_DIR_COOKIE, L_DIR_ORDER, L_DIR_SIZE, L_DIR_SEEK, L_SEEK_HOLE, L_ODIRECT, L_FIEMAP,
	L_FIBMAP, L_FSFLAGS, L_FSID, L_VERITY, L_STORAGE, L_TIMES, L_INO, L_DEV,
	L_STATX_EXTRA, L_XATTR_ORDER, L_ACL, L_SECURITY, L_MAXBYTES, L_DIR_NLINK, L_N
};

static const struct legit {
	const char *what, *reason, *puzzlefs_gives;
} legit[L_N] = {
	[L_DIR_COOKIE] = { "d_off of getdents64 entries",
		"directory positions are opaque cookies: ext4 uses htree hashes or byte offsets, "
		"puzzlefs entry indexes",
		"cookies that resume the listing exactly after their entry (checked by seekdir ops)" },
	[L_DIR_ORDER] = { "order of directory entries",
		"ext4 returns hash or insertion order, puzzlefs the image's sorted order",
		"the same set of (name, d_type), each once; d_ino equal to the entry's st_ino" },
	[L_DIR_NLINK] = { "st_nlink/stx_nlink of directories", "ext4: 2 + subdirectories",
		"1, as btrfs: an image is untrusted, and find/fts read a count below 2 as unknown "
		"instead of skipping entries on a wrong count (a hard-linked file's count is compared)" },
	[L_DIR_SIZE] = { "st_size/stx_size of directories", "ext4: bytes of directory blocks",
		"any value (lseek SEEK_END/DATA/HOLE on the directory use it consistently)" },
	[L_DIR_SEEK] = { "lseek and getdents64 on a directory at an arbitrary position",
		"ext4 limits and interprets positions as hash or block offsets; there is no common "
		"answer for a position that no getdents64 returned",
		"lseek: generic_file_llseek's answer or EINVAL; getdents64 then: a count >= 0 of "
		"distinct entries of the directory, or EINVAL only when the next entry does not "
		"fit the buffer" },
	[L_SEEK_HOLE] = { "lseek SEEK_DATA/SEEK_HOLE on regular files",
		"ext4 reports holes (mke2fs -d leaves zero blocks unallocated); a puzzlefs file "
		"has no hole map",
		"generic_file_llseek: SEEK_DATA off<size ? off : ENXIO, SEEK_HOLE off<size ? size : "
		"ENXIO (off < 0: ENXIO)" },
	[L_ODIRECT] = { "open O_DIRECT of a regular file", "ext4 supports direct I/O",
		"EINVAL (issue 16: a clean EINVAL or a working read), or success; either side may "
		"refuse with EINVAL" },
	[L_FIEMAP] = { "FS_IOC_FIEMAP", "ext4 maps extents to disk blocks; a puzzlefs file has no "
		"block map", "EOPNOTSUPP (or ENOTTY)" },
	[L_FIBMAP] = { "FIBMAP as root", "ext4 maps blocks; puzzlefs has no bmap",
		"EINVAL (unprivileged: EPERM, compared exactly)" },
	[L_FSFLAGS] = { "FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, FS_IOC_GETVERSION",
		"ext4 inode flags (extents, ...), project ids and generations do not exist in "
		"puzzlefs", "ENOTTY" },
	[L_FSID] = { "FS_IOC_GETFSLABEL, FS_IOC_GETFSUUID, FS_IOC_GETFSSYSFSPATH",
		"file-system identity: ext4 has a label, a uuid and a sysfs directory",
		"ENOTTY/EOPNOTSUPP/ENOIOCTLCMD-class errno, or success" },
	[L_VERITY] = { "FS_IOC_MEASURE_VERITY, FS_IOC_GET_ENCRYPTION_POLICY*",
		"ext4 answers ENODATA (feature present, file not verity/encrypted)",
		"ENOTTY, EOPNOTSUPP or ENODATA" },
	[L_STORAGE] = { "st_blocks, st_blksize, stx_blocks, stx_blksize, FIGETBSZ, stx_attributes(_mask)",
		"storage layout and ext4 inode attributes", "any value" },
	[L_TIMES] = { "atime, mtime, ctime, btime", "the format stores no time (FORMAT.md: every "
		"inode shows time 0); ext4 keeps the build host's", "any value" },
	[L_INO] = { "inode numbers", "different numbering",
		"the same equality structure: two paths share an inode on puzzlefs iff they do on "
		"ext4; never 0" },
	[L_DEV] = { "st_dev, stx_dev_*, stx_mnt_id", "different file systems", "any value" },
	[L_STATX_EXTRA] = { "stx_mask bits beyond STATX_BASIC_STATS, stx_dio_*",
		"ext4 adds btime, DIO alignment, ...", "the basic-stats bits equal" },
	[L_XATTR_ORDER] = { "order of names in listxattr", "ext4 sorts its entries its own way",
		"the same length and the same set of names" },
	[L_ACL] = { "system.posix_acl_* getxattr", "ext4 answers ENODATA or, without "
		"CONFIG_EXT4_FS_POSIX_ACL (this kernel), EOPNOTSUPP",
		"EOPNOTSUPP, or the same answer as ext4" },
	[L_SECURITY] = { "security.* getxattr",
		"this kernel's ext4 has no security.* handler (CONFIG_EXT4_FS_SECURITY unset): "
		"EOPNOTSUPP; a puzzlefs image may carry any key",
		"ENODATA for a key the image does not have, or the same answer as ext4" },
	[L_MAXBYTES] = { "file positions beyond 2^44-4096 (lseek SET/CUR/END, sendfile's offset)",
		"ext4's s_maxbytes with 4 KiB blocks is 2^44-4096; puzzlefs' is MAX_LFS_FILESIZE",
		"lseek: generic_file_llseek with MAX_LFS_FILESIZE; sendfile: 0 (past EOF) or EOVERFLOW, "
		"EINVAL when pos + count overflows or the file is not regular" },
};
/* ext4_max_size() for 4 KiB blocks and extents: (2^32 - 1) blocks */
#define EXT4_MAXBYTES ((int64_t)0xFFFFFFFFLL << 12)
static unsigned long legit_used[L_N];
static int exact_mode;

/* ------------------------------------------------------------ small tools */

static uint64_t rng;
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
#define RN(n) (rnd() % (uint64_t)(n))

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--)
		h = (h ^ *b++) * 0x100000001b3ULL;
	return h;
}

struct rec {
	char s[8192];
	size_t n;
};
static void rp(struct rec *r, const char *fmt, ...)
{
	va_list ap;

	if (r->n >= sizeof(r->s) - 1)
		return;
	va_start(ap, fmt);
	int k = vsnprintf(r->s + r->n, sizeof(r->s) - r->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		r->n += (size_t)k;
	if (r->n > sizeof(r->s) - 1)
		r->n = sizeof(r->s) - 1;
}
/* ret/errno of a call, "=v" or "!ERRNO" */
static void rret(struct rec *r, const char *what, long long v)
{
	if (v < 0)
		rp(r, "%s!%s ", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	else
		rp(r, "%s=%lld ", what, v);
}
static void rdata(struct rec *r, const void *p, ssize_t n)
{
	if (n <= 0)
		return;
	rp(r, "h=%016" PRIx64 " ", fnv(p, (size_t)n));
	rp(r, "b0=");
	for (ssize_t i = 0; i < n && i < 8; i++)
		rp(r, "%02x", ((const unsigned char *)p)[i]);
	rp(r, " ");
}

/* ------------------------------------------------------------ the trees */

enum kind { K_REG, K_DIR, K_LNK, K_CHR, K_BLK, K_FIFO, K_SOCK };
struct ent {
	char *path;
	enum kind kind;
	off_t size;
};
static struct ent *ents;
static size_t nents, cents;
static size_t *dirs, ndirs;	/* indexes of the directories in ents */
static int roots[2];
static const char *rootnames[2];

static enum kind kind_of(mode_t m)
{
	return S_ISDIR(m) ? K_DIR : S_ISLNK(m) ? K_LNK : S_ISCHR(m) ? K_CHR : S_ISBLK(m) ? K_BLK :
	       S_ISFIFO(m) ? K_FIFO : S_ISSOCK(m) ? K_SOCK : K_REG;
}

static void walk(const char *rel)
{
	struct stat st;
	const char *p = *rel ? rel : ".";

	if (fstatat(roots[0], p, &st, AT_SYMLINK_NOFOLLOW))
		return;
	if (nents == cents) {
		cents = cents ? cents * 2 : 1024;
		ents = realloc(ents, cents * sizeof(*ents));
		if (!ents)
			exit(2);
	}
	ents[nents].path = strdup(p);
	ents[nents].kind = kind_of(st.st_mode);
	ents[nents].size = st.st_size;
	nents++;
	if (!S_ISDIR(st.st_mode))
		return;
	int fd = openat(roots[0], p, O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		size_t l = strlen(rel) + strlen(de->d_name) + 2;
		char *c = malloc(l);

		snprintf(c, l, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		walk(c);
		free(c);
	}
	closedir(d);
}

/* ------------------------------------------------------------ per-op parameters */

#define BUFSZ (2u << 20)
static unsigned char *buf;	/* BUFSZ bytes followed by a PROT_NONE guard page */
static unsigned char *buf2;
static long pagesz;
static int tmpfd;		/* a tmpfs file, copy_file_range target */

struct par {
	const struct ent *e;
	char path[1024];
	int flags, whence, how;
	int64_t off;
	uint64_t size, r[6];
	char name[300];
};

static int64_t hostile_off(off_t size)
{
	static const int64_t fixed[] = {
		0, 1, 4095, 4096, 4097, 65536, (1LL << 31) - 1, 1LL << 31, (1LL << 32) - 1,
		1LL << 32, 0x100000001LL, (1LL << 40), INT64_MAX, INT64_MAX - 1, INT64_MAX - 4095,
		INT64_MAX & ~4095LL, -1, -2, -4096, INT64_MIN, INT64_MIN + 1, 0x7fffffff00000000LL,
	};
	switch (RN(10)) {
	case 0: return size - 1;
	case 1: return size;
	case 2: return size + 1;
	case 3: return size + 4096;
	case 4: return size > 0 ? (int64_t)RN(size) : 0;
	case 5: return size > 0 ? (int64_t)(RN(size) & ~4095ULL) : 0;
	case 6: return (int64_t)(RN(size + 65536));
	default: return fixed[RN(sizeof(fixed) / sizeof(fixed[0]))];
	}
}

static uint64_t hostile_size(off_t size, int64_t off)
{
	static const uint64_t fixed[] = {
		0, 1, 2, 7, 8, 4095, 4096, 4097, 65536, 65537, 1 << 20, BUFSZ, BUFSZ + 1,
		0x7ffff000, (1ULL << 31), (1ULL << 32), (1ULL << 32) + 1, INT64_MAX,
		(uint64_t)INT64_MAX + 1, UINT64_MAX,
	};
	int64_t rest = size - off;

	switch (RN(8)) {
	case 0: return rest > 0 ? (uint64_t)rest : 0;
	case 1: return rest > 0 ? (uint64_t)rest + 1 : 1;
	case 2: return rest > 1 ? (uint64_t)rest - 1 : 0;
	case 3: return RN(9000);
	default: return fixed[RN(sizeof(fixed) / sizeof(fixed[0]))];
	}
}

/* A path: an entry, or a hostile variant of one. */
static void pick_path(struct par *p)
{
	p->e = &ents[RN(nents)];
	snprintf(p->path, sizeof(p->path), "%s", p->e->path);
	if (RN(10))
		return;
	size_t l = strlen(p->path);

	switch (RN(7)) {
	case 0: snprintf(p->path + l, sizeof(p->path) - l, "/"); break;
	case 1: snprintf(p->path + l, sizeof(p->path) - l, "/."); break;
	case 2:	/* not out of the tree: the two parents differ */
		snprintf(p->path + l, sizeof(p->path) - l, "%s", strcmp(p->path, ".") ? "/.." : "/"); break;
	case 3: snprintf(p->path + l, sizeof(p->path) - l, "/no-such-name"); break;
	case 4: snprintf(p->path + l, sizeof(p->path) - l, "/%0256d", 0); break;
	case 5: snprintf(p->path + l, sizeof(p->path) - l, "\xff\xfe"); break;
	default: snprintf(p->path + l, sizeof(p->path) - l, "//./"); break;
	}
}

/* Exact-size bufsize choices: 0, 1, exact-1, exact, exact+1, huge. */
static size_t exact_size(uint64_t r, ssize_t exact)
{
	switch (r % 8) {
	case 0: return 0;
	case 1: return 1;
	case 2: return exact > 0 ? (size_t)exact - 1 : 0;
	case 3: case 4: return exact > 0 ? (size_t)exact : 0;
	case 5: return exact >= 0 ? (size_t)exact + 1 : 2;
	case 6: return 65536 + 1;
	default: return BUFSZ;
	}
}

static void fill(unsigned char *p, size_t n) { memset(p, 0xa5, n); }
/* Bytes the kernel must not have written: after the returned count. */
static void check_untouched(struct rec *r, const unsigned char *p, ssize_t ret, size_t asked)
{
	size_t from = ret > 0 ? (size_t)ret : 0, to = asked < BUFSZ ? asked : BUFSZ;

	if (to > from + 65536)
		to = from + 65536;
	for (size_t i = from; i < to; i++)
		if (p[i] != 0xa5) {
			rp(r, "WROTE-PAST-RET@%zu ", i);
			return;
		}
}

/* Opens the entry for reading; fifos without blocking. */
static int open_ro(int side, const struct par *p, int extra)
{
	int fl = O_RDONLY | O_CLOEXEC | extra;

	if (p->e->kind == K_FIFO)
		fl |= O_NONBLOCK;
	return openat(roots[side], p->path, fl);
}

/* ------------------------------------------------------------ inode equality structure */

#define ITAB (1 << 16)
static struct { uint64_t ino; uint32_t first; } itab[2][ITAB];
static unsigned itab_used[2];
static uint32_t seen_ino(int side, uint64_t ino, uint32_t idx)
{
	uint64_t h = (ino * 0x9e3779b97f4a7c15ULL) >> 48;

	for (;;) {
		if (!itab[side][h].first) {
			/* full (more inodes than a tree here has): stop recording */
			if (++itab_used[side] > ITAB / 2)
				return idx;
			itab[side][h].ino = ino;
			itab[side][h].first = idx + 1;
			return idx;
		}
		if (itab[side][h].ino == ino)
			return itab[side][h].first - 1;
		h = (h + 1) % ITAB;
	}
}
/* Records, instead of the number, which entry first showed this inode. */
static void rino(struct rec *r, int side, const struct par *p, uint64_t ino, uint64_t dev)
{
	if (!ino) {
		rp(r, "INO-ZERO ");
		return;
	}
	legit_used[L_INO]++;
	if (strcmp(p->path, p->e->path)) {
		rp(r, "ino:variant ");
		return;
	}
	uint32_t idx = (uint32_t)(p->e - ents);

	rp(r, "ino~%u ", seen_ino(side, ino ^ (dev * 0xff51afd7ed558ccdULL), idx));
}

/* A directory's link count: any on ext4, exactly 1 on puzzlefs (L_DIR_NLINK). */
static void rnlink(struct rec *r, int side, unsigned mode, unsigned long nlink)
{
	if (S_ISDIR(mode) && !exact_mode && (side == 0 || nlink == 1)) {
		legit_used[L_DIR_NLINK]++;
		rp(r, "nlink=dir ");
		return;
	}
	rp(r, "nlink=%lu ", nlink);
}

static void rstat(struct rec *r, int side, const struct par *p, const struct stat *st)
{
	rp(r, "mode=%o uid=%u gid=%u ", st->st_mode, st->st_uid, st->st_gid);
	rnlink(r, side, st->st_mode, (unsigned long)st->st_nlink);
	if (!S_ISDIR(st->st_mode) || exact_mode)
		rp(r, "size=%lld ", (long long)st->st_size);
	else
		legit_used[L_DIR_SIZE]++;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		rp(r, "rdev=%u:%u ", major(st->st_rdev), minor(st->st_rdev));
	legit_used[L_STORAGE]++;
	legit_used[L_TIMES]++;
	legit_used[L_DEV]++;
	if (p)
		rino(r, side, p, st->st_ino, st->st_dev);
}

/* ------------------------------------------------------------ operations */

static sigjmp_buf jb;
static volatile sig_atomic_t in_touch;
static void on_fault(int sig)
{
	if (in_touch)
		siglongjmp(jb, sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

typedef void opfn(int side, struct par *p, struct rec *r);

static void gen_stat(struct par *p)
{
	pick_path(p);
	p->how = (int)RN(4);
	p->flags = (int)rnd();
}
static void op_stat(int side, struct par *p, struct rec *r)
{
	struct stat st;
	int rc;

	switch (p->how) {
	case 0: rc = fstatat(roots[side], p->path, &st, 0); break;
	case 1: rc = fstatat(roots[side], p->path, &st, AT_SYMLINK_NOFOLLOW); break;
	case 2: {
		int fd = openat(roots[side], p->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

		rret(r, "opath", fd < 0 ? -1 : 0);
		rc = fd < 0 ? -1 : fstatat(fd, "", &st, AT_EMPTY_PATH);
		if (fd >= 0)
			close(fd);
		break;
	}
	default:
		/* random flags: invalid bits must give the same EINVAL */
		rc = fstatat(roots[side], p->path, &st, p->flags & (AT_SYMLINK_NOFOLLOW | 0x7000 |
			     AT_NO_AUTOMOUNT | (p->flags & 0x10000)));
		break;
	}
	rret(r, "stat", rc);
	if (!rc)
		rstat(r, side, p, &st);
}

static void gen_statx(struct par *p)
{
	pick_path(p);
	p->r[0] = rnd();	/* mask */
	if (RN(4))
		p->r[0] &= STATX_ALL | STATX_MNT_ID | STATX_DIOALIGN;
	p->flags = RN(3) ? (int)(rnd() & (AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_TYPE | AT_NO_AUTOMOUNT))
			 : (int)rnd();
}
static void op_statx(int side, struct par *p, struct rec *r)
{
	struct statx sx;
	int rc = statx(roots[side], p->path, p->flags, (unsigned)p->r[0], &sx);

	rret(r, "statx", rc);
	if (rc)
		return;
	rp(r, "mask=%x ", sx.stx_mask & STATX_BASIC_STATS & ~(exact_mode ? 0 : STATX_BLOCKS));
	legit_used[L_STATX_EXTRA]++;
	rp(r, "mode=%o uid=%u gid=%u ", sx.stx_mode, sx.stx_uid, sx.stx_gid);
	rnlink(r, side, sx.stx_mode, sx.stx_nlink);
	if (!S_ISDIR(sx.stx_mode) || exact_mode)
		rp(r, "size=%llu ", (unsigned long long)sx.stx_size);
	if (S_ISCHR(sx.stx_mode) || S_ISBLK(sx.stx_mode))
		rp(r, "rdev=%u:%u ", sx.stx_rdev_major, sx.stx_rdev_minor);
	legit_used[L_STORAGE]++;
	rino(r, side, p, sx.stx_ino, makedev(sx.stx_dev_major, sx.stx_dev_minor));
}

static void gen_access(struct par *p)
{
	pick_path(p);
	p->how = (int)RN(8);	/* F_OK..R|W|X */
	p->flags = RN(4) ? (int)(rnd() & (AT_EACCESS | AT_SYMLINK_NOFOLLOW)) : (int)rnd();
}
static void op_access(int side, struct par *p, struct rec *r)
{
	rret(r, "faccessat2", syscall(SYS_faccessat2, roots[side], p->path, p->how, p->flags));
}

static void gen_readlink(struct par *p)
{
	pick_path(p);
	/* mostly symlinks */
	for (int i = 0; i < 20 && p->e->kind != K_LNK; i++)
		pick_path(p);
	p->r[0] = rnd();
	p->how = (int)RN(3);
}
static void op_readlink(int side, struct par *p, struct rec *r)
{
	ssize_t exact = readlinkat(roots[0], p->path, (char *)buf2, BUFSZ);	/* the reference length */
	size_t sz = p->r[0] % 16 == 15 ? (size_t)-1 : exact_size(p->r[0], exact);
	ssize_t n;

	fill(buf, sz < BUFSZ ? sz + 16 : BUFSZ);
	if (p->how == 0) {
		n = readlinkat(roots[side], p->path, (char *)buf, sz);
	} else {
		/* through an O_PATH fd and an empty path */
		int fd = openat(roots[side], p->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

		n = fd < 0 ? -1 : readlinkat(fd, "", (char *)buf, sz);
		if (fd >= 0)
			close(fd);
	}
	rp(r, "size=%zu ", sz);
	rret(r, "readlink", n);
	rdata(r, buf, n);
	check_untouched(r, buf, n, sz < 4096 ? sz + 16 : 4096);
}

/* Sorted names of a listxattr buffer, so the comparison ignores their order. */
static void rlist(struct rec *r, const char *b, ssize_t n)
{
	const char *names[512];
	int k = 0;

	for (ssize_t i = 0; i < n && k < 512; i += (ssize_t)strlen(b + i) + 1)
		names[k++] = b + i;
	if (!exact_mode)
		legit_used[L_XATTR_ORDER]++;
	for (int i = 1; i < k && !exact_mode; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			const char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	if (n > 0 && b[n - 1] != 0)
		rp(r, "UNTERMINATED ");
	for (int i = 0; i < k; i++)
		rp(r, "[%s]", names[i]);
	rp(r, " ");
}

static const char *const hostile_names[] = {
	"", "user.", "user.no-such", "trusted.no-such", "security.selinux", "system.posix_acl_access",
	"system.posix_acl_default", "foo.bar", "user", "trusted.secret", "user.comment",
	"security.capability", "system.data", "user.k01",
};
static void gen_xattr(struct par *p)
{
	pick_path(p);
	p->how = (int)RN(6);
	p->r[0] = rnd();
	p->r[1] = rnd();
	p->r[2] = rnd();
}
static void op_xattr(int side, struct par *p, struct rec *r)
{
	/* The key: one of the reference's (as this uid sees them), or a hostile one. The
	 * *xattr calls have no *at form: paths are relative to the cwd, the reference
	 * root, which is left for the test root only around the call under test. */
	char list[65536], name[300];
	ssize_t ln = llistxattr(p->path, list, sizeof(list));
	const char *names[256];
	int k = 0;

	for (ssize_t i = 0; i < ln && k < 256; i += (ssize_t)strlen(list + i) + 1)
		names[k++] = list + i;
	if (k && p->r[1] % 3)
		snprintf(name, sizeof(name), "%s", names[p->r[1] % (unsigned)k]);
	else if (p->r[1] % 17 == 0)
		snprintf(name, sizeof(name), "user.%0250d", 0);	/* 255 bytes */
	else if (p->r[1] % 17 == 1)
		snprintf(name, sizeof(name), "user.%0251d", 0);	/* 256: ERANGE */
	else
		snprintf(name, sizeof(name), "%s",
			 hostile_names[p->r[1] % (sizeof(hostile_names) / sizeof(*hostile_names))]);
	rp(r, "key=%.40s ", name);
	int follow = p->how % 2;	/* getxattr vs lgetxattr */
	ssize_t exact, n;
	size_t sz;
	int fd = -1;

	if (p->how < 2) {
		exact = follow ? getxattr(p->path, name, NULL, 0) : lgetxattr(p->path, name, NULL, 0);
		sz = exact_size(p->r[0], exact);
		fill(buf, sz < BUFSZ ? sz : BUFSZ);
		if (fchdir(roots[side]))
			rp(r, "CHDIR-FAILED ");
		n = follow ? getxattr(p->path, name, buf, sz) : lgetxattr(p->path, name, buf, sz);
	} else if (p->how < 4) {
		exact = follow ? listxattr(p->path, NULL, 0) : llistxattr(p->path, NULL, 0);
		sz = exact_size(p->r[0], exact);
		fill(buf, sz < BUFSZ ? sz : BUFSZ);
		if (fchdir(roots[side]))
			rp(r, "CHDIR-FAILED ");
		n = follow ? listxattr(p->path, (char *)buf, sz) : llistxattr(p->path, (char *)buf, sz);
	} else {
		/* through an fd: fgetxattr / flistxattr (O_PATH fds give EBADF) */
		exact = p->r[2] % 2 ? getxattr(p->path, name, NULL, 0) : listxattr(p->path, NULL, 0);
		sz = exact_size(p->r[0], exact);
		fill(buf, sz < BUFSZ ? sz : BUFSZ);
		fd = open_ro(side, p, p->how == 5 ? O_PATH : 0);
		rret(r, "open", fd);
		if (fd < 0)
			return;
		n = p->r[2] % 2 ? fgetxattr(fd, name, buf, sz) : flistxattr(fd, (char *)buf, sz);
	}
	int e = errno;

	if (fchdir(roots[0]))
		rp(r, "CHDIR-FAILED ");
	if (fd >= 0)
		close(fd);
	errno = e;
	int is_list = p->how == 2 || p->how == 3 || (p->how >= 4 && p->r[2] % 2 == 0);

	if (!is_list && n < 0 && !strncmp(name, "system.posix_acl", 16) && !exact_mode) {
		/* L_ACL: puzzlefs' EOPNOTSUPP is as good as ext4's ENODATA */
		legit_used[L_ACL]++;
		if ((side == 1 && e == EOPNOTSUPP) || (side == 0 && (e == ENODATA || e == EOPNOTSUPP))) {
			rp(r, "acl:ok ");
			return;
		}
	}
	if (!is_list && n < 0 && !strncmp(name, "security.", 9) && !exact_mode) {
		legit_used[L_SECURITY]++;
		if ((side == 1 && (e == ENODATA || e == EOPNOTSUPP)) || (side == 0 && (e == EOPNOTSUPP || e == ENODATA))) {
			rp(r, "security:ok ");
			return;
		}
	}
	rp(r, "size=%zu ", sz);
	rret(r, is_list ? "listxattr" : "getxattr", n);
	if (sz && n > 0) {
		if (is_list)
			rlist(r, (char *)buf, n);
		else
			rdata(r, buf, n);
	}
	if (sz)
		check_untouched(r, buf, n, sz < 8192 ? sz : 8192);
}

static void gen_read(struct par *p)
{
	pick_path(p);
	for (int i = 0; i < 10 && p->e->kind != K_REG; i++)
		pick_path(p);
	p->how = (int)RN(7);
	p->off = hostile_off(p->e->size);
	/* lseek+read at positions ext4 refuses (L_MAXBYTES): lseek ops check those */
	if ((p->how <= 1 || p->how == 4) && p->off > EXT4_MAXBYTES)
		p->off = EXT4_MAXBYTES;
	p->size = hostile_size(p->e->size, p->off);
	p->r[0] = rnd();
	p->r[1] = rnd();
}
static void op_read(int side, struct par *p, struct rec *r)
{
	int fd = open_ro(side, p, 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	size_t sz = (size_t)p->size;
	size_t fillsz = sz < BUFSZ ? sz : BUFSZ;
	ssize_t n = -1;

	fill(buf, fillsz);
	switch (p->how) {
	case 0: case 1: {
		off_t o = lseek(fd, p->off, SEEK_SET);

		rret(r, "lseek", o);
		n = read(fd, buf, sz);
		rret(r, "read", n);
		break;
	}
	case 2: case 3:
		n = pread(fd, buf, sz, p->off);
		rret(r, "pread", n);
		break;
	case 4: case 5: case 6: {
		/* up to 3 iovecs over the buffer, the last one may run into the guard page */
		struct iovec iov[3];
		int cnt = 1 + (int)(p->r[0] % 3);
		size_t at = 0;

		for (int i = 0; i < cnt; i++) {
			size_t l = i == cnt - 1 ? sz : (size_t)(p->r[1] >> (i * 16)) % 5000;

			if (at + l > BUFSZ && i < cnt - 1)
				l = 0;
			iov[i].iov_base = buf + at;
			iov[i].iov_len = l;
			if (l < BUFSZ)
				at += l;
		}
		if (p->how == 4) {
			off_t o = lseek(fd, p->off, SEEK_SET);

			rret(r, "lseek", o);
			n = readv(fd, iov, cnt);
		} else if (p->how == 5) {
			n = preadv(fd, iov, cnt, p->off);
		} else {
			/* preadv2 with -1 (current position) or an offset, flags 0 or HIPRI */
			n = preadv2(fd, iov, cnt, p->r[0] % 4 == 0 ? -1 : p->off,
				    p->r[0] % 8 == 1 ? RWF_HIPRI : 0);
		}
		rret(r, "readv", n);
		break;
	}
	}
	rp(r, "size=%" PRIu64 " ", p->size);
	rdata(r, buf, n);
	if (p->how < 4)
		check_untouched(r, buf, n, fillsz);
	rret(r, "pos", lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* What generic_file_llseek answers (puzzlefs' regular files and directories). */
static int64_t generic_llseek(int64_t pos, int64_t off, int whence, int64_t size, int *err)
{
	int64_t n;

	*err = 0;
	switch (whence) {
	case SEEK_SET: n = off; break;
	case SEEK_CUR:
		if (off == 0)
			return pos;
		if (__builtin_add_overflow(pos, off, &n))
			n = -1;
		break;
	case SEEK_END:
		if (__builtin_add_overflow(size, off, &n))
			n = -1;
		break;
	case SEEK_DATA:
		if (off < 0 || off >= size) { *err = ENXIO; return -1; }
		n = off;
		break;
	case SEEK_HOLE:
		if (off < 0 || off >= size) { *err = ENXIO; return -1; }
		n = size;
		break;
	default: *err = EINVAL; return -1;
	}
	if (n < 0) { *err = EINVAL; return -1; }
	return n;
}

static void gen_lseek(struct par *p)
{
	pick_path(p);
	for (int i = 0; i < 10 && p->e->kind != K_REG; i++)
		pick_path(p);
	p->off = hostile_off(p->e->size);
	p->whence = RN(20) ? (int)RN(5) : (int)RN(8);
	p->r[0] = (uint64_t)hostile_off(p->e->size);	/* a first position, one ext4 takes too */
	if ((int64_t)p->r[0] > EXT4_MAXBYTES)
		p->r[0] = (uint64_t)EXT4_MAXBYTES;
	p->size = RN(64) + 1;
}
static void op_lseek(int side, struct par *p, struct rec *r)
{
	int fd = open_ro(side, p, 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	struct stat st;

	fstat(fd, &st);
	off_t first = lseek(fd, (off_t)p->r[0], SEEK_SET);

	rret(r, "lseek0", first);
	off_t pos = lseek(fd, 0, SEEK_CUR);
	errno = 0;
	off_t o = lseek(fd, p->off, p->whence);
	int e = errno;

	if (S_ISDIR(st.st_mode) && !exact_mode) {
		/* a directory reached through a variant path: L_DIR_SEEK */
		int ge;
		int64_t g = generic_llseek(pos, p->off, p->whence, st.st_size, &ge);

		legit_used[L_DIR_SEEK]++;
		if (side == 1 && !(o == g || (o < 0 && (e == ge || e == EINVAL))))
			rp(r, "NOT-GENERIC(%lld!%d want %lld!%d) ", (long long)o, e, (long long)g, ge);
		rp(r, "dirseek:checked ");
		close(fd);
		return;
	}
	if ((p->whence == SEEK_DATA || p->whence == SEEK_HOLE) && S_ISREG(st.st_mode) && !exact_mode) {
		legit_used[L_SEEK_HOLE]++;
		if (side == 1) {
			int ge;
			int64_t g = generic_llseek(pos, p->off, p->whence, st.st_size, &ge);

			if (o != g || (o < 0 && e != ge))
				rp(r, "NOT-GENERIC(%lld!%d want %lld!%d) ", (long long)o, e, (long long)g, ge);
		}
		/* The reference may answer anything in [off, size] or ENXIO. */
		rp(r, "seek-hole:checked ");
		close(fd);
		return;
	}
	if (!exact_mode && S_ISREG(st.st_mode) && p->whence <= SEEK_END) {
		int ge;
		int64_t g = generic_llseek(pos, p->off, p->whence, st.st_size, &ge);

		if (g > EXT4_MAXBYTES) {
			legit_used[L_MAXBYTES]++;
			if (side == 1 && o != g)
				rp(r, "NOT-GENERIC(%lld!%d want %lld) ", (long long)o, e, (long long)g);
			if (side == 1 && o == g && g >= st.st_size) {
				/* past EOF: nothing, or EINVAL when pos + count overflows */
				ssize_t n = read(fd, buf, p->size);

				if (n > 0 || (n < 0 && errno != EINVAL))
					rp(r, "READ-PAST-EOF-GAVE(%zd,%s) ", n, strerrorname_np(errno));
			}
			rp(r, "maxbytes:checked ");
			close(fd);
			return;
		}
	}
	errno = e;
	rret(r, "lseek", o);
	ssize_t n = read(fd, buf, p->size);

	rret(r, "read", n);
	rdata(r, buf, n);
	close(fd);
}

/* ---- directories */

struct dlist {
	char *names;		/* name\0type\0 ... */
	size_t len, cnt;
	uint32_t *slot;		/* hash table: offset+1 of a name, 0 empty */
	size_t nslot;
};
static struct dlist *dcache;	/* per entry index: the reference's full listing */

struct linux_dirent64 { uint64_t d_ino; int64_t d_off; unsigned short d_reclen;
	unsigned char d_type; char d_name[]; };

static long gd(int fd, void *b, size_t n) { return syscall(SYS_getdents64, fd, b, n); }
/* getdents64 takes an unsigned int count and keeps it in an int: what fits */
static int eff_count(size_t n) { return (int)(unsigned)n; }
static int fits(size_t n, unsigned reclen) { return eff_count(n) >= 0 && reclen <= (unsigned)eff_count(n); }

/* The reference's listing of entry e (names with d_type), made once. */
static const struct dlist *ref_list(const struct ent *e)
{
	struct dlist *l = &dcache[e - ents];

	if (l->names)
		return l;
	l->names = malloc(1);
	int fd = openat(roots[0], e->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	while (fd >= 0) {
		long n = gd(fd, buf2, 65536);

		if (n <= 0)
			break;
		for (long at = 0; at < n;) {
			struct linux_dirent64 *d = (void *)(buf2 + at);
			size_t nl = strlen(d->d_name);

			l->names = realloc(l->names, l->len + nl + 3);
			memcpy(l->names + l->len, d->d_name, nl + 1);
			l->names[l->len + nl + 1] = (char)d->d_type;
			l->names[l->len + nl + 2] = 0;
			l->len += nl + 3;
			l->cnt++;
			at += d->d_reclen;
		}
	}
	if (fd >= 0)
		close(fd);
	for (l->nslot = 16; l->nslot < 2 * l->cnt; l->nslot *= 2)
		;
	l->slot = calloc(l->nslot, sizeof(*l->slot));
	for (size_t at = 0; at < l->len;) {
		size_t nl = strlen(l->names + at), h = fnv(l->names + at, nl) & (l->nslot - 1);

		while (l->slot[h])
			h = (h + 1) & (l->nslot - 1);
		l->slot[h] = (uint32_t)at + 1;
		at += nl + 3;
	}
	return l;
}
/* 1: name with that type, 2: name with another type, 0: no such name */
static int in_list(const struct dlist *l, const char *name, unsigned char type)
{
	size_t nl = strlen(name), h = fnv(name, nl) & (l->nslot - 1);

	for (; l->slot[h]; h = (h + 1) & (l->nslot - 1)) {
		const char *s = l->names + l->slot[h] - 1;

		if (!strcmp(s, name))
			return (unsigned char)s[nl + 1] == type ? 1 : 2;
	}
	return 0;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}
/* Sorts names[0..n) in place and reports names listed twice. */
static void sort_dups(struct rec *r, char **names, size_t n)
{
	qsort(names, n, sizeof(*names), cmpstr);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i - 1], names[i])) {
			rp(r, "DUPLICATE(%s) ", names[i]);
			break;
		}
}

struct names {
	char **v;
	int64_t *off;
	size_t n, cap;
};
static void names_add(struct names *s, const char *name, int64_t off)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		s->off = realloc(s->off, s->cap * sizeof(*s->off));
	}
	s->off[s->n] = off;
	s->v[s->n++] = strdup(name);
}
static void names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	free(s->off);
}

/* Checks one getdents64 result: well-formed records, names of the directory with
 * their d_type, d_ino never 0 and equal to the entry's st_ino (first entries: a
 * stat per entry is costly). Adds the names to s. */
static void check_batch(int fd, const struct ent *e, const unsigned char *b, long n, struct rec *r,
			struct names *s)
{
	const struct dlist *l = ref_list(e);
	long cnt = 0;

	for (long at = 0; at < n; cnt++) {
		const struct linux_dirent64 *d = (const void *)(b + at);

		if (d->d_reclen < 20 || at + d->d_reclen > n ||
		    strnlen(d->d_name, d->d_reclen - 19u) >= d->d_reclen - 19u) {
			rp(r, "BAD-RECORD@%ld ", at);
			return;
		}
		int k = in_list(l, d->d_name, d->d_type);

		if (k != 1)
			rp(r, "%s(%s,%u) ", k ? "WRONG-TYPE" : "UNKNOWN-NAME", d->d_name, d->d_type);
		if (!d->d_ino)
			rp(r, "DINO-ZERO(%s) ", d->d_name);
		names_add(s, d->d_name, d->d_off);
		if (cnt < 3 && strcmp(d->d_name, "..")) {
			struct stat st;

			if (!fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) && st.st_ino != d->d_ino)
				rp(r, "DINO(%s %" PRIu64 "!=%" PRIu64 ") ", d->d_name, d->d_ino,
				   (uint64_t)st.st_ino);
		}
		at += d->d_reclen;
	}
}

static int64_t skip_pos[8];
static int nskip;

static const size_t dsizes[] = { 0, 1, 19, 23, 24, 25, 32, 48, 64, 100, 280, 512, 4096, 32768, 65536,
				 BUFSZ, (size_t)UINT32_MAX, (size_t)UINT32_MAX + 2, SIZE_MAX };

static void gen_dir(struct par *p)
{
	p->e = &ents[dirs[RN(ndirs)]];
	snprintf(p->path, sizeof(p->path), "%s", p->e->path);
	p->how = (int)RN(3);
	p->size = dsizes[RN(sizeof(dsizes) / sizeof(*dsizes))];
	/* positions: hostile ones, small ones, and around the u32 and i32 bounds
	 * (directory positions are entry indexes + 2 in puzzlefs) */
	static const int64_t bounds[] = { 0x7fffffff, 0x80000000LL, 0x80000001LL, 0xfffffffeLL,
					  0xffffffffLL, 0x100000000LL, 0x100000001LL, 0x100000002LL };

	p->off = hostile_off(ents[RN(nents)].size);
	if (RN(4) == 0)
		p->off = (int64_t)RN(64);
	else if (RN(3) == 0)
		p->off = bounds[RN(sizeof(bounds) / sizeof(*bounds))];
	p->whence = RN(8) ? (int)RN(5) : (int)RN(8);
	p->r[0] = rnd();
	p->r[1] = rnd();
	/* -x: look past a known bug */
	for (int i = 0; i < nskip; i++)
		if (p->off == skip_pos[i])
			p->off--;
}

/* A complete listing with one buffer size, compared as a set (L_DIR_ORDER). A
 * buffer too small for the next entry gives EINVAL on both; the listing goes on
 * with one that fits, as a caller would. */
static void dir_list(struct par *p, struct rec *r, int fd)
{
	size_t sz = (size_t)p->size;
	struct names s = { 0 };
	long calls = 0;

	/* tiny buffers over huge directories: too many calls for one op */
	if (sz < 4096 && ref_list(p->e)->cnt > 1000)
		sz = 32768;
	rp(r, "size=%zu ", sz);
	for (;;) {
		long n = gd(fd, buf, sz);

		if (n < 0 && errno == EINVAL && eff_count(sz) < 280) {
			int64_t pos = lseek(fd, 0, SEEK_CUR);
			long m = gd(fd, buf2, 4096);

			if (m > 0 && fits(sz, ((struct linux_dirent64 *)buf2)->d_reclen))
				rp(r, "EINVAL-BUT-FITS(%u) ", ((struct linux_dirent64 *)buf2)->d_reclen);
			if (m <= 0) {
				rret(r, "einval-at-end", m);
				break;
			}
			lseek(fd, pos, SEEK_SET);
			n = gd(fd, buf, 4096);
		}
		if (n < 0) {
			rret(r, "getdents", n);
			break;
		}
		if (n == 0 || ++calls > 100000)
			break;
		check_batch(fd, p->e, buf, n, r, &s);
	}
	if (!exact_mode)
		legit_used[L_DIR_ORDER]++;
	uint64_t h = 0;

	if (!exact_mode)
		sort_dups(r, s.v, s.n);
	for (size_t i = 0; i < s.n; i++)
		h = h * 31 + fnv(s.v[i], strlen(s.v[i]));
	rp(r, "entries=%zu names=%016" PRIx64 " ", s.n, h);
	names_free(&s);
}

static void op_dir(int side, struct par *p, struct rec *r)
{
	int fd = openat(roots[side], p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	if (p->how == 0) {
		dir_list(p, r, fd);
	} else if (p->how == 1) {
		/* hostile lseek, then getdents64 (L_DIR_SEEK) */
		struct stat st;
		struct names s = { 0 };

		fstat(fd, &st);
		if (p->r[0] % 3 == 0)
			gd(fd, buf2, 24 + p->r[0] % 200);	/* be somewhere first */
		int64_t pos = lseek(fd, 0, SEEK_CUR);

		errno = 0;
		int64_t o = lseek(fd, p->off, p->whence);
		int e = errno;

		for (int i = 0; i < nskip && side == 1; i++)
			if (lseek(fd, 0, SEEK_CUR) == skip_pos[i])
				lseek(fd, 0, SEEK_SET);	/* -x, reached through SEEK_CUR */
		if (exact_mode) {
			errno = e;
			rret(r, "lseek", o);
		} else {
			legit_used[L_DIR_SEEK]++;
			if (side == 1) {
				int ge;
				int64_t g = generic_llseek(pos, p->off, p->whence, st.st_size, &ge);

				if (!(o == g || (o < 0 && (e == ge || e == EINVAL))))
					rp(r, "NOT-GENERIC(%lld!%d want %lld!%d) ", (long long)o, e,
					   (long long)g, ge);
			}
			rp(r, "dirseek:checked ");
		}
		size_t sz = (size_t)p->size;
		long n = gd(fd, buf, sz);

		if (n < 0 && errno == EINVAL && !exact_mode) {
			/* only if the next entry does not fit */
			long m = gd(fd, buf2, 4096);

			if (m > 0 && fits(sz, ((struct linux_dirent64 *)buf2)->d_reclen))
				rp(r, "EINVAL-BUT-FITS ");
		} else if (n < 0) {
			rret(r, "getdents", n);
		} else if (n > 0) {
			check_batch(fd, p->e, buf, n, r, &s);
			sort_dups(r, s.v, s.n);
			if (exact_mode)
				rp(r, "n=%ld ", n);
		}
		names_free(&s);
	} else {
		/* seekdir to a cookie of an earlier getdents64: the rest of the listing, exactly */
		struct names s = { 0 };
		long calls = 0;

		for (;;) {
			long n = gd(fd, buf, 32768);

			if (n <= 0 || ++calls > 10000)
				break;
			check_batch(fd, p->e, buf, n, r, &s);
		}
		size_t k = s.n ? (size_t)(p->r[1] % s.n) : 0;

		legit_used[L_DIR_COOKIE]++;
		if (s.n) {
			int64_t o = lseek(fd, s.off[k], SEEK_SET);

			if (o != s.off[k])
				rp(r, "SEEKDIR-FAILED(%lld!%s) ", (long long)o, strerrorname_np(errno));
			size_t at = k + 1, bad = 0;

			for (calls = 0; calls < 10000; calls++) {
				long n = gd(fd, buf, 4096);

				if (n <= 0)
					break;
				for (long b = 0; b < n;) {
					struct linux_dirent64 *d = (void *)(buf + b);

					if (at >= s.n || strcmp(s.v[at], d->d_name))
						bad++;
					at++;
					b += d->d_reclen;
				}
			}
			if (bad || at != s.n)
				rp(r, "RESUME-DIFFERS(after #%zu: %zu wrong, %zu of %zu) ", k, bad, at, s.n);
		}
		char **sorted = malloc((s.n + 1) * sizeof(char *));

		memcpy(sorted, s.v, s.n * sizeof(char *));
		sort_dups(r, sorted, s.n);
		free(sorted);
		rp(r, "entries=%zu ", s.n);
		names_free(&s);
	}
	close(fd);
}

/* ---- open + probe */

static const int oflags[] = {
	O_DIRECTORY, O_NOFOLLOW, O_DIRECT, O_PATH, O_NOATIME, O_NONBLOCK, O_LARGEFILE, O_CLOEXEC,
	O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_SYNC, O_TMPFILE, O_NOCTTY,
	3 /* O_ACCMODE */,
};
static void gen_open(struct par *p)
{
	pick_path(p);
	p->flags = 0;
	int k = (int)RN(4);

	for (int i = 0; i < k; i++) {
		int f = oflags[RN(sizeof(oflags) / sizeof(*oflags))];

		/* writes mostly one at a time: both trees are read-only */
		p->flags |= f;
	}
	if (p->e->kind == K_FIFO)
		p->flags |= O_NONBLOCK;
	p->how = (int)RN(2);
	p->r[0] = rnd();
}
static void op_open(int side, struct par *p, struct rec *r)
{
	int fd = p->how ? openat(roots[side], p->path, p->flags | O_CLOEXEC, 0644)
			: (int)syscall(SYS_openat2, roots[side], p->path,
				       &(struct { uint64_t f, m, res; }){ (uint64_t)(p->flags | O_CLOEXEC),
				       (p->flags & (O_CREAT | O_TMPFILE)) ? 0644 : 0,
				       p->r[0] % 3 ? 0 : (p->r[0] >> 8) & 0x1f }, 24);
	int e = errno;

	if (!exact_mode && (p->flags & O_DIRECT) && !(p->flags & O_PATH)) {
		legit_used[L_ODIRECT]++;
		if (fd < 0 && e == EINVAL) {
			/* puzzlefs may refuse O_DIRECT (and this ext4 does at times) */
			struct stat st;

			if (!fstatat(roots[0], p->path, &st, 0) && S_ISREG(st.st_mode)) {
				rp(r, "odirect:refused ");
				return;
			}
		}
		if (fd >= 0) {
			struct stat st;

			if (!fstat(fd, &st) && S_ISREG(st.st_mode)) {
				/* a regular file opened O_DIRECT: matches the refusal above */
				rp(r, "odirect:refused ");
				close(fd);
				return;
			}
		}
	}
	errno = e;
	rret(r, "open", fd < 0 ? -1 : 0);
	if (fd < 0)
		return;
	struct stat st;

	rret(r, "fstat", fstat(fd, &st));
	rstat(r, side, NULL, &st);
	rp(r, "fl=%x ", fcntl(fd, F_GETFL) & ~(O_LARGEFILE));
	ssize_t n = read(fd, buf, 16);

	rret(r, "read", n);
	rdata(r, buf, n);
	rret(r, "fgetxattr", fgetxattr(fd, "user.comment", buf, 64));
	long g = gd(fd, buf, 4096);

	if (g > 0)
		rp(r, "getdents>0 ");
	else
		rret(r, "getdents", g);
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);

	rret(r, "mmap", m == MAP_FAILED ? -1 : 0);
	if (m != MAP_FAILED)
		munmap(m, 4096);
	if (!S_ISDIR(st.st_mode))
		rret(r, "lseek-end", lseek(fd, 0, SEEK_END));
	close(fd);
}

/* ---- splice, sendfile, copy_file_range */

static void gen_xfer(struct par *p)
{
	gen_read(p);
	p->how = (int)RN(3);
}
static void op_xfer(int side, struct par *p, struct rec *r)
{
	int fd = open_ro(side, p, 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	int64_t off = p->off;
	ssize_t n;
	size_t sz = (size_t)p->size;

	if (p->how < 2) {
		int pp[2];

		if (pipe2(pp, O_NONBLOCK | O_CLOEXEC)) {
			rp(r, "PIPE-FAILED ");
			close(fd);
			return;
		}
		if (p->how == 0) {
			if (p->r[0] % 4 == 0 && off <= EXT4_MAXBYTES) {
				lseek(fd, off, SEEK_SET);
				n = splice(fd, NULL, pp[1], NULL, sz, SPLICE_F_NONBLOCK);
			} else {
				n = splice(fd, (loff_t *)&off, pp[1], NULL, sz, SPLICE_F_NONBLOCK);
			}
			rret(r, "splice", n);
		} else {
			n = sendfile(pp[1], fd, p->r[0] % 4 == 0 ? NULL : (off_t *)&off, sz);
			if (p->r[0] % 4 && p->off >= EXT4_MAXBYTES && !exact_mode) {
				int e = errno;

				legit_used[L_MAXBYTES]++;
				/* rw_verify_area: EINVAL when pos + count overflows */
				int ovf = (ssize_t)sz < 0 || (int64_t)((uint64_t)p->off + sz) < 0;
				/*
				 * Below puzzlefs' s_maxbytes, splice_direct_to_actor refuses
				 * any input but a regular file with EINVAL, where ext4 gives
				 * EOVERFLOW first (seed 578085971, a directory).
				 */
				struct stat fst;
				int nonreg = fstat(fd, &fst) == 0 && !S_ISREG(fst.st_mode);

				if (side == 1 && n != 0 &&
				    !(n < 0 && (e == EOVERFLOW || ((ovf || nonreg) && e == EINVAL))))
					rp(r, "SENDFILE-GAVE(%zd,%s) ", n, strerrorname_np(e));
				n = 0;
				off = p->off;
				rp(r, "maxbytes:checked ");
			}
			rret(r, "sendfile", n);
		}
		close(pp[1]);
		ssize_t got = 0, m;

		while ((m = read(pp[0], buf + got, BUFSZ - (size_t)got)) > 0)
			got += m;
		rp(r, "piped=%zd ", got);
		rdata(r, buf, got);
		close(pp[0]);
	} else {
		/* into a tmpfs file; huge lengths only near the end of big files */
		if (p->e->size > (8 << 20) && sz > (4u << 20) && off >= 0 && off < p->e->size - (4 << 20))
			sz = 4u << 20;
		if (ftruncate(tmpfd, 0))
			rp(r, "TRUNCATE-FAILED ");
		loff_t out = 0;

		n = copy_file_range(fd, (loff_t *)&off, tmpfd, &out, sz, 0);
		rret(r, "copy_file_range", n);
		if (n > 0) {
			size_t want = (size_t)n < BUFSZ ? (size_t)n : BUFSZ;
			ssize_t got = pread(tmpfd, buf, want, 0);

			rdata(r, buf, got);
		}
	}
	rp(r, "off=%lld ", (long long)off);
	rret(r, "pos", lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* ---- mmap */

static void gen_mmap(struct par *p)
{
	gen_read(p);
	int64_t sz = p->e->size;
	int64_t pg = pagesz;
	static const int64_t fixed[] = { 0, 4096, 1LL << 32, INT64_MAX & ~4095LL, 1, 4095, -4096 };

	switch (RN(6)) {
	case 0: p->off = sz & ~(pg - 1); break;
	case 1: p->off = (sz + pg - 1) & ~(pg - 1); break;
	case 2: p->off = ((sz + pg - 1) & ~(pg - 1)) + pg; break;
	case 3: p->off = sz > 0 ? (int64_t)(RN(sz) & ~(uint64_t)(pg - 1)) : 0; break;
	default: p->off = fixed[RN(sizeof(fixed) / sizeof(*fixed))]; break;
	}
	static const uint64_t lens[] = { 0, 1, 4096, 8192, 12288, 65536, 64 * 4096 };

	p->size = RN(3) ? (uint64_t)(sz - p->off + 2 * pg) : lens[RN(sizeof(lens) / sizeof(*lens))];
	if (p->size > 64 * 4096 || (int64_t)p->size < 0)
		p->size = 64 * 4096;
	p->how = (int)RN(4);	/* private/shared, PROT_READ or READ|WRITE */
}
static void op_mmap(int side, struct par *p, struct rec *r)
{
	int fd = open_ro(side, p, 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	int prot = PROT_READ | (p->how >= 2 ? PROT_WRITE : 0);
	int fl = (p->how % 2) ? MAP_SHARED : MAP_PRIVATE;
	unsigned char *m = mmap(NULL, p->size, prot, fl, fd, p->off);

	rret(r, "mmap", m == MAP_FAILED ? -1 : 0);
	if (m != MAP_FAILED) {
		int64_t size = lseek(fd, 0, SEEK_END);

		for (volatile uint64_t at = 0; at < p->size; at += (uint64_t)pagesz) {
			int sig;

			in_touch = 1;
			if ((sig = sigsetjmp(jb, 1)) != 0) {
				in_touch = 0;
				rp(r, "%s ", sig == SIGBUS ? "B" : "SEGV");
				continue;
			}
			size_t l = p->size - at < (uint64_t)pagesz ? p->size - at : (size_t)pagesz;
			uint64_t h = fnv(m + at, (size_t)pagesz);
			int64_t fo = p->off + (int64_t)at;

			in_touch = 0;
			/* bytes past EOF within the last page must read as zero */
			if (fo + pagesz > size && fo < size)
				for (int64_t i = size - fo; i < pagesz; i++)
					if (m[at + (size_t)i]) {
						rp(r, "NONZERO-PAST-EOF@%lld ", (long long)(fo + i));
						break;
					}
			rp(r, "%04" PRIx64 " ", h & 0xffff);
			(void)l;
		}
		munmap(m, p->size);
	}
	close(fd);
}

/* ---- readahead(2) and posix_fadvise: the driver's readahead over any range */

static void gen_advise(struct par *p)
{
	gen_read(p);
	p->how = (int)RN(7);	/* readahead(2), or one of the six advice values */
}
static void op_advise(int side, struct par *p, struct rec *r)
{
	static const int advice[] = { POSIX_FADV_WILLNEED, POSIX_FADV_DONTNEED, POSIX_FADV_NOREUSE,
				      POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM, POSIX_FADV_NORMAL };
	int fd = open_ro(side, p, 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	if (p->how == 0) {
		rret(r, "readahead", readahead(fd, p->off, (size_t)p->size));
	} else {
		/* returns the error number instead of setting errno */
		int e = posix_fadvise(fd, p->off, (off_t)p->size, advice[p->how - 1]);

		rp(r, "fadvise=%s ", e ? (strerrorname_np(e) ? strerrorname_np(e) : "?") : "0");
	}
	/* what the advice read in or dropped reads back the same */
	int64_t at = p->off >= 0 && p->off < p->e->size ? p->off : 0;
	ssize_t n = pread(fd, buf, 8192, at);

	rret(r, "pread", n);
	rdata(r, buf, n);
	close(fd);
}

/* ---- ioctls */

static void gen_ioctl(struct par *p)
{
	pick_path(p);
	p->how = (int)RN(14);
	p->r[0] = rnd();
}
/* The reference's answer to the last ext4-specific ioctl: a puzzlefs answer equal to it
 * is fine too (a path that leads out of the tree reaches the same file on both sides). */
static int ref_rc, ref_e;
static int like_ref(int rc, int e)
{
	return rc == ref_rc && (rc >= 0 || e == ref_e);
}

static void op_ioctl(int side, struct par *p, struct rec *r)
{
	int fd = open_ro(side, p, p->e->kind == K_DIR ? O_DIRECTORY : 0);

	rret(r, "open", fd);
	if (fd < 0)
		return;
	union { struct fiemap f; char b[4096]; } fm;
	int v = (int)(p->r[0] & 0xffff) - (p->r[0] % 5 == 0 ? 70000 : 0), rc;
	long iv = 0;
	int e;

	memset(&fm, 0, sizeof(fm));
	switch (p->how) {
	case 0: case 1: {
		fm.f.fm_start = p->r[0] % 3 ? 0 : p->r[0];
		fm.f.fm_length = p->r[0] % 2 ? ~0ULL : 4096;
		fm.f.fm_flags = p->r[0] % 7 == 0 ? (uint32_t)(p->r[0] >> 32) : FIEMAP_FLAG_SYNC * (p->how & 1);
		fm.f.fm_extent_count = p->r[0] % 4 ? 8 : 0;
		rc = ioctl(fd, FS_IOC_FIEMAP, &fm);
		e = errno;
		if (side == 0) {
			ref_rc = rc;
			ref_e = e;
		}
		if (!exact_mode) {
			legit_used[L_FIEMAP]++;
			if (side == 1 && ((rc < 0 && (e == EOPNOTSUPP || e == ENOTTY)) || like_ref(rc, e)))
				rp(r, "fiemap:ok ");
			else if (side == 1)
				rp(r, "FIEMAP-GAVE(%d,%s) ", rc, strerrorname_np(e));
			else
				rp(r, "fiemap:ok ");
			break;
		}
		errno = e;
		rret(r, "fiemap", rc);
		break;
	}
	case 2:
		rc = ioctl(fd, FIBMAP, &v);
		e = errno;
		if (side == 0) {
			ref_rc = rc;
			ref_e = e;
		}
		if (!exact_mode && !(rc < 0 && e == EPERM)) {
			legit_used[L_FIBMAP]++;
			if (side == 1 && !(rc < 0 && (e == EINVAL || e == ENOTTY)) && !like_ref(rc, e))
				rp(r, "FIBMAP-GAVE(%d,%s) ", rc, strerrorname_np(e));
			else
				rp(r, "fibmap:ok ");
			break;
		}
		errno = e;
		rret(r, "fibmap", rc);
		break;
	case 3: case 4: case 5: {
		unsigned long cmd = p->how == 3 ? FS_IOC_GETFLAGS : p->how == 4 ? FS_IOC_FSGETXATTR :
				    FS_IOC_GETVERSION;

		rc = ioctl(fd, cmd, fm.b);
		e = errno;
		if (side == 0) {
			ref_rc = rc;
			ref_e = e;
		}
		if (!exact_mode) {
			legit_used[L_FSFLAGS]++;
			if (side == 1 && !(rc < 0 && e == ENOTTY) && !like_ref(rc, e))
				rp(r, "FSFLAGS-GAVE(%d,%s) ", rc, strerrorname_np(e));
			else
				rp(r, "fsflags:ok ");
			break;
		}
		errno = e;
		rret(r, "fsflags", rc);
		break;
	}
	case 6: case 7: {
		unsigned long cmd = p->how == 6 ? FS_IOC_GETFSLABEL : FS_IOC_GETFSUUID;

		rc = ioctl(fd, cmd, fm.b);
		e = errno;
		if (side == 0) {
			ref_rc = rc;
			ref_e = e;
		}
		if (!exact_mode) {
			legit_used[L_FSID]++;
			if (side == 1 && rc < 0 && e != ENOTTY && e != EOPNOTSUPP && e != ENOIOCTLCMD && !like_ref(rc, e))
				rp(r, "FSID-GAVE(%s) ", strerrorname_np(e));
			else
				rp(r, "fsid:ok ");
			break;
		}
		errno = e;
		rret(r, "fsid", rc);
		break;
	}
	case 8:
		rc = ioctl(fd, p->r[0] % 2 ? FS_IOC_MEASURE_VERITY : FS_IOC_GET_ENCRYPTION_POLICY_EX, fm.b);
		e = errno;
		if (side == 0) {
			ref_rc = rc;
			ref_e = e;
		}
		if (!exact_mode) {
			legit_used[L_VERITY]++;
			if (side == 1 && !(rc < 0 && (e == ENOTTY || e == EOPNOTSUPP || e == ENODATA)) && !like_ref(rc, e))
				rp(r, "VERITY-GAVE(%d,%s) ", rc, strerrorname_np(e));
			else
				rp(r, "verity:ok ");
			break;
		}
		errno = e;
		rret(r, "verity", rc);
		break;
	case 9:
		rc = ioctl(fd, FIGETBSZ, &iv);
		legit_used[L_STORAGE]++;
		rret(r, "figetbsz", rc < 0 ? -1 : 0);
		break;
	case 10:
		rc = ioctl(fd, FIONREAD, &iv);
		rret(r, "fionread", rc);
		if (!rc)
			rp(r, "avail=%ld ", iv);
		break;
	default: {
		/* unknown commands: ENOTTY from both */
		unsigned long cmd = p->how == 11 ? _IOR('X', 200 + p->r[0] % 50, int) :
				    p->how == 12 ? (unsigned long)(p->r[0] | 0xde000000u) & 0xffffffffu
						 : _IOWR(0xf5, p->r[0] % 256, long);

		rc = ioctl(fd, cmd, fm.b);
		rret(r, "ioctl", rc);
		break;
	}
	}
	close(fd);
}

/* ------------------------------------------------------------ -W: walk a mutant */

static long w_entries, w_err[200], w_sig;

static void w_errno(void)
{
	w_err[errno > 0 && errno < 200 ? errno : 0]++;
}

/* Reads what a reader would: a bounded amount, at a few offsets, and by mmap. */
static void w_file(int dfd, const char *name, const struct stat *st)
{
	int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return w_errno();
	int64_t offs[] = { 0, st->st_size / 2, st->st_size - 1, st->st_size, st->st_size + 4096,
			   0x100000001LL };
	for (size_t i = 0; i < sizeof(offs) / sizeof(*offs); i++)
		if (offs[i] >= 0 && pread(fd, buf, 65536, offs[i]) < 0)
			w_errno();
	size_t len = 3 * (size_t)pagesz;
	unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);

	if (m == MAP_FAILED) {
		w_errno();
	} else {
		for (volatile size_t at = 0; at < len; at += (size_t)pagesz) {
			in_touch = 1;
			if (sigsetjmp(jb, 1)) {
				in_touch = 0;
				w_sig++;
				continue;
			}
			(void)*(volatile unsigned char *)(m + at);
			in_touch = 0;
		}
		munmap(m, len);
	}
	close(fd);
}

static void w_dir(int dfd, int depth)
{
	long calls = 0;

	for (;;) {
		long n = gd(dfd, buf2, 32768);

		if (n < 0)
			w_errno();
		if (n <= 0 || ++calls > 1000 || w_entries > 20000)
			return;
		for (long at = 0; at < n;) {
			struct linux_dirent64 *d = (void *)(buf2 + at);
			char name[256];
			struct stat st;

			at += d->d_reclen;
			w_entries++;
			snprintf(name, sizeof(name), "%s", d->d_name);
			if (!strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
				w_errno();
				continue;
			}
			if (fchdir(dfd) == 0) {
				char list[65536];
				ssize_t l = llistxattr(name, list, sizeof(list));

				if (l < 0)
					w_errno();
				for (ssize_t i = 0; i < l; i += (ssize_t)strlen(list + i) + 1)
					if (lgetxattr(name, list + i, buf, 65536) < 0)
						w_errno();
				llistxattr(name, list, 1);
			}
			if (S_ISLNK(st.st_mode) && readlinkat(dfd, name, (char *)buf, 8192) < 0)
				w_errno();
			if (S_ISREG(st.st_mode))
				w_file(dfd, name, &st);
			if (S_ISDIR(st.st_mode) && depth < 64) {
				/* a long-lived buffer is reused by the recursion: keep our batch */
				unsigned char *save = malloc((size_t)n);

				memcpy(save, buf2, (size_t)n);
				int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

				if (sub < 0) {
					w_errno();
				} else {
					w_dir(sub, depth + 1);
					close(sub);
				}
				memcpy(buf2, save, (size_t)n);
				free(save);
			}
		}
	}
}

/* pzt-difftest -W <dir>: walk a (possibly corrupt) tree: readdir, stat, xattrs,
 * readlink, bounded reads and mmap of every file. Prints one summary line; the
 * errors are expected, only the kernel's behaviour (console) is judged. */
static int walk_mode(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		printf("walk: %s: %s\n", dir, strerror(errno));
		return 0;
	}
	w_dir(fd, 0);
	printf("walk: entries=%ld sigbus=%ld errors:", w_entries, w_sig);
	for (int i = 0; i < 200; i++)
		if (w_err[i])
			printf(" %s=%ld", strerrorname_np(i) ? strerrorname_np(i) : "?", w_err[i]);
	printf("\n");
	return 0;
}

static const struct op {
	const char *name;
	void (*gen)(struct par *);
	opfn *run;
	int weight;
} ops[] = {
	{ "stat", gen_stat, op_stat, 8 },
	{ "statx", gen_statx, op_statx, 8 },
	{ "access", gen_access, op_access, 5 },
	{ "readlink", gen_readlink, op_readlink, 6 },
	{ "xattr", gen_xattr, op_xattr, 10 },
	{ "read", gen_read, op_read, 14 },
	{ "lseek", gen_lseek, op_lseek, 8 },
	{ "dir", gen_dir, op_dir, 10 },
	{ "open", gen_open, op_open, 10 },
	{ "xfer", gen_xfer, op_xfer, 8 },
	{ "mmap", gen_mmap, op_mmap, 8 },
	{ "advise", gen_advise, op_advise, 5 },
	{ "ioctl", gen_ioctl, op_ioctl, 6 },
};
#define NOPS (sizeof(ops) / sizeof(*ops))

static void describe(char *d, size_t n, const struct op *o, const struct par *p)
{
	char path[160];
	size_t j = 0;

	for (const char *s = p->path; *s && j < sizeof(path) - 5; s++)
		j += (size_t)snprintf(path + j, sizeof(path) - j, (*s > 0x20 && *s < 0x7f && *s != '\\')
				      ? "%c" : "\\x%02x", (unsigned char)*s);
	snprintf(d, n, "%s path=%s how=%d flags=%#x whence=%d off=%lld size=%llu r0=%#llx", o->name, path,
		 p->how, p->flags, p->whence, (long long)p->off, (unsigned long long)p->size,
		 (unsigned long long)p->r[0]);
}

int main(int argc, char **argv)
{
	uint64_t seed = 0;
	long nops = 1000, maxdiff = 30;
	int verbose = 0, have_seed = 0, c, print_legit = 0;
	const char *user = NULL, *only = NULL, *lastfile = NULL;

	const char *walkdir = NULL;

	while ((c = getopt(argc, argv, "s:n:u:o:vl:m:eLW:x:")) != -1) {
		switch (c) {
		case 's': seed = strtoull(optarg, NULL, 0); have_seed = 1; break;
		case 'n': nops = strtol(optarg, NULL, 0); break;
		case 'u': user = optarg; break;
		case 'o': only = optarg; break;
		case 'v': verbose = 1; break;
		case 'l': lastfile = optarg; break;
		case 'm': maxdiff = strtol(optarg, NULL, 0); break;
		case 'e': exact_mode = 1; break;
		case 'L': print_legit = 1; break;
		case 'W': walkdir = optarg; break;
		case 'x':
			if (nskip < 8)
				skip_pos[nskip++] = strtoll(optarg, NULL, 0);
			break;
		default: goto usage;
		}
	}
	if (print_legit && optind == argc) {
		for (int i = 0; i < L_N; i++)
			printf("%-60s | %s | puzzlefs: %s\n", legit[i].what, legit[i].reason,
			       legit[i].puzzlefs_gives);
		return 0;
	}
	if (walkdir) {
		struct sigaction sa = { .sa_handler = on_fault, .sa_flags = SA_NODEFER };

		pagesz = sysconf(_SC_PAGESIZE);
		buf = malloc(BUFSZ);
		buf2 = malloc(BUFSZ);
		sigaction(SIGBUS, &sa, NULL);
		sigaction(SIGSEGV, &sa, NULL);
		return walk_mode(walkdir);
	}
	if (argc - optind != 2) {
usage:
		fprintf(stderr, "usage: pzt-difftest [-s seed] [-n ops] [-u uid:gid] [-o ops] [-v] "
			"[-l lastfile] [-m maxdiffs] [-e] [-L] <ref-dir> <test-dir>\n");
		return 2;
	}
	if (!have_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
	}
	rng = seed;
	rootnames[0] = argv[optind];
	rootnames[1] = argv[optind + 1];
	for (int s = 0; s < 2; s++) {
		struct statvfs sv;

		roots[s] = open(rootnames[s], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (roots[s] < 0) {
			fprintf(stderr, "pzt-difftest: %s: %s\n", rootnames[s], strerror(errno));
			return 2;
		}
		/* open(O_TRUNC), O_CREAT...: the trees must be read-only mounts */
		if (fstatvfs(roots[s], &sv) || !(sv.f_flag & ST_RDONLY)) {
			fprintf(stderr, "pzt-difftest: %s is not on a read-only mount (the operations "
				"include O_TRUNC and O_CREAT): bind-mount it read-only\n", rootnames[s]);
			return 2;
		}
	}
	/* the *xattr calls on reference paths (to choose keys and exact sizes) are relative */
	if (fchdir(roots[0])) {
		perror("pzt-difftest: chdir");
		return 2;
	}
	walk("");
	dcache = calloc(nents, sizeof(*dcache));
	dirs = calloc(nents, sizeof(*dirs));
	for (size_t i = 0; i < nents; i++)
		if (ents[i].kind == K_DIR)
			dirs[ndirs++] = i;
	pagesz = sysconf(_SC_PAGESIZE);
	buf = mmap(NULL, BUFSZ + (size_t)pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf2 = malloc(BUFSZ);
	if (buf == MAP_FAILED || !buf2 || !dcache || !nents) {
		fprintf(stderr, "pzt-difftest: set-up failed (%zu entries)\n", nents);
		return 2;
	}
	mprotect(buf + BUFSZ, (size_t)pagesz, PROT_NONE);
	char tmpl[] = "/tmp/pzt-difftest.XXXXXX";

	tmpfd = mkstemp(tmpl);
	if (tmpfd < 0) {
		perror("pzt-difftest: mkstemp");
		return 2;
	}
	unlink(tmpl);
	int lastfd = lastfile ? open(lastfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;

	if (user) {
		unsigned uid, gid;

		if (sscanf(user, "%u:%u", &uid, &gid) != 2 || setgroups(0, NULL) || setgid(gid) ||
		    setuid(uid)) {
			fprintf(stderr, "pzt-difftest: cannot become %s: %s\n", user, strerror(errno));
			return 2;
		}
	}
	struct sigaction sa = { .sa_handler = on_fault, .sa_flags = SA_NODEFER };

	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int total_w = 0;

	for (size_t i = 0; i < NOPS; i++)
		total_w += ops[i].weight;
	printf("pzt-difftest: seed=%" PRIu64 " ops=%ld uid=%u entries=%zu ref=%s test=%s%s\n", seed, nops,
	       getuid(), nents, rootnames[0], rootnames[1], exact_mode ? " exact" : "");
	fflush(stdout);

	struct timespec t0, t1;
	long diffs = 0, counts[NOPS] = { 0 };
	static struct rec rr[2];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < nops; i++) {
		int w = (int)RN(total_w);
		size_t k = 0;

		for (; k < NOPS; k++) {
			if (w < ops[k].weight)
				break;
			w -= ops[k].weight;
		}
		struct par p;

		memset(&p, 0, sizeof(p));
		ops[k].gen(&p);
		/* -o: the others are drawn all the same, so op#N has the values it had */
		if (only && !strstr(only, ops[k].name))
			continue;
		char desc[512];

		describe(desc, sizeof(desc), &ops[k], &p);
		if (lastfd >= 0) {
			char line[600];
			int l = snprintf(line, sizeof(line), "seed=%" PRIu64 " op#%ld %s\n", seed, i, desc);

			if (pwrite(lastfd, line, (size_t)l, 0) < 0 || ftruncate(lastfd, l))
				lastfd = -1;
		}
		if (verbose)
			printf("op#%ld %s\n", i, desc);
		for (int s = 0; s < 2; s++) {
			rr[s].n = 0;
			rr[s].s[0] = 0;
			errno = 0;
			ops[k].run(s, &p, &rr[s]);
		}
		counts[k]++;
		if (strcmp(rr[0].s, rr[1].s)) {
			diffs++;
			if (diffs <= maxdiff)
				printf("DIFF seed=%" PRIu64 " op#%ld %s\n  ext4:     %s\n  puzzlefs: %s\n", seed, i,
				       desc, rr[0].s, rr[1].s);
			fflush(stdout);
		} else if (verbose) {
			printf("  same: %s\n", rr[0].s);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("pzt-difftest: seed=%" PRIu64 " uid=%u %ld ops in %.1fs (%.2f ms/op):", seed, getuid(), nops,
	       secs, nops ? secs * 1000 / (double)nops : 0.0);
	for (size_t k = 0; k < NOPS; k++)
		printf(" %s=%ld", ops[k].name, counts[k]);
	printf("\n");
	if (print_legit)
		for (int i = 0; i < L_N; i++)
			printf("  legit %-40.40s used %lu\n", legit[i].what, legit_used[i]);
	printf("pzt-difftest: %ld differences\n", diffs);
	return diffs ? 1 : 0;
}
