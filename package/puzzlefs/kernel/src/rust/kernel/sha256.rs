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

/// An incremental SHA-256 computation (`sha256_update`, `sha256_final`), for data hashed in
/// steps: [`digest`] of hundreds of MiB is one long call that a kernel without full preemption
/// cannot interrupt; feeding [`Sha256::update`] bounded pieces lets the caller yield between
/// them.
pub struct Sha256(bindings::sha256_state);

impl Sha256 {
    /// Starts a computation (`sha256_init`, an inline function in C).
    pub fn new() -> Self {
        Self(bindings::sha256_state {
            state: [
                bindings::SHA256_H0,
                bindings::SHA256_H1,
                bindings::SHA256_H2,
                bindings::SHA256_H3,
                bindings::SHA256_H4,
                bindings::SHA256_H5,
                bindings::SHA256_H6,
                bindings::SHA256_H7,
            ],
            count: 0,
            buf: [0; 64],
        })
    }

    /// Hashes `data` after what was hashed so far.
    pub fn update(&mut self, data: &[u8]) {
        // `sha256_update` takes an `unsigned int` length.
        for piece in data.chunks(u32::MAX as usize) {
            // SAFETY: The state was initialised by `new`; `piece` is valid for its length,
            // which fits in a `u32`.
            unsafe { bindings::sha256_update(&mut self.0, piece.as_ptr(), piece.len() as u32) };
        }
    }

    /// The digest of everything hashed.
    pub fn finish(mut self) -> [u8; DIGEST_SIZE] {
        let mut out = [0u8; DIGEST_SIZE];
        // SAFETY: The state is initialised; `out` is valid for `SHA256_DIGEST_SIZE` bytes.
        unsafe { bindings::sha256_final(&mut self.0, out.as_mut_ptr()) };
        out
    }
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}
