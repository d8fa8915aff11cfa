//! A queue's shared state: its engine, its waker and its progress.

use super::DeviceShared;
use crate::command::QueueKind;
use crate::engine::Engine;
use crate::sync::shim::{AtomicU64, Mutex};
use crate::sync::FenceCore;
use std::sync::Arc;

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
    /// Dispatch groups of this queue completed so far (progress for hang detection: a long but
    /// finite dispatch progresses with each group, D6). Counted by the workers as they finish.
    pub(crate) groups_completed: AtomicU64,
}
