// SPDX-License-Identifier: GPL-2.0

//! Chunks read whole, kept in a bounded per-mount cache: zstd-compressed ones decompressed,
//! uncompressed ones as stored.
//!
//! A compressed chunk cannot be read at an offset, so the first read of a page of it
//! decompresses all of it (a chunk is at most a few hundred KiB); the result is cached so that
//! reading the file sequentially decompresses each chunk once, not once per page. An
//! uncompressed chunk of up to [`MAX_CHUNK`] bytes is read whole as well, in one direct read
//! (`RegularFile::read_to_vec`): it never enters the blob's page cache, which would only hold
//! a second copy of what the file's pages get, and the readers of its other pieces (the next
//! readahead window, the next small file stored in it) find it here. The cache holds at most
//! [`SLOTS`] chunks and [`MAX_CACHE_BYTES`] bytes, least recently used out first.
//!
//! A chunk being read is marked as such (up to [`LOADING`] at a time): a second reader of it,
//! such as the work item filling the next readahead window while the reader of this one reads
//! the chunk they share, waits for the first instead of reading it again.
//!
//! Decompression runs outside the cache lock, so that readers of different chunks proceed in
//! parallel; each takes a decompression context from a small per-mount pool (or makes one when
//! all are busy) and gives it back afterwards, at most [`POOL`] being kept.
//!
//! The cache gives its memory back under memory pressure: it is a [`Shrink`] (counted in
//! pages, least recently used chunks freed first). Nothing allocates while holding its lock,
//! so reclaim entered from an allocation of this file system never waits for that lock.

#![forbid(unsafe_code)]

use crate::blob::{same_digest, OpenError};
use crate::mount::Info;
use kernel::fs::file::RegularFile;
use kernel::page::PAGE_SIZE;
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::shrinker::Shrink;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};
use kernel::zstd::Decompressor;
use puzzlefs_format::{Digest, HexDigest};

/// Largest compressed chunk blob accepted.
const MAX_COMPRESSED: usize = 16 << 20;
/// Largest decompressed chunk accepted, and largest uncompressed chunk blob read whole (a
/// larger one is read piece by piece).
pub(crate) const MAX_CHUNK: usize = 4 << 20;
/// Number of cached chunks.
const SLOTS: usize = 32;
/// Bytes of decompressed chunks kept per mount.
const MAX_CACHE_BYTES: usize = 8 << 20;
/// Idle decompression contexts kept per mount (a context is ~100 KiB of workspace).
const POOL: usize = 4;
/// Chunks marked as being read at a time (more are read unmarked: possibly twice).
const LOADING: usize = 24;
/// Most chunks [`prefetch`] reads at once.
pub(crate) const PREFETCH: usize = 16;
/// Most bytes of chunk blobs [`prefetch`] reads at once.
const PREFETCH_BYTES: u64 = 4 << 20;

/// A chunk: its blob's digest, and whether it is compressed (one blob read both ways is two
/// chunks).
pub(crate) type Key = (Digest, bool);

/// Whether `a` and `b` are the same chunk.
pub(crate) fn same(a: &Key, b: &Key) -> bool {
    a.1 == b.1 && same_digest(&a.0, &b.0)
}

/// At most [`PREFETCH`] chunks, kept on the stack: the chunks a readahead window reads at once.
pub(crate) struct Keys {
    keys: [Key; PREFETCH],
    len: usize,
}

impl Keys {
    /// None.
    pub(crate) const fn new() -> Self {
        Keys {
            keys: [([0; puzzlefs_format::DIGEST_LEN], false); PREFETCH],
            len: 0,
        }
    }

    /// The chunks, in the order they were added.
    pub(crate) fn as_slice(&self) -> &[Key] {
        self.keys.get(..self.len).unwrap_or(&[])
    }

    /// Whether `key` is one of them.
    pub(crate) fn contains(&self, key: &Key) -> bool {
        self.as_slice().iter().any(|k| same(k, key))
    }

    /// Adds `key`; `false` if full.
    pub(crate) fn push(&mut self, key: Key) -> bool {
        match self.keys.get_mut(self.len) {
            Some(k) => {
                *k = key;
                self.len += 1;
                true
            }
            None => false,
        }
    }
}

struct Slot {
    key: Key,
    data: Arc<KVVec<u8>>,
    used: u64,
}

/// The decompressed-chunk cache of a mount, which memory reclaim may shrink.
#[pin_data]
pub(crate) struct DecompressedChunks {
    #[pin]
    cache: Mutex<ChunkCache>,
    /// Signalled when a chunk marked as being read is no longer.
    #[pin]
    loaded: CondVar,
}

