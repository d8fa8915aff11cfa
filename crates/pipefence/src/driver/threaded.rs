//! The threaded driver: one thread per queue engine, a shader worker pool shared by all engines,
//! real time (D1, D3, D8).
//!
//! Engine thread loop: clear the waker, then under the engine lock step the PFP eagerly (up to
//! the FIFO depth), the ME and the retire queue until nothing progresses; hand new dispatches to
//! the pool; register the waker on the address a memory-value wait watches and, if the
//! registration changed, step once more (the re-check); otherwise park. A queue wait's ticket
//! (F5) wakes the engine itself when a signal satisfies it. A wake unparks the thread only once
//! it announced the park (`EngineWaker::begin_park`): a submission or a signal that reaches a
//! running engine costs no system call, and the engine never wakes to find nothing new.
//! Writes the device cannot observe (atomic views) are polled with a 50 µs - 4 ms backoff, only
//! while a view exists (D8).
//!
//! Hand-off: a wake that an engine thread makes of a parked engine (its signal satisfies that
//! queue's ticket, its write reaches that engine's memory watch) is kept by the thread
//! (`crate::sync::defer_wakes`) instead of unparking the other thread. Once its own engine has
//! nothing to do, the thread steps those engines itself ([`serve_deferred`]): a fence handed
//! from queue to queue then costs no thread switch (the chain of queues of `pipefence-bench`'s
//! engine/cross-queue-chain runs on the one thread the host woke). An engine that needs its own
//! thread (a memory-value wait to watch, dispatches in flight, a watchdog deadline, a fault, a
//! device stopping) has it woken, and kept wakes are handed on as soon as the thread has more
//! work of its own, so queues with work still run in parallel.

use super::{Backend, Cond};
use crate::clock::{duration_ns, monotonic_ns};
use crate::engine::kernels::{run_groups, PlainMemory, SpinTime};
use crate::engine::{EngineCtx, Fault, Kernel, Launch, Site, Step, WaitCondition};
use crate::error::RemovalReason;
use crate::runtime::{DeviceShared, QueueShared};
use crate::sync::shim::{
    condvar_wait_until, lock, AtomicU32, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering,
};
use crate::sync::{wait_multiple, Deferred, EngineWaker, Parker, WaitOutcome, WatchKey};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The threaded driver (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Threaded;

impl Backend for Threaded {
    fn virtual_time(&self) -> bool {
        false
    }

    fn start_queue(
        &self,
        dev: &Arc<DeviceShared>,
        queue: &Arc<QueueShared>,
    ) -> std::io::Result<()> {
        let _ = dev
            .pool
            .get_or_init(|| Pool::start(dev, dev.workers, &format!("pf{}", dev.id)));
        spawn_engine(queue.clone(), format!("pf{}-q{}", dev.id, queue.id))
    }

    fn yield_point(&self, _dev: &DeviceShared) {}

    fn block(&self, dev: &DeviceShared, cond: Cond, timeout: Option<Duration>) -> WaitOutcome {
        block_real(
            dev,
            cond,
            timeout.and_then(|t| Instant::now().checked_add(t)),
        )
    }

    fn schedules_caller(&self, _dev: &DeviceShared) -> bool {
        false
    }

    fn sleep(&self, _dev: &DeviceShared, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn add_host(&self, _name: &str) -> Option<usize> {
        None
    }

    fn enter_host(&self, _dev: &DeviceShared, _slot: usize) {}

    fn host_done(&self, _dev: &DeviceShared, _slot: usize) {}

    fn last_handle_dropped(&self, _dev: &DeviceShared) {}

    fn defers_removal_trace(&self) -> bool {
        false
    }

    fn endless_group(&self, dev: &DeviceShared) -> Option<(u32, Fault)> {
        let timeout = dev.desc.watchdog_timeout.as_nanos() as u64;
        let now = dev.now_ns();
        let r = dev.pool.get()?.oldest_endless_group(now, timeout)?;
        Some((r.queue, r.fault()))
    }
}

/// Blocks the calling thread in real time until `cond` holds, the device is removed, or
/// `deadline` passes. Also the deterministic driver's wait for threads outside its schedule.
pub(crate) fn block_real(dev: &DeviceShared, cond: Cond, deadline: Option<Instant>) -> WaitOutcome {
    match cond {
        Cond::Fence(f, v) => f.wait_until(v, deadline),
        Cond::Multi(pairs, any) => wait_multiple(&pairs, any, deadline),
        Cond::HostDone(_) => WaitOutcome::Reached,
        Cond::Idle | Cond::Settled => {
            for q in dev.live_queues() {
                let target = lock(&q.engine).submitted();
                match q.progress.wait_until(target, deadline) {
                    WaitOutcome::Reached => {}
                    o => return o,
                }
            }
            WaitOutcome::Reached
        }
        Cond::Memory {
            buffer,
            offset,
            cond,
        } => {
            let holds = || cond.holds(buffer.load(offset, cond.width).unwrap_or(0));
            let mut backoff = Duration::from_micros(50);
            loop {
                if holds() {
                    return WaitOutcome::Reached;
                }
                if dev.is_removed() {
                    return WaitOutcome::Removed;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return WaitOutcome::TimedOut;
                }
                let parker = Arc::new(Parker::for_current_thread());
                let key = dev.watches.watch(buffer.base + offset, parker.clone());
                // Re-check after registering (see `sync::watch`).
                let polling = dev.views.load(Ordering::SeqCst) > 0;
                if !holds() && !dev.is_removed() {
                    let until = if polling {
                        let p = Instant::now() + backoff;
                        backoff = (backoff * 2).min(Duration::from_millis(4));
                        Some(deadline.map_or(p, |d| d.min(p)))
                    } else {
                        deadline
                    };
                    parker.park(until);
                }
                dev.watches.unwatch(key);
            }
        }
    }
}

/// Starts the engine thread of a queue.
pub(crate) fn spawn_engine(q: Arc<QueueShared>, thread_name: String) -> std::io::Result<()> {
    let dev = q.device.clone();
    dev.engines_running.fetch_add(1, Ordering::AcqRel);
    match std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            engine_main(&q);
            q.device.engine_exited();
        }) {
        Ok(_) => Ok(()),
        Err(e) => {
            dev.engine_exited();
            Err(e)
        }
    }
}

