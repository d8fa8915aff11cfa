//! The device runtime: everything of a device above its core — the queues and their engines,
//! the driver (through [`Backend`](crate::driver::Backend)), fences kept for removal, released
//! buffers waiting for earlier work (Q8), and removal with its report (D7, E4).
//!
//! Layer contract: the drivers and diagnosis work on this; the API wraps it. It dereferences
//! to its [`DeviceCore`], which is all the engine, the kernels and the hazard model see.

mod desc;
mod queue;

pub use desc::{DeviceDesc, Driver, MAX_FIFO_DEPTH, MAX_WORKERS};
pub(crate) use queue::{QueueShared, STATE_BLOCKED, STATE_BUSY, STATE_IDLE};

pub(crate) use crate::core::DeviceCore;
use crate::diagnose::{build_report, RemovalReport};
use crate::driver::threaded::Pool;
use crate::driver::{Backend, Cond};
use crate::engine::Fault;
use crate::error::{Error, RemovalReason, Result};
use crate::sync::shim::{lock, AtomicBool, AtomicUsize, Mutex, Ordering};
use crate::sync::{FenceCore, WaitOutcome};
use crate::trace::{TraceEvent, Track};
use std::sync::OnceLock;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Removal {
    reason: RemovalReason,
    fault: Option<Fault>,
    report: Arc<RemovalReport>,
}

/// A released buffer's base and, per queue that was busy then, its progress fence and the
/// submission count it must reach before the buffer is unmapped (Q8).
type DeferredUnmap = (u64, Vec<(Arc<FenceCore>, u64)>);

/// State shared by every handle of one device: its core, its queues, its driver and its
/// removal.
#[derive(Debug)]
pub(crate) struct DeviceShared {
    /// What the layers below the drivers need of the device.
    pub(crate) core: Arc<DeviceCore>,
    pub(crate) desc: DeviceDesc,
    pub(crate) workers: usize,
    pub(crate) fences: Mutex<Vec<Weak<FenceCore>>>,
    pub(crate) next_fence: AtomicUsize,
    pub(crate) removal: Mutex<Option<Removal>>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) queues: Mutex<Vec<Weak<QueueShared>>>,
    /// Deterministic driver: the queues, kept alive while the device is (Q8: dropping a
    /// `Queue` handle never discards submitted work; on the threaded driver the engine thread
    /// keeps its queue). Emptied when the last `Device` handle is dropped.
    pub(crate) kept_queues: Mutex<Vec<Arc<QueueShared>>>,
    /// Threaded driver: engine threads still running (the worker pool outlives them, Q8).
    pub(crate) engines_running: AtomicUsize,
    /// Buffers whose last handle was dropped while work submitted earlier was still pending
    /// (Q8): the base, and per busy queue the submissions that must complete first.
    pub(crate) deferred_unmaps: Mutex<Vec<DeferredUnmap>>,
    pub(crate) deferred_count: AtomicUsize,
    pub(crate) pool: OnceLock<Arc<Pool>>,
    pub(crate) next_list: AtomicUsize,
    /// The driver (threaded or deterministic), through its interface.
    pub(crate) driver: Arc<dyn Backend>,
    /// Trace events deferred until no lock is held (see `emit_from_removal`).
    pub(crate) deferred_trace: Mutex<Vec<TraceEvent>>,
    /// Trace batches taken out of an engine or worker and not yet handed to the sink.
    pub(crate) trace_inflight: AtomicUsize,
}

impl std::ops::Deref for DeviceShared {
    type Target = DeviceCore;

    #[inline]
    fn deref(&self) -> &DeviceCore {
        &self.core
    }
}

impl DeviceShared {
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

    /// Removes the device as hung with no fault of its own (declared, H1, or a wait's
    /// watchdog). A dispatch group running now that is an endless kernel (D6) is the fault, as
    /// the engine's own watchdog reports it when it fires first: the report does not depend on
    /// which side wins. Returns whether this call removed it.
    pub(crate) fn remove_hung(&self) -> bool {
        let fault = self.driver.endless_group(self);
        self.remove_with_fault(RemovalReason::Hung, fault)
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
        // Removal touches everything (footprint.rs); the device's own write marks it as a
        // removal (explore/dpor.rs: it disables every engine action).
        crate::footprint::record(crate::footprint::Obj::All, crate::footprint::Kind::Write);
        crate::footprint::record(crate::footprint::Obj::Device, crate::footprint::Kind::Write);
        self.driver.before_report(self);
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
                    name: crate::host_names::name_of(crate::host_names::current_id()),
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

    /// The fault that removed the device, if any.
    pub(crate) fn removal_fault(&self) -> Option<Fault> {
        lock(&self.removal).as_ref().and_then(|r| r.fault.clone())
    }

    /// The removal report, if removed.
    pub(crate) fn removal_report(&self) -> Option<Arc<RemovalReport>> {
        lock(&self.removal).as_ref().map(|r| r.report.clone())
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
    pub(crate) fn stop_threads(&self) {
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
            self.unmap_buffer(base);
            return;
        }
        lock(&self.deferred_unmaps).push((base, busy));
        self.deferred_count.fetch_add(1, Ordering::AcqRel);
        // The work may have completed meanwhile.
        self.reap_unmaps();
    }

    /// Unmaps the released buffers whose earlier work has completed (called by the drivers
    /// after engine progress, with no engine lock held). Returns whether it unmapped any.
    #[inline]
    pub(crate) fn reap_unmaps(&self) -> bool {
        self.deferred_count.load(Ordering::Acquire) > 0 && self.reap_unmaps_slow()
    }

    #[cold]
    fn reap_unmaps_slow(&self) -> bool {
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
        let any = !done.is_empty();
        for base in done {
            self.unmap_buffer(base);
        }
        any
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
