//! Wake-up targets: the [`Notify`] trait, the thread [`Parker`], and the spin policy.

use super::shim::{current_thread, park_until, AtomicBool, Ordering, Thread};
use std::sync::OnceLock;
use std::time::Instant;

/// Something a fence signal, a memory write or a removal wakes. Implementations are cheap and
/// never block or take a fence lock (they are called after the lock is released).
pub(crate) trait Notify: Send + Sync {
    /// Wakes the waiter; it re-checks its condition itself.
    fn notify(&self);
}

/// A one-shot wake flag for one blocked thread.
///
/// States of `notified`: `false` (waiting) -> `true` (notified, set by [`Notify::notify`]). The
/// waiter re-checks the flag after every (possibly spurious) wake-up; no lock is needed because
/// the flag is the only state and the unpark token covers the race between the check and park.
#[derive(Debug)]
pub(crate) struct Parker {
    thread: Thread,
    notified: AtomicBool,
}

impl Parker {
    /// A parker for the calling thread.
    pub(crate) fn for_current_thread() -> Self {
        Parker {
            thread: current_thread(),
            notified: AtomicBool::new(false),
        }
    }

    /// Whether [`Notify::notify`] was called.
    #[inline]
    pub(crate) fn is_notified(&self) -> bool {
        self.notified.load(Ordering::Acquire)
    }

    /// Blocks the calling thread (which must be the one that created the parker) until
    /// notified or until `deadline`. Returns whether it was notified.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.is_notified() {
                return true;
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return self.is_notified();
                }
            }
            park_until(deadline);
        }
    }
}

impl Notify for Parker {
    #[inline]
    fn notify(&self) {
        self.notified.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Whether blocked waits may spin briefly before parking: only when the process may run on
/// more than one CPU (D8; spinning on one CPU only delays the thread that would wake us).
pub(crate) fn spin_allowed() -> bool {
    if cfg!(loom) {
        return false;
    }
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()) > 1)
}

/// Spins for at most `budget_ns` while `done()` is false; returns `done()`'s last answer.
#[inline]
pub(crate) fn spin_until(budget_ns: u64, mut done: impl FnMut() -> bool) -> bool {
    if !spin_allowed() {
        return done();
    }
    let start = Instant::now();
    let mut i: u32 = 0;
    loop {
        if done() {
            return true;
        }
        std::hint::spin_loop();
        i = i.wrapping_add(1);
        if i.is_multiple_of(64) && start.elapsed().as_nanos() as u64 >= budget_ns {
            return done();
        }
    }
}