impl DecompressedChunks {
    /// An empty cache.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            cache <- ChunkCache::new(),
            loaded <- new_condvar!("DecompressedChunks::loaded"),
        })
    }
}

impl Shrink for DecompressedChunks {
    fn count(&self) -> usize {
        self.cache.lock().bytes.div_ceil(PAGE_SIZE)
    }

    fn scan(&self, nr: usize) -> Option<usize> {
        let mut victims = [const { None }; SLOTS];
        let freed = self.cache.lock().evict(nr, &mut victims);
        // The chunks are freed here, after the lock is released (unless a reader still holds
        // one, which then frees it when done).
        drop(victims);
        Some(freed)
    }
}

/// The cached chunks and the decompression contexts, behind the lock of
/// [`DecompressedChunks`].
struct ChunkCache {
    slots: [Option<Slot>; SLOTS],
    bytes: usize,
    clock: u64,
    /// Idle decompression contexts, made on demand and reused.
    idle: [Option<Decompressor>; POOL],
    /// Chunks being read (by digest and compression), not yet in `slots`.
    loading: [Option<Key>; LOADING],
}

impl ChunkCache {
    /// An empty cache, behind a mutex.
    fn new() -> impl PinInit<Mutex<ChunkCache>> {
        new_mutex!(ChunkCache {
            slots: [const { None }; SLOTS],
            bytes: 0,
            clock: 0,
            idle: [const { None }; POOL],
            loading: [const { None }; LOADING],
        })
    }

    fn is_loading(&self, key: &Key) -> bool {
        self.loading.iter().flatten().any(|k| same(k, key))
    }

    /// Whether chunk `key` is neither cached nor being read.
    fn wanted(&self, key: &Key) -> bool {
        !self.contains(key) && !self.is_loading(key)
    }

    /// Marks chunk `key` as being read; `false` if too many are.
    fn mark_loading(&mut self, key: &Key) -> bool {
        match self.loading.iter_mut().find(|k| k.is_none()) {
            Some(free) => {
                *free = Some(*key);
                true
            }
            None => false,
        }
    }

    fn unmark_loading(&mut self, key: &Key) {
        if let Some(k) = self
            .loading
            .iter_mut()
            .find(|k| k.as_ref().is_some_and(|k| same(k, key)))
        {
            *k = None;
        }
    }

    fn take_decompressor(&mut self) -> Option<Decompressor> {
        self.idle.iter_mut().find_map(Option::take)
    }

    /// Keeps `d` for later use if the pool has room; drops it otherwise.
    fn put_decompressor(&mut self, d: Decompressor) {
        if let Some(free) = self.idle.iter_mut().find(|s| s.is_none()) {
            *free = Some(d);
        }
    }

    fn contains(&self, key: &Key) -> bool {
        self.slots.iter().flatten().any(|s| same(&s.key, key))
    }

    fn get(&mut self, key: &Key) -> Option<Arc<KVVec<u8>>> {
        self.clock = self.clock.wrapping_add(1);
        let clock = self.clock;
        let slot = self
            .slots
            .iter_mut()
            .flatten()
            .find(|s| same(&s.key, key))?;
        slot.used = clock;
        Some(slot.data.clone())
    }

    /// Takes the least recently used chunk out of the cache.
    fn take_lru(&mut self) -> Option<Slot> {
        let old = self
            .slots
            .iter_mut()
            .filter(|s| s.is_some())
            .min_by_key(|s| s.as_ref().map_or(0, |s| s.used))?
            .take()?;
        self.bytes -= old.data.len();
        Some(old)
    }

    /// Takes least recently used chunks out until at least `pages` pages of them are out or
    /// none is left; they go into `out` (freed by the caller, after unlocking). Returns the
    /// number of pages taken out.
    fn evict(&mut self, pages: usize, out: &mut [Option<Arc<KVVec<u8>>>; SLOTS]) -> usize {
        let mut freed = 0;
        for o in out.iter_mut() {
            if freed >= pages {
                break;
            }
            let Some(old) = self.take_lru() else {
                break;
            };
            freed += old.data.len().div_ceil(PAGE_SIZE);
            *o = Some(old.data);
        }
        freed
    }

