// SPDX-License-Identifier: GPL-2.0

//! Kernel-internal reads of files below a private mount.
//!
//! A file system backed by files of another one (as an OCI image directory is) clones a private
//! mount of its backing directory when it is mounted ([`PrivateMount::new`]), so that the
//! backing files stay reachable whatever happens to the mount table afterwards, and reads them
//! with the credentials of the mounter, not of whoever triggers the read.
//!
//! C headers: [`include/linux/mount.h`](srctree/include/linux/mount.h),
//! [`include/linux/namei.h`](srctree/include/linux/namei.h)

use crate::bindings;
use crate::error::{from_err_ptr, to_result};
use crate::prelude::*;
use crate::sched::cond_resched;
use crate::types::Opaque;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// A private clone of the mount of a directory, with the credentials of who cloned it.
///
/// # Invariants
///
/// `mnt` is a private mount made by `clone_private_mount` that we own (released by
/// `kern_unmount`), and `cred` a counted reference to credentials.
pub struct PrivateMount {
    mnt: NonNull<bindings::vfsmount>,
    cred: NonNull<bindings::cred>,
}

// SAFETY: The mount and the credentials are reference counted and may be used and released from
// any thread.
unsafe impl Send for PrivateMount {}

// SAFETY: Opening files below the mount from several threads at once is fine.
unsafe impl Sync for PrivateMount {}

impl PrivateMount {
    /// Clones a private mount of the directory at `path` (resolved from the current task, as
    /// a path given to `mount` is), and keeps the current credentials for later reads.
    pub fn new(path: &CStr) -> Result<Self> {
        let mut p = bindings::path {
            mnt: core::ptr::null_mut(),
            dentry: core::ptr::null_mut(),
        };
        // SAFETY: `path` is NUL-terminated; `p` is written on success only.
        to_result(unsafe {
            bindings::kern_path(
                path.as_char_ptr(),
                bindings::LOOKUP_FOLLOW | bindings::LOOKUP_DIRECTORY,
                &mut p,
            )
        })?;
        // SAFETY: `p` holds a path reference from `kern_path`.
        let mnt = from_err_ptr(unsafe { bindings::clone_private_mount(&p) });
        // SAFETY: We are done with the reference taken by `kern_path`.
        unsafe { bindings::path_put(&p) };
        let mnt = NonNull::new(mnt?).ok_or(EINVAL)?;
        // SAFETY: Takes a counted reference to the current task's credentials.
        let cred = unsafe { bindings::get_current_cred() };
        let Some(cred) = NonNull::new(cred.cast_mut()) else {
            // SAFETY: We own `mnt`.
            unsafe { bindings::kern_unmount(mnt.as_ptr()) };
            return Err(EINVAL);
        };
        // INVARIANT: We own the mount and the credentials reference.
        Ok(Self { mnt, cred })
    }

