//! The checker never hangs (`docs/semantics.md` D4, D6): on the deterministic driver every
//! host thread is part of the schedule until it ends, and when nothing can run the driver
//! decides at once, so every `run` and every `check` seed ends with a verdict. Each test runs
//! the check on a watchdog thread: a hang fails the test instead of hanging it.

use pipefence::{Classification, RemovalReason, RemovalReport};
use pipefence_scenario::check::{check, CheckOptions, CheckReport};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::{parse, render_diagnostics};
use std::sync::mpsc;
use std::time::Duration;

/// Far longer than any of these checks takes; only a hang reaches it.
const WATCHDOG: Duration = Duration::from_secs(120);

#[track_caller]
fn source(name: &str, text: &str) -> Scenario {
    parse(name, text)
        .unwrap_or_else(|d| panic!("{name} is invalid:\n{}", render_diagnostics(name, text, &d)))
}

/// `check` over `schedules` seeds, on a thread, bounded by [`WATCHDOG`].
fn check_bounded(name: &str, text: &str, schedules: u64) -> CheckReport {
    let sc = source(name, text);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = check(
            &sc,
            &CheckOptions {
                schedules,
                seed: 0,
                strict: false,
            },
            |_| {},
        );
        let _ = tx.send(r);
    });
    rx.recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{name}: check did not end within {WATCHDOG:?}"))
}

/// The handshake example with a wrong reply value: the GPU waits on the host, the host polls
/// for a value the GPU never writes. Before the fix, the main program's join of the host thread
/// returned early at the removal and blocked its OS thread while holding the turn (seeds 2, 5).
#[test]
fn d6_check_ends_when_host_polls_for_a_value_never_written() {
    let text = include_str!("../../../examples/cpu-gpu-handshake.kdl").replace(
        "cpu-poll mailbox cmp=equal reference=1",
        "cpu-poll mailbox cmp=equal reference=4",
    );
    let r = check_bounded("handshake-wrong-value", &text, 64);
    assert_eq!(r.failing, 64);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        let removed = f.outcome.removed.as_ref().expect("a hang report");
        assert_eq!(
            removed.classification,
            Some(Classification::WaitingOnHost),
            "seed {}",
            f.seed
        );
    }
}

/// A host thread blocked on a fence nobody signals, with no engine work: the wait fails as
/// timed out at once, and says that nothing could run (no time passed).
#[test]
fn d6_check_ends_when_host_waits_on_a_fence_nobody_signals() {
    let text = "fence f\nhost h {\n    cpu-wait f 1 timeout-ms=5000\n}\n";
    let r = check_bounded("unsignalled", text, 64);
    assert_eq!(r.failing, 64);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        let e = &f.outcome.host_errors;
        assert_eq!(e.len(), 1, "seed {}: {e:?}", f.seed);
        assert!(
            e[0].message.contains("nothing can run") && !e[0].message.contains("after 5s"),
            "seed {}: {}",
            f.seed,
            e[0].message
        );
    }
}

/// A queue waits on a fence that only a host thread could signal, and that thread waits for
/// another value: a hang (waiting-on-host) on every seed, never a hung process.
#[test]
fn d6_check_ends_when_queue_and_host_wait_on_each_other() {
    let text =
        "fence f\nqueue q kind=compute\nwait q f 1\nhost h {\n    cpu-wait f 5 timeout-ms=100\n}\n";
    let r = check_bounded("queue-and-host", text, 64);
    assert_eq!(r.failing, 64);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        let removed = f.outcome.removed.as_ref().expect("a hang report");
        assert_eq!(removed.classification, Some(Classification::WaitingOnHost));
    }
}

/// The main program removes the device before a host thread has started: the thread still
/// runs (its calls fail as removed) and ends, and so does every seed.
#[test]
fn d6_check_ends_when_device_is_removed_before_a_host_starts() {
    let text = "fence f\nqueue q kind=compute\nhost h {\n    cpu-signal f 1\n}\nremove-device\n";
    let r = check_bounded("remove-before-host", text, 64);
    assert_eq!(r.failing, 64);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        let removed = f.outcome.removed.as_ref().expect("removed");
        assert_eq!(removed.reason, RemovalReason::Requested, "seed {}", f.seed);
    }
}

/// Several host threads blocked on waits nobody satisfies, one on memory and two on fences.
#[test]
fn d6_check_ends_when_every_host_waits_forever() {
    let text = "buffer m size=64 heap=shared\nfence f\nhost h {\n    cpu-poll m cmp=equal reference=3 timeout-ms=100\n}\nhost g {\n    cpu-wait f 1 timeout-ms=100\n}\ncpu-wait f 2 timeout-ms=100\n";
    let r = check_bounded("all-wait", text, 64);
    assert_eq!(r.failing, 64);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        assert_eq!(f.outcome.host_errors.len(), 3, "seed {}", f.seed);
    }
}

