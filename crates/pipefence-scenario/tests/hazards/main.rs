//! Hazard detection through the scenario runner (`docs/semantics.md` D5, `docs/memory-model.md` 5): each
//! hazard kind found in a small scenario, with both accesses and the missing synchronization
//! named, for a fixed seed and in every schedule of a `check --strict` run (a hazard does not
//! depend on the values a schedule produced); each fixed variant and every correct example clean
//! over 500 strict schedules; `--validate` on the threaded driver finding the same kinds; and the
//! `"hazards"` JSON fields.

use pipefence_scenario::check::{check_each, describe, CheckOptions};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::run::{
    run, DriverKind, HazardAccessReport, HazardReport, Outcome, RunOptions, Status,
};
use pipefence_scenario::{parse, render_diagnostics};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The schedules a clean scenario must pass (the figure).
const CLEAN_SCHEDULES: u64 = 500;
/// The schedules in which a buggy scenario must report its hazard, every one of them.
const BUGGY_SCHEDULES: u64 = 500;
/// Threaded runs per scenario under `--validate`.
const VALIDATE_RUNS: usize = 3;

/// The scenario files the tests read.
const MISSING_WRITEBACK: &str = "examples/missing-writeback.kdl";
const PFP_RACE: &str = "tests/scenarios/pfp-indirect-race.kdl";
const STALE: &str = "tests/scenarios/stale-cache.kdl";
const WW: &str = "tests/scenarios/write-write.kdl";
const TOP: &str = "tests/scenarios/top-of-pipe-flag.kdl";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Parses a scenario file of the workspace (`examples/...`, `tests/scenarios/...`).
#[track_caller]
fn load(rel: &str) -> Scenario {
    let path = root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    source(rel, &text)
}

/// Parses scenario text that must be valid.
#[track_caller]
fn source(name: &str, text: &str) -> Scenario {
    parse(name, text)
        .unwrap_or_else(|d| panic!("{name} is invalid:\n{}", render_diagnostics(name, text, &d)))
}

fn strict(sc: &Scenario, seed: u64) -> Outcome {
    run(
        sc,
        &RunOptions {
            driver: DriverKind::Deterministic,
            seed,
            strict: true,
            ..RunOptions::default()
        },
    )
}

fn validate(sc: &Scenario) -> Outcome {
    run(
        sc,
        &RunOptions {
            driver: DriverKind::Threaded,
            validate: true,
            ..RunOptions::default()
        },
    )
}

/// Every failing schedule of a strict check, one entry per seed (the library's report groups
/// failing schedules by outcome; these tests look at each one).
struct CheckReport {
    schedules: u64,
    failures: Vec<SeedFailure>,
}

struct SeedFailure {
    seed: u64,
    status: Status,
    exit: i32,
    what: Vec<String>,
    outcome: Outcome,
}