/// The address watch the engine's waker is registered on. Queue waits need no registration
/// here: their tickets wake the engine when satisfied (F5, F9), and stay satisfied, so no
/// re-check can lose the wake-up to a value lowered in between.
#[derive(Default)]
struct Registrations {
    memory: Option<(u64, WatchKey)>,
}

impl Registrations {
    /// Registers `waker` on the external conditions; returns whether anything changed.
    fn update(&mut self, q: &QueueShared, conds: &[WaitCondition]) -> bool {
        let mut changed = false;
        let want_mem = conds.iter().find_map(|c| match c {
            WaitCondition::Memory { address, .. } => Some(*address),
            _ => None,
        });
        let same_mem = match (&self.memory, want_mem) {
            (Some((a, _)), Some(w)) => *a & !7 == w & !7,
            (None, None) => true,
            _ => false,
        };
        if !same_mem {
            if let Some((_, k)) = self.memory.take() {
                q.device.watches.unwatch(k);
            }
            if let Some(a) = want_mem {
                let k = q.device.watches.watch(a, q.waker.clone());
                self.memory = Some((a, k));
            }
            changed = true;
        }
        changed
    }

    fn clear(&mut self, q: &QueueShared) {
        self.update(q, &[]);
    }
}

/// What the watchdog of one engine tracks: the external wait it is stuck in and since when
/// (clock nanoseconds).
#[derive(Default)]
struct Watchdog {
    stuck: Option<(Site, bool, u64)>,
}

/// What the device did meanwhile, for the stall clock of a wait (D6).
#[derive(Debug, Clone, Copy)]
struct DeviceProgress {
    /// When an engine last completed a command, a submission or a dispatch group.
    last_ns: u64,
    /// Whether a dispatch whose groups are bound to complete within the watchdog timeout is in
    /// flight (the device is progressing through it).
    bounded_in_flight: bool,
}

impl Watchdog {
    /// Updates the tracked wait; returns the nanoseconds left before it hangs the device, or
    /// `None` when no timeout applies. The stall clock starts when the engine blocks in the wait,
    /// restarts whenever the device progresses, and does not run while a dispatch bound to
    /// complete is in flight (D6).
    fn update(
        &mut self,
        blocked: Option<(Site, bool)>,
        now: u64,
        device: DeviceProgress,
        memory_ns: u64,
        fence_ns: Option<u64>,
    ) -> Option<u64> {
        let Some((site, is_memory)) = blocked else {
            self.stuck = None;
            return None;
        };
        let limit = if is_memory { Some(memory_ns) } else { fence_ns }?;
        let since = match self.stuck {
            Some((s, m, t)) if s == site && m == is_memory => t,
            _ => {
                self.stuck = Some((site, is_memory, now));
                now
            }
        };
        if device.bounded_in_flight {
            return Some(limit);
        }
        let since = since.max(device.last_ns);
        Some(limit.saturating_sub(now.saturating_sub(since)))
    }
}

/// Most ME steps between two PFP runs.
const ME_BATCH: u32 = 64;

/// Longest the engine thread parks while a watchdog deadline is pending (it re-reads the
/// injected clock when it wakes).
const WATCHDOG_PARK: Duration = Duration::from_millis(100);

