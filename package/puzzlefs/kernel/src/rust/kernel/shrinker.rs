// SPDX-License-Identifier: GPL-2.0

//! Shrinkers: how memory reclaim asks a cache to give memory back.
//!
//! A cache that keeps memory nobody else can reclaim (kmalloc, vmalloc) registers a
//! [`Shrinker`]: under memory pressure, reclaim asks it how much it could free
//! ([`Shrink::count`]) and then to free some of it ([`Shrink::scan`]).
//!
//! C header: [`include/linux/shrinker.h`](srctree/include/linux/shrinker.h)

use crate::{bindings, c_str, prelude::*, str::CStr, sync::Arc};
use core::ptr::NonNull;

// The callbacks return an `unsigned long`, which the bindings map to `usize`.

/// `SHRINK_STOP` of include/linux/shrinker.h (`~0UL`; bindgen types the macro as an `i32`).
const SHRINK_STOP: usize = usize::MAX;
/// `SHRINK_EMPTY` of include/linux/shrinker.h (`~0UL - 1`).
const SHRINK_EMPTY: usize = usize::MAX - 1;

/// A cache that memory reclaim may shrink.
///
/// Both functions are called by reclaim, from any task that allocates memory, possibly while
/// that task runs code of the cache's owner. They must therefore not wait for anything that
/// may itself be waiting for memory: a lock of the cache must never be held across an
/// allocation that may reclaim (`GFP_KERNEL`), or reclaim from inside that allocation would
/// wait for the lock its own task holds (lockdep reports this as a `fs_reclaim` dependency).
pub trait Shrink: Send + Sync {
    /// How many objects the cache could free now (in its own unit, e.g. pages).
    fn count(&self) -> usize;

    /// Frees up to `nr` objects; returns how many were freed, or `None` when the cache
    /// cannot make progress now (reclaim then stops asking it in this round).
    fn scan(&self, nr: usize) -> Option<usize>;
}

/// A registered shrinker for the cache `T`; unregistered when dropped.
///
/// # Invariants
///
/// `ptr` is a shrinker allocated with `shrinker_alloc` and registered, that we own, whose
/// `private_data` is `Arc::as_ptr(&data)` and whose callbacks are `count_objects::<T>` and
/// `scan_objects::<T>`.
pub struct Shrinker<T: Shrink> {
    ptr: NonNull<bindings::shrinker>,
    data: Arc<T>,
}

// SAFETY: The shrinker is used from any task by reclaim anyway; `T` is `Send + Sync`.
unsafe impl<T: Shrink> Send for Shrinker<T> {}

// SAFETY: `&Shrinker` gives access to `&T` only, which is `Sync`.
unsafe impl<T: Shrink> Sync for Shrinker<T> {}

impl<T: Shrink> Shrinker<T> {
    /// Registers a shrinker for `data`, named `name` (the name shows in
    /// /sys/kernel/debug/shrinker/ with `CONFIG_SHRINKER_DEBUG`).
    pub fn register(name: &CStr, data: Arc<T>) -> Result<Self> {
        // SAFETY: The format takes one C string, which `name` is; flags 0 (a global shrinker,
        // neither NUMA nor memcg aware).
        let ptr =
            unsafe { bindings::shrinker_alloc(0, c_str!("%s").as_char_ptr(), name.as_char_ptr()) };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // SAFETY: `ptr` was just allocated and is not registered yet: nothing else uses it.
        // `data` is kept in the returned value until after `shrinker_free`.
        unsafe {
            let s = ptr.as_ptr();
            (*s).count_objects = Some(count_objects::<T>);
            (*s).scan_objects = Some(scan_objects::<T>);
            (*s).private_data = core::ptr::from_ref::<T>(&data).cast_mut().cast();
            bindings::shrinker_register(s);
        }
        // INVARIANT: allocated, registered, with the private data and callbacks above.
        Ok(Self { ptr, data })
    }

    /// The cache.
    pub fn data(&self) -> &Arc<T> {
        &self.data
    }
}

impl<T: Shrink> Drop for Shrinker<T> {
    fn drop(&mut self) {
        // SAFETY: We own the registered shrinker (type invariant). `shrinker_free` unregisters
        // it and waits until no callback runs or can start any more, so `data`, dropped after
        // this, is no longer reachable through `private_data`.
        unsafe { bindings::shrinker_free(self.ptr.as_ptr()) };
    }
}

/// # Safety
///
/// `shrinker` is the shrinker of a live [`Shrinker<T>`] (reclaim calls this only between
/// `shrinker_register` and the end of `shrinker_free`).
unsafe extern "C" fn count_objects<T: Shrink>(
    shrinker: *mut bindings::shrinker,
    _sc: *mut bindings::shrink_control,
) -> usize {
    // SAFETY: By the safety requirement the `Shrinker<T>` is alive, so its `private_data` is
    // the pointer of the `Arc<T>` it holds.
    let data = unsafe { &*(*shrinker).private_data.cast::<T>() };
    match data.count() {
        0 => SHRINK_EMPTY,
        n => n.min(SHRINK_EMPTY - 1),
    }
}

/// # Safety
///
/// As for [`count_objects`]; `sc` is the shrink control reclaim passes.
unsafe extern "C" fn scan_objects<T: Shrink>(
    shrinker: *mut bindings::shrinker,
    sc: *mut bindings::shrink_control,
) -> usize {
    // SAFETY: As in `count_objects`.
    let data = unsafe { &*(*shrinker).private_data.cast::<T>() };
    // SAFETY: Reclaim passes a valid shrink control.
    let nr = unsafe { (*sc).nr_to_scan };
    match data.scan(nr) {
        Some(freed) => freed.min(SHRINK_EMPTY - 1),
        None => SHRINK_STOP,
    }
}
