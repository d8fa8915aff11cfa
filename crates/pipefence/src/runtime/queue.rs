//! A queue's shared state: its engine, its waker and its progress.

use super::DeviceShared;
use crate::command::QueueKind;
use crate::engine::Engine;
use crate::sync::shim::{AtomicU64, Mutex};
use crate::sync::FenceCore;
use std::sync::Arc;

/// [`QueueShared::state`]: no work.
pub(crate) const STATE_IDLE: u64 = 0;
/// [`QueueShared::state`]: work it can run.
pub(crate) const STATE_BUSY: u64 = 1;
/// [`QueueShared::state`]: work, but stuck in a fence or memory-value wait.
pub(crate) const STATE_BLOCKED: u64 = 2;

impl QueueShared {
    /// Busy and blocked nanoseconds so far, the interval in progress included (a queue stuck
    /// until removal shows the time it was stuck).
    pub(crate) fn busy_blocked_ns(&self) -> (u64, u64) {
        use crate::sync::shim::Ordering;
        let (mut busy, mut blocked) = (
            self.busy_ns.load(Ordering::Acquire),
            self.blocked_ns.load(Ordering::Acquire),
        );
        let open = crate::clock::monotonic_ns()
            .saturating_sub(self.state_since_ns.load(Ordering::Acquire));
        match self.state.load(Ordering::Acquire) {
            STATE_BUSY => busy = busy.saturating_add(open),
            STATE_BLOCKED => blocked = blocked.saturating_add(open),
            _ => {}
        }
        (busy, blocked)
    }
}

/// State shared by a queue's handles, its engine thread and the workers.
#[derive(Debug)]
pub(crate) struct QueueShared {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
    pub(crate) kind: QueueKind,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) engine: Mutex<Engine>,
    pub(crate) waker: Arc<crate::driver::EngineWaker>,
    pub(crate) progress: Arc<FenceCore>,
    /// Nanoseconds the engine had work and could run.
    pub(crate) busy_ns: AtomicU64,
    /// Nanoseconds the engine had work but was stuck in a wait.
    pub(crate) blocked_ns: AtomicU64,
    /// What the engine is doing since [`Self::state_since_ns`], not yet added to `busy_ns` or
    /// `blocked_ns` (threaded driver): [`STATE_IDLE`], [`STATE_BUSY`] or [`STATE_BLOCKED`].
    pub(crate) state: AtomicU64,
    /// When [`Self::state`] began ([`crate::clock::monotonic_ns`]).
    pub(crate) state_since_ns: AtomicU64,
    /// Dispatch groups of this queue completed so far (progress for hang detection: a long but
    /// finite dispatch progresses with each group, D6). Counted by the workers as they finish.
    pub(crate) groups_completed: AtomicU64,
}
