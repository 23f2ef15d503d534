#!/bin/bash
# Regression corpus for the expect suite (test/cases/5N-7N-*.exp), made on the
# build machine from nothing but this repo, the target tree and the builder
# under test:
#
#   gen-corpus.sh <out> <puzzlefs> <pzt-helper> <target dir> [<fixture dir>]
#
# <pzt-helper> is test/samples/pzt-helper.c built for the build machine
# (host-puzzlefs-test-tools: $HOST_DIR/bin/pzt-helper); the guest runs the
# target's build of the same source, so both sides use the same code.
# <out>/trees/<tree>/         source trees (edge, many, real, layers-{base,d1,d2}, fixture-*)
#                             real: the target's own programs, libraries and
#                             python modules (bin sbin lib lib64 usr/{bin,sbin,lib,lib64}
#                             of <target dir>, without the kernel modules)
# <out>/img/<image>/          OCI directories:
#      edge, many, real        tags plain and zstd (-c)
#      layers, layers-z        tags base, d1 (-b base), d2 (-b d1); layers-z with -c
#                              and --no-link-counts (the driver counts the names)
#      fixture                 copy of ../shared/fixtures/upstream-v1/oci (tags plain zstd delta)
#      huge                    tag plain: one file of 4 GiB + 4097 bytes (big.txt)
#      layers256               tags l0 (base) .. l255 (255 deltas, -b): 256 layers
# <out>/manifests/<tree>.txt  `pzt-helper manifest` of each source tree (what the guest must see)
# <out>/images.txt            one line per image under test: <name> <oci> <tag> <tree> <manifest digest>
#                             (<tree> "-": no source tree is kept; its file is in big.txt)
# <out>/hostile/              hostile images and their case table (gen-hostile.py)
# <out>/copies/<tree>/...     a sample of source files, for `cmp` in the guest
# <out>/copies/<tree>.list    the sampled paths
# <out>/big.txt               <tree> <path> <seed> <size> <period> of files made by `pzt-helper gen`
#                             that are not copied (the guest regenerates them for cmp)
#
# Deterministic: the same inputs give the same trees (real_dirs below is
# what 50-puzzlefs-test-corpus.sh hashes into its cache key). Run as root
# (device nodes, owners, trusted.* xattrs).
set -euo pipefail
OUT=$1
PUZZLEFS=$2
H=$3
TARGET=$4
FIXTURE=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
die() { echo "gen-corpus: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"
for t in python3 setfattr mknod truncate; do
	command -v $t >/dev/null || die "needs $t"
done
[ -x "$H" ] || die "no pzt-helper for the build machine at $H (host-puzzlefs-test-tools)"
[ -x "$TARGET/bin/busybox" ] || die "no target tree at $TARGET (no bin/busybox)"

rm -rf "$OUT"
mkdir -p "$OUT/trees" "$OUT/img" "$OUT/manifests" "$OUT/copies"
: >"$OUT/big.txt"
: >"$OUT/images.txt"

# gen <file> <seed> <size> [period]
gen() { "$H" gen "$2" "$3" "${4:-0}" >"$1"; }

# ------------------------------------------------------------------ edge
T=$OUT/trees/edge
mkdir -p "$T"
(
cd "$T"
mkdir sizes
: >empty
mkdir -p emptydir dir && : >dir/empty2
seed=1
for n in 1 4095 4096 4097 8191 8192 8193 16383 16384 16385 65535 65536 65537 \
	131072 262143 262144 262145 524288 1048575 1048577; do
	gen "sizes/s$n" $seed $n; seed=$((seed + 1))
done
# 64 MiB, 1 MiB periods: distinct bytes, mostly shared chunks (the image stays small).
gen big64m 64 67108864 1048576
echo "edge big64m 64 67108864 1048576" >>"$OUT/big.txt"
truncate -s 8M zeros-sparse
head -c 3000000 /dev/zero >zeros-dense
# Files sharing chunks: same bytes, one with a tail, one with a head, one twice.
gen share-a 7 1048576
cp share-a share-b && printf 'tail' >>share-b
{ printf 'head'; cat share-a; } >share-c
cat share-a share-a >share-twice
# 40-deep path.
p=deep; for i in $(seq -w 1 40); do p=$p/d$i; done
mkdir -p "$p" && printf 'at the bottom\n' >"$p/leaf"
# Names.
mkdir names
printf 1 >"names/$(printf 'a%.0s' $(seq 1 255))"
mkdir "names/$(printf 'D%.0s' $(seq 1 255))" && printf 2 >"names/$(printf 'D%.0s' $(seq 1 255))/$(printf 'f%.0s' $(seq 1 255))"
printf 3 >"names/with space"
printf 4 >"names/new
line"
printf 5 >"names/$(printf 'non-utf8-\377\376\200')"
printf 6 >"names/tab$(printf '\t')here"
printf 7 >"names/-dash"
printf 8 >"names/.hidden"
printf 9 >"names/$(printf 'caf\303\251-\344\270\255')"
printf 10 >"names/back\\slash"
printf 11 >"names/%percent"
# Symlinks.
mkdir links
ln -s ../empty links/rel
ln -s /etc/passwd links/abs
ln -s does/not/exist links/dangling
ln -s ../dir links/to-dir
ln -s rel links/chain
ln -s "$(printf 't%.0s' $(seq 1 1000))" links/long-target
ln -s "$(printf 'sp ace/new\nline')" links/odd-target
# Hard links across directories (a file, an empty file, a symlink).
mkdir -p hl/one hl/two/three
printf 'linked\n' >hl/one/f
ln hl/one/f hl/two/f-again
ln hl/one/f hl/two/three/f-thrice
: >hl/empty && ln hl/empty hl/two/empty-again
ln -s target hl/sym && ln -P hl/sym hl/two/sym-again
# Special files.
mkdir special
mkfifo special/fifo
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' special/socket
mknod special/null c 1 3
mknod special/zero c 1 5
mknod special/loop0 b 7 0
mknod special/big-chr c 4095 1048575
mknod special/big-blk b 259 65537
# Modes.
mkdir modes
for m in 4755 2755 6755 1755 7777 0000 0600 0444 0111 4000; do
	printf '%s\n' $m >modes/f$m && chmod $m modes/f$m
done
mkdir modes/sticky modes/sgid-dir modes/closed && chmod 1777 modes/sticky && chmod 2775 modes/sgid-dir && chmod 0700 modes/closed
printf 'in closed\n' >modes/closed/inside
# Owners.
mkdir owners
for u in 0:0 1:2 1000:1000 65534:65534 123456:654321 4294967294:4294967293; do
	printf '%s\n' $u >owners/u$u && chown $u owners/u$u
done
chown 4242:2424 owners
ln -s u0:0 owners/link-owned && chown -h 777:888 owners/link-owned
# Xattrs.
mkdir xattrs
printf 'x\n' >xattrs/one
setfattr -n user.comment -v hello xattrs/one
printf 'x\n' >xattrs/many
for i in $(seq -w 1 20); do setfattr -n user.k$i -v "value $i" xattrs/many; done
printf 'x\n' >xattrs/empty-value
setfattr -n user.empty xattrs/empty-value
printf 'x\n' >xattrs/large
setfattr -n user.large -v "$(seq -s, 1 800 | head -c 3000)" xattrs/large
printf 'x\n' >xattrs/trusted
setfattr -n trusted.secret -v t1 xattrs/trusted
setfattr -n user.plain -v u1 xattrs/trusted
setfattr -n user.binary -v 0x00ff0a0d xattrs/trusted
setfattr -n user.dir -v on-a-dir xattrs
ln -s one xattrs/link && setfattr -h -n trusted.onlink -v l xattrs/link
)

# ------------------------------------------------------------------ many
T=$OUT/trees/many
mkdir -p "$T/flat"
(cd "$T/flat" && for i in $(seq -w 0 19999); do printf '%s\n' "$i" >"f$i"; done)
printf 'outside\n' >"$T/other"

# ------------------------------------------------------------------ hugedir
# One directory of 100,000 entries (the size issue 12 measures lookups in):
# names of 1 to 255 bytes, created in no name order, mostly empty files, every
# 97th file with content, every 101st entry a symbolic link to another name,
# every 1,000th a directory holding one file: readdir, lookups and reads of
# all of them through the driver (case 51).
T=$OUT/trees/hugedir
mkdir -p "$T/d"
python3 - "$T/d" <<'EOF'
import os, random, sys
d = sys.argv[1]
r = random.Random(100000)
chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+,=@~"
names = []
for i in range(100000):
    # Unique by the number they start with; padded to a random length.
    base = "%x" % (i * 2654435761 % (1 << 32))
    n = r.choice((1, 2, 8, 8, 16, 16, 32, 64, 255))
    pad = "".join(r.choice(chars) for _ in range(n - len(base) - 1))
    names.append(base + "-" + pad if n > len(base) + 1 else base)
for i, name in enumerate(names):
    p = os.path.join(d, name)
    if i % 1000 == 999:
        os.mkdir(p)
        with open(os.path.join(p, "in"), "w") as f:
            f.write("%d\n" % i)
    elif i % 101 == 100:
        os.symlink(names[(i * 7) % len(names)], p)
    else:
        with open(p, "w") as f:
            if i % 97 == 0:
                f.write("entry %d\n" % i)
EOF

# ------------------------------------------------------------------ real
# The target's own installed files, owners, modes and links as they are there
# (post-fakeroot: root-owned). The kernel modules are left out: they differ
# between the appliance and the debug kernel, which share this corpus.
T=$OUT/trees/real
mkdir -p "$T"
# shellcheck source=test/samples/real-dirs.sh
. "$HERE/real-dirs.sh"
(cd "$TARGET" && real_dirs | while IFS= read -r d; do cp -a --parents "$d" "$T/"; done)
for p in $real_skip; do
	# Not through a copied directory symlink (merged /usr: lib -> usr/lib).
	[ -L "$T/${p%/*}" ] || rm -rf "${T:?}/$p"
done
[ -f "$T/bin/busybox" ] || die "no bin/busybox in the real tree"

# ------------------------------------------------------------------ layers
L=$OUT/trees
B=$L/layers-base
mkdir -p "$B/a/sub" "$B/del-dir/nested/more" "$B/dir-to-file/x" "$B/keep"
printf 'keep\n' >"$B/keep/k"
printf 'one\n' >"$B/a/one"
printf 'two\n' >"$B/a/two"
printf 'sub\n' >"$B/a/sub/s"
printf 'old\n' >"$B/replace-me"
printf 'gone\n' >"$B/del-file"
printf 'n\n' >"$B/del-dir/nested/more/deep"
printf 'x\n' >"$B/dir-to-file/x/y"
printf 'f\n' >"$B/file-to-dir"
ln -s a/one "$B/link"
gen "$B/chunky" 11 600000
seq 1 80000 >"$B/text"
ln "$B/keep/k" "$B/a/k-link"
setfattr -n user.layer -v base "$B/keep/k"
D1=$L/layers-d1
cp -a "$B" "$D1"
rm "$D1/del-file"
rm -r "$D1/del-dir"
printf 'new content, longer than the old\n' >"$D1/replace-me"
rm -r "$D1/dir-to-file" && printf 'now a file\n' >"$D1/dir-to-file"
mkdir -p "$D1/added/dir" && printf 'added\n' >"$D1/added/dir/file"
chmod 0600 "$D1/a/one" && chown 5:6 "$D1/a/two"
setfattr -n user.layer -v d1 "$D1/keep/k"
printf 'XXXXXXXXXX' | dd of="$D1/chunky" bs=1 seek=300000 conv=notrunc status=none
seq 70000 90000 >>"$D1/text"
D2=$L/layers-d2
cp -a "$D1" "$D2"
rm "$D2/file-to-dir" && mkdir -p "$D2/file-to-dir/inner" && printf 'i\n' >"$D2/file-to-dir/inner/i"
printf 'back, different\n' >"$D2/del-file"
rm "$D2/a/one" "$D2/link" && ln -s keep/k "$D2/link"
rm "$D2/a/k-link"
setfattr -x user.layer "$D2/keep/k"
mkdir "$D2/del-dir" && printf 'recreated\n' >"$D2/del-dir/r"

digest_of() { # digest_of <oci under img/> <tag>
	python3 -c 'import json,sys
for m in json.load(open(sys.argv[1]))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"] == sys.argv[2]: print(m["digest"][7:])' \
		"$OUT/img/$1/index.json" "$2" | grep -E '^[0-9a-f]{64}$' || die "no tag $2 in img/$1"
}

# ------------------------------------------------------------------ fixture
if [ -n "$FIXTURE" ] && [ -d "$FIXTURE/oci" ]; then
	mkdir -p "$OUT/trees/fixture"
	tar -xf "$FIXTURE/src.tar" -C "$OUT/trees/fixture" --numeric-owner --xattrs --xattrs-include='*'
	mv "$OUT/trees/fixture/src" "$OUT/trees/fixture-src"
	mv "$OUT/trees/fixture/src-delta" "$OUT/trees/fixture-src-delta"
	rmdir "$OUT/trees/fixture"
	cp -a "$FIXTURE/oci" "$OUT/img/fixture"
	for t in plain:fixture-src zstd:fixture-src delta:fixture-src-delta; do
		echo "fixture-${t%%:*} fixture ${t%%:*} ${t#*:} $(digest_of fixture "${t%%:*}")" >>"$OUT/images.txt"
	done
fi

# ------------------------------------------------------------------ images
build() { # build <oci> <tag> <tree> [builder options]
	local oci=$1 tag=$2 tree=$3; shift 3
	"$PUZZLEFS" -q build "$@" "$OUT/trees/$tree" "$OUT/img/$oci" "$tag" >/dev/null \
		|| die "puzzlefs build $* $tree $oci $tag failed"
	echo "$oci-$tag $oci $tag $tree $(digest_of "$oci" "$tag")" >>"$OUT/images.txt"
}
for t in edge many real; do
	build $t plain $t
	build $t zstd $t -c
done
build hugedir plain hugedir
build layers base layers-base
build layers d1 layers-d1 -b base
build layers d2 layers-d2 -b d1
# layers-z records no link counts: the driver counts the names (nlink.rs).
build layers-z base layers-base -c --no-link-counts
build layers-z d1 layers-d1 -c -b base --no-link-counts
build layers-z d2 layers-d2 -c -b d1 --no-link-counts

# ------------------------------------------------------------------ deep layers
# As many layers as a mount accepts (puzzlefs_format::MAX_LAYERS, 256): a base
# and 255 deltas, each changing one file, adding one and deleting the one
# added three layers before; tag l255 must show the last tree exactly.
T=$OUT/trees/layers256
mkdir -p "$T/f" "$T/fixed"
printf 'stays\n' >"$T/fixed/s"
printf '0\n' >"$T/n"
"$PUZZLEFS" -q build "$T" "$OUT/img/layers256" l0 >/dev/null || die "puzzlefs build of layers256 l0 failed"
for k in $(seq 1 255); do
	printf '%s\n' "$k" >"$T/n"
	printf 'added in %s\n' "$k" >"$T/f/$k"
	rm -f "$T/f/$((k - 3))"
	if [ "$k" = 255 ]; then
		build layers256 l255 layers256 -b l254
	else
		"$PUZZLEFS" -q build -b "l$((k - 1))" "$T" "$OUT/img/layers256" "l$k" >/dev/null \
			|| die "puzzlefs build of layers256 l$k failed"
	fi
done

# ------------------------------------------------------------------ huge
# One file past 4 GiB (offsets and sizes beyond 32 bits), made of 16 MiB
# periods: the image keeps ~40 MiB of chunks. The 4 GiB source is deleted once
# built (the guest compares with the generator), so the image's tree is "-".
mkdir -p "$OUT/trees/huge"
huge_size=$(((4 << 30) + 4097))
gen "$OUT/trees/huge/big4g" 65 $huge_size $((16 << 20))
"$PUZZLEFS" -q build "$OUT/trees/huge" "$OUT/img/huge" plain >/dev/null || die "puzzlefs build of huge failed"
rm -r "$OUT/trees/huge"
echo "huge-plain huge plain - $(digest_of huge plain)" >>"$OUT/images.txt"
echo "huge big4g 65 $huge_size $((16 << 20))" >>"$OUT/big.txt"

# ------------------------------------------------------------------ manifests
for t in $(cut -d' ' -f4 "$OUT/images.txt" | grep -vx -- - | sort -u); do
	(cd "$OUT/trees" && "$H" manifest "$t") >"$OUT/manifests/$t.txt" \
		|| die "manifest of $t has errors: $(grep ERROR "$OUT/manifests/$t.txt" | head -3)"
done

# ------------------------------------------------------------------ copies
# Every plainly named regular file of edge and layers-d2 (except the
# generated big one), every 16th of real plus its ELF entry points.
sample() { # sample <tree> <awk filter>
	local t=$1
	(cd "$OUT/trees/$t" && find . -type f -regex '\./[A-Za-z0-9._/+-]*' | LC_ALL=C sort | sed 's|^\./||' \
		| awk "$2") >"$OUT/copies/$t.list"
	mkdir -p "$OUT/copies/$t"
	(cd "$OUT/trees/$t" && while read -r f; do cp -a --parents "$f" "$OUT/copies/$t/"; done) <"$OUT/copies/$t.list"
}
sample edge '$0 != "big64m" && !/^zeros-/ && !/^share-[bct]/'
sample layers-d2 '1'
[ -d "$OUT/trees/fixture-src" ] && sample fixture-src '1'
sample real 'NR % 16 == 1 || /^usr\/bin\/puzzlefs$/ || /^bin\/busybox$/ || /^usr\/bin\/python3[.0-9]*$/ || /(^|\/)(libc|ld-linux)[^\/]*\.so[.0-9]*$/'
# ------------------------------------------------------------------ hostile
python3 "$HERE/gen-hostile.py" "$PUZZLEFS" "$H" "$OUT/hostile" >/dev/null || die "gen-hostile.py failed"
rm -rf "$OUT/hostile/src"
echo "gen-corpus: $(wc -l <"$OUT/hostile/cases.txt") hostile images"
echo "gen-corpus: $(wc -l <"$OUT/images.txt") images, $(du -sh "$OUT/img" | cut -f1) of OCI directories"
