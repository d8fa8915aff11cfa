//! The reduced search on many threads with the sequential search's result: the calling thread
//! runs source-DPOR (`dpor.rs`) exactly as one thread would, and the other threads explore
//! ahead of time whole subtrees it will take (`docs/exploration.md`, "Exhaustive checks on
//! threads and in shards").
//!
//! After each run a search knows, at every point shallower than its next branch, the first
//! alternative left there and the spec of that branch (its prefix and sleep set do not change
//! until the search gets there, unless the subtree in between adds an alternative before it).
//! The subtree below such a branch is a function of its spec alone: the runs below it pass
//! through no node but its own, and what they change in the nodes above it (alternatives to
//! explore there) reads only those nodes' state, which the subtree's own choices never read.
//! So a worker explores the subtree on its own (`dpor::explore_subtree`), keeping its runs and
//! its changes to the nodes above; the search, when it gets to that branch with the same
//! spec, takes the subtree whole: it makes the changes, hands the runs to its visitor in
//! order and goes on from the state after the subtree's last run. A search exploring a
//! subtree ahead tells its own next branches the same way. A search that gets to a subtree
//! another thread is still exploring has it handed over at that thread's next branch: it
//! takes the runs made so far and goes on from there itself, and the other thread, free
//! again, explores the next branch ahead.
//!
//! Whatever the threads did, the search sees the same runs in the same order: the report is
//! the same whatever the number of threads, and a subtree explored for a spec the search
//! never takes (another alternative was added before it) is only work lost; it is cancelled
//! as soon as no search wants it.

use super::dpor::{
    explore_subtree, search_reduced, ClockMatters, End, History, Pace, Runs, Spec, Sub,
};
use super::exhaustive::{Bound, Enumeration, ExhaustiveOptions, Run};
use super::parallel::Seen;
use crate::choice::Script;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A branch: whether the clock is in the dependence relation, and its spec.
type Key = (bool, Spec);

/// How much a subtree explored ahead holds at most: runs kept, and kept changes to the
/// nodes above (a change and each initial of a race count one). Past either, at its next
/// branch it waits (its thread idle) until the search that wants it waits for it, then hands
/// itself over there: that search takes what it explored and goes on from that branch
/// itself. So a thread running far ahead of a search (one that ends at its bound, say) holds
/// bounded memory and wastes no work.
const AHEAD_RUNS: usize = 4096;
const AHEAD_WEIGHT: usize = 1 << 20;

static AHEAD_LIMITS: [AtomicUsize; 2] =
    [AtomicUsize::new(AHEAD_RUNS), AtomicUsize::new(AHEAD_WEIGHT)];

/// Sets how much a subtree explored ahead holds before it is handed over (runs, and kept
/// changes; defaults 4,096 and 2^20), for tests: the exploration's result is the same
/// whatever they are, only its memory and speed change.
#[doc(hidden)]
pub fn set_ahead_limits(runs: usize, weight: usize) {
    AHEAD_LIMITS[0].store(runs.max(1), Ordering::Relaxed);
    AHEAD_LIMITS[1].store(weight.max(1), Ordering::Relaxed);
}

enum Slot<T> {
    /// A thread is exploring it; `cancel` stops it; `awaited`: a search waits for it (it is
    /// handed over at its next branch).
    Running {
        cancel: Arc<AtomicBool>,
        awaited: Arc<AtomicBool>,
    },
    /// Explored, for the search that takes it.
    Done(Box<Sub<T>>),
}

/// A subtree being explored or explored ahead, and how many searches wait for it.
struct Entry<T> {
    key: Key,
    slot: Slot<T>,
    awaited: usize,
}

struct Table<T> {
    /// The subtrees being explored or kept. They are few (one per exploring thread,
    /// and those explored before the search gets to them): compared, not hashed (a spec's
    /// prefix differs early).
    subs: Vec<Entry<T>>,
    /// Per search (by id: 0 the calling thread's, else the subtree's job), the branch it
    /// takes next and those it will take after it as last told, each with the point it
    /// branches at; the search told most recently last.
    wanted: Vec<(u64, Vec<(usize, Key)>)>,
    /// Per search, its history when it last told its branches while a thread was idle (for
    /// the subtrees it wants to start from).
    hists: HashMap<u64, Arc<History>>,
    /// Threads waiting for a branch to explore.
    idle: usize,
    next_id: u64,
    stop: bool,
}

impl<T> Table<T> {
    fn wants(wanted: &[(u64, Vec<(usize, Key)>)], e: &Entry<T>) -> bool {
        e.awaited > 0
            || wanted
                .iter()
                .any(|(_, l)| l.iter().any(|(_, k)| *k == e.key))
    }

    /// The entry of the subtree of `spec`, with the clock in the relation or not.
    fn find(&self, clock: bool, spec: &Spec) -> Option<usize> {
        self.subs
            .iter()
            .position(|e| e.key.0 == clock && e.key.1 == *spec)
    }

