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
//! if it reports `Blocked`/`Idle`, marked disabled until something else progresses.

use super::{Backend, Cond};
use crate::clock::{Clock, CLOCK_EPOCH_NS};
use crate::engine::kernels::{run_groups, PlainMemory, SpinTime, StrictMemory};
use crate::engine::{EngineCtx, Fault, Kernel, Site, Stage, Step};
use crate::error::RemovalReason;
use crate::rng::Rng;
use crate::runtime::{DeviceShared, QueueShared};
use crate::sync::shim::{
    condvar_wait_until, lock, AtomicU64, Condvar, Mutex, MutexGuard, Ordering,
};
use crate::sync::{FenceCore, Notify, Ticket, WaitOutcome};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
    Blocked(Cond),
    Sleeping(u64),
    Done,
}

#[derive(Debug)]
struct Host {
    name: String,
    state: HostState,
    wake: Wake,
}

/// Who performs an action (PCT gives priorities to actors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Actor {
    Host(usize),
    Pfp(u32),
    Me(u32),
    Retire(u32),
    Group(u64),
    Endless(u64),
    /// Strict mode: an early write-back of one line of an engine's dirty words (D5).
    Writeback(u32),
}

/// The groups of one launched dispatch that have not completed: one record per dispatch, not
/// per group, so memory does not grow with the group count and a step costs O(dispatches in
/// flight). Each completion of one of its groups is one action (D4).
#[derive(Debug)]
struct Group {
    serial: u64,
    queue: u32,
    index: u64,
    kernel: Kernel,
    /// The groups not yet completed, as half-open ranges (in group order).
    left: VecDeque<(u32, u32)>,
    ready: u64,
    site: Site,
    op: &'static str,
}

/// Ranges a dispatch's remaining groups may split into. Below it, the next group to complete is
/// any remaining one (every completion order of up to this many splits is reachable); at it,
/// the first or last group of a random range (the count stays bounded whatever the size).
const MAX_GROUP_RANGES: usize = 64;

impl Group {
    /// Takes the groups that complete in the next action, chosen with `rng`: one group (half the
    /// time), or the whole of one remaining range at once (the same as completing them one
    /// after another with nothing in between, which is one of the schedules; it keeps a
    /// dispatch of 2^32 - 1 groups to a few dozen actions). Every interleaving of single
    /// completions stays reachable.
    fn take(&mut self, rng: &mut Rng) -> Option<(u32, u32)> {
        let n = self.left.len();
        if n == 0 {
            return None;
        }
        let i = rng.below(n as u64) as usize;
        let (start, end) = self.left[i];
        if end - start > 1 && rng.below(2) == 0 {
            self.left.remove(i);
            return Some((start, end));
        }
        let g = if n < MAX_GROUP_RANGES {
            start + rng.below(u64::from(end - start)) as u32
        } else if rng.below(2) == 0 {
            start
        } else {
            end - 1
        };
        match (g == start, g + 1 == end) {
            (true, true) => {
                self.left.remove(i);
            }
            (true, false) => self.left[i].0 = g + 1,
            (false, true) => self.left[i].1 = g,
            (false, false) => {
                self.left[i].1 = g;
                self.left.insert(i + 1, (g + 1, end));
            }
        }
        Some((g, g + 1))
    }
}

#[derive(Debug)]
struct Endless {
    serial: u64,
    queue: u32,
    ready: u64,
    fault: Fault,
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
    turn: Option<usize>,
    groups: Vec<Group>,
    endless: Vec<Endless>,
    next_serial: u64,
    /// Per queue id: when the copy its ME started completes.
    copy_ready: BTreeMap<u32, u64>,
    disabled: BTreeSet<Actor>,
    steps: u64,
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
    cv: Condvar,
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

/// Wakes nothing: the scheduler reads a host wait's tickets when it collects enabled actions.
struct NoWake;

impl Notify for NoWake {
    fn notify(&self) {}
}

impl Cond {
    /// Whether this waits for other host threads (a join, or the end of the run), not for the
    /// device.
    fn is_host_wait(&self) -> bool {
        matches!(self, Cond::HostDone(_) | Cond::Settled)
    }

