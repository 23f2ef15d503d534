// SPDX-License-Identifier: GPL-2.0

//! fs-verity digests of backing files.
//!
//! A file with fs-verity enabled cannot change any more, and every read of it is checked by
//! its file system against a Merkle tree whose root is summed up by one digest (the file's
//! "measurement", what `FS_IOC_MEASURE_VERITY` reports). A file system reading data from
//! such files (as overlayfs does with `verity=`) checks that digest once at open against the
//! one it expects, and fs-verity then guards each later read by itself.
//!
//! C header: [`include/linux/fsverity.h`](srctree/include/linux/fsverity.h)

use super::file::RegularFile;
use crate::bindings;
use crate::prelude::*;

/// Size of a sha256 digest.
pub const SHA256_DIGEST_SIZE: usize = 32;

/// The fs-verity state of an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verity {
    /// fs-verity is not enabled on the file (or not built into the kernel).
    Off,
    /// fs-verity is enabled with sha256; this is the file's digest.
    Sha256([u8; SHA256_DIGEST_SIZE]),
    /// fs-verity is enabled with another hash algorithm (`FS_VERITY_HASH_ALG_*`).
    OtherAlgorithm(u8),
}

impl RegularFile {
    /// The file's fs-verity state and digest (`fsverity_get_digest`).
    ///
    /// The digest is the one of the open file, whatever its name points at now: checking it
    /// once after opening covers every later read through this file.
    pub fn verity(&self) -> Result<Verity> {
        let mut raw = [0u8; bindings::FS_VERITY_MAX_DIGEST_SIZE as usize];
        let mut alg: u8 = 0;
        // SAFETY: The file is open (type invariant of `RegularFile`), so its inode is valid for
        // the call, and fs-verity's information about it is set up (by the open) if it has
        // fs-verity. `raw` has room for `FS_VERITY_MAX_DIGEST_SIZE` bytes, `alg` for one, and
        // the last argument may be null.
        let len = unsafe {
            bindings::fsverity_get_digest(
                self.inode_ptr(),
                raw.as_mut_ptr(),
                &mut alg,
                core::ptr::null_mut(),
            )
        };
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        if len == 0 {
            return Ok(Verity::Off);
        }
        if u32::from(alg) != bindings::FS_VERITY_HASH_ALG_SHA256 || len != SHA256_DIGEST_SIZE {
            return Ok(Verity::OtherAlgorithm(alg));
        }
        let mut digest = [0u8; SHA256_DIGEST_SIZE];
        digest.copy_from_slice(raw.get(..SHA256_DIGEST_SIZE).ok_or(EINVAL)?);
        Ok(Verity::Sha256(digest))
    }
}
