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

use crate::choice::{ActorKey, ChoicePoint, Event, Script};
use crate::footprint::Footprint;
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
    /// A search with sleep sets ([`Sleep::Plain`]): the sleep set when the point first
    /// opened, and the actors explored here so far, each with its action's footprint.
    opening: Arc<Vec<(ActorKey, Footprint)>>,
    slept: Vec<(ActorKey, Footprint)>,
    /// With sleep sets and no preemption left here: the actors of the plain listing whose
    /// alternative explored here ran a free block ([`Block`]), so that every other
    /// alternative of theirs here is the same schedule up to the order of independent actions.
    covered: Vec<ActorKey>,
}

impl Node {
    fn new(point: ChoicePoint, before: u32) -> Self {
        let mut tried: BTreeSet<u32> = point.disabled.iter().copied().collect();
        tried.extend(point.taken);
        Node {
            opening: point.sleep.clone(),
            point,
            tried,
            before,
            slept: Vec::new(),
            covered: Vec::new(),
        }
    }

    /// Whether alternative `alt`'s actor was asleep when this point opened.
    fn asleep(&self, alt: u32) -> bool {
        self.point
            .actors
            .get(alt as usize)
            .is_some_and(|k| self.opening.iter().any(|(s, _)| *s == k))
    }

    /// Preemptions of the path up to and including this point's taken alternative.
    fn through(&self) -> u32 {
        self.before + u32::from(self.point.taken.is_some_and(|t| self.point.preempts(t)))
    }
}

/// A bounded search's scan of its path from the deepest point up ([`Sleep::Plain`]): the run
/// of consecutive scheduling points, from the point scanned on, whose actions were all of one
/// actor of the plain listing (two groups of one dispatch, two write-backs of one queue).
#[derive(Default)]
struct Block {
    /// An action of that actor, and the footprints of the run's actions from the point
    /// scanned last on.
    actor: Option<ActorKey>,
    footprints: Vec<Footprint>,
    /// Those actions are independent of each other, none chose within itself or removed the
    /// device, and the scheduling point after them lists nothing of that actor.
    free: bool,
    /// The scheduling point scanned before (the next one in the run).
    after: Option<usize>,
    /// A choice within an action with more than one alternative was scanned since.
    within: bool,
}

