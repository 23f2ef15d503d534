/*
 * pzt-helper: the few things the regression suite needs that busybox has no
 * applet for. The same source is built for the build machine
 * (host-puzzlefs-test-tools: gen-corpus.sh's manifests of the source trees)
 * and the guest (puzzlefs-test-tools: over mounted images), so both sides of
 * a comparison use the same code. It uses nothing from PuzzleFS.
 *
 *   pzt-helper manifest <dir>      one line per entry under <dir> (itself as "."):
 *        path kind mode uid gid size content xattrs links
 *      path     escaped: bytes outside 0x21..0x7e, and '\', as \xHH
 *      kind     file dir lnk chr blk fifo sock
 *      mode     the 12 permission bits, 4 octal digits
 *      size     st_size for file and lnk, "-" otherwise
 *      content  file: sha256 of the bytes read; lnk: escaped target;
 *               chr/blk: major:minor; else "-"
 *      xattrs   sorted key=hexvalue joined by ",", or "-"
 *      links    for a non-directory seen under several paths: the sorted
 *               escaped paths sharing its inode, joined by ","; else "-"
 *      lines sorted by escaped path (byte order). Errors (a failing lstat,
 *      read, readlink, listxattr) print "ERROR <path> <what> <strerror>" lines
 *      and make the exit status 1.
 *   pzt-helper gen <seed> <size> <period>   deterministic bytes on stdout:
 *      a xorshift stream restarted every <period> bytes, whose first 8 bytes
 *      of each period are the period index (so periods differ but share most
 *      chunks). size/period in bytes.
 *   pzt-helper gencmp <seed> <size> <period> <file> [<from>]   compare <file>
 *      with that stream (what `gen | cmp - <file>` does, without busybox cmp's
 *      per-byte reads), from byte <from> (default 0) to its end: prints "same"
 *      or "differ at <offset>" / "short at <offset>" (exit 1)
 *   pzt-helper xattrs <path>       the xattr list of <path> like the manifest field
 *   pzt-helper getxattr <path> <key> <bufsize>   lgetxattr with that buffer:
 *      prints "ok <len> <hex>" or "err <strerror>"
 *   pzt-helper names <dir>         every name readdir returns (with . and ..), escaped,
 *      one a line; a failing readdir prints "ERROR <strerror>" (exit 1)
 *   pzt-helper read <path> <offset> <len>   pread; prints "ok <n> <sha256>" or
 *      "err <strerror>" (exit 1)
 *   pzt-helper rows <seed> <size> <period> <path> <ref> <len,...> <offset>...
 *      for each offset and each len, the line
 *        row <offset> <len> | <read path> | <read ref> | <genread>
 *      with what `read` and `genread` print there: one process instead of
 *      three per row (a process costs ~0.1 s under the debug kernel)
 *   pzt-helper lookups <dir>      looks every name readdir lists in <dir> up
 *      in orders other than the listing's, each pass after dropping the
 *      dentry cache (so that each lookup reaches the file system; needs root):
 *      reversed, then a stride through the names, then in name order with two
 *      missing neighbours of each name (the name with a 0x01 byte added, which
 *      sorts right after it, and the name with its last byte lowered, which
 *      sorts before it; a neighbour that readdir lists is looked up as a name).
 *      A name must be found with the inode number readdir gave it, a missing
 *      neighbour must be ENOENT. Prints each difference, then
 *      "lookups: <n> names, <m> lookups, <d> differences" (exit 1 if d > 0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

static int status;

/* ---- sha256 (FIPS 180-4) ---- */
typedef struct { uint32_t h[8]; uint64_t n; unsigned char b[64]; size_t bl; } sha_t;
static const uint32_t K[64] = {
	0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,
	0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,
	0xe49b69c1,0xefbe4786,0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,
	0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,
	0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,0x81c2c92e,0x92722c85,
	0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,
	0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,
	0x748f82ee,0x78a5636f,0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2};
#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha_block(sha_t *s, const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
	int i;
	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4*i] << 24 | (uint32_t)p[4*i+1] << 16 | (uint32_t)p[4*i+2] << 8 | p[4*i+3];
	for (; i < 64; i++)
		w[i] = (ROR(w[i-2], 17) ^ ROR(w[i-2], 19) ^ (w[i-2] >> 10)) + w[i-7] +
		       (ROR(w[i-15], 7) ^ ROR(w[i-15], 18) ^ (w[i-15] >> 3)) + w[i-16];
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
	e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
	s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}
