// SPDX-License-Identifier: GPL-2.0

//! Inodes.
//!
//! [`SuperBlock::get_or_create_inode`] returns either a cached, initialised [`INode`] or a
//! [`NewINode`]: a new inode, still locked and invisible to others, which the file system must
//! describe with [`NewINode::init`] before it can be used. Dropping a `NewINode` instead marks
//! the inode bad and releases it (`iget_failed`).
//!
//! C header: [`include/linux/fs.h`](srctree/include/linux/fs.h)

use super::{dir, folio, sb::SuperBlock, xattr, FileSystem};
use crate::bindings;
use crate::ffi;
use crate::prelude::*;
use crate::types::Opaque;
use core::{marker::PhantomData, mem::MaybeUninit, ptr, ptr::NonNull};

/// An inode of file system `T`.
///
/// # References and the lifetime of the super block
///
/// The VFS requires every inode reference of a super block to be gone before the super block is
/// killed: `generic_shutdown_super` warns about busy inodes otherwise, and a later `iput` would
/// use the freed super block and its [`FileSystem::Data`]. Callbacks receive `&INode<T>`, which
/// the VFS keeps alive for the call and which cannot outlive it. Owned references are
/// [`INodeRef<T>`]: the ones this API hands out ([`SuperBlock::get_or_create_inode`],
/// [`NewINode::init`]) are meant to be returned from [`FileSystem::init_root`] and
/// [`FileSystem::lookup`], whose trampolines give them to the VFS (`d_make_root`,
/// `d_splice_alias`); from then on they belong to dentries, which the VFS releases
/// (`shrink_dcache_for_umount`) before it calls `kill_sb`, which frees the data. The types keep
/// a file system from holding one longer: `INode<T>` is not reference counted on its own (there
/// is no `ARef<INode<T>>`), and neither `INodeRef<T>` nor [`NewINode<T>`] is `Send` or `Sync`,
/// so neither can be stored in [`FileSystem::Data`] or [`FileSystem::INodeData`] (which must
/// be both), in a static, or in anything handed to another thread.
///
/// # Invariants
///
/// The wrapped inode is valid, initialised (not `I_NEW`), belongs to a live super block of type
/// `T`, and its reference count is non-zero while a reference to it exists. It is the `inode`
/// field of an `INodeWithData<T>` made by `alloc_inode`, whose data is initialised.
#[repr(transparent)]
pub struct INode<T: FileSystem>(Opaque<bindings::inode>, PhantomData<T>);

/// An owned reference to an inode of `T` (released with `iput` when dropped).
///
/// Not `Send` nor `Sync`: see [`INode`] on why such a reference must not outlive the callback
/// that made it.
///
/// # Invariants
///
/// `0` points to an [`INode<T>`] (so all of its invariants hold) to which we own a reference.
pub struct INodeRef<T: FileSystem>(NonNull<INode<T>>, PhantomData<*mut ()>);

impl<T: FileSystem> INodeRef<T> {
    /// Takes over a reference to an inode.
    ///
    /// # Safety
    ///
    /// `inode` must be valid as an [`INode<T>`] (initialised, of a live super block of type
    /// `T`), and the caller must own a reference to it, which it transfers.
    pub(crate) unsafe fn from_raw(inode: NonNull<INode<T>>) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Self(inode, PhantomData)
    }

    /// Gives up the reference without releasing it (to the VFS).
    pub(crate) fn into_raw(self) -> NonNull<INode<T>> {
        let inode = self.0;
        core::mem::forget(self);
        inode
    }
}

impl<T: FileSystem> core::ops::Deref for INodeRef<T> {
    type Target = INode<T>;

    fn deref(&self) -> &INode<T> {
        // SAFETY: By the type invariant the inode is valid while we hold our reference.
        unsafe { self.0.as_ref() }
    }
}

impl<T: FileSystem> Clone for INodeRef<T> {
    fn clone(&self) -> Self {
        // SAFETY: The inode is valid and we hold a reference, so its count is non-zero.
        unsafe { bindings::ihold(self.0.as_ptr().cast()) };
        // INVARIANT: `ihold` took the reference the new value owns.
        Self(self.0, PhantomData)
    }
}

impl<T: FileSystem> Drop for INodeRef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own a reference, which we give up.
        unsafe { bindings::iput(self.0.as_ptr().cast()) };
    }
}