/// D6 (threaded): a dispatch of many groups, each shorter than the watchdog but together far
/// longer, progresses with every group: no hang is declared (before, the runner's monitor
/// counted only completed commands and removed the device as `hung` with no classification).
#[test]
fn d6_long_but_finite_dispatch_is_not_a_hang() {
    use pipefence_scenario::run::{run, DriverKind, RunOptions, Status};
    let text = "device tdr-ms=1000 workers=1\nfence done\nqueue q kind=compute\nlist l kind=compute {\n    dispatch spin groups=12 ns=100000000\n}\nexecute q l\nsignal q done 1\ncpu-wait done 1 timeout-ms=30000\n";
    let sc = source("long-dispatch", text);
    let o = run(
        &sc,
        &RunOptions {
            driver: DriverKind::Threaded,
            ..RunOptions::default()
        },
    );
    assert_eq!(o.status, Status::Passed, "{:?}", o.removed);
}

/// D4: the deterministic driver keeps a dispatch's groups as ranges: a dispatch of 2^32 - 1
/// groups (which allocated one record per group, 4 GB, and aborted), one of 10^5 (16-45 s
/// before), and an indirect one whose count of 4e9 is read from memory at run time all end
/// at once, on every schedule, in plain and strict mode.
#[test]
fn d4_huge_dispatches_cost_what_they_do_not_one_record_per_group() {
    let spin = "fence done\nqueue q kind=compute\nlist l kind=compute {\n    dispatch spin groups=GROUPS ns=1\n}\nexecute q l\nsignal q done 1\ncpu-wait done 1 timeout-ms=100000\n";
    for groups in ["4294967295", "100000"] {
        let text = spin.replace("GROUPS", groups);
        let r = check_bounded("huge-spin", &text, 32);
        assert!(
            r.failures.is_empty(),
            "{groups}: {:?}",
            r.failures.first().map(|f| &f.what)
        );
    }
    // The count is read by the PFP; the fill runs past `out` at once: a page fault, not 4e9
    // scheduler steps.
    let indirect = "buffer args size=64 heap=shared\nbuffer out size=4096 heap=readback\nfence done\nqueue q kind=compute\nlist put kind=compute {\n    write-value32-top args value=4000000000\n}\nlist l kind=compute {\n    dispatch-indirect fill args=args dst=out value=9\n}\nexecute q put\nexecute q l\nsignal q done 1\ncpu-wait done 1 timeout-ms=100000\n";
    let r = check_bounded("huge-indirect", indirect, 32);
    assert_eq!(r.failing, 32);
    assert_eq!(r.other_failing, 0);
    for f in &r.failures {
        let removed = f.outcome.removed.as_ref().expect("removed");
        assert_eq!(removed.classification, Some(Classification::PageFault));
    }
    let sc = source("huge-spin-strict", &spin.replace("GROUPS", "4294967295"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(check(
            &sc,
            &CheckOptions {
                schedules: 8,
                seed: 0,
                strict: true,
            },
            |_| {},
        ));
    });
    let r = rx.recv_timeout(WATCHDOG).expect("strict check ends");
    assert!(r.failures.is_empty());
}

/// The removal report of `text` run on the threaded driver, on deterministic seeds 0..8 and in
/// strict mode at the same seeds.
fn removals_on_every_driver(name: &str, text: &str) -> Vec<(String, RemovalReport)> {
    use pipefence_scenario::run::{run, DriverKind, RunOptions};
    let sc = source(name, text);
    let mut out = Vec::new();
    let threaded = run(
        &sc,
        &RunOptions {
            driver: DriverKind::Threaded,
            ..RunOptions::default()
        },
    );
    out.push(("threaded".to_string(), threaded.removed.expect("removed")));
    for seed in 0..8 {
        for strict in [false, true] {
            let o = run(
                &sc,
                &RunOptions {
                    driver: DriverKind::Deterministic,
                    seed,
                    strict,
                    ..RunOptions::default()
                },
            );
            out.push((
                format!("seed {seed} strict {strict}"),
                o.removed.expect("removed"),
            ));
        }
    }
    out
}