    /// Opens the regular file at `path`, relative to the root of the mount (which also acts
    /// as its root directory: `..` cannot leave it).
    ///
    /// The path is looked up, checked and opened with the credentials of the mounter. No
    /// symbolic link is followed, at any component ([`ELOOP`]): the files are named by
    /// whoever wrote the directory, and a link would let them show the mounter's files
    /// elsewhere below the mount (or, through `/proc` magic links, anywhere). Anything but a
    /// regular file is refused with [`EINVAL`] before it is opened: a fifo or a device node at
    /// `path` is never opened, so it can neither block nor have side effects.
    pub fn open(&self, path: &CStr) -> Result<RegularFile> {
        // SAFETY: The credentials are alive by the type invariant, until after the guard is
        // dropped at the end of this function, on this task.
        let _creds = unsafe { CredsOverride::new(self.cred.as_ptr()) };
        let mut found = bindings::path {
            mnt: core::ptr::null_mut(),
            dentry: core::ptr::null_mut(),
        };
        // SAFETY: By the type invariant the mount is alive, and its root dentry is stable;
        // `path` is NUL-terminated; `found` is written on success only.
        to_result(unsafe {
            bindings::vfs_path_lookup(
                (*self.mnt.as_ptr()).mnt_root,
                self.mnt.as_ptr(),
                path.as_char_ptr(),
                // FOLLOW makes a trailing symlink one to follow, which NO_SYMLINKS then
                // refuses with ELOOP (without FOLLOW the link itself would be returned).
                bindings::LOOKUP_FOLLOW | bindings::LOOKUP_NO_SYMLINKS,
                &mut found,
            )
        })?;
        // INVARIANT: `vfs_path_lookup` returned a path reference that we now own.
        let found = PathRef(found);
        let p = &found.0;
        // SAFETY: The dentry is pinned by our reference; a dentry we hold keeps its inode (it
        // is not turned negative while referenced), so the type checked here is the type of
        // what is opened below.
        let inode = unsafe { (*p.dentry).d_inode };
        // SAFETY: A non-null `inode` is the valid inode of the pinned dentry.
        if inode.is_null() || super::mode_type(unsafe { (*inode).i_mode }) != bindings::S_IFREG {
            return Err(EINVAL);
        }
        // `dentry_open` checks no permission (`open(2)` does it in `may_open`): check read
        // access as the mounter, as overlayfs does before opening a file of its layers.
        // SAFETY: `p.mnt` is a valid mount (we hold a reference through `found`), `inode` is
        // valid (see above).
        to_result(unsafe {
            bindings::inode_permission(
                bindings::mnt_idmap(p.mnt),
                inode,
                (bindings::MAY_OPEN | bindings::MAY_READ) as _,
            )
        })?;
        // O_NONBLOCK and O_NOCTTY cannot matter for a regular file; they are there so that no
        // open of this path can ever wait or take a controlling terminal.
        let flags =
            bindings::O_RDONLY | bindings::O_LARGEFILE | bindings::O_NONBLOCK | bindings::O_NOCTTY;
        // SAFETY: `p` is a valid path (we hold a reference); the credentials are alive (type
        // invariant) and `dentry_open` takes its own reference for the file (`f_cred`).
        let file = unsafe { bindings::dentry_open(p, flags as _, self.cred.as_ptr()) };
        let file = NonNull::new(from_err_ptr(file)?).ok_or(ENOENT)?;
        // INVARIANT: `dentry_open` returned a reference to an open regular file that we own.
        Ok(RegularFile { file })
    }

    /// The stacking depth of the file system the mount belongs to (`s_stack_depth`: 0 for a
    /// file system on a block device or in memory, one more per file system on top of it).
    pub fn stack_depth(&self) -> i32 {
        // SAFETY: By the type invariant the mount is alive, so is its super block; the depth
        // is set before the super block goes live and never changes afterwards.
        unsafe { (*(*self.mnt.as_ptr()).mnt_sb).s_stack_depth }
    }
}

/// A counted path reference (`struct path` from a lookup); released when dropped.
///
/// # Invariants
///
/// The wrapped path holds references to its mount and dentry that we own.
struct PathRef(bindings::path);

impl Drop for PathRef {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the references.
        unsafe { bindings::path_put(&self.0) };
    }
}

/// The current task's credentials overridden, until dropped (`override_creds` and
/// `revert_creds`).
///
/// # Invariants
///
/// `old` was returned by `override_creds` on the current task, whose credentials have not been
/// overridden again since (or that override has been reverted). The type is neither `Send` nor
/// `Sync` (raw pointer), so it is dropped on the task that made it.
struct CredsOverride {
    old: *const bindings::cred,
}

impl CredsOverride {
    /// Makes `cred` the current task's (subjective) credentials.
    ///
    /// # Safety
    ///
    /// `cred` must be valid and stay alive until the value returned is dropped, and overrides
    /// made while it exists must be reverted before it is dropped.
    unsafe fn new(cred: *const bindings::cred) -> Self {
        // SAFETY: `cred` is valid (function contract); `override_creds` takes a reference to
        // it for as long as the override lasts.
        let old = unsafe { bindings::override_creds(cred) };
        // INVARIANT: `override_creds` returned the credentials it replaced, on this task;
        // later overrides are reverted first (function contract).
        Self { old }
    }
}

impl Drop for CredsOverride {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `old` came from the override being undone, on this
        // task, and no later override is still in place.
        unsafe { bindings::revert_creds(self.old) };
    }
}

impl Drop for PrivateMount {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the mount and the credentials reference.
        unsafe {
            bindings::kern_unmount(self.mnt.as_ptr());
            bindings::put_cred(self.cred.as_ptr());
        }
    }
}

/// A regular file opened for reading by the kernel, with the credentials of the mounter.
///
/// # Invariants
///
/// `file` is an open regular file that we own a reference to, opened with the credentials of
/// a [`PrivateMount`] (its `f_cred`).
pub struct RegularFile {
    file: NonNull<bindings::file>,
}

// SAFETY: Open files are reference counted and may be read and released from any thread.
unsafe impl Send for RegularFile {}

// SAFETY: `kernel_read` with an explicit position may run concurrently.
unsafe impl Sync for RegularFile {}

