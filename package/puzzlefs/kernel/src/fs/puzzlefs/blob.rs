// SPDX-License-Identifier: GPL-2.0

//! Chunk blobs: a small per-mount cache of open blob files, checked with fs-verity.
//!
//! Reading a file opens the chunk blobs that back each folio; keeping the last few open saves
//! a path walk per folio when a file is read sequentially.
//!
//! With `verity=on` or `verity=require` every blob is checked right after it is opened, before
//! anything is read from it, and again at each reopen after it left the cache: its fs-verity
//! digest must be the one the image manifest records for it (`fsVerityData`). The check is
//! made on the open file, so renaming another file over the blob afterwards changes nothing
//! for a blob held open, and fs-verity itself then checks every read of the open file against
//! its Merkle tree. Under `on` a blob without fs-verity is read unchecked; under `require` it
//! is refused, as is a blob the manifest records no digest for.

#![forbid(unsafe_code)]

use crate::decompress;
use core::fmt;
use kernel::fs::file::{PrivateMount, RegularFile};
use kernel::fs::verity::{Verity as FileVerity, SHA256_DIGEST_SIZE};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::{Digest, HexDigest, Manifest, DIGEST_LEN};

/// Number of blob files kept open per mount.
const SLOTS: usize = 8;

/// Bytes of a blob asked for as soon as it is opened.
const READ_AHEAD: u64 = 512 << 10;

/// Most `fsVerityData` entries indexed at mount (64 bytes each in the index).
const MAX_VERITY_ENTRIES: usize = 1 << 20;

/// The `verity=` mount option (overlayfs's names and meanings).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Chunk blobs are read without any check (the default).
    #[default]
    Off,
    /// A chunk blob with fs-verity must have the digest the manifest records for it; one
    /// without fs-verity is read unchecked.
    On,
    /// Every chunk blob must have fs-verity and the digest the manifest records for it.
    Require,
}

impl Mode {
    /// The mode of number `i` of the `verity=` values (`off`, `on`, `require`).
    pub(crate) fn from_index(i: u32) -> Option<Self> {
        match i {
            0 => Some(Mode::Off),
            1 => Some(Mode::On),
            2 => Some(Mode::Require),
            _ => None,
        }
    }

    /// The option's value, as parsed.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::On => "on",
            Mode::Require => "require",
        }
    }
}

/// Why an index of the manifest's fs-verity entries could not be built.
pub(crate) enum IndexError {
    /// The entries could not be read.
    Format(puzzlefs_format::Error),
    /// More entries than [`MAX_VERITY_ENTRIES`] (the limit).
    TooMany(usize),
    /// An entry is not a sha256 digest.
    BadLength(Digest, usize),
    /// Two entries for one blob, with different digests.
    Conflict(Digest),
    /// Out of memory.
    Alloc(Error),
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Format(e) => write!(f, "fsVerityData: {}", e),
            IndexError::TooMany(n) => write!(f, "fsVerityData has more than {} entries", n),
            IndexError::BadLength(d, n) => write!(
                f,
                "fsVerityData entry of blob {} has {} bytes, not a sha256 digest",
                HexDigest(d),
                n
            ),
            IndexError::Conflict(d) => {
                write!(f, "fsVerityData has two digests for blob {}", HexDigest(d))
            }
            IndexError::Alloc(e) => write!(f, "fsVerityData index: {:?}", e),
        }
    }
}

impl IndexError {
    /// The errno of a mount refused for this reason.
    pub(crate) fn errno(&self) -> Error {
        match self {
            IndexError::Alloc(e) => *e,
            _ => EUCLEAN,
        }
    }
}

impl From<puzzlefs_format::Error> for IndexError {
    fn from(e: puzzlefs_format::Error) -> Self {
        IndexError::Format(e)
    }
}

impl From<kernel::alloc::AllocError> for IndexError {
    fn from(_: kernel::alloc::AllocError) -> Self {
        IndexError::Alloc(ENOMEM)
    }
}

/// The fs-verity policy of a mount: its mode and the manifest's recorded digests, sorted by
/// blob digest for binary search.
pub(crate) struct Verity {
    mode: Mode,
    /// (blob digest, fs-verity digest), sorted by blob digest, one entry per blob; empty
    /// when `mode` is [`Mode::Off`].
    index: KVVec<Entry>,
}

