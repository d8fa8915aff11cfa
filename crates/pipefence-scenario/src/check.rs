//! `pipefence check`: one scenario under many deterministic schedules (D4), optionally in
//! strict mode (D5). Every schedule is reproducible with
//! `pipefence run FILE --driver deterministic --seed K` (plus `--strict`).

use crate::plan::Scenario;
use crate::run::{run, DriverKind, Outcome, RunOptions, Status};
use serde::Serialize;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::time::Instant;

/// Distinct failing outcomes a report keeps in full ([`CheckReport::failures`]); failing
/// schedules with another outcome are only counted ([`CheckReport::other_failing`]).
pub const MAX_FAILURE_GROUPS: usize = 32;

/// Seeds listed per distinct failing outcome ([`Failure::seeds`]).
pub const MAX_SEEDS_PER_FAILURE: usize = 8;

/// Distinct outcomes told apart for [`CheckReport::outcomes`] (8 bytes each); past it the count
/// is a lower bound.
pub const MAX_DISTINCT_OUTCOMES: usize = 1 << 20;

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Number of schedules.
    pub schedules: u64,
    /// First seed.
    pub seed: u64,
    /// Strict mode.
    pub strict: bool,
}

/// What [`check_with`] adds to [`CheckOptions`] (`pipefence check --validate`, `--fail-fast`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckMode {
    /// Hazard reports in every schedule without strict mode's weaker GPU (as `run --validate`);
    /// a hazard fails the schedule. Strict mode reports hazards already.
    pub validate: bool,
    /// Stop after the first failing schedule.
    pub fail_fast: bool,
}

/// One distinct failing outcome, and the schedules that produced it.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The first seed that produced it (replay with `run --seed`).
    pub seed: u64,
    /// How many schedules produced it.
    pub count: u64,
    /// The first seeds that produced it, in order (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub seeds: Vec<u64>,
    /// `failed` or `removed`.
    pub status: Status,
    /// The exit status `run --seed` gives.
    pub exit: i32,
    /// What failed, in words (failed expectations, host errors, the removal).
    pub what: Vec<String>,
    /// Expectations of the first seed's schedule that passed: counted here, left out of
    /// `outcome` (a file with thousands of expectations would otherwise repeat them in every
    /// kept failure); `run --seed` prints them.
    pub passed_expectations: u64,
    /// The outcome of the first seed's schedule, with only its expectations that did not pass
    /// (failed, or not reached).
    pub outcome: Outcome,
}

/// Progress of a long check.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Schedules done.
    pub done: u64,
    /// Of.
    pub total: u64,
    /// Failures so far.
    pub failures: u64,
    /// Schedules per second so far.
    pub per_second: f64,
}

/// The result of a check (the `--json` shape, `docs/check.schema.json`). Its size is bounded
/// whatever the number of schedules: failing schedules are grouped by outcome, with counts and
/// the first seeds of each.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Always 1.
    pub version: u32,
    /// Schedules run.
    pub schedules: u64,
    /// Distinct outcomes seen (status, expectations, fences, removal, host errors); a lower
    /// bound past [`MAX_DISTINCT_OUTCOMES`].
    pub outcomes: usize,
    /// Failing schedules.
    pub failing: u64,
    /// The distinct failing outcomes, in the order of their first seed (at most
    /// [`MAX_FAILURE_GROUPS`]; the first is the lowest failing seed's).
    pub failures: Vec<Failure>,
    /// Failing schedules whose outcome is none of `failures` (more distinct failing outcomes
    /// than are kept).
    pub other_failing: u64,
    /// The first seeds of those (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub other_seeds: Vec<u64>,
    /// The check was interrupted ([`crate::run::interrupt`], Ctrl-C): `schedules` ran.
    pub interrupted: bool,
    /// Wall-clock nanoseconds of the whole check.
    pub elapsed_ns: u64,
}

