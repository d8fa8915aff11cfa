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

/// The schedules a clean scenario must pass (the issue's figure).
const CLEAN_SCHEDULES: u64 = 500;
/// The schedules in which a buggy scenario must report its hazard, every one of them.
const BUGGY_SCHEDULES: u64 = 500;
/// Threaded runs per scenario under `--validate`.
const VALIDATE_RUNS: usize = 3;

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

/// Every schedule passed (a hazard under `--strict` fails a schedule, SCENARIO.md).
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

// ------------------------------------------------------------------------------------------------
// unreleased-read: the bottom-of-pipe flag without l2-writeback (seed 003's warning)

const MISSING_WRITEBACK: &str = "examples/missing-writeback.kdl";

fn assert_missing_writeback_report(seed: u64, o: &Outcome) {
    assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
    let h = &o.hazards[0];
    assert_eq!(h.kind, "unreleased-read", "seed {seed}");
    assert_eq!(h.range, "data..+0x1000", "seed {seed}");
    assert_eq!(h.bytes, 4096, "seed {seed}");
    let fill = cmd(
        "producer",
        "task",
        "produce",
        0,
        "dispatch",
        Some("fill"),
        "write",
        18,
    );
    let sum = cmd(
        "consumer",
        "task",
        "consume",
        1,
        "dispatch",
        Some("sum"),
        "read",
        23,
    );
    let flag = cmd(
        "producer",
        "me",
        "produce",
        1,
        "write-value32-bop",
        None,
        "release",
        19,
    );
    assert_access("first", &h.first, &fill);
    assert_access("second", &h.second, &sum);
    assert_access("via", h.via.as_ref().expect("via names the flag"), &flag);
    assert_contains(
        "missing",
        &h.missing,
        &[
            "bottom-of-pipe write",
            "producer/produce:1",
            "line 19",
            "no l2-writeback",
        ],
    );
    assert!(!h.missing.contains("volatile"), "{}", h.missing);
    assert_contains(
        "fix",
        &h.fix,
        &["flush=l2-writeback", "producer/produce:1", "line 19"],
    );
    assert_message_consistent(h);
}

#[test]
fn d5_unreleased_read_missing_writeback_names_the_flag() {
    let sc = load(MISSING_WRITEBACK);
    for seed in [0, 7] {
        let o = strict(&sc, seed);
        assert_eq!(o.status, Status::Failed, "seed {seed}");
        assert_eq!(o.exit_code(), 1);
        assert_missing_writeback_report(seed, &o);
    }
    // The same report in every schedule, whatever `total` came out as.
    let report = check_strict(&sc, BUGGY_SCHEDULES);
    assert_every_schedule_fails(MISSING_WRITEBACK, &report, assert_missing_writeback_report);
    // Some schedules sum the right value and still fail (the hazard does not depend on it),
    // others sum stale data.
    let right = report
        .failures
        .iter()
        .filter(|f| {
            f.outcome
                .expectations
                .iter()
                .all(|e| e.passed == Some(true))
        })
        .count();
    assert!(right > 0, "no schedule summed 3072");
    assert!(
        right < report.failures.len(),
        "no schedule summed stale data"
    );
}

#[test]
fn d5_missing_writeback_example_fails_under_validate() {
    let sc = load(MISSING_WRITEBACK);
    for i in 0..VALIDATE_RUNS {
        let o = validate(&sc);
        // The threaded driver makes every write visible at once: the expectation holds, the
        // hazard alone fails the run.
        assert!(
            o.expectations.iter().all(|e| e.passed == Some(true)),
            "run {i}: {:?}",
            o.expectations
        );
        assert_eq!(o.status, Status::Failed, "run {i}");
        assert_missing_writeback_report(i as u64, &o);
    }
    // Without --strict or --validate nothing is tracked and the example passes.
    let plain = run(&sc, &RunOptions::default());
    assert!(plain.hazards.is_empty());
    assert_eq!(plain.status, Status::Passed);
}

#[test]
fn d5_missing_writeback_fixed_clean_over_500_strict_schedules() {
    assert_clean_over_strict_schedules("tests/scenarios/missing-writeback-fixed.kdl", 500);
}

// ------------------------------------------------------------------------------------------------
// pfp-read-before-wait (C7)

const PFP_RACE: &str = "tests/scenarios/pfp-indirect-race.kdl";

fn assert_pfp_report(seed: u64, o: &Outcome) {
    assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
    let h = &o.hazards[0];
    assert_eq!(h.kind, "pfp-read-before-wait", "seed {seed}");
    assert_eq!(h.range, "args", "seed {seed}");
    assert_eq!(h.bytes, 4);
    let top = cmd(
        "producer",
        "me",
        "produce",
        0,
        "write-value32-top",
        None,
        "value write",
        14,
    );
    let pfp = cmd(
        "consumer",
        "pfp",
        "consume",
        1,
        "dispatch-indirect",
        None,
        "read",
        19,
    );
    let wait = cmd(
        "consumer",
        "me",
        "consume",
        0,
        "wait-value32",
        None,
        "wait",
        18,
    );
    assert_access("first", &h.first, &top);
    assert_access("second", &h.second, &pfp);
    assert!(h.second.text.starts_with("the PFP of consumer/consume:1"));
    assert_access("via", h.via.as_ref().expect("via names the wait"), &wait);
    assert_contains(
        "missing",
        &h.missing,
        &["PFP", "ME wait", "consumer/consume:0", "line 18"],
    );
    assert_contains(
        "fix",
        &h.fix,
        &[
            "consumer/consume:0",
            "line 18",
            "cmp=greater-equal",
            "engine=pfp",
        ],
    );
    assert_message_consistent(h);
}

#[test]
fn d5_pfp_read_before_wait_names_the_wait() {
    let sc = load(PFP_RACE);
    for seed in [0, 3] {
        let o = strict(&sc, seed);
        assert_eq!(o.status, Status::Failed);
        assert_pfp_report(seed, &o);
    }
    let report = check_strict(&sc, BUGGY_SCHEDULES);
    assert_every_schedule_fails(PFP_RACE, &report, assert_pfp_report);
}

#[test]
fn d5_pfp_indirect_fixed_clean_over_500_strict_schedules() {
    assert_clean_over_strict_schedules("tests/scenarios/pfp-indirect-fixed.kdl", 500);
}

/// Arguments written by an earlier dispatch of the same queue, read by the PFP without a
/// flush-pipeline between them (C8): an unreleased-read between the PFP and the dispatch.
const OWN_ARGS: &str = r#"
device
buffer args size=256
buffer out size=1024 heap=readback
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=args groups=1 value=4
    dispatch-indirect fill args=args dst=out value=9
}
execute gfx l
wait-idle
expect out count=256 equals=9
"#;

