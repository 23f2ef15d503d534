// SPDX-License-Identifier: GPL-2.0

//! SHA-256 (library interface of `lib/crypto`).
//!
//! C header: [`include/crypto/sha2.h`](srctree/include/crypto/sha2.h)

use crate::bindings;
use crate::prelude::*;

/// Length of a SHA-256 digest in bytes.
pub const DIGEST_SIZE: usize = 32;

/// Computes the SHA-256 digest of `data` (at most 4 GiB - 1: [`EFBIG`] otherwise).
pub fn digest(data: &[u8]) -> Result<[u8; DIGEST_SIZE]> {
    let len: u32 = data.len().try_into().map_err(|_| EFBIG)?;
    let mut out = [0u8; DIGEST_SIZE];
    // SAFETY: `data` is valid for `len` bytes and `out` for `SHA256_DIGEST_SIZE` bytes.
    unsafe { bindings::sha256(data.as_ptr(), len, out.as_mut_ptr()) };
    Ok(out)
}
