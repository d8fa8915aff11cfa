//! The deterministic driver (D4, D6): one thread at a time, virtual time, a seeded schedule.
//!
//! The same engine state machines as the threaded driver run here; what differs is who steps
//! them. At each step the scheduler collects the enabled actions (a PFP step, an ME step, the
//! retirement of a bottom-of-pipe write or signal, the completion of one dispatch group, the
//! completion of a copy, the end of a host sleep, the next action of a host thread), picks one
//! with a seeded strategy, sets the virtual clock to the larger of the clock and the action's
//! ready time, and performs it. Costs advance the clock but never restrict the choice.
//!
//! Host threads are OS threads spawned through [`crate::host::spawn`] (plus the thread that
//! created the device, host 0 `main`); only the one holding the turn runs. Every pipefence call
//! from such a thread is a scheduling point: the calling thread runs the scheduler loop itself
//! and either continues (its own next action was picked) or hands the turn to another host and
//! sleeps until it is picked again. Other OS threads are outside the model: their calls run
//! unscheduled. Host waits never time out, except when nothing can run and no engine has work
//! (then they fail as timed out); when nothing can run while an engine has work, the device
//! hangs at once with the usual report (D6).
//!
//! Blocked engine steps change nothing (the engine contract), so an engine stage is tried and,
//! if it reports `Blocked`/`Idle`, marked disabled until something else progresses. Such a
//! failed try is a step, but the next step's listing would be the same less that stage: the
//! scheduler keeps the listing and takes the stage out (`listing.rs`), so a run of failed tries
//! costs O(log n) each, not a listing of every host and queue each. A listing tests only the
//! hosts that may be enabled (a host blocked on fences is tested again once a ticket of its
//! wait is satisfied), and each host thread waits for its turn on its own condition variable,
//! so a hand-off wakes one thread, not all of them.

use super::groups::{Group, InFlight, Slot};
use super::listing::Left;
use super::{Backend, Cond};
use crate::clock::{duration_ns, Clock, CLOCK_EPOCH_NS};
use crate::engine::kernels::{run_groups, PlainMemory, SpinTime, StrictMemory};
use crate::engine::{EngineCtx, Fault, Kernel, Site, Stage, Step};
use crate::error::RemovalReason;
use crate::rng::Rng;
use crate::runtime::{DeviceShared, QueueShared};
use crate::sync::shim::{
    condvar_wait_until, lock, AtomicU64, Condvar, Mutex, MutexGuard, Ordering,
};
use crate::sync::{FenceCore, Notify, Ticket, WaitOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `spin` in virtual time: its cost is the group's ready time (D4), so running it does nothing.
struct VirtualTime;

impl SpinTime for VirtualTime {
    fn spin(&self, _: &crate::core::DeviceCore, _: u64, _: u32) {}
}

/// How the deterministic driver picks among enabled actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Uniformly among the enabled actions.
    Random,
    /// PCT (Burckhardt et al., ASPLOS 2010): each actor (a host thread, an engine stage, a
    /// dispatch) gets a random priority; the highest-priority enabled actor runs; at `depth - 1`
    /// random steps the running actor's priority drops below every other. Finds bugs that need
    /// `depth` ordering constraints with probability at least `1 / (n * k^(depth-1))`.
    Pct {
        /// The bug depth targeted (at least 1).
        depth: u32,
    },
}

/// Virtual cost of copying one KiB on the deterministic driver (D4): 100 ns (10 GB/s).
pub const COPY_NS_PER_KIB: u64 = 100;

/// The deterministic clock: starts at 1 s ([`CLOCK_EPOCH_NS`]), moved only by the scheduler.
#[derive(Debug)]
pub(crate) struct VirtualClock {
    ns: AtomicU64,
}

impl VirtualClock {
    pub(crate) fn new() -> Self {
        VirtualClock {
            ns: AtomicU64::new(CLOCK_EPOCH_NS),
        }
    }

    fn advance_to(&self, ns: u64) {
        if ns > self.ns.load(Ordering::Relaxed) {
            self.ns.store(ns, Ordering::Relaxed);
        }
    }
}

impl Clock for VirtualClock {
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::Relaxed)
    }
}

/// What a host does at a scheduling point.
#[derive(Debug, Clone)]
pub(crate) enum HostStep {
    /// Lets others run; ready again at once.
    Yield,
    /// Waits for a condition (never times out, D4).
    Block(Cond),
    /// Sleeps for this many virtual nanoseconds.
    Sleep(u64),
    /// The host thread finished.
    Done,
}

/// How a host's scheduling point ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Its condition holds (or it was only yielding).
    Ok,
    /// The device was removed.
    Removed,
    /// Nothing could run and no engine had work: the wait fails as timed out.
    TimedOut,
}

#[derive(Debug, Clone)]
enum HostState {
    Running,
    Ready,
    Blocked(HostWait),
    Sleeping(u64),
    Done,
}

#[derive(Debug)]
struct Host {
    name: String,
    state: HostState,
    wake: Wake,
    /// Its OS thread waits here for its turn (a hand-off wakes only the host picked).
    cv: Arc<Condvar>,
}

impl Host {
    fn new(name: &str, state: HostState) -> Self {
        Host {
            name: name.to_string(),
            state,
            wake: Wake::Ok,
            cv: Arc::new(Condvar::new()),
        }
    }
}

