//! `pipefence check --exhaustive`: every schedule of a scenario on the deterministic driver
//! (`pipefence::explore::enumerate_parallel`: stateless depth-first searches of the units the
//! search is cut into, with partial-order reduction or without, on `parallel.jobs` threads and
//! with the same report whatever their number), with honest bounds: the report is `complete` only when every
//! schedule (or class of equivalent schedules) was explored (`docs/exploration.md`). Failing
//! schedules are grouped by outcome as `check` groups them, each with the schedule string that
//! replays it (`pipefence run FILE --schedule STRING`) and, unless turned off, shrunk to its
//! fewest preemptions (`pipefence::explore::shrink`).

use crate::check::{describe, signature, Progress, MAX_FAILURE_GROUPS};
use crate::plan::Scenario;
use crate::run::narrate::DecisiveStep;
use crate::run::{run, Outcome, RunOptions, Status};
use pipefence::explore::{
    enumerate_parallel, shrink, Bound, ExhaustiveOptions, Parallel, Script, Seen,
};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How to check exhaustively.
#[derive(Debug, Clone)]
pub struct ExhaustiveCheckOptions {
    /// Strict mode.
    pub strict: bool,
    /// The bounds.
    pub bounds: ExhaustiveOptions,
    /// Shrink each distinct failing outcome to its fewest preemptions, within this many runs
    /// in all (`pipefence::explore::shrink`); `None`: do not shrink (`--no-shrink`).
    pub shrink: Option<u64>,
    /// The threads, and the shard (`pipefence::explore::enumerate_parallel`): the report is
    /// the same whatever the number of threads.
    pub parallel: Parallel,
    /// Stop at the first failing schedule (`--fail-fast`): the report is then bounded by it
    /// (`bound` is `--fail-fast`, `complete` false); a search that finds no failure ends as it
    /// would without it. The first failing schedule in the search's order, whatever the
    /// threads.
    pub fail_fast: bool,
}

/// One distinct failing outcome of an exhaustive check.
#[derive(Debug, Clone, Serialize)]
pub struct ExhaustiveFailure {
    /// The schedule string of the first schedule that produced it (replay with `run
    /// --schedule`, plus `--strict` when the check was strict).
    pub replay: String,
    /// How many schedules produced it.
    pub count: u64,
    /// `failed` or `removed`.
    pub status: Status,
    /// The exit status `run --schedule` gives.
    pub exit: i32,
    /// What failed, in words.
    pub what: Vec<String>,
    /// Expectations of the first schedule that passed (left out of `outcome`).
    pub passed_expectations: u64,
    /// The outcome of the first schedule, with only its expectations that did not pass.
    pub outcome: Outcome,
    /// The failure shrunk to its fewest preemptions (absent with `--no-shrink`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<ShrunkFailure>,
}

/// A failing schedule shrunk to the fewest preemptions that still fail the same way (the same
/// outcome signature).
#[derive(Debug, Clone, Serialize)]
pub struct ShrunkFailure {
    /// The schedule string of the shrunk schedule (`run --schedule`).
    pub replay: String,
    /// Its preemptions: switches away from an actor that could go on.
    pub preemptions: u32,
    /// The preemptions of the schedule it was shrunk from (`replay` of the failure).
    pub original_preemptions: u32,
    /// No schedule with fewer preemptions fails this way: every schedule with fewer was
    /// explored. `false`: the shrink budget ran out first (`preemptions` is the fewest found).
    pub fewest: bool,
    /// Each preemption, in order: who ran, and before whom.
    pub steps: Vec<DecisiveStep>,
}

/// The result of an exhaustive check (its `--json` shape).
#[derive(Debug, Clone, Serialize)]
pub struct ExhaustiveReport {
    /// Always 1.
    pub version: u32,
    /// Always `exhaustive`.
    pub mode: &'static str,
    /// Every schedule was explored without a bound cutting any: a proof for this scenario in
    /// this model.
    pub complete: bool,
    /// The bound that stopped it (`--max-schedules N`, `--preemption-bound K`, `--fail-fast`
    /// at the first failing schedule, `interrupted`, `stopped`), or `null` when complete.
    pub bound: Option<String>,
    /// Schedules explored.
    pub schedules: u64,
    /// Distinct outcomes seen.
    pub outcomes: usize,
    /// Failing schedules.
    pub failing: u64,
    /// The distinct failing outcomes, in the order found (at most 32).
    pub failures: Vec<ExhaustiveFailure>,
    /// Failing schedules whose outcome is none of `failures`.
    pub other_failing: u64,
    /// Runs stopped early because their new choice was a blocked engine stage (the same as a
    /// schedule already explored): not counted in `schedules`.
    pub repeated_runs: u64,
    /// Partial-order reduction was on: `schedules` counts classes of schedules that differ
    /// only in the order of independent actions.
    pub reduced: bool,
    /// Runs stopped because every action they could take next was asleep (equivalent to a
    /// schedule already explored): not counted in `schedules`.
    pub sleep_blocked: u64,
    /// The most choice points of one schedule.
    pub max_choice_points: usize,
    /// The check was interrupted (Ctrl-C).
    pub interrupted: bool,
    /// Wall-clock nanoseconds of the whole check.
    pub elapsed_ns: u64,
    /// Every distinct outcome's hash ([`crate::check::outcome_hash`]), sorted: what merging
    /// shards' reports needs to count distinct outcomes exactly.
    #[serde(skip)]
    pub outcome_hashes: Vec<String>,
}

