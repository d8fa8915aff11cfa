//! D4: the partial-order reduction of `check --exhaustive` (source-DPOR with sleep sets,
//! `crates/pipefence/src/explore/dpor.rs`, over the dependence relation of
//! `docs/exploration.md`) is sound: on small generated scenarios, the reduced search finds
//! exactly the outcomes that the plain search of every interleaving finds.
//!
//! Each case is a scenario of two or three compute queues, each given one to four items in
//! order: fence signals and queue waits, and commands (grouped into one list per run of
//! consecutive commands) drawn from memory-value waits on the micro engine or the pre-fetch
//! parser, top- and bottom-of-pipe value writes, `fill` and `add` dispatches of one to three
//! groups into overlapping or disjoint ranges, and `flush-pipeline`; optionally a host thread
//! that waits on a fence, writes a word or signals a fence. The main program submits, waits
//! for idle, then probes every word of memory with an `expect ... cmp=never`, which always
//! fails and reports the value it found: the final memory becomes part of the outcome's
//! signature (`check::signature`: status, expectations, final fences, hazards, removal, host
//! errors), which otherwise leaves memory out. Both plain and strict mode.
//!
//! The written scenarios of `tests/reduction/` (fences lowered or signalled by two queues,
//! waits for several fences, copies, upload memory, removals, masked 64-bit polls) are compared
//! the same way, by name, in the modes whose plain search completes.
//!
//! Cases whose plain search does not complete within [`PLAIN_CAP`] schedules are skipped; the
//! test asserts that at least a quarter are not. The plain search grows fast: without strict
//! mode two queues' single bottom-of-pipe writes of one word already take over 20,000
//! schedules (strict mode's maximal PFP run-ahead brings them to 504), so the cases are small
//! and mostly strict; most compared cases have one outcome. For a longer run of bigger cases:
//! `REDUCTION_SOUNDNESS_PLAIN_CAP=20000 PROPTEST_CASES=200 PROPTEST_RNG_SEED=N` (release
//! build advised), with `REDUCTION_SOUNDNESS_VERBOSE=1` to print each case's counts and
//! `REDUCTION_SOUNDNESS_SHOW=1` its scenario.

mod common;

use common::{fence, fence_name, render_items, render_wait, render_write, search, word, Word};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use std::fmt::Write as _;

/// Schedules the plain search may explore before a case is skipped
/// (`REDUCTION_SOUNDNESS_PLAIN_CAP` overrides, for longer runs of bigger cases).
const PLAIN_CAP: u64 = 1_000;

fn plain_cap() -> u64 {
    std::env::var("REDUCTION_SOUNDNESS_PLAIN_CAP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PLAIN_CAP)
}

/// Generated cases (`PROPTEST_CASES` overrides). Measured in a debug build (`cargo test -p
/// pipefence-scenario --test reduction_soundness`, 2 cores shared with other work): the whole
/// file in 38 s (load 1.2) to about 50 s (load 3; 40 cases took 62 s there), 15 cases compared
/// and 17 skipped; a skipped case costs its 1,000 plain schedules (about 1.5 s), a compared
/// one well under a second.
const CASES: u32 = 32;

/// Bytes of the buffer shared by value writes, waits and dispatches.
const M_BYTES: u64 = 768;
/// Bytes of the buffer only dispatches touch.
const D_BYTES: u64 = 256;

/// Where a dispatch's range starts (a group covers 256 bytes).
#[derive(Debug, Clone, Copy)]
enum Range {
    /// `m+0`: up to 3 groups; overlaps the value words.
    M0,
    /// `m+256`: up to 2 groups.
    M256,
    /// `m+512`: 1 group.
    M512,
    /// `d`: 1 group, disjoint from `m`.
    D,
}

impl Range {
    fn addr(self) -> &'static str {
        match self {
            Range::M0 => "\"m+0\"",
            Range::M256 => "\"m+256\"",
            Range::M512 => "\"m+512\"",
            Range::D => "d",
        }
    }

    fn max_groups(self) -> u8 {
        match self {
            Range::M0 => 3,
            Range::M256 => 2,
            Range::M512 | Range::D => 1,
        }
    }
}

/// A command of a list.
#[derive(Debug, Clone)]
enum Cmd {
    /// `wait-valueN WORD` (`greater-equal`, or `equal` on the micro engine).
    WaitMem {
        word: Word,
        pfp: bool,
        equal: bool,
        reference: u8,
    },
    /// `write-valueN-top` / `write-valueN-bop` (with or without `flush=l2-writeback`).
    WriteValue {
        word: Word,
        top: bool,
        writeback: bool,
        value: u8,
    },
    /// `dispatch fill`.
    Fill { dst: Range, groups: u8, value: u8 },
    /// `dispatch add`.
    Add {
        dst: Range,
        src: Range,
        groups: u8,
        value: u8,
    },
    /// `flush-pipeline` (with or without `flush=l2-writeback`).
    Flush { writeback: bool },
}

