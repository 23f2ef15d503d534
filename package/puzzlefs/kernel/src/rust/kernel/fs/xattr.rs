// SPDX-License-Identifier: GPL-2.0

//! Extended attributes (read-only).
//!
//! Attributes of the `user.`, `trusted.` and `security.` namespaces are served: the VFS checks
//! access to each namespace as usual, and `trusted.` names are listed to `CAP_SYS_ADMIN` only.
//!
//! C header: [`include/linux/xattr.h`](srctree/include/linux/xattr.h)

use super::{inode::INode, FileSystem};
use crate::bindings;
use crate::c_str;
use crate::error::from_result;
use crate::ffi;
use crate::prelude::*;
use core::{marker::PhantomData, ptr};

/// Longest attribute name (`XATTR_NAME_MAX`).
pub const NAME_MAX: usize = 255;

const PREFIXES: [&[u8]; 3] = [b"user.", b"trusted.", b"security."];

/// Whether `name` can be an attribute name at all: 1 to [`NAME_MAX`] bytes, no NUL.
///
/// [`XattrList::add`] refuses other names with [`EINVAL`], which fails the whole `listxattr`:
/// a file system that reads names from untrusted data checks them first and skips bad ones.
pub fn is_valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= NAME_MAX && !name.contains(&0)
}

/// The buffer of a `listxattr` call: NUL-separated names.
///
/// # Invariants
///
/// `buf` is null (size query) or valid for writes of `size` bytes.
pub struct XattrList<'a> {
    buf: *mut u8,
    size: usize,
    used: usize,
    trusted: bool,
    _p: PhantomData<&'a mut [u8]>,
}

impl XattrList<'_> {
    /// Adds `name` (full name, with its namespace prefix) to the list.
    ///
    /// Names of namespaces that are not served, or that the caller may not see, are skipped;
    /// a list that does not fit in the caller's buffer is [`ERANGE`]; a name that fails
    /// [`is_valid_name`] is [`EINVAL`].
    pub fn add(&mut self, name: &[u8]) -> Result {
        if !is_valid_name(name) {
            return Err(EINVAL);
        }
        if !PREFIXES
            .iter()
            .any(|p| name.starts_with(p) && name.len() > p.len())
        {
            return Ok(());
        }
        if name.starts_with(b"trusted.") && !self.trusted {
            return Ok(());
        }
        let end = self.used.checked_add(name.len() + 1).ok_or(E2BIG)?;
        if !self.buf.is_null() {
            if end > self.size {
                return Err(ERANGE);
            }
            // SAFETY: `buf` is valid for `size` bytes by the type invariant, and
            // `used + name.len() + 1 <= size`.
            unsafe {
                ptr::copy_nonoverlapping(name.as_ptr(), self.buf.add(self.used), name.len());
                *self.buf.add(self.used + name.len()) = 0;
            }
        }
        self.used = end;
        Ok(())
    }
}

/// `listxattr` of file system `T`.
///
/// # Safety
///
/// Called by the VFS with a valid positive dentry of one of `T`'s super blocks, and a buffer
/// that is null or valid for `size` bytes.
pub(crate) unsafe extern "C" fn listxattr<T: FileSystem>(
    dentry: *mut bindings::dentry,
    buf: *mut ffi::c_char,
    size: usize,
) -> isize {
    from_result(|| {
        // SAFETY: The dentry is positive, so its inode is an initialised inode of ours.
        let inode = unsafe { INode::<T>::from_raw((*dentry).d_inode) };
        // INVARIANT: `buf` is null or valid for `size` bytes.
        let mut list = XattrList {
            buf: if size == 0 {
                ptr::null_mut()
            } else {
                buf.cast()
            },
            size,
            used: 0,
            // SAFETY: No requirements.
            trusted: unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as _) },
            _p: PhantomData,
        };
        T::list_xattrs(inode, &mut list)?;
        Ok(list.used.try_into()?)
    })
}

/// The xattr handlers of file system `T`.
pub(crate) struct Handlers<T: FileSystem>(PhantomData<T>);

impl<T: FileSystem> Handlers<T> {
    const fn handler(prefix: &'static CStr) -> bindings::xattr_handler {
        bindings::xattr_handler {
            name: ptr::null(),
            prefix: prefix.as_char_ptr(),
            flags: 0,
            list: None,
            get: Some(Self::get),
            set: None,
        }
    }

    const USER: bindings::xattr_handler = Self::handler(c_str!("user."));
    const TRUSTED: bindings::xattr_handler = Self::handler(c_str!("trusted."));
    const SECURITY: bindings::xattr_handler = Self::handler(c_str!("security."));

    /// The NULL-terminated handler table for `s_xattr`.
    pub(crate) const TABLE: &'static [*const bindings::xattr_handler; 4] =
        &[&Self::USER, &Self::TRUSTED, &Self::SECURITY, ptr::null()];

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn get(
        handler: *const bindings::xattr_handler,
        _dentry: *mut bindings::dentry,
        inode: *mut bindings::inode,
        name: *const ffi::c_char,
        buffer: *mut ffi::c_void,
        size: usize,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The VFS passes one of our handlers, whose prefix is a C string, a valid
            // initialised inode of ours, and the NUL-terminated rest of the name.
            let (prefix, suffix, inode) = unsafe {
                (
                    CStr::from_char_ptr((*handler).prefix).as_bytes(),
                    CStr::from_char_ptr(name).as_bytes(),
                    INode::<T>::from_raw(inode),
                )
            };
            let len = prefix.len() + suffix.len();
            if suffix.is_empty() || len > NAME_MAX {
                return Err(ERANGE);
            }
            let mut full = [0u8; NAME_MAX];
            full[..prefix.len()].copy_from_slice(prefix);
            full[prefix.len()..len].copy_from_slice(suffix);
            let buf: &mut [u8] = if size == 0 || buffer.is_null() {
                &mut []
            } else {
                // SAFETY: The VFS passes a buffer valid for `size` bytes.
                unsafe { core::slice::from_raw_parts_mut(buffer.cast(), size) }
            };
            let n = T::get_xattr(inode, &full[..len], buf)?;
            Ok(n.try_into()?)
        })
    }
}
