// SPDX-License-Identifier: GPL-2.0

//! Extended attributes, as stored.
//!
//! One damaged attribute (a key or value that cannot be read, or a key that is no valid xattr
//! name) is skipped with a rate-limited message: the others stay listable and readable. A list
//! that cannot be read at all fails with `EUCLEAN`.

#![forbid(unsafe_code)]

use crate::error::ResultExt;
use crate::PuzzleFs;
use kernel::fs::{
    inode::INode,
    xattr::{is_valid_name, XattrList},
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use puzzlefs_format::Xattr;

/// Calls `f` on each readable xattr of inode `ino` whose key is a valid name, in stored order,
/// until it returns `Some`.
fn each<R>(
    inode: &INode<PuzzleFs>,
    mut f: impl FnMut(Xattr<'_>) -> Result<Option<R>>,
) -> Result<Option<R>> {
    let ino = inode.ino();
    inode.super_block().data().with_layers(|blobs| {
        let i = blobs.find(ino).inode(ino)?;
        for (index, x) in i.xattrs().inode(ino)?.enumerate() {
            // The count comes from the image.
            cond_resched();
            let x = match x {
                Ok(x) if is_valid_name(x.key) => x,
                Ok(_) => {
                    pr_err_ratelimited!("inode {}: xattr {} skipped: invalid name\n", ino, index);
                    continue;
                }
                Err(e) => {
                    pr_err_ratelimited!("inode {}: xattr {} skipped: {}\n", ino, index, e);
                    continue;
                }
            };
            if let Some(r) = f(x)? {
                return Ok(Some(r));
            }
        }
        Ok(None)
    })
}

/// Lists the names of the xattrs of `inode`.
pub(crate) fn list(inode: &INode<PuzzleFs>, list: &mut XattrList<'_>) -> Result {
    each(inode, |x| list.add(x.key).map(|()| None::<()>))?;
    Ok(())
}

/// Copies the value of xattr `name` of `inode` into `buf` (or returns its size if `buf` is
/// empty).
pub(crate) fn get(inode: &INode<PuzzleFs>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
    let found = each(inode, |x| {
        if x.key != name {
            return Ok(None);
        }
        if buf.is_empty() {
            return Ok(Some(x.value.len()));
        }
        let dst = buf.get_mut(..x.value.len()).ok_or(ERANGE)?;
        dst.copy_from_slice(x.value);
        Ok(Some(x.value.len()))
    })?;
    found.ok_or(ENODATA)
}
