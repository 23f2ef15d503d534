// SPDX-License-Identifier: GPL-2.0

//! Zstandard decompression of whole frames (`lib/zstd`).
//!
//! C header: [`include/linux/zstd.h`](srctree/include/linux/zstd.h)

use crate::bindings;
use crate::prelude::*;

/// A zstd decompression context.
///
/// # Invariants
///
/// `dctx` is a decompression context initialised in `workspace`, which it borrows.
pub struct Decompressor {
    workspace: KVVec<u8>,
    dctx: *mut bindings::zstd_dctx,
}

// SAFETY: The context is plain memory that we own, usable from any thread (not concurrently:
// decompression takes `&mut self`).
unsafe impl Send for Decompressor {}

impl Decompressor {
    /// Allocates a decompression context.
    pub fn new() -> Result<Self> {
        // SAFETY: No requirements.
        let size = unsafe { bindings::zstd_dctx_workspace_bound() };
        let mut workspace = KVVec::with_capacity(size, GFP_KERNEL)?;
        let ws = workspace.spare_capacity_mut();
        // SAFETY: `ws` is valid for `size` bytes; zstd initialises what it uses.
        let dctx = unsafe { bindings::zstd_init_dctx(ws.as_mut_ptr().cast(), size) };
        if dctx.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: `dctx` lives in `workspace`, whose heap buffer does not move.
        Ok(Self { workspace, dctx })
    }

    /// The decompressed size recorded in the header of the frame that starts `src`, if any.
    pub fn content_size(src: &[u8]) -> Result<Option<u64>> {
        // SAFETY: All-zero is a valid frame header value.
        let mut header: bindings::zstd_frame_header = unsafe { core::mem::zeroed() };
        // SAFETY: `src` is valid for its length; `header` is written.
        let r =
            unsafe { bindings::zstd_get_frame_header(&mut header, src.as_ptr().cast(), src.len()) };
        if r != 0 {
            return Err(EINVAL);
        }
        if header.frameContentSize == u64::MAX {
            return Ok(None);
        }
        Ok(Some(header.frameContentSize))
    }

    /// Decompresses the single frame `src` into a new buffer of at most `max` bytes.
    ///
    /// A frame that does not record its size, or records more than `max`, or decompresses to
    /// another size than it records, is [`EINVAL`].
    pub fn decompress(&mut self, src: &[u8], max: usize) -> Result<KVVec<u8>> {
        let size: usize = Self::content_size(src)?
            .ok_or(EINVAL)?
            .try_into()
            .map_err(|_| EINVAL)?;
        if size > max {
            return Err(EINVAL);
        }
        let mut out = KVVec::with_capacity(size, GFP_KERNEL)?;
        let dst = out.spare_capacity_mut();
        // SAFETY: `dctx` is valid by the type invariant and `workspace` is alive; `src` is valid
        // for its length and `dst` for writes of `size` bytes.
        let n = unsafe {
            bindings::zstd_decompress_dctx(
                self.dctx,
                dst.as_mut_ptr().cast(),
                size,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: No requirements.
        if unsafe { bindings::zstd_is_error(n) } != 0 || n != size {
            return Err(EINVAL);
        }
        // SAFETY: zstd wrote `n == size` bytes.
        unsafe { out.set_len(n) };
        let _ = &self.workspace;
        Ok(out)
    }
}