/// One item of a queue's program.
type Item = common::Item<Cmd>;

/// What the optional host thread does.
#[derive(Debug, Clone)]
enum HostStep {
    /// `cpu-wait FENCE VALUE`, then `cpu-write WORD`.
    WaitThenWrite {
        fence: u8,
        value: u8,
        word: Word,
        v: u8,
    },
    /// `cpu-write WORD`.
    Write { word: Word, v: u8 },
    /// `cpu-signal FENCE VALUE`.
    Signal { fence: u8, value: u8 },
}

/// A generated scenario.
#[derive(Debug, Clone)]
struct Case {
    strict: bool,
    fifo_depth: u32,
    queues: Vec<Vec<Item>>,
    /// The host thread, and whether it starts before the submissions (else after them).
    host: Option<(HostStep, bool)>,
}

/// A wait's reference or fence value: 1 mostly, so that waits are often satisfied.
fn small() -> impl Strategy<Value = u8> {
    prop_oneof![3 => Just(1u8), 1 => Just(2u8)]
}

fn range() -> impl Strategy<Value = Range> {
    prop_oneof![
        3 => Just(Range::M0),
        2 => Just(Range::M256),
        1 => Just(Range::M512),
        2 => Just(Range::D),
    ]
}

/// One group mostly: the plain search branches on which groups complete.
fn groups() -> impl Strategy<Value = u8> {
    prop_oneof![4 => Just(1u8), 1 => 2u8..=3]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        3 => (word(), any::<bool>(), any::<bool>(), small()).prop_map(|(word, pfp, equal, reference)| {
            Cmd::WaitMem { word, pfp, equal: equal && !pfp, reference }
        }),
        3 => (word(), any::<bool>(), any::<bool>(), 1u8..=2).prop_map(|(word, top, writeback, value)| {
            Cmd::WriteValue { word, top, writeback: writeback && !top, value }
        }),
        2 => (range(), groups(), 1u8..=3).prop_map(|(dst, groups, value)| Cmd::Fill {
            dst,
            groups: groups.min(dst.max_groups()),
            value,
        }),
        2 => (range(), range(), groups(), 1u8..=3).prop_map(|(dst, src, groups, value)| Cmd::Add {
            dst,
            src,
            groups: groups.min(dst.max_groups()).min(src.max_groups()),
            value,
        }),
        1 => any::<bool>().prop_map(|writeback| Cmd::Flush { writeback }),
    ]
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        2 => (fence(), 1u8..=2).prop_map(|(fence, value)| Item::Signal { fence, value }),
        2 => (fence(), small()).prop_map(|(fence, value)| Item::Wait { fence, value }),
        5 => cmd().prop_map(Item::Cmd),
    ]
}

fn queue_items() -> impl Strategy<Value = Vec<Item>> {
    prop_oneof![
        6 => prop::collection::vec(item(), 1..=2),
        1 => prop::collection::vec(item(), 3..=4),
    ]
}

