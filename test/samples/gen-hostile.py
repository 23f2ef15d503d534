#!/usr/bin/env python3
"""Hostile PuzzleFS images, each made from a valid one by one targeted change.

    gen-hostile.py <puzzlefs> <helper> <out>

Builds <out>/src (a small tree) into <out>/base/{plain,zstd} with the builder
under test, then writes one OCI directory per case, <out>/cases/<name>/
(blobs hard-linked from the base, changed blobs written anew), and the case
table <out>/cases.txt, one tab-separated line per case:

    <name> <oci dir, relative to <out>> <manifest digest> <expectation> <what it is>

Expectations (checked by overlay/usr/libexec/puzzlefs-test/hostile, in the guest):

    mount=E1|E2        mount is refused; mount prints one of the errno texts,
                       and dmesg gains a line naming puzzlefs
    read=P=E1|E2       mount succeeds; reading all of P fails with one of the texts
    walk=P=E1|E2       mount is refused with one of the texts, or it succeeds and
                       the full walk of the tree (pzt-helper manifest: lstat,
                       readdir, read, readlink, listxattr of everything) reports
                       an error with one of the texts on P
    enoent=P           mount succeeds; stat P says "No such file or directory"
    data=P=SHA         mount succeeds; P reads completely and has sha256 SHA
    names=D=N1,N2..    mount succeeds; readdir of D returns "." and ".." once each
                       and otherwise only names of the list, each at most once (the
                       changed entry is hidden), or readdir fails with EUCLEAN/EIO
    listed=D=N1,N2..   mount succeeds; readdir of D succeeds and returns exactly
                       ".", ".." and the names of the list (an entry whose name
                       cannot be listed is skipped, the others stay listable)
    xattrs=P=K=HEX,..  mount succeeds; listxattr and getxattr of P succeed and give
                       exactly these keys and values (`pzt-helper xattrs` format: a
                       damaged xattr is skipped, the others stay readable)
    nlink=P=N          mount succeeds; stat -c %h P gives N (the link count), and
                       the full walk finishes
    counted=P=N        as nlink, and dmesg says the manifest's link-count table
                       was not used (the driver counted the names)
    survive            mount may fail or succeed; if it succeeds the full walk
                       finishes (within the case's time limit)

Every case also requires that the walk terminates, the module unloads at the
end, and the console shows no oops/BUG/WARNING/KASAN/panic. The expectations
come from the issues (4, 5, 6, 16): a refused mount fails with a specific errno and
a message in dmesg; a bad chunk or a missing blob turns into EIO for that read;
a whiteout answers "no such file"; corrupt metadata is EUCLEAN ("Structure
needs cleaning") or EIO; cycles and bad names must not reach user space.
Issue 16 bounds: a metadata blob listed twice is EUCLEAN; metadata blobs over
256 MiB in total are EFBIG, refused from their sizes before any byte is read
(so the case costs no time or memory); no symbolic link is followed below
oci_root_dir (a blob, or the blobs directory, that is one is ELOOP, even when
it points to the right bytes).
"""
import hashlib
import os
import shutil
import struct
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in test/samples
import pzverity  # noqa: E402 (next to this script: sys.path[0])

PUZZLEFS, HELPER, OUT = sys.argv[1:4]
EUCLEAN = "Structure needs cleaning"
EIO = "Input/output error"
ENOENT = "No such file or directory"
ELOOP = "Too many levels of symbolic links"
CORRUPT = EUCLEAN + "|" + EIO

# ---------------------------------------------------------------- the tree
src = os.path.join(OUT, "src")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(os.path.join(src, "dir", "sub"))


def write(path, data):
    with open(os.path.join(src, path), "wb") as f:
        f.write(data)


write("file-small", b"small file\n" * 9)
write("file-multi", subprocess.run([HELPER, "gen", "5", "600000", "0"], check=True,
                                   capture_output=True).stdout)
write("file-text", b"".join(b"line %d of a compressible file\n" % i for i in range(20000)))
write("dir/aa", b"aa\n")
write("dir/ab", b"ab\n")
write("dir/x", b"x\n")
write("dir/xx", b"xx\n")
write("dir/sub/leaf", b"leaf\n")
os.symlink("file-small", os.path.join(src, "link"))
os.mknod(os.path.join(src, "chr"), 0o20644, os.makedev(1, 3))
os.setxattr(os.path.join(src, "file-small"), "user.k", b"value")
os.setxattr(os.path.join(src, "file-small"), "user.ok", b"kept")
# Two files of two names each (the manifest's link-count table, m-links-*).
os.makedirs(os.path.join(src, "links"))
write("links/one", b"one\n")
write("links/two", b"two\n")
os.link(os.path.join(src, "links/one"), os.path.join(src, "links/one-b"))
os.link(os.path.join(src, "links/two"), os.path.join(src, "links/two-b"))
base = os.path.join(OUT, "base")
for tag, opts in (("plain", []), ("zstd", ["-c"])):
    subprocess.run([PUZZLEFS, "-q", "build"] + opts + [src, os.path.join(base, tag), tag],
                   check=True, stdout=subprocess.DEVNULL)


def digest_of(oci, tag):
    import json
    with open(os.path.join(oci, "index.json")) as f:
        idx = json.load(f)
    for m in idx["manifests"]:
        if m["annotations"]["org.opencontainers.image.ref.name"] == tag:
            return m["digest"].split(":")[1]
    raise SystemExit("no tag " + tag)


