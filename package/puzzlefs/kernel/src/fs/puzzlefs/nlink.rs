// SPDX-License-Identifier: GPL-2.0

//! Link counts: the number of directory entries of the image that name each inode.
//!
//! The format stores no link count, and hard links share one inode number. The first time a
//! mount describes a non-directory inode (not at mount: mounting stays as cheap for a
//! hundred thousand inodes as for ten), the entries of every directory the image shows (each
//! directory's listing comes from the top-most layer holding it) are counted per inode, and
//! the inodes named more than once are kept in a table sorted by inode number (16 bytes
//! each); all others have one name.
//!
//! Directories report 1, as btrfs does: `find` and `fts` read a link count below 2 as
//! "unknown" and look at every entry, while `2 + subdirectories` is only a promise, which an
//! image cannot be trusted to keep (a hidden or damaged entry, two names for one directory)
//! and which, when wrong, makes `find` skip entries.
//!
//! Bounds: the count reads each metadata layer once within its read budget (8 times its size,
//! see `puzzlefs_format`), plus one binary search per upper layer for each directory, and
//! yields the CPU on the way; it keeps at most [`MAX_COUNTED`] inode numbers (32 MiB) while
//! sorting them, and frees them before the table is kept. An image with more entries than
//! that, or whose metadata cannot be walked, gets link count 1 everywhere (and a message):
//! counts are informative, never a reason to refuse a mount.

#![forbid(unsafe_code)]

use crate::meta::{Blob, Layer, Metadata};
use crate::sort::heapsort_by;
use kernel::fs::inode::{Params, Type};
use kernel::prelude::*;
use kernel::sched::cond_resched;
use puzzlefs_format::{Error as FormatError, InodeKind, NAME_MAX};

/// Most directory entries counted (4 Mi inode numbers: 32 MiB while the table is made).
const MAX_COUNTED: usize = 4 << 20;

/// Steps of work between two `cond_resched()` calls in the loops below.
const STEP: usize = 4096;

/// The link counts above 1, sorted by inode number.
pub(crate) struct Nlinks(KVVec<(u64, u32)>);

/// Why counting stopped.
enum Stop {
    Format(FormatError),
    TooMany,
    Alloc(Error),
}

impl From<FormatError> for Stop {
    fn from(e: FormatError) -> Self {
        Stop::Format(e)
    }
}

impl Nlinks {
    /// No counts: every inode has link count 1.
    pub(crate) fn none() -> Self {
        Nlinks(KVVec::new())
    }

    /// Counts the names of every inode in `layers` (the metadata blobs, top layer first).
    pub(crate) fn count(layers: &[Metadata]) -> Self {
        match count(layers) {
            Ok(n) => n,
            Err(Stop::Format(e)) => {
                pr_info!("link counts not computed ({}): every inode shows 1\n", e);
                Self::none()
            }
            Err(Stop::TooMany) => {
                pr_info!(
                    "link counts not computed (more than {} entries): every inode shows 1\n",
                    MAX_COUNTED
                );
                Self::none()
            }
            Err(Stop::Alloc(e)) => {
                pr_info!("link counts not computed ({:?}): every inode shows 1\n", e);
                Self::none()
            }
        }
    }

    /// The link count of inode `ino` (of a non-directory).
    pub(crate) fn get(&self, ino: u64) -> u32 {
        match self.0.binary_search_by_key(&ino, |&(i, _)| i) {
            Ok(at) => self.0.get(at).map_or(1, |&(_, n)| n),
            Err(_) => 1,
        }
    }

    /// `params` with the link count of inode `ino` (directories keep theirs).
    pub(crate) fn apply(&self, ino: u64, params: Params) -> Params {
        match params.typ {
            Type::Dir => params,
            _ => Params {
                nlink: self.get(ino),
                ..params
            },
        }
    }
}

/// Whether a layer above `layers[i]` holds inode `ino` (so that the copy in layer `i` is
/// hidden). Each upper blob is parsed afresh: a parse is cheap and brings its own read budget.
fn held_above(layers: &[Metadata], i: usize, ino: u64) -> Result<bool, FormatError> {
    for meta in layers.iter().take(i) {
        let blob = Blob::parse(meta)?;
        if blob.layer()?.find(ino)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

fn count_layer(
    layers: &[Metadata],
    i: usize,
    layer: Layer<'_, '_>,
    names: &mut KVVec<u64>,
) -> Result<(), Stop> {
    let mut name = [0u8; NAME_MAX];
    for n in 0..layer.len() {
        if n as usize % STEP == 0 {
            cond_resched();
        }
        let inode = layer.inode_at(n)?;
        // Other kinds (and damaged inodes) hold no entries.
        if !matches!(inode.kind(), Ok(InodeKind::Dir)) || held_above(layers, i, inode.ino()?)? {
            continue;
        }
        let Ok(dir) = inode.dir() else {
            continue;
        };
        for index in 0..dir.len() {
            if index as usize % STEP == 0 {
                cond_resched();
            }
            // Entries readdir hides (bad names, inode 0) are no names.
            match dir.entry(index, &mut name) {
                Ok(e) if e.ino != 0 => {
                    if names.len() >= MAX_COUNTED {
                        return Err(Stop::TooMany);
                    }
                    names
                        .push(e.ino, GFP_KERNEL)
                        .map_err(|e| Stop::Alloc(e.into()))?;
                }
                Ok(_) | Err(FormatError::Corrupt { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

fn count(layers: &[Metadata]) -> Result<Nlinks, Stop> {
    let mut names = KVVec::new();
    for (i, meta) in layers.iter().enumerate() {
        let blob = Blob::parse(meta)?;
        count_layer(layers, i, blob.layer()?, &mut names)?;
    }
    heapsort_by(&mut names, |a, b| a < b);
    let mut table = KVVec::new();
    let mut at = 0;
    while let Some(&ino) = names.get(at) {
        let run = names
            .get(at..)
            .map_or(1, |rest| rest.iter().take_while(|&&x| x == ino).count());
        if run > 1 {
            table
                .push((ino, u32::try_from(run).unwrap_or(u32::MAX)), GFP_KERNEL)
                .map_err(|e| Stop::Alloc(e.into()))?;
        }
        at += run;
        cond_resched();
    }
    Ok(Nlinks(table))
}