static void sha_init(sha_t *s)
{
	static const uint32_t iv[8] = {0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,
				       0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19};
	memcpy(s->h, iv, sizeof(iv));
	s->n = 0; s->bl = 0;
}
static void sha_update(sha_t *s, const unsigned char *p, size_t len)
{
	s->n += len;
	while (len) {
		if (s->bl == 0 && len >= 64) { sha_block(s, p); p += 64; len -= 64; continue; }
		size_t k = 64 - s->bl < len ? 64 - s->bl : len;
		memcpy(s->b + s->bl, p, k); s->bl += k; p += k; len -= k;
		if (s->bl == 64) { sha_block(s, s->b); s->bl = 0; }
	}
}
static void sha_final(sha_t *s, char out[65])
{
	uint64_t bits = s->n * 8;
	unsigned char pad = 0x80, z = 0, l[8];
	int i;
	sha_update(s, &pad, 1);
	while (s->bl != 56) sha_update(s, &z, 1);
	for (i = 0; i < 8; i++) l[i] = bits >> (56 - 8 * i);
	sha_update(s, l, 8);
	for (i = 0; i < 8; i++) sprintf(out + 8 * i, "%08x", s->h[i]);
}

/* ---- helpers ---- */
static char *esc(const char *s, size_t n)
{
	char *o = malloc(4 * n + 1), *q = o;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (c > 0x20 && c < 0x7f && c != '\\') *q++ = c;
		else q += sprintf(q, "\\x%02x", c);
	}
	*q = 0;
	return o;
}
static char *escs(const char *s) { return esc(s, strlen(s)); }

static void err(const char *path, const char *what)
{
	char *e = escs(path);
	printf("ERROR %s %s %s\n", e, what, strerror(errno));
	free(e);
	status = 1;
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }

/* xattrs of path as "k=hex,k=hex" or "-" (malloc'd); NULL on error
 * (reported under the name rel). */
static char *xattrs_of(const char *path, const char *rel)
{
	ssize_t n = llistxattr(path, NULL, 0);
	if (n < 0) { if (errno == ENOTSUP) return strdup("-"); err(rel, "listxattr"); return NULL; }
	if (n == 0) return strdup("-");
	char *names = malloc(n + 1);
	n = llistxattr(path, names, n);
	if (n < 0) { err(rel, "listxattr"); free(names); return NULL; }
	char *keys[4096]; int nk = 0;
	for (char *k = names; k < names + n && nk < 4096; k += strlen(k) + 1) keys[nk++] = k;
	qsort(keys, nk, sizeof(char *), cmpstr);
	size_t cap = 64, len = 0; char *out = malloc(cap); out[0] = 0;
	for (int i = 0; i < nk; i++) {
		ssize_t vl = lgetxattr(path, keys[i], NULL, 0);
		unsigned char *v = NULL;
		if (vl >= 0) { v = malloc(vl + 1); vl = lgetxattr(path, keys[i], v, vl); }
		if (vl < 0) { err(rel, "getxattr"); free(v); free(names); free(out); return NULL; }
		char *ek = escs(keys[i]);
		size_t need = len + strlen(ek) + 2 * vl + 4;
		if (need > cap) { cap = need * 2; out = realloc(out, cap); }
		len += sprintf(out + len, "%s%s=", i ? "," : "", ek);
		for (ssize_t j = 0; j < vl; j++) len += sprintf(out + len, "%02x", v[j]);
		if (vl == 0) len += sprintf(out + len, "\"\"");
		free(ek); free(v);
	}
	free(names);
	return out;
}

static char *xattrs(const char *path) { return xattrs_of(path, path); }

struct ent { char *epath; char *rest; dev_t dev; ino_t ino; int isdir; char *links; };
static struct ent *ents; static size_t nent, capent;

