//! Exhaustive exploration on many threads, or in shards on many machines, with the same
//! result whatever the number of threads (`docs/exploration.md`, "Parallel and sharded").
//!
//! The search is cut into *units*, each the subtree of schedules that agree on their first
//! choices. The top of the tree is expanded breadth-first until there are at least
//! [`TARGET_UNITS`] units (or nothing is left to expand): at each choice point expanded, every
//! alternative becomes a unit (within the preemption bound; for the reduced search and the
//! bounded one with sleep sets, every alternative not asleep, the siblings explored before it
//! asleep in it, as plain sleep sets have it). A unit is then explored on its own from its
//! first run (the one that created it), by the plain search, the bounded one with sleep sets
//! across one actor's actions ([`Mode::Sleepy`]) or source-DPOR over the choice points below
//! the expanded ones: the races it finds above them need no backtracking, since every
//! alternative there is a unit.
//!
//! The units are a function of the program alone, not of the threads or shards, and each is
//! explored deterministically; their results are handed on in the units' order, so the
//! visitor sees the same schedules in the same order whatever the number of threads. A shard
//! `I/N` explores the `I`-th of `N` contiguous blocks of units: the shards in index order
//! explore the units in order, so merging their reports finds the failures in the same order.

use super::dpor::{
    branch_spec, first_run, note_slept, run_record, search_reduced, ClockMatters, Direct,
};
use super::exhaustive::{
    assert_replayed, branch_prefix_replaying, refresh_point, search_plain_in, Bound, Enumeration,
    ExhaustiveOptions, Root, Run, Sleep,
};
use super::visited::Visited;
use crate::choice::{ActorKey, ChoicePoint, Event, Script};
use crate::footprint::Footprint;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// The top of the tree is expanded until there are at least this many units.
pub const TARGET_UNITS: usize = 128;

/// Records a unit's worker sends at once (and at the unit's end).
const BATCH: usize = 32;

/// Units expanded at once while expanding the top (the heaviest first).
const EXPAND_AT_ONCE: usize = 8;

/// A choice within an action with more alternatives than this is not expanded into units
/// (each unit is a run made at once, whatever the bound on schedules): the unit that reaches
/// it explores it on its own. (Which group of a dispatch of billions completes is a choice
/// among billions; a scheduling point lists at most 4,096 groups and the other actors.)
const MAX_EXPANDED_ALTERNATIVES: u32 = 4096;

/// The most threads a check runs (more asked for run this many): each thread holds a stack
/// and the kernel's maps for it, and thousands of them exhaust a process's memory maps, which
/// aborts it when a thread cannot set up its stack guard.
pub const MAX_JOBS: usize = 1024;

/// How to spread an exhaustive exploration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    /// Threads that explore units (at least 1; at most [`MAX_JOBS`] run).
    pub jobs: usize,
    /// Explore only shard `index` of `total` (`0 <= index < total`): the `index`-th of
    /// `total` contiguous blocks of units, so the shards in index order explore the units in
    /// order. `None`: every unit.
    pub shard: Option<(u64, u64)>,
}

impl Default for Parallel {
    fn default() -> Self {
        Parallel {
            jobs: 1,
            shard: None,
        }
    }
}

/// What a parallel exploration hands its visitor, in the units' order.
#[derive(Debug)]
pub enum Seen<'a, T> {
    /// An explored schedule: the body's value and the schedule string that replays it.
    Schedule(T, &'a str),
    /// Forget every schedule handed on so far: the search starts again (a run wrote a
    /// timestamp, so reads of the clock join the dependence relation). Reduced search only.
    Restart,
}

/// One unit: its first run, and how many of its first choice points it shares with every
/// schedule it explores.
struct Unit<T> {
    script: Arc<Script>,
    value: T,
    frozen: usize,
    /// Runs found to repeat a schedule while expanding the top (counted with this unit).
    repeated: u64,
    /// The preemption bound cut alternatives while expanding the top (at this unit's node).
    cut: bool,
    /// How large its subtree looks ([`weight`]); 0 when there is nothing to expand.
    weight: f64,
}

/// A record a unit's worker sends.
enum Rec<T> {
    Schedule(T, String),
    Repeated,
    SleepBlocked,
    End(Result<Enumeration, ClockMatters>),
}

enum Attempt {
    Done(Enumeration),
    ClockMatters,
    /// A bounded search with sleep sets whose runs mostly stopped asleep ([`Mode::Sleepy`]).
    GiveUp,
}

