//! The reduced search on many threads with the sequential search's result: the calling thread
//! runs source-DPOR (`dpor.rs`) exactly as one thread would, and the other threads make ahead
//! of time the runs it will ask for (`docs/exploration.md`, "Exhaustive checks on threads and
//! in shards").
//!
//! After each run the search knows, at every point shallower than its next branch, the first
//! alternative left and the script it will run there (its prefix and sleep set do not change
//! until the search gets there, unless the subtree in between adds an alternative before it).
//! Workers run those scripts, deepest first, and keep the results by script. When the search
//! asks for a run, it takes the one made ahead if there is one (or waits for the worker making
//! it), else makes it itself. A run is a function of its script alone, so whatever the
//! threads did, the search sees the same runs in the same order: the report is the same
//! whatever the number of threads, and a run made ahead for a script the search never asks
//! for is only work lost.

use super::dpor::{search_reduced, ClockMatters, Runs, Spec};
use super::exhaustive::{Bound, Enumeration, ExhaustiveOptions, Run};
use super::parallel::Seen;
use crate::choice::Script;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A run kept by script.
enum Entry<T> {
    /// A worker is making it.
    Running,
    /// Made: the script after the run, and the body's value.
    Done(Arc<Script>, T),
    /// The search will make it itself next (workers leave it).
    Claimed,
}

struct State<T> {
    runs: HashMap<Spec, Entry<T>>,
    /// The scripts to make ahead, the likeliest first.
    wanted: Vec<Spec>,
    stop: bool,
}

struct Shared<T> {
    st: Mutex<State<T>>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Shared<T> {
    fn wait<'a>(&self, g: MutexGuard<'a, State<T>>) -> MutexGuard<'a, State<T>> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }
}

/// The search's side: takes runs made ahead, or makes them.
struct Ahead<'a, T, B> {
    shared: &'a Shared<T>,
    body: &'a B,
}

impl<T, B: Fn(&Arc<Script>) -> T> Runs<T> for Ahead<'_, T, B> {
    fn run(&mut self, spec: Spec) -> (Arc<Script>, T) {
        let mut g = lock(&self.shared.st);
        loop {
            match g.runs.remove(&spec) {
                Some(Entry::Done(script, value)) => return (script, value),
                Some(Entry::Running) => {
                    g.runs.insert(spec.clone(), Entry::Running);
                    g = self.shared.wait(g);
                }
                Some(Entry::Claimed) | None => break,
            }
        }
        // Workers leave a script claimed; it is made here.
        g.runs.insert(spec.clone(), Entry::Claimed);
        drop(g);
        let script = Arc::new(spec.script());
        let value = (self.body)(&script);
        lock(&self.shared.st).runs.remove(&spec);
        (script, value)
    }

    fn ahead(&mut self, mut specs: Vec<Spec>) {
        let mut g = lock(&self.shared.st);
        // What is neither wanted nor being made is a guess that did not come true.
        let keep: HashSet<&Spec> = specs.iter().collect();
        g.runs
            .retain(|k, e| matches!(e, Entry::Running) || keep.contains(k));
        // The search asks for the first at once: it makes it itself, unless a worker made it
        // or is making it already.
        if !specs.is_empty() {
            let first = specs.remove(0);
            g.runs.entry(first).or_insert(Entry::Claimed);
        }
        g.wanted = specs;
        self.shared.cv.notify_all();
    }

    fn wants_ahead(&self) -> bool {
        true
    }
}

/// A worker: makes the wanted runs not made yet, the likeliest first, until told to stop.
fn work<T>(shared: &Shared<T>, body: &impl Fn(&Arc<Script>) -> T, cancel: &impl Fn() -> bool) {
    loop {
        let spec = {
            let mut g = lock(&shared.st);
            loop {
                if g.stop {
                    return;
                }
                let next = g.wanted.iter().find(|s| !g.runs.contains_key(*s)).cloned();
                if let Some(s) = next {
                    g.runs.insert(s.clone(), Entry::Running);
                    break s;
                }
                g = shared.wait(g);
            }
        };
        if cancel() {
            let mut g = lock(&shared.st);
            g.runs.remove(&spec);
            shared.cv.notify_all();
            return;
        }
        let script = Arc::new(spec.script());
        let value = body(&script);
        let mut g = lock(&shared.st);
        g.runs.insert(spec, Entry::Done(script, value));
        shared.cv.notify_all();
    }
}

/// The reduced search from the start on the calling thread, `jobs - 1` more threads making
/// its runs ahead; `visit` and the result as [`super::enumerate_parallel`]'s, the same
/// whatever `jobs` is.
pub(super) fn enumerate_speculative<T: Send>(
    opts: &ExhaustiveOptions,
    jobs: usize,
    body: &(impl Fn(&Arc<Script>) -> T + Sync),
    cancel: &(impl Fn() -> bool + Sync),
    visit: &mut impl FnMut(Seen<'_, T>) -> bool,
) -> Enumeration {
    let shared = Shared {
        st: Mutex::new(State {
            runs: HashMap::new(),
            wanted: Vec::new(),
            stop: false,
        }),
        cv: Condvar::new(),
    };
    std::thread::scope(|s| {
        for j in 1..jobs.max(1) {
            let shared = &shared;
            let started = std::thread::Builder::new()
                .name(format!("explore-{j}"))
                .stack_size(8 << 20)
                .spawn_scoped(s, move || work(shared, body, cancel));
            if started.is_err() {
                break;
            }
        }
        let mut runs = Ahead {
            shared: &shared,
            body,
        };
        let mut clock_matters = false;
        let result = loop {
            let send = |r: Run<'_, T>| match r {
                Run::Schedule(v, script) => visit(Seen::Schedule(v, &script.schedule_string())),
                Run::Repeated | Run::SleepBlocked => !cancel(),
                // Not stopped unless cancelled: a program that depends on more than the
                // schedule (the search panics).
                Run::Diverged => !cancel(),
            };
            match search_reduced(opts, None, clock_matters, &mut runs, send) {
                Ok(e) => break e,
                Err(ClockMatters) => {
                    clock_matters = true;
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
        g.runs.clear();
        shared.cv.notify_all();
        drop(g);
        result
    })
}
