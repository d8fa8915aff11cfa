//! Exhaustive exploration (`explore::explore_exhaustive`): complete results, honest bounds.

use pipefence::explore::{self, Bound, ExhaustiveOptions};
use pipefence::{DeviceDesc, FenceDesc, QueueDesc, QueueKind};
use std::collections::BTreeSet;
use std::time::Duration;

/// Two queues signal one fence each; the host reads both after `wait_idle`.
fn two_queues(device: &pipefence::Device) -> pipefence::Result<(u64, u64)> {
    let a = device.create_queue(&QueueDesc::new(QueueKind::Compute, "a"))?;
    let b = device.create_queue(&QueueDesc::new(QueueKind::Compute, "b"))?;
    let f = device.create_fence(&FenceDesc::new(0))?;
    let g = device.create_fence(&FenceDesc::new(0))?;
    a.signal(&f, 1)?;
    b.signal(&g, 2)?;
    device.wait_idle(Duration::from_secs(1))?;
    Ok((f.completed_value(), g.completed_value()))
}

#[test]
fn x4_exhaustive_api_is_complete_on_two_signalling_queues() {
    let mut values = BTreeSet::new();
    let mut replays = Vec::new();
    let e = explore::explore_exhaustive(
        &DeviceDesc::default(),
        &ExhaustiveOptions::default(),
        two_queues,
        |s| {
            values.insert(s.value.ok());
            replays.push(s.replay);
            true
        },
    )
    .unwrap();
    eprintln!("{e:?}");
    assert!(e.complete, "{e:?}");
    assert_eq!(e.bound, None);
    assert_eq!(values.into_iter().collect::<Vec<_>>(), vec![Some((1, 2))]);
    let distinct: BTreeSet<_> = replays.iter().collect();
    assert_eq!(
        distinct.len(),
        replays.len(),
        "every schedule is explored once"
    );
}

#[test]
fn x4_exhaustive_api_reports_the_bound_that_stopped_it() {
    let e = explore::explore_exhaustive(
        &DeviceDesc::default(),
        &ExhaustiveOptions {
            max_schedules: 3,
            preemption_bound: None,
            reduction: false,
        },
        two_queues,
        |_| true,
    )
    .unwrap();
    assert!(!e.complete);
    assert_eq!(e.schedules, 3);
    assert_eq!(e.bound, Some(Bound::MaxSchedules(3)));
    let e = explore::explore_exhaustive(
        &DeviceDesc::default(),
        &ExhaustiveOptions {
            max_schedules: 100_000,
            preemption_bound: Some(0),
            ..ExhaustiveOptions::default()
        },
        two_queues,
        |_| true,
    )
    .unwrap();
    assert!(!e.complete);
    assert_eq!(e.bound, Some(Bound::PreemptionBound(0)));
}

/// Host threads `a` and `b` sleep `k` times each (every sleep a scheduling point; its virtual
/// time never disables it); `main` joins `a`, then `b`.
fn sleepers(device: &pipefence::Device, k: usize) {
    let spawn = |name: &str| {
        let d = device.clone();
        pipefence::host::spawn(device, name, move || {
            for _ in 0..k {
                pipefence::host::sleep(&d, Duration::from_micros(1));
            }
        })
        .unwrap()
    };
    let (a, b) = (spawn("a"), spawn("b"));
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn x3_exhaustive_counts_every_interleaving_of_two_sleeping_hosts() {
    // `a` takes k + 1 turns (its start, then one after each sleep) and `main` one more after
    // `a` ends (returning from the first join): a chain of k + 2 actions, interleaved with
    // `b`'s chain of k + 1 in every way: C(2k + 3, k + 1) schedules. `main`'s last turn, once
    // both have ended, is forced.
    for (k, expected) in [(0, 3), (1, 10), (2, 35), (3, 126)] {
        let e = explore::explore_exhaustive(
            &DeviceDesc::default(),
            &ExhaustiveOptions {
                reduction: false,
                ..ExhaustiveOptions::default()
            },
            |d| sleepers(d, k),
            |_| true,
        )
        .unwrap();
        assert!(e.complete, "{e:?}");
        assert_eq!(e.schedules, expected, "k = {k}: {e:?}");
    }
}

#[test]
fn x1_reduction_counts_one_schedule_for_hosts_whose_actions_all_commute() {
    // The sleeps of `a` and `b` touch only their own host state and move the clock (which
    // commutes); `main`'s joins read each host's state once it ended. Every interleaving
    // above is one Mazurkiewicz trace.
    for k in 0..4 {
        let e = explore::explore_exhaustive(
            &DeviceDesc::default(),
            &ExhaustiveOptions {
                reduction: true,
                ..ExhaustiveOptions::default()
            },
            |d| sleepers(d, k),
            |_| true,
        )
        .unwrap();
        assert!(e.complete && e.reduced, "{e:?}");
        assert_eq!(e.schedules, 1, "k = {k}: {e:?}");
    }
}

#[test]
fn x3_preemption_bound_zero_keeps_only_the_schedules_that_never_switch_away() {
    // Without preemptions a started host runs to its end (a sleeping host stays enabled):
    // `a` first, then `main` or `b`; or `b` first, then `a`, then `main`: 3 schedules.
    let e = explore::explore_exhaustive(
        &DeviceDesc::default(),
        &ExhaustiveOptions {
            max_schedules: 1000,
            preemption_bound: Some(0),
            ..ExhaustiveOptions::default()
        },
        |d| sleepers(d, 2),
        |_| true,
    )
    .unwrap();
    assert_eq!(e.schedules, 3, "{e:?}");
    assert!(!e.complete);
    assert_eq!(e.bound, Some(Bound::PreemptionBound(0)));
}