/// Explores every schedule of `body` as [`super::enumerate`] does, on `par.jobs` threads and
/// only the units of `par.shard`: `body` runs on those threads, `visit` on the caller's, in
/// the units' order, so it sees the same schedules in the same order whatever `par.jobs` is.
/// `visit` returns `false` to stop; `cancel` (asked between runs) stops the exploration too.
/// The reduced search and the plain one count schedules as [`super::enumerate`] does, but
/// may explore a few more runs: the top of the tree is not reduced. A preemption bound with
/// `opts.reduction` (and no shard) runs the bounded search with sleep sets across one actor's
/// independent actions, each unit keeping its states (`Mode::Sleepy`; `reduced` in the
/// result; runs at a state explored before in `repeated_runs`), or, where its runs mostly
/// stop asleep, the plain bounded search after a [`Seen::Restart`].
pub fn enumerate_parallel<T: Send>(
    opts: &ExhaustiveOptions,
    par: &Parallel,
    body: impl Fn(&Arc<Script>) -> T + Sync,
    cancel: impl Fn() -> bool + Sync,
    mut visit: impl FnMut(Seen<'_, T>) -> bool,
) -> Enumeration {
    let par = &Parallel {
        jobs: par.jobs.clamp(1, MAX_JOBS),
        ..*par
    };
    let mut mode = match (opts.reduction, opts.preemption_bound, par.shard) {
        (false, _, _) => Mode::Plain,
        (true, None, _) => Mode::Reduced,
        (true, Some(_), None) => Mode::Sleepy,
        // Shards of a bounded check explore the plain search's units: a shard could not tell
        // from its own units' counts whether the search with sleep sets gives up.
        (true, Some(_), Some(_)) => Mode::Plain,
    };
    if mode == Mode::Reduced && par.shard.is_none() {
        // The sequential search itself, its runs made ahead on the other threads.
        return super::speculate::enumerate_speculative(opts, par.jobs, &body, &cancel, &mut visit);
    }
    let mut clock_matters = false;
    loop {
        let restart = match attempt(opts, par, mode, clock_matters, &body, &cancel, &mut visit) {
            Attempt::Done(e) => return e,
            Attempt::ClockMatters => {
                clock_matters = true;
                visit(Seen::Restart)
            }
            Attempt::GiveUp => {
                // Mostly runs stopped asleep: the plain bounded search, from the start.
                mode = Mode::Plain;
                visit(Seen::Restart)
            }
        };
        if !restart {
            return Enumeration {
                bound: Some(Bound::Stopped),
                ..Enumeration::empty(mode != Mode::Plain)
            };
        }
    }
}

/// Which search a parallel exploration runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The plain search (every interleaving, within the preemption bound).
    Plain,
    /// A preemption-bounded search with sleep sets across one actor's independent actions
    /// (a shrink's, [`search_plain_in`] with [`Sleep::Plain`]: every outcome of a schedule within
    /// the bound, each with its fewest preemptions, in no more schedules than the plain
    /// bounded search), without shards, each unit keeping the states it explored
    /// ([`super::enumerate_bounded_states`]; a run at a state explored before is a repeat,
    /// counted as a schedule against `max_schedules` since it ran to its end). Runs stopped
    /// asleep are not schedules, and where most runs stop so (in strict mode, the orders of
    /// many lines' early write-backs) the search explores little: once they number
    /// [`ASLEEP_BEFORE_GIVING_UP`] and four times the schedules and repeats handed on, the
    /// exploration starts again with the plain search (a rule of the counts in the units'
    /// order: the same whatever the threads).
    Sleepy,
    /// Source-DPOR (shards of the reduced search).
    Reduced,
}

impl Mode {
    /// The sleep sets of the plain search this mode runs ([`Mode::Reduced`]: none of its).
    fn sleep(self) -> Sleep {
        match self {
            Mode::Sleepy => Sleep::Plain,
            Mode::Plain | Mode::Reduced => Sleep::None,
        }
    }
}

/// Runs stopped asleep a bounded search with sleep sets makes before it may give up
/// ([`Mode::Sleepy`]).
const ASLEEP_BEFORE_GIVING_UP: u64 = 1_000;

