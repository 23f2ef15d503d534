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
    _workspace: KVVec<u8>,
    dctx: *mut bindings::zstd_dctx,
    /// Output buffer for frames of unknown size, reused across calls.
    scratch: KVVec<u8>,
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
        Ok(Self {
            _workspace: workspace,
            dctx,
            scratch: KVVec::new(),
        })
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
    /// When the frame header does not record the decompressed size, the frame is first
    /// decompressed into a scratch buffer of `max` bytes (kept for later calls), then copied
    /// into one of the exact size. A frame that decompresses to more than `max` bytes, or to
    /// another size than its header records, is [`EINVAL`].
    pub fn decompress(&mut self, src: &[u8], max: usize) -> Result<KVVec<u8>> {
        match Self::content_size(src)? {
            Some(size) => {
                let size = usize::try_from(size).map_err(|_| EINVAL)?;
                if size > max {
                    return Err(EINVAL);
                }
                let mut out = KVVec::with_capacity(size, GFP_KERNEL)?;
                if self.decompress_into(src, &mut out, size)? != size {
                    return Err(EINVAL);
                }
                Ok(out)
            }
            None => {
                if self.scratch.capacity() < max {
                    self.scratch = KVVec::with_capacity(max, GFP_KERNEL)?;
                }
                let mut scratch = core::mem::replace(&mut self.scratch, KVVec::new());
                let r = self.decompress_into(src, &mut scratch, max);
                let out = r.and_then(|_| {
                    let mut out = KVVec::with_capacity(scratch.len(), GFP_KERNEL)?;
                    out.extend_from_slice(&scratch, GFP_KERNEL)?;
                    Ok(out)
                });
                self.scratch = scratch;
                out
            }
        }
    }

    /// Decompresses `src` into `out` (whose capacity must be at least `cap`), replacing its
    /// contents; returns the decompressed length.
    fn decompress_into(&mut self, src: &[u8], out: &mut KVVec<u8>, cap: usize) -> Result<usize> {
        if out.capacity() < cap {
            return Err(EINVAL);
        }
        // SAFETY: `u8` has no destructor; the first 0 elements are trivially initialised.
        unsafe { out.set_len(0) };
        let dst = out.spare_capacity_mut();
        // SAFETY: `dctx` is valid by the type invariant and `workspace` is alive; `src` is valid
        // for its length and `dst` for writes of at least `cap` bytes.
        let n = unsafe {
            bindings::zstd_decompress_dctx(
                self.dctx,
                dst.as_mut_ptr().cast(),
                cap,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: No requirements.
        if unsafe { bindings::zstd_is_error(n) } != 0 || n > cap {
            return Err(EINVAL);
        }
        // SAFETY: zstd wrote the first `n <= cap` bytes.
        unsafe { out.set_len(n) };
        Ok(n)
    }
}