# ---------------------------------------------------------------- Cap'n Proto
class Msg:
    """A single-segment Cap'n Proto message, mutable; positions are byte
    offsets into the whole blob."""

    def __init__(self, data):
        self.b = bytearray(data)
        (n,) = struct.unpack_from("<I", self.b, 0)
        assert n == 0, "multi-segment message"
        self.seg = 8

    def u(self, fmt, pos):
        return struct.unpack_from(fmt, self.b, pos)[0]

    def put(self, fmt, pos, v):
        struct.pack_into(fmt, self.b, pos, v)

    def ptr(self, pos):
        """Decode the pointer at pos: ('s', target, dwords, pcount) or
        ('l', target, esize, count, [tag: dwords, pcount])."""
        w = self.u("<Q", pos)
        kind = w & 3
        off = (w & 0xFFFFFFFF) >> 2
        if off & (1 << 29):
            off -= 1 << 30
        target = pos + 8 + 8 * off
        if kind == 0:
            return ("s", target, (w >> 32) & 0xFFFF, w >> 48)
        assert kind == 1, "far or other pointer at %d" % pos
        esize = (w >> 32) & 7
        count = w >> 35
        if esize == 7:
            tag = self.u("<Q", target)
            n = (tag & 0xFFFFFFFF) >> 2
            return ("l", target + 8, 7, n, (tag >> 32) & 0xFFFF, tag >> 48)
        return ("l", target, esize, count)


class S:
    """A struct in a message: data section and pointer section."""

    def __init__(self, m, pos, dwords, pcount):
        self.m, self.pos, self.dw, self.pc = m, pos, dwords, pcount

    def pptr(self, i):
        return self.pos + 8 * self.dw + 8 * i

    def child(self, i):
        k = self.m.ptr(self.pptr(i))
        assert k[0] == "s"
        return S(self.m, k[1], k[2], k[3])

    def items(self, i):
        k = self.m.ptr(self.pptr(i))
        assert k[0] == "l" and k[2] == 7, k
        _, start, _, n, dw, pc = k
        return [S(self.m, start + 8 * (dw + pc) * j, dw, pc) for j in range(n)]

    def data(self, i):
        k = self.m.ptr(self.pptr(i))
        assert k[0] == "l" and k[2] == 2, k
        return k[1], k[3]  # position, length


def root(m):
    k = m.ptr(m.seg)
    return S(m, k[1], k[2], k[3])


KIND = {0: "unknown", 1: "fifo", 2: "chr", 3: "dir", 4: "blk", 5: "file", 6: "lnk", 7: "sock", 8: "wht"}


class Layer:
    def __init__(self, data):
        self.m = Msg(data)
        self.inodes = root(self.m).items(0)

    def ino(self, s):
        return self.m.u("<Q", s.pos)

    def kind(self, s):
        return self.m.u("<H", s.pos + 8)

    def by_ino(self, n):
        return next(s for s in self.inodes if self.ino(s) == n)

    def entries(self, s):
        return s.child(0).items(0)

    def entry_name(self, e):
        p, n = e.data(0)
        return bytes(self.m.b[p:p + n])

    def lookup(self, path):
        s = self.by_ino(1)
        for comp in [c for c in path.split("/") if c]:
            e = next(e for e in self.entries(s) if self.entry_name(e) == comp.encode())
            s = self.by_ino(self.m.u("<Q", e.pos))
        return s

    def entry(self, dirpath, name):
        d = self.lookup(dirpath)
        return next(e for e in self.entries(d) if self.entry_name(e) == name.encode())

    def chunks(self, s):
        return s.child(0).items(0)


# ---------------------------------------------------------------- cases
cases_dir = os.path.join(OUT, "cases")
os.makedirs(cases_dir)
table = []
seen = set()


