//! The device handle ([`Device`]): creating queues, lists, fences and buffers, device-wide
//! waits, removal and its report.

use super::buffer::{Buffer, BufferDesc};
use super::fence::{Fence, FenceDesc};
use super::list::{CommandList, CommandListDesc};
use super::queue::{Queue, QueueDesc};
use crate::clock::{Clock, RealClock};
use crate::diagnose::RemovalReport;
use crate::driver::deterministic::Scheduler;
use crate::driver::threaded::Threaded;
use crate::driver::{Backend, Cond, EngineWaker};
use crate::engine::{Engine, Fault};
use crate::error::{Error, Object, RemovalReason, Result, Waited};
use crate::hazard::{Hazard, MemoryModel, Model};
use crate::memory::{AllocError, MAX_BUFFER_SIZE};
use crate::runtime::{DeviceCore, DeviceShared, QueueShared};
pub use crate::runtime::{DeviceDesc, Driver, MAX_FIFO_DEPTH, MAX_WORKERS};
use crate::sync::shim::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::sync::{register_multiple, Event, FenceCore, MultipleFenceWaitFlags, WaitOutcome};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

static NEXT_DEVICE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
/// use pipefence::{Device, DeviceDesc, FenceDesc};
/// let device = Device::new(DeviceDesc::default())?;
/// let fence = device.create_fence(&FenceDesc::new(0))?;
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

/// A handle of a device that does not keep it running ([`Fence::device`]).
#[derive(Debug, Clone)]
pub(crate) struct WeakDevice {
    shared: Arc<DeviceShared>,
    owner: std::sync::Weak<DeviceOwner>,
}

impl WeakDevice {
    /// The device's shared state.
    pub(crate) fn shared(&self) -> &Arc<DeviceShared> {
        &self.shared
    }

    /// The device, while any [`Device`] handle (a queue's included) lives.
    pub(crate) fn upgrade(&self) -> Option<Device> {
        Some(Device {
            _owner: self.owner.upgrade()?,
            shared: self.shared.clone(),
        })
    }
}

impl Device {
    /// A handle that does not keep the device running.
    pub(crate) fn downgrade(&self) -> WeakDevice {
        WeakDevice {
            shared: self.shared.clone(),
            owner: Arc::downgrade(&self._owner),
        }
    }

