//! Exploration from C: run a callback once per deterministic schedule and keep the failing
//! ones with their replay strings; host threads inside a schedule.

use crate::device::{clear_out, device_desc, hand_out, hazards_text, report_text, DeviceObj};
use crate::handle::*;
use crate::types::*;
use pipefence::host::HostHandle;
use pipefence::{Device, MemoryModel, RemovalReason, RemovalReport};
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};

struct Failure {
    info: PIPEFENCE_SCHEDULE_FAILURE,
    replay: String,
    report: Option<Arc<RemovalReport>>,
    hazards: String,
}

pub(crate) struct ExploreObj {
    schedules: u64,
    failures: Vec<Failure>,
    /// Every schedule was explored (`PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`, no bound cut it).
    complete: bool,
}

impl Object for ExploreObj {
    const KIND: Kind = Kind::ExploreResult;
}

/// The replay string of `seed` under `model`: the flags of `pipefence run` that replay it.
fn replay_string(model: MemoryModel, seed: u64) -> String {
    match model {
        MemoryModel::Strict => format!("--strict --seed {seed}"),
        MemoryModel::Validate => format!("--driver deterministic --validate --seed {seed}"),
        _ => format!("--driver deterministic --seed {seed}"),
    }
}

/// The seed of a replay string (`... --seed N`, or just `N`).
fn parse_replay(text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.iter().position(|w| *w == "--seed") {
        Some(i) => words.get(i + 1)?.parse().ok(),
        None if words.len() == 1 => words[0].parse().ok(),
        None => None,
    }
}

fn removed_reason(d: &Device) -> PIPEFENCE_HRESULT {
    match d.removed_reason() {
        None => PIPEFENCE_S_OK,
        Some(RemovalReason::Requested) => PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED,
        Some(r) => r.hresult() as PIPEFENCE_HRESULT,
    }
}

/// The device description of `desc` (its `Device`, or the defaults).
fn base_desc(desc: &PIPEFENCE_EXPLORE_DESC) -> PIPEFENCE_DEVICE_DESC {
    if desc.Device.is_null() {
        PIPEFENCE_DEVICE_DESC::default()
    } else {
        // SAFETY: non-null; the caller of the exported function promises it points to a
        // description.
        unsafe { desc.Device.read() }
    }
}

/// The device description of `desc` on the deterministic driver, for scripted runs
/// ([`pipefence::explore::script_desc`] gives each its script).
fn deterministic_base(desc: &PIPEFENCE_EXPLORE_DESC) -> Res<pipefence::DeviceDesc> {
    device_desc(&PIPEFENCE_DEVICE_DESC {
        Driver: PIPEFENCE_DRIVER_DETERMINISTIC,
        ..base_desc(desc)
    })
}

/// One schedule: `body` on a fresh device of `rust`, run until settled; its failure (with
/// `seed` and `replay` as given) when it failed.
fn one(
    desc: &PIPEFENCE_EXPLORE_DESC,
    rust: pipefence::DeviceDesc,
    seed: u64,
    replay: impl FnOnce(MemoryModel) -> String,
    body: unsafe extern "C" fn(*mut PipefenceDevice, *mut c_void) -> PIPEFENCE_HRESULT,
    context: *mut c_void,
) -> Res<Option<Failure>> {
    let model = rust.memory_model;
    let device = Device::new(rust)?;
    let handle = register(DeviceObj(device.clone())).cast::<PipefenceDevice>();
    // SAFETY: the callback is the caller's function, called with a live handle and the
    // caller's context, as documented. It must not unwind.
    let result = unsafe { body(handle, context) };
    release::<DeviceObj, _>(handle);
    device.tools().settle(std::time::Duration::from_secs(3600));
    let reason = removed_reason(&device);
    let hazards = device.hazards().len();
    let failed = result < 0
        || (reason != PIPEFENCE_S_OK && desc.Flags & PIPEFENCE_EXPLORE_FLAG_ALLOW_REMOVAL == 0)
        || (hazards > 0 && desc.Flags & PIPEFENCE_EXPLORE_FLAG_FAIL_ON_HAZARD != 0);
    Ok(failed.then(|| Failure {
        info: PIPEFENCE_SCHEDULE_FAILURE {
            Seed: seed,
            Result: result,
            RemovedReason: reason,
            Hazards: u32::try_from(hazards).unwrap_or(u32::MAX),
            VirtualNs: device.clock_ns().saturating_sub(pipefence::CLOCK_EPOCH_NS),
        },
        replay: replay(model),
        report: device.removal_report(),
        hazards: hazards_text(&device),
    }))
}