class Case:
    """A copy of a base image (blobs hard-linked) to change."""

    def __init__(self, name, flavour="plain"):
        assert name not in seen, name
        seen.add(name)
        self.name = name
        self.src = os.path.join(base, flavour)
        self.oci = os.path.join(cases_dir, name)
        self.blobs = os.path.join(self.oci, "blobs", "sha256")
        os.makedirs(self.blobs)
        for f in ("oci-layout", "index.json"):
            shutil.copy(os.path.join(self.src, f), self.oci)
        sb = os.path.join(self.src, "blobs", "sha256")
        for b in os.listdir(sb):
            os.link(os.path.join(sb, b), os.path.join(self.blobs, b))
        self.mdigest = digest_of(self.src, flavour)
        self.manifest = Msg(self.read(self.mdigest))
        mroot = root(self.manifest)
        self.layer_ref = mroot.items(0)[0]
        p, n = self.layer_ref.data(0)
        self.ldigest = bytes(self.manifest.b[p:p + n]).hex()
        self.lbytes = self.read(self.ldigest)
        self.layer = Layer(self.lbytes)
        self.mroot = mroot

    def path(self, digest):
        return os.path.join(self.blobs, digest)

    def read(self, digest):
        with open(self.path(digest), "rb") as f:
            return f.read()

    def store(self, data, name=None):
        name = name or hashlib.sha256(data).hexdigest()
        p = self.path(name)
        if os.path.lexists(p):
            os.unlink(p)
        with open(p, "wb") as f:
            f.write(data)
        return name

    def replace_blob(self, digest, how):
        p = self.path(digest)
        if how == "copy":
            # A symlink to a file with the right bytes (so only the link is wrong).
            os.rename(p, os.path.join(self.oci, "copy-" + digest))
            os.symlink("../../copy-" + digest, p)
            return
        os.unlink(p)
        if how == "dir":
            os.mkdir(p)
        elif how == "dangling":
            os.symlink("does-not-exist", p)
        elif how == "to-dir":
            os.symlink(".", p)
        else:
            raise ValueError(how)

    def manifest_layers(self, digests):
        """A manifest listing `digests` as its metadata layers: a new list
        appended to the segment, each element a copy of the first layer
        reference with its digest pointer aimed at bytes appended after it."""
        m, lr = self.manifest, self.layer_ref
        b = bytearray(m.b)
        n, dw, pc = len(digests), lr.dw, lr.pc
        tag = len(b)
        b += bytes(8 * (1 + n * (dw + pc)))
        struct.pack_into("<Q", b, tag, (n << 2) | (dw << 32) | (pc << 48))
        for j, d in enumerate(digests):
            at = len(b)
            b += d + bytes(-len(d) % 8)
            e = tag + 8 + 8 * (dw + pc) * j
            b[e:e + 8 * dw] = m.b[lr.pos:lr.pos + 8 * dw]
            pp = e + 8 * dw
            off = (at - (pp + 8)) // 8
            struct.pack_into("<Q", b, pp, 1 | ((off & 0x3FFFFFFF) << 2) | (2 << 32) | (len(d) << 35))
        rp = self.mroot.pptr(0)
        off = (tag - (rp + 8)) // 8
        struct.pack_into("<Q", b, rp, 1 | ((off & 0x3FFFFFFF) << 2) | (7 << 32) | ((n * (dw + pc)) << 35))
        struct.pack_into("<I", b, 4, (len(b) - 8) // 8)
        return self.store(bytes(b))

    def store_layer(self, data):
        """Store `data` as the new metadata layer and a manifest naming it
        instead of the old one, with the layer's fs-verity digest and Merkle
        tree fixed (pzverity.fix_manifest), as an attacker would: so the
        driver checks the layer against its own tree and the case reaches the
        parser; returns the manifest digest, the case's image_manifest."""
        new = self.store(data)
        m = bytes(self.manifest.b).replace(bytes.fromhex(self.ldigest), bytes.fromhex(new))
        m = pzverity.fix_manifest(m, self.lbytes, data, self.store)
        return self.store(m)

    def commit_layer(self):
        """Store the changed layer and a manifest naming it (store_layer)."""
        return self.store_layer(bytes(self.layer.m.b))

    def commit_manifest(self, data=None):
        return self.store(bytes(self.manifest.b) if data is None else data)

    def done(self, digest, expect, what):
        assert "\t" not in what
        table.append("\t".join([self.name, "cases/" + self.name, digest, expect, what]))


def chunk_blob(c, s, i):
    """(FileChunk struct, BlobRef struct, digest hex) of chunk i of inode s."""
    ch = c.layer.chunks(s)[i]
    br = ch.child(0)
    p, n = br.data(0)
    return ch, br, bytes(c.layer.m.b[p:p + n]).hex()


def content_from(c, s):
    """The bytes of an uncompressed file as its chunks describe them."""
    out = b""
    for ch in c.layer.chunks(s):
        br = ch.child(0)
        p, n = br.data(0)
        d = bytes(c.layer.m.b[p:p + n]).hex()
        off = c.layer.m.u("<Q", br.pos)
        ln = c.layer.m.u("<Q", ch.pos)
        out += c.read(d)[off:off + ln]
    return out


# --- manifest blob: framing and structure
c = Case("m-empty")
c.done(c.store(b""), "mount=" + EUCLEAN, "manifest blob of 0 bytes")
c = Case("m-trunc-8")
c.done(c.store(bytes(c.manifest.b[:8])), "mount=" + EUCLEAN, "manifest truncated to its segment table")
c = Case("m-trunc-half")
c.done(c.store(bytes(c.manifest.b[:len(c.manifest.b) // 2])), "mount=" + EUCLEAN, "manifest truncated to half")
c = Case("m-trunc-1")
c.done(c.store(bytes(c.manifest.b[:-1])), "mount=" + EUCLEAN, "manifest missing its last byte")
c = Case("m-segcount")
c.manifest.put("<I", 0, 0xFFFFFFFF)
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "segment count 2^32 in the manifest")
c = Case("m-segsize")
c.manifest.put("<I", 4, 0x7FFFFFFF)
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "segment size far past the manifest blob")
c = Case("m-root-oob")
c.manifest.put("<Q", 8, (0x1FFFFFF0 << 2) | (1 << 32) | (3 << 48))
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "manifest root pointer out of bounds")
c = Case("m-root-list")
w = c.manifest.u("<Q", 8)
c.manifest.put("<Q", 8, (w & ~3) | 1)
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "manifest root pointer is a list pointer")
c = Case("m-metadatas-oob")
pp = c.mroot.pptr(0)
w = c.manifest.u("<Q", pp)
c.manifest.put("<Q", pp, (w & 0xFFFFFFFF00000003) | (0x0FFFFFF0 << 2))
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "metadatas list pointer out of bounds")
c = Case("m-metadatas-empty")
pp = c.mroot.pptr(0)
k = c.manifest.ptr(pp)
tagpos = k[1] - 8
t = c.manifest.u("<Q", tagpos)
c.manifest.put("<Q", tagpos, t & 0xFFFFFFFF00000003)
c.done(c.commit_manifest(), "mount=" + EUCLEAN + "|Invalid argument", "metadatas list of 0 layers")
c = Case("m-metadatas-count")
t = c.manifest.u("<Q", tagpos)
c.manifest.put("<Q", tagpos, (t & 0xFFFFFFFF00000003) | (0xFFFFFF << 2))
c.done(c.commit_manifest(), "mount=" + EUCLEAN, "metadatas list claims 2^24 layers")
c = Case("m-version0")
c.manifest.put("<Q", c.mroot.pos, 0)
c.done(c.commit_manifest(), "mount=Invalid argument", "manifestVersion 0")
c = Case("m-version-max")
c.manifest.put("<Q", c.mroot.pos, 2**64 - 1)
c.done(c.commit_manifest(), "mount=Invalid argument", "manifestVersion 2^64-1")
c = Case("m-layer-digest-short")
p, n = c.layer_ref.data(0)
ptrpos = c.layer_ref.pptr(0)
w = c.manifest.u("<Q", ptrpos)
c.manifest.put("<Q", ptrpos, (w & ((1 << 35) - 1)) | (31 << 35))
c.done(c.commit_manifest(), "mount=" + EUCLEAN + "|Invalid argument", "metadata layer digest of 31 bytes")
c = Case("m-layer-digest-long")
c.manifest.put("<Q", ptrpos, (w & ((1 << 35) - 1)) | (64 << 35))
c.done(c.commit_manifest(), "mount=" + EUCLEAN + "|Invalid argument", "metadata layer digest of 64 bytes")
c = Case("m-layer-compressed")
c.manifest.put("<B", c.layer_ref.pos + 8, c.manifest.u("<B", c.layer_ref.pos + 8) | 1)
c.done(c.commit_manifest(), "mount=" + EUCLEAN + "|Invalid argument",
       "metadata layer marked compressed (metadata is never compressed)")
