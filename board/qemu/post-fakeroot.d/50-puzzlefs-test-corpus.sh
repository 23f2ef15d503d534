#!/bin/sh
# The regression corpus of test/cases/5N-7N-*.exp (issue 6), put into the
# target tree:
#   /root/corpus/{img,manifests,copies,hostile,images.txt,big.txt}
# (the guest's pzt-helper comes from package/puzzlefs-test-tools, the scripts
# that use it from overlay/; the build machine's, $HOST_DIR/bin/pzt-helper,
# from host-puzzlefs-test-tools)
# Made by test/samples/gen-corpus.sh with the host builder; its "real" tree is
# a copy of the target's own programs and libraries (test/samples/real-dirs.sh).
# Cached under $BUILD_DIR/pzt-corpus, keyed by the generators, the builder
# binary, the fixture and those target files (names, modes, link targets,
# contents), so a rebuild with nothing changed only copies (seconds).
# PZT_CORPUS_SHARED names another build's cache (make test-debug: the
# appliance build's) to copy when its key is this one.
# Usage: 50-puzzlefs-test-corpus.sh <TARGET_DIR> (a Buildroot post-fakeroot script: run as root).
set -eu
TARGET_DIR=$1
TOP=$(cd "$(dirname "$0")/../../.." && pwd)
SAMPLES=$TOP/test/samples
PUZZLEFS=${HOST_DIR:?}/bin/puzzlefs
HELPER=$HOST_DIR/bin/pzt-helper
BUILD_DIR=${BUILD_DIR:-$TOP/output/build}
# The fixture sits next to the repo (../shared), in CI as here.
FIXTURE=${PUZZLEFS_FIXTURE:-$TOP/../shared/fixtures/upstream-v1}
CACHE=$BUILD_DIR/pzt-corpus
# shellcheck source=test/samples/real-dirs.sh
. "$SAMPLES/real-dirs.sh"

key=$( {
	cat "$SAMPLES/gen-corpus.sh" "$SAMPLES/real-dirs.sh" "$SAMPLES/gen-hostile.py" "$SAMPLES/pzverity.py" "$SAMPLES/pzt-helper.c" "$PUZZLEFS"
	[ -d "$FIXTURE" ] && (cd "$FIXTURE" && find . -type f | LC_ALL=C sort | xargs sha256sum)
	(cd "$TARGET_DIR" && real_find -printf '%p %y %m %l\n' | LC_ALL=C sort \
		&& real_find -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
} | sha256sum | cut -d' ' -f1)
SHARED=${PZT_CORPUS_SHARED:-}
if [ "$(cat "$CACHE/.key" 2>/dev/null)" = "$key" ]; then
	echo "pzt corpus: cached in $CACHE"
elif [ -n "$SHARED" ] && [ "$(cat "$SHARED/.key" 2>/dev/null)" = "$key" ]; then
	echo "pzt corpus: copying $SHARED (same generators, builder and fixture)"
	rm -rf "$CACHE" "$CACHE.tmp"
	cp -a "$SHARED" "$CACHE.tmp"
	mv "$CACHE.tmp" "$CACHE"
else
	echo "pzt corpus: generating in $CACHE"
	"$SAMPLES/gen-corpus.sh" "$CACHE" "$PUZZLEFS" "$HELPER" "$TARGET_DIR" "$FIXTURE"
	echo "$key" >"$CACHE/.key"
fi

D=$TARGET_DIR/root/corpus
rm -rf "$D"
mkdir -p "$D"
for x in img manifests copies hostile images.txt big.txt; do
	cp -a "$CACHE/$x" "$D/"
done
