//! Write-write races, top-of-pipe flags, marker and immediate writes, copy queues.

use super::*;

// ------------------------------------------------------------------------------------------------
// write-write

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
