// SPDX-License-Identifier: GPL-2.0

//! Link counts: the number of directory entries of the image that name each inode.
//!
//! Hard links share one inode number, and the inodes store no link count. A manifest may
//! record the table of the inodes with more than one name (`Rootfs.linkCounts`, which the
//! builder of this tree writes): it is read at mount, and kept if every entry is in inode order
//! with a count of 2 or more. Otherwise (images of the other implementation, or a damaged
//! table), the first time a mount describes a non-directory inode (not at mount: mounting stays
//! as cheap for a hundred thousand inodes as for ten), the entries of every directory the
//! image shows (each directory's listing comes from the top-most layer holding it) are counted
//! per inode, and the inodes named more than once are kept in the same table sorted by inode
//! number (16 bytes each); all others have one name. Counting reads every page of the
//! metadata: on a Debian tree with a directory of 100,000 entries it was about a sixth of the
//! time of a first read of every file.
//!
//! Directories report 1, as btrfs does: `find` and `fts` read a link count below 2 as
//! "unknown" and look at every entry, while `2 + subdirectories` is only a promise, which an
//! image cannot be trusted to keep (a hidden or damaged entry, two names for one directory)
//! and which, when wrong, makes `find` skip entries.
//!
//! Bounds: a recorded table is at most as large as the manifest (16 bytes an entry) and at most
//! [`MAX_COUNTED`] entries. The count reads each metadata layer once within its read budget (8
//! times its size, see `puzzlefs_format`), plus one binary search per upper layer for each
//! directory, and yields the CPU on the way; it keeps at most [`MAX_COUNTED`] inode numbers (32
//! MiB) while sorting them, and frees them before the table is kept. An image with more entries
//! than that, or whose metadata cannot be walked, gets link count 1 everywhere (and a message):
//! counts are informative, never a reason to refuse a mount. A recorded table is trusted as the
//! manifest is (its digest is the mount's `image_manifest`); a wrong one gives wrong counts,
//! never a count below 1.

#![forbid(unsafe_code)]

use crate::meta::{Blob, Layer, Metadata};
use crate::sort::heapsort_by;
use kernel::fs::inode::{Params, Type};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use puzzlefs_format::{Error as FormatError, HexDigest, InodeKind, Manifest, NAME_MAX};

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

    /// The table manifest `digest` records, if it records one that can be used; `None` if it
    /// records none, or if it is damaged (a message says why): the names are then counted
    /// ([`Nlinks::count`]).
    pub(crate) fn recorded(manifest: &Manifest<'_>, digest: &[u8; 32]) -> Option<Self> {
        let why = match recorded(manifest) {
            Ok(table) => return table,
            Err(Stop::Format(e)) => e,
            Err(Stop::TooMany) => FormatError::Corrupt {
                what: "more link counts than a mount keeps",
            },
            Err(Stop::Alloc(e)) => {
                pr_err_ratelimited!("link-count table not read ({:?}): names counted\n", e);
                return None;
            }
        };
        pr_err_ratelimited!(
            "manifest {}: link-count table not used ({}): names counted\n",
            HexDigest(digest),
            why
        );
        None
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

/// The table `manifest` records, checked entry by entry (see `puzzlefs_format::LinkCounts`).
fn recorded(manifest: &Manifest<'_>) -> Result<Option<Nlinks>, Stop> {
    let Some(links) = manifest.link_counts()? else {
        return Ok(None);
    };
    let n = links.len() as usize;
    if n > MAX_COUNTED {
        return Err(Stop::TooMany);
    }
    let mut table = KVVec::with_capacity(n, GFP_KERNEL).map_err(|e| Stop::Alloc(e.into()))?;
    for (i, link) in links.enumerate() {
        if i % STEP == 0 {
            cond_resched();
        }
        let link = link?;
        table
            .push((link.ino, link.count), GFP_KERNEL)
            .map_err(|e| Stop::Alloc(e.into()))?;
    }
    Ok(Some(Nlinks(table)))
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