impl RegularFile {
    /// The inode of the open file, valid for as long as `self` (for the other abstractions of
    /// `fs`, e.g. [`super::verity`]).
    pub(super) fn inode_ptr(&self) -> *mut bindings::inode {
        // SAFETY: The file is open (type invariant), so `f_inode` is set and never changes.
        unsafe { (*self.file.as_ptr()).f_inode }
    }

    /// The size of the file.
    pub fn size(&self) -> Result<u64> {
        // SAFETY: The file is open, so its inode is valid.
        let size = unsafe { bindings::i_size_read((*self.file.as_ptr()).f_inode) };
        Ok(size.try_into()?)
    }

    /// Reads into `buf` from byte `pos` on; returns how many bytes were read (0 at the end of
    /// the file).
    pub fn read_at(&self, buf: &mut [u8], pos: u64) -> Result<usize> {
        self.read_into(ReadBuf::new(buf), pos)
    }

    /// [`RegularFile::read_at`] into `buf`.
    fn read_into(&self, buf: ReadBuf<'_>, pos: u64) -> Result<usize> {
        let mut pos: bindings::loff_t = pos.try_into()?;
        // Read as the mounter, not as whichever task happens to fault the page in (LSMs check
        // the current credentials on each read), as overlayfs reads its backing files.
        // SAFETY: `f_cred` is the counted reference the open file holds to the mounter's
        // credentials (given to `dentry_open`), alive for as long as the file; the guard is
        // dropped at the end of this function, on this task, after `kernel_read` returned.
        let _creds = unsafe { CredsOverride::new((*self.file.as_ptr()).f_cred) };
        // SAFETY: The file is open; `buf` is valid for writes of its length (type invariant).
        let n =
            unsafe { bindings::kernel_read(self.file.as_ptr(), buf.ptr.cast(), buf.len, &mut pos) };
        if n < 0 {
            return Err(Error::from_errno(n as _));
        }
        Ok(n as usize)
    }

    /// Fills `buf` from byte `pos` on; reaching the end of the file first is [`EIO`].
    pub fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> Result {
        self.fill(buf, pos, Self::read_at)
    }

    /// Fills `buf` from byte `pos` on with `read`, which returns how many bytes it read (0 at
    /// the end of the file); reaching the end of the file first is [`EIO`].
    fn fill(
        &self,
        buf: &mut [u8],
        pos: u64,
        read: fn(&Self, &mut [u8], u64) -> Result<usize>,
    ) -> Result {
        let mut done = 0;
        while done < buf.len() {
            let at = pos.checked_add(done as u64).ok_or(EOVERFLOW)?;
            let n = read(self, &mut buf[done..], at)?;
            if n == 0 {
                return Err(EIO);
            }
            done += n;
        }
        Ok(())
    }

    /// Starts reading bytes `pos..pos + len` of the file into its page cache in the background
    /// (`POSIX_FADV_WILLNEED`), so that the reads that follow find them there.
    ///
    /// For a reader that knows which range it will read soon: the range is asked for in one
    /// go, as few large requests, rather than by a readahead window that starts small and
    /// grows with each sequential read. Only a hint: a range past the end of the file, a
    /// length of 0 or a failure to start the I/O changes nothing but the speed of later reads.
    pub fn will_need(&self, pos: u64, len: u64) {
        let (Ok(pos), Ok(len)) = (
            bindings::loff_t::try_from(pos),
            bindings::loff_t::try_from(len),
        ) else {
            return;
        };
        if len == 0 {
            return;
        }
        // As in `read_at`: the I/O is started on behalf of the mounter.
        // SAFETY: `f_cred` is the counted reference the open file holds to the mounter's
        // credentials, alive for as long as the file; the guard is dropped at the end of this
        // function, on this task.
        let _creds = unsafe { CredsOverride::new((*self.file.as_ptr()).f_cred) };
        self.advise(pos, len, bindings::POSIX_FADV_WILLNEED);
    }

    /// Gives `advice` (`POSIX_FADV_WILLNEED` or `POSIX_FADV_DONTNEED`, the only ones asked
    /// for) on bytes `pos..pos + len`; a failure only leaves the page cache as it was.
    fn advise(&self, pos: bindings::loff_t, len: bindings::loff_t, advice: u32) {
        let Ok(advice) = i32::try_from(advice) else {
            return;
        };
        // SAFETY: The file is open (type invariant). `vfs_fadvise` checks its arguments; for
        // WILLNEED it only starts reads into the file's page cache, for DONTNEED it starts
        // writeback of dirty pages (as the same advice from any reader of the file would) and
        // drops clean ones, taking the locks it needs.
        let _ = unsafe { bindings::vfs_fadvise(self.file.as_ptr(), pos, len, advice) };
    }