    fn insert(&mut self, key: &Key, data: &Arc<KVVec<u8>>) {
        let len = data.len();
        if len > MAX_CACHE_BYTES || self.get(key).is_some() {
            return;
        }
        loop {
            let free = self.slots.iter().position(|s| s.is_none());
            if let (Some(i), true) = (free, self.bytes + len <= MAX_CACHE_BYTES) {
                self.slots[i] = Some(Slot {
                    key: *key,
                    data: data.clone(),
                    used: self.clock,
                });
                self.bytes += len;
                return;
            }
            if self.take_lru().is_none() {
                return;
            }
        }
    }
}

/// A chunk blob, for the pieces of it a read needs.
pub(crate) enum Whole {
    /// Its bytes (decompressed if it is compressed).
    Bytes(Arc<KVVec<u8>>),
    /// An uncompressed blob larger than [`MAX_CHUNK`]: not read whole, its pieces are read
    /// from the blob.
    Ranged,
}

/// Returns chunk blob `digest` read whole: its decompressed contents if `compressed`, its
/// bytes otherwise (or [`Whole::Ranged`], if it is too large to read whole).
pub(crate) fn chunk(info: &Info, ino: u64, digest: &Digest, compressed: bool) -> Result<Whole> {
    let chunks = info.chunks();
    let key = (*digest, compressed);
    let mut cache = chunks.cache.lock();
    let marked = loop {
        if let Some(data) = cache.get(&key) {
            return Ok(Whole::Bytes(data));
        }
        if !cache.is_loading(&key) {
            break cache.mark_loading(&key);
        }
        // Another reader is reading it: wait for that read (then it is cached, or that
        // reader failed and this one tries).
        chunks.loaded.wait(&mut cache);
    };
    drop(cache);
    let read = read_whole(info, &chunks.cache, digest, compressed).map_err(|e| e.log(ino, digest));
    let mut cache = chunks.cache.lock();
    if marked {
        cache.unmark_loading(&key);
    }
    let result = match read {
        Ok(Whole::Bytes(data)) => {
            // Another reader may have read the same chunk meanwhile (unmarked): keep one copy.
            match cache.get(&key) {
                Some(cached) => Ok(Whole::Bytes(cached)),
                None => {
                    cache.insert(&key, &data);
                    Ok(Whole::Bytes(data))
                }
            }
        }
        other => other,
    };
    drop(cache);
    if marked {
        chunks.loaded.notify_all();
    }
    result
}

/// Reads the chunks of `keys` (the first [`PREFETCH`]) that are neither cached nor being read
/// into the cache, their blobs' direct reads submitted together
/// (`RegularFile::read_to_vecs`), when there are two or more: the fill of a readahead window
/// that needs several chunks then waits for the device once, not once per chunk.
///
/// Only a way to make the reads that follow faster: a chunk that cannot be read here (or is
/// too large for this) is left to them, and they report the error. The chunks are marked as
/// being read meanwhile, so that those reads wait for these instead of reading them again.
pub(crate) fn prefetch(info: &Info, keys: &Keys) {
    let chunks = info.chunks();
    let mut mine = Keys::new();
    {
        let mut cache = chunks.cache.lock();
        let keys = keys.as_slice();
        if keys.iter().filter(|key| cache.wanted(key)).count() < 2 {
            return;
        }
        for key in keys {
            // `mine` holds as many as `keys`: never full here.
            if cache.wanted(key) && cache.mark_loading(key) && !mine.push(*key) {
                cache.unmark_loading(key);
            }
        }
    }
    read_marked(info, &chunks.cache, mine.as_slice());
    let mut cache = chunks.cache.lock();
    for key in mine.as_slice() {
        cache.unmark_loading(key);
    }
    drop(cache);
    chunks.loaded.notify_all();
}

/// Whether any chunk of `keys` is neither cached nor being read.
pub(crate) fn any_wanted(info: &Info, keys: &Keys) -> bool {
    let cache = info.chunks().cache.lock();
    keys.as_slice().iter().any(|key| cache.wanted(key))
}