fn engine_main(q: &Arc<QueueShared>) {
    // A wake before this only sets the flag, which the loop reads before it first parks.
    q.waker.set_thread(crate::sync::shim::current_thread());
    let dev = q.device.clone();
    let ctx = EngineCtx::new(&dev);
    let mut regs = Registrations::default();
    let mut backoff = Duration::from_micros(50);
    let mut conds: Vec<WaitCondition> = Vec::new();
    let mut watchdog = Watchdog::default();
    let memory_ns = duration_ns(dev.desc.watchdog_timeout);
    let tracing = dev.trace_sink().is_some();
    let fence_ns = dev.desc.fence_wait_timeout.map(duration_ns);
    // This engine's completed commands and submissions, as last seen (device progress, D6).
    let mut completed: u64 = 0;
    let mut spin = SpinCredit::default();
    // Wakes of parked engines that this thread makes are kept (`defer_wakes`): when this
    // engine runs out of work, the thread steps those engines itself (`serve_deferred`): a
    // fence handed from queue to queue costs no thread switch.
    crate::sync::defer_wakes();
    let _hand_on_at_exit = HandOnAtExit;
    let mut deferred: Vec<Deferred> = Vec::new();
    loop {
        // Q8: after the last handle is gone the engine still runs what was submitted.
        if dev.is_removed() || (dev.is_shut_down() && lock(&q.engine).is_idle()) {
            break;
        }
        q.waker.clear();
        let mut s = step_engine(q, &ctx, tracing, &mut conds, None);
        dev.reap_unmaps();
        if !hand_out(q, &mut s) {
            break;
        }
        if s.more {
            continue;
        }
        // The watchdog (D6): a memory-value wait (or, opted in, a fence wait) stuck while the
        // device does not progress, or a dispatch group of this engine running too long.
        // The clock is read only when something below uses it: progress to note, a wait with a
        // timeout, or dispatches in flight (an engine parked on a plain queue wait reads none).
        let pool = dev.pool();
        let timed_wait = s
            .blocked
            .is_some_and(|(_, memory)| memory || fence_ns.is_some());
        let now = if s.completed != completed || timed_wait || s.in_flight > 0 {
            dev.now_ns()
        } else {
            0
        };
        if s.completed != completed {
            completed = s.completed;
            pool.note_progress(now);
        }
        let mut park_for: Option<u64> =
            watchdog.update(s.blocked, now, pool.progress(), memory_ns, fence_ns);
        if park_for == Some(0) {
            // An endless kernel running meanwhile is the fault, whichever watchdog fires first.
            dev.remove_hung();
            break;
        }
        if s.in_flight > 0 {
            if let Some(r) = pool.oldest_group(q.id) {
                let ran = now.saturating_sub(r.start_ns);
                if ran > memory_ns {
                    dev.remove_with_fault(RemovalReason::Hung, Some((q.id, r.fault())));
                    break;
                }
                let left = memory_ns - ran;
                park_for = Some(park_for.map_or(left, |p| p.min(left)));
            } else {
                park_for = Some(park_for.map_or(memory_ns, |p| p.min(memory_ns)));
            }
        }
        if regs.update(q, &conds) {
            // Registered something new: re-check before sleeping.
            continue;
        }
        // Nothing left to do here: step the engines this thread woke (then this one again
        // if one of them woke it).
        if crate::sync::has_deferred() {
            serve_deferred(q, &ctx, tracing, fence_ns, &mut deferred);
            if q.waker.notified() {
                continue;
            }
        }
        let polling = polling_views(&dev, &conds);
        // Spin, then park: a wait that the host or another engine releases soon (a host that
        // signals and waits for the answer) is released without a system call on either side.
        // Not while polling a memory view (that has its own back-off), and only while spinning
        // pays ([`SpinCredit`]): on two CPUs an engine that spins in vain holds a CPU that the
        // thread it waits for needs (a fence handed along a chain of queues).
        if !polling && spin.allowed() {
            let woken = q.waker.spin_for_wake();
            spin.outcome(woken);
            if woken {
                continue;
            }
        }
        if !q.waker.begin_park(s.pfp_held) {
            // A wake arrived since the clear: step again. Otherwise later wakes unpark.
            continue;
        }
        let watchdog_park =
            park_for.map(|ns| Duration::from_nanos(ns.max(1_000_000)).min(WATCHDOG_PARK));
        if polling {
            let p = watchdog_park.map_or(backoff, |w| w.min(backoff));
            std::thread::park_timeout(p);
            backoff = (backoff * 2).min(Duration::from_millis(4));
        } else {
            backoff = Duration::from_micros(50);
            match watchdog_park {
                Some(p) => std::thread::park_timeout(p),
                None => std::thread::park(),
            }
        }
    }
    // Wakes kept and not served: their engines' own threads take them (`HandOnAtExit`).
    regs.clear(q);
    // The interval in progress when the engine stops (a queue stuck until removal) counts.
    let _e = lock(&q.engine);
    account(q, None);
}

