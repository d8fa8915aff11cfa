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
mod parallel;
mod shrink;
mod speculate;
mod visited;
pub use crate::choice::{ActorKey, Actors, Narrated, Where};
#[doc(hidden)]
pub use dpor::set_long_run_index;
pub use exhaustive::{
    enumerate, enumerate_bounded_reduced, enumerate_bounded_sleeping, enumerate_bounded_states,
    Bound, Enumeration, ExhaustiveOptions, DEFAULT_MAX_SCHEDULES, NOT_REPEATED,
};
pub use parallel::{enumerate_parallel, Parallel, Seen, MAX_JOBS, TARGET_UNITS};
pub use shrink::{shrink, Shrunk, DEFAULT_SHRINK_RUNS};
#[doc(hidden)]
pub use speculate::set_ahead_limits;

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
/// deterministic driver (a stateless depth-first search; with `opts.reduction`, up to the
/// order of independent actions, see [`ExhaustiveOptions::reduction`]), within `opts`' bounds,
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

/// How [`check_every_schedule`] explores.
#[derive(Debug, Clone)]
pub struct EveryScheduleOptions {
    /// The device every schedule runs on (its driver and script are replaced).
    pub base: DeviceDesc,
    /// The bounds of the search.
    pub bounds: ExhaustiveOptions,
    /// Panic unless every schedule was explored (a bound that cut the search is then a test
    /// failure, not a pass): `true` by default, a test asking for a proof.
    pub require_complete: bool,
}

impl Default for EveryScheduleOptions {
    fn default() -> Self {
        EveryScheduleOptions {
            base: DeviceDesc::default(),
            bounds: ExhaustiveOptions::default(),
            require_complete: true,
        }
    }
}

/// For a test suite: runs `body` once per schedule of the deterministic driver (every schedule,
/// [`enumerate`]), handing it the description of the device to create for that schedule
/// ([`script_desc`]); `body` returns `Err(message)` when the schedule is wrong. Panics at the
/// first failing schedule with its message and its schedule string (replay it with
/// [`script_desc`] and [`Script::from_schedule_string`], or `pipefence run FILE --schedule`
/// for a scenario), and, when `opts.require_complete`, if a bound stopped the search before
/// every schedule was explored (that is not a proof). Returns the [`Enumeration`] otherwise.
///
/// As for [`explore`], host threads must be started with [`crate::host::spawn`] and the
/// program must depend on nothing but the schedule; `body` should wait for the device to be
/// idle before it checks (a device dropped with work left is not an error here).
///
/// ```
/// use pipefence::explore::{check_every_schedule, EveryScheduleOptions};
/// use pipefence::{Device, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
/// use std::time::Duration;
///
/// let e = check_every_schedule(&EveryScheduleOptions::default(), |desc: DeviceDesc| {
///     let device = Device::new(desc).map_err(|e| e.to_string())?;
///     let q = device.create_queue(&QueueDesc::new(QueueKind::Compute, "q")).map_err(|e| e.to_string())?;
///     let f = device.create_fence(&FenceDesc::new(0)).map_err(|e| e.to_string())?;
///     q.signal(&f, 1).map_err(|e| e.to_string())?;
///     device.wait_idle(Duration::from_secs(1)).map_err(|e| e.to_string())?;
///     match f.completed_value() {
///         1 => Ok(()),
///         v => Err(format!("the fence is {v}, not 1")),
///     }
/// });
/// assert!(e.complete);
/// ```
pub fn check_every_schedule(
    opts: &EveryScheduleOptions,
    mut body: impl FnMut(DeviceDesc) -> std::result::Result<(), String>,
) -> Enumeration {
    let mut failure: Option<(u64, String, String)> = None;
    let mut n = 0u64;
    let e = enumerate(
        &opts.bounds,
        |script| body(script_desc(&opts.base, script.clone())),
        |result, script| {
            n += 1;
            match result {
                Ok(()) => true,
                Err(message) => {
                    failure = Some((n, script.schedule_string(), message));
                    false
                }
            }
        },
    );
    if let Some((n, replay, message)) = failure {
        panic!(
            "schedule {n} of the exhaustive exploration failed: {message}\n  replay: \
             pipefence::explore::script_desc(&base, Arc::new(Script::from_schedule_string(\
             \"{replay}\")?))\n  schedule string: {replay}"
        );
    }
    if opts.require_complete && !e.complete {
        // In the API's terms (the Display of a bound is the command line's flag).
        let bound = match e.bound {
            Some(Bound::MaxSchedules(n)) => format!("`bounds.max_schedules` ({n})"),
            Some(Bound::PreemptionBound(k)) => format!("`bounds.preemption_bound` ({k})"),
            Some(Bound::Stopped) => "a stop".to_string(),
            None => "a bound".to_string(),
        };
        panic!(
            "not a proof: the exploration was bounded by {bound} after {} schedules (all \
             passed); raise `bounds.max_schedules`, drop `bounds.preemption_bound`, or set \
             `require_complete: false` to accept a bounded search",
            e.schedules
        );
    }
    e
}

/// For a test suite: runs `body` on schedule `seed` of the deterministic driver for every seed
/// of `seeds` (PCT and random, as [`explore`]; [`deterministic_desc`]), handing it the
/// description of the device to create. Panics at the first failing seed with its message and
/// the seed (replay it with [`deterministic_desc`], or `pipefence run FILE --driver
/// deterministic --seed SEED` for a scenario). Returns the number of seeds run.
///
/// ```
/// use pipefence::explore::check_sampled_schedules;
/// use pipefence::{Device, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
/// use std::time::Duration;
///
/// let n = check_sampled_schedules(&DeviceDesc::default(), 0..50, |desc| {
///     let device = Device::new(desc).map_err(|e| e.to_string())?;
///     let q = device.create_queue(&QueueDesc::new(QueueKind::Compute, "q")).map_err(|e| e.to_string())?;
///     let f = device.create_fence(&FenceDesc::new(0)).map_err(|e| e.to_string())?;
///     q.signal(&f, 1).map_err(|e| e.to_string())?;
///     device.wait_idle(Duration::from_secs(1)).map_err(|e| e.to_string())?;
///     (f.completed_value() == 1).then_some(()).ok_or_else(|| "not signalled".to_string())
/// });
/// assert_eq!(n, 50);
/// ```
pub fn check_sampled_schedules(
    base: &DeviceDesc,
    seeds: impl IntoIterator<Item = u64>,
    mut body: impl FnMut(DeviceDesc) -> std::result::Result<(), String>,
) -> u64 {
    let mut n = 0;
    for seed in seeds {
        n += 1;
        if let Err(message) = body(deterministic_desc(base, seed)) {
            panic!(
                "seed {seed} failed: {message}\n  replay: \
                 pipefence::explore::deterministic_desc(&base, {seed})"
            );
        }
    }
    n
}
