// SPDX-License-Identifier: GPL-2.0

//! Directories: lookup and readdir, through the layers.
//!
//! A directory's listing comes from the top-most layer that holds the directory (builders
//! write the complete listing of a changed directory into the new layer); entries whose inode
//! is a whiteout there are hidden.

#![forbid(unsafe_code)]

use crate::error::{inode_error, ResultExt};
use crate::inode::{iget, DirOrder, Extra, LazyOrder};
use crate::meta::Dir;
use crate::PuzzleFs;
use core::cmp::Ordering;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kernel::fs::{
    dir::{DirEmitter, DirEntryType, NAME_MAX},
    inode::{INode, INodeRef},
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use puzzlefs_format::{Error as FormatError, InodeKind};

fn entry_type(kind: InodeKind) -> DirEntryType {
    match kind {
        InodeKind::Dir => DirEntryType::Dir,
        InodeKind::File => DirEntryType::Reg,
        InodeKind::Lnk => DirEntryType::Lnk,
        InodeKind::Fifo => DirEntryType::Fifo,
        InodeKind::Sock => DirEntryType::Sock,
        InodeKind::Chr => DirEntryType::Chr,
        InodeKind::Blk => DirEntryType::Blk,
        InodeKind::Unknown | InodeKind::Wht => DirEntryType::Unknown,
    }
}

/// Entry index `k` of `dir` in name order.
fn nth_in_order(order: &DirOrder, k: u32) -> Result<u32, FormatError> {
    match order {
        DirOrder::Index(order) => order.get(k as usize).copied().ok_or(FormatError::Bounds),
        _ => Ok(k),
    }
}

/// Binary search for `name` (the first entry of that name in name order): never a scan, so a
/// miss costs what a hit does, one name more at most.
///
/// In a directory stored sorted, the entry at `next`, after the one the last lookup found, is
/// compared first: programs that walk a tree look names up in the order readdir lists them,
/// which is name order, so that entry is usually the one looked for, found with one name read
/// instead of a binary search's. Otherwise it narrows the search. Any `next` gives the same
/// answer, as a name is at one index at most there.
///
/// Names are compared where they are stored (page by page), not copied.
fn search(
    dir: &Dir<'_, '_>,
    order: &DirOrder,
    name: &[u8],
    next: &AtomicU32,
) -> Result<Option<u64>, FormatError> {
    let (mut lo, mut hi) = (0u32, dir.len());
    let at = next.load(Relaxed);
    if matches!(order, DirOrder::Sorted) && at < hi {
        match dir.entry_name(at)?.cmp_slice(name)? {
            Ordering::Less => lo = at + 1,
            Ordering::Greater => hi = at,
            Ordering::Equal => {
                next.store(at.saturating_add(1), Relaxed);
                return dir.entry_ino(at).map(Some);
            }
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if dir.entry_name(nth_in_order(order, mid)?)?.cmp_slice(name)? == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == dir.len() {
        return Ok(None);
    }
    let index = nth_in_order(order, lo)?;
    if !dir.entry_name(index)?.eq_slice(name)? {
        return Ok(None);
    }
    next.store(lo.saturating_add(1), Relaxed);
    dir.entry_ino(index).map(Some)
}

/// The inode number `name` has in `dir`, whose name order `order` keeps (`next`: see
/// [`search`]).
fn find(
    dir: &Dir<'_, '_>,
    order: &LazyOrder,
    next: &AtomicU32,
    name: &[u8],
) -> Result<Option<u64>> {
    let dir_ino = dir.ino();
    let order = order.get(dir)?;
    match &*order {
        DirOrder::Damaged => {
            pr_err_ratelimited!("inode {}: directory with an unreadable name\n", dir_ino);
            Err(EUCLEAN)
        }
        DirOrder::TooLarge => {
            pr_err_ratelimited!("inode {}: unsorted directory too large\n", dir_ino);
            Err(EUCLEAN)
        }
        order => search(dir, order, name, next).inode(dir_ino),
    }
}

/// Looks `name` up in `parent`.
pub(crate) fn lookup(parent: &INode<PuzzleFs>, name: &[u8]) -> Result<Option<INodeRef<PuzzleFs>>> {
    if name.len() > NAME_MAX {
        return Err(ENAMETOOLONG);
    }
    let sb = parent.super_block();
    let info = sb.data();
    let dir_ino = parent.ino();
    let data = parent.data();
    let Extra::Dir { order, place, next } = &data.extra else {
        return Err(ENOTDIR);
    };
    let ino = match place {
        Some(place) => info.with_blob(data.layer, |blob| {
            find(&blob.dir_at(place), order, next, name)
        }),
        None => info.with_inode(dir_ino, data.layer, data.pos, |i| {
            find(&i.dir().inode(dir_ino)?, order, next, name)
        }),
    }?;
    let Some(ino) = ino else {
        return Ok(None);
    };
    match iget(sb, ino) {
        Ok(inode) => Ok(Some(inode)),
        // A whiteout hides the name.
        Err(e) if e == ENOENT => Ok(None),
        Err(e) => Err(e),
    }
}

/// Emits the entries of `dir` from the emitter's position on; position `2 + i` is entry `i`.
///
/// The position is any value a caller can `lseek` a directory to (0 to `i64::MAX`, see
/// `generic_file_llseek`): positions past the last entry, including those past `u32::MAX + 2`
/// that no entry index can reach, list nothing.
pub(crate) fn read_dir(dir: &INode<PuzzleFs>, emitter: &mut DirEmitter<'_>) -> Result {
    let dir_ino = dir.ino();
    let data = dir.data();
    let Extra::Dir { place, .. } = &data.extra else {
        return Err(ENOTDIR);
    };
    let Some(start) = emitter
        .pos()
        .checked_sub(2)
        .and_then(|i| u32::try_from(i).ok())
    else {
        return Ok(());
    };
    dir.super_block().data().with_layers(|blobs| {
        let d = match place {
            Some(place) => blobs.dir_at(data.layer, place)?,
            None => blobs.find(dir_ino).and_then(|i| i.dir()).inode(dir_ino)?,
        };
        // Per layer, where the search for the last entry's inode ended: the builders number a
        // directory's entries one after the other, so the next one is found there, without a
        // binary search of the layer.
        let mut hints = KVec::from_elem(0u32, blobs.count(), GFP_KERNEL)?;
        let mut name = [0u8; puzzlefs_format::NAME_MAX];
        // A `Range` of indices, never a `RangeFrom`: it stops at the last entry instead of
        // stepping past `u32::MAX`.
        for index in start..d.len() {
            // The entry count comes from the image: yield the CPU on long listings.
            cond_resched();
            let entry = match d.entry(index, &mut name) {
                // Inode number 0 is never valid (C libraries skip entries that have it), and
                // any stand-in number could be a real inode of the image: hide the entry, as
                // one with a bad name. Looking it up by name reports the damage (EUCLEAN).
                Ok(entry) if entry.ino == 0 => {
                    pr_err_ratelimited!("inode {}: entry {} skipped: inode 0\n", dir_ino, index);
                    emitter.skip();
                    continue;
                }
                Ok(entry) => entry,
                // A name that cannot be listed (empty, too long, `.`, `..`, with a `/` or a
                // NUL): `Dir::entry` fails with `Corrupt` for that and nothing else. Hide the
                // entry, so that the rest of the directory stays listable. An entry that has no
                // inode number either is not an entry with a bad name but a damaged list (say,
                // a list of bytes read as entries): that fails the listing, as other damage.
                Err(FormatError::Corrupt { what }) if d.entry_ino(index).is_ok_and(|i| i != 0) => {
                    pr_err_ratelimited!("inode {}: entry {} skipped: {}\n", dir_ino, index, what);
                    emitter.skip();
                    continue;
                }
                Err(e) => return Err(inode_error(dir_ino, e)),
            };
            let kind = match blobs
                .find_hinted(entry.ino, &mut hints)
                .and_then(|i| i.kind())
            {
                Ok(kind) => kind,
                Err(FormatError::Whiteout(_)) => {
                    emitter.skip();
                    continue;
                }
                // A metadata page that cannot be read fails the listing.
                Err(FormatError::Io) => return Err(EIO),
                // A damaged entry is listed as of unknown type; looking it up reports the
                // damage (EUCLEAN), so the rest of the directory stays readable.
                Err(_) => InodeKind::Unknown,
            };
            let entry_name = name.get(..entry.name_len).ok_or(EUCLEAN)?;
            if !emitter.emit(entry_name, entry.ino, entry_type(kind)) {
                break;
            }
        }
        Ok(())
    })
}
