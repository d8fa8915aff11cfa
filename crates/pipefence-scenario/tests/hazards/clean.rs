//! Host-side hazards, correct programs that must stay clean, the threaded validator, the JSON shape.

use super::*;

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