/// D7 breadcrumbs and `last_completed` do not depend on the driver: for a fault in a dispatch
/// inside `begin-event`, the open labels are those at the dispatch, and the last completed
/// command is the one before it (the `begin-event`), never the queue signal or the `end-event`
/// ordered after the dispatch (threaded, before) nor the dispatch itself (deterministic).
#[test]
fn d7_breadcrumbs_and_last_completed_are_the_same_on_every_driver() {
    let endless = "device tdr-ms=200\nqueue q kind=compute\nfence done\nlist l kind=compute {\n    begin-event \"long\"\n    dispatch spin groups=1 ns=10000000000\n    end-event\n}\nexecute q l\nsignal q done 1\ncpu-wait done 1 timeout-ms=5000\n";
    let fault = "buffer small size=256 heap=readback\nqueue q kind=compute\nfence done\nlist l kind=compute {\n    marker \"start\"\n    begin-event \"frame\"\n    dispatch fill dst=small groups=8 value=1\n    end-event\n}\nexecute q l\nsignal q done 1\ncpu-wait done 1 timeout-ms=5000\n";
    for (name, text, label, class, before) in [
        ("endless", endless, "long", Classification::EndlessKernel, 5),
        ("fault", fault, "frame", Classification::PageFault, 6),
    ] {
        for (how, r) in removals_on_every_driver(name, text) {
            assert_eq!(r.classification, Some(class), "{name} {how}");
            let q = &r.queues[0];
            assert_eq!(q.events, [label], "{name} {how}");
            let last = q
                .last_completed
                .as_ref()
                .map(pipefence_scenario::run::site_text)
                .unwrap_or_default();
            assert!(
                last.ends_with(&format!("(begin-event), line {before}")),
                "{name} {how}: last completed {last}"
            );
        }
    }
}

/// What the removal report says of the faulting queue (its first entry) and of the fault, in
/// words: the parts that describe program state, to compare across drivers.
fn fault_entry(r: &RemovalReport) -> String {
    use pipefence_scenario::run::{site_text, writer_text};
    let q = &r.queues[0];
    let at = q.at.as_ref().map(site_text).unwrap_or_default();
    let fault = r
        .fault
        .as_ref()
        .map(|f| format!("{} at {}", f.kind, site_text(&f.at)))
        .unwrap_or_default();
    format!(
        "classification {:?}; fault {fault}; queue {} [{}] at {at}, stage {:?}, waiting for {:?} \
         (current {:?}, last writer {:?}), waits on {:?}, events {:?}, last completed {:?}",
        r.classification,
        q.queue,
        q.class,
        q.stage,
        q.waiting_for,
        q.current,
        q.last_writer.as_ref().map(writer_text),
        q.waits_on,
        q.events,
        q.last_completed.as_ref().map(site_text),
    )
}

/// D7: the faulting queue's entry describes the faulting command on every driver, not a later
/// wait its PFP went on to (threaded and strict, where the PFP runs ahead, reported the queue
/// wait after the fault: `waiting for fence f >= 1`, stage `pfp`, the labels at the PFP). A
/// never-satisfiable wait on the ME or the PFP, and a page fault in a top-of-pipe write, each
/// followed by a queue wait; every report says the same, with the wait's condition, current
/// value and writer for the never-satisfiable ones.
#[test]
fn d7_faulting_queue_entry_names_the_fault_not_a_later_wait_on_every_driver() {
    let program = |cmd: &str| {
        format!(
            "buffer flags size=64 heap=shared\nbuffer up size=64 heap=upload\n\
             queue q kind=direct\nfence f\nlist l kind=direct {{\n    begin-event \"frame\"\n    \
             marker \"m\"\n    {cmd}\n    end-event\n}}\nexecute q l\nwait q f 1\n\
             cpu-wait f 1 timeout-ms=5000\n"
        )
    };
    let never = "queue q, list l, command 2 (wait-value64), line 8";
    for (name, cmd, stage, waiting_for, class) in [
        (
            "me-never",
            "wait-value64 flags cmp=greater-equal reference=0x100 mask=0xff",
            Some("me"),
            Some("flags (u64) & 0xff >= 256"),
            Classification::NeverSatisfiable,
        ),
        (
            "pfp-never",
            "wait-value64 flags cmp=greater-equal reference=0x100 mask=0xff engine=pfp",
            Some("pfp"),
            Some("flags (u64) & 0xff >= 256"),
            Classification::NeverSatisfiable,
        ),
        (
            "top-fault",
            "write-value32-top up value=1",
            None,
            None,
            Classification::PageFault,
        ),
    ] {
        let reports = removals_on_every_driver(name, &program(cmd));
        for (how, r) in &reports {
            assert_eq!(r.classification, Some(class), "{name} {how}: {r}");
            let q = &r.queues[0];
            assert_eq!(q.class, class, "{name} {how}: {r}");
            assert_eq!(q.stage.as_deref(), stage, "{name} {how}: {r}");
            assert_eq!(q.waiting_for.as_deref(), waiting_for, "{name} {how}: {r}");
            assert_eq!(q.events, ["frame"], "{name} {how}: {r}");
            assert!(q.waits_on.is_empty(), "{name} {how}: {r}");
            if class == Classification::NeverSatisfiable {
                let at = q.at.as_ref().map(pipefence_scenario::run::site_text);
                assert_eq!(at.as_deref(), Some(never), "{name} {how}: {r}");
                assert_eq!(q.current, Some(0), "{name} {how}: {r}");
            }
            // What completed before the fault: the ME's commands before it (the PFP may fault
            // before the ME has executed them), never the fault or a command after it.
            let last = q
                .last_completed
                .as_ref()
                .map(pipefence_scenario::run::site_text);
            let before = [
                None,
                Some("queue q, list l, command 0 (begin-event), line 6"),
                Some("queue q, list l, command 1 (marker), line 7"),
            ];
            assert!(before.contains(&last.as_deref()), "{name} {how}: {last:?}");
        }
        // The ME is at its fault once every command before it has completed: the whole entry
        // is the same on every driver.
        if stage != Some("pfp") {
            let first = fault_entry(&reports[0].1);
            for (how, r) in &reports {
                assert_eq!(fault_entry(r), first, "{name} {how}");
            }
        }
    }
}

