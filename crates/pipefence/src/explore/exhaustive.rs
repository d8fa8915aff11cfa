//! Exhaustive exploration: a stateless depth-first enumeration of every schedule of the
//! deterministic driver (`docs/exploration.md`).
//!
//! Each schedule is run from the start with a [`Script`] that follows a prefix of tries, then
//! chooses canonically, and records its choice points. The search then backtracks to the
//! deepest choice point with an alternative not yet tried (and, with a preemption bound,
//! allowed), and runs the prefix up to that point plus that alternative. A run whose new
//! alternative turns out to be a blocked engine stage changed nothing at that point: it is the
//! same as a schedule already explored, so it is stopped and not counted. A prefix replays the
//! tries of its last point that found their stage blocked, so the run knows them too: taking
//! another alternative there is a preemption only when the continuing one could go on. No reduction is
//! applied: schedules that differ only in the order of independent actions are counted apart.

use crate::choice::{ChoicePoint, Script};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Schedules explored at most by default ([`ExhaustiveOptions::max_schedules`]).
pub const DEFAULT_MAX_SCHEDULES: u64 = 10_000;

/// How to explore exhaustively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExhaustiveOptions {
    /// Stop after this many schedules (the result is then not complete).
    pub max_schedules: u64,
    /// Explore only schedules with at most this many preemptions (CHESS): switching away from
    /// the actor that ran last while it was still enabled. `None`: no bound.
    pub preemption_bound: Option<u32>,
    /// Explore one schedule per equivalence class of schedules that differ only in the order
    /// of independent actions (partial-order reduction, `explore/dpor.rs`). A preemption
    /// bound turns it off (the bounded search counts schedules, not classes). Off by default:
    /// it is sound only when the program's threads share nothing but pipefence objects
    /// (buffers, fences, queues), as scenarios do; a Rust closure that shares its own atomics
    /// or locks between host threads must leave it off (the reduction cannot see them).
    pub reduction: bool,
}

impl Default for ExhaustiveOptions {
    fn default() -> Self {
        ExhaustiveOptions {
            max_schedules: DEFAULT_MAX_SCHEDULES,
            preemption_bound: None,
            reduction: false,
        }
    }
}

/// What stopped an exploration before it explored every schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `max_schedules` schedules were explored and some were left.
    MaxSchedules(u64),
    /// Some schedules had more preemptions than this.
    PreemptionBound(u32),
    /// The caller stopped it.
    Stopped,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::MaxSchedules(n) => write!(f, "--max-schedules {n}"),
            Bound::PreemptionBound(k) => write!(f, "--preemption-bound {k}"),
            Bound::Stopped => write!(f, "stopped"),
        }
    }
}

/// The result of an exhaustive exploration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enumeration {
    /// Every schedule was explored: no bound cut any branch. Only then is the result a proof
    /// (for this program, in this model).
    pub complete: bool,
    /// What stopped it, when not complete.
    pub bound: Option<Bound>,
    /// Schedules explored (each run to its end and handed to the visitor).
    pub schedules: u64,
    /// Runs stopped early as the same as a schedule already explored (their new alternative
    /// was a blocked engine stage).
    pub repeated_runs: u64,
    /// The most choice points of one schedule.
    pub max_depth: usize,
    /// Runs stopped because every action they could take next was asleep (equivalent to a
    /// schedule already explored; reduction only).
    pub sleep_blocked: u64,
    /// The search reduced by partial order: `schedules` counts classes of equivalent schedules.
    pub reduced: bool,
}

impl Enumeration {
    /// Nothing explored yet (not complete, no bound).
    pub(super) fn empty(reduced: bool) -> Self {
        Enumeration {
            complete: false,
            bound: None,
            schedules: 0,
            repeated_runs: 0,
            max_depth: 0,
            sleep_blocked: 0,
            reduced,
        }
    }
}

#[derive(Debug)]
struct Node {
    point: ChoicePoint,
    tried: BTreeSet<u32>,
    /// Preemptions of the path before this point.
    before: u32,
}

impl Node {
    fn new(point: ChoicePoint, before: u32) -> Self {
        let mut tried: BTreeSet<u32> = point.disabled.iter().copied().collect();
        tried.extend(point.taken);
        Node {
            point,
            tried,
            before,
        }
    }