/// Runs the schedules `seeds` of `desc` (a copy with each seed) through `body`.
fn run(
    desc: &PIPEFENCE_EXPLORE_DESC,
    seeds: impl Iterator<Item = u64>,
    body: unsafe extern "C" fn(*mut PipefenceDevice, *mut c_void) -> PIPEFENCE_HRESULT,
    context: *mut c_void,
) -> Res<ExploreObj> {
    let base = base_desc(desc);
    let mut out = ExploreObj {
        schedules: 0,
        failures: Vec::new(),
        complete: false,
    };
    for seed in seeds {
        let d = PIPEFENCE_DEVICE_DESC {
            Driver: PIPEFENCE_DRIVER_DETERMINISTIC,
            Seed: seed,
            ..base
        };
        let failure = one(
            desc,
            device_desc(&d)?,
            seed,
            |model| replay_string(model, seed),
            body,
            context,
        )?;
        out.schedules += 1;
        if let Some(f) = failure {
            out.failures.push(f);
            if desc.Flags & PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE != 0 {
                break;
            }
        }
    }
    Ok(out)
}

/// Runs `body` once per schedule of the exhaustive exploration of `desc`
/// (`PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`): each failure's `Seed` is its schedule's number in
/// the exploration (from 0), its replay the schedule string.
fn run_exhaustive(
    desc: &PIPEFENCE_EXPLORE_DESC,
    body: unsafe extern "C" fn(*mut PipefenceDevice, *mut c_void) -> PIPEFENCE_HRESULT,
    context: *mut c_void,
) -> Res<ExploreObj> {
    let rust = deterministic_base(desc)?;
    let opts = pipefence::explore::ExhaustiveOptions {
        max_schedules: match desc.Schedules {
            0 => pipefence::explore::DEFAULT_MAX_SCHEDULES,
            n => n,
        },
        preemption_bound: None,
        reduction: desc.Flags & PIPEFENCE_EXPLORE_FLAG_REDUCE != 0,
    };
    let mut error = None;
    let mut failures = Vec::new();
    let mut n = 0u64;
    // A program that depends on more than the schedule (a counter of its own, the time)
    // makes the search stop with a panic: that is the program's fault, said as such.
    let e = catch_unwind(AssertUnwindSafe(|| {
        pipefence::explore::enumerate(
            &opts,
            |script| {
                let d = pipefence::explore::script_desc(&rust, script.clone());
                match one(desc, d, 0, |_| String::new(), body, context) {
                    Ok(f) => Some(f),
                    Err(err) => {
                        error = Some(err);
                        None
                    }
                }
            },
            |run, script| {
                let Some(failure) = run else {
                    return false;
                };
                let number = n;
                n += 1;
                let Some(mut f) = failure else {
                    return true;
                };
                f.info.Seed = number;
                f.replay = script.schedule_string();
                failures.push(f);
                desc.Flags & PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE == 0
            },
        )
    }));
    if let Some(err) = error {
        return Err(err);
    }
    let e = e.map_err(|payload| {
        let msg = panic_message(&*payload);
        if msg.contains(pipefence::explore::NOT_REPEATED) {
            Fail::new(PIPEFENCE_E_FAIL, format!("pipefence_explore: {msg}"))
        } else {
            std::panic::resume_unwind(payload)
        }
    })?;
    Ok(ExploreObj {
        schedules: e.schedules,
        failures,
        complete: e.complete,
    })
}