fn own_args_accesses() -> (Acc<'static>, Acc<'static>) {
    (
        cmd("gfx", "task", "l", 0, "dispatch", Some("fill"), "write", 7),
        cmd("gfx", "pfp", "l", 1, "dispatch-indirect", None, "read", 8),
    )
}

/// The fix is a flush-pipeline before the dispatch-indirect (C8; 5.3), and with it the list is
/// clean.
#[test]
fn d5_pfp_reads_own_queue_arguments_without_flush() {
    let sc = source("own-args.kdl", OWN_ARGS);
    let (fill, pfp) = own_args_accesses();
    let each = |seed: u64, o: &Outcome| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "unreleased-read", "seed {seed}");
        assert_eq!(h.range, "args");
        // (write, read), whichever came first: the PFP ran ahead and read first.
        assert_access("first", &h.first, &fill);
        assert_access("second", &h.second, &pfp);
        assert_eq!(h.missing, "no flush-pipeline between them on the queue");
        // 5.3: "for arguments written by the same queue, a flush-pipeline before the
        // dispatch-indirect".
        assert!(
            h.fix
                .starts_with("flush-pipeline before the dispatch-indirect"),
            "seed {seed}: {}",
            h.fix
        );
        assert_contains("fix", &h.fix, &["gfx/l:1", "line 8"]);
        assert_message_consistent(h);
    };
    assert_every_schedule_fails("own-args", &check_strict(&sc, 200), each);
    for i in 0..VALIDATE_RUNS {
        each(i as u64, &validate(&sc));
    }
    // With the flush-pipeline (the D3D12 "UAV barrier, then ExecuteIndirect" pattern): clean.
    let fixed = OWN_ARGS.replace(
        "    dispatch-indirect",
        "    flush-pipeline\n    dispatch-indirect",
    );
    assert_clean(
        "own-args-fixed",
        &check_strict(&source("f.kdl", &fixed), 200),
    );
}

// ------------------------------------------------------------------------------------------------
// stale-cache

const STALE: &str = "tests/scenarios/stale-cache.kdl";

fn assert_stale_report(seed: u64, o: &Outcome) {
    assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
    let h = &o.hazards[0];
    assert_eq!(h.kind, "stale-cache", "seed {seed}");
    assert_eq!(h.range, "data..+0x100", "seed {seed}");
    let fill = cmd(
        "prod",
        "task",
        "produce",
        1,
        "dispatch",
        Some("fill"),
        "write",
        31,
    );
    let sum = cmd(
        "cons",
        "task",
        "consume",
        3,
        "dispatch",
        Some("sum"),
        "read",
        27,
    );
    assert_access("first", &h.first, &fill);
    assert_access("second", &h.second, &sum);
    assert!(h.via.is_none());
    assert_contains(
        "missing",
        &h.missing,
        &[
            "read this word before",
            "has not invalidated",
            "this schedule returned",
        ],
    );
    assert_contains(
        "fix",
        &h.fix,
        &[
            "flush-pipeline flush=l1-invalidate",
            "cons/consume:3",
            "line 27",
            "wait on a fence",
        ],
    );
    assert_message_consistent(h);
}

#[test]
fn d5_stale_cache_found_and_invalidate_fixes_it() {
    let sc = load(STALE);
    for seed in [0, 1] {
        assert_stale_report(seed, &strict(&sc, seed));
    }
    let report = check_strict(&sc, BUGGY_SCHEDULES);
    assert_every_schedule_fails(STALE, &report, assert_stale_report);
    // The report says what the schedule returned: some schedules read the old 1s (and the
    // second sum is wrong); others reloaded the lines, sum right, and still fail with the
    // hazard (it does not depend on the values).
    let stale = |o: &Outcome| {
        let m = &o.hazards[0].missing;
        m.contains("returned old value 1") && m.contains("current 5")
    };
    let all_ok = |o: &Outcome| o.expectations.iter().all(|e| e.passed == Some(true));
    let n_stale = report.failures.iter().filter(|f| stale(&f.outcome)).count();
    assert!(n_stale > 0, "no schedule returned the stale value");
    for f in &report.failures {
        if stale(&f.outcome) {
            assert!(
                !all_ok(&f.outcome),
                "seed {}: stale read but right sum",
                f.seed
            );
        }
    }
    assert!(
        report.failures.iter().any(|f| all_ok(&f.outcome)),
        "no schedule summed right (the hazard must be reported there too)"
    );
    assert_clean_over_strict_schedules("tests/scenarios/stale-cache-fixed.kdl", 500);
}

/// The newer value comes from the host, released to the engine by its ME wait on a flag the
/// host writes after the data.
#[test]
fn d5_stale_cache_after_a_host_write() {
    let text = r#"
device
buffer data size=256 heap=upload init=1
buffer flags size=64 heap=shared
buffer totals size=64 heap=readback
queue cons kind=compute
list l kind=compute {
    dispatch sum dst=totals src=data groups=1
    write-value32-bop flags value=1 flush=l2-writeback
    wait-value32 "flags+4" cmp=equal reference=1
    dispatch sum dst="totals+8" src=data groups=1
}
execute cons l
cpu-poll flags cmp=equal reference=1
cpu-write data value=7
cpu-write "flags+4" value=1
wait-idle
expect "totals+8" width=64 equals=70
"#;
    let sc = source("host-stale.kdl", text);
    let write = host_main("cpu-write", "value write", 15);
    let sum = cmd("cons", "task", "l", 3, "dispatch", Some("sum"), "read", 11);
    let each = |seed: u64, o: &Outcome| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "stale-cache");
        assert_eq!(h.range, "data");
        assert_access("first", &h.first, &write);
        assert_access("second", &h.second, &sum);
        assert_contains("fix", &h.fix, &["flush-pipeline flush=l1-invalidate"]);
    };
    assert_every_schedule_fails("host-stale", &check_strict(&sc, 200), each);
    let fixed = text.replace(
        "reference=1\n    dispatch sum dst=\"totals+8\"",
        "reference=1\n    flush-pipeline flush=l1-invalidate\n    dispatch sum dst=\"totals+8\"",
    );
    assert_ne!(fixed, text);
    assert_clean(
        "host-stale-fixed",
        &check_strict(&source("f.kdl", &fixed), 200),
    );
}

// ------------------------------------------------------------------------------------------------
// write-write

