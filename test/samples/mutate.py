#!/usr/bin/env python3
"""Seeded mutants of valid puzzlefs images (issue 16's mutation campaign).

    mutate.py <out> <count> <seed> <corpus> <image>...

<corpus> is gen-corpus.sh's output (images.txt, img/); each <image> a name of
its images.txt (e.g. layers-d2, edge-zstd). <out> gets one OCI directory per
distinct source directory, a copy of it (`<out>/<oci>/`), to which the mutants'
new blobs are added: blobs are named by their sha256, so a mutant is nothing
but a manifest digest to mount with that directory, and the intact image is
still there to check afterwards. <out>/list.txt has one line per mutant:

    <name> <oci> <manifest digest> <image> <tree> <what was changed>

and <out>/bases.txt one line per intact image: <image> <oci> <digest> <tree>.

A mutant changes one blob of the image: the manifest, a metadata layer or a
chunk, by bit flips, byte or word writes (0, 0xff.., +-1, random), truncation,
appended bytes, or, in the Cap'n Proto blobs, an edit of a pointer found by
walking the message from its root (list element count and size, struct data and
pointer sizes, offsets, far pointers, null) or of the segment table. Then the
digests are fixed up: the changed blob is stored under its new sha256 and every
reference to the old digest (32 raw bytes in metadata and manifest) is rewritten
in the blobs that refer to it, up to the manifest, whose new digest is what the
guest mounts; a changed metadata layer also gets its fs-verity digest and
Merkle tree blob fixed in the manifest (pzverity.fix_manifest), or the driver
would check it against the old layer's tree. So a mount gets past every hash
check and the driver has to cope with the bytes themselves.

Mutant i depends only on (seed, i) and the images: the same seed gives the
same mutants, and `mutate.py ... <count> <seed>` with a larger count only adds
mutants.
"""
import hashlib
import os
import random
import shutil
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in test/samples
import pzverity  # noqa: E402 (next to this script: sys.path[0])

HEX = "0123456789abcdef"


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Oci:
    def __init__(self, path):
        self.path = path
        self.blobs = os.path.join(path, "blobs", "sha256")

    def get(self, digest):
        with open(os.path.join(self.blobs, digest), "rb") as f:
            return f.read()

    def put(self, data):
        d = sha(data)
        p = os.path.join(self.blobs, d)
        if not os.path.exists(p):
            with open(p + ".tmp", "wb") as f:
                f.write(data)
            os.rename(p + ".tmp", p)
        return d


# ---------------------------------------------------------------- capnp walk
def capnp_pointers(msg, limit=20000):
    """Every pointer reachable from the root: (byte offset of the pointer word,
    kind, decoded fields). Tolerant: stops at anything out of bounds."""
    if len(msg) < 8:
        return [], []
    nseg = struct.unpack_from("<I", msg, 0)[0] + 1
    if nseg > 512:
        return [], []
    hdr = 4 + 4 * nseg
    hdr += (8 - hdr % 8) % 8
    if len(msg) < hdr:
        return [], []
    sizes = [struct.unpack_from("<I", msg, 4 + 4 * i)[0] for i in range(nseg)]
    starts, at = [], hdr
    for s in sizes:
        starts.append(at)
        at += 8 * s
    out, seen = [], set()

    def word(seg, idx):
        if seg >= nseg or idx < 0 or idx >= sizes[seg]:
            return None
        o = starts[seg] + 8 * idx
        if o + 8 > len(msg):
            return None
        return struct.unpack_from("<Q", msg, o)[0]

    stack = [(0, 0, 0)]
    while stack and len(out) < limit:
        seg, idx, depth = stack.pop()
        if (seg, idx) in seen or depth > 64:
            continue
        seen.add((seg, idx))
        w = word(seg, idx)
        if not w:
            continue
        pos = starts[seg] + 8 * idx
        kind = w & 3
        off = (w >> 2) & 0x3FFFFFFF
        if off & 0x20000000:
            off -= 0x40000000
        if kind == 0:
            dw, pc = (w >> 32) & 0xFFFF, w >> 48
            out.append((pos, "struct", dw, pc))
            base = idx + 1 + off
            for i in range(pc):
                stack.append((seg, base + dw + i, depth + 1))
        elif kind == 1:
            es, cnt = (w >> 32) & 7, w >> 35
            out.append((pos, "list", es, cnt))
            base = idx + 1 + off
            if es == 6:
                for i in range(min(cnt, 4096)):
                    stack.append((seg, base + i, depth + 1))
            elif es == 7:
                tag = word(seg, base)
                if tag is None:
                    continue
                out.append((starts[seg] + 8 * base, "tag", (tag >> 32) & 0xFFFF, tag >> 48))
                n = (tag >> 2) & 0x3FFFFFFF
                dw, pc = (tag >> 32) & 0xFFFF, tag >> 48
                for e in range(min(n, 4096)):
                    for i in range(pc):
                        stack.append((seg, base + 1 + e * (dw + pc) + dw + i, depth + 1))
        elif kind == 2:
            out.append((pos, "far", (w >> 2) & 1, w >> 32))
            pad = (w >> 3) & 0x1FFFFFFF
            stack.append((w >> 32, pad, depth + 1))
    return out, sizes