fn host_step() -> impl Strategy<Value = HostStep> {
    prop_oneof![
        1 => (fence(), small(), word(), 1u8..=2)
            .prop_map(|(fence, value, word, v)| HostStep::WaitThenWrite { fence, value, word, v }),
        2 => (word(), 1u8..=2).prop_map(|(word, v)| HostStep::Write { word, v }),
        2 => (fence(), 1u8..=2).prop_map(|(fence, value)| HostStep::Signal { fence, value }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Mostly strict: its maximal PFP run-ahead keeps the plain search small.
        prop::bool::weighted(0.75),
        prop_oneof![2 => Just(1u32), 1 => Just(2), 1 => Just(16)],
        prop_oneof![
            3 => prop::collection::vec(queue_items(), 2),
            1 => prop::collection::vec(prop::collection::vec(item(), 1), 3),
        ],
        prop::option::weighted(0.15, (host_step(), any::<bool>())),
    )
        .prop_map(|(strict, fifo_depth, queues, host)| Case {
            strict,
            fifo_depth,
            queues,
            host,
        })
}

fn render_cmd(out: &mut String, c: &Cmd) {
    let _ = match c {
        Cmd::WaitMem {
            word,
            pfp,
            equal,
            reference,
        } => {
            render_wait(out, *word, *pfp, *equal, *reference);
            Ok(())
        }
        Cmd::WriteValue {
            word,
            top,
            writeback,
            value,
        } => {
            render_write(out, *word, *top, *writeback, &format!("value={value}"));
            Ok(())
        }
        Cmd::Fill { dst, groups, value } => writeln!(
            out,
            "    dispatch fill dst={} groups={groups} value={value}",
            dst.addr()
        ),
        Cmd::Add {
            dst,
            src,
            groups,
            value,
        } => writeln!(
            out,
            "    dispatch add dst={} src={} groups={groups} value={value}",
            dst.addr(),
            src.addr()
        ),
        Cmd::Flush { writeback } => writeln!(
            out,
            "    flush-pipeline{}",
            if *writeback {
                " flush=l2-writeback"
            } else {
                ""
            }
        ),
    };
}

fn render_host(out: &mut String, h: &HostStep) {
    let write = |out: &mut String, word: &Word, v: &u8| {
        let _ = writeln!(
            out,
            "    cpu-write {} value={v}{}",
            word.addr(),
            word.host_width()
        );
    };
    out.push_str("host h {\n");
    match h {
        HostStep::WaitThenWrite {
            fence,
            value,
            word,
            v,
        } => {
            let _ = writeln!(out, "    cpu-wait {} {value}", fence_name(*fence));
            write(out, word, v);
        }
        HostStep::Write { word, v } => write(out, word, v),
        HostStep::Signal { fence, value } => {
            let _ = writeln!(out, "    cpu-signal {} {value}", fence_name(*fence));
        }
    }
    // The main program waits for this before it probes memory: a host thread still running
    // would make every probe a scheduling point.
    out.push_str("    cpu-signal h-done 1\n}\n");
}

/// The scenario text of a case.
fn render(c: &Case) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "device tdr-ms=2000 fifo-depth={}", c.fifo_depth);
    let _ = writeln!(out, "buffer m size={M_BYTES} heap=shared");
    let _ = writeln!(out, "buffer d size={D_BYTES} heap=shared");
    out.push_str("fence f\nfence g\nfence h-done\n");
    for q in 0..c.queues.len() {
        let _ = writeln!(out, "queue q{q} kind=compute");
    }
    // The lists (one per run of consecutive commands) and the host actions that submit them.
    let mut actions = String::new();
    for (q, items) in c.queues.iter().enumerate() {
        render_items(&mut out, &mut actions, q, items, render_cmd);
    }
    if let Some((h, true)) = &c.host {
        render_host(&mut out, h);
    }
    out.push_str(&actions);
    if let Some((h, false)) = &c.host {
        render_host(&mut out, h);
    }
    out.push_str("wait-idle\n");
    if c.host.is_some() {
        out.push_str("cpu-wait h-done 1\n");
    }
    // Memory, as failed expectations that say what they found: every word of the first 16
    // bytes of each 256-byte block (the value words, and where `add` copies them to), then one
    // word of each other 64-byte line. Dispatch ranges are whole 256-byte blocks, every lane
    // of a kernel writes the same function of its own lane's word, and strict mode caches and
    // writes back whole 64-byte lines, so past the first 16 bytes of a block every word of a
    // line holds the same value as the one probed.
    for (buffer, bytes) in [("m", M_BYTES), ("d", D_BYTES)] {
        for block in (0..bytes).step_by(256) {
            for off in [0, 4, 8, 12, 16, 64, 128, 192] {
                let _ = writeln!(
                    out,
                    "expect \"{buffer}+{}\" cmp=never reference=0",
                    block + off
                );
            }
        }
    }
    out
}

/// Whether a case was compared or skipped.
enum Checked {
    Compared {
        plain: u64,
        reduced: u64,
        outcomes: usize,
    },
    Skipped,
}

/// The property for one scenario: if the plain search completes within [`plain_cap`], the
/// reduced search completes too, explores no more schedules, and finds the same outcomes.
fn check_scenario(text: &str, strict: bool) -> Result<Checked, String> {
    check_scenario_within(text, strict, plain_cap())
}