const WW: &str = "tests/scenarios/write-write.kdl";

fn ww_accesses() -> (Acc<'static>, Acc<'static>) {
    (
        cmd(
            "gfx",
            "task",
            "frame",
            0,
            "dispatch",
            Some("fill"),
            "write",
            15,
        ),
        cmd(
            "gfx",
            "task",
            "frame",
            1,
            "dispatch",
            Some("fill"),
            "write",
            16,
        ),
    )
}

#[test]
fn d5_write_write_same_queue_without_flush() {
    let sc = load(WW);
    let (a, b) = ww_accesses();
    let each = |seed: u64, o: &Outcome| {
        for h in &o.hazards {
            assert!(is_pair(h, "write-write", &a, &b), "seed {seed}: {h:#?}");
            assert!(h.via.is_none());
            assert_eq!(h.missing, "no flush-pipeline between them on the queue");
            assert_contains("fix", &h.fix, &["flush-pipeline between", "gfx/frame:"]);
            assert_message_consistent(h);
        }
    };
    let o = strict(&sc, 0);
    assert!(!o.hazards.is_empty());
    each(0, &o);
    let report = check_strict(&sc, BUGGY_SCHEDULES);
    assert_every_schedule_fails(WW, &report, each);
    // Some schedules leave 1s behind.
    assert!(report.failures.iter().any(|f| f
        .outcome
        .expectations
        .iter()
        .any(|e| e.passed == Some(false))));
}

/// One report per unordered pair of commands, in program order, with the whole range.
#[test]
fn d5_write_write_pair_reported_once_in_program_order() {
    let sc = load(WW);
    let (a, b) = ww_accesses();
    let report = check_strict(&sc, BUGGY_SCHEDULES);
    assert_every_schedule_fails(WW, &report, |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_access("first", &h.first, &a);
        assert_access("second", &h.second, &b);
        assert_eq!(h.range, "out..+0x400", "seed {seed}");
        assert_eq!(
            h.fix,
            "flush-pipeline between gfx/frame:0 (dispatch fill, line 15) and \
             gfx/frame:1 (dispatch fill, line 16)"
        );
    });
}

#[test]
fn d5_write_write_fixed_clean_over_500_strict_schedules() {
    assert_clean_over_strict_schedules("tests/scenarios/write-write-fixed.kdl", 500);
}

#[test]
fn d5_write_write_across_queues_fixed_by_a_fence() {
    const REL: &str = "tests/scenarios/write-write-queues.kdl";
    let sc = load(REL);
    let clear = cmd(
        "gfx",
        "task",
        "clear",
        0,
        "dispatch",
        Some("fill"),
        "write",
        16,
    );
    let shade = cmd(
        "async",
        "task",
        "shade",
        0,
        "dispatch",
        Some("fill"),
        "write",
        19,
    );
    let each = |seed: u64, o: &Outcome| {
        for h in &o.hazards {
            assert!(
                is_pair(h, "write-write", &clear, &shade),
                "seed {seed}: {h:#?}"
            );
            assert_eq!(h.missing, "nothing orders them");
            assert_contains(
                "fix",
                &h.fix,
                &["signal a fence after", "wait for it before", "l2-writeback"],
            );
            assert_message_consistent(h);
        }
    };
    assert_every_schedule_fails(REL, &check_strict(&sc, BUGGY_SCHEDULES), each);
    assert_clean_over_strict_schedules("tests/scenarios/write-write-queues-fixed.kdl", 500);
}

/// Two unordered value writes to the same bytes are the one synchronization pair that is a
/// hazard (5.1): two queues' top-of-pipe writes, and two host threads' cpu-writes.
#[test]
fn d5_two_unordered_value_writes_are_write_write() {
    let queues = source(
        "vv.kdl",
        r#"
device
buffer w size=64 heap=shared
queue a kind=direct
queue b kind=compute
list la kind=direct {
    write-value32-top w value=1
}
list lb kind=compute {
    write-value32-top w value=2
}
execute a la
execute b lb
wait-idle
"#,
    );
    let x = cmd(
        "a",
        "me",
        "la",
        0,
        "write-value32-top",
        None,
        "value write",
        7,
    );
    let y = cmd(
        "b",
        "me",
        "lb",
        0,
        "write-value32-top",
        None,
        "value write",
        10,
    );
    assert_every_schedule_fails("vv", &check_strict(&queues, 100), |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        assert!(is_pair(&o.hazards[0], "write-write", &x, &y));
        assert_eq!(o.hazards[0].missing, "nothing orders them");
    });
    let hosts = source(
        "hh.kdl",
        r#"
device
buffer w size=64 heap=shared
host a {
    cpu-write w value=1
}
host b {
    cpu-write w value=2
}
"#,
    );
    assert_every_schedule_fails("hh", &check_strict(&hosts, 100), |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "write-write");
        let who: BTreeSet<_> = [&h.first, &h.second]
            .iter()
            .map(|a| (a.agent.clone(), a.host.clone(), a.op.clone(), a.line))
            .collect();
        let want: BTreeSet<_> = [("a", 5), ("b", 8)]
            .iter()
            .map(|(n, l)| {
                (
                    "host".to_string(),
                    Some(n.to_string()),
                    "cpu-write".to_string(),
                    Some(*l),
                )
            })
            .collect();
        assert_eq!(who, want, "seed {seed}");
    });
}

/// Two host threads: the fix orders the host threads (no queue is involved).
#[test]
fn d5_host_threads_write_write_fix_orders_the_host_threads() {
    let sc = source(
        "hh.kdl",
        r#"
device
buffer w size=64 heap=shared
host a {
    cpu-write w value=1
}
host b {
    cpu-write w value=2
}
"#,
    );
    for seed in 0..10 {
        let o = strict(&sc, seed);
        assert_eq!(o.hazards.len(), 1, "seed {seed}");
        let fix = &o.hazards[0].fix;
        assert!(!fix.contains("the queue signals"), "seed {seed}: {fix}");
        assert!(fix.contains("cpu-signal"), "seed {seed}: {fix}");
    }
}

// ------------------------------------------------------------------------------------------------
// unreleased-read: a top-of-pipe flag (C4)

const TOP: &str = "tests/scenarios/top-of-pipe-flag.kdl";

fn top_accesses() -> (Acc<'static>, Acc<'static>, Acc<'static>) {
    (
        cmd(
            "producer",
            "task",
            "produce",
            0,
            "dispatch",
            Some("fill"),
            "write",
            19,
        ),
        cmd(
            "consumer",
            "task",
            "consume",
            1,
            "dispatch",
            Some("sum"),
            "read",
            24,
        ),
        cmd(
            "producer",
            "me",
            "produce",
            1,
            "write-value32-top",
            None,
            "release",
            20,
        ),
    )
}