/// D7: a fault at retirement (a bottom-of-pipe write, a `marker-out` immediate write) or in a
/// dispatch inside nested events names the labels open at the faulting command and the last
/// command completed before it, whatever the ME executed meanwhile: `events` was `[]` on the
/// threaded driver and in strict mode and `["frame"]` on the deterministic driver (the ME's
/// labels after its `end-event`s), and `last_completed` a command after the fault.
#[test]
fn d7_fault_at_retirement_names_its_labels_and_what_completed_before_it_on_every_driver() {
    let program = |cmd: &str| {
        format!(
            "buffer up size=256 heap=upload\nbuffer small size=256 heap=readback\n\
             queue q kind=compute\nfence done\nlist l kind=compute {{\n    marker \"start\"\n    \
             dispatch spin groups=4 ns=1000\n    begin-event \"frame\"\n    \
             begin-event \"pass2\"\n    {cmd}\n    end-event\n    marker \"after\"\n    \
             end-event\n    write-value32-top \"small+4\" value=1\n}}\nexecute q l\n\
             signal q done 1\ncpu-wait done 1 timeout-ms=5000\n"
        )
    };
    for (name, cmd) in [
        ("bop", "write-value32-bop up value=1"),
        (
            "bop64-timestamp",
            "write-value64-bop up source=gpu-timestamp",
        ),
        ("marker-out", "write-immediate up value=1 mode=marker-out"),
        ("dispatch", "dispatch fill dst=small groups=8 value=1"),
    ] {
        let reports = removals_on_every_driver(name, &program(cmd));
        let first = fault_entry(&reports[0].1);
        for (how, r) in &reports {
            assert_eq!(
                r.classification,
                Some(Classification::PageFault),
                "{name} {how}: {r}"
            );
            let q = &r.queues[0];
            assert_eq!(q.events, ["frame", "pass2"], "{name} {how}: {r}");
            let last = q
                .last_completed
                .as_ref()
                .map(pipefence_scenario::run::site_text);
            assert_eq!(
                last.as_deref(),
                Some("queue q, list l, command 3 (begin-event), line 9"),
                "{name} {how}: {r}"
            );
            assert_eq!(fault_entry(r), first, "{name} {how}");
        }
    }
}