    /// Drops the subtrees no search wants any more and cancels those being explored.
    fn sweep(&mut self) {
        let wanted = &self.wanted;
        self.subs.retain(|e| {
            if Self::wants(wanted, e) {
                return true;
            }
            match &e.slot {
                Slot::Running { cancel, .. } => {
                    cancel.store(true, Ordering::Relaxed);
                    true
                }
                Slot::Done(_) => false,
            }
        });
    }

    /// A branch to explore ahead: of the searches told most recently first, a branch after
    /// the next (the deepest first) that nobody explores. With the search that wants it.
    fn pick(&self) -> Option<(Key, usize, u64)> {
        for (p, list) in self.wanted.iter().rev() {
            for (d, key) in list.iter().skip(1) {
                if !self.subs.iter().any(|e| e.key == *key) {
                    return Some((key.clone(), *d, *p));
                }
            }
        }
        None
    }
}

struct Shared<T> {
    st: Mutex<Table<T>>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every thread's searches share.
struct Ctx<'a, T, B, C> {
    shared: &'a Shared<T>,
    body: &'a B,
    cancel: &'a C,
    opts: &'a ExhaustiveOptions,
}

impl<T, B, C> Clone for Ctx<'_, T, B, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, B, C> Copy for Ctx<'_, T, B, C> {}

/// One search's side (the calling thread's, or a subtree's job): takes subtrees explored
/// ahead, tells the branches it will take.
struct Ahead<'a, T, B, C> {
    ctx: Ctx<'a, T, B, C>,
    id: u64,
    clock: bool,
}

impl<T, B, C> Runs<T> for Ahead<'_, T, B, C>
where
    B: Fn(&Arc<Script>) -> T,
    C: Fn() -> bool,
{
    fn run(&mut self, spec: Spec, known: usize) -> (Arc<Script>, T) {
        let script = Arc::new(spec.script(known));
        let value = (self.ctx.body)(&script);
        (script, value)
    }

    fn explored(&mut self, spec: &Spec, _d: usize) -> Option<Sub<T>> {
        let mut g = lock(&self.ctx.shared.st);
        if g.subs.is_empty() {
            return None;
        }
        loop {
            let i = g.find(self.clock, spec)?;
            match &g.subs[i].slot {
                Slot::Done(_) => match g.subs.swap_remove(i).slot {
                    Slot::Done(sub) => return Some(*sub),
                    Slot::Running { .. } => unreachable!(),
                },
                // Being explored: its thread hands it over at its next branch (after at most
                // one more run), or it ends first. Waiting for that costs less than helping
                // within it: a thread that helps is not free to take the handover, and the
                // two wait on each other's subtrees in turn.
                Slot::Running { awaited, .. } => {
                    awaited.store(true, Ordering::Relaxed);
                    self.ctx.shared.cv.notify_all();
                }
            }
            g.subs[i].awaited += 1;
            g = self
                .ctx
                .shared
                .cv
                .wait(g)
                .unwrap_or_else(|p| p.into_inner());
            if let Some(i) = g.find(self.clock, spec) {
                g.subs[i].awaited -= 1;
            }
        }
    }

    fn ahead(&mut self, specs: Vec<(usize, Spec)>, hist: &History) {
        let list: Vec<(usize, Key)> = specs
            .into_iter()
            .map(|(d, s)| (d, (self.clock, s)))
            .collect();
        let mut g = lock(&self.ctx.shared.st);
        if list.len() > 1 && g.idle > 0 {
            // A thread is about to take one of these branches: it starts from this history.
            drop(g);
            let h = Arc::new(hist.clone());
            g = lock(&self.ctx.shared.st);
            g.hists.insert(self.id, h);
        }
        g.wanted.retain(|(p, _)| *p != self.id);
        g.wanted.push((self.id, list));
        g.sweep();
        drop(g);
        self.ctx.shared.cv.notify_all();
    }

    fn wants_ahead(&self) -> bool {
        true
    }
}