/// A [`Mode::Sleepy`] run's choice points, events and tries, as its search keeps them: up to
/// the point where it stopped asleep, if it did (and the try made there).
fn sleepy_record(script: &Script) -> (Vec<ChoicePoint>, Vec<Event>, Vec<u32>) {
    let mut points = script.points();
    let mut events = script.events();
    let mut tries = script.tries();
    if let (Some(b), Some(t)) = (script.sleep_blocked_point(), script.sleep_blocked_try()) {
        points.truncate(b + 1);
        events.retain(|e| e.point < b);
        tries.truncate(t + 1);
    }
    (points, events, tries)
}

/// The choice points of a unit's first run, as its search keeps them.
fn unit_points(script: &Script, mode: Mode) -> Vec<ChoicePoint> {
    match mode {
        // The clock was checked when the run was made.
        Mode::Reduced => run_record(script, true).map(|(p, _)| p).unwrap_or_default(),
        Mode::Sleepy => sleepy_record(script).0,
        Mode::Plain => script.points(),
    }
}

/// The alternatives at `p` that a search could explore besides the one taken: not found
/// disabled, and for the reduced search (and the bounded one with sleep sets) not asleep.
fn others(p: &ChoicePoint, mode: Mode) -> u32 {
    if !p.scheduling && p.disabled.is_empty() {
        // A choice within an action: every alternative but the one taken (without counting
        // them one by one: a dispatch of billions of groups chooses among billions).
        return p.alternatives.saturating_sub(u32::from(p.taken.is_some()));
    }
    (0..p.alternatives)
        .filter(|&a| Some(a) != p.taken && !p.disabled.contains(&a) && !p.beside_step(a))
        .filter(|&a| mode == Mode::Plain || !asleep(p, &p.sleep, a))
        .count() as u32
}

/// Whether alternative `alt` of scheduling point `p` is performed by an actor of `sleep`.
fn asleep(p: &ChoicePoint, sleep: &[(ActorKey, Footprint)], alt: u32) -> bool {
    p.scheduling
        && p.actors
            .get(alt as usize)
            .is_some_and(|k| sleep.iter().any(|(s, _)| *s == k))
}

/// How large the subtree of a unit frozen at `frozen` looks (Knuth's estimate along its first
/// run: the sum of the logarithms of the branching at each choice point from `frozen` on); 0
/// when no point there has an alternative to explore.
fn weight(points: &[ChoicePoint], frozen: usize, mode: Mode) -> f64 {
    points
        .iter()
        .skip(frozen)
        .map(|p| f64::from(others(p, mode) + 1).ln())
        .sum()
}

/// Runs `f` over `items` on up to `jobs` threads, keeping their order.
fn par_map<I: Send, O: Send>(jobs: usize, items: Vec<I>, f: impl Fn(I) -> O + Sync) -> Vec<O> {
    let n = items.len();
    if jobs <= 1 || n <= 1 {
        return items.into_iter().map(f).collect();
    }
    let inputs: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let outputs: Vec<Mutex<Option<O>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let item = lock(&inputs[i]).take().expect("each item is taken once");
        let out = f(item);
        *lock(&outputs[i]) = Some(out);
    };
    std::thread::scope(|s| {
        let started = (0..jobs.min(n)).filter(|&j| spawn(s, j, &work)).count();
        if started == 0 {
            work();
        }
    });
    outputs
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every item was mapped")
        })
        .collect()
}