impl Verity {
    /// Builds the policy of `mode` for the image of `manifest`. With [`Mode::Off`] nothing is
    /// read. Builders write the entries sorted by blob digest, in which case no sorting is
    /// done; any other order is sorted here (bounded by [`MAX_VERITY_ENTRIES`]).
    pub(crate) fn new(mode: Mode, manifest: &Manifest<'_>) -> Result<Self, IndexError> {
        let mut index = KVVec::new();
        if mode == Mode::Off {
            return Ok(Self { mode, index });
        }
        let mut sorted = true;
        for e in manifest.verity_entries()? {
            let e = e?;
            if index.len() >= MAX_VERITY_ENTRIES {
                return Err(IndexError::TooMany(MAX_VERITY_ENTRIES));
            }
            let v = <[u8; SHA256_DIGEST_SIZE]>::try_from(e.verity)
                .map_err(|_| IndexError::BadLength(e.digest, e.verity.len()))?;
            if let Some(last) = index.last() {
                sorted &= last.0 < e.digest;
            }
            index.push((e.digest, v), GFP_KERNEL)?;
        }
        if !sorted {
            heapsort(&mut index);
            for pair in index.windows(2) {
                // The same entry twice is harmless: binary search finds either.
                if let [a, b] = pair {
                    if a.0 == b.0 && a.1 != b.1 {
                        return Err(IndexError::Conflict(a.0));
                    }
                }
            }
        }
        Ok(Self { mode, index })
    }

    /// The mode of the mount.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether open blob `digest` has fs-verity and the digest the manifest records for it
    /// (never under [`Mode::Off`]): every page read from it is then a page of that blob.
    pub(crate) fn verified(&self, digest: &Digest, file: &RegularFile) -> bool {
        if self.mode == Mode::Off {
            return false;
        }
        match (file.verity(), self.recorded(digest)) {
            (Ok(FileVerity::Sha256(actual)), Some(expected)) => actual == *expected,
            _ => false,
        }
    }

    fn recorded(&self, blob: &Digest) -> Option<&[u8; SHA256_DIGEST_SIZE]> {
        let i = self.index.binary_search_by(|e| e.0.cmp(blob)).ok()?;
        self.index.get(i).map(|e| &e.1)
    }

    /// Checks open blob `digest` against the policy. Not logged here: the reader that needs
    /// the blob logs why it cannot have it (a prefetch that only hoped to need it does not).
    fn check(&self, digest: &Digest, file: &RegularFile) -> Result<(), OpenError> {
        if self.mode == Mode::Off {
            return Ok(());
        }
        let actual = match file.verity()? {
            FileVerity::Sha256(d) => d,
            FileVerity::Off if self.mode == Mode::On => return Ok(()),
            FileVerity::Off => return Err(OpenError::NoVerity),
            FileVerity::OtherAlgorithm(alg) => return Err(OpenError::Algorithm(alg)),
        };
        match self.recorded(digest) {
            Some(expected) if *expected == actual => Ok(()),
            Some(expected) => Err(OpenError::Digest(actual, *expected)),
            None => Err(OpenError::Unrecorded),
        }
    }
}

/// Why a chunk blob cannot be used.
pub(crate) enum OpenError {
    /// It cannot be opened, or its fs-verity state or size cannot be read.
    Io(Error),
    /// It has no fs-verity, under `verity=require`.
    NoVerity,
    /// Its fs-verity hash algorithm (this `FS_VERITY_HASH_ALG_*`) is not sha256.
    Algorithm(u8),
    /// Its fs-verity digest (the first) is not the one the image records (the second).
    Digest([u8; SHA256_DIGEST_SIZE], [u8; SHA256_DIGEST_SIZE]),
    /// The image records no fs-verity digest for it.
    Unrecorded,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{:?}", e),
            OpenError::NoVerity => f.write_str("no fs-verity (verity=require)"),
            OpenError::Algorithm(alg) => {
                write!(f, "fs-verity hash algorithm {} is not sha256", alg)
            }
            OpenError::Digest(actual, expected) => write!(
                f,
                "fs-verity digest {} is not the image's {}",
                HexDigest(actual),
                HexDigest(expected)
            ),
            OpenError::Unrecorded => f.write_str("the image records no fs-verity digest for it"),
        }
    }
}

impl From<Error> for OpenError {
    fn from(e: Error) -> Self {
        OpenError::Io(e)
    }
}

impl From<kernel::alloc::AllocError> for OpenError {
    fn from(_: kernel::alloc::AllocError) -> Self {
        OpenError::Io(ENOMEM)
    }
}

impl OpenError {
    /// Logs (rate-limited) that inode `ino` cannot read chunk blob `digest` for this reason;
    /// returns the errno of the read, `EIO`.
    pub(crate) fn log(&self, ino: u64, digest: &Digest) -> Error {
        pr_err_ratelimited!(
            "inode {}: cannot open chunk blob {}: {}\n",
            ino,
            HexDigest(digest),
            self
        );
        EIO
    }
}

/// One recorded digest: (blob digest, fs-verity digest).
type Entry = (Digest, [u8; SHA256_DIGEST_SIZE]);