/// [`check_scenario`] with the plain search allowed `cap` schedules.
fn check_scenario_within(text: &str, strict: bool, cap: u64) -> Result<Checked, String> {
    let sc = pipefence_scenario::parse("generated.kdl", text)
        .map_err(|e| format!("the generated scenario does not parse: {e:?}\n{text}"))?;
    let plain = search(&sc, strict, false, cap);
    if !plain.complete {
        return Ok(Checked::Skipped);
    }
    let reduced = search(&sc, strict, true, cap);
    let context = || {
        format!(
            "strict {strict}; plain: {} schedules, {} outcomes; reduced: complete {}, {} schedules, \
             {} outcomes\n--- scenario ---\n{text}",
            plain.schedules,
            plain.outcomes.len(),
            reduced.complete,
            reduced.schedules,
            reduced.outcomes.len()
        )
    };
    if !reduced.complete {
        return Err(format!(
            "the reduced search did not complete; {}",
            context()
        ));
    }
    if reduced.outcomes != plain.outcomes {
        let missed: Vec<_> = plain.outcomes.difference(&reduced.outcomes).collect();
        let extra: Vec<_> = reduced.outcomes.difference(&plain.outcomes).collect();
        return Err(format!(
            "the outcome sets differ; {}\n--- only in the plain search ({}) ---\n{}\n\
             --- only in the reduced search ({}) ---\n{}\n--- plain ---\n{}\n--- reduced ---\n{}",
            context(),
            missed.len(),
            missed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            extra.len(),
            extra
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            plain
                .outcomes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
            reduced
                .outcomes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        ));
    }
    if reduced.schedules > plain.schedules {
        return Err(format!(
            "the reduced search explored more schedules than the plain one; {}",
            context()
        ));
    }
    Ok(Checked::Compared {
        outcomes: plain.outcomes.len(),
        plain: plain.schedules,
        reduced: reduced.schedules,
    })
}

/// A property's runner: [`CASES`] cases (`PROPTEST_CASES` overrides) from the fixed `seed`
/// (a fixed seed keeps the run time steady; `PROPTEST_RNG_SEED` picks another), no failure
/// files.
fn runner_config(seed: u64) -> Config {
    let mut config = Config::with_cases(CASES);
    if std::env::var_os("PROPTEST_CASES").is_some() {
        config.cases = Config::default().cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(seed);
    }
    config.failure_persistence = None;
    config
}