/// Starts `work` on a thread of scope `s` with the main thread's stack size (a schedule runs
/// as it would there); `false` when no thread could be started.
fn spawn<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    j: usize,
    work: &'scope (impl Fn() + Sync),
) -> bool {
    std::thread::Builder::new()
        .name(format!("explore-{j}"))
        .stack_size(8 << 20)
        .spawn_scoped(s, work)
        .is_ok()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why expanding the top stopped early.
enum Halt {
    Clock,
    Cancelled,
}

/// Expands `u` at its first free choice point: one unit per alternative explored there.
fn expand<T>(
    opts: &ExhaustiveOptions,
    mode: Mode,
    clock_matters: bool,
    u: Unit<T>,
    body: &(impl Fn(&Arc<Script>) -> T + Sync),
    cancel: &(impl Fn() -> bool + Sync),
) -> Result<Vec<Unit<T>>, Halt> {
    // A run's points and events as the search keeps them, and the tries a branch replays.
    let record = |script: &Script| -> Result<_, Halt> {
        Ok(match mode {
            Mode::Reduced => {
                let (p, e) = run_record(script, clock_matters).map_err(|_| Halt::Clock)?;
                (p, e, script.tries())
            }
            Mode::Sleepy => sleepy_record(script),
            Mode::Plain => (script.points(), Vec::new(), script.tries()),
        })
    };
    let (points, mut latest_events, mut latest_tries) = record(&u.script)?;
    // Points with nothing else to explore need no units of their own. (With a preemption
    // bound, one whose alternatives the bound cuts is expanded, to say so.)
    let Some(f) = (u.frozen..points.len()).find(|&i| others(&points[i], mode) > 0) else {
        return Ok(vec![Unit { weight: 0.0, ..u }]);
    };
    if !points[f].scheduling && points[f].alternatives > MAX_EXPANDED_ALTERNATIVES {
        return Ok(vec![Unit { weight: 0.0, ..u }]);
    }
    let mut point = points[f].clone();
    let sleep_here = point.sleep.clone();
    let mut latest_points = points.clone();
    let before = if mode == Mode::Reduced {
        0
    } else {
        preemptions_before(&points, f)
    };
    let mut slept = Vec::new();
    let mut tried: Vec<u32> = point.disabled.clone();
    tried.extend(point.taken);
    let first_try = point.first_try;
    let mut out = vec![Unit { frozen: f + 1, ..u }];
    for alt in 0..point.alternatives {
        if tried.contains(&alt) || point.beside_step(alt) {
            continue;
        }
        if mode != Mode::Plain && asleep(&point, &sleep_here, alt) {
            continue;
        }
        if let Some(k) = opts.preemption_bound.filter(|_| mode != Mode::Reduced) {
            if before + u32::from(point.preempts(alt)) > k {
                out.last_mut().expect("the first unit is there").cut = true;
                continue;
            }
        }
        if cancel() {
            return Err(Halt::Cancelled);
        }
        let script = match mode {
            Mode::Reduced => {
                note_slept(&mut slept, &point, f, &latest_events);
                branch_spec(&latest_tries, &point, &sleep_here, &slept, alt, None).script(0)
            }
            Mode::Sleepy | Mode::Plain => {
                if mode == Mode::Sleepy {
                    // The alternatives explored here before sleep in this one, as in the
                    // sequential search.
                    note_slept(&mut slept, &point, f, &latest_events);
                }
                mode.sleep().branch_script(
                    branch_prefix_replaying(&latest_tries, &latest_points, f, alt),
                    &sleep_here,
                    &slept,
                )
            }
        };
        let script = Arc::new(script);
        let value = body(&script);
        tried.push(alt);
        let (new_points, new_events, new_tries) = record(&script)?;
        if cancel() {
            // The run may have been cut short.
            return Err(Halt::Cancelled);
        }
        assert_replayed(&new_points, f, first_try);
        if new_points[f].disabled.contains(&alt) {
            point.disabled.push(alt);
            out.last_mut().expect("the first unit is there").repeated += 1;
            continue;
        }
        refresh_point(&mut point, &new_points[f]);
        latest_tries = new_tries;
        latest_events = new_events;
        out.push(Unit {
            script,
            value,
            frozen: f + 1,
            repeated: 0,
            cut: false,
            weight: weight(&new_points, f + 1, mode),
        });
        latest_points = new_points;
    }
    Ok(out)
}

/// The units of shard `index` of `total` among `n`: a contiguous block, so that the shards in
/// index order hold the units in order.
fn shard_range(n: usize, shard: Option<(u64, u64)>) -> std::ops::Range<usize> {
    match shard {
        None => 0..n,
        Some((index, total)) => {
            let at =
                |i: u64| (u128::from(i.min(total)) * n as u128 / u128::from(total.max(1))) as usize;
            at(index)..at(index.saturating_add(1))
        }
    }
}

/// The preemptions of a run's choices before point `f`.
fn preemptions_before(points: &[ChoicePoint], f: usize) -> u32 {
    ChoicePoint::preemptions(&points[..f])
}

fn attempt<T: Send>(
    opts: &ExhaustiveOptions,
    par: &Parallel,
    mode: Mode,
    clock_matters: bool,
    body: &(impl Fn(&Arc<Script>) -> T + Sync),
    cancel: &(impl Fn() -> bool + Sync),
    visit: &mut impl FnMut(Seen<'_, T>) -> bool,
) -> Attempt {
    let jobs = par.jobs.max(1);
    let mut total = Enumeration::empty(mode != Mode::Plain);
    let stopped = |mut e: Enumeration| {
        e.bound = Some(Bound::Stopped);
        Attempt::Done(e)
    };
    // The top, breadth first: the first run (reduced, as the sequential search makes it,
    // the clock put in the relation at once when it wrote the clock).
    let (script, value, clock_matters) = match mode {
        Mode::Reduced => {
            let (root, clock) = first_run(body);
            (root.script, root.value, clock_matters || clock)
        }
        Mode::Sleepy | Mode::Plain => {
            let script = Arc::new(mode.sleep().first_script());
            let value = body(&script);
            (script, value, clock_matters)
        }
    };
    let weight = weight(&unit_points(&script, mode), 0, mode);
    let mut units = vec![Unit {
        script,
        value,
        frozen: 0,
        repeated: 0,
        cut: false,
        weight,
    }];
    // Expand the units that look largest first, a few at once, until there are enough.
    while units.len() < TARGET_UNITS {
        let mut heaviest: Vec<usize> = (0..units.len())
            .filter(|&i| units[i].weight > 0.0)
            .collect();
        if heaviest.is_empty() {
            break;
        }
        heaviest.sort_by(|&a, &b| units[b].weight.total_cmp(&units[a].weight).then(a.cmp(&b)));
        heaviest.truncate(EXPAND_AT_ONCE);
        heaviest.sort_unstable();
        let mut slots: Vec<Option<Unit<T>>> = units.into_iter().map(Some).collect();
        let picked: Vec<Unit<T>> = heaviest
            .iter()
            .map(|&i| slots[i].take().expect("picked once"))
            .collect();
        let expanded = par_map(jobs, picked, |u| {
            expand(opts, mode, clock_matters, u, body, cancel)
        });
        let mut children = Vec::new();
        for e in expanded {
            match e {
                Ok(us) => children.push(us),
                Err(Halt::Clock) => return Attempt::ClockMatters,
                Err(Halt::Cancelled) => return stopped(total),
            }
        }
        let mut children = children.into_iter();
        units = Vec::new();
        for slot in slots {
            match slot {
                Some(u) => units.push(u),
                None => units.extend(children.next().expect("one list per picked unit")),
            }
        }
    }
    // This shard's units.
    let range = shard_range(units.len(), par.shard);
    let units: Vec<Unit<T>> = units
        .into_iter()
        .enumerate()
        .filter(|(i, _)| range.contains(i))
        .map(|(_, u)| u)
        .collect();
    let n = units.len();
    let mut prelude: Vec<(u64, bool)> = units.iter().map(|u| (u.repeated, u.cut)).collect();
    let queue: Vec<Mutex<Option<Unit<T>>>> =
        units.into_iter().map(|u| Mutex::new(Some(u))).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, Vec<Rec<T>>)>();
    let mut outcome: Option<Attempt> = None;
    let work = |tx: mpsc::Sender<(usize, Vec<Rec<T>>)>| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n || stop.load(Ordering::Relaxed) {
            break;
        }
        let u = lock(&queue[i]).take().expect("each unit is explored once");
        let root = Root {
            script: u.script,
            value: u.value,
            frozen: u.frozen,
        };
        // Records go to the merge in batches: a message per run would wake the merging
        // thread (and take a CPU from the runs) as often as a run ends.
        let mut batch: Vec<Rec<T>> = Vec::new();
        let mut alive = true;
        let send = |r: Run<'_, T>| {
            if stop.load(Ordering::Relaxed) || cancel() || !alive {
                return false;
            }
            batch.push(match r {
                Run::Schedule(v, s) => Rec::Schedule(v, s.schedule_string()),
                Run::Ahead(v, s, _) => Rec::Schedule(v, s.to_string()),
                Run::Repeated => Rec::Repeated,
                Run::SleepBlocked(_) => Rec::SleepBlocked,
                // Not stopped: the program depends on more than the schedule (the search
                // panics).
                Run::Diverged => return true,
            });
            if batch.len() >= BATCH {
                alive = tx.send((i, std::mem::take(&mut batch))).is_ok();
            }
            alive
        };
        let end = match mode {
            Mode::Reduced => {
                search_reduced(opts, Some(root), clock_matters, &mut Direct(body), send)
            }
            // With sleep sets, each unit keeps the states it explored (as a shrink's bounded
            // search does): its own, so its result is the same whatever the threads. (The
            // plain search keeps none.)
            Mode::Sleepy | Mode::Plain => Ok(search_plain_in(
                opts,
                Some(root),
                mode.sleep(),
                Some(&mut Visited::default()),
                body,
                send,
            )),
        };
        batch.push(Rec::End(end));
        if tx.send((i, batch)).is_err() {
            break;
        }
    };
    std::thread::scope(|s| {
        let mut started = 0;
        for j in 0..jobs.min(n) {
            let tx = tx.clone();
            let work = &work;
            let spawned = std::thread::Builder::new()
                .name(format!("explore-{j}"))
                .stack_size(8 << 20)
                .spawn_scoped(s, move || work(tx));
            started += usize::from(spawned.is_ok());
        }
        if started == 0 {
            // No thread: explore every unit here first, then merge.
            work(tx.clone());
        }
        drop(tx);
        // Merge in the units' order.
        let mut bufs: Vec<VecDeque<Rec<T>>> = (0..n).map(|_| VecDeque::new()).collect();
        let mut cur = 0;
        let mut unit_bound: Option<Bound> = None;
        let mut cut = false;
        let mut started = vec![false; n];
        let mut unit_repeated = 0u64;
        'merge: for (i, recs) in rx.iter() {
            if outcome.is_some() {
                continue;
            }
            bufs[i].extend(recs);
            while cur < n {
                if !started[cur] {
                    started[cur] = true;
                    let (repeated, c) = std::mem::take(&mut prelude[cur]);
                    total.repeated_runs += repeated;
                    cut |= c;
                }
                let Some(rec) = bufs[cur].pop_front() else {
                    continue 'merge;
                };
                if !matches!(rec, Rec::End(_)) {
                    // The units' runs: those of the top's expansion are few, and counting
                    // them could stop the search before its first schedule.
                    let runs = total.schedules + unit_repeated + total.sleep_blocked;
                    // A run that reached a state explored before ran to its end (the states
                    // are keyed after the run): it counts as a schedule.
                    let full = match mode {
                        Mode::Sleepy => total.schedules + unit_repeated,
                        Mode::Plain | Mode::Reduced => total.schedules,
                    };
                    if full >= opts.max_schedules || runs >= opts.max_schedules.saturating_mul(4) {
                        total.bound = Some(Bound::MaxSchedules(opts.max_schedules));
                        stop.store(true, Ordering::Relaxed);
                        outcome = Some(Attempt::Done(total.clone()));
                        continue 'merge;
                    }
                }
                match rec {
                    Rec::Schedule(v, replay) => {
                        total.schedules += 1;
                        if !visit(Seen::Schedule(v, &replay)) {
                            stop.store(true, Ordering::Relaxed);
                            outcome = Some(stopped(total.clone()));
                            continue 'merge;
                        }
                    }
                    Rec::Repeated => {
                        total.repeated_runs += 1;
                        unit_repeated += 1;
                    }
                    Rec::SleepBlocked => {
                        total.sleep_blocked += 1;
                        if mode == Mode::Sleepy
                            && total.sleep_blocked >= ASLEEP_BEFORE_GIVING_UP
                            && total.sleep_blocked > 4 * (total.schedules + unit_repeated)
                        {
                            stop.store(true, Ordering::Relaxed);
                            outcome = Some(Attempt::GiveUp);
                            continue 'merge;
                        }
                    }
                    Rec::End(Err(ClockMatters)) => {
                        stop.store(true, Ordering::Relaxed);
                        outcome = Some(Attempt::ClockMatters);
                        continue 'merge;
                    }
                    Rec::End(Ok(e)) => {
                        total.max_depth = total.max_depth.max(e.max_depth);
                        if e.bound == Some(Bound::Stopped) {
                            // Only `cancel` stops a unit before the merge does.
                            stop.store(true, Ordering::Relaxed);
                            outcome = Some(stopped(total.clone()));
                            continue 'merge;
                        }
                        if !e.complete && unit_bound.is_none() {
                            unit_bound = e.bound;
                        }
                        cur += 1;
                    }
                }
            }
            // Every unit ended.
            total.complete = unit_bound.is_none() && !cut;
            total.bound = unit_bound.or_else(|| {
                cut.then(|| opts.preemption_bound.map(Bound::PreemptionBound))
                    .flatten()
            });
            outcome = Some(Attempt::Done(total.clone()));
        }
        if outcome.is_none() {
            // No unit (an empty shard).
            total.complete = true;
            outcome = Some(Attempt::Done(total.clone()));
        }
    });
    outcome.expect("the merge decided")
}