def edit_pointer(r, msg, ptrs, sizes):
    """One edit of a pointer or of the segment table; returns (bytes, what)."""
    b = bytearray(msg)
    if not ptrs or r.random() < 0.08:
        # segment table: count or a size
        i = r.randrange(0, len(sizes) + 1)
        v = r.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, r.randrange(1 << 32),
                      (sizes[i - 1] + r.choice([-1, 1])) & 0xFFFFFFFF if i else 1])
        struct.pack_into("<I", b, 4 * i, v)
        return bytes(b), f"segtable[{i}]={v:#x}"
    pos, kind, a, c = r.choice(ptrs)
    w = struct.unpack_from("<Q", b, pos)[0]
    if kind == "list":
        field = r.choice(["count", "count", "count", "elemsize", "offset"])
        if field == "count":
            v = r.choice([0, 1, max(c - 1, 0), c + 1, c * 2 + 1, (1 << 29) - 1, r.randrange(1 << 29)])
            w = (w & ((1 << 35) - 1)) | (v << 35)
        elif field == "elemsize":
            v = r.randrange(8)
            w = (w & ~(7 << 32)) | (v << 32)
        else:
            v = r.choice([-1, 1, 0x1FFFFFFF, -0x20000000, r.randrange(-1000, 1000)])
            w = (w & ~(0x3FFFFFFF << 2)) | ((v & 0x3FFFFFFF) << 2)
        what = f"list@{pos} {field}={v} (was es={a} n={c})"
    elif kind in ("struct", "tag"):
        field = r.choice(["datawords", "ptrcount", "offset" if kind == "struct" else "elements"])
        if field == "datawords":
            v = r.choice([0, 1, max(a - 1, 0), a + 1, 0xFFFF])
            w = (w & ~(0xFFFF << 32)) | (v << 32)
        elif field == "ptrcount":
            v = r.choice([0, 1, max(c - 1, 0), c + 1, 0xFFFF])
            w = (w & ~(0xFFFF << 48)) | (v << 48)
        else:
            v = r.choice([-1, 1, 0x1FFFFFFF, -0x20000000, r.randrange(-1000, 1000)])
            w = (w & ~(0x3FFFFFFF << 2)) | ((v & 0x3FFFFFFF) << 2)
        what = f"{kind}@{pos} {field}={v} (was dw={a} pc={c})"
    else:
        v = r.randrange(1 << 64)
        w = v
        what = f"far@{pos}={v:#x}"
    if r.random() < 0.1:
        # a far pointer or a capability where there was something else, or null
        w = r.choice([0, (w & ~3) | 2, (w & ~3) | 3, (r.randrange(4) << 32) | (r.randrange(1 << 29) << 3) | 2])
        what += f" then {w:#x}"
    struct.pack_into("<Q", b, pos, w & 0xFFFFFFFFFFFFFFFF)
    return bytes(b), what