impl CheckReport {
    /// The lowest failing seed's exit status, 0 when every schedule passed.
    fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

fn check_strict(sc: &Scenario, schedules: u64) -> CheckReport {
    let mut failures = Vec::new();
    let report = check_each(
        sc,
        &CheckOptions {
            schedules,
            seed: 0,
            strict: true,
        },
        |_| {},
        |seed, o| {
            if o.status != Status::Passed {
                failures.push(SeedFailure {
                    seed,
                    status: o.status,
                    exit: o.exit_code(),
                    what: describe(o),
                    outcome: o.clone(),
                });
            }
        },
    );
    assert_eq!(report.failing, failures.len() as u64);
    assert_eq!(report.exit_code(), failures.first().map_or(0, |f| f.exit));
    CheckReport {
        schedules: report.schedules,
        failures,
    }
}

fn messages(o: &Outcome) -> Vec<&str> {
    o.hazards.iter().map(|h| h.message.as_str()).collect()
}

/// Every schedule of `report` failed, each with at least one hazard, and `each` holds for every
/// schedule's outcome.
#[track_caller]
fn assert_every_schedule_fails(name: &str, report: &CheckReport, each: impl Fn(u64, &Outcome)) {
    assert_eq!(
        report.failures.len() as u64,
        report.schedules,
        "{name}: every schedule must report the hazard; these passed: {:?}",
        passing_seeds(report)
    );
    for f in &report.failures {
        assert_eq!(f.status, Status::Failed, "{name} seed {}", f.seed);
        assert_eq!(f.exit, 1, "{name} seed {}", f.seed);
        assert!(
            !f.outcome.hazards.is_empty(),
            "{name} seed {}: failed without a hazard: {:?}",
            f.seed,
            f.what
        );
        each(f.seed, &f.outcome);
    }
}

fn passing_seeds(report: &CheckReport) -> Vec<u64> {
    let failed: BTreeSet<u64> = report.failures.iter().map(|f| f.seed).collect();
    (0..report.schedules)
        .filter(|s| !failed.contains(s))
        .collect()
}

/// Every schedule passed (a hazard under `--strict` fails a schedule, docs/scenario-language.md).
#[track_caller]
fn assert_clean(name: &str, report: &CheckReport) {
    let bad: Vec<String> = report
        .failures
        .iter()
        .take(5)
        .map(|f| format!("seed {}: {:?} {:?}", f.seed, f.what, messages(&f.outcome)))
        .collect();
    assert!(
        report.failures.is_empty(),
        "{name}: {} of {} strict schedules failed, e.g.\n{}",
        report.failures.len(),
        report.schedules,
        bad.join("\n")
    );
    assert_eq!(report.exit_code(), 0);
}

#[track_caller]
fn assert_clean_over_strict_schedules(rel: &str, schedules: u64) {
    assert_clean(rel, &check_strict(&load(rel), schedules));
}

/// `--validate` on the threaded driver finds hazards of exactly `kinds` in each of a few runs.
#[track_caller]
fn assert_validate_finds(rel: &str, kinds: &[&str]) {
    let sc = load(rel);
    let want: BTreeSet<&str> = kinds.iter().copied().collect();
    for i in 0..VALIDATE_RUNS {
        let o = validate(&sc);
        let got: BTreeSet<&str> = o.hazards.iter().map(|h| h.kind.as_str()).collect();
        assert_eq!(got, want, "{rel} run {i}: {:?}", messages(&o));
        assert_eq!(o.status, Status::Failed, "{rel} run {i}");
        assert_eq!(o.exit_code(), 1, "{rel} run {i}");
    }
}

/// `--validate` on the threaded driver finds nothing and the run passes, in each of a few runs.
#[track_caller]
fn assert_validate_clean(rel: &str) {
    let sc = load(rel);
    for i in 0..VALIDATE_RUNS {
        let o = validate(&sc);
        assert!(o.hazards.is_empty(), "{rel} run {i}: {:?}", messages(&o));
        assert_eq!(
            o.status,
            Status::Passed,
            "{rel} run {i}: {:?}",
            o.expectations
        );
    }
}

/// What an access of a report must say.
struct Acc<'a> {
    queue: Option<&'a str>,
    agent: &'a str,
    list: Option<&'a str>,
    command: Option<u32>,
    op: &'a str,
    kernel: Option<&'a str>,
    access: &'a str,
    line: usize,
}

/// A command of a list on a queue.
#[allow(clippy::too_many_arguments)]
fn cmd<'a>(
    queue: &'a str,
    agent: &'a str,
    list: &'a str,
    command: u32,
    op: &'a str,
    kernel: Option<&'a str>,
    access: &'a str,
    line: usize,
) -> Acc<'a> {
    Acc {
        queue: Some(queue),
        agent,
        list: Some(list),
        command: Some(command),
        op,
        kernel,
        access,
        line,
    }
}

/// An action of the host thread `main`.
fn host_main<'a>(op: &'a str, access: &'a str, line: usize) -> Acc<'a> {
    Acc {
        queue: None,
        agent: "host",
        list: None,
        command: None,
        op,
        kernel: None,
        access,
        line,
    }
}

fn matches(a: &HazardAccessReport, w: &Acc<'_>) -> bool {
    let host_ok = if w.agent == "host" {
        a.host.as_deref() == Some("main")
    } else {
        a.host.is_none()
    };
    a.queue.as_deref() == w.queue
        && a.agent == w.agent
        && host_ok
        && a.list.as_deref() == w.list
        && a.command == w.command
        && a.op == w.op
        && a.kernel.as_deref() == w.kernel
        && a.access == w.access
        && a.line == Some(w.line)
        && a.text.contains(&format!("line {}", w.line))
}

#[track_caller]
fn assert_access(what: &str, a: &HazardAccessReport, w: &Acc<'_>) {
    assert!(matches(a, w), "{what} is not the expected access: {a:#?}");
}

/// `h` is a report of `kind` between `x` and `y`, in either order (which access came first can
/// depend on the schedule).
fn is_pair(h: &HazardReport, kind: &str, x: &Acc<'_>, y: &Acc<'_>) -> bool {
    h.kind == kind
        && ((matches(&h.first, x) && matches(&h.second, y))
            || (matches(&h.first, y) && matches(&h.second, x)))
}

#[track_caller]
fn assert_contains(what: &str, text: &str, words: &[&str]) {
    for w in words {
        assert!(text.contains(w), "{what} lacks `{w}`: {text}");
    }
}

/// The report's message is built from its parts.
#[track_caller]
fn assert_message_consistent(h: &HazardReport) {
    assert!(
        h.message
            .starts_with(&format!("hazard {}: {}", h.kind, h.range)),
        "{}",
        h.message
    );
    for part in [&h.first.text, &h.second.text, &h.missing, &h.fix] {
        assert!(
            h.message.contains(part.as_str()),
            "{part} not in {}",
            h.message
        );
    }
    assert!(h.address.starts_with("0x"), "{}", h.address);
    assert!(h.bytes >= 4 && h.bytes.is_multiple_of(4), "{}", h.bytes);
}

mod clean;
mod reads;
mod writes;
