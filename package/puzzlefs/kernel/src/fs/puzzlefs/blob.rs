// SPDX-License-Identifier: GPL-2.0

//! Chunk blobs: a small per-mount cache of open blob files.
//!
//! Reading a file opens the chunk blobs that back each folio; keeping the last few open saves
//! a path walk per folio when a file is read sequentially.

#![forbid(unsafe_code)]

use kernel::fs::file::{PrivateMount, RegularFile};
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::{Digest, HexDigest};

/// Number of blob files kept open per mount.
const SLOTS: usize = 8;

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

/// Opens blob `digest` below `mount`, or returns it from `cache`.
pub(crate) fn open(
    mount: &PrivateMount,
    cache: &Mutex<BlobCache>,
    digest: &Digest,
) -> Result<Arc<RegularFile>> {
    {
        let mut c = cache.lock();
        c.clock = c.clock.wrapping_add(1);
        let clock = c.clock;
        if let Some(slot) = c.slots.iter_mut().flatten().find(|s| s.digest == *digest) {
            slot.used = clock;
            return Ok(slot.file.clone());
        }
    }
    let path = CString::try_from_fmt(format_args!("blobs/sha256/{}", HexDigest(digest)))?;
    let file = Arc::new(mount.open(&path)?, GFP_KERNEL)?;
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
