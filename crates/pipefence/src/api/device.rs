//! The device: its configuration, memory, fences and removal state.

use super::buffer::{Buffer, BufferDesc};
use super::fence::Fence;
use super::list::CommandList;
use super::queue::{Queue, QueueDesc, QueueShared};
use crate::clock::{Clock, RealClock};
use crate::command::QueueKind;
use crate::diagnose::{build_report, RemovalReport};
use crate::driver::deterministic::Scheduler;
use crate::driver::threaded::{Pool, Threaded};
use crate::driver::{Backend, Cond, EngineWaker, Strategy};
use crate::engine::{Engine, Fault};
use crate::error::{Error, RemovalReason, Result};
use crate::hazard::{Hazard, MemoryModel, Model};
use crate::memory::{AddressSpace, AllocError, MAX_BUFFER_SIZE};
use crate::sync::shim::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::sync::Writer;
use crate::sync::{
    register_multiple, AddressWatches, Event, FenceCore, MultipleFenceWaitFlags, WaitOutcome,
};
use crate::trace::{SliceKind, TraceEvent, TraceSink, Track};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How a [`Device`] is configured. `DeviceDesc::default()` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct DeviceDesc {
    /// Watchdog timeout (TDR): an engine stalled in a memory-value wait, or one dispatch group
    /// running, for longer than this hangs the device (D6). Default 2 s.
    pub watchdog_timeout: Duration,
    /// Opt-in: also treat a queue stalled in a *fence* wait for longer than this as a hang
    /// (D6). Default `None` (in D3D12 a queue waiting on a fence is not a GPU hang).
    pub fence_wait_timeout: Option<Duration>,
    /// Shader worker threads shared by all engines; 0 means one per available core. Default 0.
    pub workers: usize,
    /// Packets the pre-fetch parser may run ahead of the micro engine (D1). Default 16.
    pub fifo_depth: usize,
    /// GPU timestamp frequency in Hz (C12). Default 100 MHz.
    pub timestamp_frequency: u64,
    /// The clock the watchdog, timeouts and timestamps read; `None` for real time (ignored by
    /// the deterministic driver, which has its own virtual clock).
    pub clock: Option<Arc<dyn Clock>>,
    /// Who steps the engines (D4). Default: [`Driver::Threaded`].
    pub driver: Driver,
    /// Where trace events go (`None`: nothing is recorded). See [`crate::trace`].
    pub trace: Option<Arc<dyn TraceSink>>,
    /// The memory model (D5): plain (default), hazard validation, or strict (deterministic
    /// driver only). See `docs/memory-model.md`.
    pub memory_model: MemoryModel,
}

/// The driver that steps a device's engines (D4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// One thread per engine plus a shader worker pool, real time (the default).
    #[default]
    Threaded,
    /// One thread at a time, virtual time, a schedule chosen by `strategy` from `seed`: same
    /// seed, same result. Host code must run on the thread that created the device or on
    /// threads spawned with [`host::spawn`](crate::host::spawn); other OS threads are outside
    /// the model.
    Deterministic {
        /// The schedule's seed.
        seed: u64,
        /// How enabled actions are picked.
        strategy: Strategy,
    },
}

impl Default for DeviceDesc {
    fn default() -> Self {
        DeviceDesc {
            watchdog_timeout: Duration::from_secs(2),
            fence_wait_timeout: None,
            workers: 0,
            fifo_depth: 16,
            timestamp_frequency: 100_000_000,
            clock: None,
            driver: Driver::Threaded,
            trace: None,
            memory_model: MemoryModel::Plain,
        }
    }
}

/// Largest accepted `fifo_depth`.
pub const MAX_FIFO_DEPTH: usize = 65_536;
/// Largest accepted `workers`.
pub const MAX_WORKERS: usize = 1024;

#[derive(Debug)]
struct Removal {
    reason: RemovalReason,
    fault: Option<Fault>,
    report: Arc<RemovalReport>,
}

/// The last traced write of a word: who, when, what (labels are built only for arrows).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceWrite {
    writer: Writer,
    ns: u64,
    op: &'static str,
    address: u64,
    value: u64,
}

/// The last host write of an address (for reports).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostWrite {
    pub(crate) writer: Writer,
    pub(crate) seq: u64,
    pub(crate) ns: u64,
}

/// A released buffer's base and, per queue that was busy then, its progress fence and the
/// submission count it must reach before the buffer is unmapped (Q8).
type DeferredUnmap = (u64, Vec<(Arc<FenceCore>, u64)>);