    /// The file's readahead window in bytes: its backing device's `read_ahead_kb` when it was
    /// opened (0 when readahead is off).
    pub fn readahead_bytes(&self) -> u64 {
        // SAFETY: The file is open (type invariant), so the union holds `f_ra` (the other
        // members serve a file being released or freed). Advice on the file may change
        // `ra_pages` concurrently, as for any reader: it is read once, as the VFS does.
        let pages = unsafe {
            core::ptr::read_volatile(core::ptr::addr_of!(
                (*self.file.as_ptr()).__bindgen_anon_2.f_ra.ra_pages
            ))
        };
        u64::from(pages) << bindings::PAGE_SHIFT
    }

    /// Drops the clean, unmapped page-cache pages of the file from the one holding byte `pos`
    /// up to, not including, the one holding byte `end` (up to the last page if `end` is the
    /// file's size or more).
    ///
    /// For a reader that copies what it read into a cache of its own (a file system reading
    /// its backing files into its own page cache): the bytes would otherwise be cached twice.
    /// The page holding `end` is kept because a sequential reader continues in it. Pages that
    /// are dirty, locked, mapped or under writeback stay (`POSIX_FADV_DONTNEED`).
    pub fn drop_cached(&self, pos: u64, end: u64) {
        let size = self.size().unwrap_or(u64::MAX);
        let shift = bindings::PAGE_SHIFT;
        let first = pos >> shift;
        let last = if end >= size {
            // Through the page holding the last byte.
            size.saturating_sub(1) >> shift
        } else {
            match (end >> shift).checked_sub(1) {
                Some(last) => last,
                None => return,
            }
        };
        if size == 0 || first > last {
            return;
        }
        // Whole pages, so that the advice drops the first and the last (`first << shift` is at
        // most `pos`; `last >= first`).
        let Some(len) = (last - first + 1).checked_mul(1 << shift) else {
            return;
        };
        let (Ok(start), Ok(len)) = (
            bindings::loff_t::try_from(first << shift),
            bindings::loff_t::try_from(len),
        ) else {
            return;
        };
        // Not `invalidate_mapping_pages` alone: a page just read sits in its CPU's LRU batch,
        // with a reference that makes it fail, and would stay cached. The advice drains that
        // batch first (and every CPU's when a page still could not be dropped).
        self.advise(start, len, bindings::POSIX_FADV_DONTNEED);
    }

    /// Reads into `buf` from byte `pos` on, bypassing the file's page cache (`IOCB_DIRECT`)
    /// where that can be done, as a normal read otherwise; returns how many bytes were read (0
    /// at the end of the file).
    ///
    /// For a reader that keeps what it read in a cache of its own: the bytes then go from the
    /// disk into `buf` without being cached a second time, or copied, as the backing file's
    /// pages. Direct I/O is asked for only if the file system supports it on this file
    /// (`FMODE_CAN_ODIRECT`) and `buf`'s address, `pos` and `buf.len()` are multiples of
    /// [`DIRECT_ALIGN`]; the file system may still serve the read through its page cache
    /// (ext4 does for fs-verity files), and a direct read it refuses ([`EINVAL`]) is done
    /// again as a normal one.
    pub fn read_direct_at(&self, buf: &mut [u8], pos: u64) -> Result<usize> {
        self.read_direct_into(ReadBuf::new(buf), pos)
    }

    /// Fills `buf` from byte `pos` on as [`RegularFile::read_direct_at`] reads (directly where
    /// it can); reaching the end of the file first is [`EIO`].
    pub fn read_direct_exact_at(&self, buf: &mut [u8], pos: u64) -> Result {
        self.fill(buf, pos, Self::read_direct_at)
    }

