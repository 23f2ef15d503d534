// SPDX-License-Identifier: GPL-2.0

//! Read-only file systems.
//!
//! A file system implements [`FileSystem`] and registers it with a [`Registration`] kept in its
//! module. The abstraction covers what a read-only file system backed by metadata it can look
//! up on demand needs: mounting through the new mount API ([`context`]), a super block that is
//! set up before it goes live ([`sb`]), an inode cache keyed by inode number ([`inode`]),
//! `lookup`, `iterate_shared` readdir with stable positions ([`dir`]), regular files and symlinks
//! served from the page cache through `read_folio` ([`folio`]), special inodes, extended
//! attributes ([`xattr`]), `statfs` and `show_options` ([`seq`]), and kernel-internal reads of
//! files below a private mount ([`file`]).
//!
//! C headers: [`include/linux/fs.h`](srctree/include/linux/fs.h),
//! [`include/linux/fs_context.h`](srctree/include/linux/fs_context.h)

use crate::error::{from_result, to_result};
use crate::ffi;
use crate::prelude::*;
use crate::types::{ForeignOwnable, Opaque};
use crate::{bindings, ThisModule};
use core::{marker::PhantomData, ptr};
use macros::vtable;

pub mod context;
pub mod dir;
pub mod file;
pub mod folio;
pub mod inode;
pub mod sb;
pub mod seq;
pub mod verity;
pub mod xattr;

use context::{FsContext, ParamTableRef, Parsed};
use dir::DirEmitter;
use folio::LockedFolio;
use inode::{INode, INodeRef};
use sb::{New, Ready, Stat, SuperBlock};
use seq::SeqFile;
use xattr::XattrList;

/// Largest file size the page cache can address (`MAX_LFS_FILESIZE`: `i64::MAX` on 64-bit
/// architectures, smaller on 32-bit ones, where page indices are 32 bits).
pub const MAX_LFS_FILESIZE: i64 = bindings::MAX_LFS_FILESIZE;