c = Case("manifest-is-dir")
d = c.mdigest
c.replace_blob(d, "dir")
c.done(d, "mount=Is a directory|" + EUCLEAN + "|Invalid argument", "the manifest blob is a directory")
c = Case("manifest-is-symlink")
d = c.mdigest
c.replace_blob(d, "dangling")
c.done(d, "mount=" + ENOENT + "|" + ELOOP, "the manifest blob is a dangling symlink")
c = Case("layer-is-dir")
c.replace_blob(c.ldigest, "dir")
c.done(c.mdigest, "mount=Is a directory|" + EUCLEAN + "|Invalid argument", "the metadata blob is a directory")
c = Case("layer-is-symlink")
c.replace_blob(c.ldigest, "dangling")
c.done(c.mdigest, "mount=" + ENOENT + "|" + ELOOP, "the metadata blob is a dangling symlink")
# Issue 16: no symbolic link below oci_root_dir is followed, even to the right bytes.
c = Case("layer-symlink-to-copy")
c.replace_blob(c.ldigest, "copy")
c.done(c.mdigest, "mount=" + ELOOP, "the metadata blob is a symlink to a file with its bytes")
c = Case("manifest-symlink-to-copy")
c.replace_blob(c.mdigest, "copy")
c.done(c.mdigest, "mount=" + ELOOP, "the manifest blob is a symlink to a file with its bytes")
c = Case("layer-symlink-to-dir")
c.replace_blob(c.ldigest, "to-dir")
c.done(c.mdigest, "mount=" + ELOOP, "the metadata blob is a symlink to a directory")
c = Case("layer-blobs-dir-symlink")
os.rename(os.path.join(c.oci, "blobs"), os.path.join(c.oci, "real-blobs"))
os.symlink("real-blobs", os.path.join(c.oci, "blobs"))
c.done(c.mdigest, "mount=" + ELOOP, "the blobs directory is a symlink (to the right blobs)")
# Issue 16: bounds on the metadata of one mount, whatever the number of layers.
c = Case("layer-listed-256")
c.done(c.manifest_layers([bytes.fromhex(c.ldigest)] * 256), "mount=" + EUCLEAN,
       "one metadata blob listed as all 256 layers (256 x its size)")
# The layer-count bound at its edge: 256 distinct layers mount (each a copy of
# the layer with the root's uid changed, the unchanged one on top); a 257th is
# refused from the count, before any blob is opened (the 256 names it adds
# exist nowhere: opening one would be ENOENT).
c = Case("layer-count-256")
names = [bytes.fromhex(c.ldigest)]
for j in range(1, 256):
    m = bytearray(c.layer.m.b)
    struct.pack_into("<I", m, c.layer.by_ino(1).pos + 12, j)
    names.append(bytes.fromhex(c.store(bytes(m))))
fm = c.layer.lookup("file-multi")
c.done(c.manifest_layers(names), "data=file-multi=" + hashlib.sha256(content_from(c, fm)).hexdigest(),
       "256 distinct metadata layers, the most a mount accepts")
c = Case("layer-count-257")
names = [bytes.fromhex(c.ldigest)]
names += [hashlib.sha256(b"layer-count-257 %d" % j).digest() for j in range(256)]
c.done(c.manifest_layers(names), "mount=" + EUCLEAN,
       "257 metadata layers, one more than a mount accepts, refused before any is opened")
c = Case("layer-listed-twice")
c.done(c.manifest_layers([bytes.fromhex(c.ldigest)] * 2), "mount=" + EUCLEAN,
       "one metadata blob listed as two layers")
c = Case("layer-total-over-cap")
# 180 names of one 1.5 MiB file (hard links: 1.5 MiB in the initramfs): 270 MiB in
# total, over the 256 MiB bound; refused from the sizes before any is read.
big = c.store(bytes(3 << 19), name="0" * 64)
names = []
for j in range(180):
    d = hashlib.sha256(b"layer-total-over-cap %d" % j).hexdigest()
    os.link(c.path(big), c.path(d))
    names.append(bytes.fromhex(d))
os.unlink(c.path(big))
c.done(c.manifest_layers(names), "mount=File too large",
       "180 metadata blobs of 1.5 MiB (270 MiB, over the 256 MiB total)")
