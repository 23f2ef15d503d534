#!/usr/bin/env python3
"""Hostile variants of the plain sample image, for the refused-mount cases.

Usage: 31-puzzlefs-kernel-hostile.py <TARGET_DIR>. Reads <TARGET_DIR>/root/pzk/plain
(written by 30-puzzlefs-kernel-samples.sh) and writes <TARGET_DIR>/root/pzk/bad/oci, a copy
of it with extra blobs, and one <name>.digest per refused manifest:

  mismatch  a blob whose name is not the sha256 of its bytes   -> EBADMSG
  version2  a manifest with manifestVersion 2                  -> EINVAL
  garbage   a manifest blob that is not Cap'n Proto            -> EUCLEAN
  badlayer  a manifest whose metadata layer is not Cap'n Proto -> EUCLEAN
  nolayer   a manifest whose metadata layer blob is missing    -> ENOENT

and bad/nochunk (the plain image without its largest chunk blob: EIO on read) and
bad/fuzz.digests (40 manifests of bit-flipped or truncated metadata layers).
"""
import hashlib
import os
import random
import shutil
import struct
import sys

target = sys.argv[1]
pzk = os.path.join(target, "root", "pzk")
src = os.path.join(pzk, "plain", "oci")
bad = os.path.join(pzk, "bad")
oci = os.path.join(bad, "oci")
blobs = os.path.join(oci, "blobs", "sha256")
shutil.rmtree(bad, ignore_errors=True)
shutil.copytree(src, oci, symlinks=True)

with open(os.path.join(pzk, "plain-plain.digest")) as f:
    plain = f.read().strip()
with open(os.path.join(blobs, plain), "rb") as f:
    manifest = bytearray(f.read())


def put(data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return digest


def record(name, digest):
    with open(os.path.join(bad, name + ".digest"), "w") as f:
        f.write(digest + "\n")


# mismatch: the plain manifest stored under a wrong name.
wrong = hashlib.sha256(b"not the manifest").hexdigest()
with open(os.path.join(blobs, wrong), "wb") as f:
    f.write(manifest)
record("mismatch", wrong)

# version2: the root struct's first data word is manifestVersion.
(segs,) = struct.unpack_from("<I", manifest, 0)
table = 4 + 4 * (segs + 1)
table += (8 - table % 8) % 8
(ptr,) = struct.unpack_from("<Q", manifest, table)
offset = (ptr & 0xFFFFFFFF) >> 2
data = table + 8 + 8 * offset
(version,) = struct.unpack_from("<Q", manifest, data)
assert version == 1, version
v2 = bytearray(manifest)
struct.pack_into("<Q", v2, data, 2)
record("version2", put(bytes(v2)))

# garbage: random bytes as a manifest.
record("garbage", put(os.urandom(200)))

# badlayer / nolayer: replace the (only) metadata layer's digest.
layer_digests = []
for name in os.listdir(blobs):
    raw = bytes.fromhex(name)
    if raw in manifest and name != plain:
        layer_digests.append(raw)
assert layer_digests, "no metadata layer digest found in the manifest"
# `metadatas` is the first list the builders write, before the verity data.
layer = min(layer_digests, key=manifest.find)
garbage_layer = bytes.fromhex(put(os.urandom(4096)))
record("badlayer", put(bytes(manifest).replace(layer, garbage_layer)))
missing = hashlib.sha256(b"no such blob").digest()
record("nolayer", put(bytes(manifest).replace(layer, missing)))

# missing chunk: a copy of the image without its largest chunk blob; the mount
# works, reading a file backed by that chunk fails with EIO.
nochunk = os.path.join(bad, "nochunk")
shutil.copytree(src, nochunk, symlinks=True)
nb = os.path.join(nochunk, "blobs", "sha256")
referenced = [n for n in os.listdir(nb) if bytes.fromhex(n) in manifest and n != plain]
chunks = [n for n in referenced if bytes.fromhex(n) != layer]
victim = max(chunks, key=lambda n: os.path.getsize(os.path.join(nb, n)))
os.unlink(os.path.join(nb, victim))

# fuzz: metadata layers with random bit flips (and truncations), each referenced
# by a manifest of its own; mounting and walking them must never crash.
rng = random.Random(4)
with open(os.path.join(blobs, layer.hex()), "rb") as f:
    meta = f.read()
fuzz = []
for i in range(40):
    m = bytearray(meta)
    if i % 8 == 7:
        m = m[: rng.randrange(8, len(m))]
    else:
        for _ in range(rng.choice([1, 2, 4, 16])):
            pos = rng.randrange(len(m))
            m[pos] ^= 1 << rng.randrange(8)
    d = bytes.fromhex(put(bytes(m)))
    fuzz.append(put(bytes(manifest).replace(layer, d)))
with open(os.path.join(bad, "fuzz.digests"), "w") as f:
    f.write("\n".join(fuzz) + "\n")