    /// [`RegularFile::read_direct_at`] into `buf`.
    fn read_direct_into(&self, buf: ReadBuf<'_>, pos: u64) -> Result<usize> {
        if !self.can_read_direct(buf.ptr, buf.len, pos) {
            return self.read_into(buf, pos);
        }
        let ki_pos: bindings::loff_t = pos.try_into()?;
        let len = buf.len;
        let addr = buf.ptr;
        let vmapped = is_vmalloc(addr);
        if vmapped {
            // On architectures whose data caches alias, no line of `buf` may be written back
            // over what the device writes into it.
            // SAFETY: `addr` is the vmalloc address of `buf`, valid for `len` bytes.
            unsafe { bindings::flush_kernel_vmap_range(addr.cast(), len as _) };
        }
        let kvec = bindings::kvec {
            iov_base: addr.cast(),
            iov_len: len,
        };
        let mut kiocb = core::mem::MaybeUninit::<bindings::kiocb>::uninit();
        // SAFETY: `init_sync_kiocb` writes the whole structure; the file is open.
        unsafe { bindings::init_sync_kiocb(kiocb.as_mut_ptr(), self.file.as_ptr()) };
        // SAFETY: Initialised just above.
        let mut kiocb = unsafe { kiocb.assume_init() };
        kiocb.ki_pos = ki_pos;
        kiocb.ki_flags |= bindings::IOCB_DIRECT as core::ffi::c_int;
        let mut iter = core::mem::MaybeUninit::<bindings::iov_iter>::uninit();
        // SAFETY: `iov_iter_kvec` initialises `iter` over the one segment `kvec`, which
        // describes `buf` (valid for writes of `len` bytes, and borrowed mutably until the end
        // of this function, after the read completed: the kiocb is synchronous; the device
        // only writes it, so whether its bytes were initialised does not matter).
        unsafe { bindings::iov_iter_kvec(iter.as_mut_ptr(), bindings::ITER_DEST, &kvec, 1, len) };
        // As in `read_at`: read as the mounter.
        // SAFETY: `f_cred` is the counted reference the open file holds to the mounter's
        // credentials, alive for as long as the file; the guard is dropped at the end of this
        // function, on this task.
        let _creds = unsafe { CredsOverride::new((*self.file.as_ptr()).f_cred) };
        // SAFETY: The file is open and was checked for direct I/O support; `kiocb` is a
        // synchronous kiocb of this file (no completion callback: the call returns once the
        // read is done) and `iter` describes `buf`, which outlives the call.
        let n = unsafe {
            bindings::vfs_iocb_iter_read(self.file.as_ptr(), &mut kiocb, iter.as_mut_ptr())
        };
        if vmapped {
            // Lines the CPU may have fetched speculatively while the device wrote `buf`.
            // SAFETY: As for the flush above.
            unsafe { bindings::invalidate_kernel_vmap_range(addr.cast(), len as _) };
        }
        if n == -(bindings::EINVAL as isize) {
            // A direct read the file system refuses (alignment stricter than a page): read
            // normally.
            return self.read_into(buf, pos);
        }
        if n < 0 {
            return Err(Error::from_errno(n as _));
        }
        Ok(n as usize)
    }

    /// Reads the whole file into a new buffer; it must not be larger than `max` bytes
    /// ([`EFBIG`]). The buffer is at least 8-byte aligned (it comes from `kvmalloc`).
    ///
    /// The file is read with [`RegularFile::read_direct_at`]: the buffer is allocated in
    /// whole [`DIRECT_ALIGN`] units (`kvmalloc` of such a size is aligned to one), so that
    /// the file's bytes do not stay in its page cache as well where its file system reads
    /// it directly. The reads go straight into the buffer's unused capacity (nothing zeroes
    /// it first), in steps of [`READ_STEP`] bytes with a [`cond_resched`] between steps: `max`
    /// may be hundreds of MiB, and a kernel without full preemption must not spend seconds in
    /// one loop. A file that changes size meanwhile is read up to the size it had first
    /// (reaching its end earlier is [`EIO`]).
    pub fn read_to_vec(&self, max: usize) -> Result<KVVec<u8>> {
        let (mut v, size) = self.whole_buffer(max)?;
        // SAFETY: No byte of the new buffer is claimed to be initialised.
        unsafe { self.read_rest(&mut v, 0, size) }?;
        Ok(v)
    }

    /// An empty buffer for the whole file, as [`RegularFile::read_to_vec`] allocates it, and
    /// the file's size.
    fn whole_buffer(&self, max: usize) -> Result<(KVVec<u8>, usize)> {
        let size: usize = self.size()?.try_into().map_err(|_| EFBIG)?;
        if size > max {
            return Err(EFBIG);
        }
        let whole = size.checked_next_multiple_of(DIRECT_ALIGN).ok_or(EFBIG)?;
        Ok((KVVec::with_capacity(whole, GFP_KERNEL)?, size))
    }

