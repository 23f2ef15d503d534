// SPDX-License-Identifier: GPL-2.0

//! Scheduler helpers for long-running kernel code.
//!
//! C header: [`include/linux/sched.h`](srctree/include/linux/sched.h)

use crate::bindings;

/// Lets another task run if this one has used up its time slice.
///
/// On a kernel built without full preemption (`CONFIG_PREEMPT_NONE`, `CONFIG_PREEMPT_VOLUNTARY`)
/// nothing else runs on this CPU until kernel code returns to user space or sleeps: a loop
/// whose length is chosen by user input or by data read from disk must call this on each
/// iteration, or it can stall the CPU for seconds (soft lockup, RCU stall). It is cheap when
/// there is nothing to do (a flag test).
///
/// Like every function that may sleep, it must not be called in atomic context (with a spinlock
/// held, in an RCU read-side critical section, with interrupts off); with
/// `CONFIG_DEBUG_ATOMIC_SLEEP` such a call is reported.
#[inline]
pub fn cond_resched() {
    // SAFETY: `cond_resched` has no preconditions besides the context rule above, which is not
    // a memory-safety requirement (a violation is reported, as `might_sleep` does in C).
    unsafe { bindings::cond_resched() };
}
