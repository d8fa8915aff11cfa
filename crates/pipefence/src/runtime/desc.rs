//! How a device is configured ([`DeviceDesc`], [`Driver`]) and the limits on it.

use crate::clock::Clock;
use crate::driver::Strategy;
use crate::hazard::MemoryModel;
use crate::trace::TraceSink;
use std::sync::Arc;
use std::time::Duration;

/// How a [`Device`](crate::Device) is configured. `DeviceDesc::default()` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct DeviceDesc {
    /// Watchdog timeout (TDR): an engine stalled in a memory-value wait while no engine
    /// progresses, or one dispatch group that can run this long running, for longer than this
    /// hangs the device (D6). Default 2 s.
    pub watchdog_timeout: Duration,
    /// Opt-in: also treat a queue stalled in a *fence* wait, while no engine progresses, for
    /// longer than this as a hang (D6). Default `None` (in D3D12 a queue waiting on a fence is
    /// not a GPU hang).
    pub fence_wait_timeout: Option<Duration>,
    /// Shader worker threads shared by all engines; 0 means one per available core. Default 0.
    pub workers: usize,
    /// Packets the pre-fetch parser may run ahead of the micro engine (D1). Default 16.
    pub fifo_depth: usize,
    /// GPU timestamp frequency in Hz (C12). Default 100 MHz.
    pub timestamp_frequency: u64,
    /// The clock timestamps, traces and report times read; `None` for real time. Ignored by
    /// the deterministic driver, which has its own virtual clock. The threaded driver's
    /// watchdog and host-wait timeouts are real time whatever this clock says.
    pub clock: Option<Arc<dyn Clock>>,
    /// Who steps the engines (D4). Default: [`Driver::Threaded`].
    pub driver: Driver,
    /// Where trace events go (`None`: nothing is recorded). See [`crate::trace`].
    pub trace: Option<Arc<dyn TraceSink>>,
    /// The memory model (D5): plain (default), hazard validation, or strict (deterministic
    /// driver only). See `docs/memory-model.md`.
    pub memory_model: MemoryModel,
    /// A stop flag for tools (a runner's Ctrl-C): once it is set, the deterministic driver
    /// removes the device (reason `Requested`, with the report of what waits on what) at its
    /// next step, so a long schedule ends promptly. `None` (the default): no flag. The
    /// threaded driver does not read it (its runner removes the device itself).
    pub interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The deterministic driver takes its choices from this script instead of its seeded
    /// strategy, and records them (`docs/exploration.md`). `None` (the default): the strategy.
    pub script: Option<Arc<crate::choice::Script>>,
}

/// The driver that steps a device's engines (D4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Driver {
    /// One thread per engine plus a shader worker pool, real time (the default).
    #[default]
    Threaded,
    /// One thread at a time, virtual time, a schedule chosen by `strategy` from `seed`: same
    /// seed, same result. Host code must run on the thread that created the device or on
    /// threads spawned with [`host::spawn`](crate::host::spawn); other OS threads are outside
    /// the model.
    Deterministic {
        /// The schedule's seed.
        seed: u64,
        /// How enabled actions are picked.
        strategy: Strategy,
    },
}

impl Default for DeviceDesc {
    fn default() -> Self {
        DeviceDesc {
            watchdog_timeout: Duration::from_secs(2),
            fence_wait_timeout: None,
            workers: 0,
            fifo_depth: 16,
            timestamp_frequency: 100_000_000,
            clock: None,
            driver: Driver::Threaded,
            trace: None,
            memory_model: MemoryModel::Plain,
            interrupt: None,
            script: None,
        }
    }
}

/// Largest accepted `fifo_depth`.
pub const MAX_FIFO_DEPTH: usize = 65_536;
/// Largest accepted `workers`.
pub const MAX_WORKERS: usize = 1024;