/// [`prefetch`]'s reads of the chunks of `keys`, marked as being read, into the cache: the
/// blobs are taken in the order of `keys` until [`PREFETCH_BYTES`] is spent. Nothing is logged
/// here: a chunk that fails is read again by the fill that needs it, which logs why (once, and
/// only if a reader needs it).
fn read_marked(info: &Info, cache: &Mutex<ChunkCache>, keys: &[Key]) {
    let Ok(mut files) = KVec::with_capacity(keys.len(), GFP_KERNEL) else {
        return;
    };
    let mut left = PREFETCH_BYTES;
    for key in keys {
        let Ok(file) = info.open_blob(&key.0) else {
            continue;
        };
        let Ok(size) = file.size() else { continue };
        if size > chunk_max(key.1) as u64 {
            continue;
        }
        // The budget is spent: the blobs after this one are not even opened.
        let Some(rest) = left.checked_sub(size) else {
            break;
        };
        left = rest;
        if files.push((*key, file), GFP_KERNEL).is_err() {
            return;
        }
    }
    let Ok(mut refs) = KVec::with_capacity(files.len(), GFP_KERNEL) else {
        return;
    };
    for (_, file) in files.iter() {
        if refs.push(&**file, GFP_KERNEL).is_err() {
            return;
        }
    }
    let Ok(read) = RegularFile::read_to_vecs(&refs, MAX_COMPRESSED) else {
        return;
    };
    for ((key, file), src) in files.iter().zip(read) {
        // One chunk decompressed at a time, each cached before the next.
        if let Ok(data) = src
            .map_err(ChunkError::Read)
            .and_then(|src| finish(cache, file, key.1, src))
        {
            cache.lock().insert(key, &data);
        }
    }
}

/// The largest chunk blob read whole: compressed, or not.
fn chunk_max(compressed: bool) -> usize {
    if compressed {
        MAX_COMPRESSED
    } else {
        MAX_CHUNK
    }
}

/// Why a chunk could not be read whole.
enum ChunkError {
    /// Its blob cannot be opened or used.
    Open(OpenError),
    /// Its blob cannot be read.
    Read(Error),
    /// It is compressed and is not a valid zstd frame of at most [`MAX_CHUNK`] bytes.
    Frame,
    /// Anything else (out of memory), not logged.
    Other(Error),
}

impl From<kernel::alloc::AllocError> for ChunkError {
    fn from(_: kernel::alloc::AllocError) -> Self {
        ChunkError::Other(ENOMEM)
    }
}

impl ChunkError {
    /// Logs (rate-limited) that inode `ino` cannot read chunk blob `digest` for this reason;
    /// returns the errno of the read.
    fn log(self, ino: u64, digest: &Digest) -> Error {
        let hex = HexDigest(digest);
        match self {
            ChunkError::Open(e) => return e.log(ino, digest),
            ChunkError::Read(e) => {
                pr_err_ratelimited!("inode {}: cannot read chunk blob {}: {:?}\n", ino, hex, e)
            }
            ChunkError::Frame => pr_err_ratelimited!(
                "inode {}: chunk blob {} is not a valid zstd frame\n",
                ino,
                hex
            ),
            ChunkError::Other(e) => return e,
        }
        EIO
    }
}

/// Reads chunk blob `digest` whole, decompressing it if `compressed` (see [`chunk`]), outside
/// the cache lock.
fn read_whole(
    info: &Info,
    chunks: &Mutex<ChunkCache>,
    digest: &Digest,
    compressed: bool,
) -> Result<Whole, ChunkError> {
    let file = info.open_blob(digest).map_err(ChunkError::Open)?;
    if !compressed && file.size().map_err(ChunkError::Other)? > MAX_CHUNK as u64 {
        return Ok(Whole::Ranged);
    }
    let src = file
        .read_to_vec(chunk_max(compressed))
        .map_err(ChunkError::Read)?;
    finish(chunks, &file, compressed, src).map(Whole::Bytes)
}

/// The chunk whose blob `file` was read whole into `src`, ready to be cached: decompressed if
/// `compressed`, allocated before taking the cache lock (see the module docs).
fn finish(
    chunks: &Mutex<ChunkCache>,
    file: &RegularFile,
    compressed: bool,
    src: KVVec<u8>,
) -> Result<Arc<KVVec<u8>>, ChunkError> {
    // Only what is read here is used from now on (cached here and in the file's pages): pages
    // a buffered read left in the blob's page cache would be a second copy.
    file.drop_cached(0, u64::MAX);
    let data = if compressed {
        decompress(chunks, &src)?
    } else {
        src
    };
    Ok(Arc::new(data, GFP_KERNEL)?)
}

/// Decompresses `src`, the zstd frame of a chunk blob, with a context of the pool.
fn decompress(chunks: &Mutex<ChunkCache>, src: &[u8]) -> Result<KVVec<u8>, ChunkError> {
    let idle = chunks.lock().take_decompressor();
    let mut decompressor = match idle {
        Some(d) => d,
        None => Decompressor::new().map_err(ChunkError::Other)?,
    };
    let data = decompressor.decompress(src, MAX_CHUNK);
    chunks.lock().put_decompressor(decompressor);
    data.map_err(|_| ChunkError::Frame)
}
