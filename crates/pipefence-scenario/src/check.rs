//! `pipefence check`: one scenario under many deterministic schedules (D4), optionally in
//! strict mode (D5). Every schedule is reproducible with
//! `pipefence run FILE --driver deterministic --seed K` (plus `--strict`).

use crate::plan::Scenario;
use crate::run::{run, DriverKind, Outcome, RunOptions, Status};
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::Instant;

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

/// A failing schedule.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// Its seed.
    pub seed: u64,
    /// `failed` or `removed`.
    pub status: Status,
    /// The exit status `run --seed` gives.
    pub exit: i32,
    /// What failed, in words (failed expectations, host errors, the removal).
    pub what: Vec<String>,
    /// The full outcome of the schedule.
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

/// The result of a check (the `--json` shape).
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Always 1.
    pub version: u32,
    /// Schedules run.
    pub schedules: u64,
    /// Distinct outcomes seen (status, expectations, fences, removal, host errors).
    pub outcomes: usize,
    /// Every failing seed, in seed order.
    pub failures: Vec<Failure>,
    /// Wall-clock nanoseconds of the whole check.
    pub elapsed_ns: u64,
}

impl CheckReport {
    /// The exit status: that of the lowest failing seed, 0 when every schedule passed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// What makes two outcomes the same: everything but timing.
fn signature(o: &Outcome) -> String {
    let mut o = o.clone();
    o.elapsed_ns = 0;
    o.queues.clear();
    serde_json::to_string(&o).unwrap_or_default()
}

fn describe(o: &Outcome) -> Vec<String> {
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
            if let (Some(w), Some(l)) = (&q.waiting_for, q.line) {
                s += &format!("; {} at line {l} waits for {w}", q.queue);
            }
        }
        what.push(s);
    }
    what
}

/// Runs `opts.schedules` seeds from `opts.seed` (never past `u64::MAX`: a range that would
/// overflow stops at the last seed), calling `progress` after each.
pub fn check(
    sc: &Scenario,
    opts: &CheckOptions,
    mut progress: impl FnMut(Progress),
) -> CheckReport {
    let start = Instant::now();
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    for i in 0..opts.schedules {
        let Some(seed) = opts.seed.checked_add(i) else {
            break;
        };
        let o = run(
            sc,
            &RunOptions {
                driver: DriverKind::Deterministic,
                seed,
                strict: opts.strict,
                validate: false,
                trace: false,
            },
        );
        seen.insert(signature(&o));
        if o.status != Status::Passed {
            failures.push(Failure {
                seed,
                status: o.status,
                exit: o.exit_code(),
                what: describe(&o),
                outcome: o,
            });
        }
        let secs = start.elapsed().as_secs_f64();
        progress(Progress {
            done: i + 1,
            total: opts.schedules,
            failures: failures.len() as u64,
            per_second: if secs > 0.0 {
                (i + 1) as f64 / secs
            } else {
                0.0
            },
        });
    }
    CheckReport {
        version: 1,
        schedules: opts.schedules,
        outcomes: seen.len(),
        failures,
        elapsed_ns: start.elapsed().as_nanos() as u64,
    }
}