/// A read-only file system type.
///
/// All methods that take an inode or a super block are called on live objects only: the
/// abstraction guarantees that [`FileSystem::fill_super`] has returned the per-mount data
/// before any inode of the super block can be reached.
#[vtable]
pub trait FileSystem: Sized + Send + Sync + 'static {
    /// Name of the file system type (as in `mount -t <name>` and `/proc/filesystems`).
    const NAME: &'static CStr;

    /// Mount options gathered while the mount is configured (`fs_context` private data).
    type Options: Default + Send + 'static;

    /// Per-mount data, available through [`SuperBlock::data`] once the super block is live.
    type Data: Send + Sync + 'static;

    /// Whether readahead windows that no reader waits for yet are filled by a work item
    /// (of a queue of the registration) rather than by the reader that starts them, so that
    /// it goes on with the folios it has while they are read, as it does while a block
    /// device reads them. For a file system whose `readahead` waits for its own reads.
    const DEFER_READAHEAD: bool = false;

    /// Per-inode data, given when a new inode is described ([`inode::NewINode::init`]) and
    /// available through [`INode::data`] for as long as the inode exists. It lives in the same
    /// allocation as the VFS inode and is dropped when the inode is destroyed.
    type INodeData: Send + Sync + 'static;

    /// The mount parameters the file system takes. The VFS matches each parameter against
    /// them (`fs_parse()`): it reports unknown ones and bad values itself, and hands the others
    /// to [`FileSystem::parse_param`].
    const PARAMS: ParamTableRef;

    /// Takes one mount parameter that matched an entry of [`FileSystem::PARAMS`].
    fn parse_param(fc: &FsContext, opts: &mut Self::Options, param: &Parsed<'_>) -> Result;

    /// Sets up a new super block from the options and returns the per-mount data.
    ///
    /// Errors should be reported with [`FsContext::error`] so that `mount` can print them.
    fn fill_super(
        fc: &FsContext,
        opts: &mut Self::Options,
        sb: &mut SuperBlock<Self, New>,
    ) -> Result<Self::Data>;

    /// Returns the root inode of a super block that has just gone live.
    fn init_root(sb: &SuperBlock<Self>) -> Result<INodeRef<Self>>;

    /// Looks `name` up in directory `dir`: `Ok(None)` means it does not exist.
    fn lookup(dir: &INode<Self>, name: &[u8]) -> Result<Option<INodeRef<Self>>>;

    /// Emits the entries of directory `dir` starting at [`DirEmitter::pos`] (2 or more: the
    /// abstraction emits `.` and `..` at positions 0 and 1).
    fn read_dir(dir: &INode<Self>, emitter: &mut DirEmitter<'_>) -> Result;

    /// Fills a locked folio of a regular file or a symlink (whose contents is its target).
    ///
    /// On success the whole folio should have been written (zeroes past the end of file); the
    /// abstraction zeroes what was not written from the start of the folio on, then marks it
    /// up to date. In all cases it unlocks it.
    fn read_folio(inode: &INode<Self>, folio: &mut LockedFolio<'_>) -> Result;

    /// Fills the folios of a readahead request of a regular file ([`folio::Readahead`]), in
    /// order; those it leaves are read later through [`FileSystem::read_folio`].
    ///
    /// With [`FileSystem::DEFER_READAHEAD`], it may be called from a work item, after the
    /// reader that started the window has gone on.
    fn readahead(_inode: &INode<Self>, _ra: &mut folio::Readahead<'_>) -> Result {
        crate::build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Answers `statfs`.
    fn statfs(_sb: &SuperBlock<Self>) -> Result<Stat> {
        crate::build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Writes the mount options, each as `,key=value`, for `/proc/mounts`.
    fn show_options(_sb: &SuperBlock<Self>, _seq: &mut SeqFile) -> Result {
        crate::build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Lists the names of the extended attributes of `inode`.
    fn list_xattrs(_inode: &INode<Self>, _list: &mut XattrList<'_>) -> Result {
        crate::build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Copies the value of extended attribute `name` (full name, with its namespace prefix)
    /// into `buf` and returns its length; an empty `buf` asks for the length only. Returns
    /// [`ENODATA`] when there is no such attribute and [`ERANGE`] when `buf` is too small.
    fn get_xattr(_inode: &INode<Self>, _name: &[u8], _buf: &mut [u8]) -> Result<usize> {
        crate::build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A registered file system type; unregistered when dropped.
///
/// # Invariants
///
/// `fs` is registered with the VFS for the lifetime of the value, and is heap-allocated so that
/// it does not move while registered; the lock class keys it holds are registered with lockdep
/// (which accepts keys outside static memory only once registered) for as long as `fs` exists.
pub struct Registration {
    fs: KBox<Registered>,
}

/// A registered file system type and what its super blocks share.
#[repr(C)]
struct Registered {
    /// First, so that a super block's `s_type` points to the whole.
    fs: Opaque<bindings::file_system_type>,
    /// Fills the readahead windows that the file system defers
    /// ([`FileSystem::DEFER_READAHEAD`]); null if it does not. Destroyed, which waits for
    /// the work still queued or running, before the module can go away.
    readahead: *mut bindings::workqueue_struct,
}

impl Registration {
    /// The readahead queue of the file system type of `sb` (null if it has none).
    ///
    /// # Safety
    ///
    /// `sb` must be a valid super block of a file system type registered with a
    /// [`Registration`].
    pub(crate) unsafe fn readahead_queue(
        sb: *mut bindings::super_block,
    ) -> *mut bindings::workqueue_struct {
        // SAFETY: `sb` is valid, and its type is the `fs` field of a live `Registered`
        // (function contract), which is `repr(C)` with `fs` first and `Opaque` transparent.
        unsafe { (*(*sb).s_type.cast::<Registered>()).readahead }
    }
}

// SAFETY: The VFS may use the registered type from any thread; `Registration` only unregisters
// it, which may also happen from any thread.
unsafe impl Send for Registration {}

// SAFETY: `Registration` has no methods that take `&self`.
unsafe impl Sync for Registration {}

/// Calls `f` with the address of each lock class key of file system type `fs`.
///
/// # Safety
///
/// `fs` must point to a valid `file_system_type`.
unsafe fn for_each_lock_key(
    fs: *mut bindings::file_system_type,
    f: impl Fn(*mut bindings::lock_class_key),
) {
    fn elements<T, const N: usize>(a: *mut [T; N]) -> impl Iterator<Item = *mut T> {
        (0..N).map(move |i| a.cast::<T>().wrapping_add(i))
    }
    // SAFETY: `fs` is valid (function contract); only addresses of its fields are taken.
    let writers = unsafe { ptr::addr_of_mut!((*fs).s_writers_key) };
    // SAFETY: As above.
    let keys = unsafe {
        [
            ptr::addr_of_mut!((*fs).s_lock_key),
            ptr::addr_of_mut!((*fs).s_umount_key),
            ptr::addr_of_mut!((*fs).s_vfs_rename_key),
            ptr::addr_of_mut!((*fs).i_lock_key),
            ptr::addr_of_mut!((*fs).i_mutex_key),
            ptr::addr_of_mut!((*fs).invalidate_lock_key),
            ptr::addr_of_mut!((*fs).i_mutex_dir_key),
        ]
    };
    for key in keys {
        f(key);
    }
    for key in elements(writers) {
        f(key);
    }
}

impl Registration {
    /// Registers file system type `T` for `module`.
    pub fn new<T: FileSystem>(module: &'static ThisModule) -> Result<Self> {
        let readahead = if T::DEFER_READAHEAD {
            // SAFETY: The format takes the one string argument given, a valid C string.
            let wq = unsafe {
                bindings::alloc_workqueue(
                    crate::c_str!("%s-readahead").as_char_ptr(),
                    bindings::wq_flags_WQ_UNBOUND,
                    0,
                    T::NAME.as_char_ptr(),
                )
            };
            if wq.is_null() {
                return Err(ENOMEM);
            }
            wq
        } else {
            ptr::null_mut()
        };
        let fs = KBox::new(
            Registered {
                fs: Opaque::new(bindings::file_system_type {
                    name: T::NAME.as_char_ptr(),
                    init_fs_context: Some(Tables::<T>::init_fs_context),
                    kill_sb: Some(Tables::<T>::kill_sb),
                    owner: module.as_ptr(),
                    // SAFETY: All-zero is a valid value for the remaining fields (null
                    // pointers, absent callbacks, no flags, empty lock keys and lists).
                    ..unsafe { core::mem::zeroed() }
                }),
                readahead,
            },
            GFP_KERNEL,
        );
        let fs = match fs {
            Ok(fs) => fs,
            Err(e) => {
                if !readahead.is_null() {
                    // SAFETY: Allocated above and never used.
                    unsafe { bindings::destroy_workqueue(readahead) };
                }
                return Err(e.into());
            }
        };
        // SAFETY: `fs` is valid; each key is registered once, before any lock uses it, and
        // stays at its address until unregistered.
        unsafe { for_each_lock_key(fs.fs.get(), |k| bindings::lockdep_register_key(k)) };
        // SAFETY: `fs` points to a valid, fully initialised `file_system_type` that lives at a
        // stable address until `drop` unregisters it.
        if let Err(e) = to_result(unsafe { bindings::register_filesystem(fs.fs.get()) }) {
            // SAFETY: The keys were registered above and no lock was initialised with them.
            unsafe { for_each_lock_key(fs.fs.get(), |k| bindings::lockdep_unregister_key(k)) };
            if !readahead.is_null() {
                // SAFETY: Allocated above and never used: no super block was made.
                unsafe { bindings::destroy_workqueue(readahead) };
            }
            return Err(e);
        }
        // INVARIANT: `fs` and its keys were registered just above.
        Ok(Self { fs })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `self.fs` is registered.
        unsafe { bindings::unregister_filesystem(self.fs.fs.get()) };
        if !self.fs.readahead.is_null() {
            // Deferred readahead runs this module's code: wait for what is still queued or
            // running (no super block is left to queue more).
            // SAFETY: The queue was allocated in `new`; nothing can queue to it any more.
            unsafe { bindings::destroy_workqueue(self.fs.readahead) };
        }
        // Inodes are freed by `free_inode`, this module's code, in RCU callbacks: wait for the
        // pending ones before the module can go away.
        // SAFETY: Called in process context, without locks held.
        unsafe { bindings::rcu_barrier() };
        // SAFETY: By the type invariant the keys are registered. No lock uses them any more:
        // the type is unregistered, and each super block held a reference to the module, so
        // none is left when the module's registration is dropped.
        unsafe { for_each_lock_key(self.fs.fs.get(), |k| bindings::lockdep_unregister_key(k)) };
    }
}

/// The C callback tables of a file system type and their trampolines.
pub(crate) struct Tables<T: FileSystem>(PhantomData<T>);

impl<T: FileSystem> Tables<T> {
    const CONTEXT: bindings::fs_context_operations = bindings::fs_context_operations {
        free: Some(Self::free_fs_context),
        dup: None,
        parse_param: Some(Self::parse_param),
        parse_monolithic: None,
        get_tree: Some(Self::get_tree),
        reconfigure: Some(Self::reconfigure),
    };

    const SUPER: bindings::super_operations = bindings::super_operations {
        alloc_inode: Some(inode::alloc_inode::<T>),
        destroy_inode: Some(inode::destroy_inode::<T>),
        free_inode: Some(inode::free_inode::<T>),
        statfs: if T::HAS_STATFS {
            Some(Self::statfs)
        } else {
            None
        },
        show_options: if T::HAS_SHOW_OPTIONS {
            Some(Self::show_options)
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
    unsafe extern "C" fn init_fs_context(fc: *mut bindings::fs_context) -> ffi::c_int {
        from_result(|| {
            let opts = KBox::new(T::Options::default(), GFP_KERNEL)?;
            // SAFETY: The VFS passes a valid context that it does not use concurrently while
            // it is being initialised.
            unsafe {
                (*fc).ops = &Self::CONTEXT;
                (*fc).fs_private = opts.into_foreign().cast_mut();
                (*fc).sb_flags |= bindings::SB_RDONLY;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn free_fs_context(fc: *mut bindings::fs_context) {
        // SAFETY: The VFS passes a valid context; `fs_private` is null or was set by
        // `init_fs_context` with `into_foreign`, and nothing borrows it any more.
        drop(unsafe { KBox::<T::Options>::try_from_foreign((*fc).fs_private) });
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn parse_param(
        fc: *mut bindings::fs_context,
        param: *mut bindings::fs_parameter,
    ) -> ffi::c_int {
        from_result(|| {
            let mut result = core::mem::MaybeUninit::<bindings::fs_parse_result>::zeroed();
            // SAFETY: The VFS passes a valid context and parameter; by the invariant of
            // `ParamTableRef`, `T::PARAMS` is a terminated table that lives for ever; `result` is
            // writable. Unknown parameters (`-ENOPARAM`, which the VFS handles) and bad values
            // come back as errors.
            let opt = to_result_opt(unsafe {
                bindings::fs_parse(fc, T::PARAMS.as_ptr(), param, result.as_mut_ptr())
            })?;
            // SAFETY: Zeroed, then written by `fs_parse`: all of its fields are integers.
            let result = unsafe { result.assume_init() };
            // SAFETY: As above, and the context's operations are ours, so `fs_private` holds
            // the options set by `init_fs_context`, which only the VFS's serialised
            // configuration calls use. A parameter that matched a string entry has a string
            // value, which lives as long as `param`.
            let (ctx, opts, parsed) = unsafe {
                let string = if (*param).type_() == bindings::fs_value_type_fs_value_is_string {
                    Some(CStr::from_char_ptr((*param).__bindgen_anon_1.string))
                } else {
                    None
                };
                let parsed = Parsed {
                    opt,
                    string,
                    enum_value: result.__bindgen_anon_1.uint_32,
                };
                (
                    FsContext::from_raw(fc),
                    &mut *(*fc).fs_private.cast::<T::Options>(),
                    parsed,
                )
            };
            T::parse_param(ctx, opts, &parsed)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn get_tree(fc: *mut bindings::fs_context) -> ffi::c_int {
        // SAFETY: The VFS passes a valid context; `fill_super` has the signature `get_tree_nodev`
        // expects.
        unsafe { bindings::get_tree_nodev(fc, Some(Self::fill_super)) }
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn reconfigure(fc: *mut bindings::fs_context) -> ffi::c_int {
        // SAFETY: The VFS passes a valid context. The file system stays read-only; other
        // options cannot change on remount and are ignored.
        unsafe { (*fc).sb_flags |= bindings::SB_RDONLY };
        0
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn fill_super(
        sb_ptr: *mut bindings::super_block,
        fc: *mut bindings::fs_context,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: `get_tree_nodev` passes a new super block, exclusively ours until this
            // function returns.
            unsafe {
                (*sb_ptr).s_op = &Self::SUPER;
                (*sb_ptr).s_xattr = if T::HAS_GET_XATTR {
                    xattr::Handlers::<T>::TABLE.as_ptr()
                } else {
                    ptr::null()
                };
                (*sb_ptr).s_flags |= bindings::SB_RDONLY as ffi::c_ulong;
                (*sb_ptr).s_maxbytes = MAX_LFS_FILESIZE;
                (*sb_ptr).s_blocksize = bindings::PAGE_SIZE as _;
                (*sb_ptr).s_blocksize_bits = bindings::PAGE_SHIFT as _;
                (*sb_ptr).s_time_gran = 1;
            }
            // A super block without a block device reads through the no-op
            // `backing_dev_info`, whose readahead window is zero pages: every read would
            // then fill one folio at a time through `read_folio`, and `readahead` would
            // never run. A private one has the default window (`VM_READAHEAD_PAGES`,
            // tunable in /sys/class/bdi/<name>/read_ahead_kb), as erofs's file-backed
            // mounts get; `generic_shutdown_super` releases it.
            // SAFETY: The super block is new and exclusively ours (see above).
            to_result(unsafe { bindings::super_setup_bdi(sb_ptr) })?;

            // SAFETY: The super block is being initialised (see above), its `s_fs_info` is
            // still null and its bdi its own (just set up), which is what
            // `SuperBlock<T, New>` requires.
            let new_sb = unsafe { SuperBlock::<T, New>::from_raw_mut(sb_ptr) };
            // SAFETY: `fc` is valid, and its operations are ours, so `fs_private` holds the
            // options; `get_tree` is not called concurrently with other configuration calls.
            let (ctx, opts) = unsafe {
                (
                    FsContext::from_raw(fc),
                    &mut *(*fc).fs_private.cast::<T::Options>(),
                )
            };
            let data = KBox::new(T::fill_super(ctx, opts, new_sb)?, GFP_KERNEL)?;
            // SAFETY: The super block is still exclusively ours; `kill_sb` frees the data.
            unsafe { (*sb_ptr).s_fs_info = data.into_foreign().cast_mut() };

            // SAFETY: `s_fs_info` now holds the file system's data, so the super block is live.
            let sb = unsafe { SuperBlock::<T, Ready>::from_raw(sb_ptr) };
            let root = T::init_root(sb)?;
            if !ptr::eq(root.super_block(), sb) {
                pr_err!("{}: the root inode is of another super block\n", T::NAME);
                return Err(EIO);
            }
            if !root.is_dir() {
                pr_err!("{}: the root inode is not a directory\n", T::NAME);
                return Err(ENOTDIR);
            }
            // SAFETY: `d_make_root` takes over the reference owned by `root` (and drops it on
            // failure).
            let dentry = unsafe { bindings::d_make_root(root.into_raw().as_ptr().cast()) };
            if dentry.is_null() {
                return Err(ENOMEM);
            }
            // SAFETY: The super block is still exclusively ours.
            unsafe { (*sb_ptr).s_root = dentry };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn kill_sb(sb: *mut bindings::super_block) {
        // SAFETY: The VFS passes a valid super block being torn down.
        let data = unsafe { (*sb).s_fs_info };
        // SAFETY: Same as above; it is an anonymous super block made by `get_tree_nodev`.
        unsafe { bindings::kill_anon_super(sb) };
        // SAFETY: `s_fs_info` is null or was set by `fill_super` with `into_foreign`; all
        // inodes and dentries are gone, so nothing borrows it any more.
        drop(unsafe { KBox::<T::Data>::try_from_foreign(data) });
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn statfs(
        dentry: *mut bindings::dentry,
        buf: *mut bindings::kstatfs,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The VFS passes a valid dentry of one of our live super blocks.
            let sb = unsafe { SuperBlock::<T, Ready>::from_raw((*dentry).d_sb) };
            let stat = T::statfs(sb)?;
            // SAFETY: The VFS passes a valid, zeroed `kstatfs` to fill.
            unsafe {
                (*buf).f_type = stat.magic as _;
                (*buf).f_namelen = stat.namelen as _;
                (*buf).f_bsize = stat.bsize as _;
                (*buf).f_frsize = stat.bsize as _;
                (*buf).f_blocks = stat.blocks;
                (*buf).f_files = stat.files;
                // As `u64_to_fsid()`: the low and high halves, bits kept as they are.
                (*buf).f_fsid.val = [stat.fsid as u32 as _, (stat.fsid >> 32) as u32 as _];
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only called by the VFS, through the operation table, with the arguments that table
    /// entry's contract specifies.
    unsafe extern "C" fn show_options(
        m: *mut bindings::seq_file,
        root: *mut bindings::dentry,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The VFS passes the valid root dentry of one of our live super blocks.
            let sb = unsafe { SuperBlock::<T, Ready>::from_raw((*root).d_sb) };
            // SAFETY: The VFS passes a valid seq_file that we may write to until we return.
            let seq = unsafe { SeqFile::from_raw(m) };
            T::show_options(sb, seq)?;
            Ok(0)
        })
    }
}

/// The option number `fs_parse()` returns, or its error.
fn to_result_opt(ret: ffi::c_int) -> Result<u8> {
    to_result(ret)?;
    u8::try_from(ret).map_err(|_| EINVAL)
}

/// The `S_IFMT` bits of a mode.
pub(crate) const fn mode_type(mode: u16) -> u32 {
    mode as u32 & bindings::S_IFMT
}