/// The report that names the top-of-pipe write (the data written before the sum read it).
fn names_top_write(h: &HazardReport) -> bool {
    let (fill, sum, top) = top_accesses();
    h.kind == "unreleased-read"
        && matches(&h.first, &fill)
        && matches(&h.second, &sum)
        && h.via.as_ref().is_some_and(|v| matches(v, &top))
        && h.missing
            .contains("top-of-pipe write at producer/produce:1")
        && h.missing.contains("line 20")
        && h.missing.contains("does not wait for the dispatch")
        && h.fix
            .contains("bottom-of-pipe write with flush=l2-writeback")
        && h.fix.contains("producer/produce:1")
}

#[test]
fn d5_unreleased_read_top_of_pipe_flag_names_the_top_write() {
    let sc = load(TOP);
    let (fill, sum, _) = top_accesses();
    let each = |seed: u64, o: &Outcome| {
        for h in &o.hazards {
            assert!(
                is_pair(h, "unreleased-read", &fill, &sum),
                "seed {seed}: {h:#?}"
            );
            assert_message_consistent(h);
        }
        assert!(
            o.hazards.iter().any(names_top_write),
            "seed {seed}: no report names the top-of-pipe write: {:?}",
            messages(o)
        );
    };
    let o = strict(&sc, 4);
    assert_eq!(o.hazards.len(), 1, "{:?}", messages(&o));
    each(4, &o);
    assert_every_schedule_fails(TOP, &check_strict(&sc, BUGGY_SCHEDULES), each);
    assert_clean_over_strict_schedules("tests/scenarios/top-of-pipe-flag-fixed.kdl", 500);
}

/// Whichever landed first (a fill group after the sum read its words, or before), the report is
/// (write, read) and names the top-of-pipe write the reader acquired (5.4).
#[test]
fn d5_top_of_pipe_flag_every_report_names_the_top_write() {
    let sc = load(TOP);
    assert_every_schedule_fails(TOP, &check_strict(&sc, BUGGY_SCHEDULES), |seed, o| {
        for h in &o.hazards {
            assert!(
                h.missing
                    .contains("top-of-pipe write at producer/produce:1"),
                "seed {seed}: {}",
                h.message
            );
        }
    });
}

/// A top-of-pipe write after a completed `flush-pipeline flush=l2-writeback` releases what the
/// flush made releasable (D5), so the same flag is then correct.
#[test]
fn d5_top_of_pipe_after_flush_with_writeback_is_clean() {
    let text = std::fs::read_to_string(root().join(TOP)).unwrap();
    let fixed = text.replace(
        "    write-value32-top flag value=1",
        "    flush-pipeline flush=l2-writeback\n    write-value32-top flag value=1",
    );
    assert_ne!(fixed, text);
    assert_clean(
        "top-after-flush",
        &check_strict(&source("f.kdl", &fixed), 200),
    );
}

/// Volatile flags do not write back (memory-model.md 3): the report says so.
#[test]
fn d5_volatile_flags_do_not_count_as_a_writeback() {
    let text = std::fs::read_to_string(root().join(MISSING_WRITEBACK)).unwrap();
    let volatile = text.replace(
        "write-value32-bop flag value=1\n",
        "write-value32-bop flag value=1 flush=\"l1-volatile l2-volatile\"\n",
    );
    assert_ne!(volatile, text);
    let sc = source("volatile.kdl", &volatile);
    assert_every_schedule_fails("volatile", &check_strict(&sc, 100), |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}");
        let h = &o.hazards[0];
        assert_eq!(h.kind, "unreleased-read");
        assert_contains(
            "missing",
            &h.missing,
            &["no l2-writeback", "volatile flags do not count"],
        );
        assert_contains("fix", &h.fix, &["flush=l2-writeback"]);
    });
    // With l2-writeback next to the volatile flag: clean.
    let both = text.replace(
        "write-value32-bop flag value=1\n",
        "write-value32-bop flag value=1 flush=\"l2-writeback l2-volatile\"\n",
    );
    assert_clean(
        "volatile+writeback",
        &check_strict(&source("f.kdl", &both), 100),
    );
}

/// `write-immediate mode=marker-out` is a bottom-of-pipe write without a write-back (C5): the
/// report names it.
const MARKER_OUT: &str = r#"
device
buffer data size=1024
buffer flag size=64 heap=shared
buffer total size=64 heap=readback
queue p kind=direct
queue c kind=compute
list prod kind=direct {
    dispatch fill dst=data groups=4 value=2
    write-immediate flag value=1 mode=marker-out
}
list cons kind=compute {
    wait-value32 flag cmp=equal reference=1
    dispatch sum dst=total src=data groups=4
}
execute c cons
execute p prod
wait-idle
expect total width=64 equals=512
"#;

#[test]
fn d5_marker_out_flag_is_a_bottom_of_pipe_write_without_writeback() {
    let sc = source("marker-out.kdl", MARKER_OUT);
    let fill = cmd("p", "task", "prod", 0, "dispatch", Some("fill"), "write", 9);
    let sum = cmd("c", "task", "cons", 1, "dispatch", Some("sum"), "read", 14);
    let flag = cmd("p", "me", "prod", 1, "write-immediate", None, "release", 10);
    assert_every_schedule_fails("marker-out", &check_strict(&sc, 100), |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "unreleased-read");
        assert_access("first", &h.first, &fill);
        assert_access("second", &h.second, &sum);
        assert_access("via", h.via.as_ref().unwrap(), &flag);
        assert_contains("missing", &h.missing, &["no l2-writeback", "line 10"]);
    });
}

/// `write-immediate` has no flush property: the fix replaces it by a bottom-of-pipe write.
#[test]
fn d5_marker_out_fix_replaces_the_write_immediate() {
    let sc = source("marker-out.kdl", MARKER_OUT);
    let o = strict(&sc, 0);
    assert_eq!(o.hazards.len(), 1);
    let fix = &o.hazards[0].fix;
    assert!(!fix.starts_with("add flush=l2-writeback"), "{fix}");
    assert_contains("fix", fix, &["write-value32-bop", "flush=l2-writeback"]);
}