/// What one stepping of an engine did ([`step_engine`]).
struct Stepped {
    launches: Vec<Launch>,
    fault: Option<Fault>,
    /// Stopped with work left (dispatches to hand to the workers first): step again at once.
    more: bool,
    /// Whether the PFP's last step was held by a queue wait (a submission cannot help then).
    pfp_held: bool,
    /// The wait it is blocked in (its site, and whether it is a memory-value wait).
    blocked: Option<(Site, bool)>,
    in_flight: usize,
    /// Commands and submissions completed so far, and before this stepping.
    completed: u64,
    completed_before: u64,
    trace_events: Vec<crate::trace::TraceEvent>,
}

/// Steps `q`'s engine under its lock: the PFP eagerly (up to the FIFO depth), the ME and the
/// retire queue until nothing progresses (or dispatches pile up for the workers); `conds`
/// gets the conditions it is blocked on. When wakes of parked engines kept by this thread
/// were waiting through a round of its own that progressed, they are handed on then (the
/// thread has more to do than step them). `serving`: the stepping thread's own waker, when it
/// steps the engine of another thread ([`serve_deferred`]): it stops (`more`) after
/// [`SERVE_ROUNDS`] rounds or once its own engine has a wake.
fn step_engine(
    q: &QueueShared,
    ctx: &EngineCtx<'_>,
    tracing: bool,
    conds: &mut Vec<WaitCondition>,
    serving: Option<&EngineWaker>,
) -> Stepped {
    let dev = &q.device;
    let mut launches: Vec<Launch> = Vec::new();
    let mut fault = None;
    let mut more = false;
    let mut pfp_held = false;
    conds.clear();
    ctx.refresh();
    let mut e = lock(&q.engine);
    let completed_before = e.commands_completed + e.completed_submissions;
    let mut rounds: u32 = 0;
    loop {
        rounds = rounds.wrapping_add(1);
        if tracing || rounds.is_multiple_of(256) {
            ctx.refresh();
        }
        let waiting = crate::sync::has_deferred();
        conds.clear();
        let mut progressed = false;
        if q.kind.has_pfp() {
            let (p, end) = e.run_pfp(ctx);
            progressed |= p;
            pfp_held = matches!(end, Step::Blocked(WaitCondition::Fence { .. }));
            match end {
                Step::Blocked(c) => conds.push(c),
                Step::Faulted(f) => fault = Some(f),
                Step::Progressed | Step::Idle => {}
            }
        }
        // The ME drains what the PFP parsed (a bounded batch, then the PFP refills).
        if fault.is_none() {
            let (p, end) = e.run_me(ctx, ME_BATCH);
            progressed |= p;
            match end {
                Step::Blocked(c) => conds.push(c),
                Step::Faulted(f) => fault = Some(f),
                Step::Progressed | Step::Idle => {}
            }
        }
        while fault.is_none() && e.retire_ready() {
            match e.retire(ctx) {
                Step::Faulted(f) => fault = Some(f),
                _ => progressed = true,
            }
        }
        if e.has_launches() {
            launches.extend(e.take_launches());
        }
        if waiting && progressed {
            hand_on_deferred(&mut Vec::new());
        }
        if fault.is_some() || !progressed {
            break;
        }
        if launches.len() >= 32 {
            // Hand work to the workers now; come back without parking.
            more = true;
            break;
        }
        if serving.is_some_and(|own| rounds >= SERVE_ROUNDS || own.notified()) {
            // Stepped for another engine's thread: a long list goes back to its own thread
            // (it runs beside this one), and so does any once this thread's engine has work.
            more = true;
            break;
        }
    }
    let blocked = e
        .blocked_on()
        .map(|(_, site, _, c)| (site, matches!(c, WaitCondition::Memory { .. })));
    let in_flight = e.dispatches_in_flight();
    let completed = e.commands_completed + e.completed_submissions;
    let trace_events = e.trace.as_mut().map(|t| t.drain()).unwrap_or_default();
    if !trace_events.is_empty() {
        // Taken under the lock, handed to the sink after it: `flush_trace` waits.
        dev.trace_inflight.fetch_add(1, Ordering::AcqRel);
    }
    account(q, (!e.is_idle()).then_some(blocked.is_some()));
    drop(e);
    Stepped {
        launches,
        fault,
        more,
        pfp_held,
        blocked,
        in_flight,
        completed,
        completed_before,
        trace_events,
    }
}

/// Hands on what a stepping of `q`'s engine produced: its trace events to the sink, its
/// dispatches to the workers; a fault removes the device (`false`).
fn hand_out(q: &Arc<QueueShared>, s: &mut Stepped) -> bool {
    let dev = &q.device;
    let events = std::mem::take(&mut s.trace_events);
    if !events.is_empty() {
        dev.emit(&events);
        dev.trace_inflight.fetch_sub(1, Ordering::AcqRel);
    }
    let launches = std::mem::take(&mut s.launches);
    if !launches.is_empty() {
        dev.pool().submit(q, launches);
    }
    match s.fault.take() {
        Some(f) => {
            dev.remove_with_fault(f.removal_reason(), Some((q.id, f)));
            false
        }
        None => true,
    }
}

