//! Drivers: who steps the engines, and when.
//!
//! The threaded driver (the default) runs one OS thread per queue engine plus a pool of shader
//! workers shared by all engines, in real time. A blocked engine sleeps on the condition it waits
//! for (D8). The engine state machine itself is in [`crate::engine`]; drivers only decide who
//! steps when.

pub(crate) mod deterministic;
pub(crate) mod threaded;

pub use deterministic::{Strategy, COPY_NS_PER_KIB};

use crate::sync::shim::{AtomicBool, Ordering};
use crate::sync::Notify;
use std::sync::OnceLock;
use std::thread::Thread;

/// Wakes an engine thread: a re-armable flag plus the thread's unpark token.
///
/// States of `flag`: `false` (nothing new) -> `true` (something may have changed). The engine
/// thread clears it before stepping and parks only if it is still clear afterwards; the unpark
/// token covers a wake between the check and the park.
#[derive(Debug, Default)]
pub(crate) struct EngineWaker {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
}

impl EngineWaker {
    pub(crate) fn set_thread(&self, t: Thread) {
        let _ = self.thread.set(t);
    }

    /// Marks the engine as having something to re-check and unparks it.
    #[inline]
    pub(crate) fn wake(&self) {
        self.flag.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Clears the flag (the engine thread, before stepping).
    #[inline]
    pub(crate) fn clear(&self) {
        self.flag.store(false, Ordering::Release);
    }

    /// Whether a wake arrived since the last clear.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

impl Notify for EngineWaker {
    fn notify(&self) {
        self.wake();
    }
}