impl ExhaustiveReport {
    /// The exit status: that of the first failing outcome, 0 when every schedule passed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// The outcome of the schedule `replay` (a schedule string an exploration of `sc` reported,
/// whose outcome's signature is `sig`), run again.
fn rerun(sc: &Scenario, strict: bool, replay: &str, sig: &str) -> Outcome {
    let script = Script::from_schedule_string(replay)
        .unwrap_or_else(|e| panic!("an explored schedule's string does not decode: {e}"));
    let mut o = run_scripted(sc, strict, &Arc::new(script));
    let again = signature(&mut o);
    assert_eq!(
        again, sig,
        "a schedule run again from its string gave another outcome"
    );
    o
}

/// One run of `sc` on the deterministic driver, its choices from `script`.
fn run_scripted(sc: &Scenario, strict: bool, script: &Arc<Script>) -> Outcome {
    run(sc, &RunOptions::scripted(strict, script.clone()))
}

/// Explores every schedule of `sc` within `opts`' bounds, calling `progress` after each.
pub fn check_exhaustive(
    sc: &Scenario,
    opts: &ExhaustiveCheckOptions,
    progress: impl FnMut(Progress),
) -> ExhaustiveReport {
    check_exhaustive_inner(sc, opts, progress, None)
}

/// [`check_exhaustive`], also handing every schedule's outcome to `visit` with its schedule
/// string.
pub fn check_exhaustive_each(
    sc: &Scenario,
    opts: &ExhaustiveCheckOptions,
    progress: impl FnMut(Progress),
    mut visit: impl FnMut(&str, &Outcome),
) -> ExhaustiveReport {
    check_exhaustive_inner(sc, opts, progress, Some(&mut visit))
}

/// What a schedule's run hands the report: its outcome (kept only when the report may need
/// it), its signature (one shared copy per distinct outcome) and its status.
type RunSeen = (Option<Outcome>, Arc<str>, Status);

/// A visitor of every schedule's outcome, with its schedule string.
type EachSchedule<'a> = dyn FnMut(&str, &Outcome) + 'a;

fn check_exhaustive_inner(
    sc: &Scenario,
    opts: &ExhaustiveCheckOptions,
    mut progress: impl FnMut(Progress),
    mut visit: Option<&mut EachSchedule<'_>>,
) -> ExhaustiveReport {
    let start = Instant::now();
    let mut seen: HashSet<Arc<str>> = HashSet::new();
    let mut groups: Vec<(Arc<str>, ExhaustiveFailure)> = Vec::new();
    let (mut failing, mut other_failing, mut done) = (0u64, 0u64, 0u64);
    // The signatures the runs found so far, in the order the threads made them: a run whose
    // outcome is one of them drops its outcome (the report needs only the first schedule's of
    // each, and holding them all costs memory while threads explore ahead), unless every
    // outcome is visited. A first schedule whose outcome was dropped (a later schedule of the
    // same outcome was made first) is run again from its schedule string.
    let keep_all = visit.is_some();
    let found: Mutex<HashSet<Arc<str>>> = Mutex::new(HashSet::new());
    let e = enumerate_parallel(
        &opts.bounds,
        &opts.parallel,
        |script| -> RunSeen {
            let mut o = run_scripted(sc, opts.strict, script);
            let sig = signature(&mut o);
            let mut f = found.lock().unwrap_or_else(|p| p.into_inner());
            let (sig, known) = match f.get(sig.as_str()) {
                Some(s) => (s.clone(), true),
                None => {
                    let s: Arc<str> = sig.into();
                    if f.len() < crate::check::MAX_DISTINCT_OUTCOMES {
                        f.insert(s.clone());
                    }
                    (s, false)
                }
            };
            drop(f);
            let status = o.status;
            ((keep_all || !known).then_some(o), sig, status)
        },
        crate::run::interrupted,
        |seen_run| {
            let ((o, sig, status), replay) = match seen_run {
                Seen::Schedule(v, replay) => (v, replay),
                Seen::Restart => {
                    seen.clear();
                    groups.clear();
                    (failing, other_failing, done) = (0, 0, 0);
                    return true;
                }
            };
            if crate::run::interrupted() {
                return false;
            }
            if let (Some(visit), Some(o)) = (visit.as_mut(), &o) {
                visit(replay, o);
            }
            done += 1;
            if seen.len() < crate::check::MAX_DISTINCT_OUTCOMES {
                seen.insert(sig.clone());
            }
            let failed = status != Status::Passed;
            if failed {
                failing += 1;
                if let Some((_, g)) = groups.iter_mut().find(|(s, _)| *s == sig) {
                    g.count += 1;
                } else if groups.len() < MAX_FAILURE_GROUPS {
                    let mut o = o.unwrap_or_else(|| rerun(sc, opts.strict, replay, &sig));
                    let passed_expectations = crate::check::drop_passed_expectations(&mut o);
                    groups.push((
                        sig,
                        ExhaustiveFailure {
                            replay: replay.to_string(),
                            count: 1,
                            status: o.status,
                            exit: o.exit_code(),
                            what: describe(&o),
                            passed_expectations,
                            outcome: o,
                            shrunk: None,
                        },
                    ));
                } else {
                    other_failing += 1;
                }
            }
            let secs = start.elapsed().as_secs_f64();
            progress(Progress {
                done,
                total: opts.bounds.max_schedules,
                failures: failing,
                per_second: if secs > 0.0 { done as f64 / secs } else { 0.0 },
            });
            !(failed && opts.fail_fast)
        },
    );
    let mut interrupted = crate::run::interrupted();
    if let (Some(budget), false) = (opts.shrink, interrupted || groups.is_empty()) {
        let targets: Vec<(String, String)> = groups
            .iter()
            .map(|(sig, f)| (sig.to_string(), f.replay.clone()))
            .collect();
        let shrunk = shrink(
            &targets,
            budget,
            |script| run_scripted(sc, opts.strict, script),
            |mut o| (o.status != Status::Passed).then(|| signature(&mut o)),
        );
        interrupted = crate::run::interrupted();
        if !interrupted {
            for ((_, g), (s, o)) in groups.iter_mut().zip(shrunk) {
                if o.is_none() {
                    continue;
                }
                g.shrunk = Some(ShrunkFailure {
                    replay: s.replay,
                    preemptions: s.preemptions,
                    original_preemptions: s.original_preemptions,
                    fewest: s.fewest,
                    steps: o.map(|o| o.steps).unwrap_or_default(),
                });
            }
        }
    }
    ExhaustiveReport {
        version: 1,
        mode: "exhaustive",
        complete: e.complete && !interrupted,
        bound: e.bound.map(|b| match b {
            Bound::Stopped if interrupted => "interrupted".to_string(),
            Bound::Stopped if opts.fail_fast && failing > 0 => "--fail-fast".to_string(),
            b => b.to_string(),
        }),
        schedules: e.schedules,
        outcomes: seen.len(),
        failing,
        failures: groups.into_iter().map(|(_, f)| f).collect(),
        other_failing,
        repeated_runs: e.repeated_runs,
        reduced: e.reduced,
        sleep_blocked: e.sleep_blocked,
        max_choice_points: e.max_depth,
        interrupted,
        elapsed_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
        outcome_hashes: {
            let mut h: Vec<String> = seen.iter().map(|s| crate::check::outcome_hash(s)).collect();
            h.sort();
            h
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipefence::explore::{ExhaustiveOptions, Parallel};

    /// Two queues write one buffer with nothing ordering them.
    const RACE: &str = include_str!("../../../tests/scenarios/write-write.kdl");

    /// A first schedule of an outcome whose outcome a thread dropped is run again from its
    /// schedule string: every explored schedule's outcome comes back the same that way.
    #[test]
    fn x6_a_dropped_outcome_run_again_from_its_schedule_string_is_the_same() {
        let sc = crate::parse("write-write.kdl", RACE).expect("a valid scenario");
        for strict in [false, true] {
            let opts = ExhaustiveCheckOptions {
                strict,
                bounds: ExhaustiveOptions {
                    max_schedules: 200,
                    preemption_bound: None,
                    reduction: true,
                },
                shrink: None,
                parallel: Parallel::default(),
                fail_fast: false,
            };
            let mut seen = Vec::new();
            let r = check_exhaustive_each(
                &sc,
                &opts,
                |_| {},
                |replay, o| {
                    seen.push((replay.to_string(), o.clone()));
                },
            );
            assert!(r.failing > 0, "the race fails in some schedule");
            for (replay, mut o) in seen {
                let sig = signature(&mut o);
                let mut again = rerun(&sc, strict, &replay, &sig);
                again.elapsed_ns = o.elapsed_ns;
                assert_eq!(
                    serde_json::to_value(&again).expect("serializes"),
                    serde_json::to_value(&o).expect("serializes"),
                    "{replay}"
                );
            }
        }
    }
}
