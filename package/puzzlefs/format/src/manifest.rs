//! The image manifest (`Rootfs`): the list of metadata layers and the
//! fs-verity measurements of every blob.

use capnp::serialize::NoAllocBufferSegments;

use crate::digest::digest_from;
use crate::manifest_capnp::{link_count, rootfs, verity_data};
use crate::metadata_capnp::blob_ref;
use crate::{Digest, Error, Result, MANIFEST_VERSION};

/// Most metadata layers an image may have: the kernel driver refuses to
/// mount a manifest that lists more (each lookup may search every layer),
/// and the builder refuses to add a delta layer past it.
pub const MAX_LAYERS: usize = 256;

/// A reference to (part of) a blob: its name, an offset into its
/// (decompressed) contents, and whether it is stored zstd-compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// sha256 of the blob as stored (its file name).
    pub digest: Digest,
    /// Byte offset into the decompressed blob.
    pub offset: u64,
    /// The blob is one zstd frame.
    pub compressed: bool,
}

impl BlobRef {
    pub(crate) fn from_reader(r: blob_ref::Reader<'_>) -> Result<Self> {
        Ok(BlobRef {
            digest: digest_from(r.get_digest()?)?,
            offset: r.get_offset(),
            compressed: r.get_compressed(),
        })
    }
}

/// A parsed image manifest. Holds the message's read budget (see the crate
/// docs); cheap to create.
pub struct Manifest<'a> {
    msg: capnp::message::Reader<NoAllocBufferSegments<&'a [u8]>>,
}

impl<'a> Manifest<'a> {
    /// Parses a manifest blob and checks its version. `buf` must be 8-byte
    /// aligned (else [`Error::Capnp`]).
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let msg = crate::read_message(buf)?;
        let m = Manifest { msg };
        let version = m.root()?.get_manifest_version();
        if version != MANIFEST_VERSION {
            return Err(Error::BadVersion(version));
        }
        Ok(m)
    }

    fn root(&self) -> Result<rootfs::Reader<'_>> {
        Ok(self.msg.get_root::<rootfs::Reader<'_>>()?)
    }

    /// The manifest version (always [`MANIFEST_VERSION`] once parsed).
    pub fn version(&self) -> Result<u64> {
        Ok(self.root()?.get_manifest_version())
    }

    /// The metadata layers, top (newest) first.
    pub fn layers(&self) -> Result<BlobRefs<'_>> {
        let list = self.root()?.get_metadatas()?;
        Ok(BlobRefs { list, pos: 0 })
    }

    /// Number of metadata layers.
    pub fn layer_count(&self) -> Result<u32> {
        Ok(self.root()?.get_metadatas()?.len())
    }

    /// Metadata layer `i` (0 is the top layer).
    pub fn layer(&self, i: u32) -> Result<BlobRef> {
        let list = self.root()?.get_metadatas()?;
        BlobRef::from_reader(list.try_get(i).ok_or(Error::Bounds)?)
    }

    /// The link-count table, if the manifest records one (`Rootfs.linkCounts`): the inodes
    /// with more than one name in the file system the manifest describes. Its entries are
    /// checked as they are read (see [`LinkCounts`]).
    pub fn link_counts(&self) -> Result<Option<LinkCounts<'_>>> {
        let root = self.root()?;
        if !root.has_link_counts() {
            return Ok(None);
        }
        Ok(Some(LinkCounts {
            list: root.get_link_counts()?,
            pos: 0,
            prev: None,
        }))
    }

    /// The fs-verity entries (blob digest, measurement), in stored order.
    pub fn verity_entries(&self) -> Result<VerityEntries<'_>> {
        let list = self.root()?.get_fs_verity_data()?;
        Ok(VerityEntries { list, pos: 0 })
    }

    /// The fs-verity measurement recorded for blob `digest`, if any.
    pub fn verity_for(&self, digest: &Digest) -> Result<Option<&[u8]>> {
        Ok(self.verity_entry_for(digest)?.map(|e| e.verity))
    }

    /// The fs-verity entry recorded for blob `digest`, if any. Binary search
    /// when the entries are sorted by digest (as builders write them),
    /// falling back to a linear scan otherwise.
    pub fn verity_entry_for(&self, digest: &Digest) -> Result<Option<VerityEntry<'_>>> {
        let list = self.root()?.get_fs_verity_data()?;
        let (mut lo, mut hi) = (0u32, list.len());
        while lo < hi {
            let mid = crate::mid(lo, hi);
            let e = list.try_get(mid).ok_or(Error::Bounds)?;
            let d = e.get_digest()?;
            match d.cmp(&digest[..]) {
                core::cmp::Ordering::Equal => return verity_entry(e).map(Some),
                core::cmp::Ordering::Less => lo = mid.checked_add(1).ok_or(Error::Overflow)?,
                core::cmp::Ordering::Greater => hi = mid,
            }
        }
        for e in list.iter() {
            if e.get_digest()? == &digest[..] {
                return verity_entry(e).map(Some);
            }
        }
        Ok(None)
    }
}