    /// Reads bytes `done..size` of the file into `v`'s capacity, as
    /// [`RegularFile::read_to_vec`] does, then makes `v` the file's `size` bytes.
    ///
    /// # Safety
    ///
    /// `v` must be a buffer of [`RegularFile::whole_buffer`] for this file (`size` is the size
    /// it returned) and bytes `0..done` of its capacity must have been written with the
    /// file's bytes.
    unsafe fn read_rest(&self, v: &mut KVVec<u8>, mut done: usize, size: usize) -> Result {
        let whole = v.capacity();
        while done < size {
            let end = done.saturating_add(READ_STEP).min(whole);
            let step = v.spare_capacity_mut().get_mut(done..end).ok_or(EIO)?;
            // Only the last read may be short (at the end of the file); one after it is not
            // aligned and is read normally.
            let n = self.read_direct_into(ReadBuf::uninit(step), done as u64)?;
            if n == 0 {
                return Err(EIO);
            }
            done = done.saturating_add(n);
            cond_resched();
        }
        // SAFETY: Bytes `0..done` of the capacity were written (function contract, and the
        // reads above), and `size <= done` (no read returns more than it was given, and
        // `whole` is the capacity); bytes need no drop.
        unsafe { v.set_len(size) };
        Ok(())
    }

    /// Reads each of `files` whole, as [`RegularFile::read_to_vec`] does, with at most `max`
    /// bytes each; the results are in the order of `files`.
    ///
    /// The direct reads of all of them are submitted before the first is waited for (as
    /// asynchronous kiocbs, under one block plug), so that the device serves them together
    /// instead of one after the other. The call returns once every read has completed; the
    /// wait is not interruptible, since the device writes into the buffers until then. A read
    /// that cannot be made that way (no direct I/O, refused, short) is finished as
    /// [`RegularFile::read_to_vec`] reads, after the others.
    pub fn read_to_vecs(files: &[&RegularFile], max: usize) -> Result<KVec<Result<KVVec<u8>>>> {
        // Per file: its buffer and size, and the index of its read in `reqs` if it has one.
        let mut bufs = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for file in files {
            bufs.push((file.whole_buffer(max), None), GFP_KERNEL)?;
        }
        let batch = KBox::pin_init(Batch::new(), GFP_KERNEL)?;
        // Never grown after this: the file system keeps pointers into it until completion.
        let mut reqs = KVec::<Pending>::with_capacity(files.len(), GFP_KERNEL)?;
        for (file, (buf, req)) in files.iter().zip(bufs.iter_mut()) {
            let Ok((v, _)) = buf else { continue };
            let addr = v.spare_capacity_mut().as_mut_ptr().cast::<u8>();
            let len = v.capacity();
            if file.can_read_direct(addr, len, 0) {
                *req = Some(reqs.len());
                reqs.push(Pending::new(file, addr, len, &batch), GFP_KERNEL)?;
            }
        }
        let mut plug = MaybeUninit::<bindings::blk_plug>::uninit();
        // SAFETY: `blk_start_plug` initialises the plug, which lives on this stack until
        // `blk_finish_plug` below.
        unsafe { bindings::blk_start_plug(plug.as_mut_ptr()) };
        for req in reqs.iter() {
            // SAFETY: `req` is in `reqs`, which is not grown, moved or freed before every read
            // completed (the wait below); its buffer is the capacity of a vector of `bufs`
            // (moving the vector does not move it), likewise; so is `batch`; each read is
            // submitted once.
            unsafe { req.submit() };
        }
        // SAFETY: The plug was started above, on this task.
        unsafe { bindings::blk_finish_plug(plug.as_mut_ptr()) };
        batch.wait();
        // Every read completed: nothing writes into the buffers any more.
        let mut out = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for (file, (buf, req)) in files.iter().zip(bufs) {
            let r = buf.and_then(|(mut v, size)| {
                let mut done = 0;
                if let Some(req) = req.and_then(|i| reqs.get(i)) {
                    req.finish();
                    match req.result() {
                        Ok(n) => done = n.min(v.capacity()),
                        // Refused (alignment stricter than a page): read below, which then
                        // reads normally, as `read_direct_at` does.
                        Err(e) if e == EINVAL => (),
                        Err(e) => return Err(e),
                    }
                }
                // SAFETY: `v` is this file's buffer of `whole_buffer`, and a completed read
                // wrote bytes `0..done` of its capacity (a read never returns more than it
                // was given).
                unsafe { file.read_rest(&mut v, done, size) }?;
                Ok(v)
            });
            out.push(r, GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Whether a read of `len` bytes into `addr` at `pos` is asked for with direct I/O (see
    /// [`RegularFile::read_direct_at`]).
    fn can_read_direct(&self, addr: *const u8, len: usize, pos: u64) -> bool {
        // SAFETY: The file is open (type invariant), so `f_mode` is readable; the flag is set
        // at open and never changes afterwards.
        let can = unsafe { (*self.file.as_ptr()).f_mode } & bindings::FMODE_CAN_ODIRECT != 0;
        can && len != 0
            && (addr as usize | len) % DIRECT_ALIGN == 0
            && pos % DIRECT_ALIGN as u64 == 0
    }
}

/// The completion all reads of one [`RegularFile::read_to_vecs`] call signal.
///
/// # Invariants
///
/// `done` was initialised by `init_completion` and never moves (the value is pinned).
#[pin_data]
struct Batch {
    #[pin]
    done: Opaque<bindings::completion>,
    /// Reads not completed yet, plus one held by the submitter until all are submitted.
    left: AtomicUsize,
}

impl Batch {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `init_completion` initialises the completion in place, where it stays.
            done <- unsafe {
                Opaque::ffi_init(|p: *mut bindings::completion| bindings::init_completion(p))
            },
            left: AtomicUsize::new(1),
        })
    }

    /// Counts one read done; the last one completes the batch.
    fn finish_one(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: `done` is initialised (type invariant); `complete` may be called from any
            // context, and a waiter returns only after it released the completion's lock.
            unsafe { bindings::complete(self.done.get()) };
        }
    }

