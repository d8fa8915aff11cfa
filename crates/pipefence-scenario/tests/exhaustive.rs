//! `check --exhaustive` (`pipefence_scenario::exhaustive`): on tiny scenarios the outcomes it
//! finds are the outcomes sampled seeds find, its failures replay exactly, and a bounded search
//! says so.

use pipefence::explore::ExhaustiveOptions;
use pipefence_scenario::check::{check_each, signature, CheckOptions};
use pipefence_scenario::exhaustive::{check_exhaustive_each, ExhaustiveCheckOptions};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::run::{run, DriverKind, Outcome, RunOptions};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Two queues; the second waits for the first's fence signal, then signals its own.
const FENCE: &str = r#"
device tdr-ms=2000
fence f
fence g
queue a kind=compute
queue b kind=compute
signal a f 1
wait b f 1
signal b g 1
cpu-wait g 1 timeout-ms=5000
expect-fence f equals=1
expect-fence g equals=1
"#;

/// The second queue's ME waits for a flag the first writes at the bottom of the pipe.
const MEMORY_WAIT: &str = r#"
device tdr-ms=2000
buffer flag size=64 heap=shared
buffer out size=64 heap=readback
queue a kind=compute
queue b kind=compute
list w kind=compute {
    write-value32-bop flag value=1 flush=l2-writeback
}
list r kind=compute {
    wait-value32 flag cmp=equal reference=1
    write-value32-bop out value=5 flush=l2-writeback
}
execute b r
execute a w
wait-idle
expect out equals=5
"#;

/// Two queues fill one buffer with nothing ordering them.
const RACE: &str = r#"
device tdr-ms=2000
buffer out size=256 heap=readback
queue a kind=compute
queue b kind=compute
list one kind=compute {
    dispatch fill dst=out groups=1 value=1
}
list two kind=compute {
    dispatch fill dst=out groups=1 value=2
}
execute a one
execute b two
wait-idle
expect out count=64 equals=2
"#;

/// [`RACE`] with the fills ordered by a fence.
const RACE_FIXED: &str = r#"
device tdr-ms=2000
buffer out size=256 heap=readback
fence first
queue a kind=compute
queue b kind=compute
list one kind=compute {
    dispatch fill dst=out groups=1 value=1
}
list two kind=compute {
    dispatch fill dst=out groups=1 value=2
}
execute a one
signal a first 1
wait b first 1
execute b two
wait-idle
expect out count=64 equals=2
"#;

fn scenario(src: &str) -> Scenario {
    pipefence_scenario::parse("tiny.kdl", src).expect("a valid scenario")
}

fn opts(strict: bool, max_schedules: u64) -> ExhaustiveCheckOptions {
    ExhaustiveCheckOptions {
        strict,
        bounds: ExhaustiveOptions {
            max_schedules,
            preemption_bound: None,
            ..ExhaustiveOptions::default()
        },
    }
}

/// The distinct outcomes of 2,000 sampled seeds (random and PCT).
fn sampled(sc: &Scenario, strict: bool) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let opts = CheckOptions {
        schedules: 2000,
        seed: 0,
        strict,
    };
    check_each(
        sc,
        &opts,
        |_| {},
        |_, o| {
            seen.insert(signature(&mut o.clone()));
        },
    );
    seen
}

fn exhaustive(sc: &Scenario, strict: bool, max: u64) -> (BTreeSet<String>, bool, u64) {
    let mut seen = BTreeSet::new();
    let mut replays = BTreeSet::new();
    let r = check_exhaustive_each(
        sc,
        &opts(strict, max),
        |_| {},
        |replay, o| {
            seen.insert(signature(&mut o.clone()));
            replays.insert(replay.to_string());
        },
    );
    assert_eq!(r.outcomes, seen.len());
    // No schedule is explored twice.
    assert_eq!(replays.len() as u64, r.schedules);
    (seen, r.complete, r.schedules)
}

#[test]
fn x3_exhaustive_finds_every_outcome_of_two_queues_and_a_fence() {
    for strict in [false, true] {
        let sc = scenario(FENCE);
        let (found, complete, schedules) = exhaustive(&sc, strict, 10_000);
        assert!(complete, "strict {strict}: {schedules} schedules");
        assert_eq!(found, sampled(&sc, strict), "strict {strict}");
    }
}

#[test]
fn x3_exhaustive_finds_every_outcome_of_a_memory_wait_in_strict_mode() {
    let sc = scenario(MEMORY_WAIT);
    let (found, complete, schedules) = exhaustive(&sc, true, 10_000);
    assert!(complete, "{schedules} schedules");
    assert_eq!(found, sampled(&sc, true));
}

#[test]
fn x3_exhaustive_bounded_search_finds_both_outcomes_of_two_racing_queues() {
    // Not complete within the bound (no reduction yet): every outcome the sampled seeds find
    // is found, and the report says it is bounded.
    let sc = scenario(RACE);
    let (found, complete, schedules) = exhaustive(&sc, false, 3000);
    assert!(!complete);
    assert_eq!(schedules, 3000);
    let s = sampled(&sc, false);
    assert_eq!(s.len(), 2);
    assert_eq!(found, s);
}

fn without_timing(o: &Outcome) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap();
    v.as_object_mut().unwrap().remove("elapsed_ns");
    v
}

#[test]
fn x2_a_racy_scenario_fails_and_its_replay_string_reproduces_the_failure() {
    for strict in [false, true] {
        let sc = scenario(RACE);
        let r = check_exhaustive_each(&sc, &opts(strict, 2000), |_| {}, |_, _| {});
        assert!(r.failing > 0, "strict {strict}");
        assert_eq!(r.exit_code(), 1);
        let f = &r.failures[0];
        assert!(f.replay.starts_with("v1:"));
        let replay = |trace: bool| {
            let script = pipefence::explore::Script::from_schedule_string(&f.replay).unwrap();
            run(
                &sc,
                &RunOptions {
                    driver: DriverKind::Deterministic,
                    strict,
                    trace,
                    schedule: Some(Arc::new(script)),
                    ..RunOptions::default()
                },
            )
        };
        let mut again = replay(false);
        again.expectations.retain(|e| e.passed != Some(true));
        assert_eq!(without_timing(&again), without_timing(&f.outcome));
        // With a trace, twice: the same outcome and the same trace.
        let (a, b) = (replay(true), replay(true));
        assert_eq!(without_timing(&a), without_timing(&b));
        assert_eq!(
            pipefence::trace::chrome::chrome_json(&a.trace, "t"),
            pipefence::trace::chrome::chrome_json(&b.trace, "t")
        );
        assert!(!a.trace.is_empty());
    }
}

#[test]
fn x3_the_fixed_race_passes_every_explored_schedule_and_says_it_is_bounded() {
    let sc = scenario(RACE_FIXED);
    let r = check_exhaustive_each(&sc, &opts(true, 500), |_| {}, |_, _| {});
    assert_eq!(r.failing, 0);
    assert!(!r.complete);
    assert_eq!(r.bound.as_deref(), Some("--max-schedules 500"));
    assert_eq!(r.schedules, 500);
    assert_eq!(r.exit_code(), 0);
}
