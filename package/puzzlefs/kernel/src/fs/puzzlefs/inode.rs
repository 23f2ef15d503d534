// SPDX-License-Identifier: GPL-2.0

//! Inodes: from the metadata to the VFS.

#![forbid(unsafe_code)]

use crate::error::{inode_error, ResultExt};
use crate::PuzzleFs;
use kernel::fs::{
    inode::{INode, Lookup, Params, Type},
    sb::SuperBlock,
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::types::ARef;
use puzzlefs_format::{Error as FormatError, Inode, InodeKind};

/// The VFS description of a metadata inode.
///
/// Time stamps are 0 (the format has none), directories have one link (the number is not
/// stored, and 1 is what tools read as "unknown"), as have files: hard links share one inode
/// number, hence one inode, but their count is not stored either.
pub(crate) fn params(inode: &Inode<'_>) -> Result<Params, FormatError> {
    let ino = inode.ino();
    let corrupt = |what| FormatError::Corrupt { what };
    let dev = |rdev: Option<puzzlefs_format::Rdev>| -> Result<(u32, u32), FormatError> {
        let rdev = rdev.ok_or(corrupt("device without numbers"))?;
        let major = u32::try_from(rdev.major).map_err(|_| corrupt("device major too large"))?;
        let minor = u32::try_from(rdev.minor).map_err(|_| corrupt("device minor too large"))?;
        if major >= 1 << 12 || minor >= 1 << 20 {
            return Err(corrupt("device number out of range"));
        }
        Ok((major, minor))
    };
    let (typ, size) = match inode.kind()? {
        InodeKind::Dir => (Type::Dir, 0),
        InodeKind::File => (Type::Reg, inode.file()?.size()?),
        InodeKind::Lnk => {
            let target = inode
                .symlink_target()?
                .ok_or(corrupt("symlink without target"))?;
            if target.is_empty() || target.len() >= kernel::page::PAGE_SIZE || target.contains(&0) {
                return Err(corrupt("symlink target empty, too long or with a NUL"));
            }
            (Type::Lnk, target.len() as u64)
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
        InodeKind::Wht => return Err(FormatError::Whiteout(ino)),
    };
    Ok(Params {
        typ,
        mode: inode.permissions(),
        size: i64::try_from(size).map_err(|_| FormatError::Overflow)?,
        nlink: 1,
        uid: inode.uid(),
        gid: inode.gid(),
    })
}

/// Returns the VFS inode for metadata inode `ino`, from the inode cache or made now.
///
/// The metadata is read only for an inode not yet cached. A whiteout is `ENOENT` (the name is
/// hidden); a missing inode (a dangling directory entry) or damaged metadata is `EUCLEAN`. A new
/// inode that cannot be described is dropped unused, which marks it bad (`iget_failed`).
pub(crate) fn iget(sb: &SuperBlock<PuzzleFs>, ino: u64) -> Result<ARef<INode<PuzzleFs>>> {
    let new = match sb.get_or_create_inode(ino)? {
        Lookup::Cached(inode) => return Ok(inode),
        Lookup::New(new) => new,
    };
    let params = sb.data().with_layers(|blobs| match blobs.find(ino) {
        Ok(inode) => params(&inode)
            .map(|p| sb.data().nlinks().apply(ino, p))
            .inode(ino),
        Err(FormatError::Whiteout(_)) => Err(ENOENT),
        Err(e) => Err(inode_error(ino, e)),
    })?;
    new.init(params).map_err(|e| {
        pr_err_ratelimited!("inode {}: cannot be described to the VFS: {:?}\n", ino, e);
        EUCLEAN
    })
}