static NEXT_DEVICE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// State shared by every handle of one device.
#[derive(Debug)]
pub(crate) struct DeviceShared {
    pub(crate) desc: DeviceDesc,
    pub(crate) workers: usize,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) memory: AddressSpace,
    pub(crate) watches: AddressWatches,
    /// Outstanding atomic views: while any exists, blocked engines poll (D8).
    pub(crate) views: AtomicUsize,
    fences: Mutex<Vec<Weak<FenceCore>>>,
    next_fence: AtomicUsize,
    removed: AtomicBool,
    removal: Mutex<Option<Removal>>,
    /// A process-unique device number (thread names: `pf{id}-q{n}`, `pf{id}-w{n}`).
    pub(crate) id: u64,
    shutdown: AtomicBool,
    pub(crate) queues: Mutex<Vec<Weak<QueueShared>>>,
    /// Deterministic driver: the queues, kept alive while the device is (Q8: dropping a
    /// `Queue` handle never discards submitted work; on the threaded driver the engine thread
    /// keeps its queue). Emptied when the last `Device` handle is dropped.
    pub(crate) kept_queues: Mutex<Vec<Arc<QueueShared>>>,
    /// Threaded driver: engine threads still running (the worker pool outlives them, Q8).
    pub(crate) engines_running: AtomicUsize,
    /// Buffers whose last handle was dropped while work submitted earlier was still pending
    /// (Q8): the base, and per busy queue the submissions that must complete first.
    deferred_unmaps: Mutex<Vec<DeferredUnmap>>,
    deferred_count: AtomicUsize,
    pub(crate) pool: OnceLock<Arc<Pool>>,
    write_seq: AtomicU64,
    next_list: AtomicUsize,
    /// Last host write per 8-byte word.
    pub(crate) host_writes: Mutex<HashMap<u64, HostWrite>>,
    list_names: Mutex<HashMap<u32, Arc<str>>>,
    /// The driver (threaded or deterministic), through its interface.
    pub(crate) driver: Arc<dyn Backend>,
    /// Queue names by id.
    queue_names: Mutex<Vec<Arc<str>>>,
    /// Trace events deferred until no lock is held (see `emit_from_removal`).
    deferred_trace: Mutex<Vec<TraceEvent>>,
    /// Trace batches taken out of an engine or worker and not yet handed to the sink.
    pub(crate) trace_inflight: AtomicUsize,
    /// Traced runs: the last write of each 8-byte word (lane, time, what), for flow arrows.
    trace_writes: Mutex<HashMap<u64, TraceWrite>>,
    /// Hazard analysis and strict-mode visibility (`None` with the plain memory model).
    pub(crate) model: Option<Mutex<Model>>,
}