// SAFETY: Inodes are used from any thread; the fields read through `INode` are immutable once
// the inode is initialised.
unsafe impl<T: FileSystem> Send for INode<T> {}

// SAFETY: See `Send`.
unsafe impl<T: FileSystem> Sync for INode<T> {}

impl<T: FileSystem> INode<T> {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid, initialised inode of a live super block of type `T`, alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::inode) -> &'a Self {
        // SAFETY: `INode` is a transparent wrapper; the rest is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// The inode number.
    pub fn ino(&self) -> u64 {
        // SAFETY: `i_ino` is immutable once the inode is initialised.
        (unsafe { (*self.0.get()).i_ino }) as u64
    }

    /// The file system's data of the inode, as given to [`NewINode::init`].
    pub fn data(&self) -> &T::INodeData {
        // SAFETY: By the type invariant the inode is the `inode` field of an `INodeWithData<T>`
        // whose data is initialised; the data is only dropped by `destroy_inode`, once no
        // reference to the inode is left, and only ever borrowed immutably until then.
        unsafe {
            let outer = INodeWithData::<T>::from_inode(self.0.get());
            (*ptr::addr_of!((*outer).data)).assume_init_ref()
        }
    }

    /// The super block the inode belongs to.
    pub fn super_block(&self) -> &SuperBlock<T> {
        // SAFETY: By the type invariant the super block is live and outlives its inodes.
        unsafe { SuperBlock::from_raw((*self.0.get()).i_sb) }
    }

    /// The inode's size in bytes.
    pub fn size(&self) -> i64 {
        // SAFETY: The inode is valid; `i_size_read` reads the size consistently.
        unsafe { bindings::i_size_read(self.0.get()) }
    }

    /// Whether the inode is a directory.
    pub fn is_dir(&self) -> bool {
        // SAFETY: `i_mode` is immutable once the inode is initialised.
        super::mode_type(unsafe { (*self.0.get()).i_mode }) == bindings::S_IFDIR
    }
}

/// The result of [`SuperBlock::get_or_create_inode`].
pub enum Lookup<T: FileSystem> {
    /// The inode was in the cache.
    Cached(INodeRef<T>),
    /// The inode is new and must be initialised.
    New(NewINode<T>),
}

/// The kind of an inode, with what that kind needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Directory.
    Dir,
    /// Regular file, read through the page cache.
    Reg,
    /// Symbolic link; its target (of length `size`) is read through the page cache.
    Lnk,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Sock,
    /// Character device (major, minor).
    Chr(u32, u32),
    /// Block device (major, minor).
    Blk(u32, u32),
}

/// What a new inode is made of.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Kind of inode.
    pub typ: Type,
    /// Permission bits (the low 12 bits of the mode); higher bits are ignored.
    pub mode: u16,
    /// Size in bytes.
    pub size: i64,
    /// Number of hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// A new inode, locked, that must be initialised before use.
///
/// # Invariants
///
/// The wrapped inode is valid and `I_NEW`, of a live super block of type `T`, and we own a
/// reference to it.
///
/// Not `Send` nor `Sync`, as [`INodeRef`].
pub struct NewINode<T: FileSystem>(NonNull<bindings::inode>, PhantomData<(T, *mut ())>);

const MINORBITS: u32 = 20;

/// Whether `major:minor` fits a kernel device number (`MKDEV`: 12 and 20 bits).
pub fn valid_dev(major: u32, minor: u32) -> bool {
    major < (1 << (32 - MINORBITS)) && minor < (1 << MINORBITS)
}

/// Longest symbolic link target: one page holds it with its NUL (`page_get_link`).
pub const SYMLINK_MAX: usize = crate::page::PAGE_SIZE - 1;

impl<T: FileSystem> NewINode<T> {
    /// Wraps a new inode.
    ///
    /// # Safety
    ///
    /// `inode` must be a valid, `I_NEW` inode of a live super block of type `T`, and the caller
    /// must own a reference to it, which it transfers.
    pub(crate) unsafe fn from_raw(inode: NonNull<bindings::inode>) -> Self {
        Self(inode, PhantomData)
    }

    /// The number of the inode.
    pub fn ino(&self) -> u64 {
        // SAFETY: The inode is valid by the type invariant.
        (unsafe { (*self.0.as_ptr()).i_ino }) as u64
    }