/// Publishes what `q`'s engine does from now on (`None` idle, `Some(true)` blocked,
/// `Some(false)` busy), closing the interval of what it did before when that changes. Called
/// under the engine's lock, by whichever thread stepped it.
fn account(q: &QueueShared, next: Option<bool>) {
    use crate::runtime::{STATE_BLOCKED, STATE_BUSY};
    let state = match q.state.load(Ordering::Acquire) {
        STATE_BLOCKED => Some(true),
        STATE_BUSY => Some(false),
        _ => None,
    };
    if next != state {
        let now = monotonic_ns();
        let since = q.state_since_ns.load(Ordering::Acquire);
        close_interval(q, state, now.saturating_sub(since), next, now);
    }
}

/// Hands the wakes this thread kept on to their engines' own threads.
fn hand_on_deferred(buf: &mut Vec<Deferred>) {
    crate::sync::take_deferred(buf);
    unpark_each(buf);
}

/// Unparks the threads of the engines whose wakes are in `kept` (emptying it).
fn unpark_each(kept: &mut Vec<Deferred>) {
    for d in kept.drain(..) {
        d.thread.unpark();
    }
}

/// Hands on the wakes the thread kept when its engine stops (unwinding included), and makes
/// the thread's later wakes at once (dropping the queue or device as the thread ends may
/// release a fence that another device's engine waits on): no engine is left parked with a
/// wake nobody serves.
struct HandOnAtExit;

impl Drop for HandOnAtExit {
    fn drop(&mut self) {
        let mut kept = Vec::new();
        crate::sync::stop_deferring(&mut kept);
        unpark_each(&mut kept);
    }
}

/// Most rounds (each a PFP run, an ME batch of up to [`ME_BATCH`] packets and the
/// retirements) a thread steps another engine for each wake it serves ([`serve_deferred`]).
const SERVE_ROUNDS: u32 = 4;

/// Most engines a thread steps for others before it parks ([`serve_deferred`]); the rest are
/// handed on to their own threads.
const SERVE_MAX: u32 = 64;

/// Steps the engines whose wakes this thread kept (engine `own`'s thread, with nothing left to
/// do itself), as their own threads would, as long as that is all they need: an engine left
/// blocked on a queue wait (without a fence watchdog) or idle, with no dispatch in flight,
/// parks again (its thread never woke). One that needs its own thread (a memory-value wait to
/// watch, dispatches to time, a watchdog, a fault, the device stopping) has its thread woken,
/// as are the rest once this engine has a wake of its own or [`SERVE_MAX`] are served; so does
/// one with more work than [`SERVE_ROUNDS`] rounds (it runs on beside this thread).
fn serve_deferred(
    own: &QueueShared,
    ctx: &EngineCtx<'_>,
    tracing: bool,
    fence_ns: Option<u64>,
    buf: &mut Vec<Deferred>,
) {
    let dev = &own.device;
    let mut queues: Option<Vec<Arc<QueueShared>>> = None;
    let mut conds: Vec<WaitCondition> = Vec::new();
    let mut served = 0u32;
    loop {
        crate::sync::take_deferred(buf);
        if buf.is_empty() {
            return;
        }
        for d in std::mem::take(buf) {
            if served >= SERVE_MAX || own.waker.notified() || dev.is_removed() {
                d.thread.unpark();
                continue;
            }
            let qs = queues.get_or_insert_with(|| dev.live_queues());
            let Some(q) = qs
                .iter()
                .find(|q| std::ptr::eq(Arc::as_ptr(&q.waker), d.waker))
            else {
                // Another device's engine (or one that is gone): its thread serves it.
                d.thread.unpark();
                continue;
            };
            served += 1;
            if !step_parked(&own.waker, q, ctx, tracing, fence_ns, &mut conds) {
                q.waker.wake_thread();
            }
        }
    }
}

/// Steps `q`'s engine (its thread parked, its waker notified: [`serve_deferred`]) until it
/// parks again; `false` when it needs its own thread.
fn step_parked(
    own: &EngineWaker,
    q: &Arc<QueueShared>,
    ctx: &EngineCtx<'_>,
    tracing: bool,
    fence_ns: Option<u64>,
    conds: &mut Vec<WaitCondition>,
) -> bool {
    let dev = &q.device;
    for _ in 0..4 {
        if dev.is_shut_down() {
            return false;
        }
        q.waker.clear();
        let mut s = step_engine(q, ctx, tracing, conds, Some(own));
        let launched = !s.launches.is_empty();
        if !hand_out(q, &mut s) {
            return false;
        }
        if s.completed_before != s.completed {
            dev.pool().note_progress(dev.now_ns());
        }
        let memory = conds
            .iter()
            .any(|c| matches!(c, WaitCondition::Memory { .. }));
        let timed = s.blocked.is_some_and(|(_, m)| m || fence_ns.is_some());
        if s.more || launched || s.in_flight > 0 || memory || timed {
            return false;
        }
        if q.waker.begin_park(s.pfp_held) {
            return true;
        }
    }
    false
}