    /// Drops the submitter's count and waits until every read completed.
    fn wait(&self) {
        self.finish_one();
        // SAFETY: `done` is initialised (type invariant). Not interruptible: the device may
        // be writing into the buffers until the last read completes.
        unsafe { bindings::wait_for_completion(self.done.get()) };
    }
}

/// One read of [`RegularFile::read_to_vecs`]: an asynchronous direct read of a whole file.
///
/// # Invariants
///
/// `kvec` describes a buffer valid for writes of its length, and `file` is an open file, both
/// until the read completed; `batch` points to the batch the read counts in, which outlives
/// the read. `kiocb` and `iter` are set up by [`Pending::submit`].
struct Pending {
    kiocb: Opaque<bindings::kiocb>,
    kvec: Opaque<bindings::kvec>,
    iter: Opaque<bindings::iov_iter>,
    file: NonNull<bindings::file>,
    /// What the read returned (bytes read, or a negative errno), once completed.
    ret: AtomicIsize,
    batch: *const Batch,
}

impl Pending {
    /// A read of `len` bytes of `file` from its start into `addr`, counting in `batch`; set up
    /// in [`Pending::submit`], once the value is at its final address.
    fn new(file: &RegularFile, addr: *mut u8, len: usize, batch: &Batch) -> Self {
        Pending {
            kiocb: Opaque::uninit(),
            kvec: Opaque::new(bindings::kvec {
                iov_base: addr.cast(),
                iov_len: len,
            }),
            iter: Opaque::uninit(),
            file: file.file,
            ret: AtomicIsize::new(0),
            batch,
        }
    }

    /// Starts the read; its completion (now, or later from `pending_done`) counts in the
    /// batch.
    ///
    /// # Safety
    ///
    /// `self` must not move, and its file, buffer and batch must stay alive, until the batch's
    /// wait returned; it is submitted once.
    unsafe fn submit(&self) {
        let file = self.file.as_ptr();
        let kiocb = self.kiocb.get();
        let (addr, len) = self.buffer();
        if is_vmalloc(addr.cast()) {
            // On architectures whose data caches alias, no line of the buffer may be written
            // back over what the device writes into it.
            // SAFETY: `addr` is the vmalloc address of the buffer, valid for `len` bytes
            // (type invariant and function contract).
            unsafe { bindings::flush_kernel_vmap_range(addr, len as _) };
        }
        // SAFETY: `init_sync_kiocb` writes the whole kiocb; the file is open (`Pending::new`
        // took it from an open `RegularFile`, alive per the function contract).
        unsafe { bindings::init_sync_kiocb(kiocb, file) };
        // SAFETY: `kiocb` was initialised just above and nothing else uses it yet. With a
        // completion callback the kiocb is asynchronous: a direct read may return
        // `-EIOCBQUEUED` and call `pending_done` when done.
        unsafe {
            (*kiocb).ki_flags |= bindings::IOCB_DIRECT as core::ffi::c_int;
            (*kiocb).ki_pos = 0;
            (*kiocb).ki_complete = Some(pending_done);
        }
        // SAFETY: `iov_iter_kvec` initialises `iter` over the one segment `kvec`, both at
        // their final addresses (function contract), describing the buffer (valid for
        // writes of `len` bytes until the batch's wait returned).
        unsafe {
            bindings::iov_iter_kvec(
                self.iter.get(),
                bindings::ITER_DEST,
                self.kvec.get(),
                1,
                len,
            )
        };
        // SAFETY: `batch` outlives the read (type invariant).
        let batch = unsafe { &*self.batch };
        batch.left.fetch_add(1, Ordering::AcqRel);
        // As in `read_at`: read as the mounter.
        // SAFETY: `f_cred` is the counted reference the open file holds to the mounter's
        // credentials, alive for as long as the file; the guard is dropped at the end of this
        // function, on this task.
        let creds = unsafe { CredsOverride::new((*file).f_cred) };
        // SAFETY: The file is open and was checked for direct I/O support; `kiocb` is an
        // asynchronous kiocb of this file whose buffer and completion state outlive the read
        // (function contract).
        let n = unsafe { bindings::vfs_iocb_iter_read(file, kiocb, self.iter.get()) };
        drop(creds);
        if n != -(bindings::EIOCBQUEUED as isize) {
            // Done without queueing (or refused): `pending_done` is not called.
            self.ret.store(n, Ordering::Release);
            batch.finish_one();
        }
    }