/// Iterator over the metadata layers of a manifest.
pub struct BlobRefs<'m> {
    list: capnp::struct_list::Reader<'m, blob_ref::Owned>,
    pos: u32,
}

impl Iterator for BlobRefs<'_> {
    type Item = Result<BlobRef>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.list.try_get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        Some(BlobRef::from_reader(r))
    }
}

/// One entry of a manifest's link-count table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkCount {
    /// The inode.
    pub ino: u64,
    /// How many directory entries name it (2 or more).
    pub count: u32,
}

/// The entries of a manifest's link-count table, in stored order. An entry
/// with a count below 2, or not after the previous one in inode order (the
/// table is sorted, without duplicates), is [`Error::Corrupt`]: a reader
/// then cannot trust the table, and counts the names itself.
pub struct LinkCounts<'m> {
    list: capnp::struct_list::Reader<'m, link_count::Owned>,
    pos: u32,
    prev: Option<u64>,
}

impl LinkCounts<'_> {
    /// Number of entries.
    pub fn len(&self) -> u32 {
        self.list.len()
    }

    /// Whether the table is empty (no inode has two names).
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0
    }
}

impl Iterator for LinkCounts<'_> {
    type Item = Result<LinkCount>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.list.try_get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        let e = LinkCount {
            ino: r.get_ino(),
            count: r.get_count(),
        };
        if e.count < 2 {
            return Some(Err(Error::Corrupt {
                what: "link count below 2 in the link-count table",
            }));
        }
        if self.prev.is_some_and(|p| p >= e.ino) {
            return Some(Err(Error::Corrupt {
                what: "link-count table not sorted by inode number",
            }));
        }
        self.prev = Some(e.ino);
        Some(Ok(e))
    }
}

/// One fs-verity entry of a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerityEntry<'m> {
    /// The blob's digest.
    pub digest: Digest,
    /// Its fs-verity measurement (32 bytes for sha256).
    pub verity: &'m [u8],
    /// The blob holding its Merkle tree (see [`crate::merkle`]), if the
    /// image stores one.
    pub merkle_tree: Option<Digest>,
}

/// Iterator over the fs-verity entries of a manifest.
pub struct VerityEntries<'m> {
    list: capnp::struct_list::Reader<'m, verity_data::Owned>,
    pos: u32,
}

impl<'m> Iterator for VerityEntries<'m> {
    type Item = Result<VerityEntry<'m>>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.list.try_get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        Some(verity_entry(r))
    }
}

fn verity_entry(r: verity_data::Reader<'_>) -> Result<VerityEntry<'_>> {
    Ok(VerityEntry {
        digest: digest_from(r.get_digest()?)?,
        verity: r.get_verity()?,
        merkle_tree: if r.has_merkle_tree() {
            Some(digest_from(r.get_merkle_tree()?)?)
        } else {
            None
        },
    })
}
