// SPDX-License-Identifier: GPL-2.0

//! Page cache folios being read (`read_folio`, `readahead`).
//!
//! C header: [`include/linux/pagemap.h`](srctree/include/linux/pagemap.h)

use super::{inode::INode, FileSystem};
use crate::bindings;
use crate::ffi;
use crate::prelude::*;
use crate::workqueue::{self, impl_has_work, new_work, Work, WorkItem};
use core::marker::PhantomData;
use core::ptr;

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
/// read later through `read_folio` if needed. When the file system asks for it
/// ([`FileSystem::DEFER_READAHEAD`]), the folios of a window the reader is not waiting for are
/// taken out of the request and filled by a work item instead (see [`Deferred`]); those it
/// does not fill are then unlocked not up to date, and read through `read_folio` if needed.
pub struct Readahead<'a> {
    src: Source<'a>,
}

/// Where the folios of a [`Readahead`] come from.
///
/// # Invariants
///
/// `Request`: a valid readahead request of a mapping of an inode of ours, used only by us for
/// `'a`. `Detached`: see [`Detached`].
enum Source<'a> {
    Request(*mut bindings::readahead_control, PhantomData<&'a mut ()>),
    Detached(&'a mut Detached),
}

/// Folios taken out of a readahead request, to be filled by a work item.
///
/// # Invariants
///
/// `folios[next..]` are valid, locked folios, not up to date, of one inode's mapping, each
/// with a reference owned by this value; so is the last one once given out (its result is then
/// in `last`): it is unlocked only after the file system is done, so that the inode, which
/// stays alive while one of its folios is locked, outlives every use of it.
struct Detached {
    folios: KVec<*mut bindings::folio>,
    next: usize,
    /// Bytes written to the last folio and whether filling it succeeded, once given out.
    last: Option<(usize, bool)>,
}

impl Detached {
    /// Unlocks the folios not given out (not up to date), then the last one with its
    /// result, and drops the references: the inode must not be used from here on.
    fn finish_all(&mut self) {
        let Some((&last, rest)) = self.folios.split_last() else {
            return;
        };
        for &folio in rest.get(self.next..).unwrap_or(&[]) {
            // SAFETY: `folio` was not given out: it is locked and ours (type invariant), and
            // given up here.
            unsafe { finish(folio, 0, false) };
            // SAFETY: We own a reference to `folio` (type invariant).
            unsafe { bindings::folio_put(folio) };
        }
        let (filled, ok) = match self.last.take() {
            Some(result) if self.next == self.folios.len() => result,
            _ => (0, false),
        };
        // SAFETY: The last folio is still locked and ours (type invariant); if it was given
        // out, it was filled through a `LockedFolio` whose watermark is `filled`.
        unsafe { finish(last, filled, ok) };
        // SAFETY: We own a reference to `last` (type invariant).
        unsafe { bindings::folio_put(last) };
        self.next = 0;
        self.folios = KVec::new();
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        // Folios never filled are not left locked (a no-op once finished).
        self.finish_all();
    }
}

impl Readahead<'_> {
    /// Position in the file of the first folio not yet filled, in bytes.
    pub fn pos(&self) -> i64 {
        match &self.src {
            // SAFETY: The request is valid by the type invariant.
            Source::Request(rac, _) => unsafe { bindings::readahead_pos(*rac) },
            Source::Detached(d) => match d.folios.get(d.next) {
                // SAFETY: The folio is valid (invariant of `Detached`).
                Some(&folio) => unsafe { bindings::folio_pos(folio) },
                None => 0,
            },
        }
    }

    /// Bytes of the folios not yet filled.
    pub fn len(&self) -> usize {
        match &self.src {
            // SAFETY: The request is valid by the type invariant.
            Source::Request(rac, _) => unsafe { bindings::readahead_length(*rac) },
            Source::Detached(d) => d
                .folios
                .get(d.next..)
                .unwrap_or(&[])
                .iter()
                // SAFETY: The folios are valid (invariant of `Detached`).
                .map(|&folio| unsafe { bindings::folio_size(folio) })
                .sum(),
        }
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
            let (folio, last) = match &mut self.src {
                Source::Request(rac, _) => {
                    // SAFETY: The request is valid by the type invariant. The folio comes
                    // locked, and the page cache keeps it while it is locked.
                    let folio = unsafe { bindings::readahead_folio(*rac) };
                    if folio.is_null() {
                        return Ok(());
                    }
                    (folio, false)
                }
                Source::Detached(d) => {
                    let Some(&folio) = d.folios.get(d.next) else {
                        return Ok(());
                    };
                    d.next += 1;
                    (folio, d.next == d.folios.len())
                }
            };
            // INVARIANT: The folio is valid and locked until it is finished below (or, for
            // the last detached one, by `Detached::finish_all`).
            let mut locked = LockedFolio {
                folio,
                filled: 0,
                _p: PhantomData,
            };
            let ret = f(&mut locked);
            match &mut self.src {
                Source::Detached(d) if last => d.last = Some((locked.filled, ret.is_ok())),
                Source::Detached(_) => {
                    // SAFETY: The folio was detached locked, is given up here, and was filled
                    // through `locked`.
                    unsafe { finish(folio, locked.filled, ret.is_ok()) };
                    // SAFETY: `Detached` owned a reference to it, given up with it.
                    unsafe { bindings::folio_put(folio) };
                }
                Source::Request(..) => {
                    // SAFETY: The folio came locked from the request and was filled through
                    // `locked`.
                    unsafe { finish(folio, locked.filled, ret.is_ok()) };
                }
            }
            ret?;
        }
    }
}

