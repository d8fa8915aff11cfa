//! Drivers: who steps the engines, and when; and how a host call blocks.
//!
//! The threaded driver (the default) runs one OS thread per queue engine plus a pool of shader
//! workers shared by all engines, in real time. A blocked engine sleeps on the condition it waits
//! for (D8). The deterministic driver runs every engine stage, dispatch group and host thread
//! one at a time in a seeded order, in virtual time (D4, D6). The engine state machine itself is
//! in [`crate::engine`]; drivers only decide who steps when.
//!
//! The rest of the device sees a driver only through [`Backend`]: starting a queue's engine,
//! the scheduling point of a host call, a blocking host wait on a [`Cond`] with a timeout, a
//! sleep, host threads, the end of the device, and the endless kernel behind a hang declared
//! without a fault. Whether time is real is the driver's
//! business: the API passes timeouts as durations and the driver decides what they mean (real
//! time on the threaded driver; on the deterministic driver a wait ends only when its condition
//! holds or nothing can run, D6).

pub(crate) mod deterministic;
mod groups;
mod listing;
pub(crate) mod threaded;

use crate::engine::Fault;
use crate::memory::BufferCore;
use crate::runtime::{DeviceShared, QueueShared};
use crate::sync::{FenceCore, WaitOutcome};
use crate::types::ValueCondition;
use std::sync::Arc;
use std::time::Duration;

pub use deterministic::{ScheduleStats, Strategy, COPY_NS_PER_KIB};

pub(crate) use crate::sync::EngineWaker;

/// What a blocked host call waits for.
#[derive(Debug, Clone)]
pub(crate) enum Cond {
    /// A fence reaching a value (the deterministic driver latches it as a ticket when the host
    /// blocks: see `deterministic::HostWait::latch`).
    Fence(Arc<FenceCore>, u64),
    /// Several fences (all or any).
    Multi(Vec<(Arc<FenceCore>, u64)>, bool),
    /// A memory-value condition.
    Memory {
        buffer: Arc<BufferCore>,
        offset: u64,
        cond: ValueCondition,
    },
    /// Every queue idle.
    Idle,
    /// Another host thread (by its slot, see [`Backend::add_host`]) finished.
    HostDone(usize),
    /// Every other host thread finished and every queue is idle.
    Settled,
}

/// The driver interface: everything the device and the API need from whoever steps the
/// engines.
pub(crate) trait Backend: Send + Sync + std::fmt::Debug {
    /// Whether the device runs in virtual time, where a blocked wait ends only when its
    /// condition holds or nothing can run (D6): timeouts never elapse, and messages must not
    /// claim that real time passed.
    fn virtual_time(&self) -> bool;

    /// Starts the engine of a new queue (the threaded driver: its thread, and the worker pool
    /// with the first queue; the deterministic driver keeps the queue in its schedule).
    fn start_queue(&self, dev: &Arc<DeviceShared>, queue: &Arc<QueueShared>)
        -> std::io::Result<()>;

    /// The scheduling point of a non-blocking host call.
    fn yield_point(&self, dev: &DeviceShared);

    /// Blocks the calling host thread until `cond` holds, the device is removed, or the
    /// timeout (`None`: none) ends the wait.
    fn block(&self, dev: &DeviceShared, cond: Cond, timeout: Option<Duration>) -> WaitOutcome;

    /// Whether the calling thread is a host thread this driver schedules (the deterministic
    /// driver's own hosts; every thread on the threaded driver is unscheduled).
    fn schedules_caller(&self, dev: &DeviceShared) -> bool;

    /// Sleeps the calling host thread.
    fn sleep(&self, dev: &DeviceShared, duration: Duration);

    /// A host thread named `name` is about to be spawned: its slot in the schedule, if the
    /// driver schedules host threads.
    fn add_host(&self, name: &str) -> Option<usize>;

    /// First thing on a spawned host thread with a slot: waits for its turn.
    fn enter_host(&self, dev: &DeviceShared, slot: usize);

    /// A host thread with a slot ended (also by a panic).
    fn host_done(&self, dev: &DeviceShared, slot: usize);

    /// The calling thread dropped the device's last handle (Q8): the driver may still run the
    /// work that can run.
    fn last_handle_dropped(&self, dev: &DeviceShared);

    /// Whether removal may run inside the driver's own lock, so the trace events it produces
    /// must be deferred until the lock is released.
    fn defers_removal_trace(&self) -> bool;

    /// The schedule's figures so far, on a driver that schedules (`None` on the threaded one).
    fn schedule_stats(&self) -> Option<ScheduleStats> {
        None
    }

    /// For a hang removed without a fault of its own (declared, H1, or a wait's watchdog): the
    /// dispatch group running now that is an endless kernel (D6), with its queue's id: one that
    /// has run longer than the watchdog timeout or whose cost exceeds it. The deterministic
    /// driver has none to give (its endless kernels are actions of their own, D6).
    fn endless_group(&self, dev: &DeviceShared) -> Option<(u32, Fault)>;

    /// The device is being removed and its report is about to be built from the engines'
    /// states (no engine lock is held). The deterministic driver tries each stage that cannot
    /// run, so that what the report says a stuck queue waits for does not depend on whether the
    /// schedule happened to try it since it blocked.
    fn before_report(&self, _dev: &DeviceShared) {}
}