/// Explores the subtree of `key` (branching at point `d`, wanted by search `parent`) on this
/// thread, and keeps it for the search that takes it.
fn explore_ahead<'g, T, B, C>(
    ctx: Ctx<'g, T, B, C>,
    mut g: MutexGuard<'g, Table<T>>,
    key: Key,
    d: usize,
    parent: u64,
) -> MutexGuard<'g, Table<T>>
where
    B: Fn(&Arc<Script>) -> T,
    C: Fn() -> bool,
{
    let job = g.next_id;
    g.next_id += 1;
    let flag = Arc::new(AtomicBool::new(false));
    let awaited = Arc::new(AtomicBool::new(false));
    g.subs.push(Entry {
        key: key.clone(),
        slot: Slot::Running {
            cancel: flag.clone(),
            awaited: awaited.clone(),
        },
        awaited: 0,
    });
    let hint = g.hists.get(&parent).cloned();
    drop(g);
    let mut runs = Ahead {
        ctx,
        id: job,
        clock: key.0,
    };
    let stopped = || (ctx.cancel)() || flag.load(Ordering::Relaxed);
    let pace = |kept: usize, weight: usize, branch: bool| {
        if stopped() {
            return Pace::Stop;
        }
        if branch && awaited.load(Ordering::Relaxed) {
            // A search waits for it: that search goes on from here.
            return Pace::Hand;
        }
        if !branch
            || (kept < AHEAD_LIMITS[0].load(Ordering::Relaxed)
                && weight < AHEAD_LIMITS[1].load(Ordering::Relaxed))
        {
            return Pace::Go;
        }
        if !awaited.load(Ordering::Relaxed) {
            let mut g = lock(&ctx.shared.st);
            while !awaited.load(Ordering::Relaxed) && !stopped() && !g.stop {
                g = ctx.shared.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        }
        if stopped() {
            Pace::Stop
        } else {
            Pace::Hand
        }
    };
    let sub = explore_subtree(ctx.opts, key.0, key.1.clone(), d, hint, &mut runs, pace);
    let mut g = lock(&ctx.shared.st);
    g.wanted.retain(|(p, _)| *p != job);
    g.hists.remove(&job);
    if let Some(i) = g.find(key.0, &key.1) {
        if sub.end == End::Cancelled || flag.load(Ordering::Relaxed) {
            g.subs.swap_remove(i);
        } else {
            g.subs[i].slot = Slot::Done(Box::new(sub));
        }
    }
    g.sweep();
    ctx.shared.cv.notify_all();
    g
}

/// A worker: explores the subtrees the searches will take, until told to stop.
fn work<T, B, C>(ctx: Ctx<'_, T, B, C>)
where
    B: Fn(&Arc<Script>) -> T,
    C: Fn() -> bool,
{
    let mut g = lock(&ctx.shared.st);
    loop {
        if g.stop {
            return;
        }
        g = match g.pick() {
            Some((key, d, p)) => explore_ahead(ctx, g, key, d, p),
            None => {
                g.idle += 1;
                let mut g = ctx.shared.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                g.idle -= 1;
                g
            }
        };
    }
}

/// The reduced search from the start on the calling thread, `jobs - 1` more threads exploring
/// ahead the subtrees it will take; `visit` and the result as [`super::enumerate_parallel`]'s,
/// the same whatever `jobs` is.
pub(super) fn enumerate_speculative<T: Send>(
    opts: &ExhaustiveOptions,
    jobs: usize,
    body: &(impl Fn(&Arc<Script>) -> T + Sync),
    cancel: &(impl Fn() -> bool + Sync),
    visit: &mut impl FnMut(Seen<'_, T>) -> bool,
) -> Enumeration {
    let shared = Shared {
        st: Mutex::new(Table {
            subs: Vec::new(),
            wanted: Vec::new(),
            hists: HashMap::new(),
            idle: 0,
            next_id: 1,
            stop: false,
        }),
        cv: Condvar::new(),
    };
    let ctx = Ctx {
        shared: &shared,
        body,
        cancel,
        opts,
    };
    std::thread::scope(|s| {
        for j in 1..jobs.max(1) {
            let started = std::thread::Builder::new()
                .name(format!("explore-{j}"))
                .stack_size(64 << 20)
                .spawn_scoped(s, move || work(ctx));
            if started.is_err() {
                break;
            }
        }
        let (root, mut clock_matters) = super::dpor::first_run(body);
        let mut root = Some(root);
        let result = loop {
            let send = |r: Run<'_, T>| match r {
                Run::Schedule(v, script) => visit(Seen::Schedule(v, &script.schedule_string())),
                Run::Ahead(v, s, _) => visit(Seen::Schedule(v, s)),
                Run::Repeated | Run::SleepBlocked(_) => !cancel(),
                // Not stopped unless cancelled: a program that depends on more than the
                // schedule (the search panics).
                Run::Diverged => !cancel(),
            };
            let mut runs = Ahead {
                ctx,
                id: 0,
                clock: clock_matters,
            };
            let found = if jobs <= 1 {
                search_reduced(
                    opts,
                    root.take(),
                    clock_matters,
                    &mut super::dpor::Direct(body),
                    send,
                )
            } else {
                search_reduced(opts, root.take(), clock_matters, &mut runs, send)
            };
            match found {
                Ok(e) => break e,
                Err(ClockMatters) => {
                    clock_matters = true;
                    let mut g = lock(&shared.st);
                    g.wanted.clear();
                    g.sweep();
                    drop(g);
                    if !visit(Seen::Restart) {
                        break Enumeration {
                            bound: Some(Bound::Stopped),
                            ..Enumeration::empty(true)
                        };
                    }
                }
            }
        };
        let mut g = lock(&shared.st);
        g.stop = true;
        g.wanted.clear();
        g.sweep();
        shared.cv.notify_all();
        drop(g);
        result
    })
}