/// Who performs an action (PCT gives priorities to actors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Actor {
    Host(usize),
    Pfp(u32),
    Me(u32),
    Retire(u32),
    Endless(u64),
    /// Strict mode: an early write-back of one line of an engine's dirty words (D5).
    Writeback(u32),
}

#[derive(Debug)]
struct Endless {
    serial: u64,
    queue: u32,
    ready: u64,
    fault: Fault,
}

/// Figures of a deterministic schedule so far ([`crate::DeviceTools::schedule_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScheduleStats {
    /// Actions performed (scheduling steps).
    pub steps: u64,
    /// The most dispatches in flight at one step (each is one enabled action).
    pub max_dispatches_in_flight: u64,
    /// The most actions the scheduler examined one by one at one step: hosts, engine stages,
    /// write-backs and endless kernels. Dispatches in flight are not among them (they are
    /// counted and chosen without a scan), so a step costs O(log n) in the dispatches in flight.
    pub max_listed: u64,
    /// Listings of the enabled hosts and every queue's stages made (each costs O(queues) plus
    /// the hosts that may be enabled). A failed try makes none: the next step takes the failed
    /// stage out of the listing it was picked from.
    pub listings: u64,
    /// Engine stage tries that found the stage blocked or idle (each is one of the steps).
    pub failed_tries: u64,
    /// Tests of a host by the listings that found it unable to run. A host blocked on fences
    /// is tested again only once a ticket of its wait is satisfied, so this stays about linear
    /// in the host actions, not hosts x listings.
    pub blocked_host_tests: u64,
}

/// One enabled small actor of a [`Listing`].
#[derive(Debug, Clone, Copy)]
struct Listed {
    actor: Actor,
    /// When it is ready; `None`: now (the clock when it is picked).
    ready: Option<u64>,
    wake: Wake,
    /// An engine action's queue, by index in the listing's queues.
    queue: usize,
}

/// The enabled small actors in the scheduler's order: hosts, then per queue its PFP, ME and
/// retirement, then (strict) the write-backs. Kept across failed tries (`listing.rs`).
#[derive(Debug)]
struct Listing {
    entries: Vec<Listed>,
    /// The live queues when it was made, in id order.
    queues: Vec<Arc<QueueShared>>,
    /// Some queue had work.
    any_work: bool,
    /// The device was removed when it was made.
    removed: bool,
    /// The entries still enabled, once one was taken out (all of them until then).
    left: Option<Left>,
}

impl Listing {
    /// Entries still enabled.
    fn len(&self) -> usize {
        self.left.as_ref().map_or(self.entries.len(), Left::len)
    }

    /// The position of the `k`-th entry still enabled (`k < len()`).
    fn nth(&self, k: usize) -> usize {
        self.left.as_ref().map_or(k, |l| l.nth(k))
    }

    /// The position of the first entry still enabled.
    fn first(&mut self) -> Option<usize> {
        match self.left.as_mut() {
            Some(l) => l.first(),
            None => (!self.entries.is_empty()).then_some(0),
        }
    }

    /// Takes the entry at `pos` out (its try failed). `priority` gives the PCT priorities
    /// given so far, for PCT only (`pct`).
    fn take(&mut self, pos: usize, priority: impl Fn(Actor) -> Option<u64>, pct: bool) {
        let entries = &self.entries;
        let is_pfp = |i: usize| matches!(entries[i].actor, Actor::Pfp(_));
        let left = self.left.get_or_insert_with(|| {
            Left::new(entries.len(), is_pfp, |i| priority(entries[i].actor), pct)
        });
        left.take(pos, is_pfp(pos));
    }

    /// The queue with id `id` (the queues are in id order: an id is the queue's creation index).
    fn queue(&self, id: u32) -> Option<&Arc<QueueShared>> {
        self.queues
            .binary_search_by_key(&id, |q| q.id)
            .ok()
            .map(|i| &self.queues[i])
    }
}

/// Steps assumed for a run when placing PCT's priority change points.
const PCT_STEPS: u64 = 512;

#[derive(Debug)]
struct State {
    rng: Rng,
    strategy: Strategy,
    priorities: BTreeMap<Actor, u64>,
    change_points: Vec<u64>,
    next_low: u64,
    hosts: Vec<Host>,
    /// Hosts in state `Done`.
    hosts_done: usize,
    /// Every host that may be enabled, and maybe others: the listing tests only these. A host
    /// blocked on tickets leaves when a listing finds its wait unsatisfied and comes back when
    /// a ticket of it is satisfied (`HostWaker`), since a ticket once satisfied stays so; every
    /// host comes back once the device is removed.
    candidates: BTreeSet<usize>,
    /// A listing saw the device removed.
    removal_seen: bool,
    turn: Option<usize>,
    groups: InFlight,
    endless: Vec<Endless>,
    next_serial: u64,
    /// Per queue id: when the copy its ME started completes.
    copy_ready: BTreeMap<u32, u64>,
    disabled: BTreeSet<Actor>,
    /// The listing left by a failed try, for the next step.
    listing: Option<Listing>,
    steps: u64,
    max_dispatches_in_flight: u64,
    max_listed: u64,
    listings: u64,
    failed_tries: u64,
    blocked_host_tests: u64,
    /// The last `Device` handle is being dropped (Q8): run what can run; when nothing can,
    /// engine work left is not a hang (it is dropped with the device).
    draining: bool,
    /// Trace events waiting to be handed to the sink once the lock is released.
    trace: Vec<crate::trace::TraceEvent>,
}

