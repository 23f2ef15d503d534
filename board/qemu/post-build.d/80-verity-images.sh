#!/bin/sh
# Images for the fs-verity cases (test/cases/8N-verity-*.exp), on the data
# disk (ext4 with the verity feature; tmpfs has no fs-verity):
#   $BASE_DIR/disk-tree/verity/src            the source tree (flat: one directory)
#   $BASE_DIR/disk-tree/verity/oci            its images: tags plain and zstd (-c)
#   $BASE_DIR/disk-tree/verity/<tag>.digest   manifest digest of each tag
#   $BASE_DIR/disk-tree/verity/<tag>.metadata the tag's metadata blob
#   $BASE_DIR/disk-tree/verity/<tag>.victim   a chunk blob some files use and others not
#                                             (in zstd, a zstd frame)
#   $BASE_DIR/disk-tree/verity/<tag>.victim-files  the files using it, one a line
#   $BASE_DIR/disk-tree/verity/<tag>.users    every chunk blob: "<blob> <file>..."
#   $BASE_DIR/disk-tree/verity/<tag>.forged   the victim with every (decompressed) byte
#                                             XORed with 0x55, as a valid blob of its kind
#                                             (plain bytes, or a zstd frame of the same size)
# Which file uses which blob is read from the metadata blob by the Cap'n Proto
# reference tool (`capnp decode`), not by the builder under test.
# fs-verity itself is enabled in the guest, by the cases (a disk image cannot
# carry it), with the appliance's /usr/bin/puzzlefs.
# The cases' pzv-tool (enable / measure / fiemap, test/samples/pzv-tool.c) is
# built by the puzzlefs-test-tools package into /usr/libexec/pzv.
# Usage: 80-verity-images.sh <TARGET_DIR>; HOST_DIR/bin/puzzlefs is the builder.
set -eu
: "${1:?usage: $0 <TARGET_DIR>}" # unused: what this script makes goes on the data disk
PUZZLEFS=${HOST_DIR:?}/bin/puzzlefs
TOP=$(cd "$(dirname "$0")/../../.." && pwd)
V=${BASE_DIR:?}/disk-tree/verity
die() { echo "verity images: $*" >&2; exit 1; }

rm -rf "$V"
mkdir -p "$V/src"
S=$V/src
# Several multi-chunk random files, two identical ones (sharing their chunks),
# compressible text (so the zstd tag has zstd frames), files of one block or
# less (one-block blobs: the fs-verity case the builder used to get wrong).
head -c 700000 /dev/urandom >"$S/solo.bin"
head -c 300000 /dev/urandom >"$S/twin-a.bin"
cp "$S/twin-a.bin" "$S/twin-b.bin"
head -c 400000 /dev/urandom >"$S/other.bin"
seq 1 150000 >"$S/numbers.txt"
printf 'small\n' >"$S/small.txt"
head -c 4096 /dev/urandom >"$S/block.bin"
: >"$S/empty"

for tag in plain zstd; do
	flag=
	[ $tag = zstd ] && flag=-c
	# shellcheck disable=SC2086
	"$PUZZLEFS" -q build $flag "$S" "$V/oci" $tag >"$V/$tag.digest" || die "puzzlefs build $tag failed"
	[ "$(wc -c <"$V/$tag.digest")" = 65 ] || die "no digest for $tag"
	python3 - "$V" "$tag" "$TOP/package/puzzlefs/format/schema" <<'PY' || die "blob map of $tag failed"
import codecs, os, re, subprocess, sys

v, tag, schema = sys.argv[1:]
blobs = os.path.join(v, "oci/blobs/sha256")
manifest = open(os.path.join(v, tag + ".digest")).read().strip()
m = subprocess.run(["capnp", "decode", "-I", schema, os.path.join(schema, "manifest.capnp"),
                    "Rootfs"], stdin=open(os.path.join(blobs, manifest), "rb"),
                   capture_output=True, check=True).stdout.decode("latin1")

def digests(text):
    return [codecs.escape_decode(s.encode("latin1"))[0].hex()
            for s in re.findall(r'digest = "((?:[^"\\]|\\.)*)"', text)]

meta = digests(m.split("fsVerityData")[0])
assert len(meta) == 1, meta
meta = meta[0]
t = subprocess.run(["capnp", "decode", "-I", schema, os.path.join(schema, "metadata.capnp"),
                    "InodeVector"], stdin=open(os.path.join(blobs, meta), "rb"),
                   capture_output=True, check=True).stdout.decode("latin1")
# Inodes are top-level "( ino = N," items of the list; the root (ino 1) is
# the only directory and names every file.
items = re.split(r"\n    \( ?ino = ", t)
names, chunks = {}, {}
for it in items[1:]:
    ino = int(re.match(r"\d+", it).group())
    if "dir = (" in it:
        for e_ino, name in re.findall(r'\(\s*ino = (\d+),\s*name = "([^"\\]*)"\s*\)', it):
            names[int(e_ino)] = name
    elif "file = (" in it:
        chunks[ino] = set(digests(it))
users = {}
for ino, ds in chunks.items():
    for d in ds:
        users.setdefault(d, set()).add(names[ino])
assert users, "no chunk blobs"
files = set(names.values())
with open(os.path.join(v, tag + ".users"), "w") as f:
    for d in sorted(users):
        f.write(d + " " + " ".join(sorted(users[d])) + "\n")
# The victim: a blob used by the most files while others do not use it.
with_data = {names[i] for i, ds in chunks.items() if ds}
cands = [d for d in users if users[d] != with_data]
# In the zstd tag, a zstd frame if there is one (the driver's decompression path).
def frame(d):
    with open(os.path.join(blobs, d), "rb") as f:
        return f.read(4) == b"\x28\xb5\x2f\xfd"
if tag == "zstd" and any(frame(d) for d in cands):
    cands = [d for d in cands if frame(d)]
victim = max(sorted(cands), key=lambda d: len(users[d]))
open(os.path.join(v, tag + ".victim"), "w").write(victim + "\n")
open(os.path.join(v, tag + ".victim-files"), "w").write("".join(n + "\n" for n in sorted(users[victim])))
open(os.path.join(v, tag + ".metadata"), "w").write(meta + "\n")
PY
	victim=$V/oci/blobs/sha256/$(cat "$V/$tag.victim")
	if [ "$(head -c4 "$victim" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]; then
		zstd -q -d -c "$victim" >"$V/$tag.forged.raw" || die "zstd -d failed"
	else
		cp "$victim" "$V/$tag.forged.raw"
	fi
	python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[1], "wb").write(bytes(b ^ 0x55 for b in d))' \
		"$V/$tag.forged.raw"
	if [ "$(head -c4 "$victim" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]; then
		zstd -q -3 -c "$V/$tag.forged.raw" >"$V/$tag.forged" || die "zstd failed"
		rm "$V/$tag.forged.raw"
	else
		mv "$V/$tag.forged.raw" "$V/$tag.forged"
	fi
done