def edit_bytes(r, data):
    b = bytearray(data)
    n = len(b)
    k = r.choice(["bits", "bits", "byte", "word", "truncate", "append", "zero-run"])
    if n == 0:
        k = "append"
    if k == "bits":
        pos = []
        for _ in range(r.choice([1, 1, 2, 8])):
            o, bit = r.randrange(n), r.randrange(8)
            b[o] ^= 1 << bit
            pos.append(f"{o}.{bit}")
        return bytes(b), "flip " + ",".join(pos)
    if k == "byte":
        o, v = r.randrange(n), r.choice([0, 0xFF, 0x7F, 0x80, r.randrange(256)])
        b[o] = v
        return bytes(b), f"byte@{o}={v:#x}"
    if k == "word":
        size = r.choice([2, 4, 8])
        if n < size:
            return bytes(b[:-1]), "truncate by 1"
        o = r.randrange(0, n - size + 1)
        if r.random() < 0.7:
            o -= o % size
        old = int.from_bytes(b[o:o + size], "little")
        v = r.choice([0, (1 << (8 * size)) - 1, (1 << (8 * size - 1)) - 1, old + 1, old - 1,
                      r.randrange(1 << (8 * size))]) % (1 << (8 * size))
        b[o:o + size] = v.to_bytes(size, "little")
        return bytes(b), f"u{8 * size}@{o}={v:#x}"
    if k == "truncate":
        L = r.choice([0, 1, n // 2, n - 1, r.randrange(n)])
        return bytes(b[:L]), f"truncate to {L} of {n}"
    if k == "append":
        extra = bytes(r.randrange(256) for _ in range(r.choice([1, 7, 64, 4096])))
        return bytes(b) + extra, f"append {len(extra)}"
    o = r.randrange(n)
    L = min(r.choice([8, 64, 4096]), n - o)
    b[o:o + L] = bytes(L)
    return bytes(b), f"zero {L}@{o}"


def manifest_metas(msg):
    """The digests of Rootfs.metadatas, in order (single-segment messages, as
    every builder writes them)."""
    def word(i):
        return struct.unpack_from("<Q", msg, 8 + 8 * i)[0]

    def target(i, w):
        off = (w >> 2) & 0x3FFFFFFF
        return i + 1 + (off - (1 << 30) if off & (1 << 29) else off)

    root = word(0)
    base = target(0, root)
    dw = (root >> 32) & 0xFFFF
    lp = base + dw                  # pointer 0: metadatas
    lw = word(lp)
    tagi = target(lp, lw)
    tag = word(tagi)
    n = (tag >> 2) & 0x3FFFFFFF
    edw, epc = (tag >> 32) & 0xFFFF, tag >> 48
    out = []
    for e in range(n):
        pi = tagi + 1 + e * (edw + epc) + edw   # BlobRef.digest
        pw = word(pi)
        d = target(pi, pw)
        out.append(msg[8 + 8 * d:8 + 8 * d + 32].hex())
    return out


def refs_of(oci, manifest):
    """The metadata layers the manifest lists, and every chunk the metadata names
    (32 raw bytes equal to the name of a blob of the directory)."""
    names = {bytes.fromhex(d): d for d in os.listdir(oci.blobs) if len(d) == 64}
    metas = manifest_metas(oci.get(manifest))
    chunks = set()
    for md in metas:
        data = oci.get(md)
        for raw, d in names.items():
            if d not in metas and d != manifest and raw in data:
                chunks.add(d)
    return metas, sorted(chunks)


def replace_ref(data, old, new):
    return data.replace(bytes.fromhex(old), bytes.fromhex(new))


def mutate_one(r, oci, manifest, metas, chunks):
    """Returns (new manifest digest, description)."""
    target = r.choices(["manifest", "metadata", "chunk"], [15, 55, 30])[0]
    if target == "chunk" and not chunks:
        target = "metadata"
    if target == "manifest":
        data = oci.get(manifest)
        if r.random() < 0.6:
            new, what = edit_pointer(r, data, *capnp_pointers(data))
        else:
            new, what = edit_bytes(r, data)
        return oci.put(new), f"manifest {what}"
    if target == "metadata":
        li = r.randrange(len(metas))
        md = metas[li]
        data = oci.get(md)
        if r.random() < 0.6:
            new, what = edit_pointer(r, data, *capnp_pointers(data))
        else:
            new, what = edit_bytes(r, data)
        nd = oci.put(new)
        m = replace_ref(oci.get(manifest), md, nd)
        m = pzverity.fix_manifest(m, data, new, oci.put)
        return oci.put(m), f"metadata[{li}] {md[:12]} {what}"
    cd = r.choice(chunks)
    new, what = edit_bytes(r, oci.get(cd))
    nd = oci.put(new)
    m = replace_ref(oci.get(manifest), cd, nd)     # fsVerityData may name it
    for md in metas:
        data = oci.get(md)
        if bytes.fromhex(cd) in data:
            layer = replace_ref(data, cd, nd)
            m = replace_ref(m, md, oci.put(layer))
            m = pzverity.fix_manifest(m, data, layer, oci.put)
    return oci.put(m), f"chunk {cd[:12]} {what}"


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    out, count, seed, corpus = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    wanted = sys.argv[5:]
    images = {}
    with open(os.path.join(corpus, "images.txt")) as f:
        for line in f:
            name, oci, tag, tree, digest = line.split()
            images[name] = (oci, tree, digest)
    os.makedirs(out, exist_ok=True)
    bases = []
    for name in wanted:
        if name not in images:
            sys.exit(f"mutate.py: no image {name} in {corpus}/images.txt")
        oci, tree, digest = images[name]
        dst = os.path.join(out, oci)
        if not os.path.isdir(dst):
            shutil.copytree(os.path.join(corpus, "img", oci), dst)
        o = Oci(dst)
        metas, chunks = refs_of(o, digest)
        if not metas:
            sys.exit(f"mutate.py: {name}: no metadata reference found in its manifest")
        bases.append((name, oci, tree, digest, o, metas, chunks))
    with open(os.path.join(out, "bases.txt"), "w") as f:
        for name, oci, tree, digest, *_ in bases:
            f.write(f"{name} {oci} {digest} {tree}\n")
    with open(os.path.join(out, "list.txt"), "w") as f:
        for i in range(count):
            r = random.Random(f"{seed}/{i}")
            name, oci, tree, digest, o, metas, chunks = bases[i % len(bases)]
            md, what = mutate_one(r, o, digest, metas, chunks)
            f.write(f"m{i} {oci} {md} {name} {tree} {what}\n")
    print(f"mutate.py: seed {seed}: {count} mutants of {' '.join(wanted)} in {out}")


if __name__ == "__main__":
    main()