static void add(const char *root, const char *rel, size_t rellen)
{
	char full[8192];
	struct stat st;
	snprintf(full, sizeof(full), "%s/%s", root, rel);
	if (lstat(full, &st) < 0) { err(rel, "lstat"); return; }
	const char *kind = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" :
		S_ISLNK(st.st_mode) ? "lnk" : S_ISCHR(st.st_mode) ? "chr" : S_ISBLK(st.st_mode) ? "blk" :
		S_ISFIFO(st.st_mode) ? "fifo" : S_ISSOCK(st.st_mode) ? "sock" : "unknown";
	char size[32] = "-", *content = NULL;
	if (S_ISREG(st.st_mode)) {
		int fd = open(full, O_RDONLY | O_NOFOLLOW);
		if (fd < 0) { err(rel, "open"); return; }
		sha_t s; sha_init(&s);
		static unsigned char buf[1 << 16];
		ssize_t r; long long total = 0;
		while ((r = read(fd, buf, sizeof(buf))) > 0) { sha_update(&s, buf, r); total += r; }
		if (r < 0) { err(rel, "read"); close(fd); return; }
		close(fd);
		content = malloc(65); sha_final(&s, content);
		if (total != st.st_size) {
			char *e = esc(rel, rellen);
			printf("ERROR %s read %lld bytes, st_size %lld\n", e, total, (long long)st.st_size);
			free(e); status = 1;
		}
		snprintf(size, sizeof(size), "%lld", (long long)st.st_size);
	} else if (S_ISLNK(st.st_mode)) {
		char t[8192];
		ssize_t n = readlink(full, t, sizeof(t));
		if (n < 0) { err(rel, "readlink"); return; }
		content = esc(t, n);
		snprintf(size, sizeof(size), "%lld", (long long)st.st_size);
	} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		content = malloc(32);
		sprintf(content, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	} else content = strdup("-");
	char *x = xattrs_of(full, rel);
	if (!x) x = strdup("?");
	if (nent == capent) { capent = capent ? 2 * capent : 1024; ents = realloc(ents, capent * sizeof(*ents)); }
	struct ent *e = &ents[nent++];
	e->epath = rellen ? esc(rel, rellen) : strdup(".");
	size_t rl = strlen(kind) + strlen(content) + strlen(x) + 64 + strlen(size);
	e->rest = malloc(rl);
	snprintf(e->rest, rl, "%s %04o %u %u %s %s %s", kind, (unsigned)(st.st_mode & 07777),
		 (unsigned)st.st_uid, (unsigned)st.st_gid, size, content, x);
	e->dev = st.st_dev; e->ino = st.st_ino; e->isdir = S_ISDIR(st.st_mode); e->links = NULL;
	free(content); free(x);
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(full);
		if (!d) { err(rel, "opendir"); return; }
		struct dirent *de;
		char **names = NULL; size_t nn = 0, cn = 0;
		errno = 0;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
			if (nn == cn) { cn = cn ? 2 * cn : 64; names = realloc(names, cn * sizeof(char *)); }
			names[nn++] = strdup(de->d_name);
		}
		if (errno) err(rel, "readdir");
		closedir(d);
		for (size_t i = 0; i < nn; i++) {
			char sub[8192];
			int n = rellen ? snprintf(sub, sizeof(sub), "%s/%s", rel, names[i])
				       : snprintf(sub, sizeof(sub), "%s", names[i]);
			if (n >= (int)sizeof(sub) - 1) { errno = ENAMETOOLONG; err(rel, "path"); }
			else add(root, sub, n);
			free(names[i]);
		}
		free(names);
	}
}

static int by_ino(const void *a, const void *b)
{
	const struct ent *x = *(struct ent **)a, *y = *(struct ent **)b;
	if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
	return strcmp(x->epath, y->epath);
}
static int by_path(const void *a, const void *b)
{
	return strcmp(((struct ent *)a)->epath, ((struct ent *)b)->epath);
}

static int manifest(const char *root)
{
	add(root, "", 0);
	struct ent **p = malloc(nent * sizeof(*p) + 1);
	size_t np = 0;
	for (size_t i = 0; i < nent; i++) if (!ents[i].isdir) p[np++] = &ents[i];
	qsort(p, np, sizeof(*p), by_ino);
	for (size_t i = 0; i < np;) {
		size_t j = i + 1;
		while (j < np && p[j]->dev == p[i]->dev && p[j]->ino == p[i]->ino) j++;
		if (j - i > 1) {
			size_t len = 0;
			for (size_t k = i; k < j; k++) len += strlen(p[k]->epath) + 1;
			char *l = malloc(len + 1); l[0] = 0;
			for (size_t k = i; k < j; k++) { if (k > i) strcat(l, ","); strcat(l, p[k]->epath); }
			for (size_t k = i; k < j; k++) p[k]->links = l;
		}
		i = j;
	}
	qsort(ents, nent, sizeof(*ents), by_path);
	for (size_t i = 0; i < nent; i++)
		printf("%s %s %s\n", ents[i].epath, ents[i].rest, ents[i].links ? ents[i].links : "-");
	return status;
}