/// A DEFAULT immediate write waits for earlier copies (C5, C9) but does not write them back.
#[test]
fn d5_immediate_write_after_a_copy_is_not_said_to_skip_the_copy() {
    let sc = source(
        "immediate-after-copy.kdl",
        r#"
device
buffer staging size=256 heap=upload init=5
buffer slots size=256
buffer flag size=64 heap=shared
buffer total size=64 heap=readback
queue dma kind=copy
queue gfx kind=direct
list up kind=copy {
    copy dst=slots src=staging bytes=256
    write-immediate flag value=1
}
list draw kind=direct {
    wait-value32 flag cmp=equal reference=1
    dispatch sum dst=total src=slots groups=1
}
execute gfx draw
execute dma up
wait-idle
expect total width=64 equals=320
"#,
    );
    let o = strict(&sc, 0);
    assert_eq!(o.hazards.len(), 1, "{:?}", messages(&o));
    let h = &o.hazards[0];
    assert_eq!(h.kind, "unreleased-read");
    assert!(
        !h.missing.contains("does not wait for the copy"),
        "{}",
        h.missing
    );
    assert_contains("fix", &h.fix, &["flush=l2-writeback"]);
}

/// A write-after-read across queues: the consumer says "done reading" with a bottom-of-pipe
/// write without l2-writeback, the producer waits for it and overwrites the data. The flag waits
/// for the sum, so it orders the sum's reads (it only fails to write data back): clean
/// (`docs/memory-model.md` 7, separate read and write task components).
#[test]
fn d5_write_after_read_through_a_flag_without_writeback_is_clean() {
    let sc = source(
        "war.kdl",
        r#"
device
buffer data size=256 init=1
buffer flag size=64 heap=shared
buffer total size=64 heap=readback
queue p kind=direct
queue c kind=compute
list lc kind=compute {
    dispatch sum dst=total src=data groups=1
    write-value32-bop flag value=1
}
list lp kind=direct {
    wait-value32 flag cmp=equal reference=1
    dispatch fill dst=data groups=1 value=5
}
execute c lc
execute p lp
wait-idle
expect total width=64 equals=64
"#,
    );
    assert_clean("war", &check_strict(&sc, 200));
    for i in 0..VALIDATE_RUNS {
        let o = validate(&sc);
        assert!(o.hazards.is_empty(), "run {i}: {:?}", messages(&o));
        assert_eq!(o.status, Status::Passed, "run {i}");
    }
}

/// A dispatch and a later top-of-pipe write of the same list touch the same word: the top-of-pipe
/// write does not wait for the dispatch (C4), so they are unordered (a write-write, or a read and
/// a write), whichever lands first.
const TASK_THEN_TOP: [(&str, &str); 2] = [
    (
        "write-write",
        r#"
device
buffer w size=256 heap=shared
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=w groups=1 value=3
    write-value32-top w value=7
}
execute gfx l
wait-idle
expect w equals=7
"#,
    ),
    (
        "unreleased-read",
        r#"
device
buffer w size=256 heap=shared
buffer total size=64 heap=readback
queue gfx kind=direct
list l kind=direct {
    dispatch sum dst=total src=w groups=1
    write-value32-top w value=7
}
execute gfx l
wait-idle
expect total width=64 equals=0
"#,
    ),
];

#[test]
fn d5_task_access_racing_a_later_top_of_pipe_write_on_its_queue() {
    for (kind, text) in TASK_THEN_TOP {
        let sc = source(kind, text);
        assert_every_schedule_fails(kind, &check_strict(&sc, 100), |seed, o| {
            assert_eq!(
                o.hazards.len(),
                1,
                "{kind} seed {seed}: {:?}",
                o.expectations
            );
            let h = &o.hazards[0];
            assert_eq!(h.kind, kind, "seed {seed}");
            assert_eq!(h.missing, "no flush-pipeline between them on the queue");
        });
    }
}

#[test]
fn d5_task_access_racing_a_later_top_of_pipe_write_under_validate() {
    for (kind, text) in TASK_THEN_TOP {
        let sc = source(kind, text);
        for i in 0..VALIDATE_RUNS {
            let o = validate(&sc);
            assert_eq!(o.hazards.len(), 1, "{kind} run {i}: {:?}", messages(&o));
            let h = &o.hazards[0];
            assert_eq!(h.kind, kind, "run {i}");
            assert_eq!(
                h.first.op,
                if kind == "write-write" {
                    "dispatch"
                } else {
                    "write-value32-top"
                }
            );
            assert_eq!(h.missing, "no flush-pipeline between them on the queue");
        }
    }
}

/// A copy engine caches what its copies read, too: a copy that reads a word the host rewrote
/// after the engine read it, with only an ME wait between them, is a stale-cache hazard.
const COPY_STALE: &str = r#"
device
buffer src size=256 heap=upload init=1
buffer mid size=256
buffer dst size=256
buffer flags size=64 heap=shared
queue dma kind=copy
list l kind=copy {
    copy dst=mid src=src bytes=256
    write-value32-bop flags value=1 flush=l2-writeback
    wait-value32 "flags+4" cmp=greater-equal reference=1
    copy dst=dst src=src bytes=256
}
execute dma l
cpu-poll flags cmp=equal reference=1
cpu-write src value=9
cpu-write "flags+4" value=1
wait-idle
"#;

#[test]
fn d5_stale_cache_on_a_copy_queue() {
    let sc = source("copy-stale.kdl", COPY_STALE);
    let write = host_main("cpu-write", "value write", 16);
    let copy = cmd("dma", "task", "l", 3, "copy", None, "read", 12);
    assert_every_schedule_fails("copy-stale", &check_strict(&sc, 100), |seed, o| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "stale-cache");
        assert_eq!(h.range, "src");
        assert_access("first", &h.first, &write);
        assert_access("second", &h.second, &copy);
    });
    // A bottom-of-pipe write with l1-invalidate, waited for, drops the copy engine's cache.
    let fixed = COPY_STALE.replace(
        "    copy dst=dst src=src",
        "    write-value32-bop \"flags+8\" value=1 flush=l1-invalidate\n    \
         wait-value32 \"flags+8\" cmp=greater-equal reference=1\n    copy dst=dst src=src",
    );
    assert_ne!(fixed, COPY_STALE);
    assert_clean(
        "copy-stale-fixed",
        &check_strict(&source("f.kdl", &fixed), 100),
    );
}

#[test]
fn d5_stale_cache_fix_on_a_copy_queue_is_valid_in_a_copy_list() {
    let sc = source("copy-stale.kdl", COPY_STALE);
    let o = strict(&sc, 0);
    assert_eq!(o.hazards.len(), 1, "{:?}", messages(&o));
    let fix = &o.hazards[0].fix;
    assert!(!fix.contains("flush-pipeline"), "{fix}");
}

