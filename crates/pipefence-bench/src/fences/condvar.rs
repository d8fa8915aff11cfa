//! The blocking baseline of the fence and engine benchmarks: a "fence" made of a `Mutex<u64>` and
//! a Condvar, the classic blocking implementation.

use super::lock;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A 64-bit value behind a mutex, with a condition variable notified on every signal. No
/// spinning.
#[derive(Debug, Default)]
pub(crate) struct CondvarFence {
    value: Mutex<u64>,
    cv: Condvar,
}

impl CondvarFence {
    pub(crate) fn signal(&self, v: u64) {
        *lock(&self.value) = v;
        self.cv.notify_all();
    }

    pub(crate) fn wait(&self, v: u64) {
        let mut g = lock(&self.value);
        while *g < v {
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Returns whether the value was reached before `timeout`.
    pub(crate) fn wait_timeout(&self, v: u64, timeout: Duration) -> bool {
        let g = lock(&self.value);
        let (g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |x| *x < v)
            .unwrap_or_else(|p| p.into_inner());
        *g >= v
    }
}
