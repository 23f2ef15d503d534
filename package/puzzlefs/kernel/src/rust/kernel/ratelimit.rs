// SPDX-License-Identifier: GPL-2.0

//! Rate-limited printing (`lib/ratelimit.c`).
//!
//! [`pr_err_ratelimited!`](crate::pr_err_ratelimited) is the Rust counterpart of the C
//! `pr_err_ratelimited()`: each call site has its own [`RatelimitState`] with the default
//! interval and burst (`DEFAULT_RATELIMIT_INTERVAL`, `DEFAULT_RATELIMIT_BURST`: 10 messages
//! every 5 seconds), and when messages were dropped, the next allowed one is preceded by
//! "`<name>: N callbacks suppressed`", as in C. Use it for messages that an unprivileged user
//! can trigger at will, e.g. by reading a damaged file again and again.
//!
//! C header: [`include/linux/ratelimit.h`](srctree/include/linux/ratelimit.h)

use crate::bindings;
use crate::str::CStr;
use crate::types::Opaque;
use core::sync::atomic::{AtomicU8, Ordering};

const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;

/// The state of one rate limit (`struct ratelimit_state`) with the default interval and burst,
/// usable as a `static`.
///
/// The C state holds a spinlock that must be initialised at run time, so it is set up on first
/// use; a message that races with that first initialisation on another CPU is dropped.
///
/// # Invariants
///
/// `rs` has been initialised by `ratelimit_default_init` once `state` is `READY`, and is not
/// written by Rust code afterwards; only the CPU that moved `state` from `UNINIT` to
/// `INITIALISING` writes it before that.
pub struct RatelimitState {
    rs: Opaque<bindings::ratelimit_state>,
    state: AtomicU8,
    name: &'static CStr,
}

// SAFETY: The C state is only used through `___ratelimit`, which serialises its users with the
// state's own spinlock; its one-time initialisation is serialised by `state`.
unsafe impl Sync for RatelimitState {}

// SAFETY: The state is plain memory, not tied to a thread.
unsafe impl Send for RatelimitState {}

impl RatelimitState {
    /// A rate limit named `name` (in the "callbacks suppressed" message), not yet initialised.
    pub const fn new(name: &'static CStr) -> Self {
        Self {
            rs: Opaque::uninit(),
            state: AtomicU8::new(UNINIT),
            name,
        }
    }

    /// Whether a message may be printed now (`__ratelimit`): `false` once the burst of the
    /// current interval is used up.
    pub fn allow(&self) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        if state == UNINIT {
            state = match self.state.compare_exchange(
                UNINIT,
                INITIALISING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: We moved `state` out of `UNINIT`, so nobody else writes or reads
                    // `rs` until we store `READY` below.
                    unsafe { bindings::ratelimit_default_init(self.rs.get()) };
                    // INVARIANT: `rs` is initialised.
                    self.state.store(READY, Ordering::Release);
                    READY
                }
                Err(now) => now,
            };
        }
        if state != READY {
            // Another CPU is initialising the state right now.
            return false;
        }
        // SAFETY: `rs` is initialised (type invariant, `READY` was read with acquire ordering
        // or stored by us); `name` is a NUL-terminated string that lives for ever.
        unsafe { bindings::___ratelimit(self.rs.get(), self.name.as_char_ptr()) != 0 }
    }
}

/// Prints an error-level message (level 3), at most 10 times every 5 seconds per call site.
///
/// Same arguments as [`pr_err!`](crate::pr_err); the equivalent of the C
/// `pr_err_ratelimited()`. Messages dropped are counted, and reported as
/// "`<module path>: N callbacks suppressed`" once printing is allowed again.
///
/// # Examples
///
/// ```
/// # use kernel::pr_err_ratelimited;
/// pr_err_ratelimited!("bad data at {}\n", 42);
/// ```
#[macro_export]
macro_rules! pr_err_ratelimited (
    ($($arg:tt)*) => {{
        static RS: $crate::ratelimit::RatelimitState =
            $crate::ratelimit::RatelimitState::new($crate::c_str!(::core::module_path!()));
        if RS.allow() {
            $crate::pr_err!($($arg)*);
        }
    }}
);