impl CheckReport {
    /// The exit status: that of the lowest failing seed, 0 when every schedule passed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// Drops the expectations that passed from a kept failing outcome (only those that did not pass
/// tell about the failure; the rest would fill the report) and returns how many there were.
pub(crate) fn drop_passed_expectations(o: &mut Outcome) -> u64 {
    let before = o.expectations.len();
    o.expectations.retain(|e| e.passed != Some(true));
    (before - o.expectations.len()) as u64
}

/// What makes two outcomes the same: everything but timing (the elapsed time and the queue
/// summaries are left out while it is serialized, then put back, so nothing is cloned).
pub fn signature(o: &mut Outcome) -> String {
    let elapsed = std::mem::take(&mut o.elapsed_ns);
    let queues = std::mem::take(&mut o.queues);
    let sig = serde_json::to_string(&*o).unwrap_or_default();
    o.elapsed_ns = elapsed;
    o.queues = queues;
    sig
}

/// What failed in an outcome, in words (failed expectations, host errors, hazards, the
/// removal).
pub fn describe(o: &Outcome) -> Vec<String> {
    let mut what = Vec::new();
    for e in &o.expectations {
        if e.passed == Some(false) {
            what.push(format!("line {}: expectation failed: {}", e.line, e.detail));
        }
    }
    for e in &o.host_errors {
        what.push(format!("line {}: host {}: {}", e.line, e.host, e.message));
    }
    for h in &o.hazards {
        what.push(h.message.clone());
    }
    if let Some(r) = &o.removed {
        let mut s = format!("device removed: {}", r.reason);
        if let Some(c) = &r.classification {
            s += &format!(", {c}");
        }
        if !r.cycle.is_empty() {
            s += &format!(", cycle {}", r.cycle.join(" -> "));
        }
        for q in &r.queues {
            if let (Some(w), Some(l)) = (&q.waiting_for, q.at.as_ref().and_then(|s| s.line)) {
                s += &format!("; {} at line {l} waits for {w}", q.queue);
            }
        }
        what.push(s);
    }
    what
}

/// Runs `opts.schedules` seeds from `opts.seed` (never past `u64::MAX`: a range that would
/// overflow stops at the last seed), calling `progress` after each.
pub fn check(sc: &Scenario, opts: &CheckOptions, progress: impl FnMut(Progress)) -> CheckReport {
    check_each(sc, opts, progress, |_, _| {})
}

/// [`check`], also handing every schedule's outcome to `visit` (with its seed) as it ends. The
/// report keeps only what [`CheckReport`] says, so memory stays bounded.
pub fn check_each(
    sc: &Scenario,
    opts: &CheckOptions,
    progress: impl FnMut(Progress),
    visit: impl FnMut(u64, &Outcome),
) -> CheckReport {
    check_with(sc, opts, CheckMode::default(), progress, visit)
}

/// [`check_each`] with validation or a stop at the first failing schedule ([`CheckMode`]).
pub fn check_with(
    sc: &Scenario,
    opts: &CheckOptions,
    mode: CheckMode,
    mut progress: impl FnMut(Progress),
    mut visit: impl FnMut(u64, &Outcome),
) -> CheckReport {
    let start = Instant::now();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut groups: Vec<(String, Failure)> = Vec::new();
    let mut failing = 0u64;
    let mut other_failing = 0u64;
    let mut other_seeds = Vec::new();
    let mut done = 0u64;
    for i in 0..opts.schedules {
        let Some(seed) = opts.seed.checked_add(i) else {
            break;
        };
        if crate::run::interrupted() {
            break;
        }
        let mut o = run(
            sc,
            &RunOptions {
                driver: DriverKind::Deterministic,
                seed,
                strict: opts.strict,
                validate: mode.validate,
                trace: false,
                schedule: None,
            },
        );
        if crate::run::interrupted() {
            // Cut short by the interruption (removed as requested): not a schedule that ran.
            break;
        }
        visit(seed, &o);
        done = i + 1;
        let sig = signature(&mut o);
        let mut h = DefaultHasher::new();
        sig.hash(&mut h);
        let hash = h.finish();
        if seen.len() < MAX_DISTINCT_OUTCOMES {
            seen.insert(hash);
        }
        if o.status != Status::Passed {
            failing += 1;
            if let Some((_, g)) = groups.iter_mut().find(|(s, _)| *s == sig) {
                g.count += 1;
                if g.seeds.len() < MAX_SEEDS_PER_FAILURE {
                    g.seeds.push(seed);
                }
            } else if groups.len() < MAX_FAILURE_GROUPS {
                let passed_expectations = drop_passed_expectations(&mut o);
                groups.push((
                    sig,
                    Failure {
                        seed,
                        count: 1,
                        seeds: vec![seed],
                        status: o.status,
                        exit: o.exit_code(),
                        what: describe(&o),
                        passed_expectations,
                        outcome: o,
                    },
                ));
            } else {
                other_failing += 1;
                if other_seeds.len() < MAX_SEEDS_PER_FAILURE {
                    other_seeds.push(seed);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        progress(Progress {
            done: i + 1,
            total: opts.schedules,
            failures: failing,
            per_second: if secs > 0.0 {
                (i + 1) as f64 / secs
            } else {
                0.0
            },
        });
        if mode.fail_fast && failing > 0 {
            break;
        }
    }
    CheckReport {
        version: 1,
        schedules: done,
        outcomes: seen.len(),
        failing,
        failures: groups.into_iter().map(|(_, f)| f).collect(),
        other_failing,
        other_seeds,
        interrupted: crate::run::interrupted(),
        elapsed_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
    }
}