impl Block {
    /// Scans point `d` (the one before the point scanned last): whether the actions from it
    /// to the end of its run of one actor's actions make a free block (see `free`). Then,
    /// with no preemption left at `d`, any other alternative of that actor there starts a
    /// schedule that runs the same actions in another order, up to the same state: the
    /// same schedule up to the order of independent actions, with as many preemptions.
    fn scan(&mut self, path: &[Node], d: usize, events: &[Event], blocked: bool) -> bool {
        let p = &path[d].point;
        if blocked && d + 1 == path.len() {
            // Where the run stopped asleep: every alternative of the actor that ran last is
            // asleep there, each with the footprint of its action; they are what the actor
            // had left (nothing an actor of the plain listing does gives it more groups or
            // lines).
            self.after = Some(d);
            self.within = false;
            self.footprints.clear();
            self.actor = p.continuing.and_then(|c| p.actors.get(c as usize));
            self.free = self.actor.is_some();
            if let Some(c) = self.actor {
                for (alt, a) in p.actors.iter().enumerate() {
                    if !a.same_plain_actor(c) || p.beside_step(alt as u32) {
                        continue;
                    }
                    let asleep = p.sleep.iter().find(|(k, _)| *k == a);
                    match asleep {
                        Some((_, f))
                            if !p.disabled.contains(&(alt as u32))
                                && self.footprints.iter().all(|g| !g.conflicts(f)) =>
                        {
                            self.footprints.push(f.clone());
                        }
                        _ => self.free = false,
                    }
                }
            }
            return false;
        }
        if !p.scheduling {
            self.within |= p.alternatives > 1;
            return false;
        }
        let taken = p.taken.and_then(|t| p.actors.get(t as usize));
        let after = self.after.replace(d);
        let within = std::mem::take(&mut self.within);
        let Some(t) = taken else {
            self.actor = None;
            self.free = false;
            return false;
        };
        // Events are in the order of their points.
        let first = events.partition_point(|e| e.point < d);
        let ran = events.get(first).is_some_and(|e| e.point == d);
        let fp = super::dpor::step_footprint(events, d);
        let sound = ran && !within && !fp.is_removal();
        if self.actor.is_some_and(|a| a.same_plain_actor(t)) {
            self.free = self.free && sound && self.footprints.iter().all(|f| !f.conflicts(&fp));
        } else {
            let ends = after.is_some_and(|a| {
                let next = &path[a].point;
                !next.actors.iter().any(|k| k.same_plain_actor(t))
            });
            self.actor = Some(t);
            self.footprints.clear();
            self.free = sound && ends;
        }
        self.footprints.push(fp);
        self.free
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
/// same prefix (`assert_replayed`): a caller that reports it as the program's fault (the C
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
    search_plain(opts, None, Sleep::None, body, visit)
}

/// The preemption-bounded search of a shrink (`explore/shrink.rs`): every schedule with at
/// most `opts.preemption_bound` preemptions (`opts.reduction` is not used), up to the order of
/// independent actions of one actor of the plain listing: two groups of one dispatch, or two
/// write-backs of one queue, that touch nothing of each other's and run one after the other
/// are explored in one order (sleep sets over that relation, in the reducing listing), and a
/// run of such actions where no preemption is left is explored in one order. Swapping two
/// such actions keeps a schedule's preemptions, so each outcome of a schedule within the bound
/// is reached, with the fewest preemptions of any schedule that gives it, in fewer schedules
/// than [`enumerate`] with the same bound explores (`docs/exploration.md`, "Shrinking").
/// `visit` as in [`enumerate`]; [`Enumeration::sleep_blocked`] counts the runs stopped
/// asleep, which count against `opts.max_schedules` too (four per schedule).
pub fn enumerate_bounded_sleeping<T>(
    opts: &ExhaustiveOptions,
    body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(T, &Script) -> bool,
) -> Enumeration {
    search_plain(opts, None, Sleep::Plain, body, |r| match r {
        Run::Schedule(v, s) => visit(v, s),
        _ => true,
    })
}

/// [`enumerate_bounded_sleeping`] keeping the states it explored (a shrink's phase 1,
/// `explore/shrink.rs`): a run that reaches a state it explored before, with the same actor
/// able to go on, where that visit had spent no more preemptions and had no actor asleep
/// that is not asleep now, explores nothing new from there (every schedule from there is
/// one from the first visit, or one a sleeping actor's exploration covers), so it is not
/// handed to `visit` but counted in [`Enumeration::repeated_runs`], and no branch starts
/// past that state. A state is known by
/// its trace (`explore/visited.rs`): the steps taken and the order of each conflicting pair.
/// It visits the schedules of [`enumerate_bounded_sleeping`] in the same order but for those
/// it skips, each of which repeats an outcome visited before with as many preemptions: the
/// first schedule of each outcome is the same, found in fewer runs.
pub fn enumerate_bounded_states<T>(
    opts: &ExhaustiveOptions,
    body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(T, &Script) -> bool,
) -> Enumeration {
    let mut visited = super::visited::Visited::default();
    search_plain_in(
        opts,
        None,
        Sleep::Plain,
        Some(&mut visited),
        body,
        |r| match r {
            Run::Schedule(v, s) => visit(v, s),
            _ => true,
        },
    )
}

/// A preemption-bounded search with partial-order reduction, which finds schedules of few
/// preemptions (a shrink's, `explore/shrink.rs`): the reduced search of [`enumerate`] where
/// an alternative past `opts.preemption_bound` is left, where each alternative a race (or
/// another of the search's rules) adds is also added where the actor that ran there started
/// its run of actions (bounded partial-order reduction, Coons, Musuvathi and McKinley, OOPSLA
/// 2013), where a run never preempts past its branch (it stops asleep instead), and where an
/// explored actor sleeps in a sibling only where taking it first costs no more preemptions
/// (`explore/dpor.rs`, `sleeps_within_bound`). Every schedule it hands `visit` has at most
/// the bound's preemptions. It is not shown to reach every outcome within the bound: the
/// reduced search's rules count on its sleep sets steering its runs, and a diamond of four
/// queues whose last one does not wait for the copy has an outcome with one preemption it
/// does not reach at bound 1. So `complete` says only that no branch was left; what it finds
/// is a schedule's own count, never a proof of the fewest ([`enumerate_bounded_sleeping`]
/// is the bounded search that is). Without a bound it is the reduced search. `visit` as in
/// [`enumerate`].
pub fn enumerate_bounded_reduced<T>(
    opts: &ExhaustiveOptions,
    body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(T, &Script) -> bool,
) -> Enumeration {
    super::dpor::enumerate_reduced(opts, body, |r| match r {
        Run::Schedule(v, s) => visit(v, s),
        _ => true,
    })
}

/// Whether the plain search keeps sleep sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sleep {
    /// None: every schedule (within the preemption bound) is explored.
    None,
    /// Sleep sets across the actions of one actor of the plain listing only, in the reducing
    /// listing ([`Script::bounded`]): two independent groups of one dispatch (or write-backs
    /// of two lines of one queue) one after the other are explored in one order. Swapping
    /// them keeps a schedule's preemptions, so a preemption-bounded search still reaches
    /// every outcome of a schedule within its bound, and a schedule of the fewest
    /// preemptions of each (a shrink's iterated bound, `explore/shrink.rs`); it counts
    /// fewer schedules.
    Plain,
}

