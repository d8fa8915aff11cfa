//! The std/loom shim: locks, condition variables, atomics and thread parking.
//!
//! Under `cfg(loom)` these are loom's model-checked types; otherwise `std`'s. Only the `sync`
//! and `memory` modules import from here.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard, RwLock};
#[cfg(loom)]
pub(crate) use loom::thread::{current as current_thread, Thread};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard, RwLock};
#[cfg(not(loom))]
pub(crate) use std::thread::{current as current_thread, Thread};

use std::time::Instant;

/// Locks a mutex, ignoring poisoning: every critical section in pipefence leaves its data
/// consistent before anything that could panic, and a panic is a bug reported elsewhere.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Parks the current thread until unparked or until `deadline` (spurious wakeups possible).
/// Under loom there is no timed park: the thread parks until unparked.
#[inline]
pub(crate) fn park_until(deadline: Option<Instant>) {
    #[cfg(loom)]
    {
        let _ = deadline;
        loom::thread::park();
    }
    #[cfg(not(loom))]
    match deadline {
        None => std::thread::park(),
        Some(d) => {
            let now = Instant::now();
            if d > now {
                std::thread::park_timeout(d - now);
            }
        }
    }
}

/// Waits on a condition variable until notified or until `deadline`.
#[inline]
pub(crate) fn condvar_wait_until<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
) -> MutexGuard<'a, T> {
    let r = match deadline {
        None => cv.wait(guard).map_err(|p| p.into_inner()),
        Some(d) => {
            let now = Instant::now();
            let dur = d.saturating_duration_since(now);
            cv.wait_timeout(guard, dur)
                .map(|(g, _)| g)
                .map_err(|p| p.into_inner().0)
        }
    };
    match r {
        Ok(g) | Err(g) => g,
    }
}