    /// After the batch's wait: drops the lines of the buffer the CPU may have fetched
    /// speculatively while the device wrote it.
    fn finish(&self) {
        let (addr, len) = self.buffer();
        if is_vmalloc(addr.cast()) {
            // SAFETY: `addr` is the vmalloc address of the read's buffer, valid for `len`
            // bytes (type invariant), which nothing writes any more.
            unsafe { bindings::invalidate_kernel_vmap_range(addr, len as _) };
        }
    }

    /// The buffer the read writes into.
    fn buffer(&self) -> (*mut core::ffi::c_void, usize) {
        // SAFETY: `kvec` is written once, in `new`, and only read afterwards (by the file
        // system too).
        let kvec = unsafe { &*self.kvec.get() };
        (kvec.iov_base, kvec.iov_len)
    }

    /// What the completed read returned.
    fn result(&self) -> Result<usize> {
        let n = self.ret.load(Ordering::Acquire);
        if n < 0 {
            return Err(Error::from_errno(n as _));
        }
        Ok(n as usize)
    }
}

/// The completion callback of the reads of [`RegularFile::read_to_vecs`].
///
/// # Safety
///
/// `iocb` must be the `kiocb` of a submitted [`Pending`] (only those have this callback).
unsafe extern "C" fn pending_done(iocb: *mut bindings::kiocb, ret: crate::ffi::c_long) {
    // SAFETY: `iocb` is the `kiocb` field of a live `Pending` (function contract; it stays
    // alive until its batch's wait returned, which needs this call first).
    let req = unsafe { &*crate::container_of!(iocb, Pending, kiocb) };
    req.ret.store(ret, Ordering::Release);
    // SAFETY: The batch outlives the read (type invariant of `Pending`).
    let batch = unsafe { &*req.batch };
    // The last use of `req` and `batch` here: the submitter may free both once the last read
    // counted.
    batch.finish_one();
}

/// The destination of a read: a buffer borrowed for writes, whose bytes may be uninitialised
/// (the kernel only writes them; no `&mut [u8]` is made over uninitialised memory).
///
/// # Invariants
///
/// `ptr` is valid for writes of `len` bytes for `'a`.
struct ReadBuf<'a> {
    ptr: *mut u8,
    len: usize,
    _buf: PhantomData<&'a mut [MaybeUninit<u8>]>,
}

impl<'a> ReadBuf<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        // INVARIANT: `buf` is borrowed mutably for `'a`.
        ReadBuf {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            _buf: PhantomData,
        }
    }

    fn uninit(buf: &'a mut [MaybeUninit<u8>]) -> Self {
        // INVARIANT: `buf` is borrowed mutably for `'a`.
        ReadBuf {
            ptr: buf.as_mut_ptr().cast(),
            len: buf.len(),
            _buf: PhantomData,
        }
    }
}

/// Alignment of the address, position and length of a direct read (a page: enough for any
/// logical block size the block layer supports).
pub const DIRECT_ALIGN: usize = crate::page::PAGE_SIZE;

/// Whether `addr` is a vmalloc address (then its pages are not those of the linear map).
fn is_vmalloc(addr: *const u8) -> bool {
    // SAFETY: Only compares the address with the bounds of the vmalloc area.
    unsafe { bindings::is_vmalloc_addr(addr.cast()) }
}

/// Bytes [`RegularFile::read_to_vec`] reads between two [`cond_resched`] calls.
pub const READ_STEP: usize = 1 << 20;

impl Drop for RegularFile {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own a reference to the open file.
        unsafe { bindings::fput(self.file.as_ptr()) };
    }
}
