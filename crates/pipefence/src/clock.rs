//! Time, injected (house style 7). Everything below the drivers (the engine's timestamps and
//! bookkeeping, last-writer records, traces) reads the device's [`Clock`] and never real time.
//! Whether time is real is the driver's business: the deterministic driver owns a virtual
//! clock that only its scheduler moves, and every wait, sleep and watchdog there is virtual;
//! the threaded driver is the real-time driver, whose host-wait timeouts, spins and watchdog
//! are real time while timestamps read the injected clock (`DeviceDesc::clock`).

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// Nanoseconds of the clock's epoch before the device was created: timestamps are never 0
/// (C12), and the deterministic clock starts here (1 s).
pub const CLOCK_EPOCH_NS: u64 = 1_000_000_000;

/// A monotonic clock in nanoseconds.
pub trait Clock: Send + Sync + Debug {
    /// Nanoseconds since the clock's epoch; never 0, never decreasing.
    fn now_ns(&self) -> u64;
}

/// Real time: [`CLOCK_EPOCH_NS`] plus the time since creation.
#[derive(Debug, Clone, Copy)]
pub struct RealClock {
    start: Instant,
}

impl RealClock {
    /// A clock that reads [`CLOCK_EPOCH_NS`] now.
    pub fn new() -> Self {
        RealClock {
            start: Instant::now(),
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now_ns(&self) -> u64 {
        CLOCK_EPOCH_NS.saturating_add(duration_ns(self.start.elapsed()))
    }
}

/// A duration in nanoseconds, saturated at `u64::MAX` (about 584 years). `as_nanos() as u64`
/// keeps only the low 64 bits of a longer one: a watchdog of `u64::MAX` ms came out below a
/// group cost of `u64::MAX` ns, an endless kernel.
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Real nanoseconds since the first call in this process (monotonic): the time base of the
/// threaded driver's busy/blocked accounting, which `Queue::stats` reads while it runs.
pub(crate) fn monotonic_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    duration_ns(EPOCH.get_or_init(std::time::Instant::now).elapsed())
}

/// Converts clock nanoseconds to ticks of `frequency` Hz, rounding down, never 0.
pub(crate) fn ticks(ns: u64, frequency: u64) -> u64 {
    let t = (u128::from(ns) * u128::from(frequency) / 1_000_000_000) as u64;
    t.max(1)
}
