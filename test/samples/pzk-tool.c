// SPDX-License-Identifier: GPL-2.0
/*
 * pzk-tool: what the kernel driver's expect cases need and busybox lacks.
 *
 *   pzk-tool list <path> [size]          llistxattr; prints names, one a line
 *   pzk-tool get <path> <name> [size]    lgetxattr; prints the value
 *   pzk-tool as <uid> <cmd> [args...]    runs cmd with uid/gid <uid>, no groups
 *
 * Errors print "errno=<name>" and exit 1, so cases can check ERANGE/ENODATA.
 * Built statically by board/qemu/post-build.d/30-puzzlefs-kernel-samples.sh.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	fprintf(stderr, "usage: pzk-tool list|get|as ...\n");
	return 2;
}
