# shellcheck shell=sh
# real_dirs: the directories of a target tree that make the corpus's "real"
# tree (gen-corpus.sh copies them; post-fakeroot.d/50-* hashes them into its
# cache key), one a line, relative to the target tree's root (the current
# directory): the programs, libraries and python modules Buildroot installs.
# A directory that is a symlink (Buildroot's lib64 -> lib, merged /usr) is
# listed too: copied as the link, it keeps the loader's paths working in a
# chroot. Sourced (sh); the kernel modules (real_skip) are left out by the
# callers.
real_dirs() {
	for d in bin sbin lib lib64 usr/bin usr/sbin usr/lib usr/lib64; do
		if [ -d "$d" ] || [ -L "$d" ]; then echo "$d"; fi
	done
}
# shellcheck disable=SC2034 # used by gen-corpus.sh; real_find prunes the same
real_skip="lib/modules usr/lib/modules"
# real_find <find expression>: find over real_dirs without real_skip.
real_find() {
	# shellcheck disable=SC2046 # one directory name a line, no spaces
	find $(real_dirs) \( -path lib/modules -o -path usr/lib/modules \) -prune -o "$@"
}