#[test]
fn d4_reduced_exhaustive_finds_every_outcome_of_the_plain_search() {
    let config = runner_config(0x5eed_00d4);
    let cases = config.cases;
    let verbose = std::env::var_os("REDUCTION_SOUNDNESS_VERBOSE").is_some();
    let stats = std::cell::RefCell::new((0u32, 0u32, 0u64, 0u64));
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |c| {
        let text = render(&c);
        let start = std::time::Instant::now();
        if std::env::var_os("REDUCTION_SOUNDNESS_SHOW").is_some() {
            eprintln!("{}", text.lines().filter(|l| !l.starts_with("expect")).collect::<Vec<_>>().join("\n"));
        }
        let checked = check_scenario(&text, c.strict).map_err(TestCaseError::fail)?;
        let mut s = stats.borrow_mut();
        match checked {
            Checked::Compared {
                plain,
                reduced,
                outcomes,
            } => {
                s.0 += 1;
                s.2 += plain;
                s.3 += reduced;
                if verbose {
                    eprintln!(
                        "compared: plain {plain}, reduced {reduced}, outcomes {outcomes}, strict {}, {:?} {:?} host {}",
                        c.strict, start.elapsed(), c.queues.iter().map(|q| q.len()).collect::<Vec<_>>(), c.host.is_some()
                    );
                }
            }
            Checked::Skipped => {
                s.1 += 1;
                if verbose {
                    eprintln!("skipped: {:?} {:?} host {}", start.elapsed(), c.queues.iter().map(|q| q.len()).collect::<Vec<_>>(), c.host.is_some());
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (compared, skipped, plain, reduced) = *stats.borrow();
    eprintln!(
        "{compared} cases compared ({plain} plain schedules, {reduced} reduced), {skipped} \
         skipped as over {} plain schedules",
        plain_cap()
    );
    // A good share of the cases is small enough to compare (the sizes above are chosen so).
    assert!(
        compared * 4 >= cases,
        "only {compared} of {cases} cases were small enough to compare"
    );
}

/// Written scenarios (`tests/reduction/`) of what the generated cases above leave out: fences
/// lowered by the host and signalled by two queues, waits for any or all of several fences
/// (one timing out), a copy queue, upload memory written by a host during a copy, a page fault
/// that removes the device while another queue waits, a removal while a host polls, a masked
/// 64-bit poll, a host's write racing a top-of-pipe write. In each mode listed, the plain
/// search completes within 13,000 schedules, and the reduced search finds exactly its
/// outcomes (`check::signature`: status, expectations, final fences, hazards, removal, host
/// errors) in no more schedules; and where the plain search bounded to 0 (then 1) preemptions
/// completes within its cap, the shrink's bounded search with sleep sets reaches the same
/// outcomes with the same fewest preemptions ([`check_bounded`]). The plain searches listed
/// here take about 35,000 schedules in all; the modes left out do not complete within 13,000
/// (2026-12-07: the cap was 5,000 and the plain searches about 12,000 in all until a CPU
/// wait's registration became an action of its own, after the wait's scheduling point, which
/// multiplies the interleavings of every scenario with a `cpu-wait`; upload-copy-race's
/// strict search went past 20,000 then, and lowered-fence's, with a `cpu-wait` at its end,
/// too: it ends with `wait-idle` since).
#[test]
fn d4_reduced_exhaustive_finds_every_outcome_of_the_plain_search_on_written_scenarios() {
    // (file, plain mode, strict mode)
    const WRITTEN: &[(&str, bool, bool)] = &[
        ("fence-two-signallers.kdl", false, true),
        ("host-vs-top-of-pipe-write.kdl", false, true),
        ("lowered-fence-registration.kdl", true, true),
        ("lowered-fence.kdl", false, true),
        ("page-fault-while-waiting.kdl", true, true),
        ("poll64-mask.kdl", true, true),
        ("remove-while-poll.kdl", true, true),
        ("upload-copy-race.kdl", true, false),
        ("wait-all-timeout.kdl", true, true),
        ("wait-any-expect-fences.kdl", true, true),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reduction");
    let mut listed: Vec<String> = WRITTEN.iter().map(|w| w.0.to_string()).collect();
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/reduction")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".kdl"))
        .collect();
    listed.sort();
    present.sort();
    assert_eq!(
        listed, present,
        "every file of tests/reduction is listed, once"
    );
    let (mut outcomes, mut bounded_compared) = (0, 0);
    for &(file, plain, strict) in WRITTEN {
        let text = std::fs::read_to_string(dir.join(file)).expect("a written scenario");
        for mode in [false, true] {
            if !(if mode { strict } else { plain }) {
                continue;
            }
            match check_scenario_within(&text, mode, 13_000) {
                Ok(Checked::Compared { outcomes: n, .. }) => outcomes += n,
                Ok(Checked::Skipped) => panic!(
                    "{file} (strict {mode}): the plain search did not complete within 13,000 \
                     schedules"
                ),
                Err(e) => panic!("{file}: {e}"),
            }
            // And a shrink's bounded search keeps each outcome's fewest preemptions, at the
            // bounds whose plain search completes within its cap.
            match check_bounded(&text, mode) {
                Ok(Some(_)) => bounded_compared += 1,
                Ok(None) => {}
                Err(e) => panic!("{file}: {e}"),
            }
            // And the one with partial-order reduction reports only outcomes of schedules
            // within its bound, with their own preemptions.
            match check_bounded_finder(&text, mode) {
                Ok(Some(_)) => bounded_compared += 1,
                Ok(None) => {}
                Err(e) => panic!("{file} (with partial-order reduction): {e}"),
            }
        }
    }
    eprintln!(
        "{outcomes} outcomes in all; bounded searches compared for {bounded_compared} files and \
         modes"
    );
    // Most of these have several outcomes (a count that catches a scenario left with one).
    assert!(outcomes >= 40, "{outcomes} outcomes in all");
    assert!(
        bounded_compared >= 30,
        "the bounded searches were compared for {bounded_compared} files and modes"
    );
}

/// Two queues' bottom-of-pipe writes of one word, in strict mode: both searches complete and
/// the probes tell the two orders apart (the plain search of the same scenario without strict
/// mode's PFP run-ahead does not complete within 20,000 schedules).
#[test]
fn d4_reduced_and_plain_searches_find_both_orders_of_two_value_writes() {
    let write = |value| {
        vec![Item::Cmd(Cmd::WriteValue {
            word: Word::A,
            top: false,
            writeback: false,
            value,
        })]
    };
    let c = Case {
        strict: true,
        fifo_depth: 16,
        queues: vec![write(1), write(2)],
        host: None,
    };
    let text = render(&c);
    let sc = pipefence_scenario::parse("two-writes.kdl", &text).unwrap();
    let plain = search(&sc, true, false, PLAIN_CAP);
    assert!(plain.complete);
    assert_eq!(plain.outcomes.len(), 2, "{:?}", plain.outcomes);
    let checked = check_scenario(&text, true).unwrap();
    assert!(matches!(checked, Checked::Compared { outcomes: 2, .. }));
}

/// Found by the property (`PROPTEST_RNG_SEED=7`, plain cap 5,000), shrunk by proptest: the
/// host thread and `q1` wait on fence `f`, which nothing signals, so every schedule hangs. The
/// plain search finds that one outcome (`removed`, reason `hung`); the reduced search also
/// reported a run that the explorer itself stopped (reason `requested`) as an outcome. A
/// sleep-blocked run's points after its blocked point (the stop winding down) had joined the
/// search, which then backtracked to an alternative that a run without that sleep set does not
/// have there; the prefix's try fell back to another, blocked alternative, the run stopped as a
/// repeat, and the check for repeats (the alternative found disabled) missed it.
#[test]
fn d4_regression_reduced_search_reports_no_run_it_stopped_as_an_outcome() {
    let c = Case {
        strict: true,
        fifo_depth: 1,
        queues: vec![
            vec![Item::Cmd(Cmd::WriteValue {
                word: Word::A,
                top: false,
                writeback: false,
                value: 1,
            })],
            vec![Item::Wait { fence: 0, value: 1 }],
        ],
        host: Some((
            HostStep::WaitThenWrite {
                fence: 0,
                value: 1,
                word: Word::A,
                v: 1,
            },
            false,
        )),
    };
    let text = render(&c);
    if let Err(e) = check_scenario(&text, true) {
        panic!("{e}");
    }
}

/// Bounds of the preemption-bounded comparison ([`check_bounded`]).
const BOUNDS: [u32; 2] = [0, 1];

/// Each outcome a preemption-bounded search reaches, with the fewest preemptions of the
/// schedules that gave it; whether the search reached its bound (explored every schedule
/// within it), and its schedules and runs stopped asleep.
struct Fewest {
    whole: bool,
    schedules: u64,
    /// Runs: schedules, runs stopped asleep and repeats.
    runs: u64,
    asleep: u64,
    fewest: std::collections::BTreeMap<String, u32>,
    /// The first schedule explored of each outcome (its schedule string).
    first: std::collections::BTreeMap<String, String>,
    /// The most preemptions of a schedule explored.
    most: u32,
}

/// Which bounded search [`bounded`] runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Search {
    /// Every schedule within the bound.
    Plain,
    /// With sleep sets across one actor's actions (a shrink's until the reduced one).
    Sleeping,
    /// Bounded partial-order reduction.
    Reduced,
    /// With sleep sets, keeping the states explored (a shrink's phase 1).
    States,
}

fn bounded(
    sc: &pipefence_scenario::plan::Scenario,
    strict: bool,
    k: u32,
    search: Search,
) -> Fewest {
    use pipefence::explore::{Bound, ChoicePoint, ExhaustiveOptions};
    use pipefence_scenario::run::{run, RunOptions};
    let opts = ExhaustiveOptions {
        max_schedules: plain_cap(),
        preemption_bound: Some(k),
        reduction: false,
    };
    let mut fewest = std::collections::BTreeMap::new();
    let mut first = std::collections::BTreeMap::new();
    let mut most = 0;
    let body = |script: &std::sync::Arc<pipefence::explore::Script>| {
        run(sc, &RunOptions::scripted(strict, script.clone()))
    };
    let visit = |mut o: pipefence_scenario::run::Outcome, script: &pipefence::explore::Script| {
        let n = ChoicePoint::preemptions(&script.points());
        most = most.max(n);
        let sig = pipefence_scenario::check::signature(&mut o);
        first
            .entry(sig.clone())
            .or_insert_with(|| script.schedule_string());
        let e = fewest.entry(sig).or_insert(n);
        *e = (*e).min(n);
        true
    };
    let e = match search {
        Search::Sleeping => pipefence::explore::enumerate_bounded_sleeping(&opts, body, visit),
        Search::Reduced => pipefence::explore::enumerate_bounded_reduced(&opts, body, visit),
        Search::Plain => pipefence::explore::enumerate(&opts, body, visit),
        Search::States => pipefence::explore::enumerate_bounded_states(&opts, body, visit),
    };
    Fewest {
        whole: e.complete || e.bound == Some(Bound::PreemptionBound(k)),
        schedules: e.schedules,
        runs: e.schedules + e.sleep_blocked + e.repeated_runs,
        asleep: e.sleep_blocked,
        fewest,
        first,
        most,
    }
}

/// The bounded searches of a generated scenario: for each bound of [`BOUNDS`] up to the first
/// whose plain search does not explore every schedule within it in [`plain_cap`] schedules,
/// the bound, the plain search's result and `search`'s.
fn bounded_beside_plain(
    text: &str,
    strict: bool,
    search: Search,
) -> Result<Vec<(u32, Fewest, Fewest)>, String> {
    let sc = pipefence_scenario::parse("generated.kdl", text)
        .map_err(|e| format!("the generated scenario does not parse: {e:?}\n{text}"))?;
    let mut out = Vec::new();
    for k in BOUNDS {
        let plain = bounded(&sc, strict, k, Search::Plain);
        if !plain.whole {
            break;
        }
        out.push((k, plain, bounded(&sc, strict, k, search)));
    }
    Ok(out)
}

/// The property of a shrink's bounded search with sleep sets
/// (`pipefence::explore::enumerate_bounded_sleeping`) for one scenario and each bound of
/// [`BOUNDS`]: if the plain search bounded so explores every schedule within the bound in
/// [`plain_cap`] schedules, the search with sleep sets does too, in no more schedules, and
/// reaches the same outcomes, each with the same fewest preemptions. Returns the schedules of
/// both searches summed over the bounds compared.
fn check_bounded(text: &str, strict: bool) -> Result<Option<(u64, u64)>, String> {
    let mut sums = None;
    for (k, plain, sleeping) in bounded_beside_plain(text, strict, Search::Sleeping)? {
        let context = || {
            format!(
                "strict {strict}, bound {k}; plain: {} schedules; with sleep sets: whole {}, \
                 {} schedules, {} stopped asleep\n--- plain ---\n{:?}\n--- with sleep sets \
                 ---\n{:?}\n--- scenario ---\n{text}",
                plain.schedules,
                sleeping.whole,
                sleeping.schedules,
                sleeping.asleep,
                plain.fewest,
                sleeping.fewest
            )
        };
        if !sleeping.whole || sleeping.fewest != plain.fewest {
            return Err(format!(
                "the bounded searches differ (outcome: fewest preemptions); {}",
                context()
            ));
        }
        if sleeping.schedules > plain.schedules {
            return Err(format!(
                "the search with sleep sets explored more schedules; {}",
                context()
            ));
        }
        let s = sums.get_or_insert((0, 0));
        s.0 += plain.schedules;
        s.1 += sleeping.schedules;
    }
    Ok(sums)
}

/// The property of a shrink's bounded search that keeps the states it explored
/// (`pipefence::explore::enumerate_bounded_states`, phase 1 of a shrink) for one scenario and
/// each bound of [`BOUNDS`] whose plain search explores every schedule within the bound in
/// [`plain_cap`] schedules: it explores every schedule within the bound too, reaches the same
/// outcomes with the same fewest preemptions, and finds each outcome first in the same
/// schedule as the search with sleep sets alone, in no more schedules. Returns the runs of the
/// search with sleep sets alone and its own (schedules, stopped asleep and repeats), summed
/// over the bounds compared.
fn check_bounded_states(text: &str, strict: bool) -> Result<Option<(u64, u64)>, String> {
    let sc = pipefence_scenario::parse("generated.kdl", text)
        .map_err(|e| format!("the generated scenario does not parse: {e:?}\n{text}"))?;
    let mut sums = None;
    for (k, plain, states) in bounded_beside_plain(text, strict, Search::States)? {
        let sleeping = bounded(&sc, strict, k, Search::Sleeping);
        let context = || {
            format!(
                "strict {strict}, bound {k}; plain: {} schedules; with sleep sets: {} schedules; \
                 keeping states: whole {}, {} schedules\n--- plain ---\n{:?}\n--- keeping \
                 states ---\n{:?}\n--- first with sleep sets ---\n{:?}\n--- first keeping \
                 states ---\n{:?}\n--- scenario ---\n{text}",
                plain.schedules,
                sleeping.schedules,
                states.whole,
                states.schedules,
                plain.fewest,
                states.fewest,
                sleeping.first,
                states.first
            )
        };
        if !states.whole || states.fewest != plain.fewest {
            return Err(format!(
                "the bounded searches differ (outcome: fewest preemptions); {}",
                context()
            ));
        }
        if states.first != sleeping.first || states.schedules > sleeping.schedules {
            return Err(format!(
                "keeping states changed the first schedule of an outcome, or explored more; {}",
                context()
            ));
        }
        let s = sums.get_or_insert((0, 0));
        s.0 += sleeping.runs;
        s.1 += states.runs;
    }
    Ok(sums)
}

/// The property of a shrink's bounded search with partial-order reduction
/// (`pipefence::explore::enumerate_bounded_reduced`, which finds schedules of few preemptions
/// but is not shown to reach every outcome within its bound) for one scenario and each bound
/// of [`BOUNDS`] whose plain bounded search explores every schedule within the bound in
/// [`plain_cap`] schedules: every schedule it explores has at most the bound's preemptions,
/// and every outcome it reaches is one of the plain search's, with no fewer preemptions than
/// the plain search's fewest (a count it reports is a schedule's own). Returns the outcomes
/// of both searches summed over the bounds compared.
fn check_bounded_finder(text: &str, strict: bool) -> Result<Option<(u64, u64)>, String> {
    let mut sums = None;
    for (k, plain, reduced) in bounded_beside_plain(text, strict, Search::Reduced)? {
        let context = || {
            format!(
                "strict {strict}, bound {k}; plain: {} schedules; reduced: {} schedules, the \
                 most preemptions {}\n--- plain ---\n{:?}\n--- reduced ---\n{:?}\n--- \
                 scenario ---\n{text}",
                plain.schedules, reduced.schedules, reduced.most, plain.fewest, reduced.fewest
            )
        };
        if reduced.most > k {
            return Err(format!("a schedule past the bound; {}", context()));
        }
        for (outcome, n) in &reduced.fewest {
            match plain.fewest.get(outcome) {
                None => {
                    return Err(format!(
                        "an outcome the plain search does not reach; {}",
                        context()
                    ))
                }
                Some(p) if n < p => {
                    return Err(format!(
                        "fewer preemptions than the plain search's fewest; {}",
                        context()
                    ))
                }
                Some(_) => {}
            }
        }
        let s = sums.get_or_insert((0, 0));
        s.0 += plain.fewest.len() as u64;
        s.1 += reduced.fewest.len() as u64;
    }
    Ok(sums)
}

/// A shrink's bounded search (`explore/shrink.rs`) explores the orders of one actor's
/// independent actions once (sleep sets in the reducing listing): on generated scenarios, at
/// bounds 0 and 1, it reaches every outcome of the plain bounded search, each with the same
/// fewest preemptions, so a shrink's `fewest: true` stays true of the plain listing.
#[test]
fn d4_bounded_search_with_sleep_sets_keeps_each_outcomes_fewest_preemptions() {
    let (compared, cases, plain, sleeping) = bounded_property(0x5eed_00d5, check_bounded);
    eprintln!(
        "{compared} of {cases} cases compared at bound 0 or more ({plain} plain schedules, \
         {sleeping} with sleep sets)"
    );
}

/// A bounded search's property for one generated scenario and whether it runs in strict mode:
/// two sums over the bounds compared (`None`: none was small enough).
type BoundedCheck = fn(&str, bool) -> Result<Option<(u64, u64)>, String>;

/// Runs `check` (a bounded search's property, [`check_bounded`] or [`check_bounded_finder`])
/// on the generated cases from `seed` ([`runner_config`]), panicking with the first failure;
/// returns the cases compared, the cases, and the two sums `check` returned, added over the
/// cases compared. A good share of the cases is small enough to compare.
fn bounded_property(seed: u64, check: BoundedCheck) -> (u32, u32, u64, u64) {
    let config = runner_config(seed);
    let cases = config.cases;
    let stats = std::cell::RefCell::new((0u32, 0u64, 0u64));
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |c| {
        let text = render(&c);
        if let Some((a, b)) = check(&text, c.strict).map_err(TestCaseError::fail)? {
            let mut s = stats.borrow_mut();
            s.0 += 1;
            s.1 += a;
            s.2 += b;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (compared, a, b) = *stats.borrow();
    assert!(
        compared * 4 >= cases,
        "only {compared} of {cases} cases were small enough to compare"
    );
    (compared, cases, a, b)
}

/// A shrink's bounded search goes no further from a state it explored before
/// (`pipefence::explore::enumerate_bounded_states`): on generated scenarios, at bounds 0 and
/// 1, it reaches every outcome of the plain bounded search, each with the same fewest
/// preemptions, and first in the same schedule as without the states, in fewer runs.
#[test]
fn d4_bounded_search_keeping_states_keeps_each_outcomes_fewest_preemptions_and_first_schedule() {
    let (compared, cases, sleeping, states) = bounded_property(0x5eed_00d7, check_bounded_states);
    eprintln!(
        "{compared} of {cases} cases compared at bound 0 or more ({sleeping} runs with sleep \
         sets, {states} keeping states)"
    );
    // It saves runs (a search that kept no state would pass the rest), where enough cases
    // were compared for some to have states reached twice.
    assert!(
        compared < 10 || states < sleeping,
        "{states} runs keeping states, {sleeping} without"
    );
}

/// A shrink's bounded search with partial-order reduction
/// (`pipefence::explore::enumerate_bounded_reduced`) on generated scenarios, at bounds 0 and
/// 1: its schedules stay within the bound, and each outcome it reports is one the plain
/// bounded search reaches, with no fewer preemptions ([`check_bounded_finder`]).
#[test]
fn d4_bounded_reduced_search_finds_only_outcomes_within_its_bound() {
    let (compared, cases, plain, reduced) = bounded_property(0x5eed_00d6, check_bounded_finder);
    eprintln!(
        "{compared} of {cases} cases compared at bound 0 or more ({plain} outcomes of the plain \
         searches, {reduced} found with partial-order reduction)"
    );
    // It finds most of them (a search that found nothing would pass the rest).
    assert!(
        reduced * 10 >= plain * 9,
        "found {reduced} of the plain searches' {plain} outcomes"
    );
}
