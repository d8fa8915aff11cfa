//! The exhaustive search on threads and in shards (`explore::enumerate_parallel`): the plain
//! search explores exactly the schedules of the sequential one, the reduced one every outcome;
//! the result and the order schedules are handed on do not depend on the threads, and the
//! shards in order are the whole search.

use pipefence::explore::{
    self, enumerate, enumerate_parallel, Enumeration, ExhaustiveOptions, Parallel, Script, Seen,
};
use pipefence::{Device, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Host thread `a` submits a signal of fence `f` to 1, then to 2, on queue `qa`; host `b`
/// sleeps once, then reads `f`; `main` joins both. The value: what `b` read, and the fence at
/// the end.
fn program(device: &Device) -> (u64, u64) {
    let qa = device
        .create_queue(&QueueDesc::new(QueueKind::Compute, "qa"))
        .unwrap();
    let f = device.create_fence(&FenceDesc::new(0)).unwrap();
    let f2 = f.clone();
    // A run the search stops removes the device: what follows then fails, as it may.
    let a = pipefence::host::spawn(device, "a", move || {
        let _ = qa.signal(&f2, 1);
        let _ = qa.signal(&f2, 2);
    })
    .unwrap();
    let (d, f3) = (device.clone(), f.clone());
    let b = pipefence::host::spawn(device, "b", move || {
        pipefence::host::sleep(&d, Duration::from_micros(1));
        f3.completed_value()
    })
    .unwrap();
    let _ = a.join();
    let read = b.join().unwrap_or(u64::MAX);
    let _ = device.wait_idle(Duration::from_secs(1));
    (read, f.completed_value())
}

fn run(script: &Arc<Script>) -> (u64, u64) {
    let device = Device::new(explore::script_desc(&DeviceDesc::default(), script.clone())).unwrap();
    let v = program(&device);
    device.tools().settle(Duration::from_secs(3600));
    v
}

/// A schedule explored: its replay and its value.
type Explored = (String, (u64, u64));

/// The sequential search: its result and every schedule's replay and value, in order.
fn sequential(opts: &ExhaustiveOptions) -> (Enumeration, Vec<Explored>) {
    let mut seen = Vec::new();
    let e = enumerate(opts, run, |v, s| {
        seen.push((s.schedule_string(), v));
        true
    });
    (e, seen)
}

/// The parallel search.
fn parallel(opts: &ExhaustiveOptions, par: &Parallel) -> (Enumeration, Vec<Explored>) {
    let mut seen = Vec::new();
    let e = enumerate_parallel(
        opts,
        par,
        run,
        || false,
        |s| {
            match s {
                Seen::Schedule(v, replay) => seen.push((replay.to_string(), v)),
                Seen::Restart => seen.clear(),
            }
            true
        },
    );
    (e, seen)
}

fn plain(bound: Option<u32>) -> ExhaustiveOptions {
    ExhaustiveOptions {
        max_schedules: 100_000,
        preemption_bound: bound,
        reduction: false,
    }
}

#[test]
fn x6_parallel_plain_search_explores_exactly_the_schedules_of_the_sequential_one() {
    // (Unbounded, the plain search of this program has 14,600 schedules: too many for a
    // debug build.)
    for bound in [Some(0), Some(1)] {
        let opts = plain(bound);
        let (e, want) = sequential(&opts);
        let want_set: BTreeSet<_> = want.iter().cloned().collect();
        assert_eq!(want_set.len(), want.len(), "each schedule once");
        for jobs in [1, 2, 3] {
            let (p, got) = parallel(&opts, &Parallel { jobs, shard: None });
            let got_set: BTreeSet<_> = got.iter().cloned().collect();
            assert_eq!(got_set.len(), got.len(), "each schedule once (-j {jobs})");
            assert_eq!(got_set, want_set, "bound {bound:?}, -j {jobs}");
            assert_eq!(
                (p.complete, p.bound, p.schedules),
                (e.complete, e.bound, e.schedules),
                "bound {bound:?}, -j {jobs}"
            );
        }
    }
}

#[test]
fn x6_parallel_reduced_search_finds_every_outcome_the_same_whatever_the_threads() {
    let outcomes =
        |seen: &[Explored]| -> BTreeSet<(u64, u64)> { seen.iter().map(|(_, v)| *v).collect() };
    let reduced = ExhaustiveOptions {
        reduction: true,
        ..plain(None)
    };
    let (e, seq) = sequential(&reduced);
    assert!(e.complete);
    let (p1, one) = parallel(&reduced, &Parallel::default());
    assert!(p1.complete && p1.reduced, "{p1:?}");
    assert_eq!(
        outcomes(&one),
        outcomes(&seq),
        "the sequential reduced search's outcomes"
    );
    // Every outcome of the schedules with at most one preemption is among them.
    let (_, bounded) = sequential(&plain(Some(1)));
    assert!(outcomes(&bounded).is_subset(&outcomes(&one)));
    assert!(outcomes(&one).len() >= 3, "{:?}", outcomes(&one));
    for jobs in [2, 3] {
        let (p, got) = parallel(&reduced, &Parallel { jobs, shard: None });
        assert_eq!(
            got, one,
            "the same schedules in the same order on {jobs} threads"
        );
        assert_eq!(p, p1);
    }
}

#[test]
fn x6_parallel_bounded_search_with_sleep_sets_finds_the_plain_outcomes_the_same_whatever_the_threads(
) {
    let outcomes =
        |seen: &[Explored]| -> BTreeSet<(u64, u64)> { seen.iter().map(|(_, v)| *v).collect() };
    for bound in [Some(0), Some(1)] {
        let (e, want) = sequential(&plain(bound));
        let opts = ExhaustiveOptions {
            reduction: true,
            ..plain(bound)
        };
        let (p1, one) = parallel(&opts, &Parallel::default());
        assert!(p1.reduced, "{p1:?}");
        assert_eq!((p1.complete, p1.bound), (e.complete, e.bound), "{bound:?}");
        assert_eq!(outcomes(&one), outcomes(&want), "{bound:?}");
        assert!(p1.schedules <= e.schedules, "{p1:?} against {e:?}");
        for jobs in [2, 3] {
            let (p, got) = parallel(&opts, &Parallel { jobs, shard: None });
            assert_eq!(
                got, one,
                "{bound:?}: the same schedules in order on {jobs} threads"
            );
            assert_eq!(p, p1);
        }
    }
}

#[test]
fn x6_shards_in_order_are_the_whole_search() {
    for opts in [
        plain(Some(0)),
        ExhaustiveOptions {
            reduction: true,
            ..plain(None)
        },
    ] {
        let (whole, want) = parallel(&opts, &Parallel::default());
        for total in [1u64, 2, 3, 7, 40] {
            let mut got = Vec::new();
            let (mut schedules, mut complete) = (0, true);
            for index in 0..total {
                let (e, part) = parallel(
                    &opts,
                    &Parallel {
                        jobs: 2,
                        shard: Some((index, total)),
                    },
                );
                // A shard is complete when no bound cut its own units (an empty one is).
                complete &= e.complete;
                schedules += e.schedules;
                got.extend(part);
            }
            assert_eq!(schedules, whole.schedules, "{total} shards");
            assert_eq!(complete, whole.complete, "{total} shards");
            assert_eq!(got, want, "{total} shards");
        }
    }
}

#[test]
fn x6_max_schedules_keeps_the_first_schedules_in_the_units_order() {
    for reduction in [false, true] {
        // (A preemption bound turns the reduction off: the reduced search is unbounded.)
        let whole = ExhaustiveOptions {
            reduction,
            ..plain((!reduction).then_some(1))
        };
        let (all, every) = parallel(
            &whole,
            &Parallel {
                jobs: 2,
                shard: None,
            },
        );
        for max in [1, 2, 5] {
            let opts = ExhaustiveOptions {
                max_schedules: max,
                ..whole
            };
            for jobs in [1, 2] {
                let (e, got) = parallel(&opts, &Parallel { jobs, shard: None });
                assert_eq!(e.schedules, max.min(all.schedules), "{opts:?}, -j {jobs}");
                if max < all.schedules {
                    assert!(!e.complete, "{opts:?}");
                    assert_eq!(e.bound, Some(explore::Bound::MaxSchedules(max)));
                } else {
                    // The whole search fits: the bound cut nothing.
                    assert_eq!(e.complete, all.complete, "{opts:?}");
                }
                assert_eq!(got[..], every[..got.len()], "the first schedules, in order");
            }
        }
    }
}
