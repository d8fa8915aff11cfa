//! `explore::check_every_schedule` and `explore::check_sampled_schedules`, the one-line checks
//! for a test suite: a correct program is proved, a race is caught with a replay that fails
//! again, a bounded search is not taken for a proof.

use pipefence::explore::{
    self, check_every_schedule, check_sampled_schedules, EveryScheduleOptions, ExhaustiveOptions,
    Script,
};
use pipefence::{Device, DeviceDesc};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Two host threads add 1 to a counter; with `atomic` each adds in one step, else each reads,
/// sleeps (a scheduling point) and writes back what it read plus 1: a lost update when the
/// other thread runs in between. Err when the counter is not 2.
fn two_adders(desc: DeviceDesc, atomic: bool) -> Result<(), String> {
    let device = Device::new(desc).map_err(|e| e.to_string())?;
    let counter = Arc::new(AtomicU64::new(0));
    let spawn = |name: &str| {
        let (d, c) = (device.clone(), Arc::clone(&counter));
        pipefence::host::spawn(&device, name, move || {
            if atomic {
                pipefence::host::sleep(&d, Duration::from_micros(1));
                c.fetch_add(1, Ordering::SeqCst);
            } else {
                let v = c.load(Ordering::SeqCst);
                pipefence::host::sleep(&d, Duration::from_micros(1));
                c.store(v + 1, Ordering::SeqCst);
            }
        })
        .map_err(|e| e.to_string())
    };
    let (a, b) = (spawn("a")?, spawn("b")?);
    a.join().map_err(|e| format!("{e:?}"))?;
    b.join().map_err(|e| format!("{e:?}"))?;
    match counter.load(Ordering::SeqCst) {
        2 => Ok(()),
        v => Err(format!("lost update: the counter is {v}, not 2")),
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn every_schedule_proves_two_atomic_adders() {
    let e = check_every_schedule(&EveryScheduleOptions::default(), |d| two_adders(d, true));
    assert!(e.complete, "{e:?}");
    assert!(e.schedules > 1, "{e:?}");
}

#[test]
fn every_schedule_catches_the_lost_update_and_its_schedule_string_replays_it() {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_every_schedule(&EveryScheduleOptions::default(), |d| two_adders(d, false))
    }));
    let message = panic_message(caught.expect_err("the race is found"));
    assert!(message.contains("lost update"), "{message}");
    let replay = message
        .split("schedule string: ")
        .nth(1)
        .expect("the message names the schedule string")
        .trim();
    // The replay fails the same way, every time (a script is used by one run).
    for _ in 0..2 {
        let script = Arc::new(Script::from_schedule_string(replay).expect("a schedule string"));
        let desc = explore::script_desc(&DeviceDesc::default(), script);
        let result = two_adders(desc, false);
        assert_eq!(
            result,
            Err("lost update: the counter is 1, not 2".to_string()),
            "{replay}"
        );
    }
}

#[test]
fn every_schedule_panics_when_a_bound_stops_a_search_asked_to_prove() {
    let opts = EveryScheduleOptions {
        bounds: ExhaustiveOptions {
            max_schedules: 2,
            preemption_bound: None,
            ..ExhaustiveOptions::default()
        },
        ..EveryScheduleOptions::default()
    };
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_every_schedule(&opts, |d| two_adders(d, true))
    }));
    let message = panic_message(caught.expect_err("a bounded search is no proof"));
    assert!(
        message.contains("not a proof") && message.contains("`bounds.max_schedules` (2)"),
        "{message}"
    );
    // Accepted when the caller says so.
    let e = check_every_schedule(
        &EveryScheduleOptions {
            require_complete: false,
            ..opts
        },
        |d| two_adders(d, true),
    );
    assert!(!e.complete);
    assert_eq!(e.schedules, 2);
}

#[test]
fn sampled_schedules_catch_the_lost_update_and_name_the_seed_that_replays_it() {
    assert_eq!(
        check_sampled_schedules(&DeviceDesc::default(), 0..50, |d| two_adders(d, true)),
        50
    );
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_sampled_schedules(&DeviceDesc::default(), 0..200, |d| two_adders(d, false))
    }));
    let message = panic_message(caught.expect_err("some seed loses the update"));
    let seed: u64 = message
        .strip_prefix("seed ")
        .and_then(|m| m.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the message names the seed: {message}"));
    let desc = explore::deterministic_desc(&DeviceDesc::default(), seed);
    assert!(two_adders(desc, false).is_err(), "seed {seed} replays");
}