impl DeviceShared {
    /// The hazard model, locked (`None` with the plain memory model).
    #[inline]
    pub(crate) fn model(&self) -> Option<MutexGuard<'_, Model>> {
        self.model.as_ref().map(lock)
    }

    /// Runs `f` on the hazard model, if the device has one. Out of line: on a plain device the
    /// engine's hot paths only test the option.
    #[inline]
    pub(crate) fn with_model(&self, f: impl FnOnce(&mut Model)) {
        if self.model.is_some() {
            self.with_model_slow(f);
        }
    }

    #[cold]
    #[inline(never)]
    fn with_model_slow(&self, f: impl FnOnce(&mut Model)) {
        if let Some(mut m) = self.model() {
            f(&mut m);
        }
    }

    /// Whether strict mode's visibility model is on.
    #[inline]
    pub(crate) fn strict(&self) -> bool {
        self.desc.memory_model == MemoryModel::Strict
    }

    /// Whether the device was removed.
    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// The removal reason, if removed.
    pub(crate) fn removed_reason(&self) -> Option<RemovalReason> {
        lock(&self.removal).as_ref().map(|r| r.reason)
    }

    /// The `DeviceRemoved` error for `what`.
    pub(crate) fn removed_error(&self, what: impl Into<String>) -> Error {
        Error::DeviceRemoved {
            what: what.into(),
            reason: self.removed_reason().unwrap_or(RemovalReason::Requested),
        }
    }

    /// Fails with `DeviceRemoved` if the device was removed.
    pub(crate) fn check_live(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.is_removed() {
            Err(self.removed_error(what()))
        } else {
            Ok(())
        }
    }

    /// Removes the device (idempotent: the first reason wins). Returns whether this call
    /// removed it.
    pub(crate) fn remove(&self, reason: RemovalReason) -> bool {
        self.remove_with_fault(reason, None)
    }

    /// Removes the device with the fault that caused it (the faulting queue's id and the
    /// fault). The report is built first, so it sees the values before removal.
    pub(crate) fn remove_with_fault(
        &self,
        reason: RemovalReason,
        fault: Option<(u32, Fault)>,
    ) -> bool {
        if self.is_removed() {
            return false;
        }
        let report = Arc::new(build_report(self, reason, fault.as_ref()));
        if self.trace_sink().is_some() {
            let now = self.now_ns();
            for q in self.live_queues() {
                let events = lock(&q.engine).trace_close(self, now);
                self.emit_from_removal(events);
            }
            let track = match report.queues.first() {
                Some(q) => Track::Me {
                    queue: q.queue.clone(),
                },
                None => Track::Host {
                    name: crate::host::name_of(crate::host::current_id()),
                },
            };
            let class = report
                .classification
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            self.emit_from_removal(vec![TraceEvent::Instant {
                track,
                ts_ns: self.now_ns(),
                name: format!("device removed: {reason}{class}"),
                error: true,
            }]);
        }
        {
            let mut r = lock(&self.removal);
            if r.is_some() {
                return false;
            }
            *r = Some(Removal {
                reason,
                fault: fault.map(|(_, f)| f),
                report,
            });
            self.removed.store(true, Ordering::Release);
        }
        self.stop_threads();
        let fences: Vec<Arc<FenceCore>> = lock(&self.fences)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for f in fences {
            f.remove();
        }
        self.watches.notify_all();
        true
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// A clock reading for bookkeeping (last-writer records).
    #[inline]
    pub(crate) fn coarse_now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// A device-wide order of writes (last-writer records).
    #[inline]
    pub(crate) fn next_write_seq(&self) -> u64 {
        self.write_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a host write of `address` (for reports).
    pub(crate) fn record_host_write(&self, address: u64) {
        let w = HostWrite {
            writer: Writer::Host {
                host: crate::host::current_id(),
            },
            seq: self.next_write_seq(),
            ns: self.coarse_now_ns(),
        };
        lock(&self.host_writes).insert(address & !7, w);
    }

    /// The fault that removed the device, if any.
    pub(crate) fn removal_fault(&self) -> Option<Fault> {
        lock(&self.removal).as_ref().and_then(|r| r.fault.clone())
    }

    /// The removal report, if removed.
    pub(crate) fn removal_report(&self) -> Option<Arc<RemovalReport>> {
        lock(&self.removal).as_ref().map(|r| r.report.clone())
    }

    /// The name of command list `id`.
    pub(crate) fn list_name(&self, id: u32) -> String {
        lock(&self.list_names)
            .get(&id)
            .map_or_else(|| format!("list#{id}"), |n| n.to_string())
    }

    /// Whether every user handle of the device is gone.
    #[inline]
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// The worker pool (started with the first queue).
    pub(crate) fn pool(&self) -> &Pool {
        match self.pool.get() {
            Some(p) => p,
            None => unreachable!("engines run only after the pool started"),
        }
    }

    /// Live queues, in creation order.
    pub(crate) fn live_queues(&self) -> Vec<Arc<QueueShared>> {
        lock(&self.queues)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The trace sink, if tracing.
    #[inline]
    pub(crate) fn trace_sink(&self) -> Option<&Arc<dyn TraceSink>> {
        self.desc.trace.as_ref()
    }

    /// Hands events to the sink (call with no pipefence lock held).
    pub(crate) fn emit(&self, events: &[TraceEvent]) {
        if let (Some(s), false) = (self.trace_sink(), events.is_empty()) {
            s.record(events);
        }
    }

    /// Events produced where a pipefence lock may be held (removal, which the deterministic
    /// scheduler performs under its lock): deferred there, handed to the sink by the next flush.
    fn emit_from_removal(&self, events: Vec<TraceEvent>) {
        if self.driver.defers_removal_trace() {
            lock(&self.deferred_trace).extend(events);
        } else {
            self.emit(&events);
        }
    }

    /// Hands deferred events to the sink (call with no pipefence lock held).
    pub(crate) fn emit_deferred(&self) {
        let events = std::mem::take(&mut *lock(&self.deferred_trace));
        self.emit(&events);
    }

    /// Hands every buffered trace event to the sink: the engines' buffers, and the batches
    /// engine and worker threads are handing over right now (waited for, up to a second).
    pub(crate) fn flush_trace(&self) {
        if self.trace_sink().is_none() {
            return;
        }
        for q in self.live_queues() {
            let events = lock(&q.engine)
                .trace
                .as_mut()
                .map(|t| t.drain())
                .unwrap_or_default();
            self.emit(&events);
        }
        self.emit_deferred();
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.trace_inflight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    /// A host-thread event (tracing only).
    pub(crate) fn trace_host(&self, name: String, kind: SliceKind, start_ns: u64) {
        if self.trace_sink().is_some() {
            let track = Track::Host {
                name: crate::host::name_of(crate::host::current_id()),
            };
            let end_ns = self.now_ns().max(start_ns);
            self.emit(&[TraceEvent::Slice {
                track,
                name,
                kind,
                start_ns,
                end_ns,
                site: None,
            }]);
        }
    }

    /// Records the last write of `address` for flow arrows (tracing only).
    pub(crate) fn record_trace_write(
        &self,
        address: u64,
        writer: Writer,
        ns: u64,
        op: &'static str,
        value: u64,
    ) {
        let w = TraceWrite {
            writer,
            ns,
            op,
            address,
            value,
        };
        lock(&self.trace_writes).insert(address & !7, w);
    }

    /// The last traced write of `address`.
    pub(crate) fn trace_last_write(&self, address: u64) -> Option<(Track, u64, String)> {
        let w = *lock(&self.trace_writes).get(&(address & !7))?;
        let track = crate::engine::tracing::writer_track(self, w.writer)?;
        let what = format!(
            "{} {} = {}",
            w.op,
            crate::diagnose::address_text(self, w.address),
            w.value
        );
        Some((track, w.ns, what))
    }

    /// The name of queue `id`.
    pub(crate) fn queue_name(&self, id: u32) -> String {
        lock(&self.queue_names)
            .get(id as usize)
            .map_or_else(|| format!("queue#{id}"), |n| n.to_string())
    }

    /// A scheduling point for a non-blocking call (deterministic driver only).
    #[inline]
    pub(crate) fn yield_point(&self) {
        self.driver.yield_point(self);
    }

    /// Blocks the calling host thread until `cond` holds, the device is removed, or the
    /// driver ends the wait (`timeout`; see [`Backend::block`]).
    pub(crate) fn block(&self, cond: Cond, timeout: Option<Duration>) -> WaitOutcome {
        self.driver.block(self, cond, timeout)
    }

    /// Whether time is virtual (the deterministic driver): waits end only when their condition
    /// holds or nothing can run, so messages must not say that a timeout elapsed.
    pub(crate) fn virtual_time(&self) -> bool {
        self.driver.virtual_time()
    }

    /// Wakes every engine and worker so they notice removal or shutdown. At removal they
    /// exit and queued dispatches are dropped; at shutdown (the last `Device` handle gone) an
    /// engine exits once its submitted work is done, and the workers once every engine has
    /// (Q8).
    fn stop_threads(&self) {
        for q in self.live_queues() {
            q.waker.wake();
        }
        if let Some(p) = self.pool.get() {
            if self.is_removed() {
                p.clear();
            }
            p.wake_all();
        }
    }

    /// The application dropped the last handle of the buffer at `base` (Q8): it stays mapped
    /// until every submission made before now has completed (submitted work keeps the buffers
    /// it uses alive); with no work pending it is unmapped at once. Later GPU accesses fault (M3).
    pub(crate) fn release_buffer(&self, base: u64) {
        let busy: Vec<(Arc<FenceCore>, u64)> = if self.is_removed() {
            Vec::new()
        } else {
            self.live_queues()
                .iter()
                .filter_map(|q| {
                    let n = lock(&q.engine).submitted();
                    (q.progress.completed_value() < n).then(|| (q.progress.clone(), n))
                })
                .collect()
        };
        if busy.is_empty() {
            self.memory.unmap(base);
            return;
        }
        lock(&self.deferred_unmaps).push((base, busy));
        self.deferred_count.fetch_add(1, Ordering::AcqRel);
        // The work may have completed meanwhile.
        self.reap_unmaps();
    }

    /// Unmaps the released buffers whose earlier work has completed (called by the drivers
    /// after engine progress, with no engine lock held).
    #[inline]
    pub(crate) fn reap_unmaps(&self) {
        if self.deferred_count.load(Ordering::Acquire) > 0 {
            self.reap_unmaps_slow();
        }
    }

    #[cold]
    fn reap_unmaps_slow(&self) {
        let done: Vec<u64> = {
            let mut d = lock(&self.deferred_unmaps);
            let removed = self.is_removed();
            let mut done = Vec::new();
            d.retain(|(base, waits)| {
                let ready = removed || waits.iter().all(|(p, n)| p.completed_value() >= *n);
                if ready {
                    done.push(*base);
                }
                !ready
            });
            self.deferred_count.store(d.len(), Ordering::Release);
            done
        };
        for base in done {
            self.memory.unmap(base);
        }
    }

    /// An engine thread ended: the last one lets the workers end too (after shutdown).
    pub(crate) fn engine_exited(&self) {
        if self.engines_running.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(p) = self.pool.get() {
                p.wake_all();
            }
        }
    }
}

/// Shuts the device's threads down when the last [`Device`] handle is dropped.
#[derive(Debug)]
struct DeviceOwner {
    shared: Arc<DeviceShared>,
}

impl Drop for DeviceOwner {
    /// Q8: submitted work is not discarded. The threaded driver's engines run it to completion
    /// (or until removal) and then end. On the deterministic driver work only runs at host
    /// scheduling points, so the dropping host thread runs what can still run now; what is
    /// left waiting then (on a fence the application still holds, say) is dropped with it.
    fn drop(&mut self) {
        let sh = &self.shared;
        sh.driver.last_handle_dropped(sh);
        sh.shutdown.store(true, Ordering::Release);
        sh.stop_threads();
        // Break the device -> queue -> device cycle.
        let kept = std::mem::take(&mut *lock(&sh.kept_queues));
        drop(kept);
    }
}

/// A software GPU device (`ID3D12Device`). Cloning gives another handle to the same device.
///
/// ```
/// use pipefence::{Device, DeviceDesc};
/// let device = Device::new(DeviceDesc::default())?;
/// let fence = device.create_fence(0)?;
/// fence.signal(3)?;
/// assert_eq!(fence.completed_value(), 3);
/// # Ok::<(), pipefence::Error>(())
/// ```
#[doc(alias = "ID3D12Device")]
#[derive(Debug, Clone)]
pub struct Device {
    pub(crate) shared: Arc<DeviceShared>,
    /// Keeps the threads running while any handle lives (see [`DeviceOwner`]).
    _owner: Arc<DeviceOwner>,
}

impl Device {
    /// Creates a device. Errors: InvalidArg for a zero watchdog or fence-wait timeout, a
    /// `fifo_depth` of 0 or above 65536, more than 1024 workers, or a zero timestamp frequency.
    #[doc(alias = "D3D12CreateDevice")]
    pub fn new(desc: DeviceDesc) -> Result<Device> {
        if desc.watchdog_timeout.is_zero() {
            return Err(Error::invalid_arg(
                "DeviceDesc: watchdog_timeout 0 s is invalid (must be positive)",
            ));
        }
        if desc.fence_wait_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid_arg(
                "DeviceDesc: fence_wait_timeout Some(0 s) is invalid (use None to disable)",
            ));
        }
        if desc.fifo_depth == 0 || desc.fifo_depth > MAX_FIFO_DEPTH {
            return Err(Error::invalid_arg(format!(
                "DeviceDesc: fifo_depth {} is out of range 1..={MAX_FIFO_DEPTH}",
                desc.fifo_depth
            )));
        }
        if desc.workers > MAX_WORKERS {
            return Err(Error::invalid_arg(format!(
                "DeviceDesc: workers {} is above the maximum {MAX_WORKERS}",
                desc.workers
            )));
        }
        if desc.memory_model == MemoryModel::Strict && desc.driver == Driver::Threaded {
            return Err(Error::invalid_arg(
                "DeviceDesc: memory_model Strict needs the deterministic driver \
                 (Driver::Deterministic); use MemoryModel::Validate on the threaded driver",
            ));
        }
        if desc.timestamp_frequency == 0 {
            return Err(Error::invalid_arg(
                "DeviceDesc: timestamp_frequency 0 Hz is invalid (must be at least 1)",
            ));
        }
        let workers = if desc.workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            desc.workers
        };
        let id = NEXT_DEVICE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (driver, clock): (Arc<dyn Backend>, Arc<dyn Clock>) = match desc.driver {
            Driver::Threaded => (
                Arc::new(Threaded),
                match &desc.clock {
                    Some(c) => c.clone(),
                    None => Arc::new(RealClock::new()),
                },
            ),
            Driver::Deterministic { seed, strategy } => {
                let s = Scheduler::new(id, seed, strategy);
                let clock = s.clock.clone();
                (Arc::new(s), clock)
            }
        };
        let model = desc.memory_model.tracks_hazards().then(|| {
            let seed = match desc.driver {
                Driver::Deterministic { seed, .. } => seed,
                Driver::Threaded => 0,
            };
            Mutex::new(Model::new(desc.memory_model, seed))
        });
        let shared = Arc::new(DeviceShared {
            model,
            desc,
            workers,
            clock,
            memory: AddressSpace::new(),
            watches: AddressWatches::default(),
            views: AtomicUsize::new(0),
            fences: Mutex::new(Vec::new()),
            next_fence: AtomicUsize::new(0),
            removed: AtomicBool::new(false),
            removal: Mutex::new(None),
            id,
            shutdown: AtomicBool::new(false),
            queues: Mutex::new(Vec::new()),
            kept_queues: Mutex::new(Vec::new()),
            engines_running: AtomicUsize::new(0),
            deferred_unmaps: Mutex::new(Vec::new()),
            deferred_count: AtomicUsize::new(0),
            pool: OnceLock::new(),
            write_seq: AtomicU64::new(0),
            next_list: AtomicUsize::new(0),
            host_writes: Mutex::new(HashMap::new()),
            list_names: Mutex::new(HashMap::new()),
            driver,
            queue_names: Mutex::new(Vec::new()),
            trace_inflight: AtomicUsize::new(0),
            deferred_trace: Mutex::new(Vec::new()),
            trace_writes: Mutex::new(HashMap::new()),
        });
        Ok(Device {
            _owner: Arc::new(DeviceOwner {
                shared: shared.clone(),
            }),
            shared,
        })
    }

    /// Creates a queue and starts its engine (Q1, Q2).
    #[doc(alias = "CreateCommandQueue")]
    pub fn create_queue(&self, desc: &QueueDesc) -> Result<Queue> {
        let sh = &self.shared;
        let mut queues = lock(&sh.queues);
        let id = queues.len() as u32;
        let name: Arc<str> = if desc.name.is_empty() {
            format!("queue#{id}").into()
        } else {
            desc.name.as_str().into()
        };
        sh.check_live(|| format!("create_queue `{name}`"))?;
        let progress = Arc::new(FenceCore::new(0));
        lock(&sh.fences).push(Arc::downgrade(&progress));
        lock(&sh.queue_names).push(name.clone());
        let mut engine = Engine::new(id, desc.kind, sh.desc.fifo_depth, Some(progress.clone()));
        engine.tracked = sh.model.is_some();
        engine.strict = sh.strict();
        if sh.trace_sink().is_some() {
            engine.trace = Some(crate::engine::tracing::EngineTrace::new(
                &name,
                desc.kind.has_pfp(),
            ));
        }
        let q = Arc::new(QueueShared {
            id,
            name: name.clone(),
            kind: desc.kind,
            device: sh.clone(),
            engine: Mutex::new(engine),
            waker: Arc::new(EngineWaker::default()),
            progress,
            busy_ns: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            groups_completed: AtomicU64::new(0),
        });
        sh.driver.start_queue(sh, &q).map_err(|e| {
            Error::OutOfMemory(format!(
                "create_queue `{name}`: cannot start its engine thread: {e}"
            ))
        })?;
        queues.push(Arc::downgrade(&q));
        Ok(Queue::new(q, self.clone()))
    }

    /// Creates an open command list for queues of `kind`, named `name` in errors and reports.
    #[doc(alias = "CreateCommandList")]
    pub fn create_command_list(&self, kind: QueueKind, name: &str) -> Result<CommandList> {
        let id = self.shared.next_list.fetch_add(1, Ordering::Relaxed) as u32;
        let name: Arc<str> = if name.is_empty() {
            format!("list#{id}").into()
        } else {
            name.into()
        };
        self.shared
            .check_live(|| format!("create_command_list `{name}`"))?;
        lock(&self.shared.list_names).insert(id, name.clone());
        Ok(CommandList::new(self.shared.clone(), id, name, kind))
    }

    /// A number that grows whenever any engine completes a command, a submission or a dispatch
    /// group (for tools that watch for progress, like the scenario runner's hang detection, H1:
    /// a long but finite dispatch progresses with each group).
    pub fn progress(&self) -> u64 {
        self.shared
            .live_queues()
            .iter()
            .map(|q| {
                let groups = q.groups_completed.load(Ordering::Relaxed);
                let e = lock(&q.engine);
                e.commands_completed + e.completed_submissions + groups
            })
            .sum()
    }

    /// Whether any queue has work left (submitted and not completed).
    pub fn has_work(&self) -> bool {
        self.shared
            .live_queues()
            .iter()
            .any(|q| !lock(&q.engine).is_idle())
    }

    /// Hands every trace event recorded so far to the sink (engines buffer them briefly); call
    /// before reading a [`TraceRecorder`](crate::trace::TraceRecorder) while the device may
    /// still be running. `wait_idle` and `settle` do it themselves.
    pub fn flush_trace(&self) {
        self.shared.flush_trace();
    }

    /// The device's queues, in creation order.
    pub fn queues(&self) -> Vec<Queue> {
        self.shared
            .live_queues()
            .into_iter()
            .map(|q| Queue::new(q, self.clone()))
            .collect()
    }

    /// The device clock in nanoseconds (virtual on the deterministic driver, where it starts at
    /// 1 s; real time since creation plus 1 s otherwise).
    pub fn clock_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Runs until every other host thread has finished and every queue is idle, or the device
    /// is removed (on the deterministic driver a hang is then detected at once, D6). Returns
    /// whether it settled without removal. On the threaded driver: `wait_idle` with `timeout`.
    pub fn settle(&self, timeout: Duration) -> bool {
        let sh = &self.shared;
        if sh.driver.schedules_caller(sh) {
            let _ = sh.block(Cond::Settled, None);
            sh.with_model(|m| {
                m.host_wait_idle();
            });
        } else {
            let _ = self.wait_idle(timeout);
        }
        sh.flush_trace();
        !self.is_removed()
    }

    /// Blocks until every queue has drained (H2), up to `timeout`. Errors: Timeout naming the
    /// first queue still busy, DeviceRemoved.
    pub fn wait_idle(&self, timeout: Duration) -> Result<()> {
        let sh = &self.shared;
        // A host thread of the deterministic schedule waits as a scheduling point: it ends
        // only when the queues are idle or nothing can run (D6), and no time is claimed.
        let scheduled = sh.driver.schedules_caller(sh);
        let busy = || {
            sh.live_queues().into_iter().find_map(|q| {
                let e = lock(&q.engine);
                let (done, target) = (e.completed_submissions, e.submitted());
                (done < target).then(|| (q.name.clone(), done, target))
            })
        };
        match sh.block(Cond::Idle, Some(timeout)) {
            WaitOutcome::Reached => {
                sh.with_model(|m| {
                    m.host_wait_idle();
                });
                if scheduled {
                    return Ok(());
                }
                // A traced run's events are all with the sink once the device is idle.
                sh.flush_trace();
                sh.check_live(|| "wait_idle".to_string())
            }
            WaitOutcome::Removed => Err(match busy() {
                Some((name, ..)) if !scheduled => {
                    sh.removed_error(format!("queue `{name}`: wait_idle"))
                }
                _ => sh.removed_error("wait_idle"),
            }),
            WaitOutcome::TimedOut => Err(Error::Timeout(match busy() {
                Some((name, done, target)) if !scheduled => format!(
                    "queue `{name}`: wait_idle after {timeout:?} ({done} of {target} submissions \
                     completed)"
                ),
                _ => "wait_idle: nothing can run and the queues are not idle".into(),
            })),
        }
    }

    /// The synchronization hazards found so far (D5; empty unless
    /// [`DeviceDesc::memory_model`] is `Validate` or `Strict`), in a stable order. At most 256
    /// distinct reports are kept; [`hazards_dropped`](Self::hazards_dropped) counts the rest.
    pub fn hazards(&self) -> Vec<Hazard> {
        match self.shared.model() {
            Some(m) => m.hazards(&self.shared),
            None => Vec::new(),
        }
    }

    /// Hazard reports not kept because of the cap.
    pub fn hazards_dropped(&self) -> u64 {
        self.shared.model().map_or(0, |m| m.dropped())
    }

    /// Strict mode's statistics: (lines written back early, stale reads returned).
    pub fn strict_stats(&self) -> (u64, u64) {
        self.shared
            .model()
            .and_then(|m| m.vis.as_ref().map(|v| (v.early_writebacks, v.stale_reads)))
            .unwrap_or((0, 0))
    }

    /// The fault that removed the device (page fault, malformed packet, never-satisfiable
    /// wait, endless kernel), if one did.
    pub fn removal_fault(&self) -> Option<Fault> {
        self.shared.removal_fault()
    }

    /// Why the device was removed, with every stuck queue, the cycle and the fault (D7);
    /// `None` while the device works.
    #[doc(alias = "GetDeviceRemovedReason")]
    pub fn removal_report(&self) -> Option<Arc<RemovalReport>> {
        self.shared.removal_report()
    }

    /// Diagnoses the device now and removes it with reason Hung and the D7 report (H1): for
    /// tools that know more than the device, such as a runner that knows every host thread is
    /// blocked. Returns the report (the first one, if the device was already removed).
    pub fn declare_hung(&self) -> Arc<RemovalReport> {
        self.shared.remove(RemovalReason::Hung);
        match self.shared.removal_report() {
            Some(r) => r,
            None => unreachable!("removal always stores a report"),
        }
    }

    /// The configuration the device was created with.
    pub fn desc(&self) -> &DeviceDesc {
        &self.shared.desc
    }

    /// Number of shader workers (the configured count, or the core count for 0).
    pub fn worker_count(&self) -> usize {
        self.shared.workers
    }

    /// Creates a fence with an initial value (F1), named `fence#N`.
    #[doc(alias = "CreateFence")]
    pub fn create_fence(&self, initial: u64) -> Result<Fence> {
        self.create_named_fence("", initial)
    }

    /// Creates a fence with a name used in errors and reports (`SetName`).
    #[doc(alias = "CreateFence")]
    #[doc(alias = "SetName")]
    pub fn create_named_fence(&self, name: &str, initial: u64) -> Result<Fence> {
        let id = self.shared.next_fence.fetch_add(1, Ordering::Relaxed);
        let name = if name.is_empty() {
            format!("fence#{id}")
        } else {
            name.to_string()
        };
        self.shared
            .check_live(|| format!("create_fence `{name}`"))?;
        let core = Arc::new(FenceCore::new(initial));
        core.set_name(&name);
        {
            let mut fences = lock(&self.shared.fences);
            if fences.len() >= 64 && fences.len().is_power_of_two() {
                fences.retain(|w| w.strong_count() > 0);
            }
            fences.push(Arc::downgrade(&core));
        }
        // A fence created after removal reads u64::MAX like every other (F10).
        if self.shared.is_removed() {
            core.remove();
        }
        Ok(Fence::new(core, self.shared.clone(), name, id as u32))
    }

    /// Creates a buffer (M1): `size` bytes (a positive multiple of 4), in `heap`, every u32
    /// element set to `init`, at a fresh GPU virtual address.
    #[doc(alias = "CreateCommittedResource")]
    pub fn create_buffer(&self, desc: &BufferDesc) -> Result<Buffer> {
        let label = if desc.name.is_empty() {
            "buffer".to_string()
        } else {
            format!("buffer `{}`", desc.name)
        };
        if desc.size == 0 || !desc.size.is_multiple_of(4) {
            return Err(Error::invalid_arg(format!(
                "create_buffer: {label} size {} is not a positive multiple of 4",
                desc.size
            )));
        }
        self.shared
            .check_live(|| format!("create_buffer {label}"))?;
        let core = self
            .shared
            .memory
            .allocate(Some(&desc.name), desc.heap, desc.size, desc.init)
            .map_err(|e| match e {
                AllocError::TooLarge => Error::OutOfMemory(format!(
                    "create_buffer: {label} size {} is above the maximum {MAX_BUFFER_SIZE}",
                    desc.size
                )),
                AllocError::OutOfMemory => Error::OutOfMemory(format!(
                    "create_buffer: {label} of {} bytes could not be allocated",
                    desc.size
                )),
            })?;
        Ok(Buffer::new(core, self.shared.clone()))
    }

    /// Removes the device on purpose (`RemoveDevice`, E4): every fence reads `u64::MAX`, every
    /// waiter is released (F10), later submissions and signals fail with DeviceRemoved, and
    /// [`removed_reason`](Self::removed_reason) reports [`RemovalReason::Requested`]. Idempotent:
    /// a device already removed keeps its first reason.
    #[doc(alias = "RemoveDevice")]
    pub fn remove(&self) {
        self.shared.yield_point();
        self.shared.remove(RemovalReason::Requested);
    }

    /// Why the device was removed, or `None` while it works (`GetDeviceRemovedReason`).
    #[doc(alias = "GetDeviceRemovedReason")]
    pub fn removed_reason(&self) -> Option<RemovalReason> {
        self.shared.removed_reason()
    }

    /// Whether the device was removed.
    pub fn is_removed(&self) -> bool {
        self.shared.is_removed()
    }

    fn multi_args(
        &self,
        what: &str,
        fences: &[&Fence],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
    ) -> Result<(FencePairs, bool)> {
        if fences.is_empty() {
            return Err(Error::invalid_arg(format!("{what}: no fences (count 0)")));
        }
        if fences.len() != values.len() {
            return Err(Error::invalid_arg(format!(
                "{what}: {} fences but {} values",
                fences.len(),
                values.len()
            )));
        }
        let any = flags.is_any().ok_or_else(|| {
            Error::invalid_arg(format!(
                "{what}: unknown flags {:#x} (expected 0 = ALL or 1 = ANY)",
                flags.0
            ))
        })?;
        for (i, f) in fences.iter().enumerate() {
            if !Arc::ptr_eq(&f.device_shared(), &self.shared) {
                return Err(Error::invalid_arg(format!(
                    "{what}: fence {i} (`{}`) belongs to another device",
                    f.name()
                )));
            }
        }
        Ok((
            fences
                .iter()
                .zip(values)
                .map(|(f, v)| (f.core(), *v))
                .collect(),
            any,
        ))
    }

    /// Registers `event` to be set when all (flags ALL/NONE) or any (ANY) of `fences` reach
    /// their `values` (F8); with `None`, blocks until then (returns Ok after removal, like the
    /// single-fence form). Errors: InvalidArg for zero fences, mismatched lengths, unknown
    /// flags, or a fence of another device.
    #[doc(alias = "SetEventOnMultipleFenceCompletion")]
    pub fn set_event_on_multiple_fence_completion(
        &self,
        fences: &[&Fence],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        event: Option<&Event>,
    ) -> Result<()> {
        let (pairs, any) = self.multi_args(
            "set_event_on_multiple_fence_completion",
            fences,
            values,
            flags,
        )?;
        match event {
            Some(e) => {
                let _ = register_multiple(&pairs, any, e.notifier());
                Ok(())
            }
            None => {
                let _ = self.shared.block(Cond::Multi(pairs.clone(), any), None);
                self.acquire_reached(&pairs);
                Ok(())
            }
        }
    }

    /// The calling host thread acquires the release of every fence in `pairs` that reached its
    /// value (hazard analysis, D5).
    fn acquire_reached(&self, pairs: &[(Arc<FenceCore>, u64)]) {
        self.shared.with_model(|m| {
            let reached: Vec<&FenceCore> = pairs
                .iter()
                .filter(|(f, v)| f.completed_value() >= *v)
                .map(|(f, _)| &**f)
                .collect();
            m.host_acquire_fences(&reached);
        });
    }

    /// Blocks until all or any of `fences` reach their `values`, up to `timeout` (F8). Errors:
    /// the argument errors of [`set_event_on_multiple_fence_completion`](Self::set_event_on_multiple_fence_completion),
    /// Timeout, DeviceRemoved. A zero timeout polls.
    pub fn wait_multiple(
        &self,
        fences: &[&Fence],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        timeout: Duration,
    ) -> Result<()> {
        let (pairs, any) = self.multi_args("wait_multiple", fences, values, flags)?;
        let outcome = self
            .shared
            .block(Cond::Multi(pairs.clone(), any), Some(timeout));
        match outcome {
            WaitOutcome::Reached => {
                self.acquire_reached(&pairs);
                Ok(())
            }
            WaitOutcome::Removed => {
                Err(self
                    .shared
                    .removed_error(multi_desc("wait_multiple", fences, values, any)))
            }
            WaitOutcome::TimedOut if self.shared.virtual_time() => Err(Error::Timeout(format!(
                "{}: nothing can run and nothing else will signal them",
                multi_desc("wait_multiple", fences, values, any)
            ))),
            WaitOutcome::TimedOut => Err(Error::Timeout(format!(
                "{} after {timeout:?}",
                multi_desc("wait_multiple", fences, values, any)
            ))),
        }
    }
}

/// Fences with the value each waits for.
type FencePairs = Vec<(Arc<FenceCore>, u64)>;

fn multi_desc(what: &str, fences: &[&Fence], values: &[u64], any: bool) -> String {
    let parts: Vec<String> = fences
        .iter()
        .zip(values)
        .map(|(f, v)| format!("fence `{}` >= {v}", f.name()))
        .collect();
    format!(
        "{what} ({}): {}",
        if any { "any" } else { "all" },
        parts.join(", ")
    )
}