    /// Preemptions of the path up to and including this point's taken alternative.
    fn through(&self) -> u32 {
        self.before + u32::from(self.point.taken.is_some_and(|t| self.point.preempts(t)))
    }
}

/// Replaces `point` by a newer run's record of it, keeping the alternatives earlier runs found
/// blocked there.
pub(super) fn refresh_point(point: &mut ChoicePoint, newer: &ChoicePoint) {
    let known = std::mem::replace(point, newer.clone()).disabled;
    for a in known {
        if !point.disabled.contains(&a) {
            point.disabled.push(a);
        }
    }
}

/// The tries that replay a run up to the choice point whose first try is `start`, then take
/// `alt` there.
pub(super) fn branch_prefix(tries: &[u32], start: usize, alt: u32) -> Vec<u32> {
    let mut prefix = tries[..start].to_vec();
    prefix.push(alt);
    prefix
}

/// The tries that replay a run up to the try that took choice point `d`'s alternative (its
/// tries that found their stage blocked included, with the choices made within them), then
/// take `alt` there; and the index of that try. Replaying the blocked tries keeps what the
/// run learnt at `d` (which alternatives were blocked), so the new run's choice point says
/// the same: taking `alt` there preempts only an actor that could go on.
pub(super) fn branch_prefix_replaying(
    tries: &[u32],
    points: &[ChoicePoint],
    d: usize,
    alt: u32,
) -> (Vec<u32>, usize) {
    let start = points[d].first_try;
    let end = points[d + 1..]
        .iter()
        .find(|p| p.scheduling)
        .map_or(tries.len(), |p| p.first_try);
    let within: BTreeSet<usize> = points[d + 1..]
        .iter()
        .take_while(|p| !p.scheduling)
        .map(|p| p.first_try)
        .collect();
    let taken = (start..end)
        .rev()
        .find(|i| !within.contains(i))
        .unwrap_or(start);
    (branch_prefix(tries, taken, alt), taken)
}

/// Whether a run that followed a prefix reached its choice point `d` at the same try
/// (`first_try`) as the run the prefix came from.
pub(super) fn replayed(points: &[ChoicePoint], d: usize, first_try: usize) -> bool {
    points.get(d).is_some_and(|p| p.first_try == first_try)
}

/// What an exploration panics with when the program did not repeat the same choices for the
/// same prefix ([`assert_replayed`]): a caller that reports it as the program's fault (the C
/// API's `E_FAIL`) recognises it by this text.
pub const NOT_REPEATED: &str = "exhaustive exploration: the program did not repeat the same \
     choices for the same prefix (it must depend on nothing but the schedule)";

/// Panics unless [`replayed`]: the program depends on more than the schedule.
pub(super) fn assert_replayed(points: &[ChoicePoint], d: usize, first_try: usize) {
    assert!(replayed(points, d, first_try), "{NOT_REPEATED}");
}

/// What a search hands its visitor after each run.
pub(super) enum Run<'a, T> {
    /// A schedule explored to its end: the body's value and the run's script.
    Schedule(T, &'a Arc<Script>),
    /// A schedule of a subtree explored ahead of time (reduction on threads only,
    /// `explore/speculate.rs`): the body's value and the run's schedule string (its script
    /// is not kept), and its number of choice points.
    Ahead(T, &'a str, usize),
    /// A run stopped as the same as a schedule already explored (its new alternative was a
    /// blocked engine stage).
    Repeated,
    /// A run stopped because every action it could take next was asleep (reduction only),
    /// with its number of choice points up to the stop.
    SleepBlocked(usize),
    /// A run that did not follow its prefix: cut short from outside (an interrupted check:
    /// the visitor returns `false`), or a program that depends on more than the schedule
    /// (the visitor returns `true`, and the search panics).
    Diverged,
}

/// The first run of a search that explores only the schedules agreeing with it at its first
/// `frozen` choice points (a unit of a parallel exploration, `explore/parallel.rs`).
pub(super) struct Root<T> {
    pub(super) script: Arc<Script>,
    pub(super) value: T,
    pub(super) frozen: usize,
}

/// Explores every schedule of `body` (each run on a device whose description has the script
/// it is handed as [`crate::DeviceDesc::script`]), handing each explored schedule's value and
/// script (its [`Script::schedule_string`] replays it) to `visit`, which returns `false` to
/// stop. Runs stopped as repeats are not handed on.
pub fn enumerate<T>(
    opts: &ExhaustiveOptions,
    body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(T, &Script) -> bool,
) -> Enumeration {
    let visit = |r: Run<'_, T>| match r {
        Run::Schedule(v, s) => visit(v, s),
        // Only a search on threads takes subtrees explored ahead.
        Run::Ahead(v, s, _) => visit(v, &Script::from_schedule_string(s).unwrap_or_default()),
        Run::Repeated | Run::SleepBlocked(_) | Run::Diverged => true,
    };
    if opts.reduction && opts.preemption_bound.is_none() {
        return super::dpor::enumerate_reduced(opts, body, visit);
    }
    search_plain(opts, None, body, visit)
}