/// Sorts `v` by blob digest in place: O(n log n), no allocation, no recursion (core's sorts
/// pull in panic paths objtool does not know).
fn heapsort(v: &mut [Entry]) {
    fn sift_down(v: &mut [Entry], mut root: usize, end: usize) {
        loop {
            // `end <= v.len()`, far below `usize::MAX / 2`: no overflow.
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && v[child].0 < v[child + 1].0 {
                child += 1;
            }
            if v[root].0 >= v[child].0 {
                return;
            }
            v.swap(root, child);
            root = child;
        }
    }
    let len = v.len();
    for start in (0..len / 2).rev() {
        sift_down(v, start, len);
    }
    for end in (1..len).rev() {
        v.swap(0, end);
        sift_down(v, 0, end);
    }
}

/// Whether `a` and `b` are the same digest. The first 8 bytes are compared first, inline: two
/// blobs' digests almost always differ there, and a compare of whole digests is a call to
/// `bcmp`, made for each entry of a cache each time a blob or chunk is looked for.
pub(crate) fn same_digest(a: &Digest, b: &Digest) -> bool {
    a.first_chunk::<8>() == b.first_chunk::<8>() && a == b
}

struct Slot {
    digest: Digest,
    file: Arc<RegularFile>,
    used: u64,
}

/// Open blob files, least recently used out first.
pub(crate) struct BlobCache {
    slots: [Option<Slot>; SLOTS],
    clock: u64,
}

impl BlobCache {
    /// An empty cache, behind a mutex.
    pub(crate) fn new() -> impl PinInit<Mutex<BlobCache>> {
        new_mutex!(BlobCache {
            slots: [const { None }; SLOTS],
            clock: 0,
        })
    }
}

/// The path of blob `digest` below the image directory, `blobs/sha256/<64 hex digits>`,
/// NUL-terminated: built without the formatting machinery, since every blob open needs one.
pub(crate) struct BlobPath([u8; BLOB_PATH_LEN]);

const BLOB_DIR: &[u8] = b"blobs/sha256/";
const BLOB_PATH_LEN: usize = BLOB_DIR.len() + 2 * DIGEST_LEN + 1;

impl BlobPath {
    pub(crate) fn new(digest: &Digest) -> Self {
        let mut path = [0u8; BLOB_PATH_LEN];
        let (dir, rest) = path.split_at_mut(BLOB_DIR.len());
        dir.copy_from_slice(BLOB_DIR);
        let digits = HexDigest(digest).digits();
        if let Some(hex) = rest.get_mut(..digits.len()) {
            hex.copy_from_slice(&digits);
        }
        BlobPath(path)
    }

    /// The path as a C string (hex digits and `/` only, one NUL at the end).
    pub(crate) fn as_cstr(&self) -> Result<&CStr> {
        CStr::from_bytes_with_nul(&self.0).map_err(|_| EINVAL)
    }
}

impl fmt::Display for BlobPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.0.get(..BLOB_PATH_LEN - 1).unwrap_or(&[]);
        f.write_str(core::str::from_utf8(path).map_err(|_| fmt::Error)?)
    }
}

/// Opens blob `digest` below `mount` and checks it against `verity`, or returns it from
/// `cache` (where only checked blobs are kept).
pub(crate) fn open(
    mount: &PrivateMount,
    cache: &Mutex<BlobCache>,
    verity: &Verity,
    digest: &Digest,
) -> Result<Arc<RegularFile>, OpenError> {
    {
        let mut c = cache.lock();
        c.clock = c.clock.wrapping_add(1);
        let clock = c.clock;
        if let Some(slot) = c
            .slots
            .iter_mut()
            .flatten()
            .find(|s| same_digest(&s.digest, digest))
        {
            slot.used = clock;
            return Ok(slot.file.clone());
        }
    }
    let file = mount.open(BlobPath::new(digest).as_cstr()?)?;
    verity.check(digest, &file)?;
    // A chunk blob of up to `MAX_CHUNK` bytes is read whole, with direct I/O (`decompress`).
    // A larger one is read piece by piece through its page cache: one request for its start
    // replaces the blob's own readahead window growing from a few pages.
    let size = file.size()?;
    if size > decompress::MAX_CHUNK as u64 {
        file.will_need(0, size.min(READ_AHEAD));
    }
    let file = Arc::new(file, GFP_KERNEL)?;
    let mut c = cache.lock();
    let clock = c.clock;
    let victim = match c.slots.iter().position(|s| s.is_none()) {
        Some(i) => i,
        None => c
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.as_ref().map_or(0, |s| s.used))
            .map_or(0, |(i, _)| i),
    };
    if let Some(slot) = c.slots.get_mut(victim) {
        *slot = Some(Slot {
            digest: *digest,
            file: file.clone(),
            used: clock,
        });
    }
    Ok(file)
}
