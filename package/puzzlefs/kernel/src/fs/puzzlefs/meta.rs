// SPDX-License-Identifier: GPL-2.0

//! Metadata blobs, read through `puzzlefs_format::paged`: from memory, or page by page from
//! the page cache of a blob file that fs-verity guards.
//!
//! A mount has to trust every byte of metadata it reads. It can do so in two ways:
//!
//! - read the blob whole and check its sha256 against the name the manifest gives it
//!   ([`Metadata::Mem`]): the cost of a mount then grows with the image (a 100,000-inode image
//!   has 4 MB of metadata to read and hash);
//! - with `verity=on` or `require`, when the blob has fs-verity and the digest the manifest
//!   records for it: check that digest once, at mount, on the open file, and read pages as
//!   operations need them ([`Metadata::Verified`]). The blob's file system checks each page
//!   against the Merkle tree when it reads it from the disk, and a file with fs-verity cannot
//!   be written, so a page read is a page of the blob the manifest names. A lookup then reads
//!   O(log n) pages of the blob, and a mount a few, whatever the image's size.
//!
//! A page that cannot be read (a block whose check fails, an I/O error) fails the operation
//! that needed it: `EIO`, with a rate-limited log line naming the blob and the page.
//!
//! Each page of a `Verified` blob is read once: the copy is kept ([`Loaded`]) and every later
//! operation uses it, so that a mount holds at most the whole blob, as `Mem` does, but only
//! the pages its operations needed (every operation reads the same pages near the top of its
//! binary searches, over the inodes and over a large directory).

#![forbid(unsafe_code)]

use core::ops::Deref;
use kernel::fs::file::RegularFile;
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::paged::{self, Pages, PAGE};
use puzzlefs_format::{Digest, Error as FormatError, HexDigest};

/// A copy of one page of a `Verified` blob.
type PageCopy = Arc<KVec<u8>>;

/// The pages of a `Verified` blob read so far, by page number, kept while the image is
/// mounted. Its file has fs-verity, so a page never changes.
pub(crate) struct Loaded(Arc<Mutex<KVVec<Option<PageCopy>>>>);

impl Loaded {
    /// None yet, for a blob of `len` bytes.
    pub(crate) fn new(len: u64) -> Result<Self> {
        let pages = usize::try_from(len.div_ceil(PAGE as u64))?;
        let slots = KVVec::from_elem(None, pages, GFP_KERNEL)?;
        Ok(Loaded(Arc::pin_init(new_mutex!(slots), GFP_KERNEL)?))
    }

    fn get(&self, index: usize) -> Option<PageCopy> {
        self.0.lock().get(index)?.clone()
    }

    /// Keeps `page` as page `index` (unless another reader kept it first).
    fn keep(&self, index: usize, page: &PageCopy) {
        if let Some(slot @ None) = self.0.lock().get_mut(index) {
            *slot = Some(page.clone());
        }
    }
}

/// One metadata blob.
pub(crate) enum Metadata {
    /// Read whole at mount and checked against its sha256 (kvmalloc'ed, for as long as the
    /// image is mounted).
    Mem(KVVec<u8>),
    /// Read page by page from its page cache: its fs-verity digest, checked at mount on this
    /// open file, is the one the manifest records for the blob.
    Verified {
        file: RegularFile,
        /// The size at mount (a file with fs-verity never changes).
        len: u64,
        digest: Digest,
        /// The pages read so far.
        loaded: Loaded,
    },
}

impl Metadata {
    /// Size of the blob in bytes.
    pub(crate) fn size(&self) -> u64 {
        Pages::len(self)
    }
}

/// A page of a [`Metadata`] blob: borrowed from memory, or a copy of the page read from the
/// blob's page cache (shared with [`Loaded`]).
pub(crate) enum Page<'a> {
    Mem(&'a [u8]),
    Read(PageCopy),
}

impl Deref for Page<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Page::Mem(bytes) => bytes,
            Page::Read(bytes) => bytes.as_slice(),
        }
    }
}

impl Pages for Metadata {
    type Page<'a> = Page<'a>;

    fn len(&self) -> u64 {
        match self {
            Metadata::Mem(bytes) => bytes.len() as u64,
            Metadata::Verified { len, .. } => *len,
        }
    }

    fn page(&self, index: u64) -> puzzlefs_format::Result<Page<'_>> {
        let (file, len, digest, loaded) = match self {
            Metadata::Mem(bytes) => {
                return <[u8] as Pages>::page(bytes.as_slice(), index).map(Page::Mem)
            }
            Metadata::Verified {
                file,
                len,
                digest,
                loaded,
            } => (file, *len, digest, loaded),
        };
        let start = index
            .checked_mul(PAGE as u64)
            .filter(|&s| s < len)
            .ok_or(FormatError::Io)?;
        // `start < len`: the index fits in a usize (the slots were allocated).
        let slot = usize::try_from(index).map_err(|_| FormatError::Io)?;
        if let Some(page) = loaded.get(slot) {
            return Ok(Page::Read(page));
        }
        // At most `PAGE`: fits in a usize.
        let n = (len - start).min(PAGE as u64) as usize;
        let mut page = KVec::from_elem(0u8, n, GFP_KERNEL).map_err(|_| FormatError::Io)?;
        file.read_exact_at(&mut page, start).map_err(|e| {
            pr_err_ratelimited!(
                "metadata blob {}: page {} cannot be read: {:?}\n",
                HexDigest(digest),
                index,
                e
            );
            FormatError::Io
        })?;
        let page = Arc::new(page, GFP_KERNEL).map_err(|_| FormatError::Io)?;
        loaded.keep(slot, &page);
        Ok(Page::Read(page))
    }

    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            Metadata::Mem(bytes) => Some(bytes.as_slice()),
            Metadata::Verified { .. } => None,
        }
    }
}

/// The views of the metadata the driver uses.
pub(crate) type Blob<'p> = paged::Blob<'p, Metadata>;
pub(crate) type Layer<'b, 'p> = paged::Layer<'b, 'p, Metadata>;
pub(crate) type Inode<'b, 'p> = paged::Inode<'b, 'p, Metadata>;
pub(crate) type Dir<'b, 'p> = paged::Dir<'b, 'p, Metadata>;
pub(crate) type Bytes<'b, 'p> = paged::Bytes<'b, 'p, Metadata>;