    /// The super block the inode belongs to.
    pub fn super_block(&self) -> &SuperBlock<T> {
        // SAFETY: By the type invariant the super block is live.
        unsafe { SuperBlock::from_raw((*self.0.as_ptr()).i_sb) }
    }

    /// Describes the inode, attaches the file system's `data` to it ([`INode::data`]; dropped
    /// when the inode is destroyed) and makes it available to others.
    ///
    /// Time stamps are 0 (the epoch); the block count is derived from the size.
    pub fn init(self, params: Params, data: T::INodeData) -> Result<INodeRef<T>> {
        let size = params.size;
        if size < 0 {
            return Err(EINVAL);
        }
        let blocks = (size as u64).div_ceil(512);
        let rdev = match params.typ {
            Type::Chr(major, minor) | Type::Blk(major, minor) => {
                if !valid_dev(major, minor) {
                    return Err(EINVAL);
                }
                (major << MINORBITS) | minor
            }
            _ => 0,
        };
        if params.typ == Type::Lnk && (size == 0 || size > SYMLINK_MAX as i64) {
            return Err(ENAMETOOLONG);
        }
        let perm = u32::from(params.mode) & 0o7777;
        let inode = self.0.as_ptr();
        // SAFETY: Every inode of a super block of `T` comes from `alloc_inode`, so it is the
        // `inode` field of an `INodeWithData<T>`. The inode is new and locked: nobody else
        // reads its data until `unlock_new_inode` below. A new inode never had data.
        unsafe {
            let outer = INodeWithData::<T>::from_inode(inode);
            (*outer).data.write(data);
            (*outer).has_data = true;
        }
        // SAFETY: The inode is new and locked (`I_NEW`): nobody else looks at it until
        // `unlock_new_inode` below, so its fields may be written.
        unsafe {
            let mode = |t: u32| (t | perm) as bindings::umode_t;
            match params.typ {
                Type::Dir => {
                    (*inode).i_mode = mode(bindings::S_IFDIR);
                    (*inode).i_op = &Tables::<T>::DIR_INODE;
                    (*inode).__bindgen_anon_3.i_fop = &Tables::<T>::DIR_FILE;
                }
                Type::Reg => {
                    (*inode).i_mode = mode(bindings::S_IFREG);
                    (*inode).i_op = &Tables::<T>::OTHER_INODE;
                    (*inode).__bindgen_anon_3.i_fop = &bindings::generic_ro_fops;
                    (*(*inode).i_mapping).a_ops = &Tables::<T>::AOPS;
                    // `read_folio` fills folios of any size (see `LockedFolio`).
                    bindings::mapping_set_large_folios((*inode).i_mapping);
                }
                Type::Lnk => {
                    (*inode).i_mode = mode(bindings::S_IFLNK);
                    (*inode).i_op = &Tables::<T>::SYMLINK_INODE;
                    bindings::inode_nohighmem(inode);
                    (*(*inode).i_mapping).a_ops = &Tables::<T>::AOPS;
                }
                Type::Fifo | Type::Sock | Type::Chr(..) | Type::Blk(..) => {
                    let t = match params.typ {
                        Type::Fifo => bindings::S_IFIFO,
                        Type::Sock => bindings::S_IFSOCK,
                        Type::Chr(..) => bindings::S_IFCHR,
                        _ => bindings::S_IFBLK,
                    };
                    bindings::init_special_inode(inode, mode(t), rdev);
                    (*inode).i_op = &Tables::<T>::OTHER_INODE;
                }
            }
            (*inode).i_size = size;
            (*inode).i_blocks = blocks;
            bindings::set_nlink(inode, params.nlink);
            bindings::i_uid_write(inode, params.uid);
            bindings::i_gid_write(inode, params.gid);
            (*inode).i_atime_sec = 0;
            (*inode).i_atime_nsec = 0;
            (*inode).i_mtime_sec = 0;
            (*inode).i_mtime_nsec = 0;
            (*inode).i_ctime_sec = 0;
            (*inode).i_ctime_nsec = 0;
            bindings::unlock_new_inode(inode);
        }
        let inode = self.0.cast::<INode<T>>();
        core::mem::forget(self);
        // SAFETY: The inode is now initialised, and the reference we owned is transferred.
        Ok(unsafe { INodeRef::from_raw(inode) })
    }
}