// ------------------------------------------------------------------------------------------------
// Host-side hazards

#[test]
fn d5_host_poll_of_unreleased_result_is_reported() {
    const REL: &str = "tests/scenarios/host-poll-result.kdl";
    let sc = load(REL);
    let fill = cmd(
        "gfx",
        "task",
        "compute",
        0,
        "dispatch",
        Some("fill"),
        "write",
        16,
    );
    let poll = host_main("cpu-poll", "wait", 20);
    let each = |seed: u64, o: &Outcome| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "unreleased-read");
        assert_eq!(h.range, "result+0xfc");
        assert_access("first", &h.first, &fill);
        assert_access("second", &h.second, &poll);
        assert!(h.second.text.starts_with("host main (cpu-poll, line 20)"));
        assert_eq!(h.missing, "nothing orders them");
        assert_contains("fix", &h.fix, &["cpu-wait", "gfx/compute:0"]);
        assert_message_consistent(h);
    };
    each(0, &strict(&sc, 0));
    assert_every_schedule_fails(REL, &check_strict(&sc, BUGGY_SCHEDULES), each);
    assert_clean_over_strict_schedules("tests/scenarios/host-poll-result-fixed.kdl", 500);
}

#[test]
fn d5_host_write_racing_a_dispatch_read() {
    const REL: &str = "tests/scenarios/host-write-race.kdl";
    let sc = load(REL);
    let write = host_main("cpu-write", "value write", 20);
    let sum = cmd(
        "gfx",
        "task",
        "consume",
        0,
        "dispatch",
        Some("sum"),
        "read",
        16,
    );
    // Reported as (write, read) whichever landed first (5.3), so the fix always makes the
    // dispatch acquire the host's write.
    let each = |seed: u64, o: &Outcome| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "unreleased-read");
        assert_eq!(h.range, "input+0x4");
        assert_access("first", &h.first, &write);
        assert_access("second", &h.second, &sum);
        assert_eq!(h.missing, "nothing orders them");
        assert_contains(
            "fix",
            &h.fix,
            &["gfx/consume:0", "acquire the host's write", "execute"],
        );
        assert_message_consistent(h);
    };
    assert_every_schedule_fails(REL, &check_strict(&sc, BUGGY_SCHEDULES), each);
    assert_clean_over_strict_schedules("tests/scenarios/host-write-race-fixed.kdl", 500);
}

#[test]
fn d5_host_reuse_after_flag_without_writeback_names_the_flag() {
    const REL: &str = "tests/scenarios/host-reuse.kdl";
    let sc = load(REL);
    let fill = cmd(
        "gfx",
        "task",
        "produce",
        0,
        "dispatch",
        Some("fill"),
        "write",
        17,
    );
    let write = host_main("cpu-write", "value write", 23);
    let flag = cmd(
        "gfx",
        "me",
        "produce",
        1,
        "write-value32-bop",
        None,
        "release",
        18,
    );
    let each = |seed: u64, o: &Outcome| {
        assert_eq!(o.hazards.len(), 1, "seed {seed}: {:?}", messages(o));
        let h = &o.hazards[0];
        assert_eq!(h.kind, "write-write");
        assert_eq!(h.range, "data");
        assert_access("first", &h.first, &fill);
        assert_access("second", &h.second, &write);
        assert_access("via", h.via.as_ref().unwrap(), &flag);
        assert_contains("missing", &h.missing, &["gfx/produce:1", "no l2-writeback"]);
        assert_contains("fix", &h.fix, &["flush=l2-writeback", "gfx/produce:1"]);
        assert_message_consistent(h);
    };
    assert_every_schedule_fails(REL, &check_strict(&sc, BUGGY_SCHEDULES), each);
    assert_clean_over_strict_schedules("tests/scenarios/host-reuse-fixed.kdl", 500);
}

// ------------------------------------------------------------------------------------------------
// Correct programs are clean