#[test]
fn deterministic_devices_on_concurrent_threads_give_the_schedules_of_one_thread() {
    // Host-thread registration is per device id (driver/deterministic/hosts.rs), so schedules
    // running at once on other OS threads do not see each other's hosts.
    let outcome = |seed: u64| {
        let run = explore::explore(&DeviceDesc::default(), [seed], |device| {
            let counter = Arc::new(AtomicU64::new(0));
            let spawn = |name: &str| {
                let (d, c) = (device.clone(), Arc::clone(&counter));
                pipefence::host::spawn(device, name, move || {
                    let v = c.load(Ordering::SeqCst);
                    pipefence::host::sleep(&d, Duration::from_micros(1));
                    c.store(v + 1, Ordering::SeqCst);
                })
                .expect("spawn")
            };
            let (a, b) = (spawn("a"), spawn("b"));
            a.join().expect("join a");
            b.join().expect("join b");
            counter.load(Ordering::SeqCst)
        })
        .expect("a device");
        (run[0].value, run[0].virtual_ns, run[0].removal.is_some())
    };
    let alone: Vec<_> = (0..40).map(outcome).collect();
    assert!(
        alone.iter().any(|o| o.0 == 1) && alone.iter().any(|o| o.0 == 2),
        "the seeds give both outcomes: {alone:?}"
    );
    let together: Vec<Vec<_>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|t| s.spawn(move || (0..40).filter(|k| k % 3 == t).map(outcome).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread"))
            .collect()
    });
    for (t, got) in together.iter().enumerate() {
        let want: Vec<_> = (0..40)
            .filter(|k| k % 3 == t as u64)
            .map(|k| alone[k as usize])
            .collect();
        assert_eq!(got, &want, "thread {t}");
    }
}

/// The main thread signals `a`, which releases a thread that raises `f` and lowers it again;
/// right after its signal the main thread registers an event on `f` reaching 1 (`event`) or
/// waits for it with a timeout (no event). Err when the event was not set (the registration
/// came after the raise and the lowering) or the wait timed out.
fn register_after_signal(desc: DeviceDesc, event: bool) -> Result<(), String> {
    let device = Device::new(desc).map_err(|e| e.to_string())?;
    let new_fence = || {
        device
            .create_fence(&pipefence::FenceDesc::new(0))
            .map_err(|e| e.to_string())
    };
    let (a, f) = (new_fence()?, new_fence()?);
    let (a2, f2) = (a.clone(), f.clone());
    let h = pipefence::host::spawn(&device, "h", move || {
        a2.wait_forever(1)
            .and_then(|()| f2.signal(1))
            .and_then(|()| f2.signal(0))
    })
    .map_err(|e| e.to_string())?;
    a.signal(1).map_err(|e| e.to_string())?;
    let ev = pipefence::Event::new();
    let waited = if event {
        f.set_event_on_completion(1, Some(&ev))
    } else {
        f.wait(1, Duration::from_secs(1))
    }
    .map_err(|e| e.to_string());
    h.join()
        .map_err(|e| format!("{e:?}"))?
        .map_err(|e| e.to_string())?;
    waited?;
    if event && !ev.is_set() {
        return Err("the event registered after the pulse was never set".to_string());
    }
    Ok(())
}

/// D4 and F5/F6: a registration on a fence, of an event or of a blocking wait, is a call and so
/// comes after a scheduling point: another thread may raise the fence and lower it again
/// between the host's previous call and the registration, which then never sees the crossing.
/// Until 2026-12-07 the registration was part of the host's previous action (the signal), and
/// every schedule passed.
#[test]
fn d4_a_registration_on_a_fence_follows_its_own_scheduling_point() {
    for event in [true, false] {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_every_schedule(&EveryScheduleOptions::default(), |d| {
                register_after_signal(d, event)
            })
        }));
        let message = panic_message(caught.expect_err("a schedule misses the pulse"));
        let missed = if event { "never set" } else { "wait for 1" };
        assert!(message.contains(missed), "event {event}: {message}");
    }
}