/* gen_fill: the next n bytes of the stream (state in *pos, *x). */
static void gen_fill(unsigned char *buf, size_t n, uint64_t seed, uint64_t period, uint64_t *pos, uint64_t *x)
{
	/* One division per call, not per byte: under TCG a 64-bit division
	 * per byte made a 16 MiB read take seconds. */
	uint64_t in = *pos % period, index = *pos / period, s = *x;
	for (size_t i = 0; i < n; i++) {
		if (in == 0) s = seed * 0x9e3779b97f4a7c15ULL + 1;
		if (in < 8) buf[i] = index >> (8 * in);
		else { s ^= s << 13; s ^= s >> 7; s ^= s << 17; buf[i] = s >> 24; }
		if (++in == period) { in = 0; index++; }
	}
	*pos += n;
	*x = s;
}

/* What ends the answer of `read` and `genread` (none inside a `rows` line). */
static const char *eol = "\n";

/* print_ok_sha: what `read` prints for the n bytes it read into buf. */
static void print_ok_sha(const unsigned char *buf, size_t n)
{
	sha_t s;
	char h[65];
	sha_init(&s); sha_update(&s, buf, n); sha_final(&s, h);
	printf("ok %zu %s%s", n, h, eol);
}

/*
 * Periods of at most PERIOD_BUF bytes are generated once: each period is the
 * same stream after its 8-byte index, so gen and gencmp patch the index into
 * a copy of period 0 instead of running the generator over every byte (a
 * 4 GiB file is then compared at memcmp speed).
 */
#define PERIOD_BUF (64u << 20)

/* period_stream: the next n bytes at *pos, from one_period (period 0). */
static void period_stream(unsigned char *buf, size_t n, const unsigned char *one_period, uint64_t period, uint64_t *pos)
{
	while (n) {
		uint64_t in = *pos % period;
		size_t k = period - in < n ? period - in : n;
		memcpy(buf, one_period + in, k);
		for (uint64_t i = in; i < 8 && i < in + k; i++)
			buf[i - in] = (*pos / period) >> (8 * i);
		buf += k; n -= k; *pos += k;
	}
}

/* stream_fill: gen_fill, from one_period when there is one. */
static void stream_fill(unsigned char *buf, size_t n, const unsigned char *one_period, uint64_t seed, uint64_t period, uint64_t *pos, uint64_t *x)
{
	if (one_period) period_stream(buf, n, one_period, period, pos);
	else gen_fill(buf, n, seed, period, pos, x);
}

/* first_period: period 0 generated whole, or NULL to generate as we go. */
static unsigned char *first_period(uint64_t seed, uint64_t size, uint64_t period)
{
	uint64_t pos = 0, x = 0;
	unsigned char *p = period < size && period <= PERIOD_BUF ? malloc(period) : NULL;
	if (p) gen_fill(p, period, seed, period, &pos, &x);
	return p;
}

static int gencmp(uint64_t seed, uint64_t size, uint64_t period, const char *file, uint64_t from)
{
	static unsigned char a[1 << 16], b[1 << 16];
	uint64_t pos = from, gpos, x = 0;
	unsigned char *one;
	int fd = open(file, O_RDONLY);
	if (fd < 0) { printf("err %s\n", strerror(errno)); return 1; }
	if (!period) period = size ? size : 1;
	if (from > size || lseek(fd, (off_t)from, SEEK_SET) != (off_t)from) {
		printf("err cannot start at %llu\n", (unsigned long long)from);
		return 1;
	}
	one = first_period(seed, size, period);
	/* The stream restarts at each period: generate from the start of from's. */
	gpos = from - from % period;
	while (gpos < from)
		stream_fill(a, from - gpos < sizeof(a) ? from - gpos : sizeof(a), one, seed, period, &gpos, &x);
	for (;;) {
		ssize_t r = read(fd, b, sizeof(b));
		if (r < 0) { printf("err at %llu: %s\n", (unsigned long long)pos, strerror(errno)); return 1; }
		if (r == 0) break;
		if (pos + r > size) { printf("long at %llu\n", (unsigned long long)size); return 1; }
		stream_fill(a, r, one, seed, period, &gpos, &x);
		if (memcmp(a, b, r)) {
			ssize_t i = 0;
			while (a[i] == b[i]) i++;
			printf("differ at %llu\n", (unsigned long long)(pos + i));
			return 1;
		}
		pos += r;
	}
	free(one);
	if (pos != size) { printf("short at %llu\n", (unsigned long long)pos); return 1; }
	printf("same\n");
	return 0;
}