/// The folios of a readahead window that no reader waits for yet, filled by
/// [`FileSystem::readahead`] from a work item (of the queue of the file system's
/// [`super::Registration`]), so that the reader goes on with the folios it has meanwhile.
///
/// # Invariants
///
/// `inode` is the inode of `folios`' mapping: it stays alive while one of them is locked.
#[pin_data]
pub(crate) struct Deferred<T: FileSystem> {
    #[pin]
    work: Work<Deferred<T>>,
    inode: *mut bindings::inode,
    folios: Detached,
    _p: PhantomData<T>,
}

// SAFETY: The folios are locked and referenced by the value, which any thread may fill, unlock
// and release; the inode is only used while one of them is locked.
unsafe impl<T: FileSystem> Send for Deferred<T> {}

impl_has_work! {
    impl{T: FileSystem} HasWork<Self> for Deferred<T> { self.work }
}

impl<T: FileSystem> Deferred<T> {
    /// Whether none of the folios of `rac` is one a reader waits for: the request is an
    /// asynchronous readahead window, which the VFS starts when a reader reaches the folio
    /// marked for it, ahead of that reader (`page_cache_async_ra`: the whole window is its
    /// asynchronous part).
    ///
    /// # Safety
    ///
    /// `rac` must be a valid readahead request.
    unsafe fn is_async(rac: *mut bindings::readahead_control) -> bool {
        // SAFETY: The request is valid (function contract).
        let (ra, index) = unsafe { ((*rac).ra, bindings::readahead_index(rac)) };
        if ra.is_null() {
            return false;
        }
        // The state is the file's, updated by its readers without a lock (as in the VFS):
        // read each field once.
        // SAFETY: `ra` is valid for as long as the request is.
        let (start, size, async_size) = unsafe {
            (
                ptr::read_volatile(ptr::addr_of!((*ra).start)),
                ptr::read_volatile(ptr::addr_of!((*ra).size)),
                ptr::read_volatile(ptr::addr_of!((*ra).async_size)),
            )
        };
        size > 0
            && async_size == size
            && index >= start
            && usize::try_from(size).is_ok_and(|size| index - start < size)
    }

