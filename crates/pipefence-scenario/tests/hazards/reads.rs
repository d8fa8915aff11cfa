//! Unreleased reads (a bottom-of-pipe flag without write-back), PFP reads before their wait, stale caches.

use super::*;

// ------------------------------------------------------------------------------------------------
// unreleased-read: the bottom-of-pipe flag without l2-writeback (seed 003's warning)

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
