//! Schedule exploration for Rust tests (D4): run the same program under many seeded schedules
//! of the deterministic driver, and replay any one of them exactly.

pub use crate::choice::{ChoicePoint, Script};

use crate::api::{Device, DeviceDesc, Driver};
use crate::diagnose::RemovalReport;
use crate::driver::Strategy;
use crate::error::Result;
use std::sync::Arc;

/// The strategy `explore` and `pipefence check` use for `seed`: PCT of depth 2 or 3 for most
/// seeds (it reaches rare interleavings), uniform random choice for every fourth (it spreads
/// over common ones). `pipefence run --driver deterministic --seed K` uses the same, so any
/// explored schedule replays exactly.
pub fn strategy_for_seed(seed: u64) -> Strategy {
    match seed % 4 {
        0 => Strategy::Random,
        1 | 3 => Strategy::Pct { depth: 3 },
        _ => Strategy::Pct { depth: 2 },
    }
}

/// A device description for schedule `seed` of the deterministic driver.
pub fn deterministic_desc(base: &DeviceDesc, seed: u64) -> DeviceDesc {
    DeviceDesc {
        driver: Driver::Deterministic {
            seed,
            strategy: strategy_for_seed(seed),
        },
        ..base.clone()
    }
}

/// The result of one schedule.
#[derive(Debug)]
pub struct Schedule<T> {
    /// The seed (replay with [`deterministic_desc`]).
    pub seed: u64,
    /// What the body returned.
    pub value: T,
    /// The removal report, if the device was removed (a hang is detected at once, D6).
    pub removal: Option<Arc<RemovalReport>>,
    /// Virtual nanoseconds the schedule took; `u64::MAX` when the virtual clock saturated (D4).
    pub virtual_ns: u64,
}

/// Runs `body` once per seed on a fresh deterministic device; after the body returns, the
/// device runs until every host thread spawned with [`crate::host::spawn`] has finished and
/// every queue is idle (or it hangs). Host code must use that `spawn`; other threads are outside
/// the model. Errors: device creation errors (a bad `base` description).
///
/// ```
/// use pipefence::{explore, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
/// let runs = explore::explore(&DeviceDesc::default(), 0..20, |device| -> pipefence::Result<u64> {
///     let q = device.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
///     let f = device.create_fence(&FenceDesc::new(0))?;
///     q.signal(&f, 1)?;
///     device.wait_idle(std::time::Duration::from_secs(1))?;
///     Ok(f.completed_value())
/// })?;
/// assert!(runs.iter().all(|r| matches!(r.value, Ok(1))));
/// # Ok::<(), pipefence::Error>(())
/// ```
pub fn explore<T>(
    base: &DeviceDesc,
    seeds: impl IntoIterator<Item = u64>,
    mut body: impl FnMut(&Device) -> T,
) -> Result<Vec<Schedule<T>>> {
    let mut out = Vec::new();
    for seed in seeds {
        let device = Device::new(deterministic_desc(base, seed))?;
        let value = body(&device);
        device.tools().settle(std::time::Duration::from_secs(3600));
        out.push(Schedule {
            seed,
            value,
            removal: device.removal_report(),
            virtual_ns: match device.shared.now_ns() {
                u64::MAX => u64::MAX,
                now => now.saturating_sub(crate::clock::CLOCK_EPOCH_NS),
            },
        });
    }
    Ok(out)
}

mod exhaustive;

mod dpor;
pub use exhaustive::{enumerate, Bound, Enumeration, ExhaustiveOptions, DEFAULT_MAX_SCHEDULES};

/// A device description for the deterministic driver taking its choices from `script` (an
/// explored schedule's replay: [`Script::from_schedule_string`]).
pub fn script_desc(base: &DeviceDesc, script: Arc<Script>) -> DeviceDesc {
    DeviceDesc {
        driver: Driver::Deterministic {
            seed: 0,
            strategy: Strategy::Random,
        },
        script: Some(script),
        ..base.clone()
    }
}

/// One schedule of [`explore_exhaustive`].
#[derive(Debug)]
pub struct Explored<T> {
    /// The schedule string that replays it ([`script_desc`] with
    /// [`Script::from_schedule_string`]).
    pub replay: String,
    /// What the body returned.
    pub value: T,
    /// The removal report, if the device was removed.
    pub removal: Option<Arc<RemovalReport>>,
}

/// Runs `body` on a fresh deterministic device once per schedule, every schedule of the
/// deterministic driver (a stateless depth-first search, no reduction), within `opts`' bounds,
/// handing each to `visit` (`false` stops). The [`Enumeration`] says whether the search was
/// complete (every schedule explored) or which bound stopped it. As with [`explore`], the
/// program must use [`crate::host::spawn`] for host threads and depend on nothing but the
/// schedule. Errors: device creation errors.
///
/// ```
/// use pipefence::{explore, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
/// let mut values = std::collections::BTreeSet::new();
/// let e = explore::explore_exhaustive(
///     &DeviceDesc::default(),
///     &explore::ExhaustiveOptions::default(),
///     |device| -> pipefence::Result<u64> {
///         let q = device.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
///         let f = device.create_fence(&FenceDesc::new(0))?;
///         q.signal(&f, 1)?;
///         device.wait_idle(std::time::Duration::from_secs(1))?;
///         Ok(f.completed_value())
///     },
///     |s| values.insert(s.value.ok()) || true,
/// )?;
/// assert!(e.complete);
/// assert_eq!(values.into_iter().collect::<Vec<_>>(), vec![Some(1)]);
/// # Ok::<(), pipefence::Error>(())
/// ```
pub fn explore_exhaustive<T>(
    base: &DeviceDesc,
    opts: &ExhaustiveOptions,
    mut body: impl FnMut(&Device) -> T,
    mut visit: impl FnMut(Explored<T>) -> bool,
) -> Result<Enumeration> {
    let mut error = None;
    let e = enumerate(
        opts,
        |script| match Device::new(script_desc(base, script.clone())) {
            Ok(device) => {
                let value = body(&device);
                device.tools().settle(std::time::Duration::from_secs(3600));
                Some((value, device.removal_report()))
            }
            Err(e) => {
                error = Some(e);
                None
            }
        },
        |run, script| match run {
            Some((value, removal)) => visit(Explored {
                replay: script.schedule_string(),
                value,
                removal,
            }),
            None => false,
        },
    );
    match error {
        Some(err) => Err(err),
        None => Ok(e),
    }
}