/// The scheduler of one deterministic device.
#[derive(Debug)]
pub(crate) struct Scheduler {
    st: Mutex<State>,
    /// Hosts whose wait had a ticket satisfied since the last listing.
    woken: Arc<Mutex<Vec<usize>>>,
    pub(crate) clock: Arc<VirtualClock>,
}

thread_local! {
    /// The (device id, host index) pairs this OS thread is registered as.
    static REGISTERED: std::cell::RefCell<Vec<(u64, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn registered_host(device_id: u64) -> Option<usize> {
    REGISTERED.with(|r| {
        r.borrow()
            .iter()
            .find(|(d, _)| *d == device_id)
            .map(|(_, h)| *h)
    })
}

fn register_current(device_id: u64, host: usize) {
    REGISTERED.with(|r| {
        let mut r = r.borrow_mut();
        r.retain(|(d, _)| *d != device_id);
        r.push((device_id, host));
    });
}

/// Forgets the registration of this thread for `device_id` (the device is gone).
pub(crate) fn unregister_current(device_id: u64) {
    REGISTERED.with(|r| r.borrow_mut().retain(|(d, _)| *d != device_id));
}

/// Notes that a ticket of a blocked host's wait was satisfied, so that the next listing looks
/// at the host again (it reads the tickets then). Called where the signal happens, maybe under
/// the scheduler's lock: it takes only the list's own.
struct HostWaker {
    host: usize,
    woken: Arc<Mutex<Vec<usize>>>,
}

impl Notify for HostWaker {
    fn notify(&self) {
        lock(&self.woken).push(self.host);
    }
}

/// What a blocked host of the schedule waits for: a [`Cond`] with its fence waits latched as
/// tickets, issued by the blocking action itself, so every crossing after the wait began
/// satisfies it even if the value is lowered before the host is picked again (F5, F6).
#[derive(Debug, Clone)]
enum HostWait {
    /// One ticket per fence; `true` for ANY.
    Tickets(Vec<Arc<Ticket>>, bool),
    Memory {
        buffer: Arc<crate::memory::BufferCore>,
        offset: u64,
        cond: crate::types::ValueCondition,
    },
    Idle,
    HostDone(usize),
    Settled,
}

impl HostWait {
    /// The wait for `cond`, its fence conditions latched as tickets now (`waker` is told when
    /// one is satisfied).
    fn latch(cond: Cond, waker: Arc<dyn Notify>) -> HostWait {
        let issue = |f: Arc<FenceCore>, v: u64| Ticket::issue(f, v, waker.clone());
        match cond {
            Cond::Fence(f, v) => HostWait::Tickets(vec![issue(f, v)], false),
            Cond::Multi(fs, any) => {
                HostWait::Tickets(fs.into_iter().map(|(f, v)| issue(f, v)).collect(), any)
            }
            Cond::Memory {
                buffer,
                offset,
                cond,
            } => HostWait::Memory {
                buffer,
                offset,
                cond,
            },
            Cond::Idle => HostWait::Idle,
            Cond::HostDone(h) => HostWait::HostDone(h),
            Cond::Settled => HostWait::Settled,
        }
    }

    /// Whether this waits for other host threads (a join, or the end of the run), not for the
    /// device.
    fn is_host_wait(&self) -> bool {
        matches!(self, HostWait::HostDone(_) | HostWait::Settled)
    }
}

impl State {
    /// Sets host `h`'s state, keeping the count of finished hosts and the candidates.
    fn set_host_state(&mut self, h: usize, state: HostState) {
        let was_done = matches!(self.hosts[h].state, HostState::Done);
        match state {
            HostState::Done if !was_done => self.hosts_done += 1,
            HostState::Done => {}
            _ if was_done => self.hosts_done -= 1,
            _ => {}
        }
        match state {
            HostState::Running | HostState::Done => self.candidates.remove(&h),
            _ => self.candidates.insert(h),
        };
        self.hosts[h].state = state;
    }
}

impl Scheduler {
    /// A scheduler whose host 0 (`main`) is the calling thread, holding the turn.
    pub(crate) fn new(device_id: u64, seed: u64, strategy: Strategy) -> Self {
        let mut rng = Rng::new(seed ^ 0x5EED_5EED_5EED_5EED);
        let change_points = match strategy {
            Strategy::Pct { depth } => (1..depth.max(1)).map(|_| rng.below(PCT_STEPS)).collect(),
            Strategy::Random => Vec::new(),
        };
        register_current(device_id, 0);
        crate::host_names::set_current_name("main");
        Scheduler {
            st: Mutex::new(State {
                rng,
                strategy,
                priorities: BTreeMap::new(),
                change_points,
                next_low: 1 << 20,
                hosts: vec![Host::new("main", HostState::Running)],
                hosts_done: 0,
                candidates: BTreeSet::new(),
                removal_seen: false,
                turn: Some(0),
                groups: InFlight::default(),
                endless: Vec::new(),
                next_serial: 0,
                copy_ready: BTreeMap::new(),
                disabled: BTreeSet::new(),
                listing: None,
                steps: 0,
                max_dispatches_in_flight: 0,
                max_listed: 0,
                listings: 0,
                failed_tries: 0,
                blocked_host_tests: 0,
                draining: false,
                trace: Vec::new(),
            }),
            woken: Arc::new(Mutex::new(Vec::new())),
            clock: Arc::new(VirtualClock::new()),
        }
    }

    /// The calling thread's host index on this device, if it is a registered host thread.
    pub(crate) fn current_host(&self, dev: &DeviceShared) -> Option<usize> {
        registered_host(dev.id)
    }

    /// Registers a new host thread (not yet running); returns its index.
    pub(crate) fn add_host(&self, name: &str) -> usize {
        let mut st = lock(&self.st);
        st.hosts.push(Host::new(name, HostState::Ready));
        let h = st.hosts.len() - 1;
        st.candidates.insert(h);
        h
    }

    /// Called first thing by a spawned host thread: registers it and waits for its turn.
    pub(crate) fn enter_host(&self, dev: &DeviceShared, me: usize) {
        register_current(dev.id, me);
        if let Some(name) = lock(&self.st).hosts.get(me).map(|h| h.name.clone()) {
            crate::host_names::set_current_name(&name);
        }
        let mut st = lock(&self.st);
        let Some(cv) = st.hosts.get(me).map(|h| h.cv.clone()) else {
            return;
        };
        while st.turn != Some(me) {
            st = condvar_wait_until(&cv, st, None);
        }
    }

    /// Hands buffered trace events to the sink with the lock released, then takes it again.
    fn flush<'a>(
        &'a self,
        dev: &DeviceShared,
        mut st: MutexGuard<'a, State>,
    ) -> MutexGuard<'a, State> {
        if dev.trace_sink().is_none() {
            return st;
        }
        let events = std::mem::take(&mut st.trace);
        drop(st);
        dev.emit(&events);
        dev.emit_deferred();
        lock(&self.st)
    }

    /// A scheduling point of host `me`: it yields, blocks on a condition, sleeps or finishes;
    /// returns when it is picked again, with how its wait ended (`Done` hands the turn on and
    /// returns at once).
    pub(crate) fn schedule(&self, dev: &DeviceShared, me: usize, y: HostStep) -> Wake {
        let mut st = lock(&self.st);
        if st.turn != Some(me) || me >= st.hosts.len() {
            // Not our turn (a thread outside the model): run unscheduled.
            return Wake::Ok;
        }
        let done = matches!(y, HostStep::Done);
        let state = match y {
            HostStep::Yield => HostState::Ready,
            HostStep::Block(c) => {
                let waker = Arc::new(HostWaker {
                    host: me,
                    woken: self.woken.clone(),
                });
                HostState::Blocked(HostWait::latch(c, waker))
            }
            HostStep::Sleep(ns) => HostState::Sleeping(self.clock.now_ns().saturating_add(ns)),
            HostStep::Done => HostState::Done,
        };
        st.set_host_state(me, state);
        st.hosts[me].wake = Wake::Ok;
        loop {
            let picked = self.pick(dev, &mut st);
            // Only the turn holder runs the loop, so releasing the lock here is safe.
            st = self.flush(dev, st);
            match picked {
                Pick::Host(h) if h == me => {
                    st.set_host_state(me, HostState::Running);
                    return st.hosts[me].wake;
                }
                Pick::Host(h) => {
                    st.turn = Some(h);
                    st.set_host_state(h, HostState::Running);
                    st.hosts[h].cv.notify_all();
                    if done {
                        return Wake::Ok;
                    }
                    let cv = st.hosts[me].cv.clone();
                    while st.turn != Some(me) {
                        st = condvar_wait_until(&cv, st, None);
                    }
                    return st.hosts[me].wake;
                }
                Pick::Progressed => continue,
                Pick::Nothing => {
                    // Every host is done: nothing will ever run again.
                    st.turn = None;
                    for h in &st.hosts {
                        h.cv.notify_all();
                    }
                    return Wake::Ok;
                }
            }
        }
    }

    /// Q8: the last `Device` handle is dropped by host `me`: runs every action that can still
    /// run (other hosts' included) until every queue is idle or nothing can run.
    pub(crate) fn drain(&self, dev: &DeviceShared, me: usize) {
        lock(&self.st).draining = true;
        let _ = self.schedule(dev, me, HostStep::Block(Cond::Idle));
        lock(&self.st).draining = false;
    }

    /// Whether host `h` can run, with its ready time (`None`: now) and how it wakes. `all_idle`:
    /// every queue is idle (read only while the device is not removed).
    fn host_enabled(
        &self,
        dev: &DeviceShared,
        st: &State,
        h: usize,
        all_idle: bool,
    ) -> Option<(Option<u64>, Wake)> {
        match &st.hosts[h].state {
            HostState::Ready => Some((None, st.hosts[h].wake)),
            HostState::Sleeping(until) => Some((Some(*until), Wake::Ok)),
            HostState::Blocked(c) => {
                // Removal releases device waits, never a wait for another host thread: that
                // thread is still in the schedule and must get its turns to end (a join that
                // returned early would block its OS thread while holding the turn).
                if dev.is_removed() && !c.is_host_wait() {
                    return Some((None, Wake::Removed));
                }
                let holds = match c {
                    HostWait::Tickets(ts, true) => ts.iter().any(|t| t.is_satisfied()),
                    HostWait::Tickets(ts, false) => ts.iter().all(|t| t.is_satisfied()),
                    HostWait::Memory {
                        buffer,
                        offset,
                        cond,
                    } => cond.holds(buffer.load(*offset, cond.width).unwrap_or(0)),
                    HostWait::Idle => all_idle,
                    HostWait::HostDone(o) => matches!(
                        st.hosts.get(*o).map(|x| &x.state),
                        Some(HostState::Done) | None
                    ),
                    // Every other host is done (`h` is blocked, so not among them).
                    HostWait::Settled => {
                        st.hosts_done + 1 == st.hosts.len() && (dev.is_removed() || all_idle)
                    }
                };
                let wake = if dev.is_removed() {
                    Wake::Removed
                } else {
                    Wake::Ok
                };
                holds.then_some((None, wake))
            }
            HostState::Running | HostState::Done => None,
        }
    }

    /// Lists the enabled small actors: the hosts (testing only the candidates), every queue's
    /// stages and retirement, the write-backs (O(candidates + queues), one engine lock per
    /// queue).
    fn list(&self, dev: &DeviceShared, st: &mut State) -> Listing {
        st.listings += 1;
        let queues = dev.live_queues();
        let removed = dev.is_removed();
        let mut stages = Vec::new();
        let mut any_work = false;
        if !removed {
            for (i, q) in queues.iter().enumerate() {
                let e = lock(&q.engine);
                if e.is_idle() {
                    continue;
                }
                any_work = true;
                let id = q.id;
                let entry = |actor, ready| Listed {
                    actor,
                    ready,
                    wake: Wake::Ok,
                    queue: i,
                };
                if q.kind.has_pfp() && !st.disabled.contains(&Actor::Pfp(id)) {
                    stages.push(entry(Actor::Pfp(id), None));
                }
                if !st.disabled.contains(&Actor::Me(id)) {
                    let ready = if e.copy_pending().is_some() {
                        st.copy_ready.get(&id).copied()
                    } else {
                        None
                    };
                    stages.push(entry(Actor::Me(id), ready));
                }
                if e.retire_ready() {
                    stages.push(entry(Actor::Retire(id), None));
                }
            }
            if dev.strict() {
                if let Some(vis) = dev.model().as_ref().and_then(|m| m.vis.as_ref()) {
                    for (i, q) in queues.iter().enumerate() {
                        if vis.has_dirty(q.id) {
                            stages.push(Listed {
                                actor: Actor::Writeback(q.id),
                                ready: None,
                                wake: Wake::Ok,
                                queue: i,
                            });
                        }
                    }
                }
            }
        }
        // The enabled hosts are among the candidates: testing those in index order lists what
        // testing every host would.
        for h in lock(&self.woken).drain(..) {
            st.candidates.insert(h);
        }
        if removed && !st.removal_seen {
            st.removal_seen = true;
            st.candidates.extend(0..st.hosts.len());
        }
        let mut entries = Vec::with_capacity(st.candidates.len() + stages.len());
        let mut gone = Vec::new();
        for &h in &st.candidates {
            match self.host_enabled(dev, st, h, !any_work) {
                Some((ready, wake)) => entries.push(Listed {
                    actor: Actor::Host(h),
                    ready,
                    wake,
                    queue: usize::MAX,
                }),
                // Its tickets will say when to look again.
                None if matches!(
                    st.hosts[h].state,
                    HostState::Running
                        | HostState::Done
                        | HostState::Blocked(HostWait::Tickets(..))
                ) =>
                {
                    gone.push(h)
                }
                None => {}
            }
        }
        st.blocked_host_tests += (st.candidates.len() - entries.len()) as u64;
        for h in gone {
            st.candidates.remove(&h);
        }
        entries.extend(stages);
        Listing {
            entries,
            queues,
            any_work,
            removed,
            left: None,
        }
    }

    /// Collects the enabled actions, picks one, performs engine actions; returns what happened.
    fn pick(&self, dev: &DeviceShared, st: &mut MutexGuard<'_, State>) -> Pick {
        loop {
            let reaped = dev.reap_unmaps();
            if !dev.is_removed()
                && dev
                    .desc
                    .interrupt
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                dev.remove(RemovalReason::Requested);
            }
            // A failed try changed nothing but the disabled stages: the listing it left is the
            // one listing again would give. When it has nothing left, list again (a hang is
            // decided on a new listing).
            let mut listing = match st.listing.take() {
                Some(l) if !reaped && l.removed == dev.is_removed() && l.len() > 0 => l,
                _ => self.list(dev, st),
            };
            // After the small actors come the dispatches in flight (counted, not listed: one
            // action each, in launch order), then the endless kernels.
            let (n_groups, tail) = if dev.is_removed() {
                (0, Vec::new())
            } else {
                let tail: Vec<(Actor, u64, Wake)> = st
                    .endless
                    .iter()
                    .map(|x| (Actor::Endless(x.serial), x.ready, Wake::Ok))
                    .collect();
                (st.groups.len(), tail)
            };
            st.max_listed = st.max_listed.max((listing.len() + tail.len()) as u64);
            st.max_dispatches_in_flight = st.max_dispatches_in_flight.max(n_groups as u64);
            if listing.len() == 0 && n_groups == 0 && tail.is_empty() {
                if listing.any_work && !dev.is_removed() && !st.draining {
                    // D6: nothing can run while an engine has work: a hang, at once.
                    dev.remove(RemovalReason::Hung);
                    continue;
                }
                let mut released = false;
                for h in 0..st.hosts.len() {
                    // Device waits fail as timed out; a wait for other host threads goes on
                    // (they are released too and will end).
                    if matches!(&st.hosts[h].state, HostState::Blocked(c) if !c.is_host_wait()) {
                        st.set_host_state(h, HostState::Ready);
                        st.hosts[h].wake = if dev.is_removed() {
                            Wake::Removed
                        } else {
                            Wake::TimedOut
                        };
                        released = true;
                    }
                }
                if released {
                    continue;
                }
                return Pick::Nothing;
            }
            // Strict mode: maximal PFP run-ahead (D5) - an enabled PFP step goes first.
            let pfp = if !dev.strict() {
                None
            } else if let Some(left) = listing.left.as_ref() {
                let n = left.pfps() as u64;
                (n > 0).then(|| Choice::Listed(left.nth_pfp(st.rng.below(n) as usize)))
            } else {
                let pfps: Vec<usize> = (0..listing.entries.len())
                    .filter(|i| matches!(listing.entries[*i].actor, Actor::Pfp(_)))
                    .collect();
                (!pfps.is_empty())
                    .then(|| Choice::Listed(pfps[st.rng.below(pfps.len() as u64) as usize]))
            };
            let choice = match pfp {
                Some(c) => c,
                None => self.choose(st, &mut listing, n_groups, &tail),
            };
            let (pos, actor, ready, wake) = match choice {
                Choice::Listed(i) => {
                    let e = listing.entries[i];
                    let ready = e.ready.unwrap_or_else(|| self.clock.now_ns());
                    (i, e.actor, ready, e.wake)
                }
                Choice::Tail(i) => (usize::MAX, tail[i].0, tail[i].1, tail[i].2),
                Choice::Group(slot) => {
                    st.steps += 1;
                    let ready = st.groups.get(slot).map_or(0, |g| g.ready);
                    self.clock.advance_to(ready);
                    if let Some(p) = self.complete_groups(dev, st, &listing, slot) {
                        return p;
                    }
                    continue;
                }
            };
            st.steps += 1;
            self.clock.advance_to(ready);
            match actor {
                Actor::Host(h) => {
                    st.hosts[h].wake = wake;
                    st.disabled.clear();
                    return Pick::Host(h);
                }
                Actor::Pfp(id) | Actor::Me(id) => {
                    let stage = if matches!(actor, Actor::Pfp(_)) {
                        Stage::Pfp
                    } else {
                        Stage::Me
                    };
                    let q = listing.queues[listing.entries[pos].queue].clone();
                    let ctx = EngineCtx::new(dev);
                    let (step, launches, copy, moved) = {
                        let mut e = lock(&q.engine);
                        let before = e.packets_moved();
                        let step = e.step(stage, &ctx);
                        if let Some(t) = e.trace.as_mut() {
                            st.trace.extend(t.drain());
                        }
                        let moved = e.packets_moved() != before;
                        (step, e.take_launches(), e.copy_pending(), moved)
                    };
                    // The try only looked: the listing less this stage is the next one.
                    let mut keep = false;
                    match step {
                        Step::Progressed => {
                            st.disabled.clear();
                            if stage == Stage::Me {
                                match copy {
                                    Some(bytes) if !st.copy_ready.contains_key(&id) => {
                                        let cost =
                                            bytes.div_ceil(1024).saturating_mul(COPY_NS_PER_KIB);
                                        st.copy_ready
                                            .insert(id, self.clock.now_ns().saturating_add(cost));
                                    }
                                    Some(_) => {}
                                    None => {
                                        st.copy_ready.remove(&id);
                                    }
                                }
                            }
                        }
                        Step::Blocked(_) | Step::Idle => {
                            st.disabled.insert(actor);
                            st.failed_tries += 1;
                            keep = !moved && launches.is_empty();
                        }
                        Step::Faulted(f) => {
                            let reason = f.removal_reason();
                            dev.remove_with_fault(reason, Some((id, f)));
                        }
                    }
                    let watchdog = duration_ns(dev.desc.watchdog_timeout);
                    for l in launches {
                        if l.groups == 0 {
                            continue;
                        }
                        let cost = l.kernel.group_cost_ns();
                        let serial = st.next_serial;
                        st.next_serial += 1;
                        if cost > watchdog {
                            // D6: an endless kernel; its removal is ready at launch + timeout.
                            st.endless.push(Endless {
                                serial,
                                queue: id,
                                ready: self.clock.now_ns().saturating_add(watchdog),
                                fault: Fault::EndlessKernel {
                                    site: l.site,
                                    op: l.op,
                                    kernel: l.kernel.name().to_string(),
                                    group: 0,
                                },
                            });
                            continue;
                        }
                        st.groups.push(Group::new(
                            id,
                            l.index,
                            l.kernel.clone(),
                            l.groups,
                            self.clock.now_ns().saturating_add(cost),
                            l.site,
                            l.op,
                        ));
                    }
                    if keep {
                        let pct = matches!(st.strategy, Strategy::Pct { .. });
                        let priorities = &st.priorities;
                        listing.take(pos, |a| priorities.get(&a).copied(), pct);
                        st.listing = Some(listing);
                    }
                    return Pick::Progressed;
                }
                Actor::Retire(id) => {
                    if let Some(q) = listing.queue(id) {
                        let ctx = EngineCtx::new(dev);
                        let step = {
                            let mut e = lock(&q.engine);
                            let step = e.retire(&ctx);
                            if let Some(t) = e.trace.as_mut() {
                                st.trace.extend(t.drain());
                            }
                            step
                        };
                        if let Step::Faulted(f) = step {
                            let reason = f.removal_reason();
                            dev.remove_with_fault(reason, Some((id, f)));
                        }
                        st.disabled.clear();
                    }
                    return Pick::Progressed;
                }
                Actor::Writeback(id) => {
                    if let Some(vis) = dev.model().as_mut().and_then(|m| m.vis.as_mut()) {
                        vis.write_back_random_line(id);
                    }
                    st.disabled.clear();
                    return Pick::Progressed;
                }
                Actor::Endless(serial) => {
                    if let Some(pos) = st.endless.iter().position(|x| x.serial == serial) {
                        let x = st.endless.remove(pos);
                        dev.remove_with_fault(RemovalReason::Hung, Some((x.queue, x.fault)));
                    }
                    st.disabled.clear();
                    return Pick::Progressed;
                }
            }
        }
    }

    /// Completes some groups of the dispatch in flight at `slot` (one action, D4); `None` when
    /// there is nothing left to complete there.
    fn complete_groups(
        &self,
        dev: &DeviceShared,
        st: &mut MutexGuard<'_, State>,
        listing: &Listing,
        slot: Slot,
    ) -> Option<Pick> {
        let g = st.groups.get(slot)?;
        let (kernel, queue, index, site, op) = (g.kernel.clone(), g.queue, g.index, g.site, g.op);
        let state = &mut **st;
        let (first, last) = state.groups.take(slot, &mut state.rng)?;
        let g = GroupRun {
            kernel,
            queue,
            index,
            groups: first..last,
            site,
            op,
        };
        if dev.trace_sink().is_some() {
            let now = self.clock.now_ns();
            st.trace.push(crate::trace::TraceEvent::Slice {
                track: crate::trace::Track::Worker { index: 0 },
                name: if g.groups.len() == 1 {
                    format!("{} group {}", g.kernel.name(), g.groups.start)
                } else {
                    format!(
                        "{} groups {}..{}",
                        g.kernel.name(),
                        g.groups.start,
                        g.groups.end
                    )
                },
                kind: crate::trace::SliceKind::Kernel,
                start_ns: now.saturating_sub(g.kernel.group_cost_ns()),
                end_ns: now,
                site: None,
            });
        }
        let result = if matches!(g.kernel, Kernel::Spin { .. }) {
            // No memory accesses, and its cost is virtual time here: nothing to
            // run for any number of groups.
            Ok(())
        } else if let Some(mut mem) = StrictMemory::new(dev, g.queue, g.index) {
            run_groups(&g.kernel, &mut mem, &VirtualTime, g.groups.clone())
        } else {
            let mut mem = PlainMemory::new(dev, (g.queue, g.index));
            run_groups(&g.kernel, &mut mem, &VirtualTime, g.groups.clone())
        };
        match result {
            Ok(()) => {
                match g.kernel.write_range(g.groups.clone()) {
                    Some((s, e)) => dev.watches.notify_range(s, e),
                    None => dev.watches.notify_all(),
                }
                if let Some(q) = listing.queue(g.queue) {
                    let n = g.groups.end - g.groups.start;
                    q.groups_completed
                        .fetch_add(u64::from(n), Ordering::Relaxed);
                    lock(&q.engine).groups_done(g.index, n);
                }
            }
            Err(failure) => {
                let f = failure.into_fault(g.site, g.op, &g.kernel);
                let reason = f.removal_reason();
                dev.remove_with_fault(reason, Some((g.queue, f)));
            }
        }
        st.disabled.clear();
        Some(Pick::Progressed)
    }

    /// Picks one of the enabled actions: the listed ones still enabled (`listing`), then the
    /// `n_groups` dispatches in flight in launch order, then `tail`, as if they were one list.
    fn choose(
        &self,
        st: &mut MutexGuard<'_, State>,
        listing: &mut Listing,
        n_groups: usize,
        tail: &[(Actor, u64, Wake)],
    ) -> Choice {
        match st.strategy {
            Strategy::Random => {
                let listed = listing.len();
                let total = listed + n_groups + tail.len();
                let k = st.rng.below(total as u64) as usize;
                if k < listed {
                    Choice::Listed(listing.nth(k))
                } else if k < listed + n_groups {
                    Choice::Group(st.groups.nth(k - listed))
                } else {
                    Choice::Tail(k - listed - n_groups)
                }
            }
            Strategy::Pct { .. } => {
                let state = &mut **st;
                let mut priority = |rng: &mut Rng, a: Actor| match state.priorities.get(&a) {
                    Some(p) => *p,
                    None => {
                        let p = (1 << 21) + rng.below(1 << 40);
                        state.priorities.insert(a, p);
                        p
                    }
                };
                let mut best = None;
                let mut best_p = 0;
                match listing.left.as_mut() {
                    None => {
                        for (i, e) in listing.entries.iter().enumerate() {
                            let p = priority(&mut state.rng, e.actor);
                            if p > best_p {
                                best_p = p;
                                best = Some(Choice::Listed(i));
                            }
                        }
                    }
                    Some(left) => {
                        // New actors get their priorities in listing order, as in the scan.
                        for i in left.take_unprioritized() {
                            let p = priority(&mut state.rng, listing.entries[i].actor);
                            left.set_priority(i, p);
                        }
                        if let Some((i, p)) = left.best() {
                            best_p = p;
                            best = Some(Choice::Listed(i));
                        }
                    }
                }
                if n_groups > 0 {
                    let rng = &mut state.rng;
                    if let Some((slot, p)) = state.groups.best(|| (1 << 21) + rng.below(1 << 40)) {
                        if p > best_p {
                            best_p = p;
                            best = Some(Choice::Group(slot));
                        }
                    }
                }
                for (i, (a, _, _)) in tail.iter().enumerate() {
                    let p = priority(&mut state.rng, *a);
                    if p > best_p {
                        best_p = p;
                        best = Some(Choice::Tail(i));
                    }
                }
                // No priority above zero: the first action, as a scan would keep it.
                let best = best.unwrap_or_else(|| {
                    if let Some(i) = listing.first() {
                        Choice::Listed(i)
                    } else if n_groups > 0 {
                        Choice::Group(state.groups.nth(0))
                    } else {
                        Choice::Tail(0)
                    }
                });
                if state.change_points.contains(&state.steps) {
                    let low = state.next_low;
                    state.next_low = state.next_low.saturating_sub(1);
                    match best {
                        Choice::Listed(i) => {
                            state.priorities.insert(listing.entries[i].actor, low);
                            if let Some(left) = listing.left.as_mut() {
                                left.set_priority(i, low);
                            }
                        }
                        Choice::Tail(i) => {
                            state.priorities.insert(tail[i].0, low);
                        }
                        Choice::Group(slot) => state.groups.set_priority(slot, low),
                    }
                }
                best
            }
        }
    }
}