    /// Creates a device. Errors: InvalidArg for a zero watchdog or fence-wait timeout, a
    /// `fifo_depth` of 0 or above 65536, more than 1024 workers, or a zero timestamp frequency.
    #[doc(alias = "D3D12CreateDevice")]
    pub fn new(desc: DeviceDesc) -> Result<Device> {
        if desc.watchdog_timeout.is_zero() {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(0),
                "DeviceDesc: watchdog_timeout 0 s is invalid (must be positive)",
            ));
        }
        if desc.fence_wait_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(0),
                "DeviceDesc: fence_wait_timeout Some(0 s) is invalid (use None to disable)",
            ));
        }
        if desc.fifo_depth == 0 || desc.fifo_depth > MAX_FIFO_DEPTH {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(desc.fifo_depth as u64),
                format!(
                    "DeviceDesc: fifo_depth {} is out of range 1..={MAX_FIFO_DEPTH}",
                    desc.fifo_depth
                ),
            ));
        }
        if desc.workers > MAX_WORKERS {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(desc.workers as u64),
                format!(
                    "DeviceDesc: workers {} is above the maximum {MAX_WORKERS}",
                    desc.workers
                ),
            ));
        }
        if desc.memory_model == MemoryModel::Strict && desc.driver == Driver::Threaded {
            return Err(Error::invalid_arg(
                Object::Device,
                None,
                "DeviceDesc: memory_model Strict needs the deterministic driver \
                 (Driver::Deterministic); use MemoryModel::Validate on the threaded driver",
            ));
        }
        if desc.timestamp_frequency == 0 {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(0),
                "DeviceDesc: timestamp_frequency 0 Hz is invalid (must be at least 1)",
            ));
        }
        let workers = if desc.workers == 0 {
            crate::sync::cpus()
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
                let s = Scheduler::new(id, seed, strategy, desc.script.clone());
                let clock = s.clock.clone();
                (Arc::new(s), clock)
            }
        };
        let model = desc.memory_model.tracks_hazards().then(|| {
            let seed = match desc.driver {
                Driver::Deterministic { seed, .. } => seed,
                Driver::Threaded => 0,
            };
            let mut m = Model::new(desc.memory_model, seed);
            if let Some(v) = m.vis.as_mut() {
                v.script = desc.script.clone();
            }
            m
        });
        let core = Arc::new(DeviceCore::new(
            id,
            clock,
            desc.timestamp_frequency,
            desc.memory_model == MemoryModel::Strict,
            desc.trace.clone(),
            model,
        ));
        let shared = Arc::new(DeviceShared {
            core,
            desc,
            workers,
            fences: Mutex::new(Vec::new()),
            next_fence: AtomicUsize::new(0),
            removal: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            queues: Mutex::new(Vec::new()),
            kept_queues: Mutex::new(Vec::new()),
            engines_running: AtomicUsize::new(0),
            deferred_unmaps: Mutex::new(Vec::new()),
            deferred_count: AtomicUsize::new(0),
            pool: OnceLock::new(),
            next_list: AtomicUsize::new(0),
            driver,
            trace_inflight: AtomicUsize::new(0),
            deferred_trace: Mutex::new(Vec::new()),
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
        // A queue's progress fence: ids apart from the application's fences.
        progress.set_id((1 << 32) | u64::from(id));
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
            state: AtomicU64::new(crate::runtime::STATE_IDLE),
            state_since_ns: AtomicU64::new(0),
            groups_completed: AtomicU64::new(0),
        });
        sh.driver.start_queue(sh, &q).map_err(|e| {
            Error::out_of_memory(
                Object::Queue(name.to_string()),
                None,
                format!("create_queue `{name}`: cannot start its engine thread: {e}"),
            )
        })?;
        queues.push(Arc::downgrade(&q));
        Ok(Queue::new(q, self.clone()))
    }

    /// Creates an open command list for queues of `desc.kind`, named `desc.name` in errors and
    /// reports.
    #[doc(alias = "CreateCommandList")]
    pub fn create_command_list(&self, desc: &CommandListDesc) -> Result<CommandList> {
        let (kind, name) = (desc.kind, desc.name.as_str());
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
        // The host sees the time: it is part of what the program computes (`footprint.rs`).
        crate::footprint::record(crate::footprint::Obj::Clock, crate::footprint::Kind::Write);
        self.shared.now_ns()
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
            WaitOutcome::TimedOut => {
                let busy = busy().filter(|_| !scheduled);
                let message = match &busy {
                    Some((name, done, target)) => format!(
                        "queue `{name}`: wait_idle after {timeout:?} ({done} of {target} \
                         submissions completed)"
                    ),
                    None => "wait_idle: nothing can run and the queues are not idle".into(),
                };
                Err(Error::timeout(
                    Waited::DeviceIdle {
                        busy: busy.map(|(name, done, target)| (name.to_string(), done, target)),
                    },
                    (!sh.virtual_time()).then_some(timeout),
                    message,
                ))
            }
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

    /// The configuration the device was created with.
    pub fn desc(&self) -> &DeviceDesc {
        &self.shared.desc
    }

    /// Number of shader workers (the configured count, or the core count for 0).
    pub fn worker_count(&self) -> usize {
        self.shared.workers
    }

    /// Creates a fence starting at `desc.initial` (F1), named `desc.name` in errors and reports
    /// (`fence#N` if empty).
    #[doc(alias = "CreateFence")]
    #[doc(alias = "SetName")]
    pub fn create_fence(&self, desc: &FenceDesc) -> Result<Fence> {
        let (name, initial) = (desc.name.as_str(), desc.initial);
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
        core.set_id(id as u64);
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
        Ok(Fence::new(core, self.downgrade(), name, id as u32))
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
            return Err(Error::invalid_arg(
                Object::Buffer(desc.name.clone()),
                Some(desc.size),
                format!(
                    "create_buffer: {label} size {} is not a positive multiple of 4",
                    desc.size
                ),
            ));
        }
        self.shared
            .check_live(|| format!("create_buffer {label}"))?;
        let core = self
            .shared
            .memory
            .allocate(Some(&desc.name), desc.heap, desc.size, desc.init)
            .map_err(|e| match e {
                AllocError::TooLarge => Error::out_of_memory(
                    Object::Buffer(desc.name.clone()),
                    Some(desc.size),
                    format!(
                        "create_buffer: {label} size {} is above the maximum {MAX_BUFFER_SIZE}",
                        desc.size
                    ),
                ),
                AllocError::OutOfMemory => Error::out_of_memory(
                    Object::Buffer(desc.name.clone()),
                    Some(desc.size),
                    format!(
                        "create_buffer: {label} of {} bytes could not be allocated",
                        desc.size
                    ),
                ),
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
            return Err(Error::invalid_arg(
                Object::Device,
                Some(0),
                format!("{what}: no fences (count 0)"),
            ));
        }
        if fences.len() != values.len() {
            return Err(Error::invalid_arg(
                Object::Device,
                Some(values.len() as u64),
                format!(
                    "{what}: {} fences but {} values",
                    fences.len(),
                    values.len()
                ),
            ));
        }
        let any = flags.is_any().ok_or_else(|| {
            Error::invalid_arg(
                Object::Device,
                Some(u64::from(flags.0)),
                format!(
                    "{what}: unknown flags {:#x} (expected 0 = ALL or 1 = ANY)",
                    flags.0
                ),
            )
        })?;
        for (i, f) in fences.iter().enumerate() {
            if !Arc::ptr_eq(&f.device_shared(), &self.shared) {
                return Err(Error::invalid_arg(
                    Object::Fence(f.name().to_string()),
                    Some(i as u64),
                    format!(
                        "{what}: fence {i} (`{}`) belongs to another device",
                        f.name()
                    ),
                ));
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
    /// single-fence form; [`block_on_multiple_fence_completion`](Self::block_on_multiple_fence_completion)
    /// is the timed form). Errors: InvalidArg for zero fences, mismatched lengths, unknown
    /// flags, or a fence of another device.
    ///
    /// `fences` is a slice of fences or of references to them: `&[&Fence]`, `&[Fence]`,
    /// `&Vec<Fence>`, `&[&a, &b]` (F8).
    #[doc(alias = "SetEventOnMultipleFenceCompletion")]
    pub fn set_event_on_multiple_fence_completion<F: AsRef<Fence>>(
        &self,
        fences: &[F],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        event: Option<&Event>,
    ) -> Result<()> {
        let fences: Vec<&Fence> = fences.iter().map(AsRef::as_ref).collect();
        let (pairs, any) = self.multi_args(
            "set_event_on_multiple_fence_completion",
            &fences,
            values,
            flags,
        )?;
        match event {
            Some(e) => {
                // A call, so a scheduling point before its registration takes effect (D4).
                self.shared.yield_point();
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

    /// The timed form of [`set_event_on_multiple_fence_completion`](Self::set_event_on_multiple_fence_completion)
    /// with no event (F8): blocks until all or any of `fences` reach their `values`, for at
    /// most `timeout` (a zero timeout polls). It differs from [`wait_multiple`](Self::wait_multiple)
    /// only in removal: after removal (before the call or during it) it returns `Ok(())`, as
    /// the NULL-event call does in D3D12 (F10), where `wait_multiple` returns
    /// `Err(DeviceRemoved)`. Errors: the argument errors of `set_event_on_multiple_fence_completion`,
    /// Timeout as `wait_multiple`'s.
    #[doc(alias = "SetEventOnMultipleFenceCompletion")]
    pub fn block_on_multiple_fence_completion<F: AsRef<Fence>>(
        &self,
        fences: &[F],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        timeout: Duration,
    ) -> Result<()> {
        let fences: Vec<&Fence> = fences.iter().map(AsRef::as_ref).collect();
        self.multi_wait(
            "block_on_multiple_fence_completion",
            &fences,
            values,
            flags,
            timeout,
            true,
        )
    }

    /// The calling host thread acquires the release of every fence in `pairs` that reached its
    /// value (hazard analysis, D5).
    fn acquire_reached(&self, pairs: &[(Arc<FenceCore>, u64)]) {
        self.shared.with_model(|m| {
            // Whether each fence reached its value is read, for a reducing exploration, also
            // of the fences that did not: a signal just before the wait passes is acquired,
            // one just after is not.
            for (f, _) in pairs {
                f.note(crate::footprint::Kind::Read);
            }
            let reached: Vec<&FenceCore> = pairs
                .iter()
                .filter(|(f, v)| f.completed_value() >= *v)
                .map(|(f, _)| &**f)
                .collect();
            m.host_acquire_fences(&reached);
        });
    }

    /// Traced runs: a release-to-acquire edge from each fence of `pairs` that reached its value
    /// to the calling host thread (`below[i]`: fence `i` was below its value when the wait
    /// began).
    fn trace_reached(&self, pairs: &[(Arc<FenceCore>, u64)], below: &[bool]) {
        if self.shared.trace_sink().is_none() {
            return;
        }
        for ((f, v), blocked) in pairs.iter().zip(below) {
            if f.completed_value() >= *v {
                self.shared.trace_host_sync(
                    self.shared.trace_fence_releaser(f),
                    crate::trace::SyncKind::HostWait,
                    *blocked,
                );
            }
        }
    }

    /// Blocks until all or any of `fences` reach their `values`, up to `timeout` (F8). Errors:
    /// the argument errors of [`set_event_on_multiple_fence_completion`](Self::set_event_on_multiple_fence_completion),
    /// Timeout, DeviceRemoved. A zero timeout polls. `fences` as there: `&[&Fence]` or
    /// `&[Fence]`.
    pub fn wait_multiple<F: AsRef<Fence>>(
        &self,
        fences: &[F],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        timeout: Duration,
    ) -> Result<()> {
        let fences: Vec<&Fence> = fences.iter().map(AsRef::as_ref).collect();
        self.multi_wait("wait_multiple", &fences, values, flags, timeout, false)
    }

    /// A timed multi-fence wait; `removed_ok`: removal returns Ok (the NULL-event form).
    fn multi_wait(
        &self,
        what: &str,
        fences: &[&Fence],
        values: &[u64],
        flags: MultipleFenceWaitFlags,
        timeout: Duration,
        removed_ok: bool,
    ) -> Result<()> {
        let (pairs, any) = self.multi_args(what, fences, values, flags)?;
        // Traced runs: which fences were below their value when the wait began.
        let below: Vec<bool> = match self.shared.trace_sink() {
            Some(_) => pairs
                .iter()
                .map(|(f, v)| f.completed_value() < *v)
                .collect(),
            None => Vec::new(),
        };
        let outcome = self
            .shared
            .block(Cond::Multi(pairs.clone(), any), Some(timeout));
        match outcome {
            WaitOutcome::Reached => {
                self.acquire_reached(&pairs);
                self.trace_reached(&pairs, &below);
                Ok(())
            }
            WaitOutcome::Removed if removed_ok => {
                self.acquire_reached(&pairs);
                Ok(())
            }
            WaitOutcome::Removed => Err(self
                .shared
                .removed_error(multi_desc(what, fences, values, any))),
            WaitOutcome::TimedOut => {
                // Each fence with the value it holds: which of them the wait still waits for.
                let desc = multi_desc_of(what, fences, values, any, true);
                let virtual_time = self.shared.virtual_time();
                let message = if virtual_time {
                    format!("{desc}: nothing can run and nothing else will signal them")
                } else {
                    format!("{desc} after {timeout:?}")
                };
                Err(Error::timeout(
                    Waited::Fences {
                        fences: fences
                            .iter()
                            .zip(values)
                            .map(|(f, v)| (f.name().to_string(), *v, f.completed_value()))
                            .collect(),
                        any,
                    },
                    (!virtual_time).then_some(timeout),
                    message,
                ))
            }
        }
    }
}

/// Fences with the value each waits for.
type FencePairs = Vec<(Arc<FenceCore>, u64)>;

fn multi_desc(what: &str, fences: &[&Fence], values: &[u64], any: bool) -> String {
    multi_desc_of(what, fences, values, any, false)
}

/// What a wait on several fences waits for; with `now`, each fence's completed value too, as
/// a timed-out single wait says it (a wait for all that timed out names the fence it still
/// waits for by its value).
fn multi_desc_of(what: &str, fences: &[&Fence], values: &[u64], any: bool, now: bool) -> String {
    let parts: Vec<String> = fences
        .iter()
        .zip(values)
        .map(|(f, v)| {
            let mut part = format!("fence `{}` >= {v}", f.name());
            if now {
                part += &format!(" (completed value {})", f.completed_value());
            }
            part
        })
        .collect();
    format!(
        "{what} ({}): {}",
        if any { "any" } else { "all" },
        parts.join(", ")
    )
}
