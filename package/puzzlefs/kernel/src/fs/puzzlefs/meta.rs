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
//! - otherwise, when the image stores the blob's fs-verity Merkle tree as a blob of its own
//!   (`puzzlefs_format::merkle`): check the tree's top block against the digest the manifest
//!   records, once, at mount, and each page read (and each tree block on its way to the top)
//!   against the tree ([`MerkleTree`]): the same pages read as with fs-verity, each hashed
//!   once. The checks are made on the copies kept, so a file changed under the mount cannot
//!   slip a page in after its check.
//!
//! A page that cannot be read (a block whose check fails, an I/O error) fails the operation
//! that needed it: `EIO`, with a rate-limited log line naming the blob and the page.
//!
//! Each page of a `Verified` blob is read once: the copy is kept ([`Loaded`]) and every later
//! operation uses it, so that a mount holds at most the whole blob, as `Mem` does, but only
//! the pages its operations needed (every operation reads the same pages near the top of its
//! binary searches, over the inodes and over a large directory). The blob file's own page
//! is dropped from its page cache once copied, as the chunk reads do: it would be the same
//! bytes cached twice, and a cold walk of a large image (link counting reads every directory)
//! would leave the blob's pages besides the copies, doubling the mount's memory.

#![forbid(unsafe_code)]

use core::ops::Deref;
use kernel::fs::file::RegularFile;
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sha256;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::merkle::{self, Tree, HASH_LEN};
use puzzlefs_format::paged::{self, Pages, PAGE};
use puzzlefs_format::{Digest, Error as FormatError, HexDigest};

// A metadata page is a block of its Merkle tree.
const _: () = assert!(PAGE == merkle::BLOCK);

/// A copy of one page of a `Verified` blob.
type PageCopy = Arc<KVec<u8>>;

/// The pages of a `Verified` blob read so far, by page number, kept while the image is
/// mounted. Its file has fs-verity, so a page never changes.
pub(crate) struct Loaded(Arc<Mutex<Slots>>);

struct Slots {
    pages: KVVec<Option<PageCopy>>,
    /// The pages a readahead window was asked for (see [`Loaded::window`]).
    asked: KVVec<bool>,
    /// Whether windows are asked for: not while mounting ([`Metadata::ask_windows`]).
    windows: bool,
}

impl Loaded {
    /// None yet, for a blob of `len` bytes.
    pub(crate) fn new(len: u64) -> Result<Self> {
        let pages = usize::try_from(len.div_ceil(PAGE as u64))?;
        let slots = Slots {
            pages: KVVec::from_elem(None, pages, GFP_KERNEL)?,
            asked: KVVec::from_elem(false, pages, GFP_KERNEL)?,
            windows: false,
        };
        Ok(Loaded(Arc::pin_init(new_mutex!(slots), GFP_KERNEL)?))
    }

    fn get(&self, index: usize) -> Option<PageCopy> {
        self.0.lock().pages.get(index)?.clone()
    }

    /// Keeps `page` as page `index` (unless another reader kept it first).
    fn keep(&self, index: usize, page: &PageCopy) {
        if let Some(slot @ None) = self.0.lock().pages.get_mut(index) {
            *slot = Some(page.clone());
        }
    }

    /// The byte range of the aligned window of `window` bytes holding page `index`, the first
    /// time one of its pages is asked for; `None` after that, or for a window of one page.
    ///
    /// Each page read is dropped from the blob's page cache once copied, so the blob's own
    /// readahead, which looks for the pages behind a miss, takes most misses for random ones
    /// and reads them page by page. The driver asks for each window once instead.
    fn window(&self, index: usize, window: u64, len: u64) -> Option<(u64, u64)> {
        let per = usize::try_from(window / PAGE as u64).ok()?;
        if per < 2 {
            return None;
        }
        let first = index - index % per;
        let mut slots = self.0.lock();
        if !slots.windows {
            return None;
        }
        let end = first.saturating_add(per).min(slots.asked.len());
        let asked = slots.asked.get_mut(first..end)?;
        if *asked.get(index - first)? {
            return None;
        }
        asked.iter_mut().for_each(|a| *a = true);
        let start = (first as u64).checked_mul(PAGE as u64)?;
        Some((start, len.checked_sub(start)?.min(window)))
    }
}