    /// Takes the folios out of `rac` and queues them to be filled on `queue`; returns `false`
    /// (leaving `rac` as it was) if they could not be.
    ///
    /// # Safety
    ///
    /// `rac` must be a valid readahead request of a mapping of an inode of `T`, and `queue`
    /// a valid workqueue that is drained before `T`'s module can go away.
    unsafe fn queue(
        rac: *mut bindings::readahead_control,
        queue: *mut bindings::workqueue_struct,
    ) -> bool {
        // SAFETY: The request is valid (function contract).
        let (count, inode) = unsafe { (bindings::readahead_count(rac), (*(*rac).mapping).host) };
        // Everything is allocated before the first folio is taken.
        let Ok(folios) = KVec::with_capacity(count as usize, GFP_KERNEL) else {
            return false;
        };
        let Ok(mut this) = KBox::pin_init(
            pin_init!(Self {
                work <- new_work!("fs::folio::Deferred::work"),
                inode,
                folios: Detached {
                    folios,
                    next: 0,
                    last: None,
                },
                _p: PhantomData,
            }),
            GFP_KERNEL,
        ) else {
            return false;
        };
        // SAFETY: `folios` is not structurally pinned.
        let d = unsafe { &mut this.as_mut().get_unchecked_mut().folios };
        while d.folios.len() < d.folios.capacity() {
            // SAFETY: The request is valid. The folio comes locked; the page cache holds it
            // while it is, and we take a reference of our own for `Detached`.
            let folio = unsafe { bindings::readahead_folio(rac) };
            if folio.is_null() {
                break;
            }
            // SAFETY: The folio is valid and locked.
            unsafe { bindings::folio_get(folio) };
            // INVARIANT: The folio is locked, referenced and of `inode`'s mapping.
            if d.folios.push(folio, GFP_KERNEL).is_err() {
                // Not reached (there is room, so nothing is allocated), but a folio must
                // never stay locked.
                // SAFETY: The folio is locked, ours and not filled; we give it up.
                unsafe { finish(folio, 0, false) };
                // SAFETY: We took the reference above.
                unsafe { bindings::folio_put(folio) };
                break;
            }
        }
        // SAFETY: `queue` is valid (function contract).
        let queue = unsafe { workqueue::Queue::from_raw(queue) };
        queue.enqueue(this);
        true
    }
}

impl<T: FileSystem> WorkItem for Deferred<T> {
    type Pointer = Pin<KBox<Self>>;

    fn run(this: Pin<KBox<Self>>) {
        // SAFETY: The work item is off the queue and ours alone; only `folios`, which is not
        // structurally pinned, is changed, and the value is dropped where it is.
        let mut this = unsafe { Pin::into_inner_unchecked(this) };
        if !this.folios.folios.is_empty() {
            // SAFETY: The inode of the folios' mapping stays alive while one of them is
            // locked, and the last one stays locked until `finish_all` below.
            let inode = unsafe { INode::<T>::from_raw(this.inode) };
            let mut ra = Readahead {
                src: Source::Detached(&mut this.folios),
            };
            // Errors leave folios not up to date; `read_folio` reports them when read.
            let _ = T::readahead(inode, &mut ra);
        }
        this.folios.finish_all();
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
    if T::DEFER_READAHEAD {
        // SAFETY: The inode is of a super block of `T`, made by this abstraction.
        let queue = unsafe { super::Registration::readahead_queue((*(*(*rac).mapping).host).i_sb) };
        if !queue.is_null() {
            // SAFETY: The request is valid and of an inode of `T`; the registration's queue is
            // drained before the module goes away.
            let deferred =
                unsafe { Deferred::<T>::is_async(rac) && Deferred::<T>::queue(rac, queue) };
            if deferred {
                return;
            }
        }
    }
    // INVARIANT: The request is valid and ours until we return.
    let mut ra = Readahead {
        src: Source::Request(rac, PhantomData),
    };
    // Errors leave folios not up to date; `read_folio` reports them when they are read.
    let _ = T::readahead(inode, &mut ra);
}