/// The plain search: every schedule (within the preemption bound) from `root` on, or from
/// the start.
pub(super) fn search_plain<T>(
    opts: &ExhaustiveOptions,
    root: Option<Root<T>>,
    mut body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(Run<'_, T>) -> bool,
) -> Enumeration {
    let frozen = root.as_ref().map_or(0, |r| r.frozen);
    let mut root = root;
    let mut path: Vec<Node> = Vec::new();
    // The choice points of the last run explored, as it recorded them: `path` is cut back to
    // a branch point by repeated runs, and its points keep what earlier runs found blocked,
    // so it cannot stand for them.
    let mut run_points: Vec<ChoicePoint> = Vec::new();
    let mut tries: Vec<u32> = Vec::new();
    let mut next: Option<(usize, u32)> = None;
    let mut result = Enumeration::empty(false);
    let mut preemption_cut = false;
    loop {
        let (script, value) = match (root.take(), next) {
            (Some(r), _) => (r.script, r.value),
            (None, next) => {
                let script = Arc::new(match next {
                    None => Script::new(Vec::new()),
                    Some((d, alt)) => {
                        let (prefix, at) = branch_prefix_replaying(&tries, &run_points, d, alt);
                        Script::exploring(prefix, at)
                    }
                });
                let value = body(&script);
                (script, value)
            }
        };
        let points = script.points();
        let from = match next {
            None => 0,
            Some((d, alt)) => {
                if !replayed(&points, d, path[d].point.first_try) && !visit(Run::Diverged) {
                    result.bound = Some(Bound::Stopped);
                    return result;
                }
                assert_replayed(&points, d, path[d].point.first_try);
                path.truncate(d + 1);
                path[d].tried.insert(alt);
                if points[d].disabled.contains(&alt) {
                    path[d].point.disabled.push(alt);
                    result.repeated_runs += 1;
                    if !visit(Run::Repeated) {
                        result.bound = Some(Bound::Stopped);
                        return result;
                    }
                    usize::MAX
                } else {
                    // A repeated run's alternative is not replayed: keep what it found.
                    refresh_point(&mut path[d].point, &points[d]);
                    d + 1
                }
            }
        };
        if from != usize::MAX {
            for p in &points[from..] {
                let before = path.last().map_or(0, Node::through);
                path.push(Node::new(p.clone(), before));
            }
            tries = script.tries();
            run_points = points.clone();
            result.schedules += 1;
            result.max_depth = result.max_depth.max(points.len());
            if !visit(Run::Schedule(value, &script)) {
                result.bound = Some(Bound::Stopped);
                return result;
            }
        }
        next = None;
        'search: for d in (frozen..path.len()).rev() {
            let n = &path[d];
            for alt in 0..n.point.alternatives {
                if n.tried.contains(&alt) {
                    continue;
                }
                if let Some(k) = opts.preemption_bound {
                    if n.before + u32::from(n.point.preempts(alt)) > k {
                        preemption_cut = true;
                        continue;
                    }
                }
                next = Some((d, alt));
                break 'search;
            }
        }
        if next.is_none() {
            result.complete = !preemption_cut;
            if preemption_cut {
                result.bound = opts.preemption_bound.map(Bound::PreemptionBound);
            }
            return result;
        }
        if result.schedules >= opts.max_schedules {
            result.bound = Some(Bound::MaxSchedules(opts.max_schedules));
            return result;
        }
    }
}
