//! Owned inode records (what the builder produces) and their Cap'n Proto
//! encoding. Field order of the encoding follows the other implementation so
//! that the same tree gives byte-identical metadata blobs.

use std::collections::HashMap;

use capnp::message::{Builder, HeapAllocator};
use puzzlefs_format::manifest_capnp::{rootfs, verity_data};
use puzzlefs_format::metadata_capnp::{inode, inode_vector};
use puzzlefs_format::{BlobRef, Digest, Inode, InodeKind, LinkCount};

/// One chunk reference of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileChunk {
    /// Blob, offset in the decompressed blob, compression flag.
    pub blob: BlobRef,
    /// Length in bytes.
    pub len: u64,
}

/// The `mode` union with its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `unknown`.
    Unknown,
    /// Named pipe.
    Fifo,
    /// Character device.
    Chr {
        /// Major.
        major: u64,
        /// Minor.
        minor: u64,
    },
    /// Directory: entries sorted by name.
    Dir {
        /// (name, ino).
        entries: Vec<(Vec<u8>, u64)>,
    },
    /// Block device.
    Blk {
        /// Major.
        major: u64,
        /// Minor.
        minor: u64,
    },
    /// Regular file.
    File {
        /// Chunks in file order.
        chunks: Vec<FileChunk>,
    },
    /// Symlink (target in `InodeRec::symlink`).
    Lnk,
    /// Socket.
    Sock,
    /// Whiteout.
    Wht,
}

/// An owned inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InodeRec {
    /// Inode number.
    pub ino: u64,
    /// Kind and payload.
    pub kind: Kind,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Low 12 mode bits.
    pub permissions: u16,
    /// Extended attributes in the order listed by the source.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Symlink target.
    pub symlink: Option<Vec<u8>>,
}

impl InodeRec {
    /// Copies an inode view into an owned record.
    pub fn from_view(i: &Inode<'_>) -> puzzlefs_format::Result<Self> {
        let kind = match i.kind()? {
            InodeKind::Unknown => Kind::Unknown,
            InodeKind::Fifo => Kind::Fifo,
            InodeKind::Lnk => Kind::Lnk,
            InodeKind::Sock => Kind::Sock,
            InodeKind::Wht => Kind::Wht,
            InodeKind::Chr => {
                let r = i
                    .rdev()?
                    .unwrap_or(puzzlefs_format::Rdev { major: 0, minor: 0 });
                Kind::Chr {
                    major: r.major,
                    minor: r.minor,
                }
            }
            InodeKind::Blk => {
                let r = i
                    .rdev()?
                    .unwrap_or(puzzlefs_format::Rdev { major: 0, minor: 0 });
                Kind::Blk {
                    major: r.major,
                    minor: r.minor,
                }
            }
            InodeKind::Dir => {
                let mut entries = Vec::new();
                for e in i.dir()?.entries() {
                    let e = e?;
                    entries.push((e.name.to_vec(), e.ino));
                }
                Kind::Dir { entries }
            }
            InodeKind::File => {
                let mut chunks = Vec::new();
                for c in i.file()?.chunks() {
                    let c = c?;
                    chunks.push(FileChunk {
                        blob: c.blob,
                        len: c.len,
                    });
                }
                Kind::File { chunks }
            }
        };
        let mut xattrs = Vec::new();
        for x in i.xattrs()? {
            let x = x?;
            xattrs.push((x.key.to_vec(), x.value.to_vec()));
        }
        Ok(InodeRec {
            ino: i.ino(),
            kind,
            uid: i.uid(),
            gid: i.gid(),
            permissions: i.permissions(),
            xattrs,
            symlink: i.symlink_target()?.map(<[u8]>::to_vec),
        })
    }

    fn words(&self) -> usize {
        let bytes = |b: &[u8]| b.len().div_ceil(8) + 1;
        let mut w = 8;
        match &self.kind {
            Kind::Dir { entries } => {
                w += 4 + entries.iter().map(|(n, _)| 2 + bytes(n)).sum::<usize>()
            }
            Kind::File { chunks } => w += 4 + chunks.len() * 10,
            _ => w += 3,
        }
        w += 4 + self
            .xattrs
            .iter()
            .map(|(k, v)| 3 + bytes(k) + bytes(v))
            .sum::<usize>();
        w += self.symlink.as_deref().map_or(0, bytes);
        w
    }

    fn encode(&self, mut b: inode::Builder<'_>) {
        b.set_ino(self.ino);
        {
            let mut m = b.reborrow().init_mode();
            match &self.kind {
                Kind::Unknown => m.set_unknown(()),
                Kind::Fifo => m.set_fifo(()),
                Kind::Lnk => m.set_lnk(()),
                Kind::Sock => m.set_sock(()),
                Kind::Wht => m.set_wht(()),
                Kind::Chr { major, minor } => {
                    let mut c = m.init_chr();
                    c.set_major(*major);
                    c.set_minor(*minor);
                }
                Kind::Blk { major, minor } => {
                    let mut c = m.init_blk();
                    c.set_major(*major);
                    c.set_minor(*minor);
                }
                Kind::Dir { entries } => {
                    let mut d = m.init_dir();
                    {
                        let mut list = d.reborrow().init_entries(len32(entries.len()));
                        for (i, (name, ino)) in entries.iter().enumerate() {
                            let mut e = list.reborrow().get(len32(i));
                            e.set_ino(*ino);
                            e.set_name(name);
                        }
                    }
                    d.set_look_below(false);
                }
                Kind::File { chunks } => {
                    let f = m.init_file();
                    let mut list = f.init_chunks(len32(chunks.len()));
                    for (i, c) in chunks.iter().enumerate() {
                        let mut cb = list.reborrow().get(len32(i));
                        {
                            let mut blob = cb.reborrow().init_blob();
                            blob.set_digest(&c.blob.digest);
                            blob.set_offset(c.blob.offset);
                            blob.set_compressed(c.blob.compressed);
                        }
                        cb.set_len(c.len);
                    }
                }
            }
        }
        b.set_uid(self.uid);
        b.set_gid(self.gid);
        b.set_permissions(self.permissions);
        if !self.xattrs.is_empty() || self.symlink.is_some() {
            let mut a = b.init_additional();
            {
                let mut list = a.reborrow().init_xattrs(len32(self.xattrs.len()));
                for (i, (k, v)) in self.xattrs.iter().enumerate() {
                    let mut x = list.reborrow().get(len32(i));
                    // Value first: the other implementation's order, which
                    // decides where the bytes land in the message.
                    x.set_val(v);
                    x.set_key(k);
                }
            }
            if let Some(t) = &self.symlink {
                a.set_symlink_target(t);
            }
        }
    }
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).expect("Cap'n Proto lists hold fewer than 2^29 elements")
}