/// Every example except the buggy one: no hazard in 500 strict schedules (`deadlock.kdl`
/// included: it expects its removal and reports no hazard).
#[test]
fn d5_correct_examples_clean_over_500_strict_schedules() {
    let mut examples: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kdl") && n != "missing-writeback.kdl")
        .map(|n| format!("examples/{n}"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 4, "{examples:?}");
    for ex in &examples {
        let report = check_strict(&load(ex), CLEAN_SCHEDULES);
        assert_clean(ex, &report);
        assert_eq!(report.schedules, CLEAN_SCHEDULES);
    }
}

/// Patterns the model must accept, each over 100 strict schedules and one `--validate` run: a
/// false positive here is a model bug.
#[test]
fn d5_correctly_synchronized_patterns_are_clean() {
    let cases: &[(&str, &str)] = &[
        (
            "flush-pipeline between a fill and a sum",
            r#"
buffer data size=1024
buffer total size=64 heap=readback
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=data groups=4 value=2
    flush-pipeline
    dispatch sum dst=total src=data groups=4
}
execute gfx l
wait-idle
expect total width=64 equals=512
"#,
        ),
        (
            "two execute calls on one queue (Q7)",
            r#"
buffer data size=1024
buffer total size=64 heap=readback
queue gfx kind=direct
list a kind=direct {
    dispatch fill dst=data groups=4 value=2
}
list b kind=direct {
    dispatch sum dst=total src=data groups=4
}
execute gfx a
execute gfx b
wait-idle
expect total width=64 equals=512
"#,
        ),
        (
            "the same list executed twice (Q7 orders its writes)",
            r#"
buffer out size=1024 heap=readback
queue gfx kind=direct
list a kind=direct {
    dispatch fill dst=out groups=4 value=1
}
list b kind=direct {
    dispatch fill dst=out groups=4 value=2
}
execute gfx a
execute gfx b
execute gfx a
execute gfx b
wait-idle
expect out count=256 equals=2
"#,
        ),
        (
            "a copy released by a bottom-of-pipe write with l2-writeback",
            r#"
buffer staging size=256 heap=upload init=5
buffer slots size=256
buffer flag size=64 heap=shared
buffer total size=64 heap=readback
queue dma kind=copy
queue gfx kind=direct
list up kind=copy {
    copy dst=slots src=staging bytes=256
    write-value32-bop flag value=1 flush=l2-writeback
}
list draw kind=direct {
    wait-value32 flag cmp=equal reference=1
    dispatch sum dst=total src=slots groups=1
}
execute gfx draw
execute dma up
wait-idle
expect total width=64 equals=320
"#,
        ),
        (
            "copies of one copy queue are ordered (C9)",
            r#"
buffer s1 size=256 heap=upload init=1
buffer s2 size=256 heap=upload init=2
buffer dst size=256 heap=readback
buffer dst2 size=256 heap=readback
queue dma kind=copy
list l kind=copy {
    copy dst=dst src=s1 bytes=256
    copy dst=dst src=s2 bytes=256
    copy dst=dst2 src=dst bytes=256
}
execute dma l
wait-idle
expect dst2 count=64 equals=2
"#,
        ),
        (
            "arguments written by another queue's dispatch, PFP wait",
            r#"
buffer args size=256
buffer flag size=64 heap=shared
buffer out size=1024 heap=readback
queue p kind=direct
queue c kind=compute
list prod kind=direct {
    dispatch fill dst=args groups=1 value=4
    write-value32-bop flag value=1 flush=l2-writeback
}
list cons kind=compute {
    wait-value32 flag cmp=greater-equal reference=1 engine=pfp
    dispatch-indirect fill args=args dst=out value=9
}
execute c cons
execute p prod
wait-idle
expect out count=256 equals=9
"#,
        ),
        (
            "a CP write released by a later bottom-of-pipe write (no write-back needed)",
            r#"
buffer args size=256
buffer flag size=64 heap=shared
buffer total size=64 heap=readback
queue p kind=direct
queue c kind=compute
list prod kind=direct {
    write-value32-top args value=4
    write-value32-bop flag value=1
}
list cons kind=compute {
    wait-value32 flag cmp=equal reference=1
    dispatch sum dst=total src=args groups=1
}
execute c cons
execute p prod
wait-idle
expect total width=64 equals=4
"#,
        ),
        (
            "a second writer on another queue after a released flag",
            r#"
buffer out size=1024 heap=readback
buffer flag size=64 heap=shared
queue p kind=direct
queue c kind=compute
list lp kind=direct {
    dispatch fill dst=out groups=4 value=1
    write-value32-bop flag value=1 flush=l2-writeback
}
list lc kind=compute {
    wait-value32 flag cmp=equal reference=1
    dispatch fill dst=out groups=4 value=2
}
execute c lc
execute p lp
wait-idle
expect out count=256 equals=2
"#,
        ),
        (
            "atomic sums from two queues into one total",
            r#"
buffer data size=1024 init=1
buffer total size=64 heap=readback
queue a kind=direct
queue b kind=compute
list la kind=direct {
    dispatch sum dst=total src=data groups=4
}
list lb kind=compute {
    dispatch sum dst=total src=data groups=4
}
execute a la
execute b lb
wait-idle
expect total width=64 equals=512
"#,
        ),
        (
            "read, hand back by fences, overwrite, read again (queue waits invalidate)",
            r#"
buffer data size=256 init=1
buffer totals size=64 heap=readback
fence read1
fence written
queue prod kind=direct
queue cons kind=compute
list sum1 kind=compute {
    dispatch sum dst=totals src=data groups=1
}
list sum2 kind=compute {
    dispatch sum dst="totals+8" src=data groups=1
}
list produce kind=direct {
    dispatch fill dst=data groups=1 value=5
}
execute cons sum1
signal cons read1 1
wait prod read1 1
execute prod produce
signal prod written 1
wait cons written 1
execute cons sum2
wait-idle
expect totals width=64 equals=64
expect "totals+8" width=64 equals=320
"#,
        ),
        (
            "an engine reads its own writes, never stale",
            r#"
buffer data size=256 init=1
buffer totals size=64 heap=readback
queue gfx kind=direct
list l kind=direct {
    dispatch sum dst=totals src=data groups=1
    flush-pipeline
    dispatch fill dst=data groups=1 value=5
    flush-pipeline
    dispatch sum dst="totals+8" src=data groups=1
}
execute gfx l
wait-idle
expect totals width=64 equals=64
expect "totals+8" width=64 equals=320
"#,
        ),
        (
            "an l1-invalidate on a retired bottom-of-pipe write drops the cache",
            r#"
buffer data size=256 init=1
buffer sync size=64 heap=shared
buffer totals size=64 heap=readback
queue prod kind=direct
queue cons kind=compute
list consume kind=compute {
    dispatch sum dst=totals src=data groups=1
    write-value32-bop sync value=1 flush=l2-writeback
    wait-value32 "sync+4" cmp=equal reference=1
    write-value32-bop "sync+8" value=1 flush=l1-invalidate
    wait-value32 "sync+8" cmp=equal reference=1
    dispatch sum dst="totals+8" src=data groups=1
}
list produce kind=direct {
    wait-value32 sync cmp=equal reference=1
    dispatch fill dst=data groups=1 value=5
    write-value32-bop "sync+4" value=1 flush=l2-writeback
}
execute cons consume
execute prod produce
wait-idle
expect totals width=64 equals=64
expect "totals+8" width=64 equals=320
"#,
        ),
        (
            "the host writes input before execute",
            r#"
buffer input size=256 heap=upload
buffer total size=64 heap=readback
queue gfx kind=direct
list l kind=direct {
    dispatch sum dst=total src=input groups=1
}
cpu-write "input+8" value=5
execute gfx l
wait-idle
expect total width=64 equals=5
"#,
        ),
        (
            "the host overwrites GPU data after cpu-wait on a signal",
            r#"
buffer data size=256 heap=shared
fence done
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=data groups=1 value=3
}
execute gfx l
signal gfx done 1
cpu-wait done 1
cpu-write data value=9
expect data equals=9
expect "data+4" equals=3
"#,
        ),
        (
            "the host overwrites GPU data after wait-idle",
            r#"
buffer data size=256 heap=shared
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=data groups=1 value=3
}
execute gfx l
wait-idle
cpu-write data value=9
expect data equals=9
"#,
        ),
        (
            "a host thread answers a GPU request through a released flag",
            r#"
buffer mailbox size=64 heap=shared
buffer data size=256 heap=shared
queue gfx kind=direct
list l kind=direct {
    dispatch fill dst=data groups=1 value=42
    write-value32-bop mailbox value=1 flush=l2-writeback
    wait-value32 "mailbox+4" cmp=equal reference=7
    dispatch sum dst="mailbox+8" src=data groups=1
}
host responder {
    cpu-poll mailbox cmp=equal reference=1
    cpu-write data value=0
    cpu-write "mailbox+4" value=7
}
execute gfx l
wait-idle
expect "mailbox+8" width=64 equals=2646
"#,
        ),
    ];
    for (what, body) in cases {
        let text = format!("device tdr-ms=2000\n{}", body.trim_start());
        let sc = source(what, &text);
        assert_clean(what, &check_strict(&sc, 100));
        let o = validate(&sc);
        assert!(
            o.hazards.is_empty(),
            "{what} (validate): {:?}",
            messages(&o)
        );
        assert_eq!(
            o.status,
            Status::Passed,
            "{what} (validate): {:?}",
            o.expectations
        );
    }
}

