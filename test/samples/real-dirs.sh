# shellcheck shell=sh
# real_dirs: the directories of a target tree that make the corpus's "real"
# tree (gen-corpus.sh copies them; post-fakeroot.d/50-* hashes them into its
# cache key), one a line, relative to the target tree's root (the current
# directory): the programs, libraries and python modules Buildroot installs.
# Sourced (sh); lib/modules is removed by the caller.
real_dirs() {
	for d in bin sbin lib lib64 usr/bin usr/sbin usr/lib usr/lib64; do
		[ -d "$d" ] && [ ! -L "$d" ] && echo "$d"
	done
	return 0
}
