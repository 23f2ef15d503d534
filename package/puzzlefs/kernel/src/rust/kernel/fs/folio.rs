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
/// # Invariants
///
/// `folio` is a valid, locked folio, not up to date, that we may write to for `'a`.
pub struct LockedFolio<'a> {
    folio: *mut bindings::folio,
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

    /// Copies `data` into the folio at `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result {
        self.check(offset, data.len())?;
        // SAFETY: The folio is valid and locked, and `offset + data.len()` is within it.
        unsafe { bindings::memcpy_to_folio(self.folio, offset, data.as_ptr().cast(), data.len()) };
        Ok(())
    }

    /// Writes zeroes to `len` bytes of the folio starting at `offset`.
    pub fn zero(&mut self, offset: usize, len: usize) -> Result {
        self.check(offset, len)?;
        // SAFETY: The folio is valid and locked, and the range is within it.
        unsafe { bindings::folio_zero_segment(self.folio, offset, offset + len) };
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
            at += n;
        }
        Ok(())
    }
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
    // INVARIANT: The folio is valid and locked until we unlock it below.
    let mut locked = LockedFolio {
        folio,
        _p: PhantomData,
    };
    let ret = match T::read_folio(inode, &mut locked) {
        Ok(()) => {
            // The file system may have written to the folio through a kernel mapping
            // (`for_each_page_mut`): make the data visible to user mappings on architectures
            // with aliasing data caches before anyone can map the folio (a no-op elsewhere).
            // SAFETY: The folio is valid and locked.
            unsafe { bindings::flush_dcache_folio(folio) };
            // SAFETY: The folio is locked and was completely filled.
            unsafe { bindings::folio_mark_uptodate(folio) };
            0
        }
        Err(e) => e.to_errno(),
    };
    // SAFETY: The folio was passed to us locked, and we are done with it.
    unsafe { bindings::folio_unlock(folio) };
    ret
}