/*
 * genread: what `read` prints for a pread of <len> bytes at <off> of a file
 * made by `gen`, from the generator alone (no copy of the file needed).
 */
static int genread(uint64_t seed, uint64_t size, uint64_t period, uint64_t off, uint64_t len)
{
	static unsigned char skip[1 << 16];
	uint64_t n = off < size ? size - off : 0, x = 0, gpos;
	unsigned char *b;
	if (!period) period = size ? size : 1;
	if (n > len) n = len;
	/* The stream restarts at each period: generate from the start of off's. */
	gpos = off - off % period;
	while (n && gpos < off)
		gen_fill(skip, off - gpos < sizeof(skip) ? off - gpos : sizeof(skip), seed, period, &gpos, &x);
	b = malloc(n + 1);
	if (!b) { printf("err %s%s", strerror(ENOMEM), eol); return 1; }
	gen_fill(b, n, seed, period, &gpos, &x);
	print_ok_sha(b, n);
	free(b);
	return 0;
}

/* read_at: `pzt-helper read`. */
static int read_at(const char *path, int64_t off, size_t n)
{
	int fd = open(path, O_RDONLY);
	unsigned char *b;
	ssize_t r;
	if (fd < 0) { printf("err %s%s", strerror(errno), eol); return 1; }
	b = malloc(n + 1);
	if (!b) { close(fd); printf("err %s%s", strerror(ENOMEM), eol); return 1; }
	r = pread(fd, b, n, off);
	if (r < 0) printf("err %s%s", strerror(errno), eol);
	else print_ok_sha(b, r);
	free(b);
	close(fd);
	return r < 0;
}

static int rows(uint64_t seed, uint64_t size, uint64_t period, const char *path, const char *ref,
		const char *lens, char **offs, int noffs)
{
	eol = "";
	for (int i = 0; i < noffs; i++) {
		const char *l = lens;
		while (*l) {
			char len[32];
			size_t k = strcspn(l, ",");
			if (!k || k >= sizeof(len)) return 2;
			memcpy(len, l, k);
			len[k] = 0;
			l += k + (l[k] == ',');
			printf("row %s %s | ", offs[i], len);
			read_at(path, strtoll(offs[i], 0, 0), strtoul(len, 0, 0));
			printf(" | ");
			read_at(ref, strtoll(offs[i], 0, 0), strtoul(len, 0, 0));
			printf(" | ");
			genread(seed, size, period, strtoull(offs[i], 0, 0), strtoull(len, 0, 0));
			printf("\n");
		}
	}
	return fflush(stdout) ? 1 : 0;
}

static int gen(uint64_t seed, uint64_t size, uint64_t period)
{
	static unsigned char buf[1 << 16];
	uint64_t pos = 0, x = 0;
	unsigned char *one;
	if (!period) period = size ? size : 1;
	one = first_period(seed, size, period);
	while (pos < size) {
		size_t k = size - pos < sizeof(buf) ? size - pos : sizeof(buf);
		stream_fill(buf, k, one, seed, period, &pos, &x);
		if (fwrite(buf, 1, k, stdout) != k) return 1;
	}
	free(one);
	return fflush(stdout) ? 1 : 0;
}

struct lk_name { char *name; ino_t ino; };

static int lk_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lk_name *)a)->name, ((const struct lk_name *)b)->name);
}

static long lk_lookups, lk_diffs;

/* Looks <name> up in <dfd>: <want> is its inode number, or 0 if it is missing. */
static void lk_one(int dfd, const char *name, ino_t want)
{
	struct stat st;
	int rc = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
	int err = rc ? errno : 0;
	char *e;

	lk_lookups++;
	if (want ? (!rc && st.st_ino == want) : (rc && err == ENOENT))
		return;
	if (++lk_diffs > 20)
		return;
	e = escs(name);
	if (want)
		printf("DIFF %s: want inode %llu, got %s %llu\n", e, (unsigned long long)want,
		       rc ? strerror(err) : "inode", rc ? 0ULL : (unsigned long long)st.st_ino);
	else
		printf("DIFF %s: missing, got %s\n", e, rc ? strerror(err) : "found");
	free(e);
}

static void lk_drop(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd < 0 || write(fd, "2", 1) != 1) {
		printf("DIFF cannot drop the dentry cache: %s\n", strerror(errno));
		lk_diffs++;
	}
	if (fd >= 0)
		close(fd);
}

static ino_t lk_find(struct lk_name *v, size_t n, const char *name)
{
	struct lk_name key = { (char *)name, 0 }, *f = bsearch(&key, v, n, sizeof(*v), lk_cmp);

	return f ? f->ino : 0;
}

