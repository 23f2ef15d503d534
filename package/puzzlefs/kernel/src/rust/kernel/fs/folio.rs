// SPDX-License-Identifier: GPL-2.0

//! Page cache folios being read (`read_folio`).
//!
//! C header: [`include/linux/pagemap.h`](srctree/include/linux/pagemap.h)

use super::{inode::INode, FileSystem};
use crate::bindings;
use crate::ffi;
use crate::prelude::*;
use core::marker::PhantomData;

/// A locked folio of the page cache that is being filled.
///
/// The abstraction locks and unlocks it; the file system only writes to it. Folios of regular
/// files may span several pages (large folios); those of symlinks are one page.
///
/// The folio's memory is not cleared beforehand: it may hold whatever the page last held. The
/// abstraction keeps how far the folio has been written from its start without a gap, and when
/// `read_folio` succeeds it zeroes the rest, so that a file system that returns early never
/// exposes stale memory. File systems should fill folios in order: bytes written past a gap
/// are zeroed too.
///
/// # Invariants
///
/// `folio` is a valid, locked folio, not up to date, that we may write to for `'a`. Its bytes
/// `[0, filled)` have been written through this value.
pub struct LockedFolio<'a> {
    folio: *mut bindings::folio,
    filled: usize,
    _p: PhantomData<&'a mut bindings::folio>,
}

impl LockedFolio<'_> {
    /// Position of the folio in the file, in bytes.
    pub fn pos(&self) -> i64 {
        // SAFETY: The folio is valid by the type invariant.
        unsafe { bindings::folio_pos(self.folio) }
    }

    /// Size of the folio in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: The folio is valid by the type invariant.
        unsafe { bindings::folio_size(self.folio) }
    }

    fn check(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Records that `[offset, end)` was written (checked to be within the folio).
    fn written(&mut self, offset: usize, end: usize) {
        // INVARIANT: Without a gap, the written prefix grows to `end`.
        if offset <= self.filled && end > self.filled {
            self.filled = end;
        }
    }

    /// Copies `data` into the folio at `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result {
        self.check(offset, data.len())?;
        // SAFETY: The folio is valid and locked, and `offset + data.len()` is within it.
        unsafe { bindings::memcpy_to_folio(self.folio, offset, data.as_ptr().cast(), data.len()) };
        self.written(offset, offset + data.len());
        Ok(())
    }

    /// Writes zeroes to `len` bytes of the folio starting at `offset`.
    pub fn zero(&mut self, offset: usize, len: usize) -> Result {
        self.check(offset, len)?;
        // SAFETY: The folio is valid and locked, and the range is within it.
        unsafe { bindings::folio_zero_segment(self.folio, offset, offset + len) };
        self.written(offset, offset + len);
        Ok(())
    }

    /// Gives `f` the folio's bytes `[offset, offset + len)`, one piece per page (the folio
    /// may be in high memory, where only one page is mapped at a time), in order.
    pub fn for_each_page_mut(
        &mut self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&mut [u8]) -> Result,
    ) -> Result {
        self.check(offset, len)?;
        let page = bindings::PAGE_SIZE;
        let (mut at, end) = (offset, offset + len);
        while at < end {
            let in_page = at % page;
            let n = (page - in_page).min(end - at);
            // SAFETY: `at` is within the folio, which is valid and locked; the mapping covers
            // the rest of the page that holds `at`.
            let addr = unsafe { bindings::kmap_local_folio(self.folio, at) };
            // SAFETY: `addr` maps `n` bytes of the folio (they do not cross a page) that only
            // we access while the folio is locked.
            let buf = unsafe { core::slice::from_raw_parts_mut(addr.cast::<u8>(), n) };
            let r = f(buf);
            // SAFETY: `addr` was mapped by `kmap_local_folio` above and `buf` is dead.
            unsafe { bindings::kunmap_local(addr) };
            r?;
            self.written(at, at + n);
            at += n;
        }
        Ok(())
    }
}