fn builder_for(words: usize) -> Builder<HeapAllocator> {
    // One segment big enough for the whole message: readers (the kernel's
    // in particular) are fastest on single-segment messages.
    let words = u32::try_from(words.max(1024))
        .unwrap_or(1 << 29)
        .min(1 << 29);
    Builder::new(HeapAllocator::new().first_segment_words(words))
}

fn serialize(b: &Builder<HeapAllocator>) -> Vec<u8> {
    let mut out = Vec::new();
    capnp::serialize::write_message(&mut out, b).expect("writing to a Vec cannot fail");
    out
}

/// Encodes a metadata layer. `inodes` must be sorted by `ino`.
pub fn encode_layer(inodes: &[InodeRec]) -> Vec<u8> {
    let words = 16 + inodes.iter().map(InodeRec::words).sum::<usize>();
    let mut msg = builder_for(words);
    {
        let root = msg.init_root::<inode_vector::Builder<'_>>();
        let mut list = root.init_inodes(len32(inodes.len()));
        for (i, ino) in inodes.iter().enumerate() {
            ino.encode(list.reborrow().get(len32(i)));
        }
    }
    serialize(&msg)
}

/// The writer of manifests without `VerityData.merkleTree`
/// (`schema/manifest-v1.capnp`).
#[allow(missing_docs, unreachable_pub, unused, clippy::all, clippy::pedantic)]
mod manifest_v1_capnp {
    include!(concat!(env!("OUT_DIR"), "/manifest_v1_capnp.rs"));
}

/// Fills a `Rootfs` builder of either schema (they share every field but
/// `merkleTree`); `$tree(entry, digest)` sets what the schema adds.
macro_rules! fill_rootfs {
    ($root:expr, $layers:expr, $verity:expr, $tree:expr) => {{
        let mut root = $root;
        {
            let mut list = root.reborrow().init_metadatas(len32($layers.len()));
            for (i, l) in $layers.iter().enumerate() {
                let mut b = list.reborrow().get(len32(i));
                b.set_digest(&l.digest);
                b.set_offset(l.offset);
                b.set_compressed(l.compressed);
            }
        }
        {
            let mut list = root.reborrow().init_fs_verity_data(len32($verity.len()));
            for (i, (d, v)) in $verity.iter().enumerate() {
                let mut b = list.reborrow().get(len32(i));
                b.set_digest(d);
                b.set_verity(v);
                $tree(b, d);
            }
        }
        root.set_manifest_version(puzzlefs_format::MANIFEST_VERSION);
    }};
}

/// Encodes an image manifest: layers top first, verity entries sorted by
/// digest by the caller; `trees` names the blob holding the Merkle tree of
/// a blob (of the metadata blobs that have one); `links` is the link-count
/// table (`Rootfs.linkCounts`, sorted by ino, counts of 2 or more), if one
/// is recorded.
///
/// A manifest without trees and without a link-count table is laid out as
/// version 1 has always been (the other implementation's bytes);
/// `merkleTree` makes every fs-verity entry one pointer longer, even the
/// entries without one.
pub fn encode_manifest(
    layers: &[BlobRef],
    verity: &[(Digest, [u8; 32])],
    trees: &HashMap<Digest, Digest>,
    links: Option<&[LinkCount]>,
) -> Vec<u8> {
    let words = 16
        + layers.len() * 8
        + verity.len() * 13
        + trees.len() * 5
        + links.map_or(0, |l| 1 + l.len() * 2);
    let mut msg = builder_for(words);
    if trees.is_empty() && links.is_none() {
        fill_rootfs!(
            msg.init_root::<manifest_v1_capnp::rootfs::Builder<'_>>(),
            layers,
            verity,
            |_, _| {}
        );
    } else {
        let mut root = msg.init_root::<rootfs::Builder<'_>>();
        fill_rootfs!(
            root.reborrow(),
            layers,
            verity,
            |mut b: verity_data::Builder<'_>, d: &Digest| {
                if let Some(t) = trees.get(d) {
                    b.set_merkle_tree(t);
                }
            }
        );
        if let Some(links) = links {
            let mut list = root.init_link_counts(len32(links.len()));
            for (i, l) in links.iter().enumerate() {
                let mut b = list.reborrow().get(len32(i));
                b.set_ino(l.ino);
                b.set_count(l.count);
            }
        }
    }
    serialize(&msg)
}
