#!/usr/bin/env python3
"""fs-verity of PuzzleFS blobs (sha256, 4 KiB blocks, no salt), for the
hostile-image generators (gen-hostile.py, mutate.py).

    pzverity.py --self-test     compare with `fsverity digest` (fsverity-utils)

The same computation as package/puzzlefs/builder/src/verity.rs: the Merkle
tree hashes the data blocks (the last one zero-padded), then the blocks of
those hashes (128 per block, the last block zero-padded), level by level,
until one level fits in one block; the root is the hash of that block (of the
only data block for a blob of one block, all zeros for an empty one). The
tree is stored top level first, each level padded to whole blocks, as
`fsverity digest --out-merkle-tree` writes it; a blob of at most one block
has none. The fs-verity digest is the sha256 of the 256-byte descriptor
(version 1, sha256, log2 block size 12, no salt, the size, the root).

The builder stores, for each metadata layer of more than one block, its tree
as a blob named in the layer's `fsVerityData` entry (merkleTree), next to the
layer's fs-verity digest (verity). A generator that replaces a layer fixes
both in the manifest with `fix_manifest`, so that the driver checks the
changed layer against its own tree and its parser sees the changed bytes.
"""
import hashlib
import struct

BLOCK = 4096
HASH_LEN = 32


def _hash_block(block):
    return hashlib.sha256(block + bytes(BLOCK - len(block))).digest()


def _blocks(data):
    return (data[i:i + BLOCK] for i in range(0, len(data), BLOCK))


def merkle(data):
    """(tree bytes, root hash) of `data`: tree b"" for at most one block."""
    data = bytes(data)
    if not data:
        return b"", bytes(HASH_LEN)
    level = b"".join(_hash_block(b) for b in _blocks(data))
    levels = []
    while len(level) > HASH_LEN:
        levels.append(level)
        level = b"".join(_hash_block(b) for b in _blocks(level))
    tree = b"".join(lv + bytes(-len(lv) % BLOCK) for lv in reversed(levels))
    return tree, level


def descriptor_digest(size, root):
    """sha256 of the fs-verity descriptor of a blob of `size` bytes."""
    desc = struct.pack("<BBBB4xQ32s", 1, 1, 12, 0, size, root)
    return hashlib.sha256(desc + bytes(256 - len(desc))).digest()


def digest(data):
    """The fs-verity digest (32 raw bytes) of a blob holding `data`."""
    return descriptor_digest(len(data), merkle(data)[1])


def fix_manifest(manifest, old, new, store):
    """The manifest bytes `manifest`, in which metadata layer `old` (bytes) was
    replaced by `new`, with its fsVerityData entry made to fit `new`: the
    fs-verity digest of `old` becomes that of `new`, and if `old` had a tree
    whose name the manifest holds and `new` has one, `new`'s tree is stored
    (store(bytes) -> hex name) and named instead (and the tree blob's own
    fs-verity digest, if recorded, fixed too). Same-length byte replaces: the
    Cap'n Proto layout does not move. The layer's own name (sha256) is the
    caller's to replace."""
    manifest = bytes(manifest)
    old, new = bytes(old), bytes(new)
    if old == new:
        return manifest
    old_tree, old_root = merkle(old)
    new_tree, new_root = merkle(new)
    od, nd = descriptor_digest(len(old), old_root), descriptor_digest(len(new), new_root)
    if od in manifest:
        manifest = manifest.replace(od, nd)
    otd = hashlib.sha256(old_tree).digest()
    if not old_tree or otd not in manifest:
        return manifest
    if not new_tree:
        # The new layer fits in one block and has no tree: the old tree's name
        # stays. Its size and root do not fit the new layer's recorded
        # digest, so the driver reads the layer whole and checks its sha256
        # instead, as for an image without trees: what the case needs.
        return manifest
    ntd = bytes.fromhex(store(new_tree))
    manifest = manifest.replace(otd, ntd)
    ov = digest(old_tree)
    if ov in manifest:
        manifest = manifest.replace(ov, digest(new_tree))
    return manifest


def self_test():
    """Trees and digests of random blobs against `fsverity digest`."""
    import os
    import subprocess
    import tempfile
    sizes = [0, 1, 4095, 4096, 4097, 8192, 128 * BLOCK, 128 * BLOCK + 1, (1 << 20) + 1, 128 * 128 * BLOCK + 1]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        f, t = os.path.join(tmp, "blob"), os.path.join(tmp, "tree")
        for n in sizes:
            data = os.urandom(n)
            with open(f, "wb") as out:
                out.write(data)
            if os.path.exists(t):
                os.unlink(t)
            res = subprocess.run(["fsverity", "digest", "--hash-alg=sha256", "--block-size=4096",
                                  "--out-merkle-tree=" + t, f], check=True, capture_output=True, text=True)
            want = res.stdout.split()[0]
            assert want.startswith("sha256:"), res.stdout
            want_tree = b""
            if os.path.exists(t):
                with open(t, "rb") as inp:
                    want_tree = inp.read()
            tree, root = merkle(data)
            got = descriptor_digest(n, root).hex()
            ok = got == want[7:] and tree == want_tree
            bad += not ok
            print("%s %10d bytes: tree %d bytes, digest %s" % ("ok  " if ok else "FAIL", n, len(tree), got))
            if not ok:
                print("     fsverity: tree %d bytes, digest %s" % (len(want_tree), want[7:]))
    return bad


if __name__ == "__main__":
    import sys
    if sys.argv[1:] != ["--self-test"]:
        sys.exit(__doc__)
    sys.exit(1 if self_test() else 0)
