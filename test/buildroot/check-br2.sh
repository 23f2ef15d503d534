#!/bin/sh
# check-br2.sh [<repo>]: what Buildroot's own tools do not check about this
# tree (test/buildroot/br-check.sh runs those: check-package, defconfig load
# and savedefconfig, list-defconfigs, printvars, show-info with check-hash):
#  - every $(BR2_EXTERNAL_PUZZLEFS_PATH) path a configs/*_defconfig names
#    exists (Buildroot only finds out when the build reaches it);
#  - br2-external/configs/ holds one relative symlink per configs/*_defconfig
#    and nothing else (one copy of each defconfig; list-defconfigs runs
#    `find` there, which lists symlinked files but not a symlinked directory).
# Prints one line per problem and "check-br2: N problem(s)"; exits 1 if
# there is any.
set -u
REPO=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
EXT=$REPO/br2-external
n=0
problem() { echo "$*"; n=$((n + 1)); }

for f in "$REPO"/configs/*_defconfig; do
	r=${f#"$REPO"/}
	for p in $(sed -n 's/^BR2_[A-Za-z0-9_]*="\(.*\)"$/\1/p' "$f"); do
		case $p in
		'$(BR2_EXTERNAL_PUZZLEFS_PATH)'*)
			[ -e "$EXT${p#'$(BR2_EXTERNAL_PUZZLEFS_PATH)'}" ] || problem "$r: $p does not exist" ;;
		/*) problem "$r: $p: an absolute path; use \$(BR2_EXTERNAL_PUZZLEFS_PATH)" ;;
		esac
	done
	l=$EXT/configs/$(basename "$f")
	[ -L "$l" ] && [ "$(readlink "$l")" = "../../configs/$(basename "$f")" ] ||
		problem "br2-external/configs/$(basename "$f"): not the symlink ../../configs/$(basename "$f")"
done
for l in "$EXT"/configs/*; do
	[ -e "$REPO/configs/$(basename "$l")" ] || problem "br2-external/configs/$(basename "$l"): no such configs/ file"
done
echo "check-br2: $n problem(s)"
[ "$n" -eq 0 ]
