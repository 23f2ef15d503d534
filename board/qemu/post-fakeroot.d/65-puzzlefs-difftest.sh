#!/bin/sh
# Data of the differential tester and the mutation campaign (issue 16; cases
# test/cases/65-69), made from the regression corpus of 50-puzzlefs-test-corpus.sh
# (which runs first):
#   (the tester itself, /usr/libexec/puzzlefs-test/pzt-difftest, is built by the
#   puzzlefs-test-tools package from test/samples/pzt-difftest.c)
#   $BASE_DIR/disk-tree/difftest/<tree>       reference copies of the source trees of
#        the images under test, on the data disk (ext4): `cp -a` keeps owners, modes,
#        xattrs, devices, hard links; mke2fs -d copies them into the file system,
#        except hard links between symlinks (<tree>.symlinks: the guest relinks them)
#   $BASE_DIR/disk-tree/mutants/              test/samples/mutate.py: PZT_FUZZ_N mutants
#        (default 300, the CI share) with seed PZT_FUZZ_SEED (default: a fresh one
#        every build, printed and kept in mutants/seed), list.txt, bases.txt
# Mutants are made here, on the host, rather than in the guest: python3 and
# hashlib make the Cap'n Proto walk and the digest fix-ups short, the guest has
# no python, and 300 mutants take about a second; `make fuzz N=.. SEED=..`
# sets PZT_FUZZ_N/PZT_FUZZ_SEED.
# Usage: 65-puzzlefs-difftest.sh <TARGET_DIR> (Buildroot post-build environment).
set -eu
: "${1:?usage: $0 <TARGET_DIR>}" # unused: what this script makes goes on the data disk
TOP=$(cd "$(dirname "$0")/../../.." && pwd)
SAMPLES=$TOP/test/samples
BUILD_DIR=${BUILD_DIR:-$TOP/output/build}
CORPUS=$BUILD_DIR/pzt-corpus
DISK=${BASE_DIR:?}/disk-tree
[ -f "$CORPUS/images.txt" ] || { echo "65-puzzlefs-difftest: no corpus in $CORPUS (50-* makes it)" >&2; exit 1; }

# Reference trees: edge (every kind of entry and the hostile sizes), layers-d2
# (what the three-layer images show), many (20 000 entries in one directory).
rm -rf "$DISK/difftest" "$DISK/mutants"
mkdir -p "$DISK/difftest"
for t in edge layers-d2 many; do
	cp -a "$CORPUS/trees/$t" "$DISK/difftest/$t"
	# mke2fs -d does not keep hard links between symlinks: the guest makes them
	# again from this list (<path> <path it is a hard link of>) before a run.
	(cd "$DISK/difftest/$t" && find . -type l -links +1 -printf '%i %P\n' | sort -n -k1,1 |
		awk '$1 == i { print substr($0, length($1) + 2), first; next } { i = $1; first = substr($0, length($1) + 2) }') \
		>"$DISK/difftest/$t.symlinks"
done

seed=${PZT_FUZZ_SEED:-}
[ -n "$seed" ] || seed=$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')
n=${PZT_FUZZ_N:-300}
python3 "$SAMPLES/mutate.py" "$DISK/mutants" "$n" "$seed" "$CORPUS" \
	layers-d2 layers-z-d2 edge-plain edge-zstd
echo "$seed" >"$DISK/mutants/seed"