/// Whether an engine with nothing to do spins before it parks: while recent spins found a
/// wake. Each spin that does refills the credit, each that does not spends one; without
/// credit the engine parks at once, and tries a spin again after [`SpinCredit::RETRY`] parks.
#[derive(Debug)]
struct SpinCredit {
    credit: u32,
    parks: u32,
}

impl Default for SpinCredit {
    fn default() -> Self {
        SpinCredit {
            credit: Self::FULL,
            parks: 0,
        }
    }
}

impl SpinCredit {
    /// The credit a spin that found a wake gives back.
    const FULL: u32 = 4;
    /// Parks without spinning before one more try.
    const RETRY: u32 = 256;

    fn allowed(&mut self) -> bool {
        if self.credit > 0 {
            return true;
        }
        self.parks += 1;
        if self.parks >= Self::RETRY {
            self.parks = 0;
            return true;
        }
        false
    }

    fn outcome(&mut self, woken: bool) {
        self.credit = if woken {
            Self::FULL
        } else {
            self.credit.saturating_sub(1)
        };
    }
}

/// Whether the engine polls a memory-value wait (an atomic view exists, D8).
fn polling_views(dev: &DeviceShared, conds: &[WaitCondition]) -> bool {
    conds
        .iter()
        .any(|c| matches!(c, WaitCondition::Memory { .. }))
        && dev.views.load(Ordering::SeqCst) > 0
}

/// Adds `ns` spent in `state` to the queue's busy or blocked time and publishes `next` as what
/// it does since `now`.
fn close_interval(q: &QueueShared, state: Option<bool>, ns: u64, next: Option<bool>, now: u64) {
    use crate::runtime::{STATE_BLOCKED, STATE_BUSY, STATE_IDLE};
    // Idle first, so that a reader never counts the interval twice.
    q.state.store(STATE_IDLE, Ordering::Release);
    match state {
        Some(true) => q.blocked_ns.fetch_add(ns, Ordering::AcqRel),
        Some(false) => q.busy_ns.fetch_add(ns, Ordering::AcqRel),
        None => 0,
    };
    q.state_since_ns.store(now, Ordering::Release);
    let next = match next {
        Some(true) => STATE_BLOCKED,
        Some(false) => STATE_BUSY,
        None => STATE_IDLE,
    };
    q.state.store(next, Ordering::Release);
}

/// One dispatch handed to the pool.
struct Job {
    queue: Arc<QueueShared>,
    launch: Launch,
    next: AtomicU32,
    done: AtomicU32,
    chunk: u32,
    /// Whether a group may run longer than the watchdog timeout, so the endless-kernel
    /// watchdog times each group (D6): a user kernel (its closure may never return) or a
    /// built-in whose cost per group (D4) exceeds the timeout. The other built-ins' groups are
    /// bound to complete, however long the OS keeps a worker off its core.
    watched: bool,
}

/// The shader workers shared by every engine of a device (D3).
#[derive(Debug)]
pub(crate) struct Pool {
    jobs: Mutex<VecDeque<Arc<Job>>>,
    cv: Condvar,
    workers: usize,
    /// The watched group each worker is running, for the endless-kernel watchdog.
    running: Mutex<Vec<Option<RunningGroup>>>,
    /// The watchdog timeout in nanoseconds (saturated).
    watchdog_ns: u64,
    /// Clock nanoseconds of the latest progress of any engine of the device (a command, a
    /// submission or a dispatch group completed), for the stall clock of waits (D6).
    last_progress_ns: AtomicU64,
    /// Dispatches in flight whose groups are bound to complete (jobs not `watched`).
    bounded_jobs: AtomicUsize,
}

/// A group a worker is running.
#[derive(Debug, Clone)]
pub(crate) struct RunningGroup {
    queue: u32,
    site: Site,
    op: &'static str,
    kernel: String,
    group: u32,
    start_ns: u64,
    /// The kernel's cost per group (D4: `spin`'s `ns`, a user kernel's declared cost).
    cost_ns: u64,
}

impl RunningGroup {
    /// The endless-kernel fault of this group (D6).
    fn fault(self) -> Fault {
        Fault::EndlessKernel {
            site: self.site,
            op: self.op,
            kernel: self.kernel,
            group: self.group,
        }
    }
}

impl Pool {
    /// Records progress of an engine at clock nanoseconds `now`.
    fn note_progress(&self, now: u64) {
        self.last_progress_ns.fetch_max(now, Ordering::AcqRel);
    }

    /// What the device did meanwhile, for the stall clock of a wait.
    fn progress(&self) -> DeviceProgress {
        DeviceProgress {
            last_ns: self.last_progress_ns.load(Ordering::Acquire),
            bounded_in_flight: self.bounded_in_flight(),
        }
    }

