// SPDX-License-Identifier: GPL-2.0

//! Super blocks.
//!
//! A super block is first a [`SuperBlock<T, New>`], being set up by
//! [`FileSystem::fill_super`](super::FileSystem::fill_super), and then a live
//! [`SuperBlock<T>`] (state [`Ready`]) with the file system's data: only a live super block
//! hands out its data and creates inodes.
//!
//! C header: [`include/linux/fs.h`](srctree/include/linux/fs.h)

use super::file::PrivateMount;
use super::inode::{INode, INodeRef, Lookup, NewINode};
use super::FileSystem;
use crate::bindings;
use crate::prelude::*;
use crate::types::{ForeignOwnable, Opaque};
use core::marker::PhantomData;
use core::ptr;

/// Deepest stacking of file systems that read files of other file systems
/// (`FILESYSTEM_MAX_STACK_DEPTH`); see [`SuperBlock::stack_on`].
pub const MAX_STACK_DEPTH: i32 = bindings::FILESYSTEM_MAX_STACK_DEPTH as i32;

/// State of a super block being set up: it has no file system data yet.
pub struct New;

/// State of a live super block: its file system data is set.
pub struct Ready;

/// A super block of file system `T` in state `S` ([`New`] or [`Ready`]).
///
/// # Invariants
///
/// The wrapped super block is valid and belongs to file system type `T`. In state [`Ready`],
/// its `s_fs_info` holds a `KBox<T::Data>` made by `fill_super`, which lives until the super
/// block is killed. In state [`New`], the super block is exclusively owned by the caller of
/// `fill_super`, and its `s_bdi` is its own (`super_setup_bdi`).
#[repr(transparent)]
pub struct SuperBlock<T: FileSystem, S = Ready>(Opaque<bindings::super_block>, PhantomData<(T, S)>);

/// What `statfs` reports.
#[derive(Clone, Copy, Default)]
pub struct Stat {
    /// The file system's magic number.
    pub magic: u32,
    /// Longest file name.
    pub namelen: i64,
    /// Block size.
    pub bsize: i64,
    /// Size in blocks.
    pub blocks: u64,
    /// Number of inodes.
    pub files: u64,
    /// File system id (`f_fsid`): stable across mounts of the same image, distinct between
    /// images, as `u64_to_fsid()` makes it from a 64-bit value.
    pub fsid: u64,
}

impl<T: FileSystem> SuperBlock<T, New> {
    /// Creates a mutable reference to a super block being set up.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid super block of type `T` with a null `s_fs_info` and a
    /// `backing_dev_info` of its own (`super_setup_bdi`), exclusively owned by the caller for
    /// `'a`.
    pub(crate) unsafe fn from_raw_mut<'a>(ptr: *mut bindings::super_block) -> &'a mut Self {
        // SAFETY: `SuperBlock` is a transparent wrapper; the rest is guaranteed by the caller.
        unsafe { &mut *ptr.cast() }
    }

    /// Sets the magic number (as reported by `statfs`).
    pub fn set_magic(&mut self, magic: u32) -> &mut Self {
        // SAFETY: The super block is exclusively ours while it is being set up.
        unsafe { (*self.0.get()).s_magic = magic as _ };
        self
    }

    /// Sets the largest readahead window of the file system's files, in bytes (whole pages,
    /// at least one). Without it, it is `VM_READAHEAD_PAGES` (128 KiB), as for any
    /// `backing_dev_info` of its own. Users can still change it through
    /// /sys/class/bdi/<name>/read_ahead_kb.
    pub fn set_read_ahead(&mut self, bytes: usize) -> &mut Self {
        let pages = (bytes / bindings::PAGE_SIZE).max(1);
        // SAFETY: The super block is exclusively ours while it is being set up, and its
        // `s_bdi` is its own (type invariant), valid while the super block is. That bdi is
        // already in sysfs, whose `read_ahead_kb` writes `ra_pages` without a lock, as the
        // readahead code reads it: one volatile write (`WRITE_ONCE`).
        unsafe {
            let bdi = (*self.0.get()).s_bdi;
            ptr::write_volatile(ptr::addr_of_mut!((*bdi).ra_pages), pages as _);
        }
        self
    }

    /// Records that the file system reads files of the file system `backing` is a mount of (as
    /// overlayfs and ecryptfs read their lower file systems): its stacking depth becomes one
    /// more than that one's, so that nesting such file systems, which nests their calls on
    /// the kernel stack, stays bounded.
    ///
    /// Fails with [`EINVAL`] if the depth would exceed [`MAX_STACK_DEPTH`]; the mount must
    /// then be refused.
    pub fn stack_on(&mut self, backing: &PrivateMount) -> Result<&mut Self> {
        let depth = backing.stack_depth().saturating_add(1);
        if depth > MAX_STACK_DEPTH {
            return Err(EINVAL);
        }
        // SAFETY: The super block is exclusively ours while it is being set up.
        unsafe {
            let sb = self.0.get();
            (*sb).s_stack_depth = (*sb).s_stack_depth.max(depth);
        }
        Ok(self)
    }
}

impl<T: FileSystem> SuperBlock<T, Ready> {
    /// Creates a reference to a live super block.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid super block of type `T` whose `s_fs_info` was set by `fill_super`,
    /// and that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::super_block) -> &'a Self {
        // SAFETY: `SuperBlock` is a transparent wrapper; the rest is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Returns the data of the file system.
    pub fn data(&self) -> &T::Data {
        // SAFETY: By the type invariant, `s_fs_info` holds a `KBox<T::Data>` that outlives
        // `self`, and is only ever borrowed immutably.
        unsafe { KBox::<T::Data>::borrow((*self.0.get()).s_fs_info) }
    }

    /// Returns the inode numbered `ino`: the cached one, or a new one, locked, that the caller
    /// must initialise with [`NewINode::init`].
    pub fn get_or_create_inode(&self, ino: u64) -> Result<Lookup<T>> {
        let ino: crate::ffi::c_ulong = ino.try_into()?;
        // SAFETY: The super block is live by the type invariant.
        let inode = unsafe { bindings::iget_locked(self.0.get(), ino) };
        let inode = core::ptr::NonNull::new(inode).ok_or(ENOMEM)?;
        // SAFETY: `iget_locked` returned a valid inode with a reference we now own.
        if unsafe { super::inode::is_new(inode.as_ptr()) } {
            // SAFETY: The inode is new and locked (`I_NEW`), and we own a reference to it.
            Ok(Lookup::New(unsafe { NewINode::from_raw(inode) }))
        } else {
            // SAFETY: The inode is initialised, and we own a reference to it.
            Ok(Lookup::Cached(unsafe {
                INodeRef::from_raw(inode.cast::<INode<T>>())
            }))
        }
    }
}