c = Case("layer-total-under-cap")
# The same blob under 100 names (150 MiB, under the bound): every blob is sized,
# then the first is read and hashed, and fails its digest.
big = c.store(bytes(3 << 19), name="0" * 64)
names = []
for j in range(100):
    d = hashlib.sha256(b"layer-total-under-cap %d" % j).hexdigest()
    os.link(c.path(big), c.path(d))
    names.append(bytes.fromhex(d))
os.unlink(c.path(big))
c.done(c.manifest_layers(names), "mount=Bad message",
       "100 metadata blobs of 1.5 MiB under the total bound: read, then refused by digest")

# --- metadata layer: framing and structure
for name, mut, what in (
    ("l-empty", lambda b: b"", "metadata layer of 0 bytes"),
    ("l-trunc-half", lambda b: b[:len(b) // 2], "metadata layer truncated to half"),
    ("l-trunc-16", lambda b: b[:16], "metadata layer truncated to 16 bytes"),
):
    c = Case(name)
    c.done(c.store_layer(mut(bytes(c.layer.m.b))), "mount=" + EUCLEAN, what)
c = Case("l-segsize")
c.layer.m.put("<I", 4, 0x7FFFFFFF)
c.done(c.commit_layer(), "mount=" + EUCLEAN, "layer segment size far past the blob")
c = Case("l-root-oob")
c.layer.m.put("<Q", 8, (0x1FFFFFF0 << 2) | (0 << 32) | (1 << 48))
c.done(c.commit_layer(), "mount=" + EUCLEAN, "layer root pointer out of bounds")
c = Case("l-inodes-oob")
r = root(c.layer.m)
w = c.layer.m.u("<Q", r.pptr(0))
c.layer.m.put("<Q", r.pptr(0), (w & 0xFFFFFFFF00000003) | (0x0FFFFFF0 << 2))
c.done(c.commit_layer(), "mount=" + EUCLEAN, "inodes list pointer out of bounds")
c = Case("l-inodes-count")
r = root(c.layer.m)
k = c.layer.m.ptr(r.pptr(0))
t = c.layer.m.u("<Q", k[1] - 8)
c.layer.m.put("<Q", k[1] - 8, (t & 0xFFFFFFFF00000003) | (0xFFFFFFF << 2))
c.done(c.commit_layer(), "mount=" + EUCLEAN, "inodes list claims 2^28 inodes (past the blob)")
c = Case("l-no-root")
c.layer.m.put("<Q", c.layer.by_ino(1).pos, 0x7FFFFFFF)
c.done(c.commit_layer(), "mount=" + EUCLEAN + "|" + ENOENT, "no inode 1 (the root) in the layer")
c = Case("l-root-is-file")
c.layer.m.put("<H", c.layer.by_ino(1).pos + 8, 5)
c.done(c.commit_layer(), "mount=" + EUCLEAN + "|Not a directory", "inode 1 is a regular file")
c = Case("l-root-is-wht")
c.layer.m.put("<H", c.layer.by_ino(1).pos + 8, 8)
c.done(c.commit_layer(), "mount=" + EUCLEAN + "|" + ENOENT, "inode 1 is a whiteout")

# --- inode table order
c = Case("l-inodes-swapped")
a, b = c.layer.inodes[2], c.layer.inodes[3]
ia, ib = c.layer.ino(a), c.layer.ino(b)
c.layer.m.put("<Q", a.pos, ib)
c.layer.m.put("<Q", b.pos, ia)
c.done(c.commit_layer(), "survive", "two inodes out of order (ino fields swapped)")
c = Case("l-inodes-reversed")
inos = [c.layer.ino(s) for s in c.layer.inodes]
for s, n in zip(c.layer.inodes, reversed(inos)):
    c.layer.m.put("<Q", s.pos, n)
c.done(c.commit_layer(), "survive", "inode numbers in descending order")
c = Case("l-ino-dup")
c.layer.m.put("<Q", c.layer.inodes[3].pos, c.layer.ino(c.layer.inodes[2]))
c.done(c.commit_layer(), "survive", "two inodes with the same number")

# --- directory graph
c = Case("d-self")
dino = c.layer.ino(c.layer.lookup("dir"))
c.layer.m.put("<Q", c.layer.entry("dir", "x").pos, dino)
c.done(c.commit_layer(), "walk=dir/x=" + ELOOP + "|" + CORRUPT, "dir/x is dir itself")
c = Case("d-to-root")
c.layer.m.put("<Q", c.layer.entry("dir/sub", "leaf").pos, 1)
c.done(c.commit_layer(), "walk=dir/sub/leaf=" + ELOOP + "|" + CORRUPT, "dir/sub/leaf is the root (a cycle)")
c = Case("d-cycle-2")
sub = c.layer.ino(c.layer.lookup("dir/sub"))
c.layer.m.put("<Q", c.layer.entry("dir/sub", "leaf").pos, dino)
c.done(c.commit_layer(), "walk=dir/sub/leaf=" + ELOOP + "|" + CORRUPT, "dir/sub/leaf is dir (a cycle of two)")
c = Case("d-root-self")
c.layer.m.put("<Q", c.layer.entry("", "dir").pos, 1)
c.done(c.commit_layer(), "walk=dir=" + ELOOP + "|" + CORRUPT, "/dir is the root itself")
c = Case("d-dangling-ino")
c.layer.m.put("<Q", c.layer.entry("dir", "aa").pos, 999999)
c.done(c.commit_layer(), "walk=dir/aa=" + CORRUPT, "dir/aa names an ino no layer has")
c = Case("d-ino-zero")
c.layer.m.put("<Q", c.layer.entry("dir", "aa").pos, 0)
c.done(c.commit_layer(), "listed=dir=ab,sub,x,xx",
       "dir/aa names ino 0 (hidden: any stand-in number could be a real inode)")
c = Case("d-entries-count")
dd = c.layer.lookup("dir").child(0)
k = c.layer.m.ptr(dd.pptr(0))
t = c.layer.m.u("<Q", k[1] - 8)
c.layer.m.put("<Q", k[1] - 8, (t & 0xFFFFFFFF00000003) | (0xFFFFFFF << 2))
c.done(c.commit_layer(), "walk=dir=" + CORRUPT, "dir's entry list claims 2^28 entries")
c = Case("d-entries-bytes")
w = c.layer.m.u("<Q", dd.pptr(0))
c.layer.m.put("<Q", dd.pptr(0), (w & ~(7 << 32)) | (2 << 32))
c.done(c.commit_layer(), "walk=dir=" + CORRUPT, "dir's entry list is a byte list")
c = Case("d-payload-null")
c.layer.m.put("<Q", c.layer.lookup("dir").pptr(0), 0)
# A null pointer reads as the default value (Cap'n Proto): an empty directory.
c.done(c.commit_layer(), "names=dir=", "dir's Dir struct is a null pointer (reads as empty)")

# --- names


def rename(c, dirpath, old, new):
    e = c.layer.entry(dirpath, old)
    p, n = e.data(0)
    assert len(new) == n
    c.layer.m.b[p:p + n] = new


c = Case("n-dup")
rename(c, "dir", "ab", b"aa")
c.done(c.commit_layer(), "survive", "two entries named aa in dir")
c = Case("n-slash")
rename(c, "dir", "ab", b"a/")
c.done(c.commit_layer(), "listed=dir=aa,sub,x,xx", "an entry named 'a/'")
c = Case("n-slash-mid")
rename(c, "dir", "xx", b"x/")
c.done(c.commit_layer(), "listed=dir=aa,ab,sub,x", "an entry named 'x/' next to 'x'")
c = Case("n-dot")
rename(c, "dir", "x", b".")
c.done(c.commit_layer(), "listed=dir=aa,ab,sub,xx", "an entry named '.'")
c = Case("n-dotdot")
rename(c, "dir", "xx", b"..")
c.done(c.commit_layer(), "listed=dir=aa,ab,sub,x", "an entry named '..'")
c = Case("n-nul")
rename(c, "dir", "ab", b"a\0")
c.done(c.commit_layer(), "listed=dir=aa,sub,x,xx", "an entry name with a NUL byte ('a\\0')")
c = Case("n-empty")
e = c.layer.entry("dir", "ab")
w = c.layer.m.u("<Q", e.pptr(0))
c.layer.m.put("<Q", e.pptr(0), w & ((1 << 35) - 1))
c.done(c.commit_layer(), "listed=dir=aa,sub,x,xx", "an entry with an empty name")
c = Case("n-long")
e = c.layer.entry("dir", "aa")
w = c.layer.m.u("<Q", e.pptr(0))
c.layer.m.put("<Q", e.pptr(0), (w & ((1 << 35) - 1)) | (300 << 35))
c.done(c.commit_layer(), "listed=dir=ab,sub,x,xx", "an entry name of 300 bytes (inside the blob)")
c = Case("n-oob")
c.layer.m.put("<Q", e.pptr(0), (w & ((1 << 35) - 1)) | ((1 << 28) << 35))
c.done(c.commit_layer(), "walk=dir=" + CORRUPT, "an entry name running past the blob end")

# --- files and chunks
c = Case("c-len-past-blob")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 0)
c.layer.m.put("<Q", ch.pos, c.layer.m.u("<Q", ch.pos) + os.path.getsize(c.path(d)))
c.done(c.commit_layer(), "read=file-multi=" + EIO, "a chunk length past its blob's end")
c = Case("c-offset-past-blob")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 1)
c.layer.m.put("<Q", br.pos, os.path.getsize(c.path(d)) + 10)
c.done(c.commit_layer(), "read=file-multi=" + EIO, "a chunk offset past its blob's end")
c = Case("c-offset-overflow")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 1)
c.layer.m.put("<Q", br.pos, 2**64 - 8)
c.done(c.commit_layer(), "read=file-multi=" + EIO, "a chunk offset of 2^64-8 (offset+len overflows)")
c = Case("c-len-overflow")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 0)
c.layer.m.put("<Q", ch.pos, 2**64 - 16)
c.done(c.commit_layer(), "walk=file-multi=" + CORRUPT + "|File too large|Value too large for defined data type",
       "a chunk length of 2^64-16 (the file size overflows)")