    /// Whether a dispatch whose groups are bound to complete is in flight (D6).
    pub(crate) fn bounded_in_flight(&self) -> bool {
        self.bounded_jobs.load(Ordering::Acquire) > 0
    }

    /// The longest-running watched group of queue `queue`'s dispatches.
    pub(crate) fn oldest_group(&self, queue: u32) -> Option<RunningGroup> {
        lock(&self.running)
            .iter()
            .flatten()
            .filter(|r| r.queue == queue)
            .min_by_key(|r| r.start_ns)
            .cloned()
    }

    /// The longest-running group of any queue that is an endless kernel at `now`: it has run
    /// longer than `timeout` or costs more (the deterministic driver's criterion, D6).
    pub(crate) fn oldest_endless_group(&self, now: u64, timeout: u64) -> Option<RunningGroup> {
        lock(&self.running)
            .iter()
            .flatten()
            .filter(|r| r.cost_ns > timeout || now.saturating_sub(r.start_ns) > timeout)
            .min_by_key(|r| r.start_ns)
            .cloned()
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("queue", &self.queue.name)
            .field("groups", &self.launch.groups)
            .finish()
    }
}

impl Pool {
    /// Starts `workers` worker threads for `dev`.
    pub(crate) fn start(dev: &Arc<DeviceShared>, workers: usize, name_prefix: &str) -> Arc<Pool> {
        let pool = Arc::new(Pool {
            jobs: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            workers,
            running: Mutex::new(vec![None; workers]),
            watchdog_ns: duration_ns(dev.desc.watchdog_timeout),
            last_progress_ns: AtomicU64::new(0),
            bounded_jobs: AtomicUsize::new(0),
        });
        for i in 0..workers {
            let p = pool.clone();
            let d = Arc::downgrade(dev);
            let _ = std::thread::Builder::new()
                .name(format!("{name_prefix}-w{i}"))
                .spawn(move || worker_main(p, d, i));
        }
        pool
    }

    /// Queues the dispatches of one engine.
    pub(crate) fn submit(&self, q: &Arc<QueueShared>, launches: Vec<Launch>) {
        {
            let mut jobs = lock(&self.jobs);
            for l in launches {
                let per = (l.groups / (self.workers as u32 * 8).max(1)).clamp(1, 256);
                // Long-running kernels go one group at a time, so the watchdog sees each group.
                let chunk = if matches!(l.kernel, Kernel::Spin { .. } | Kernel::User(_)) {
                    1
                } else {
                    per
                };
                let watched = matches!(l.kernel, Kernel::User(_))
                    || l.kernel.group_cost_ns() > self.watchdog_ns;
                if !watched {
                    self.bounded_jobs.fetch_add(1, Ordering::AcqRel);
                }
                jobs.push_back(Arc::new(Job {
                    queue: q.clone(),
                    launch: l,
                    next: AtomicU32::new(0),
                    done: AtomicU32::new(0),
                    chunk,
                    watched,
                }));
            }
        }
        self.cv.notify_all();
    }

    /// Wakes every worker (removal, shutdown).
    pub(crate) fn wake_all(&self) {
        let _g = lock(&self.jobs);
        self.cv.notify_all();
    }

    /// Drops every queued job (removal).
    pub(crate) fn clear(&self) {
        lock(&self.jobs).clear();
        self.cv.notify_all();
    }
}

/// A worker's kernel slice still growing: consecutive claims of one dispatch share a slice.
struct WorkerSlice {
    job: Arc<Job>,
    start_ns: u64,
    end_ns: u64,
    first: u32,
    last: u32,
}

fn emit_worker_slice(index: usize, s: WorkerSlice) {
    let q = &s.job.queue;
    let dev = &q.device;
    dev.emit(&[crate::trace::TraceEvent::Slice {
        track: crate::trace::Track::Worker {
            index: index as u32,
        },
        name: format!(
            "{} groups {}..{} ({})",
            s.job.launch.kernel.name(),
            s.first,
            s.last,
            q.name
        ),
        kind: crate::trace::SliceKind::Kernel,
        start_ns: s.start_ns,
        end_ns: s.end_ns.max(s.start_ns),
        site: None,
    }]);
    dev.trace_inflight.fetch_sub(1, Ordering::AcqRel);
}

/// `spin` in real time: each group busy-waits for its `ns`.
struct RealTime;

impl SpinTime for RealTime {
    fn spin(&self, device: &crate::core::DeviceCore, ns: u64, groups: u32) {
        for _ in 0..groups {
            // `None`: past what an `Instant` can hold, so until the device is removed.
            let end = Instant::now().checked_add(Duration::from_nanos(ns));
            let mut i: u32 = 0;
            while end.is_none_or(|end| Instant::now() < end) {
                std::hint::spin_loop();
                i = i.wrapping_add(1);
                // A removed device stops its workers (D7), even mid-group.
                if i.is_multiple_of(1024) && device.is_removed() {
                    return;
                }
            }
        }
    }
}