/// What [`Scheduler::choose`] picked.
#[derive(Debug, Clone, Copy)]
enum Choice {
    /// The action at this index of the listed actions.
    Listed(usize),
    /// Completing groups of the dispatch in flight at this slot.
    Group(Slot),
    /// The action at this index of the actions after the dispatches.
    Tail(usize),
}

/// The groups of one dispatch the scheduler completes in one action.
struct GroupRun {
    kernel: Kernel,
    queue: u32,
    index: u64,
    groups: std::ops::Range<u32>,
    site: Site,
    op: &'static str,
}

#[derive(Debug)]
enum Pick {
    Host(usize),
    Progressed,
    Nothing,
}

impl Wake {
    /// The wait outcome this wake-up means.
    fn outcome(self) -> WaitOutcome {
        match self {
            Wake::Ok => WaitOutcome::Reached,
            Wake::Removed => WaitOutcome::Removed,
            Wake::TimedOut => WaitOutcome::TimedOut,
        }
    }
}

impl Backend for Scheduler {
    fn virtual_time(&self) -> bool {
        true
    }

    fn start_queue(
        &self,
        dev: &Arc<DeviceShared>,
        queue: &Arc<QueueShared>,
    ) -> std::io::Result<()> {
        lock(&dev.kept_queues).push(queue.clone());
        Ok(())
    }