/// Runs `body` once per schedule of the deterministic driver: seeds `FirstSeed ..
/// FirstSeed + Schedules`, each on a fresh device made from `desc->Device` (the strategy of
/// each seed is `pipefence check`'s). After `body` returns, the device runs until every host
/// thread from `pipefence_host_spawn` has finished and every queue is idle, or it hangs (a
/// hang is found at once). A schedule fails when `body` returns a failure HRESULT, when the
/// device ends removed (unless `PIPEFENCE_EXPLORE_FLAG_ALLOW_REMOVAL`), or when it has
/// hazard reports with `PIPEFENCE_EXPLORE_FLAG_FAIL_ON_HAZARD`. `*result` holds the failing
/// schedules (one reference: release it with `pipefence_explore_result_release`).
///
/// With `PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE` it runs every schedule instead (every
/// interleaving; with `PIPEFENCE_EXPLORE_FLAG_REDUCE` up to the order of independent actions,
/// when host threads share nothing but pipefence objects), at most `Schedules` of them (0:
/// 10,000); `FirstSeed` is ignored.
/// `pipefence_explore_result_is_complete` then says whether every schedule was explored: with
/// no failure, a proof for this program in the model. Each failure's `Seed` is its schedule's
/// number in the exploration and its replay string the schedule string that
/// `pipefence_explore_replay` (and `pipefence run --schedule` for a scenario) replays. The
/// program must depend on nothing but the schedule: the same choices must make the same run
/// (one that does not is found when a branch's prefix leads elsewhere: `E_FAIL`, and the
/// last-error message says so).
///
/// `body` runs on the calling thread, which must not be a host thread of another
/// deterministic device. Host code in it must use that device's thread or
/// `pipefence_host_spawn`; other threads are outside the schedule.
///
/// # Safety
/// `desc` points to a `PIPEFENCE_EXPLORE_DESC` (whose `Device` is null or valid); `body` is
/// safe to call with `context`; `result` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_explore(
    desc: *const PIPEFENCE_EXPLORE_DESC,
    body: PIPEFENCE_SCHEDULE_FN,
    context: *mut c_void,
    result: *mut *mut PipefenceExploreResult,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_explore";
    call(what, |_| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(result, what)? };
        if desc.is_null() {
            return Err(Fail::pointer(format!("{what}: the description is null")));
        }
        let body = body.ok_or_else(|| Fail::pointer(format!("{what}: the callback is null")))?;
        // SAFETY: non-null, and the caller promises it points to a description.
        let d = unsafe { desc.read() };
        if d.Flags & PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE != 0 {
            let obj = run_exhaustive(&d, body, context)?;
            // SAFETY: checked by clear_out.
            return unsafe { hand_out(obj, result, what) };
        }
        if d.Flags & PIPEFENCE_EXPLORE_FLAG_REDUCE != 0 {
            return Err(Fail::arg(format!(
                "{what}: PIPEFENCE_EXPLORE_FLAG_REDUCE needs PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE"
            )));
        }
        let count = if d.Schedules == 0 { 100 } else { d.Schedules };
        let last = d.FirstSeed.checked_add(count).ok_or_else(|| {
            Fail::arg(format!(
                "{what}: FirstSeed {} + Schedules {count} overflows",
                d.FirstSeed
            ))
        })?;
        let obj = run(&d, d.FirstSeed..last, body, context)?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(obj, result, what) }
    })
}

/// Runs exactly the schedule of a replay string (from `pipefence_explore_result_get_replay`:
/// `pipefence run`'s `--seed N` flags, or an exhaustive exploration's schedule string) with
/// `desc->Device`; `FirstSeed`, `Schedules` and the flags that choose schedules are ignored.
/// `*result` lists it if it fails again.
///
/// # Safety
/// As `pipefence_explore`; `replay` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pipefence_explore_replay(
    desc: *const PIPEFENCE_EXPLORE_DESC,
    replay: *const c_char,
    body: PIPEFENCE_SCHEDULE_FN,
    context: *mut c_void,
    result: *mut *mut PipefenceExploreResult,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_explore_replay";
    call(what, |_| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(result, what)? };
        if desc.is_null() {
            return Err(Fail::pointer(format!("{what}: the description is null")));
        }
        let body = body.ok_or_else(|| Fail::pointer(format!("{what}: the callback is null")))?;
        // SAFETY: the caller's promise.
        let text = unsafe { c_str(replay) }
            .ok_or_else(|| Fail::pointer(format!("{what}: the replay string is null")))?;
        // SAFETY: non-null, and the caller promises it points to a description.
        let d = unsafe { desc.read() };
        let text = text.trim();
        if text.starts_with('v') && text.contains(':') {
            // An exhaustive exploration's schedule string.
            let script = pipefence::explore::Script::from_schedule_string(text)
                .map_err(|e| Fail::arg(format!("{what}: {e}")))?;
            let script = Arc::new(script);
            let rust = pipefence::explore::script_desc(&deterministic_base(&d)?, script.clone());
            let failure = one(&d, rust, 0, |_| text.to_string(), body, context)?;
            if let Some(why) = script.replay_mismatch() {
                return Err(Fail::arg(format!(
                    "{what}: schedule string `{text}` is not a schedule of this program: {why}"
                )));
            }
            let obj = ExploreObj {
                schedules: 1,
                failures: failure.into_iter().collect(),
                complete: false,
            };
            // SAFETY: checked by clear_out.
            return unsafe { hand_out(obj, result, what) };
        }
        let seed = parse_replay(text).ok_or_else(|| {
            Fail::arg(format!(
                "{what}: `{text}` is not a replay string (`--driver deterministic --seed N`, \
                 or a schedule string `v7:...`)"
            ))
        })?;
        let obj = run(&d, std::iter::once(seed), body, context)?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(obj, result, what) }
    })
}

