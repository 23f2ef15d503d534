// SPDX-License-Identifier: GPL-2.0

//! File system contexts: the mount configuration (new mount API).
//!
//! C header: [`include/linux/fs_context.h`](srctree/include/linux/fs_context.h)

use crate::bindings;
use crate::c_str;
use crate::prelude::*;
use crate::str::CString;
use crate::types::Opaque;
use core::fmt;

/// The value of a mount parameter.
#[derive(Clone, Copy)]
pub enum Param<'a> {
    /// The parameter was given without a value (`-o key`).
    Flag,
    /// The parameter was given a string value (`-o key=value`).
    String(&'a CStr),
    /// A binary blob, file name or file descriptor (through `fsconfig`); not supported here.
    Other,
}

/// A file system context (`struct fs_context`) being configured or used to mount.
///
/// # Invariants
///
/// The wrapped context is valid for the lifetime of the reference.
#[repr(transparent)]
pub struct FsContext(Opaque<bindings::fs_context>);

impl FsContext {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `fs_context` that outlives `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::fs_context) -> &'a Self {
        // SAFETY: `FsContext` is a transparent wrapper; validity is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Reports a mount error.
    ///
    /// The message goes to the context's log, where `mount` (through `fsopen`/`fsconfig`) reads
    /// and prints it, and to the kernel log, so that `dmesg` keeps it in all cases.
    pub fn error(&self, args: fmt::Arguments<'_>) {
        let Ok(msg) = CString::try_from_fmt(args) else {
            pr_err!("{}\n", args);
            return;
        };
        // SAFETY: `self.0` is valid by the type invariant; `log` is its message log, or null.
        let (log, fs_name) = unsafe {
            let fc = self.0.get();
            ((*fc).log.log, CStr::from_char_ptr((*(*fc).fs_type).name))
        };
        if log.is_null() {
            // `logfc` prints to the kernel log itself when there is no log.
        } else {
            pr_err!("{}: {}\n", fs_name, &*msg);
        }
        // SAFETY: `log` is the context's (possibly null) log; the format string takes exactly
        // one string argument, `msg`, which is NUL-terminated.
        unsafe {
            bindings::logfc(
                log,
                (*(*self.0.get()).fs_type).name,
                b'e' as _,
                c_str!("%s").as_char_ptr(),
                msg.as_char_ptr(),
            )
        };
    }
}