    fn yield_point(&self, dev: &DeviceShared) {
        if let Some(h) = self.current_host(dev) {
            self.schedule(dev, h, HostStep::Yield);
        }
    }

    /// Host threads of the schedule block as a scheduling point (no timeout: D6 decides when
    /// nothing can run); other threads are outside the model and block in real time.
    fn block(&self, dev: &DeviceShared, cond: Cond, timeout: Option<Duration>) -> WaitOutcome {
        match self.current_host(dev) {
            Some(h) => self.schedule(dev, h, HostStep::Block(cond)).outcome(),
            None => super::threaded::block_real(
                dev,
                cond,
                timeout.and_then(|t| Instant::now().checked_add(t)),
            ),
        }
    }

    fn schedules_caller(&self, dev: &DeviceShared) -> bool {
        self.current_host(dev).is_some()
    }

    fn sleep(&self, dev: &DeviceShared, duration: Duration) {
        match self.current_host(dev) {
            Some(h) => {
                self.schedule(dev, h, HostStep::Sleep(duration_ns(duration)));
            }
            None => std::thread::sleep(duration),
        }
    }

    fn add_host(&self, name: &str) -> Option<usize> {
        Some(Scheduler::add_host(self, name))
    }

    fn enter_host(&self, dev: &DeviceShared, slot: usize) {
        Scheduler::enter_host(self, dev, slot);
    }

    fn host_done(&self, dev: &DeviceShared, slot: usize) {
        self.schedule(dev, slot, HostStep::Done);
        unregister_current(dev.id);
    }

    fn last_handle_dropped(&self, dev: &DeviceShared) {
        if let Some(h) = self.current_host(dev) {
            if !dev.is_removed() {
                self.drain(dev, h);
            }
        }
        unregister_current(dev.id);
    }

    fn schedule_stats(&self) -> Option<ScheduleStats> {
        let st = lock(&self.st);
        Some(ScheduleStats {
            steps: st.steps,
            max_dispatches_in_flight: st.max_dispatches_in_flight,
            max_listed: st.max_listed,
            listings: st.listings,
            failed_tries: st.failed_tries,
            blocked_host_tests: st.blocked_host_tests,
        })
    }

    fn defers_removal_trace(&self) -> bool {
        true
    }

    fn endless_group(&self, _dev: &DeviceShared) -> Option<(u32, Fault)> {
        None
    }
}