impl<T: FileSystem> Drop for NewINode<T> {
    fn drop(&mut self) {
        // SAFETY: The inode is new and we own a reference: `iget_failed` marks it bad, unlocks
        // it and releases that reference.
        unsafe { bindings::iget_failed(self.0.as_ptr()) };
    }
}

/// An inode of file system `T` with the file system's data for it, in one allocation (as
/// file systems in C embed the VFS inode in their own inode structure).
///
/// # Invariants
///
/// `data` is initialised exactly when `has_data` is true. `has_data` is written while the inode
/// is new and locked (by [`NewINode::init`]) and read once the last reference is gone (by
/// `destroy_inode`), so never concurrently.
#[repr(C)]
pub(crate) struct INodeWithData<T: FileSystem> {
    data: MaybeUninit<T::INodeData>,
    has_data: bool,
    inode: Opaque<bindings::inode>,
}

impl<T: FileSystem> INodeWithData<T> {
    /// The structure that holds `inode`.
    ///
    /// # Safety
    ///
    /// `inode` must be the `inode` field of an `INodeWithData<T>` (an inode of a super block of
    /// `T`, all of which are allocated by `alloc_inode`).
    unsafe fn from_inode(inode: *mut bindings::inode) -> *mut Self {
        // SAFETY: `inode` points into an `INodeWithData<T>` (function contract), so stepping
        // back by the field's offset stays within that allocation.
        unsafe { crate::container_of!(inode, Self, inode).cast_mut() }
    }
}

/// `alloc_inode` of the super blocks of `T`: the VFS inode and `T::INodeData` in one block.
///
/// # Safety
///
/// Only called by the VFS, through the super block operations of `T`.
pub(crate) unsafe extern "C" fn alloc_inode<T: FileSystem>(
    _sb: *mut bindings::super_block,
) -> *mut bindings::inode {
    let Ok(block) = KBox::<INodeWithData<T>>::new_uninit(GFP_KERNEL) else {
        return ptr::null_mut();
    };
    let outer = KBox::into_raw(block).cast::<INodeWithData<T>>();
    // SAFETY: `outer` is a valid, exclusively owned allocation for an `INodeWithData<T>`; only
    // fields are written through raw pointers. `inode_init_once` is what a slab constructor
    // does for an inode cache: it initialises the parts `inode_init_always` does not.
    // INVARIANT: `has_data` is false and `data` uninitialised.
    unsafe {
        ptr::addr_of_mut!((*outer).has_data).write(false);
        let inode = Opaque::raw_get(ptr::addr_of!((*outer).inode));
        bindings::inode_init_once(inode);
        inode
    }
}

/// `destroy_inode` of the super blocks of `T`: drops the inode's data (in process context,
/// before the RCU grace period that `free_inode` waits for).
///
/// # Safety
///
/// Only called by the VFS, through the super block operations of `T`, with an inode that
/// `alloc_inode` made and that nobody references any more.
pub(crate) unsafe extern "C" fn destroy_inode<T: FileSystem>(inode: *mut bindings::inode) {
    // SAFETY: The inode was made by `alloc_inode` (function contract).
    let outer = unsafe { INodeWithData::<T>::from_inode(inode) };
    // SAFETY: Nobody else uses the inode any more; by the type invariant `data` is initialised
    // when `has_data` is set, and it is dropped once (the flag is cleared).
    unsafe {
        if (*outer).has_data {
            (*outer).has_data = false;
            (*outer).data.assume_init_drop();
        }
    }
}

/// `free_inode` of the super blocks of `T`: frees what `alloc_inode` allocated (called after an
/// RCU grace period, so that RCU path walks that may still see the inode are done).
///
/// # Safety
///
/// Only called by the VFS, through the super block operations of `T`, with an inode that
/// `alloc_inode` made and `destroy_inode` (if it ran) has emptied.
pub(crate) unsafe extern "C" fn free_inode<T: FileSystem>(inode: *mut bindings::inode) {
    // SAFETY: The inode was made by `alloc_inode` (function contract) from a `KBox`.
    let outer = unsafe { INodeWithData::<T>::from_inode(inode) };
    // SAFETY: The block came from `KBox::into_raw` in `alloc_inode`; nothing uses it any more.
    // Its data was dropped by `destroy_inode` or never set: `MaybeUninit` drops nothing.
    drop(unsafe { KBox::from_raw(outer.cast::<MaybeUninit<INodeWithData<T>>>()) });
}