fn worker_main(pool: Arc<Pool>, dev: std::sync::Weak<DeviceShared>, index: usize) {
    let mut pending: Option<WorkerSlice> = None;
    let mut exiting = false;
    loop {
        let claim = {
            let mut jobs = lock(&pool.jobs);
            loop {
                match dev.upgrade() {
                    // Q8: after shutdown the workers serve the engines still running.
                    Some(d)
                        if !(d.is_removed()
                            || (d.is_shut_down()
                                && d.engines_running.load(Ordering::Acquire) == 0)) => {}
                    _ => {
                        exiting = true;
                        break None;
                    }
                }
                let mut found = None;
                while let Some(j) = jobs.front() {
                    let start = j.next.fetch_add(j.chunk, Ordering::Relaxed);
                    if start < j.launch.groups {
                        let end = start.saturating_add(j.chunk).min(j.launch.groups);
                        found = Some((j.clone(), start, end));
                        break;
                    }
                    jobs.pop_front();
                }
                if let Some(c) = found {
                    break Some(c);
                }
                if pending.is_some() {
                    // Going idle: hand the open slice to the sink first (outside the lock).
                    break None;
                }
                jobs = condvar_wait_until(&pool.cv, jobs, None);
            }
        };
        let Some((job, start, end)) = claim else {
            if let Some(s) = pending.take() {
                emit_worker_slice(index, s);
            }
            if exiting {
                return;
            }
            continue;
        };
        let q = &job.queue;
        let devs = &q.device;
        if devs.is_removed() {
            continue;
        }
        if job.watched {
            if let Some(slot) = lock(&pool.running).get_mut(index) {
                // Timed from here: the worker starts the group now (D6).
                *slot = Some(RunningGroup {
                    queue: q.id,
                    site: job.launch.site,
                    op: job.launch.op,
                    kernel: job.launch.kernel.name().to_string(),
                    group: start,
                    start_ns: devs.now_ns(),
                    cost_ns: job.launch.kernel.group_cost_ns(),
                });
            }
        }
        let t0 = devs.trace_sink().map(|_| devs.now_ns());
        let result = run_groups(
            &job.launch.kernel,
            &mut PlainMemory::new(devs, (job.queue.id, job.launch.index)),
            &RealTime,
            start..end,
        );
        if let Some(t0) = t0 {
            let t1 = devs.now_ns();
            match pending.as_mut() {
                Some(s) if Arc::ptr_eq(&s.job, &job) => {
                    s.end_ns = t1;
                    s.last = s.last.max(end);
                }
                _ => {
                    if let Some(s) = pending.take() {
                        emit_worker_slice(index, s);
                    }
                    devs.trace_inflight.fetch_add(1, Ordering::AcqRel);
                    pending = Some(WorkerSlice {
                        job: job.clone(),
                        start_ns: t0,
                        end_ns: t1,
                        first: start,
                        last: end,
                    });
                }
            }
        }
        if job.watched {
            if let Some(slot) = lock(&pool.running).get_mut(index) {
                *slot = None;
            }
        }
        if let Err(failure) = result {
            let f = failure.into_fault(job.launch.site, job.launch.op, &job.launch.kernel);
            devs.remove_with_fault(f.removal_reason(), Some((q.id, f)));
            continue;
        }
        // Wake waiters on what the groups wrote (D8).
        match job.launch.kernel.write_range(start..end) {
            Some((s, e)) => devs.watches.notify_range(s, e),
            None if matches!(job.launch.kernel, Kernel::User(_)) => devs.watches.notify_all(),
            None => {}
        }
        let n = end - start;
        q.groups_completed
            .fetch_add(u64::from(n), Ordering::Relaxed);
        pool.note_progress(devs.now_ns());
        let total = job.done.fetch_add(n, Ordering::AcqRel) + n;
        if total >= job.launch.groups {
            if !job.watched {
                pool.bounded_jobs.fetch_sub(1, Ordering::AcqRel);
            }
            lock(&q.engine).groups_done(job.launch.index, job.launch.groups);
            q.waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpinCredit;

    /// An engine spins while its spins find wakes; after `FULL` spins in vain in a row it
    /// parks at once, but for one try every `RETRY` parks, and a try that finds a wake gives
    /// the full credit back.
    #[test]
    fn spin_credit_stops_spinning_in_vain_and_tries_again() {
        let mut s = SpinCredit::default();
        for _ in 0..SpinCredit::FULL {
            assert!(s.allowed());
            s.outcome(false);
        }
        let tries = (0..3 * SpinCredit::RETRY).filter(|_| s.allowed()).count();
        assert_eq!(tries, 3, "one try per RETRY parks once the credit is spent");
        assert!((1..SpinCredit::RETRY).all(|_| !s.allowed()));
        assert!(s.allowed());
        s.outcome(true);
        for _ in 0..SpinCredit::FULL {
            assert!(s.allowed());
            s.outcome(false);
        }
        assert!(!s.allowed());
    }
}
