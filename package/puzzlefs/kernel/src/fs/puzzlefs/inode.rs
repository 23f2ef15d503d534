// SPDX-License-Identifier: GPL-2.0

//! Inodes: from the metadata to the VFS.

#![forbid(unsafe_code)]

use crate::error::{inode_error, ResultExt};
use crate::meta::{Bytes, Dir, File, Inode};
use crate::sort::heapsort_by;
use crate::PuzzleFs;
use core::sync::atomic::AtomicU32;
use kernel::fs::{
    inode::{self, INodeRef, Lookup, Params, Type},
    sb::SuperBlock,
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::paged::{DirPlace, FilePlace};
use puzzlefs_format::{Error as FormatError, InodeKind};

/// One file offset of a chunk start is kept per this many chunks ([`InodeData`]).
pub(crate) const CHUNK_STRIDE: u32 = 16;
/// Largest unsorted directory whose name order is built (the entries are sorted in memory).
const MAX_UNSORTED_ENTRIES: u32 = 1 << 20;
/// Most name bytes copied to build the name order of an unsorted directory.
const MAX_UNSORTED_NAME_BYTES: usize = 64 << 20;

/// How a directory's entries are searched by name.
pub(crate) enum DirOrder {
    /// Stored sorted by name (strictly: no duplicates), as the format requires: binary search.
    Sorted,
    /// Stored unsorted (the other implementation writes whiteout entries first in the
    /// directories of a delta layer): entry indices in name order (ties in stored order),
    /// built at the first lookup.
    Index(KVVec<u32>),
    /// The entry list or a name could not be read when the order was checked: lookups fail
    /// with `EUCLEAN` (readdir still lists what it can).
    Damaged,
    /// Unsorted, and larger than `MAX_UNSORTED_ENTRIES` or with more than
    /// `MAX_UNSORTED_NAME_BYTES` of names: lookups fail with `EUCLEAN`.
    TooLarge,
}

/// A directory's [`DirOrder`], checked at its first lookup rather than when the inode is made:
/// the check reads every name, which a mount (of a large root) or a `stat` should not pay for,
/// and readdir does not need. The answer, failures included, is kept, so that each directory
/// is checked once.
pub(crate) struct LazyOrder(Arc<Mutex<Option<Arc<DirOrder>>>>);

impl LazyOrder {
    fn new() -> Result<Self> {
        Ok(LazyOrder(Arc::pin_init(new_mutex!(None), GFP_KERNEL)?))
    }

    /// The order of `dir` (the directory this was made for), checked now if it was not yet.
    /// Concurrent first lookups wait for one check.
    pub(crate) fn get(&self, dir: &Dir<'_, '_>) -> Result<Arc<DirOrder>> {
        let mut order = self.0.lock();
        if let Some(order) = &*order {
            return Ok(order.clone());
        }
        let checked = Arc::new(dir_order(dir)?, GFP_KERNEL)?;
        *order = Some(checked.clone());
        Ok(checked)
    }

    /// The order of a directory whose entry list cannot be read.
    fn damaged() -> Result<Self> {
        Ok(LazyOrder(Arc::pin_init(
            new_mutex!(Some(Arc::new(DirOrder::Damaged, GFP_KERNEL)?)),
            GFP_KERNEL,
        )?))
    }
}

/// What an inode's operations need beyond the VFS inode, found once when the inode is made.
pub(crate) enum Extra {
    /// Regular file: `starts[k]` is the file offset of chunk `k * CHUNK_STRIDE`, so mapping a
    /// folio is a binary search plus fewer than `CHUNK_STRIDE` chunk steps (empty for a file of
    /// at most `CHUNK_STRIDE` chunks, which every mapping walks from chunk 0: most files, whose
    /// inodes then allocate nothing for it); `place` is where its chunk list is in the layer,
    /// so that a read does not find the inode again.
    File {
        starts: KVVec<u64>,
        place: FilePlace,
    },
    /// Directory: its name order, and where its entry list is in the layer (`None` if it
    /// cannot be read: lookups and readdir then find the inode again and report the damage).
    Dir {
        order: LazyOrder,
        place: Option<DirPlace>,
        /// The entry after the one the last lookup found: where the next lookup looks first
        /// (see `dir::search`). Only a guess, which any value may be.
        next: AtomicU32,
    },
    /// Anything else.
    Other,
}

/// The per-inode data of puzzlefs: where the inode is in the metadata, so that no operation
/// searches the layers again, and [`Extra`].
pub(crate) struct InodeData {
    /// Index of the layer holding the inode (top first).
    pub(crate) layer: u32,
    /// Position of the inode in that layer.
    pub(crate) pos: u32,
    pub(crate) extra: Extra,
}

/// Builds the chunk-start index of a regular file and finds its size (one walk of its chunk
/// list); fails on a zero-length chunk (the format's writers never make one, and a list of them
/// would let one folio walk without bound).
fn chunk_starts(ino: u64, file: &File<'_, '_>) -> Result<(KVVec<u64>, u64)> {
    let count = file.chunk_count();
    let indexed = count > CHUNK_STRIDE;
    let mut starts = KVVec::new();
    if indexed {
        starts.reserve((count / CHUNK_STRIDE + 1) as usize, GFP_KERNEL)?;
    }
    let mut alloc = Ok(());
    let walked = file.for_each_chunk(|i, start, len| {
        if len == 0 {
            return Err(FormatError::Corrupt {
                what: "zero-length chunk",
            });
        }
        if indexed && i % CHUNK_STRIDE == 0 {
            // Capacity was reserved above; a failure is kept and reported below.
            if let Err(e) = starts.push(start, GFP_KERNEL) {
                alloc = Err(e);
            }
        }
        Ok(())
    });
    let size = walked.inode(ino)?;
    alloc?;
    Ok((starts, size))
}

/// Checks a directory's name order (see [`DirOrder`]).
fn dir_order(dir: &Dir<'_, '_>) -> Result<DirOrder> {
    match dir.is_sorted() {
        Ok(true) => return Ok(DirOrder::Sorted),
        Ok(false) => {}
        Err(FormatError::Io) => return Err(EIO),
        Err(_) => return Ok(DirOrder::Damaged),
    }
    let n = dir.len();
    let too_large = |what| {
        pr_err_ratelimited!(
            "inode {}: unsorted directory of {} entries: {} (at most {} entries and {} bytes of names accepted)\n",
            dir.ino(),
            n,
            what,
            MAX_UNSORTED_ENTRIES,
            MAX_UNSORTED_NAME_BYTES
        );
        Ok(DirOrder::TooLarge)
    };
    if n > MAX_UNSORTED_ENTRIES {
        return too_large("too many entries");
    }
    // The names are copied once (the metadata may be read page by page), then sorted as
    // (start, end, index) triples into `text`.
    let mut text = KVVec::new();
    let mut names = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
    for i in 0..n {
        if i % 4096 == 0 {
            cond_resched();
        }
        let name = match dir.entry_name(i) {
            Ok(name) => name,
            Err(FormatError::Io) => return Err(EIO),
            Err(_) => return Ok(DirOrder::Damaged),
        };
        let start = text.len();
        let end = start.saturating_add(name.len() as usize);
        if end > MAX_UNSORTED_NAME_BYTES {
            return too_large("names too long");
        }
        text.extend_with(end - start, 0, GFP_KERNEL)?;
        let copied = text
            .get_mut(start..end)
            .map(|buf| name.copy_to(buf).map(|_| ()));
        match copied {
            Some(Ok(())) => {}
            Some(Err(FormatError::Io)) => return Err(EIO),
            _ => return Ok(DirOrder::Damaged),
        }
        names.push((start, end, i), GFP_KERNEL)?;
    }
    // Ties are broken by index: an unstable sort gives the stable order.
    let name = |&(start, end, _): &(usize, usize, u32)| text.get(start..end).unwrap_or(&[]);
    heapsort_by(&mut names, |a, b| {
        name(a).cmp(name(b)).then(a.2.cmp(&b.2)).is_lt()
    });
    let mut order = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
    for (_, _, i) in names.iter() {
        order.push(*i, GFP_KERNEL)?;
    }
    Ok(DirOrder::Index(order))
}

/// The per-inode data of `inode`, of kind `kind`, at position `pos` of layer `layer`, and the
/// size of a regular file.
fn inode_data(
    layer: u32,
    pos: u32,
    ino: u64,
    kind: InodeKind,
    inode: &Inode<'_, '_>,
) -> Result<(InodeData, Option<u64>)> {
    let mut size = None;
    let extra = match kind {
        InodeKind::File => {
            let file = inode.file().inode(ino)?;
            let (starts, bytes) = chunk_starts(ino, &file)?;
            size = Some(bytes);
            Extra::File {
                starts,
                place: file.place(),
            }
        }
        // A directory whose entry list cannot be read is still made: readdir and lookups then
        // report the damage.
        InodeKind::Dir => match inode.dir() {
            Ok(dir) => Extra::Dir {
                order: LazyOrder::new()?,
                place: Some(dir.place()),
                next: AtomicU32::new(0),
            },
            Err(FormatError::Io) => return Err(EIO),
            Err(_) => Extra::Dir {
                order: LazyOrder::damaged()?,
                place: None,
                next: AtomicU32::new(0),
            },
        },
        _ => Extra::Other,
    };
    Ok((InodeData { layer, pos, extra }, size))
}

/// The VFS description of a metadata inode of kind `kind`; `file_size` is a regular file's
/// size, found by [`inode_data`].
///
/// Time stamps are 0 (the format has none), directories have one link (the number is not
/// stored, and 1 is what tools read as "unknown"), as have files: hard links share one inode
/// number, hence one inode, but their count is not stored either.
fn params(
    kind: InodeKind,
    inode: &Inode<'_, '_>,
    file_size: Option<u64>,
) -> Result<Params, FormatError> {
    let corrupt = |what| FormatError::Corrupt { what };
    let dev = |rdev: Option<puzzlefs_format::Rdev>| -> Result<(u32, u32), FormatError> {
        let rdev = rdev.ok_or(corrupt("device without numbers"))?;
        let major = u32::try_from(rdev.major).map_err(|_| corrupt("device major too large"))?;
        let minor = u32::try_from(rdev.minor).map_err(|_| corrupt("device minor too large"))?;
        if !inode::valid_dev(major, minor) {
            return Err(corrupt("device number out of range"));
        }
        Ok((major, minor))
    };
    let (typ, size) = match kind {
        InodeKind::Dir => (Type::Dir, 0),
        InodeKind::File => (Type::Reg, file_size.ok_or(FormatError::Io)?),
        InodeKind::Lnk => {
            let target = inode
                .symlink_target()?
                .ok_or(corrupt("symlink without target"))?;
            let len = target.len() as usize;
            if len == 0 || len > inode::SYMLINK_MAX || has_nul(&target)? {
                return Err(corrupt("symlink target empty, too long or with a NUL"));
            }
            (Type::Lnk, len as u64)
        }
        InodeKind::Fifo => (Type::Fifo, 0),
        InodeKind::Sock => (Type::Sock, 0),
        InodeKind::Chr => {
            let (major, minor) = dev(inode.rdev()?)?;
            (Type::Chr(major, minor), 0)
        }
        InodeKind::Blk => {
            let (major, minor) = dev(inode.rdev()?)?;
            (Type::Blk(major, minor), 0)
        }
        InodeKind::Unknown => return Err(corrupt("inode of unknown kind")),
        InodeKind::Wht => return Err(FormatError::Whiteout(inode.ino()?)),
    };
    Ok(Params {
        typ,
        mode: inode.permissions()?,
        size: i64::try_from(size).map_err(|_| FormatError::Overflow)?,
        nlink: 1,
        uid: inode.uid()?,
        gid: inode.gid()?,
    })
}

/// Whether `bytes` hold a NUL byte (scanned where they are stored).
fn has_nul(bytes: &Bytes<'_, '_>) -> Result<bool, FormatError> {
    Ok(!bytes.for_each_piece(|piece| !piece.contains(&0))?)
}

/// Returns the VFS inode for metadata inode `ino`, from the inode cache or made now.
///
/// The metadata is read only for an inode not yet cached. A whiteout is `ENOENT` (the name is
/// hidden); a missing inode (a dangling directory entry) or damaged metadata is `EUCLEAN`. A new
/// inode that cannot be described is dropped unused, which marks it bad (`iget_failed`).
pub(crate) fn iget(sb: &SuperBlock<PuzzleFs>, ino: u64) -> Result<INodeRef<PuzzleFs>> {
    let new = match sb.get_or_create_inode(ino)? {
        Lookup::Cached(inode) => return Ok(inode),
        Lookup::New(new) => new,
    };
    let found = sb.data().find_inode(ino, |layer, pos, kind, inode| {
        let (data, size) = inode_data(layer, pos, ino, kind, &inode)?;
        let params = params(kind, &inode, size)
            .map(|p| sb.data().apply_nlink(ino, p))
            .inode(ino)?;
        Ok((params, data))
    })?;
    let (params, data) = match found {
        Ok(found) => found,
        Err(FormatError::Whiteout(_)) => return Err(ENOENT),
        Err(e) => return Err(inode_error(ino, e)),
    };
    new.init(params, data).map_err(|e| {
        pr_err_ratelimited!("inode {}: cannot be described to the VFS: {:?}\n", ino, e);
        EUCLEAN
    })
}
