// SPDX-License-Identifier: GPL-2.0

//! Directory iteration (`iterate_shared`).
//!
//! Positions are stable: `.` is at 0, `..` at 1, and the file system decides what the others
//! mean (usually 2 plus the index of the entry in its directory).
//!
//! C header: [`include/linux/fs.h`](srctree/include/linux/fs.h)

use super::{inode::INode, FileSystem};
use crate::bindings;
use crate::error::from_result;
use crate::ffi;
use core::marker::PhantomData;

/// Longest name a directory entry can have (`NAME_MAX`).
pub const NAME_MAX: usize = bindings::NAME_MAX as usize;

/// The type of a directory entry, as `readdir` reports it (`DT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum DirEntryType {
    /// Unknown.
    Unknown = bindings::DT_UNKNOWN,
    /// Named pipe.
    Fifo = bindings::DT_FIFO,
    /// Character device.
    Chr = bindings::DT_CHR,
    /// Directory.
    Dir = bindings::DT_DIR,
    /// Block device.
    Blk = bindings::DT_BLK,
    /// Regular file.
    Reg = bindings::DT_REG,
    /// Symbolic link.
    Lnk = bindings::DT_LNK,
    /// Unix socket.
    Sock = bindings::DT_SOCK,
}

/// Emits directory entries into a `readdir` buffer.
///
/// # Invariants
///
/// `ctx` is a valid `dir_context` for the duration of `'a`.
pub struct DirEmitter<'a> {
    ctx: *mut bindings::dir_context,
    _p: PhantomData<&'a mut bindings::dir_context>,
}

impl DirEmitter<'_> {
    /// The position of the next entry to emit.
    ///
    /// Any user can set it with `lseek` on the directory: directories here use
    /// `generic_file_llseek`, which takes any value from 0 to the super block's `s_maxbytes`
    /// (`i64::MAX`) and refuses negative ones. It is 2 or more when `read_dir` is called
    /// (`.` and `..` are emitted here), and it need not be a position this file system ever
    /// gave out: a file system must treat it as untrusted (checked arithmetic, no
    /// `RangeFrom` iteration from it) and list nothing from a position past its last entry.
    pub fn pos(&self) -> i64 {
        // SAFETY: `ctx` is valid by the type invariant.
        unsafe { (*self.ctx).pos }
    }

    /// Moves to the next position without emitting anything (for hidden entries).
    pub fn skip(&mut self) {
        // SAFETY: `ctx` is valid by the type invariant.
        unsafe { (*self.ctx).pos = (*self.ctx).pos.saturating_add(1) };
    }

    /// Emits one entry at the current position and moves to the next one.
    ///
    /// Returns `false` when the caller's buffer is full: iteration must stop, and will resume
    /// at the same position.
    pub fn emit(&mut self, name: &[u8], ino: u64, etype: DirEntryType) -> bool {
        let Ok(len) = ffi::c_int::try_from(name.len()) else {
            return false;
        };
        // SAFETY: `ctx` is valid by the type invariant; `name` is valid for `len` bytes.
        let ok =
            unsafe { bindings::dir_emit(self.ctx, name.as_ptr().cast(), len, ino, etype as _) };
        if ok {
            self.skip();
        }
        ok
    }
}

/// `iterate_shared` of file system `T`.
///
/// # Safety
///
/// Called by the VFS with a valid open directory of one of `T`'s super blocks and a valid
/// `dir_context`.
pub(crate) unsafe extern "C" fn iterate_shared<T: FileSystem>(
    file: *mut bindings::file,
    ctx: *mut bindings::dir_context,
) -> ffi::c_int {
    from_result(|| {
        // SAFETY: `file` and `ctx` are valid (see the function's safety requirements).
        if !unsafe { bindings::dir_emit_dots(file, ctx) } {
            return Ok(0);
        }
        // SAFETY: The file is an open directory of one of `T`'s live super blocks, so its inode
        // is initialised and alive while the file is open.
        let dir = unsafe { INode::<T>::from_raw((*file).f_inode) };
        // INVARIANT: `ctx` is valid until we return.
        let mut emitter = DirEmitter {
            ctx,
            _p: PhantomData,
        };
        T::read_dir(dir, &mut emitter)?;
        Ok(0)
    })
}
