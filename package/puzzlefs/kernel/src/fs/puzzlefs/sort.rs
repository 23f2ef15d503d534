// SPDX-License-Identifier: GPL-2.0

//! An in-place heap sort that yields the CPU as it goes.
//!
//! The arrays sorted here are as large as an image makes them (up to a million directory
//! entries), and core's sorts neither yield nor bound their own stack use; a heap sort needs
//! no memory and O(n log n) steps, whatever the input.

#![forbid(unsafe_code)]

use kernel::sched::cond_resched;

/// Sift-downs between two `cond_resched()` calls.
const STEP: usize = 4096;

/// Sorts `v` so that no element is `less` than the one before it (not stable).
pub(crate) fn heapsort_by<T>(v: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let len = v.len();
    for start in (0..len / 2).rev() {
        sift_down(v, start, len, &mut less);
        if start % STEP == 0 {
            cond_resched();
        }
    }
    for end in (1..len).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &mut less);
        if end % STEP == 0 {
            cond_resched();
        }
    }
}

/// Moves `v[root]` down the max-heap `v[..end]`.
fn sift_down<T>(v: &mut [T], mut root: usize, end: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    // Every index used is below `end <= v.len()`.
    loop {
        let Some(mut child) = root.checked_mul(2).and_then(|c| c.checked_add(1)) else {
            return;
        };
        if child >= end {
            return;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[root], &v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}