/// Adds a reference to an exploration result.
#[no_mangle]
pub extern "C" fn pipefence_explore_result_add_ref(result: *mut PipefenceExploreResult) -> u32 {
    add_ref::<ExploreObj, _>(result)
}

/// Drops a reference to an exploration result.
#[no_mangle]
pub extern "C" fn pipefence_explore_result_release(result: *mut PipefenceExploreResult) -> u32 {
    release::<ExploreObj, _>(result)
}

/// How many schedules ran (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_explore_result_get_schedule_count(
    result: *mut PipefenceExploreResult,
) -> u64 {
    let what = "pipefence_explore_result_get_schedule_count";
    call_value(what, 0, |_| {
        Ok(get::<ExploreObj, _>(result, what)?.schedules)
    })
}

/// 1 when an exhaustive exploration (`PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`) explored every
/// schedule, no bound cutting it: with no failure, a proof for this program in the model; 0
/// when a bound (`Schedules`, or `PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE`) cut it, for
/// seeds and replays (samples, never a proof), and for a bad handle.
#[no_mangle]
pub extern "C" fn pipefence_explore_result_is_complete(result: *mut PipefenceExploreResult) -> u32 {
    let what = "pipefence_explore_result_is_complete";
    call_value(what, 0, |_| {
        Ok(u32::from(get::<ExploreObj, _>(result, what)?.complete))
    })
}

/// How many schedules failed (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_explore_result_get_failure_count(
    result: *mut PipefenceExploreResult,
) -> u32 {
    let what = "pipefence_explore_result_get_failure_count";
    call_value(what, 0, |_| {
        Ok(u32::try_from(get::<ExploreObj, _>(result, what)?.failures.len()).unwrap_or(u32::MAX))
    })
}

fn failure<R>(
    result: *mut PipefenceExploreResult,
    index: u32,
    what: &str,
    f: impl FnOnce(&Failure) -> Res<R>,
) -> Res<R> {
    let r = get::<ExploreObj, _>(result, what)?;
    let fail = r.failures.get(index as usize).ok_or_else(|| {
        Fail::arg(format!(
            "{what}: failure {index} of {} failures",
            r.failures.len()
        ))
    })?;
    f(fail)
}

/// The failing schedule `index` (seed, callback result, removal reason, hazards).
///
/// # Safety
/// `failure` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_explore_result_get_failure(
    result: *mut PipefenceExploreResult,
    index: u32,
    failure: *mut PIPEFENCE_SCHEDULE_FAILURE,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_explore_result_get_failure";
    call(what, |_| {
        let info = self::failure(result, index, what, |f| Ok(f.info))?;
        // SAFETY: the caller's promise.
        unsafe { write_out(failure, info, what)? };
        Ok(PIPEFENCE_S_OK)
    })
}

/// The replay string of failing schedule `index` (`--driver deterministic --seed N`: the
/// flags of `pipefence run`, and what `pipefence_explore_replay` takes).
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes; `needed` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_explore_result_get_replay(
    result: *mut PipefenceExploreResult,
    index: u32,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_explore_result_get_replay";
    call(what, |_| {
        let text = failure(result, index, what, |f| Ok(f.replay.clone()))?;
        // SAFETY: the caller's promise.
        unsafe { copy_text(&text, buf, len, needed) }
    })
}

/// The removal report (text or JSON) of failing schedule `index`, followed, in the text
/// form, by its hazard reports; `S_FALSE` and an empty text if there is neither.
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes; `needed` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_explore_result_get_report(
    result: *mut PipefenceExploreResult,
    index: u32,
    format: u32,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_explore_result_get_report";
    call(what, |_| {
        let text = failure(result, index, what, |f| {
            let mut text = match &f.report {
                Some(r) => report_text(r, format, what)?,
                None => String::new(),
            };
            if format == PIPEFENCE_REPORT_FORMAT_TEXT && !f.hazards.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&f.hazards);
            }
            Ok(text)
        })?;
        // SAFETY: the caller's promise.
        let hr = unsafe { copy_text(&text, buf, len, needed)? };
        Ok(if text.is_empty() {
            PIPEFENCE_S_FALSE
        } else {
            hr
        })
    })
}

pub(crate) struct HostObj {
    handle: Mutex<Option<HostHandle<PIPEFENCE_HRESULT>>>,
}