/// `check`'s report stays bounded whatever the number of schedules: failing schedules are
/// grouped by outcome (a count and the first seeds of each, at most 32 outcomes kept), so
/// 3000 failing schedules with hundreds of distinct outcomes keep 32 outcomes of
/// at most 8 seeds each and count the rest; before, every failing schedule was kept in full
/// (about 1.6 KB each).
#[test]
fn check_report_is_bounded_by_outcomes_not_schedules() {
    use pipefence_scenario::check::{MAX_FAILURE_GROUPS, MAX_SEEDS_PER_FAILURE};
    // Two queues race to signal 12 fences (last write wins, F2): up to 4096 final states,
    // and an expectation that always fails.
    let mut text = String::from("fence never\nqueue a kind=compute\nqueue b kind=compute\n");
    for i in 0..12 {
        text += &format!("fence f{i}\n");
    }
    for i in 0..12 {
        text += &format!("signal a f{i} 1\nsignal b f{i} 2\n");
    }
    text += "wait-idle timeout-ms=5000\nexpect-fence never equals=1\n";
    let r = check_bounded("racing-signals", &text, 3000);
    assert_eq!(r.failing, 3000);
    assert!(r.outcomes > MAX_FAILURE_GROUPS, "{} outcomes", r.outcomes);
    assert_eq!(r.failures.len(), MAX_FAILURE_GROUPS);
    let kept: u64 = r.failures.iter().map(|f| f.count).sum();
    assert_eq!(kept + r.other_failing, 3000);
    assert!(r.other_failing > 0);
    for f in &r.failures {
        assert!(f.seeds.len() <= MAX_SEEDS_PER_FAILURE && f.seeds.len() as u64 <= f.count);
        assert_eq!(f.seeds[0], f.seed);
    }
    assert!(r.other_seeds.len() <= MAX_SEEDS_PER_FAILURE);
    // One outcome, many schedules: one group counting them all.
    let text = "fence f\nhost h {\n    cpu-wait f 1 timeout-ms=5000\n}\n";
    let r = check_bounded("one-outcome", text, 500);
    assert_eq!((r.failing, r.failures.len(), r.outcomes), (500, 1, 1));
    assert_eq!(r.failures[0].count, 500);
    assert_eq!(r.failures[0].seeds, (0..8).collect::<Vec<u64>>());
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.len() < 8192, "{} bytes", json.len());
}

/// A kept failure does not repeat the expectations that passed: 3,000 passing expectations and
/// one failing one give a `--json` report of a few kilobytes (before: 348 KB for 50 schedules,
/// every passing expectation once per kept outcome), and the count of those left out.
#[test]
fn check_report_keeps_only_expectations_that_did_not_pass() {
    let mut text = String::from(
        "buffer b size=64 heap=shared\nfence f\nqueue q kind=compute\n\
         list l kind=compute {\n    write-value32-bop b value=1\n}\n\
         execute q l\nsignal q f 1\ncpu-wait f 1\n",
    );
    for _ in 0..3000 {
        text += "expect-fence f equals=1\n";
    }
    text += "expect b equals=2\n";
    let r = check_bounded("many-expectations", &text, 50);
    assert_eq!((r.failing, r.failures.len()), (50, 1));
    let f = &r.failures[0];
    assert_eq!(f.passed_expectations, 3000);
    assert_eq!(f.outcome.expectations.len(), 1);
    assert_eq!(f.outcome.expectations[0].passed, Some(false));
    assert_eq!(f.outcome.expectations[0].line, 3010);
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.len() < 8192, "{} bytes", json.len());
}

/// E2 and class 8 of the robustness work: `expect count=` reads its elements in chunks, not
/// one call each, and still names the first element that fails, wherever it lies (here in the
/// third chunk, after lazily initialized and written chunks), for both widths and every driver.
#[test]
fn e2_expect_over_many_elements_names_the_first_that_fails() {
    use pipefence_scenario::run::{run, DriverKind, RunOptions};
    let text = r#"
device
buffer big size=1048576 init=5
buffer wide size=1048576
queue q kind=compute
fence f
list l kind=compute {
    dispatch fill dst="big+524288" groups=1 value=5
    dispatch fill dst="big+600000" groups=1 value=9
    dispatch fill dst="wide+800000" groups=1 value=3
}
execute q l
signal q f 1
cpu-wait f 1
expect big count=262144 equals=5
expect wide count=131072 width=64 equals=0
expect "big+524288" count=64 equals=5
"#;
    let sc = source("many.kdl", text);
    for driver in [DriverKind::Threaded, DriverKind::Deterministic] {
        let o = run(
            &sc,
            &RunOptions {
                driver,
                seed: 1,
                strict: false,
                validate: false,
                trace: false,
                schedule: None,
            },
        );
        let detail = |line: usize| {
            let e = o.expectations.iter().find(|e| e.line == line).unwrap();
            (e.passed, e.detail.clone())
        };
        let (passed, d) = detail(15);
        assert_eq!(passed, Some(false), "{d}");
        assert!(d.contains("element 150000 (big+600000) is 9"), "{d}");
        let (passed, d) = detail(16);
        assert_eq!(passed, Some(false), "{d}");
        assert!(
            d.contains("element 100000 (wide+800000) is 12884901891"),
            "{d}"
        );
        assert_eq!(detail(17).0, Some(true), "{:?}", detail(17));
    }
}