impl Sleep {
    /// The plain search's first run, from the start (with sleep sets, a bounded one's).
    pub(super) fn first_script(self) -> Script {
        match self {
            Sleep::None => Script::new(Vec::new()),
            Sleep::Plain => Script::bounded(Vec::new(), None, Vec::new()),
        }
    }

    /// The plain search's run of a branch: it replays `prefix` up to its try `at`
    /// ([`branch_prefix_replaying`]), which takes the branch's alternative; with sleep sets,
    /// the actors of `opening` (the point's sleep set when it opened) and of `slept` (its
    /// alternatives explored before) are asleep from there.
    pub(super) fn branch_script(
        self,
        (prefix, at): (Vec<u32>, usize),
        opening: &[(ActorKey, Footprint)],
        slept: &[(ActorKey, Footprint)],
    ) -> Script {
        match self {
            Sleep::None => Script::exploring(prefix, at),
            Sleep::Plain => {
                let mut asleep = opening.to_vec();
                asleep.extend_from_slice(slept);
                Script::bounded(prefix, Some(at), asleep)
            }
        }
    }
}

/// The plain search: every schedule (within the preemption bound) from `root` on, or from
/// the start; with `sleep`, up to the order of independent actions of one actor.
pub(super) fn search_plain<T>(
    opts: &ExhaustiveOptions,
    root: Option<Root<T>>,
    sleep: Sleep,
    body: impl FnMut(&Arc<Script>) -> T,
    visit: impl FnMut(Run<'_, T>) -> bool,
) -> Enumeration {
    search_plain_in(opts, root, sleep, None, body, visit)
}

/// [`search_plain`], and with sleep sets and `visited`, a run that reaches a state explored
/// before (`explore/visited.rs`) goes no further in the search: it is handed on as a repeat,
/// and no branch starts past that state.
pub(super) fn search_plain_in<T>(
    opts: &ExhaustiveOptions,
    root: Option<Root<T>>,
    sleep: Sleep,
    mut visited: Option<&mut super::visited::Visited>,
    mut body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(Run<'_, T>) -> bool,
) -> Enumeration {
    let sleepy = sleep == Sleep::Plain;
    let frozen = root.as_ref().map_or(0, |r| r.frozen);
    let mut root = root;
    let mut path: Vec<Node> = Vec::new();
    // The choice points of the last run explored, as it recorded them: `path` is cut back to
    // a branch point by repeated runs, and its points keep what earlier runs found blocked,
    // so it cannot stand for them.
    let mut run_points: Vec<ChoicePoint> = Vec::new();
    // And its events (with sleep sets).
    let mut run_events: Vec<Event> = Vec::new();
    // The path ends where that run stopped asleep.
    let mut path_blocked = false;
    let mut tries: Vec<u32> = Vec::new();
    let mut next: Option<(usize, u32)> = None;
    let mut result = Enumeration::empty(false);
    let mut preemption_cut = false;
    loop {
        let (script, value) = match (root.take(), next) {
            (Some(r), _) => (r.script, r.value),
            (None, next) => {
                let script = Arc::new(match next {
                    None => sleep.first_script(),
                    Some((d, alt)) => sleep.branch_script(
                        branch_prefix_replaying(&tries, &run_points, d, alt),
                        &path[d].opening,
                        &path[d].slept,
                    ),
                });
                let value = body(&script);
                (script, value)
            }
        };
        let mut points = script.points();
        // Where the run stopped asleep (the point, and the try made there).
        let stop = if sleepy {
            script.sleep_blocked_point().zip(script.sleep_blocked_try())
        } else {
            None
        };
        let blocked = stop.is_some();
        if let Some((b, _)) = stop {
            // Every alternative left there was asleep: no schedule from there is new.
            points.truncate(b + 1);
        }
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
                    path_blocked = false;
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
            path_blocked = blocked;
            if sleepy {
                run_events = script.events();
            }
            if let Some((b, t)) = stop {
                // What the run did from the try that found everything asleep on (the driver
                // performs it, then stops the run) is not part of the search's tree: a branch
                // there replays the tries up to it.
                tries.truncate(t + 1);
                run_events.retain(|e| e.point < b);
            }
            run_points = points;
            // A state explored before: nothing past it is new.
            let seen = visited.as_deref_mut().filter(|_| sleepy).and_then(|v| {
                // A unit's points before `frozen` are not branched here: only the
                // states from there on are explored to their end.
                v.first_seen(&run_points, &run_events, from.max(frozen), |d| {
                    path[d].before
                })
            });
            if let Some(h) = seen {
                for n in &mut path[h..] {
                    n.tried.extend(0..n.point.alternatives);
                }
            }
            let run = if seen.is_some() {
                result.repeated_runs += 1;
                Run::Repeated
            } else if blocked {
                result.sleep_blocked += 1;
                Run::SleepBlocked(run_points.len())
            } else {
                result.schedules += 1;
                result.max_depth = result.max_depth.max(run_points.len());
                Run::Schedule(value, &script)
            };
            if !visit(run) {
                result.bound = Some(Bound::Stopped);
                return result;
            }
        }
        next = None;
        let mut block = Block::default();
        'search: for d in (frozen..path.len()).rev() {
            // With sleep sets and no preemption left below this point: the actor that ran
            // here runs on until it has nothing left, and when those steps were independent
            // of each other, every other order of them is the same schedule.
            // (Preemptions only add up along the path: the points with none left are its
            // last ones, each scanned in turn from the deepest.)
            let spent = sleepy && opts.preemption_bound == Some(path[d].before);
            let free = spent && block.scan(&path, d, &run_events, path_blocked);
            let n = &mut path[d];
            let taken = n.point.taken.and_then(|t| n.point.actors.get(t as usize));
            if let Some(t) = taken.filter(|_| free) {
                // Kept for the alternatives of that actor listed here after another actor's
                // (a free choice lists them mixed: a queue's write-backs among a dispatch's
                // groups): each of them is that block in another order too.
                if !n.covered.iter().any(|c| c.same_plain_actor(t)) {
                    n.covered.push(t);
                }
            }
            let n = &path[d];
            for alt in 0..n.point.alternatives {
                if n.tried.contains(&alt) || sleepy && n.asleep(alt) || n.point.beside_step(alt) {
                    continue;
                }
                if let Some(k) = opts.preemption_bound {
                    if n.before + u32::from(n.point.preempts(alt)) > k {
                        preemption_cut = true;
                        continue;
                    }
                }
                if n.point
                    .actors
                    .get(alt as usize)
                    .is_some_and(|a| n.covered.iter().any(|c| c.same_plain_actor(a)))
                {
                    continue;
                }
                next = Some((d, alt));
                break 'search;
            }
        }
        if let Some((d, _)) = next.filter(|_| sleepy) {
            // The alternative explored there until now sleeps in its siblings.
            let n = &mut path[d];
            super::dpor::note_slept(&mut n.slept, &n.point, d, &run_events);
        }
        if next.is_none() {
            result.complete = !preemption_cut;
            if preemption_cut {
                result.bound = opts.preemption_bound.map(Bound::PreemptionBound);
            }
            return result;
        }
        // Runs stopped as repeats or asleep count against the bound too (four of them per
        // schedule allowed, as the reduced search counts them): a search whose runs mostly
        // stop asleep still ends.
        let runs = result.schedules + result.repeated_runs + result.sleep_blocked;
        if result.schedules >= opts.max_schedules || runs >= opts.max_schedules.saturating_mul(4) {
            result.bound = Some(Bound::MaxSchedules(opts.max_schedules));
            return result;
        }
    }
}
