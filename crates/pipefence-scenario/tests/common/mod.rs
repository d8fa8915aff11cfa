//! What the reduction's property tests (`reduction_soundness.rs`, `reduction_sampled.rs`)
//! share: the words and fences their generated scenarios use, the rendering of a queue's items
//! into lists and the actions that submit them, and one search's outcomes.

use pipefence::explore::{ExhaustiveOptions, Parallel};
use pipefence_scenario::check::signature;
use pipefence_scenario::exhaustive::{check_exhaustive_each, ExhaustiveCheckOptions};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// A word that value writes, memory-value waits and host writes use.
#[derive(Debug, Clone, Copy)]
pub enum Word {
    /// `m+0`, 32 bits.
    A,
    /// `m+4`, 32 bits.
    B,
    /// `m+8`, 64 bits.
    Wide,
}

impl Word {
    pub fn addr(self) -> &'static str {
        match self {
            Word::A => "\"m+0\"",
            Word::B => "\"m+4\"",
            Word::Wide => "\"m+8\"",
        }
    }

    pub fn bits(self) -> u32 {
        match self {
            Word::Wide => 64,
            _ => 32,
        }
    }

    /// What a host access of the word adds to say its width.
    pub fn host_width(self) -> &'static str {
        if self.bits() == 64 {
            " width=64"
        } else {
            ""
        }
    }
}

/// A word: `m+0` mostly.
pub fn word() -> impl Strategy<Value = Word> {
    prop_oneof![3 => Just(Word::A), 1 => Just(Word::B), 1 => Just(Word::Wide)]
}

/// A fence: `f` mostly, so that waits meet signals.
pub fn fence() -> impl Strategy<Value = u8> {
    prop_oneof![3 => Just(0u8), 1 => Just(1u8)]
}

pub fn fence_name(f: u8) -> &'static str {
    if f == 0 {
        "f"
    } else {
        "g"
    }
}

/// `wait-valueN WORD` (`greater-equal`, or `equal`) on the PFP or the ME.
pub fn render_wait(out: &mut String, word: Word, pfp: bool, equal: bool, reference: u8) {
    let _ = writeln!(
        out,
        "    wait-value{} {} cmp={} reference={reference} engine={}",
        word.bits(),
        word.addr(),
        if equal { "equal" } else { "greater-equal" },
        if pfp { "pfp" } else { "me" },
    );
}

/// `write-valueN-top` / `-bop` of `source` (`value=N`, `source=gpu-timestamp`), with or
/// without `flush=l2-writeback`.
pub fn render_write(out: &mut String, word: Word, top: bool, writeback: bool, source: &str) {
    let _ = writeln!(
        out,
        "    write-value{}-{} {} {source}{}",
        word.bits(),
        if top { "top" } else { "bop" },
        word.addr(),
        if writeback { " flush=l2-writeback" } else { "" },
    );
}

/// One item of a queue's program, in submission order.
#[derive(Debug, Clone)]
pub enum Item<C> {
    /// `signal QUEUE FENCE VALUE`.
    Signal { fence: u8, value: u8 },
    /// `wait QUEUE FENCE VALUE`.
    Wait { fence: u8, value: u8 },
    /// A command, executed in a list with the commands next to it.
    Cmd(C),
}

/// Queue `q`'s items: one list per run of consecutive commands into `out` (each command by
/// `render_cmd`), and the actions that submit them and the fence operations into `actions`.
pub fn render_items<C>(
    out: &mut String,
    actions: &mut String,
    q: usize,
    items: &[Item<C>],
    render_cmd: impl Fn(&mut String, &C),
) {
    let mut open = false;
    let mut lists = 0;
    for it in items {
        match it {
            Item::Cmd(cmd) => {
                if !open {
                    let _ = writeln!(out, "list q{q}l{lists} kind=compute {{");
                    let _ = writeln!(actions, "execute q{q} q{q}l{lists}");
                    open = true;
                    lists += 1;
                }
                render_cmd(out, cmd);
            }
            Item::Signal { fence, value } | Item::Wait { fence, value } => {
                if open {
                    out.push_str("}\n");
                    open = false;
                }
                let verb = if matches!(it, Item::Signal { .. }) {
                    "signal"
                } else {
                    "wait"
                };
                let _ = writeln!(actions, "{verb} q{q} {} {value}", fence_name(*fence));
            }
        }
    }
    if open {
        out.push_str("}\n");
    }
}

/// What one exhaustive search found.
pub struct Found {
    pub complete: bool,
    pub schedules: u64,
    /// The outcome signatures (`check::signature`).
    pub outcomes: BTreeSet<String>,
}

/// The exhaustive search of `sc` that `check --exhaustive` runs (two threads, no shrink), up
/// to `cap` schedules.
pub fn search(
    sc: &pipefence_scenario::plan::Scenario,
    strict: bool,
    reduction: bool,
    cap: u64,
) -> Found {
    let mut outcomes = BTreeSet::new();
    let r = check_exhaustive_each(
        sc,
        &ExhaustiveCheckOptions {
            strict,
            bounds: ExhaustiveOptions {
                max_schedules: cap,
                preemption_bound: None,
                reduction,
            },
            shrink: None,
            parallel: Parallel {
                jobs: 2,
                shard: None,
            },
            fail_fast: false,
        },
        |_| {},
        |_, o| {
            outcomes.insert(signature(&mut o.clone()));
        },
    );
    Found {
        complete: r.complete,
        schedules: r.schedules,
        outcomes,
    }
}