    /// Fence conditions become tickets, issued now (by the blocking host action).
    fn latched(self) -> Cond {
        let issue = |f: Arc<FenceCore>, v: u64| Ticket::issue(f, v, Arc::new(NoWake));
        match self {
            Cond::Fence(f, v) => Cond::Tickets(vec![issue(f, v)], false),
            Cond::Multi(fs, any) => {
                Cond::Tickets(fs.into_iter().map(|(f, v)| issue(f, v)).collect(), any)
            }
            c => c,
        }
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
                hosts: vec![Host {
                    name: "main".into(),
                    state: HostState::Running,
                    wake: Wake::Ok,
                }],
                turn: Some(0),
                groups: Vec::new(),
                endless: Vec::new(),
                next_serial: 0,
                copy_ready: BTreeMap::new(),
                disabled: BTreeSet::new(),
                steps: 0,
                draining: false,
                trace: Vec::new(),
            }),
            cv: Condvar::new(),
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
        st.hosts.push(Host {
            name: name.to_string(),
            state: HostState::Ready,
            wake: Wake::Ok,
        });
        st.hosts.len() - 1
    }

    /// Called first thing by a spawned host thread: registers it and waits for its turn.
    pub(crate) fn enter_host(&self, dev: &DeviceShared, me: usize) {
        register_current(dev.id, me);
        if let Some(name) = lock(&self.st).hosts.get(me).map(|h| h.name.clone()) {
            crate::host_names::set_current_name(&name);
        }
        let mut st = lock(&self.st);
        while st.turn != Some(me) {
            st = condvar_wait_until(&self.cv, st, None);
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
        st.hosts[me].state = match y {
            HostStep::Yield => HostState::Ready,
            HostStep::Block(c) => HostState::Blocked(c.latched()),
            HostStep::Sleep(ns) => HostState::Sleeping(self.clock.now_ns().saturating_add(ns)),
            HostStep::Done => HostState::Done,
        };
        st.hosts[me].wake = Wake::Ok;
        loop {
            let picked = self.pick(dev, &mut st);
            // Only the turn holder runs the loop, so releasing the lock here is safe.
            st = self.flush(dev, st);
            match picked {
                Pick::Host(h) if h == me => {
                    st.hosts[me].state = HostState::Running;
                    return st.hosts[me].wake;
                }
                Pick::Host(h) => {
                    st.turn = Some(h);
                    st.hosts[h].state = HostState::Running;
                    self.cv.notify_all();
                    if done {
                        return Wake::Ok;
                    }
                    while st.turn != Some(me) {
                        st = condvar_wait_until(&self.cv, st, None);
                    }
                    return st.hosts[me].wake;
                }
                Pick::Progressed => continue,
                Pick::Nothing => {
                    // Every host is done: nothing will ever run again.
                    st.turn = None;
                    self.cv.notify_all();
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

    fn host_enabled(&self, dev: &DeviceShared, st: &State, h: usize) -> Option<(u64, Wake)> {
        let now = self.clock.now_ns();
        match &st.hosts[h].state {
            HostState::Ready => Some((now, st.hosts[h].wake)),
            HostState::Sleeping(until) => Some((*until, Wake::Ok)),
            HostState::Blocked(c) => {
                // Removal releases device waits, never a wait for another host thread: that
                // thread is still in the schedule and must get its turns to end (a join that
                // returned early would block its OS thread while holding the turn).
                if dev.is_removed() && !c.is_host_wait() {
                    return Some((now, Wake::Removed));
                }
                let holds = match c {
                    Cond::Tickets(ts, true) => ts.iter().any(|t| t.is_satisfied()),
                    Cond::Tickets(ts, false) => ts.iter().all(|t| t.is_satisfied()),
                    Cond::Fence(f, v) => f.completed_value() >= *v,
                    Cond::Multi(fs, any) => {
                        if *any {
                            fs.iter().any(|(f, v)| f.completed_value() >= *v)
                        } else {
                            fs.iter().all(|(f, v)| f.completed_value() >= *v)
                        }
                    }
                    Cond::Memory {
                        buffer,
                        offset,
                        cond,
                    } => cond.holds(buffer.load(*offset, cond.width).unwrap_or(0)),
                    Cond::Idle => dev.live_queues().iter().all(|q| lock(&q.engine).is_idle()),
                    Cond::HostDone(o) => matches!(
                        st.hosts.get(*o).map(|x| &x.state),
                        Some(HostState::Done) | None
                    ),
                    Cond::Settled => {
                        st.hosts
                            .iter()
                            .enumerate()
                            .all(|(i, x)| i == h || matches!(x.state, HostState::Done))
                            && (dev.is_removed()
                                || dev.live_queues().iter().all(|q| lock(&q.engine).is_idle()))
                    }
                };
                let wake = if dev.is_removed() {
                    Wake::Removed
                } else {
                    Wake::Ok
                };
                holds.then_some((now, wake))
            }
            HostState::Running | HostState::Done => None,
        }
    }

    /// Collects the enabled actions, picks one, performs engine actions; returns what happened.
    fn pick(&self, dev: &DeviceShared, st: &mut MutexGuard<'_, State>) -> Pick {
        loop {
            dev.reap_unmaps();
            if !dev.is_removed()
                && dev
                    .desc
                    .interrupt
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                dev.remove(RemovalReason::Requested);
            }
            let mut enabled: Vec<(Actor, u64, Wake)> = Vec::new();
            for h in 0..st.hosts.len() {
                if let Some((ready, wake)) = self.host_enabled(dev, st, h) {
                    enabled.push((Actor::Host(h), ready, wake));
                }
            }
            let now = self.clock.now_ns();
            let queues = dev.live_queues();
            let mut any_work = false;
            if !dev.is_removed() {
                for q in &queues {
                    let e = lock(&q.engine);
                    if e.is_idle() {
                        continue;
                    }
                    any_work = true;
                    let id = q.id;
                    if q.kind.has_pfp() && !st.disabled.contains(&Actor::Pfp(id)) {
                        enabled.push((Actor::Pfp(id), now, Wake::Ok));
                    }
                    if !st.disabled.contains(&Actor::Me(id)) {
                        let ready = if e.copy_pending().is_some() {
                            st.copy_ready.get(&id).copied().unwrap_or(now)
                        } else {
                            now
                        };
                        enabled.push((Actor::Me(id), ready, Wake::Ok));
                    }
                    if e.retire_ready() {
                        enabled.push((Actor::Retire(id), now, Wake::Ok));
                    }
                }
                if dev.strict() {
                    if let Some(vis) = dev.model().as_ref().and_then(|m| m.vis.as_ref()) {
                        for q in &queues {
                            if vis.has_dirty(q.id) {
                                enabled.push((Actor::Writeback(q.id), now, Wake::Ok));
                            }
                        }
                    }
                }
                for g in &st.groups {
                    enabled.push((Actor::Group(g.serial), g.ready, Wake::Ok));
                }
                for x in &st.endless {
                    enabled.push((Actor::Endless(x.serial), x.ready, Wake::Ok));
                }
            }
            if enabled.is_empty() {
                if any_work && !dev.is_removed() && !st.draining {
                    // D6: nothing can run while an engine has work: a hang, at once.
                    dev.remove(RemovalReason::Hung);
                    continue;
                }
                let mut released = false;
                for h in st.hosts.iter_mut() {
                    // Device waits fail as timed out; a wait for other host threads goes on
                    // (they are released too and will end).
                    if matches!(&h.state, HostState::Blocked(c) if !c.is_host_wait()) {
                        h.state = HostState::Ready;
                        h.wake = if dev.is_removed() {
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
            let pfps: Vec<usize> = if dev.strict() {
                (0..enabled.len())
                    .filter(|i| matches!(enabled[*i].0, Actor::Pfp(_)))
                    .collect()
            } else {
                Vec::new()
            };
            // Strict mode: maximal PFP run-ahead (D5) - an enabled PFP step goes first.
            let choice = if pfps.is_empty() {
                self.choose(st, &enabled)
            } else {
                pfps[st.rng.below(pfps.len() as u64) as usize]
            };
            let (actor, ready, wake) = enabled[choice];
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
                    let Some(q) = queues.iter().find(|q| q.id == id) else {
                        continue;
                    };
                    let ctx = EngineCtx::new(dev);
                    let (step, launches, copy) = {
                        let mut e = lock(&q.engine);
                        let step = e.step(stage, &ctx);
                        if let Some(t) = e.trace.as_mut() {
                            st.trace.extend(t.drain());
                        }
                        (step, e.take_launches(), e.copy_pending())
                    };
                    match step {
                        Step::Progressed => {
                            st.disabled.clear();
                            if stage == Stage::Me {
                                match copy {
                                    Some(bytes) if !st.copy_ready.contains_key(&id) => {
                                        let cost = bytes.div_ceil(1024) * COPY_NS_PER_KIB;
                                        st.copy_ready.insert(id, self.clock.now_ns() + cost);
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
                        }
                        Step::Faulted(f) => {
                            let reason = f.removal_reason();
                            dev.remove_with_fault(reason, Some((id, f)));
                        }
                    }
                    let watchdog = dev.desc.watchdog_timeout.as_nanos() as u64;
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
                        st.groups.push(Group {
                            serial,
                            queue: id,
                            index: l.index,
                            kernel: l.kernel.clone(),
                            left: VecDeque::from([(0, l.groups)]),
                            ready: self.clock.now_ns().saturating_add(cost),
                            site: l.site,
                            op: l.op,
                        });
                    }
                    return Pick::Progressed;
                }
                Actor::Retire(id) => {
                    if let Some(q) = queues.iter().find(|q| q.id == id) {
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
                Actor::Group(serial) => {
                    let Some(pos) = st.groups.iter().position(|g| g.serial == serial) else {
                        continue;
                    };
                    let state = &mut **st;
                    let Some((first, last)) = state.groups[pos].take(&mut state.rng) else {
                        st.groups.remove(pos);
                        continue;
                    };
                    let finished = st.groups[pos].left.is_empty();
                    let g = &st.groups[pos];
                    let (kernel, queue, index, site, op) =
                        (g.kernel.clone(), g.queue, g.index, g.site, g.op);
                    if finished {
                        st.groups.remove(pos);
                    }
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
                            if let Some(q) = queues.iter().find(|q| q.id == g.queue) {
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

    fn choose(&self, st: &mut MutexGuard<'_, State>, enabled: &[(Actor, u64, Wake)]) -> usize {
        match st.strategy {
            Strategy::Random => st.rng.below(enabled.len() as u64) as usize,
            Strategy::Pct { .. } => {
                let mut best = 0;
                let mut best_p = 0;
                for (i, (a, _, _)) in enabled.iter().enumerate() {
                    let p = match st.priorities.get(a) {
                        Some(p) => *p,
                        None => {
                            let p = (1 << 21) + st.rng.below(1 << 40);
                            st.priorities.insert(*a, p);
                            p
                        }
                    };
                    if p > best_p {
                        best_p = p;
                        best = i;
                    }
                }
                let step = st.steps;
                if st.change_points.contains(&step) {
                    let low = st.next_low;
                    st.next_low = st.next_low.saturating_sub(1);
                    let a = enabled[best].0;
                    st.priorities.insert(a, low);
                }
                best
            }
        }
    }
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
                self.schedule(dev, h, HostStep::Sleep(duration.as_nanos() as u64));
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

    fn defers_removal_trace(&self) -> bool {
        true
    }

    fn endless_group(&self, _dev: &DeviceShared) -> Option<(u32, Fault)> {
        None
    }
}
