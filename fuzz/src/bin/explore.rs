//! Fuzz target: the exhaustive search of `check --exhaustive` on a valid scenario, plain or
//! strict (chosen by a hash of the input), within small budgets: at most 64 KiB of buffers, 8
//! groups per dispatch, 16 commands per list and 16 actions per host program (inputs over
//! budget are skipped). Three searches: the reduced one (partial-order reduction, at most 64
//! schedules, with shrinking on half the inputs), and, when it completes, the plain search of
//! every interleaving (at most 400 schedules). A crash is a panic, an abort, a hang, or a
//! wrong answer:
//!
//! - both searches complete and find different sets of outcomes (a reduction that is not
//!   sound, or a plain search that misses what the reduced one finds);
//! - a failing outcome's replay string does not replay to that outcome, or its shrunk
//!   schedule replays to another one.

use pipefence::explore::{ExhaustiveOptions, Parallel, Script};
use pipefence_fuzz::Budget;
use pipefence_scenario::check::signature;
use pipefence_scenario::exhaustive::{check_exhaustive_each, ExhaustiveCheckOptions};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::run::{run, RunOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Schedules the reduced search may explore.
const REDUCED_CAP: u64 = 64;
/// Schedules the plain search may explore before the comparison is skipped.
const PLAIN_CAP: u64 = 400;

/// The budget of a fuzzed scenario (above): its searches stay small.
const BUDGET: Budget = Budget {
    buffer_bytes: 1 << 16,
    groups: 8,
    commands: 16,
    actions: 16,
};

struct Found {
    complete: bool,
    outcomes: BTreeSet<String>,
    /// Each visited schedule's outcome, by its schedule string.
    by_schedule: BTreeMap<String, String>,
    report: pipefence_scenario::exhaustive::ExhaustiveReport,
}

fn search(sc: &Scenario, strict: bool, reduction: bool, cap: u64, shrink: bool) -> Found {
    let mut outcomes = BTreeSet::new();
    let mut by_schedule = BTreeMap::new();
    let report = check_exhaustive_each(
        sc,
        &ExhaustiveCheckOptions {
            strict,
            bounds: ExhaustiveOptions {
                max_schedules: cap,
                preemption_bound: None,
                reduction,
            },
            shrink: shrink.then_some(200),
            parallel: Parallel {
                jobs: 1,
                shard: None,
            },
            fail_fast: false,
        },
        |_| {},
        |schedule, o| {
            let sig = signature(&mut o.clone());
            outcomes.insert(sig.clone());
            by_schedule.insert(schedule.to_string(), sig);
        },
    );
    Found {
        complete: report.complete,
        outcomes,
        by_schedule,
        report,
    }
}

fn replay(sc: &Scenario, strict: bool, schedule: &str) -> String {
    let script = Script::from_schedule_string(schedule)
        .unwrap_or_else(|e| panic!("replay string {schedule} does not decode: {e}"));
    let mut o = run(sc, &RunOptions::scripted(strict, Arc::new(script)));
    signature(&mut o)
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((sc, seed)) = BUDGET.scenario(data) else {
            return;
        };
        let strict = seed % 2 == 1;
        let shrink = (seed >> 1) % 2 == 1;
        let reduced = search(&sc, strict, true, REDUCED_CAP, shrink);
        for f in &reduced.report.failures {
            let original = replay(&sc, strict, &f.replay);
            if let Some(seen) = reduced.by_schedule.get(&f.replay) {
                assert_eq!(&original, seen, "{} replays to another outcome", f.replay);
            }
            assert!(
                reduced.outcomes.contains(&original),
                "{} replays to an outcome the search did not see",
                f.replay
            );
            if let Some(s) = &f.shrunk {
                assert_eq!(
                    replay(&sc, strict, &s.replay),
                    original,
                    "shrunk {} replays to another outcome than {}",
                    s.replay,
                    f.replay
                );
            }
        }
        if !reduced.complete {
            return;
        }
        let plain = search(&sc, strict, false, PLAIN_CAP, false);
        if !plain.complete {
            return;
        }
        assert_eq!(
            reduced.outcomes.len(),
            reduced.report.outcomes,
            "the report counts another number of outcomes than it visited"
        );
        let missed: Vec<_> = plain.outcomes.difference(&reduced.outcomes).collect();
        let extra: Vec<_> = reduced.outcomes.difference(&plain.outcomes).collect();
        assert!(
            missed.is_empty() && extra.is_empty(),
            "strict {strict}: the reduced search ({} schedules) and the plain one ({}) differ: \
             missed {missed:#?}, extra {extra:#?}",
            reduced.report.schedules,
            plain.report.schedules
        );
    });
}
