// SPDX-License-Identifier: GPL-2.0

//! Extended attributes, as stored.
//!
//! One damaged attribute (a key or value that cannot be read, or a key that is no valid xattr
//! name) is skipped with a rate-limited message: the others stay listable and readable. A list
//! that cannot be read at all fails with `EUCLEAN`.

#![forbid(unsafe_code)]

use crate::error::ResultExt;
use crate::meta::Bytes;
use crate::PuzzleFs;
use kernel::fs::{
    inode::INode,
    xattr::{is_valid_name, XattrList, NAME_MAX as XATTR_NAME_MAX},
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use puzzlefs_format::Error as FormatError;

/// Calls `f` on each readable xattr of inode `ino` whose key is a valid name, in stored order,
/// with the key (copied) and the value (where it is stored), until it returns `Some`.
fn each<R>(
    inode: &INode<PuzzleFs>,
    mut f: impl FnMut(&[u8], Bytes<'_, '_>) -> Result<Option<R>>,
) -> Result<Option<R>> {
    let ino = inode.ino();
    let mut key = [0u8; XATTR_NAME_MAX];
    inode.super_block().data().with_layers(|blobs| {
        let i = blobs.find(ino).inode(ino)?;
        let xattrs = i.xattrs().inode(ino)?;
        for index in 0..xattrs.len() {
            // The count comes from the image.
            cond_resched();
            let read = xattrs.get(index).and_then(|(k, v)| {
                if k.len() as usize > key.len() {
                    return Ok(None);
                }
                Ok(Some((k.copy_to(&mut key)?, v)))
            });
            let (k, v) = match read {
                Ok(Some((k, v))) if is_valid_name(k) => (k, v),
                Ok(_) => {
                    pr_err_ratelimited!("inode {}: xattr {} skipped: invalid name\n", ino, index);
                    continue;
                }
                Err(FormatError::Io) => return Err(EIO),
                Err(e) => {
                    pr_err_ratelimited!("inode {}: xattr {} skipped: {}\n", ino, index, e);
                    continue;
                }
            };
            if let Some(r) = f(k, v)? {
                return Ok(Some(r));
            }
        }
        Ok(None)
    })
}

/// Lists the names of the xattrs of `inode`.
pub(crate) fn list(inode: &INode<PuzzleFs>, list: &mut XattrList<'_>) -> Result {
    each(inode, |key, _| list.add(key).map(|()| None::<()>))?;
    Ok(())
}

/// Copies the value of xattr `name` of `inode` into `buf` (or returns its size if `buf` is
/// empty).
pub(crate) fn get(inode: &INode<PuzzleFs>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
    let ino = inode.ino();
    let found = each(inode, |key, value| {
        if key != name {
            return Ok(None);
        }
        let len = value.len() as usize;
        if buf.is_empty() {
            return Ok(Some(len));
        }
        let dst = buf.get_mut(..len).ok_or(ERANGE)?;
        value.copy_to(dst).data(ino)?;
        Ok(Some(len))
    })?;
    found.ok_or(ENODATA)
}