/// Ends the filling of locked folio `folio`: on success, zeroes what was not written from its
/// start on, flushes it and marks it up to date; in all cases unlocks it.
///
/// # Safety
///
/// `folio` must be a valid, locked folio that the caller filled through a `LockedFolio` whose
/// prefix watermark is `filled`, and that the caller gives up.
unsafe fn finish(folio: *mut bindings::folio, filled: usize, ok: bool) {
    if ok {
        // SAFETY: The folio is valid and locked (function contract).
        let size = unsafe { bindings::folio_size(folio) };
        if filled < size {
            // Never expose what the folio held before.
            // SAFETY: The folio is valid and locked, and `filled < size`.
            unsafe { bindings::folio_zero_segment(folio, filled, size) };
        }
        // The file system may have written to the folio through a kernel mapping
        // (`for_each_page_mut`): make the data visible to user mappings on architectures
        // with aliasing data caches before anyone can map the folio (a no-op elsewhere).
        // SAFETY: The folio is valid and locked.
        unsafe { bindings::flush_dcache_folio(folio) };
        // SAFETY: The folio is locked and was completely filled (or zeroed above).
        unsafe { bindings::folio_mark_uptodate(folio) };
    }
    // SAFETY: The folio is locked, and the caller is done with it.
    unsafe { bindings::folio_unlock(folio) };
}

/// `read_folio` of file system `T`.
///
/// # Safety
///
/// Called by the VFS with a valid, locked folio of the page cache of an inode of one of `T`'s
/// super blocks.
pub(crate) unsafe extern "C" fn read_folio<T: FileSystem>(
    _file: *mut bindings::file,
    folio: *mut bindings::folio,
) -> ffi::c_int {
    // SAFETY: The folio is locked and belongs to the mapping of an initialised inode of ours,
    // which stays alive while one of its folios is locked.
    let inode = unsafe { INode::<T>::from_raw(bindings::folio_inode(folio)) };
    // INVARIANT: The folio is valid and locked until `finish` unlocks it.
    let mut locked = LockedFolio {
        folio,
        filled: 0,
        _p: PhantomData,
    };
    let ret = T::read_folio(inode, &mut locked);
    // SAFETY: The folio was passed to us locked and filled through `locked`.
    unsafe { finish(folio, locked.filled, ret.is_ok()) };
    match ret {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// A readahead request (`struct readahead_control`): consecutive locked folios of one file,
/// new in the page cache, to be filled in order.
///
/// Folios the file system does not fill are removed from the page cache again by the VFS, and
/// read later through `read_folio` if needed.
///
/// # Invariants
///
/// `rac` is a valid readahead request of a mapping of an inode of ours, used only by us for
/// `'a`.
pub struct Readahead<'a> {
    rac: *mut bindings::readahead_control,
    _p: PhantomData<&'a mut bindings::readahead_control>,
}

impl Readahead<'_> {
    /// Position in the file of the first folio not yet filled, in bytes.
    pub fn pos(&self) -> i64 {
        // SAFETY: The request is valid by the type invariant.
        unsafe { bindings::readahead_pos(self.rac) }
    }

    /// Bytes of the folios not yet filled.
    pub fn len(&self) -> usize {
        // SAFETY: The request is valid by the type invariant.
        unsafe { bindings::readahead_length(self.rac) }
    }

    /// Whether no folio is left to fill.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives each folio of the request, in order, to `f` to fill; a folio `f` fills is marked
    /// up to date (with the same zeroing as for `read_folio`) and unlocked. Stops at the first
    /// error: that folio and the rest stay not up to date.
    pub fn for_each_folio(&mut self, mut f: impl FnMut(&mut LockedFolio<'_>) -> Result) -> Result {
        loop {
            // SAFETY: The request is valid by the type invariant. The folio comes locked, and
            // the page cache keeps it while it is locked.
            let folio = unsafe { bindings::readahead_folio(self.rac) };
            if folio.is_null() {
                return Ok(());
            }
            // INVARIANT: The folio is valid and locked until `finish` unlocks it.
            let mut locked = LockedFolio {
                folio,
                filled: 0,
                _p: PhantomData,
            };
            let ret = f(&mut locked);
            // SAFETY: The folio came locked from the request and was filled through `locked`.
            unsafe { finish(folio, locked.filled, ret.is_ok()) };
            ret?;
        }
    }
}

/// `readahead` of file system `T`.
///
/// # Safety
///
/// Called by the VFS with a valid readahead request of the page cache of an inode of one of
/// `T`'s super blocks.
pub(crate) unsafe extern "C" fn readahead<T: FileSystem>(rac: *mut bindings::readahead_control) {
    // SAFETY: The request is valid; its mapping belongs to an initialised inode of ours, which
    // stays alive while the request's folios are locked.
    let inode = unsafe { INode::<T>::from_raw((*(*rac).mapping).host) };
    // INVARIANT: The request is valid and ours until we return.
    let mut ra = Readahead {
        rac,
        _p: PhantomData,
    };
    // Errors leave folios not up to date; `read_folio` reports them when they are read.
    let _ = T::readahead(inode, &mut ra);
}