c = Case("c-missing-blob")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
os.unlink(c.path(d))
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob is missing")
c = Case("c-digest-mismatch")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 1)
blob = bytearray(c.read(d))
for i in range(0, len(blob), 4096):
    blob[i] ^= 0xFF
c.store(bytes(blob), name=d)
c.done(c.mdigest, "data=file-multi=" + hashlib.sha256(content_from(c, fm)).hexdigest(),
       "a chunk whose bytes do not match its digest (read as stored)")
c = Case("c-blob-large")
# Valid: chunk 1 of file-multi moved 5 MiB into a larger blob, past the size the
# driver reads whole (4 MiB), so that its pieces are read piece by piece.
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 1)
pad = 5 << 20
big = c.store(b"\xa5" * pad + c.read(d) + b"\x5a" * 4096)
p, n = br.data(0)
c.layer.m.b[p:p + n] = bytes.fromhex(big)
c.layer.m.put("<Q", br.pos, c.layer.m.u("<Q", br.pos) + pad)
c.done(c.commit_layer(), "data=file-multi=" + hashlib.sha256(content_from(c, fm)).hexdigest(),
       "a chunk 5 MiB into an uncompressed blob of over 4 MiB (read piece by piece)")
c = Case("c-blob-is-dir")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
c.replace_blob(d, "dir")
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob is a directory")
c = Case("c-blob-is-symlink")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
c.replace_blob(d, "dangling")
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob is a dangling symlink")
c = Case("c-blob-is-fifo")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
os.unlink(c.path(d))
os.mkfifo(c.path(d))
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob is a fifo (opening it must not block)")
c = Case("c-blob-is-chr")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
os.unlink(c.path(d))
os.mknod(c.path(d), 0o20644, os.makedev(1, 3))
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob is a character device (never opened)")
c = Case("manifest-is-fifo")
d = c.mdigest
os.unlink(c.path(d))
os.mkfifo(c.path(d))
c.done(d, "mount=Invalid argument", "the manifest blob is a fifo (opening it must not block)")
c = Case("c-blob-short")
ch, br, d = chunk_blob(c, c.layer.lookup("file-multi"), 1)
c.store(c.read(d)[:100], name=d)
c.done(c.mdigest, "read=file-multi=" + EIO, "a chunk blob shorter than its chunks need")
c = Case("c-digest-short")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 0)
w = c.layer.m.u("<Q", br.pptr(0))
c.layer.m.put("<Q", br.pptr(0), (w & ((1 << 35) - 1)) | (20 << 35))
c.done(c.commit_layer(), "walk=file-multi=" + CORRUPT, "a chunk digest of 20 bytes")
c = Case("c-chunks-oob")
fm = c.layer.lookup("file-multi")
fs = fm.child(0)
w = c.layer.m.u("<Q", fs.pptr(0))
c.layer.m.put("<Q", fs.pptr(0), (w & 0xFFFFFFFF00000003) | (0x0FFFFFF0 << 2))
c.done(c.commit_layer(), "walk=file-multi=" + CORRUPT, "the chunk list pointer out of bounds")
c = Case("c-raw-flagged")
fm = c.layer.lookup("file-multi")
ch, br, d = chunk_blob(c, fm, 0)
c.layer.m.put("<B", br.pos + 8, c.layer.m.u("<B", br.pos + 8) | 1)
c.done(c.commit_layer(), "read=file-multi=" + EIO, "compressed flag on a raw chunk")
# zstd image
c = Case("z-frame-trunc", "zstd")
fm = c.layer.lookup("file-text")
zs = [i for i in range(len(c.layer.chunks(fm))) if c.layer.m.u("<B", chunk_blob(c, fm, i)[1].pos + 8) & 1]
assert zs, "no compressed chunk in the zstd image"
ch, br, d = chunk_blob(c, fm, zs[0])
c.store(c.read(d)[:len(c.read(d)) // 2], name=d)
c.done(c.mdigest, "read=file-text=" + EIO, "a zstd frame cut in half")
c = Case("z-frame-magic", "zstd")
ch, br, d = chunk_blob(c, c.layer.lookup("file-text"), zs[0])
blob = bytearray(c.read(d))
blob[0:4] = b"\x00\x00\x00\x00"
c.store(bytes(blob), name=d)
c.done(c.mdigest, "read=file-text=" + EIO, "a zstd frame with a broken magic number")
c = Case("z-frame-garbage", "zstd")
ch, br, d = chunk_blob(c, c.layer.lookup("file-text"), zs[0])
blob = bytearray(c.read(d))
blob[4:] = hashlib.sha256(b"x").digest() * (len(blob[4:]) // 32) + b"\0" * (len(blob[4:]) % 32)
c.store(bytes(blob), name=d)
c.done(c.mdigest, "read=file-text=" + EIO, "a zstd frame: valid magic, garbage header and blocks")

# --- other inode kinds and fields
c = Case("i-kind-unknown")
c.layer.m.put("<H", c.layer.lookup("file-small").pos + 8, 0)
c.done(c.commit_layer(), "walk=file-small=" + CORRUPT, "an inode of kind unknown")
c = Case("i-kind-200")
c.layer.m.put("<H", c.layer.lookup("file-small").pos + 8, 200)
c.done(c.commit_layer(), "walk=file-small=" + CORRUPT, "an inode kind not in the schema (200)")
c = Case("i-file-as-dir")
c.layer.m.put("<H", c.layer.lookup("file-small").pos + 8, 3)
c.done(c.commit_layer(), "walk=file-small=" + CORRUPT, "a file's chunk list read as a directory")
c = Case("i-wht")
c.layer.m.put("<H", c.layer.lookup("file-small").pos + 8, 8)
c.done(c.commit_layer(), "enoent=file-small", "a whiteout in the only layer answers no such file")
c = Case("i-chr-huge")
cs = c.layer.lookup("chr").child(0)
c.layer.m.put("<Q", cs.pos, 2**40)
c.done(c.commit_layer(), "walk=chr=" + CORRUPT + "|Value too large for defined data type",
       "a char device with major 2^40")
c = Case("i-symlink-oob")
ad = c.layer.lookup("link").child(1)
w = c.layer.m.u("<Q", ad.pptr(1))
c.layer.m.put("<Q", ad.pptr(1), (w & ((1 << 35) - 1)) | ((1 << 28) << 35))
c.done(c.commit_layer(), "walk=link=" + CORRUPT, "a symlink target running past the blob end")
c = Case("i-symlink-empty")
c.layer.m.put("<Q", ad.pptr(1), w & ((1 << 35) - 1))
c.done(c.commit_layer(), "walk=link=" + CORRUPT, "a symlink with an empty target")
c = Case("i-symlink-none")
ad = c.layer.lookup("link").child(1)
c.layer.m.put("<Q", ad.pptr(1), 0)
c.done(c.commit_layer(), "walk=link=" + CORRUPT, "a symlink without a target")
c = Case("i-xattr-oob")
ad = c.layer.lookup("file-small").child(1)


def xattr_key(x):
    p, n = x.data(0)
    return bytes(c.layer.m.b[p:p + n])


x = next(x for x in ad.items(0) if xattr_key(x) == b"user.k")
w = c.layer.m.u("<Q", x.pptr(1))
c.layer.m.put("<Q", x.pptr(1), (w & ((1 << 35) - 1)) | ((1 << 28) << 35))
c.done(c.commit_layer(), "xattrs=file-small=user.ok=" + b"kept".hex(),
       "an xattr value running past the blob end (skipped; the other xattr stays)")
c = Case("i-xattr-key-nul")
ad = c.layer.lookup("file-small").child(1)
x = next(x for x in ad.items(0) if xattr_key(x) == b"user.k")
p, n = x.data(0)
c.layer.m.b[p + 2] = 0
c.done(c.commit_layer(), "xattrs=file-small=user.ok=" + b"kept".hex(),
       "an xattr key with a NUL byte (skipped; the other xattr stays)")
c = Case("i-xattrs-count")
k = c.layer.m.ptr(ad.pptr(0))
t = c.layer.m.u("<Q", k[1] - 8)
c.layer.m.put("<Q", k[1] - 8, (t & 0xFFFFFFFF00000003) | (0xFFFFFFF << 2))
c.done(c.commit_layer(), "walk=file-small=" + CORRUPT, "an xattr list claiming 2^28 entries")


# --- the manifest's link-count table (Rootfs.linkCounts, pointer 2): the
# builder records links/one and links/two with count 2. A table that breaks
# its rules (counts of 2 or more, sorted by inode number, a list of structs)
# is not used: the driver counts the names (2 each) and logs it. A table that
# keeps them is trusted as the manifest is, even when it is wrong.
def link_table(c):
    t = c.mroot.items(2)
    assert len(t) == 2, "links/one and links/two"
    return t


for name, count, what in (("m-links-count-1", 1, "a count of 1"),
                          ("m-links-count-0", 0, "a count of 0")):
    c = Case(name)
    c.manifest.put("<I", link_table(c)[0].pos + 8, count)
    c.done(c.commit_manifest(), "counted=links/one=2", "link-count table with " + what + " (names counted)")
c = Case("m-links-unsorted")
a, b = link_table(c)
ia, ib = c.manifest.u("<Q", a.pos), c.manifest.u("<Q", b.pos)
c.manifest.put("<Q", a.pos, ib)
c.manifest.put("<Q", b.pos, ia)
for e in (a, b):
    c.manifest.put("<I", e.pos + 8, 5)
c.done(c.commit_manifest(), "counted=links/one=2",
       "link-count table not sorted by inode, counts 5 (names counted)")
c = Case("m-links-dup")
a, b = link_table(c)
c.manifest.put("<Q", b.pos, c.manifest.u("<Q", a.pos))
for e in (a, b):
    c.manifest.put("<I", e.pos + 8, 5)
c.done(c.commit_manifest(), "counted=links/one=2",
       "link-count table naming one inode twice, counts 5 (names counted)")
c = Case("m-links-oob")
pp = c.mroot.pptr(2)
w = c.manifest.u("<Q", pp)
c.manifest.put("<Q", pp, (w & 0xFFFFFFFF00000003) | (0x0FFFFFF0 << 2))
c.done(c.commit_manifest(), "counted=links/one=2", "link-count list pointer out of bounds (names counted)")
c = Case("m-links-struct")
w = c.manifest.u("<Q", pp)
c.manifest.put("<Q", pp, w & ~3)
c.done(c.commit_manifest(), "counted=links/two=2", "link-count pointer is a struct pointer (names counted)")
c = Case("m-links-trusted")
c.manifest.put("<I", link_table(c)[1].pos + 8, 7)
c.done(c.commit_manifest(), "nlink=links/two-b=7", "a well-formed link-count table that is wrong: trusted")
c = Case("m-links-900k")
# A table as large as the manifest may be (16 MiB): 900,000 entries, the
# first two the real ones (links/one with 3), the others past the image's
# inodes; appended to the segment, the old table left unreferenced.
real = [(c.manifest.u("<Q", e.pos), 3 if k == 0 else 2) for k, e in enumerate(link_table(c))]
n = 900000
b = bytearray(c.manifest.b)
tag = len(b)
b += struct.pack("<Q", (n << 2) | (2 << 32))
b += b"".join(struct.pack("<QQ", ino, cnt) for ino, cnt in real)
b += b"".join(struct.pack("<QQ", 1 << 40 | k, 2) for k in range(n - len(real)))
rp = c.mroot.pptr(2)
off = (tag - (rp + 8)) // 8
struct.pack_into("<Q", b, rp, 1 | ((off & 0x3FFFFFFF) << 2) | (7 << 32) | ((n * 2) << 35))
struct.pack_into("<I", b, 4, (len(b) - 8) // 8)
assert len(b) < 16 << 20
c.done(c.store(bytes(b)), "nlink=links/one=3", "a link-count table of 900,000 entries (used)")
c = Case("m-links-huge")
c.manifest.put("<I", link_table(c)[0].pos + 8, 0xFFFFFFFF)
c.done(c.commit_manifest(), "nlink=links/one-b=4294967295", "a link count of 2^32 - 1")

with open(os.path.join(OUT, "cases.txt"), "w") as f:
    f.write("\n".join(table) + "\n")
print("gen-hostile: %d cases" % len(table))