/// One metadata blob.
pub(crate) enum Metadata {
    /// Read whole at mount and checked against its sha256 (kvmalloc'ed, for as long as the
    /// image is mounted).
    Mem(KVVec<u8>),
    /// Read page by page from its page cache, each page checked before it is used: by
    /// fs-verity (the file's digest, checked at mount on this open file, is the one the
    /// manifest records for the blob), or against the blob's Merkle tree (`tree`).
    Verified {
        file: RegularFile,
        /// The size at mount (a file with fs-verity never changes; with `tree`, the size the
        /// tree was checked for).
        len: u64,
        digest: Digest,
        /// The pages read so far.
        loaded: Loaded,
        /// The Merkle tree each page is checked against; `None` when `file` has fs-verity.
        tree: Option<MerkleTree>,
    },
}

impl Metadata {
    /// Size of the blob in bytes.
    pub(crate) fn size(&self) -> u64 {
        Pages::len(self)
    }

    /// From now on, ask for the readahead window of each page first needed (see
    /// [`Loaded::window`]). Not before: a mount reads a page or two of each layer, and
    /// asking for their window made the mount of a 100,000-inode image read 364 KiB, in 5
    /// times the time of a 10-inode one.
    pub(crate) fn ask_windows(&self) {
        if let Metadata::Verified { loaded, .. } = self {
            loaded.0.lock().windows = true;
        }
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
        let (file, len, digest, loaded, tree) = match self {
            Metadata::Mem(bytes) => {
                return <[u8] as Pages>::page(bytes.as_slice(), index).map(Page::Mem)
            }
            Metadata::Verified {
                file,
                len,
                digest,
                loaded,
                tree,
            } => (file, *len, digest, loaded, tree),
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
        if let Some((from, n)) = loaded.window(slot, file.readahead_bytes(), len) {
            file.will_need(from, n);
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
        // `start + n <= len`: no overflow.
        file.drop_cached(start, start + n as u64);
        if let Some(tree) = tree {
            tree.check_page(digest, index, &page)?;
        }
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

/// Why a blob's Merkle tree cannot be used (the mount then reads the blob whole).
pub(crate) enum TreeError {
    /// The tree file is not the size the blob's tree has.
    Size(u64, u64),
    /// Its top block does not give the fs-verity digest the manifest records for the blob.
    Root,
    /// A blob of at most one block has no tree.
    NoTree,
    /// The tree file cannot be read.
    Read(Error),
}

impl core::fmt::Display for TreeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TreeError::Size(have, want) => write!(f, "{} bytes, not {}", have, want),
            TreeError::Root => write!(f, "its root is not the recorded fs-verity digest"),
            TreeError::NoTree => write!(f, "the blob is too small to have one"),
            TreeError::Read(e) => write!(f, "cannot be read: {:?}", e),
        }
    }
}

impl From<Error> for TreeError {
    fn from(e: Error) -> Self {
        TreeError::Read(e)
    }
}

impl From<kernel::alloc::AllocError> for TreeError {
    fn from(e: kernel::alloc::AllocError) -> Self {
        TreeError::Read(e.into())
    }
}

/// The fs-verity Merkle tree of a metadata blob read without fs-verity, from a blob file of
/// its own, and its blocks checked so far. Its top block is checked at mount, each other
/// block against its hash in the block above it (checked first) when a page needs it.
pub(crate) struct MerkleTree {
    file: RegularFile,
    /// The tree blob's name, for log lines.
    name: Digest,
    shape: Tree,
    /// The tree blocks checked so far.
    blocks: Loaded,
}

/// sha256 of `block` zero-padded to a whole block, as the tree hashes it.
fn hash_block(block: &[u8]) -> [u8; HASH_LEN] {
    const ZEROS: [u8; 256] = [0; 256];
    let mut hash = sha256::Sha256::new();
    hash.update(block);
    let mut pad = merkle::BLOCK.saturating_sub(block.len());
    while pad > 0 {
        let n = pad.min(ZEROS.len());
        hash.update(&ZEROS[..n]);
        pad -= n;
    }
    hash.finish()
}

/// Reads tree block `buf` (a whole block) from byte `pos` of the tree `file`, with direct I/O
/// where the file allows it. The block is kept as a copy once checked, so it has no use in
/// the tree file's page cache; a buffered read would also start that file's readahead,
/// reading blocks a mount or a lookup never needs. Where the read is buffered after all (a
/// file system without direct I/O), the block's page is dropped from the cache.
fn read_block(file: &RegularFile, buf: &mut [u8], pos: u64) -> Result {
    file.read_direct_exact_at(buf, pos)?;
    file.drop_cached(pos, pos.saturating_add(buf.len() as u64));
    Ok(())
}

impl MerkleTree {
    /// Opens the tree `file` (named `name`) of a blob of `len` bytes whose recorded fs-verity
    /// digest is `verity`, and checks its top block against it.
    pub(crate) fn new(
        file: RegularFile,
        name: Digest,
        len: u64,
        verity: &[u8; HASH_LEN],
    ) -> core::result::Result<Self, TreeError> {
        let shape = Tree::new(len).map_err(|_| TreeError::NoTree)?;
        if shape.levels() == 0 {
            return Err(TreeError::NoTree);
        }
        let size = file.size()?;
        if size != shape.size() {
            return Err(TreeError::Size(size, shape.size()));
        }
        let mut top = KVec::from_elem(0u8, merkle::BLOCK, GFP_KERNEL)?;
        read_block(&file, &mut top, 0)?;
        let root = hash_block(&top);
        if sha256::digest(&merkle::descriptor(len, &root))? != *verity {
            return Err(TreeError::Root);
        }
        let blocks = Loaded::new(shape.size())?;
        blocks.keep(0, &Arc::new(top, GFP_KERNEL)?);
        Ok(MerkleTree {
            file,
            name,
            shape,
            blocks,
        })
    }