/// Whether `inode`, just returned by `iget_locked`, is new (`I_NEW`).
///
/// # Safety
///
/// `inode` must be valid.
pub(crate) unsafe fn is_new(inode: *mut bindings::inode) -> bool {
    // `i_state` changes under `i_lock` (other bits than `I_NEW` may change while we look):
    // read it once, as `READ_ONCE` does. `I_NEW` itself cannot change under us: it is set
    // before `iget_locked` hands out the inode and only its new owner clears it.
    // SAFETY: `inode` is valid (function contract); a volatile read of an aligned field.
    let state = unsafe { ptr::read_volatile(ptr::addr_of!((*inode).i_state)) };
    state & bindings::I_NEW != 0
}

/// The inode, file and address space operations of a file system type.
struct Tables<T: FileSystem>(PhantomData<T>);

impl<T: FileSystem> Tables<T> {
    const LISTXATTR: Option<
        unsafe extern "C" fn(*mut bindings::dentry, *mut ffi::c_char, usize) -> isize,
    > = if T::HAS_LIST_XATTRS {
        Some(xattr::listxattr::<T>)
    } else {
        None
    };

    const DIR_INODE: bindings::inode_operations = bindings::inode_operations {
        lookup: Some(Self::lookup),
        listxattr: Self::LISTXATTR,
        // SAFETY: All-zero is a valid value for the remaining fields (absent callbacks).
        ..unsafe { core::mem::zeroed() }
    };

    const DIR_FILE: bindings::file_operations = bindings::file_operations {
        llseek: Some(bindings::generic_file_llseek),
        read: Some(bindings::generic_read_dir),
        iterate_shared: Some(dir::iterate_shared::<T>),
        // SAFETY: All-zero is a valid value for the remaining fields (absent callbacks).
        ..unsafe { core::mem::zeroed() }
    };

    const SYMLINK_INODE: bindings::inode_operations = bindings::inode_operations {
        get_link: Some(bindings::page_get_link),
        listxattr: Self::LISTXATTR,
        // SAFETY: All-zero is a valid value for the remaining fields (absent callbacks).
        ..unsafe { core::mem::zeroed() }
    };

    const OTHER_INODE: bindings::inode_operations = bindings::inode_operations {
        listxattr: Self::LISTXATTR,
        // SAFETY: All-zero is a valid value for the remaining fields (absent callbacks).
        ..unsafe { core::mem::zeroed() }
    };

    const AOPS: bindings::address_space_operations = bindings::address_space_operations {
        read_folio: Some(folio::read_folio::<T>),
        readahead: if T::HAS_READAHEAD {
            Some(folio::readahead::<T>)
        } else {
            None
        },
        // SAFETY: All-zero is a valid value for the remaining fields (absent callbacks).
        ..unsafe { core::mem::zeroed() }
    };

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn lookup(
        dir: *mut bindings::inode,
        dentry: *mut bindings::dentry,
        _flags: ffi::c_uint,
    ) -> *mut bindings::dentry {
        // SAFETY: The VFS passes a valid, initialised directory inode of one of our super
        // blocks, and a valid dentry whose name is stable while we look it up.
        let (dir, name) = unsafe {
            let qstr = &(*dentry).d_name;
            let len = qstr.__bindgen_anon_1.__bindgen_anon_1.len as usize;
            (
                INode::<T>::from_raw(dir),
                core::slice::from_raw_parts(qstr.name, len),
            )
        };
        let inode = match T::lookup(dir, name) {
            // An inode of another super block in this one's dentry tree would outlive that
            // super block's data: refuse it (dropping the reference).
            Ok(Some(inode)) if !ptr::eq(inode.super_block(), dir.super_block()) => {
                pr_err!(
                    "{}: lookup returned an inode of another super block\n",
                    T::NAME
                );
                return EIO.to_ptr();
            }
            Ok(Some(inode)) => inode.into_raw().as_ptr().cast::<bindings::inode>(),
            Ok(None) => ptr::null_mut(),
            Err(e) => return e.to_ptr(),
        };
        // SAFETY: `dentry` is the valid, unhashed dentry being looked up; `d_splice_alias` takes
        // over our reference to `inode` (or a null inode for a negative dentry).
        unsafe { bindings::d_splice_alias(inode, dentry) }
    }
}
