// SPDX-License-Identifier: GPL-2.0

//! Sequential files (`seq_file`), as used by `show_options`.
//!
//! C header: [`include/linux/seq_file.h`](srctree/include/linux/seq_file.h)

use crate::bindings;
use crate::types::Opaque;

/// A `seq_file` being written.
///
/// # Invariants
///
/// The wrapped `seq_file` is valid and may be written to for the lifetime of the reference.
#[repr(transparent)]
pub struct SeqFile(Opaque<bindings::seq_file>);

impl SeqFile {
    /// Creates a mutable reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `seq_file` that only the caller writes to during `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::seq_file) -> &'a mut Self {
        // SAFETY: `SeqFile` is a transparent wrapper; the rest is guaranteed by the caller.
        unsafe { &mut *ptr.cast() }
    }

    /// Writes `data` as is.
    pub fn write(&mut self, data: &[u8]) {
        // SAFETY: The seq_file is valid by the type invariant; `data` is valid for its length.
        // An overflow is recorded in the seq_file, which retries with a larger buffer.
        unsafe { bindings::seq_write(self.0.get(), data.as_ptr().cast(), data.len()) };
    }

    /// Writes `,key=value`, escaping the characters of `value` that would break the
    /// `/proc/mounts` format (as `seq_show_option` does).
    pub fn show_option(&mut self, key: &[u8], value: &[u8]) {
        self.write(b",");
        self.write(key);
        self.write(b"=");
        // SAFETY: The seq_file is valid; `value` is valid for its length and the escape set
        // is a NUL-terminated string.
        unsafe {
            bindings::seq_escape_mem(
                self.0.get(),
                value.as_ptr().cast(),
                value.len(),
                bindings::ESCAPE_OCTAL,
                c",= \t\n\\".as_ptr().cast(),
            )
        };
    }
}