    /// Tree block `block`, checked: read and checked against the block above it (itself
    /// checked first) unless it was before.
    fn block(&self, blob: &Digest, block: u64) -> puzzlefs_format::Result<PageCopy> {
        let slot = usize::try_from(block).map_err(|_| FormatError::Io)?;
        if let Some(b) = self.blocks.get(slot) {
            return Ok(b);
        }
        // The top block is kept at mount: every other block has its hash in a block above
        // it, at most `merkle::MAX_LEVELS` levels up.
        let at = self.shape.block_hash(block).ok_or(FormatError::Io)?;
        let above = self.block(blob, at.block)?;
        let mut data =
            KVec::from_elem(0u8, merkle::BLOCK, GFP_KERNEL).map_err(|_| FormatError::Io)?;
        let pos = block
            .checked_mul(merkle::BLOCK as u64)
            .ok_or(FormatError::Io)?;
        let read = read_block(&self.file, &mut data, pos);
        if read.is_err() || !hash_at(&above, at.offset, &hash_block(&data)) {
            pr_err_ratelimited!(
                "metadata blob {}: block {} of its Merkle tree {} {}\n",
                HexDigest(blob),
                block,
                HexDigest(&self.name),
                if read.is_err() {
                    "cannot be read"
                } else {
                    "does not match its hash"
                }
            );
            return Err(FormatError::Io);
        }
        let data = Arc::new(data, GFP_KERNEL).map_err(|_| FormatError::Io)?;
        self.blocks.keep(slot, &data);
        Ok(data)
    }

    /// Checks page `index` of blob `blob` against the tree.
    fn check_page(&self, blob: &Digest, index: u64, page: &[u8]) -> puzzlefs_format::Result<()> {
        let at = self.shape.data_hash(index).ok_or(FormatError::Io)?;
        let above = self.block(blob, at.block)?;
        if !hash_at(&above, at.offset, &hash_block(page)) {
            pr_err_ratelimited!(
                "metadata blob {}: page {} does not match its Merkle tree {}\n",
                HexDigest(blob),
                index,
                HexDigest(&self.name)
            );
            return Err(FormatError::Io);
        }
        Ok(())
    }
}

/// Whether `block` holds `hash` at byte `offset`.
fn hash_at(block: &[u8], offset: usize, hash: &[u8; HASH_LEN]) -> bool {
    offset
        .checked_add(HASH_LEN)
        .and_then(|end| block.get(offset..end))
        == Some(&hash[..])
}

/// The views of the metadata the driver uses.
pub(crate) type Blob<'p> = paged::Blob<'p, Metadata>;
pub(crate) type Layer<'b, 'p> = paged::Layer<'b, 'p, Metadata>;
pub(crate) type Inode<'b, 'p> = paged::Inode<'b, 'p, Metadata>;
pub(crate) type Dir<'b, 'p> = paged::Dir<'b, 'p, Metadata>;
pub(crate) type Bytes<'b, 'p> = paged::Bytes<'b, 'p, Metadata>;
pub(crate) type File<'b, 'p> = paged::File<'b, 'p, Metadata>;
