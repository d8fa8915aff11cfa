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
use crate::choice::Script;
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

mod hosts;
mod pick;
mod scripted;

pub(crate) use hosts::unregister_current;
use hosts::{register_current, registered_host, Host, HostState, HostWait, HostWaker};
use pick::{Choice, Listing, Pick};
use scripted::Who;

/// How the deterministic driver picks among enabled actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// The time. Most readings are bookkeeping (when a write or a signal happened, for reports
    /// and traces): only those that decide what the program computes note a read of the clock
    /// for a reducing exploration (`footprint.rs`): the ready time of a launch, a copy or a
    /// sleep ([`VirtualClock::ready_after`]), a timestamp.
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::Relaxed)
    }
}

impl VirtualClock {
    /// The time `ns` from now: when a launched group, a copy or a sleep is ready. It depends
    /// on the time now, which a reducing exploration notes as a read of the clock.
    pub(crate) fn ready_after(&self, ns: u64) -> u64 {
        crate::footprint::record(crate::footprint::Obj::Clock, crate::footprint::Kind::Read);
        self.now_ns().saturating_add(ns)
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

/// Steps assumed for a run when placing PCT's priority change points.
const PCT_STEPS: u64 = 512;

#[derive(Debug)]
struct State {
    rng: Rng,
    /// Choices from a script instead of the strategy (`choice.rs`), and the alternatives of its
    /// open scheduling point: whether it is strict mode's PFP-first point, and each
    /// alternative with who performs it.
    script: Option<Arc<Script>>,
    script_alts: Vec<(Choice, Who)>,
    script_pfp: bool,
    /// Who performed the last scheduling action (a scripted run's preemptions).
    last_who: Option<Who>,
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
    /// The quiescences of the run so far (nothing could run, so every host's device wait
    /// timed out): the wakes of the waits a quiescence released read its number
    /// ([`Obj::Quiet`](crate::footprint::Obj::Quiet)).
    quiescences: u32,
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

impl Scheduler {
    /// A scheduler whose host 0 (`main`) is the calling thread, holding the turn.
    pub(crate) fn new(
        device_id: u64,
        seed: u64,
        strategy: Strategy,
        script: Option<Arc<Script>>,
    ) -> Self {
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
                script,
                script_alts: Vec::new(),
                script_pfp: false,
                last_who: None,
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
                quiescences: 0,
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
        crate::footprint::record(
            crate::footprint::Obj::Host(h as u32),
            crate::footprint::Kind::Write,
        );
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
        if st.script.as_ref().is_some_and(|s| s.is_reducing()) {
            crate::footprint::start();
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
        st.hosts[me].position = crate::host_names::current_position();
        let reducing = st.script.as_ref().is_some_and(|s| s.is_reducing());
        let done = matches!(y, HostStep::Done);
        // A blocking wait latches its tickets here, in the host's action that ends here (a
        // crossing from now on satisfies them, F5): the action that began at the wait's own
        // scheduling point (`block`).
        let state = match y {
            HostStep::Yield => HostState::Ready,
            HostStep::Block(c) => {
                if reducing {
                    // A host that arrives at a poll reads the word (as a PFP's arrival at a
                    // memory-value wait does, `pick.rs`): a write after it and before the poll
                    // passes races with the arrival, and one before it disables the poll
                    // before it could pass, so both orders are explored.
                    match &c {
                        Cond::Memory {
                            buffer,
                            offset,
                            cond,
                        } => {
                            let _ = buffer.load(*offset, cond.width);
                        }
                        // So does a host that arrives at a wait for every queue to be idle:
                        // it reads whether each queue has work (a submission before the
                        // arrival made it wait; one after it races with it).
                        Cond::Idle => {
                            for q in dev.live_queues() {
                                crate::footprint::record(
                                    crate::footprint::Obj::Submit(q.id),
                                    crate::footprint::Kind::Read,
                                );
                            }
                        }
                        _ => {}
                    }
                }
                let waker = Arc::new(HostWaker {
                    host: me,
                    woken: self.woken.clone(),
                });
                let wait = st.hosts[me].waits;
                st.hosts[me].waits += 1;
                HostState::Blocked(HostWait::latch(c, waker, me, wait))
            }
            HostStep::Sleep(ns) => HostState::Sleeping(self.clock.ready_after(ns)),
            HostStep::Done => HostState::Done,
        };
        if reducing {
            // The host's action since it was picked ends here.
            let fp = crate::footprint::take_raw();
            if let Some(s) = st.script.clone() {
                s.host_reached(me as u32, fp);
            }
        }
        st.set_host_state(me, state);
        st.hosts[me].wake = Wake::Ok;
        loop {
            let picked = self.pick(dev, &mut st);
            // Only the turn holder runs the loop, so releasing the lock here is safe.
            st = self.flush(dev, st);
            match picked {
                Pick::Host(h) if h == me => {
                    st.set_host_state(me, HostState::Running);
                    if reducing {
                        crate::footprint::start();
                    }
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
                    if reducing {
                        crate::footprint::start();
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

    /// A reducing exploration: host `me`'s action since it was picked ends now, though no
    /// scheduling point follows it (its thread leaves the device).
    fn end_action(&self, me: usize) {
        let st = lock(&self.st);
        if st.turn != Some(me) {
            return;
        }
        if let Some(s) = st.script.clone().filter(|s| s.is_reducing()) {
            s.host_reached(me as u32, crate::footprint::take_raw());
        }
    }

    /// Q8: the last `Device` handle is dropped by host `me`: runs every action that can still
    /// run (other hosts' included) until every queue is idle or nothing can run.
    pub(crate) fn drain(&self, dev: &DeviceShared, me: usize) {
        lock(&self.st).draining = true;
        let _ = self.schedule(dev, me, HostStep::Block(Cond::Idle));
        lock(&self.st).draining = false;
    }
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
    /// nothing can run); other threads are outside the model and block in real time. A wait
    /// for fences is a call like any other (D4): its scheduling point comes first, and its
    /// registration (the tickets it latches, F5) is an action of its own, so another thread
    /// or an engine may run between the host's previous call and the registration, as a real
    /// thread may be preempted there (a fence raised and lowered again in between is a
    /// crossing the wait never sees).
    fn block(&self, dev: &DeviceShared, cond: Cond, timeout: Option<Duration>) -> WaitOutcome {
        match self.current_host(dev) {
            Some(h) => {
                if matches!(cond, Cond::Fence(..) | Cond::Multi(..)) {
                    self.schedule(dev, h, HostStep::Yield);
                }
                self.schedule(dev, h, HostStep::Block(cond)).outcome()
            }
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
        // The host has left the device: nothing more of it is an action (a scheduling point
        // would end one), so its thread records nothing more.
        crate::footprint::stop();
    }

    fn last_handle_dropped(&self, dev: &DeviceShared) {
        if let Some(h) = self.current_host(dev) {
            if !dev.is_removed() {
                self.drain(dev, h);
            } else {
                // No drain ends the host's last action (a removal, say, by the only host):
                // it ends here, with what it touched.
                self.end_action(h);
            }
        }
        unregister_current(dev.id);
        // As in `host_done`: the drain gave the host its turn back, and recording with it,
        // for an action that no scheduling point will end.
        crate::footprint::stop();
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

    fn before_report(&self, dev: &DeviceShared) {
        let ctx = EngineCtx::new(dev);
        for q in dev.live_queues() {
            let mut e = lock(&q.engine);
            if e.is_idle() {
                continue;
            }
            for stage in [Stage::Pfp, Stage::Me] {
                if !e.can_progress(stage, &ctx) {
                    // Changes nothing but the stage's own blocked state (`Engine::step`).
                    let _ = e.step(stage, &ctx);
                } else if stage == Stage::Pfp {
                    // A PFP found blocked at a wait that holds now is not stuck: whether a
                    // try found it blocked earlier (a scripted run tries every stage when it
                    // lists them, a seeded one only those it picks) must not change the report.
                    e.pfp_unblocked();
                }
            }
        }
    }
}
