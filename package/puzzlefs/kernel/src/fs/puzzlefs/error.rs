// SPDX-License-Identifier: GPL-2.0

//! Mapping of format errors to errnos, with one message per failure.

#![forbid(unsafe_code)]

use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use puzzlefs_format::Error as FormatError;

/// The errno for a format error met while serving inode `ino`.
///
/// Structural damage of the metadata is `EUCLEAN` (as other file systems report corruption);
/// a dangling directory entry too. Each failure is logged once with the inode it concerns.
pub(crate) fn inode_error(ino: u64, e: FormatError) -> Error {
    let errno = format_errno(&e);
    pr_err_ratelimited!("inode {}: {}\n", ino, e);
    errno
}

/// The errno of format error `e`: `EIO` for a metadata page that could not be read (logged
/// where it failed), `EUCLEAN` for damage.
pub(crate) fn format_errno(e: &FormatError) -> Error {
    match e {
        FormatError::NotADirectory(_) => ENOTDIR,
        FormatError::Overflow => EOVERFLOW,
        FormatError::Io => EIO,
        _ => EUCLEAN,
    }
}

/// Extension of format results: `.inode(ino)?` maps and logs the error.
pub(crate) trait ResultExt<T> {
    /// Maps the error for inode `ino` (see [`inode_error`]).
    fn inode(self, ino: u64) -> Result<T>;

    /// Maps an error met while reading the data of inode `ino`: `EIO` for that read.
    fn data(self, ino: u64) -> Result<T>;
}

impl<T> ResultExt<T> for core::result::Result<T, FormatError> {
    fn inode(self, ino: u64) -> Result<T> {
        self.map_err(|e| inode_error(ino, e))
    }

    fn data(self, ino: u64) -> Result<T> {
        self.map_err(|e| {
            pr_err_ratelimited!("inode {}: reading data: {}\n", ino, e);
            EIO
        })
    }
}