static int lookups(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct lk_name *v = NULL;
	size_t n = 0, cap = 0, i, stride;
	char buf[512];
	int dfd;

	if (!d) { printf("ERROR %s\n", strerror(errno)); return 1; }
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap && !(v = realloc(v, (cap = cap ? 2 * cap : 1024) * sizeof(*v))))
			return 1;
		v[n].name = strdup(de->d_name);
		v[n++].ino = de->d_ino;
		errno = 0;
	}
	if (errno) { printf("ERROR %s\n", strerror(errno)); return 1; }
	qsort(v, n, sizeof(*v), lk_cmp);
	dfd = dirfd(d);
	lk_drop();
	for (i = n; i-- > 0;)
		lk_one(dfd, v[i].name, v[i].ino);
	lk_drop();
	/* A stride prime to n visits every name once, jumping back and forth. */
	for (stride = n / 3 + 1; n && stride > 1; stride++) {
		size_t a = n, b = stride;
		while (b) { size_t t = a % b; a = b; b = t; }
		if (a == 1)
			break;
	}
	for (i = 0; i < n; i++)
		lk_one(dfd, v[(i * stride) % n].name, v[(i * stride) % n].ino);
	lk_drop();
	for (i = 0; i < n; i++) {
		size_t l = strlen(v[i].name);

		lk_one(dfd, v[i].name, v[i].ino);
		if (l < 255) {
			snprintf(buf, sizeof(buf), "%s\x01", v[i].name);
			lk_one(dfd, buf, lk_find(v, n, buf));
		}
		snprintf(buf, sizeof(buf), "%s", v[i].name);
		if ((unsigned char)buf[l - 1] > 2 && buf[l - 1] != '/' + 1) {
			buf[l - 1]--;
			lk_one(dfd, buf, lk_find(v, n, buf));
		}
	}
	printf("lookups: %zu names, %ld lookups, %ld differences\n", n, lk_lookups, lk_diffs);
	closedir(d);
	return lk_diffs ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "manifest")) return manifest(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "gen"))
		return gen(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0), strtoull(argv[4], 0, 0));
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "gencmp"))
		return gencmp(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0), strtoull(argv[4], 0, 0), argv[5],
			      argc == 7 ? strtoull(argv[6], 0, 0) : 0);
	if (argc == 7 && !strcmp(argv[1], "genread"))
		return genread(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0), strtoull(argv[4], 0, 0),
			       strtoull(argv[5], 0, 0), strtoull(argv[6], 0, 0));
	if (argc == 3 && !strcmp(argv[1], "xattrs")) {
		char *x = xattrs(argv[2]);
		if (x) puts(x);
		return x ? status : 1;
	}
	if (argc == 5 && !strcmp(argv[1], "getxattr")) {
		size_t n = strtoul(argv[4], 0, 0);
		unsigned char *b = malloc(n + 1);
		ssize_t r = lgetxattr(argv[2], argv[3], n ? b : NULL, n);
		if (r < 0) { printf("err %s\n", strerror(errno)); return 1; }
		printf("ok %zd ", r);
		for (ssize_t i = 0; n && i < r; i++) printf("%02x", b[i]);
		printf("\n");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "names")) {
		DIR *d = opendir(argv[2]);
		struct dirent *de;
		if (!d) { printf("ERROR %s\n", strerror(errno)); return 1; }
		errno = 0;
		while ((de = readdir(d))) {
			char *e = escs(de->d_name);
			puts(e);
			free(e);
			errno = 0;
		}
		if (errno) { printf("ERROR %s\n", strerror(errno)); return 1; }
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "lookups"))
		return lookups(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "read"))
		return read_at(argv[2], strtoll(argv[3], 0, 0), strtoul(argv[4], 0, 0));
	if (argc >= 9 && !strcmp(argv[1], "rows"))
		return rows(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0), strtoull(argv[4], 0, 0),
			    argv[5], argv[6], argv[7], argv + 8, argc - 8);
	fprintf(stderr, "usage: pzt-helper manifest <dir> | gen <seed> <size> <period> | xattrs <path> |"
		" getxattr <path> <key> <bufsize> | read <path> <off> <len> |"
		" gencmp <seed> <size> <period> <path> | genread <seed> <size> <period> <off> <len> |"
		" rows <seed> <size> <period> <path> <ref> <len,...> <offset>... | lookups <dir>\n");
	return 2;
}
