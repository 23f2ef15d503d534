// SPDX-License-Identifier: GPL-2.0

//! Extended attributes, as stored.

#![forbid(unsafe_code)]

use crate::error::ResultExt;
use crate::PuzzleFs;
use kernel::fs::{inode::INode, xattr::XattrList};
use kernel::prelude::*;

/// Lists the names of the xattrs of `inode`.
pub(crate) fn list(inode: &INode<PuzzleFs>, list: &mut XattrList<'_>) -> Result {
    let ino = inode.ino();
    inode.super_block().data().with_layers(|blobs| {
        let i = blobs.find(ino).inode(ino)?;
        for x in i.xattrs().inode(ino)? {
            list.add(x.inode(ino)?.key)?;
        }
        Ok(())
    })
}

/// Copies the value of xattr `name` of `inode` into `buf` (or returns its size if `buf` is
/// empty).
pub(crate) fn get(inode: &INode<PuzzleFs>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
    let ino = inode.ino();
    inode.super_block().data().with_layers(|blobs| {
        let i = blobs.find(ino).inode(ino)?;
        let value = i.xattr(name).inode(ino)?.ok_or(ENODATA)?;
        if buf.is_empty() {
            return Ok(value.len());
        }
        let dst = buf.get_mut(..value.len()).ok_or(ERANGE)?;
        dst.copy_from_slice(value);
        Ok(value.len())
    })
}