impl Object for HostObj {
    const KIND: Kind = Kind::Host;
}

/// The caller's context, handed to the host thread.
struct Context(*mut c_void);

// SAFETY: pipefence_host_spawn documents that the context must be usable from the new
// thread; pipefence only passes it on.
unsafe impl Send for Context {}

impl Context {
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Spawns a host thread named `name` (may be null) that runs `body(context)`. On the
/// threaded driver it is an ordinary thread; on the deterministic driver it joins the
/// schedule: it starts when the scheduler picks it, runs only while it holds the turn, and
/// every pipefence call it makes is a scheduling point. `*host` holds one reference; join it
/// with `pipefence_host_join`. Releasing it unjoined detaches the thread (the deterministic
/// driver's exploration still waits for it). If the spawn fails `body` is never called and
/// the caller still owns `context`.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `body` is safe to call with `context` on
/// another thread; `host` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_host_spawn(
    device: *mut PipefenceDevice,
    name: *const c_char,
    body: PIPEFENCE_HOST_FN,
    context: *mut c_void,
    host: *mut *mut PipefenceHost,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_host_spawn";
    call(what, |ctx| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(host, what)? };
        let d = crate::device::device(ctx, device, what)?;
        let body = body.ok_or_else(|| Fail::pointer(format!("{what}: the callback is null")))?;
        // SAFETY: the caller's promise.
        let name = unsafe { c_str(name) }.unwrap_or_else(|| "host".to_string());
        let context = Context(context);
        let h = pipefence::host::spawn(&d, &name, move || {
            let context = context;
            // SAFETY: the caller promised `body` may be called with `context` on this thread.
            catch_unwind(AssertUnwindSafe(|| unsafe { body(context.get()) }))
                .unwrap_or(PIPEFENCE_E_FAIL)
        })
        .map_err(|e| {
            Fail::new(
                PIPEFENCE_E_OUTOFMEMORY,
                format!("{what}: cannot start host thread `{name}`: {e}"),
            )
        })?;
        let obj = HostObj {
            handle: Mutex::new(Some(h)),
        };
        // SAFETY: checked by clear_out.
        unsafe { hand_out(obj, host, what) }
    })
}

/// Waits for the host thread to finish (a scheduling point on the deterministic driver) and
/// stores what its body returned in `*result` (may be null). `DXGI_ERROR_INVALID_CALL` if it
/// was already joined.
///
/// # Safety
/// `result` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_host_join(
    host: *mut PipefenceHost,
    result: *mut PIPEFENCE_HRESULT,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_host_join";
    call(what, |_| {
        let h = get::<HostObj, _>(host, what)?;
        let handle = h
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| {
                Fail::new(
                    PIPEFENCE_DXGI_ERROR_INVALID_CALL,
                    format!("{what}: the host thread was already joined"),
                )
            })?;
        let r = handle.join().unwrap_or(PIPEFENCE_E_FAIL);
        if !result.is_null() {
            // SAFETY: non-null and valid for a write by the caller's promise.
            unsafe { result.write(r) };
        }
        Ok(PIPEFENCE_S_OK)
    })
}

/// Adds a reference to a host thread handle.
#[no_mangle]
pub extern "C" fn pipefence_host_add_ref(host: *mut PipefenceHost) -> u32 {
    add_ref::<HostObj, _>(host)
}

/// Drops a reference to a host thread handle (the thread runs on).
#[no_mangle]
pub extern "C" fn pipefence_host_release(host: *mut PipefenceHost) -> u32 {
    release::<HostObj, _>(host)
}

/// Sleeps `ms` milliseconds: real time on the threaded driver; virtual time, as a scheduling
/// point, on the deterministic driver.
#[no_mangle]
pub extern "C" fn pipefence_host_sleep(device: *mut PipefenceDevice, ms: u32) -> PIPEFENCE_HRESULT {
    let what = "pipefence_host_sleep";
    call(what, |ctx| {
        let d = crate::device::device(ctx, device, what)?;
        pipefence::host::sleep(&d, std::time::Duration::from_millis(u64::from(ms)));
        Ok(PIPEFENCE_S_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_strings_parse_back() {
        for model in [
            MemoryModel::Plain,
            MemoryModel::Validate,
            MemoryModel::Strict,
        ] {
            assert_eq!(parse_replay(&replay_string(model, 17)), Some(17));
        }
        assert_eq!(parse_replay("42"), Some(42));
        assert_eq!(parse_replay("--seed"), None);
        assert_eq!(parse_replay("seed 4"), None);
    }
}