// ------------------------------------------------------------------------------------------------
// --validate on the threaded driver

#[test]
fn d5_validate_finds_the_same_hazard_kinds_on_the_threaded_driver() {
    let pairs: &[(&str, &str, &str)] = &[
        (
            MISSING_WRITEBACK,
            "unreleased-read",
            "tests/scenarios/missing-writeback-fixed.kdl",
        ),
        (
            PFP_RACE,
            "pfp-read-before-wait",
            "tests/scenarios/pfp-indirect-fixed.kdl",
        ),
        (
            STALE,
            "stale-cache",
            "tests/scenarios/stale-cache-fixed.kdl",
        ),
        (WW, "write-write", "tests/scenarios/write-write-fixed.kdl"),
        (
            "tests/scenarios/write-write-queues.kdl",
            "write-write",
            "tests/scenarios/write-write-queues-fixed.kdl",
        ),
        (
            TOP,
            "unreleased-read",
            "tests/scenarios/top-of-pipe-flag-fixed.kdl",
        ),
        (
            "tests/scenarios/host-poll-result.kdl",
            "unreleased-read",
            "tests/scenarios/host-poll-result-fixed.kdl",
        ),
        (
            "tests/scenarios/host-write-race.kdl",
            "unreleased-read",
            "tests/scenarios/host-write-race-fixed.kdl",
        ),
        (
            "tests/scenarios/host-reuse.kdl",
            "write-write",
            "tests/scenarios/host-reuse-fixed.kdl",
        ),
    ];
    for (buggy, kind, fixed) in pairs {
        assert_validate_finds(buggy, &[kind]);
        assert_validate_clean(fixed);
    }
    let mut examples: Vec<_> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kdl") && n != "missing-writeback.kdl")
        .collect();
    examples.sort();
    for ex in examples {
        assert_validate_clean(&format!("examples/{ex}"));
    }
}

// ------------------------------------------------------------------------------------------------
// The outcome and its JSON

#[test]
fn d5_hazards_json_has_the_documented_fields() {
    let sc = load(MISSING_WRITEBACK);
    let o = strict(&sc, 0);
    let v = serde_json::to_value(&o).unwrap();
    assert_eq!(v["status"], "failed");
    let hazards = v["hazards"].as_array().expect("a hazards array");
    assert_eq!(hazards.len(), 1);
    let h = &hazards[0];
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    };
    let set = |k: &[&str]| -> BTreeSet<String> { k.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        keys(h),
        set(&[
            "kind", "range", "address", "bytes", "first", "second", "via", "missing", "fix",
            "message"
        ])
    );
    let access_keys = set(&[
        "queue", "agent", "host", "list", "command", "op", "kernel", "access", "line", "text",
    ]);
    for k in ["first", "second", "via"] {
        assert_eq!(keys(&h[k]), access_keys, "{k}");
    }
    assert_eq!(h["kind"], "unreleased-read");
    assert_eq!(h["range"], "data..+0x1000");
    assert_eq!(h["bytes"], 4096);
    assert!(h["address"].as_str().unwrap().starts_with("0x"));
    assert_eq!(h["first"]["queue"], "producer");
    assert_eq!(h["first"]["agent"], "task");
    assert_eq!(h["first"]["host"], Value::Null);
    assert_eq!(h["first"]["list"], "produce");
    assert_eq!(h["first"]["command"], 0);
    assert_eq!(h["first"]["op"], "dispatch");
    assert_eq!(h["first"]["kernel"], "fill");
    assert_eq!(h["first"]["access"], "write");
    assert_eq!(h["first"]["line"], 18);
    assert_eq!(h["second"]["queue"], "consumer");
    assert_eq!(h["second"]["access"], "read");
    assert_eq!(h["second"]["line"], 23);
    assert_eq!(h["via"]["op"], "write-value32-bop");
    assert_eq!(h["via"]["agent"], "me");
    assert_eq!(h["via"]["kernel"], Value::Null);
    assert_eq!(h["via"]["line"], 19);
    for k in ["missing", "fix", "message"] {
        assert!(!h[k].as_str().unwrap().is_empty(), "{k}");
    }
    assert!(h["fix"].as_str().unwrap().contains("l2-writeback"));

    // A host access: no queue, list or command; the host's name.
    let o = strict(&load("tests/scenarios/host-poll-result.kdl"), 0);
    let v = serde_json::to_value(&o).unwrap();
    let second = &v["hazards"][0]["second"];
    assert_eq!(keys(second), access_keys);
    assert_eq!(second["queue"], Value::Null);
    assert_eq!(second["agent"], "host");
    assert_eq!(second["host"], "main");
    assert_eq!(second["list"], Value::Null);
    assert_eq!(second["command"], Value::Null);
    assert_eq!(second["op"], "cpu-poll");
    assert_eq!(second["access"], "wait");
    assert_eq!(second["line"], 20);
    assert_eq!(v["hazards"][0]["via"], Value::Null);

    // Clean and untracked runs still carry the (empty) array.
    for o in [
        strict(&load("tests/scenarios/missing-writeback-fixed.kdl"), 0),
        run(
            &sc,
            &RunOptions {
                driver: DriverKind::Deterministic,
                seed: 0,
                ..RunOptions::default()
            },
        ),
    ] {
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["hazards"], Value::Array(vec![]), "{v}");
    }
}

/// A strict schedule is a pure function of the scenario and the seed: hazards included.
#[test]
fn d5_strict_runs_replay_identically() {
    for rel in [STALE, TOP, WW, "tests/scenarios/host-write-race.kdl"] {
        let sc = load(rel);
        for seed in [0, 5, 11] {
            let a = strict(&sc, seed);
            let b = strict(&sc, seed);
            let (mut ja, mut jb) = (
                serde_json::to_value(&a).unwrap(),
                serde_json::to_value(&b).unwrap(),
            );
            assert!(!a.hazards.is_empty(), "{rel} seed {seed}");
            ja["elapsed_ns"] = Value::Null;
            jb["elapsed_ns"] = Value::Null;
            assert_eq!(ja, jb, "{rel} seed {seed}");
        }
    }
}
