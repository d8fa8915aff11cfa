//! Queues (Q1-Q7): submission of command lists, queue-side fence signals and waits.

use super::device::Device;
use super::fence::Fence;
use super::list::CommandList;
use crate::clock::ticks;
use crate::command::QueueKind;
use crate::driver::Cond;
use crate::engine::{Submission, SYSTEM_TIMESTAMP_FREQUENCY};
use crate::error::{Error, Object, Result, Waited};
use crate::footprint::Kind;
use crate::runtime::QueueShared;
use crate::sync::shim::lock;
use crate::sync::{Ticket, WaitOutcome};
use std::sync::Arc;
use std::time::Duration;

/// How to create a [`Queue`].
#[derive(Debug, Clone)]
pub struct QueueDesc {
    /// Direct, Compute or Copy (Q1).
    pub kind: QueueKind,
    /// A name for errors and reports (`queue#N` if empty).
    pub name: String,
}

impl QueueDesc {
    /// A queue of `kind` named `name`.
    pub fn new(kind: QueueKind, name: &str) -> Self {
        QueueDesc {
            kind,
            name: name.to_string(),
        }
    }
}

/// What a queue has done so far ([`Queue::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueueStats {
    /// Commands the engine completed (list commands and queue signals and waits).
    pub commands: u64,
    /// Submissions completed.
    pub submissions: u64,
    /// Submissions made.
    pub submitted: u64,
    /// Nanoseconds it had work and could run (threaded driver: real time).
    pub busy_ns: u64,
    /// Nanoseconds it had work but was stuck in a fence or memory-value wait.
    pub blocked_ns: u64,
}

/// A command queue (`ID3D12CommandQueue`): an engine that executes submissions in order (Q2).
/// Cloning gives another handle to the same queue.
#[doc(alias = "ID3D12CommandQueue")]
#[derive(Debug, Clone)]
pub struct Queue {
    pub(crate) shared: Arc<QueueShared>,
    device: Device,
}

impl Queue {
    pub(crate) fn new(shared: Arc<QueueShared>, device: Device) -> Self {
        Queue { shared, device }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Its kind.
    pub fn kind(&self) -> QueueKind {
        self.shared.kind
    }

    /// A small id, unique per device, in creation order.
    pub fn id(&self) -> u32 {
        self.shared.id
    }

    /// The device it belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Submits what `make` builds, after this host action's scheduling point (so a queue wait's
    /// ticket is issued by the action itself, D4).
    fn submit(
        &self,
        what: impl FnOnce() -> String,
        make: impl FnOnce() -> Submission,
    ) -> Result<u64> {
        let dev = &self.shared.device;
        dev.yield_point();
        dev.check_live(what)?;
        let s = make();
        let label = dev.trace_sink().map(|_| match &s {
            Submission::Execute(l) => format!(
                "execute {}: {}",
                self.shared.name,
                l.iter().map(|x| &*x.name).collect::<Vec<_>>().join(" ")
            ),
            Submission::Signal { fence, value } => {
                format!("signal {} {} {value}", self.shared.name, fence.name())
            }
            Submission::Wait { fence, value, .. } => {
                format!("wait {} {} {value}", self.shared.name, fence.name())
            }
        });
        let seq = {
            let mut e = lock(&self.shared.engine);
            let seq = e.submitted();
            // The PFP's take of this submission writes it too (`footprint.rs`).
            let q = self.shared.id;
            crate::footprint::record(crate::footprint::Obj::Sub(q, seq), Kind::Write);
            crate::footprint::record(crate::footprint::Obj::Submit(q), Kind::Write);
            dev.with_model(|m| {
                // Host actions release everything their thread did before them (D5).
                m.host_submit(self.shared.id, seq);
            });
            e.submit(s)
        };
        if let Some(l) = label {
            dev.trace_host(|| l, crate::trace::SliceKind::Host, dev.now_ns());
        }
        self.shared.waker.wake_for_submission();
        Ok(seq)
    }

    /// `ExecuteCommandLists` (Q2, Q7): queues the lists, which run after everything submitted
    /// earlier on this queue has completed. Returns at once, with the submission's sequence
    /// number. Errors: InvalidArg for no lists, a list of another kind or device; InvalidCall for
    /// a list that is not closed; DeviceRemoved.
    #[doc(alias = "ExecuteCommandLists")]
    pub fn execute_command_lists(&self, lists: &[&CommandList]) -> Result<u64> {
        if lists.is_empty() {
            return Err(Error::invalid_arg(
                Object::Queue(self.shared.name.to_string()),
                Some(0),
                format!(
                    "queue `{}`: execute_command_lists with no command lists",
                    self.shared.name
                ),
            ));
        }
        let mut closed = Vec::with_capacity(lists.len());
        for (i, l) in lists.iter().enumerate() {
            if !Arc::ptr_eq(l.device_shared(), &self.shared.device) {
                return Err(Error::invalid_arg(
                    Object::CommandList(l.name().to_string()),
                    Some(i as u64),
                    format!(
                        "queue `{}`: command list {i} (`{}`) belongs to another device",
                        self.shared.name,
                        l.name()
                    ),
                ));
            }
            if l.kind() != self.shared.kind {
                return Err(Error::invalid_arg(
                    Object::CommandList(l.name().to_string()),
                    Some(i as u64),
                    format!(
                        "queue `{}` ({}): command list {i} (`{}`) is a {} list",
                        self.shared.name,
                        self.shared.kind,
                        l.name(),
                        l.kind()
                    ),
                ));
            }
            match l.closed() {
                Some(c) => closed.push(c.clone()),
                None => {
                    return Err(Error::invalid_call(
                        Object::CommandList(l.name().to_string()),
                        Some(i as u64),
                        format!(
                            "queue `{}`: command list {i} (`{}`) is not closed",
                            self.shared.name,
                            l.name()
                        ),
                    ))
                }
            }
        }
        self.submit(
            || format!("queue `{}`: execute_command_lists", self.shared.name),
            || Submission::Execute(closed),
        )
    }

    fn check_fence(&self, what: &str, fence: &Fence) -> Result<()> {
        if !Arc::ptr_eq(&fence.device_shared(), &self.shared.device) {
            return Err(Error::invalid_arg(
                Object::Fence(fence.name().to_string()),
                None,
                format!(
                    "queue `{}`: {what} on fence `{}` of another device",
                    self.shared.name,
                    fence.name()
                ),
            ));
        }
        Ok(())
    }

    /// Queue-side `Signal` (Q4): sets the fence to `value` once every earlier command on this
    /// queue has completed and its writes are visible (a full release), without stopping later
    /// commands. Returns the submission's sequence number.
    #[doc(alias = "Signal")]
    pub fn signal(&self, fence: &Fence, value: u64) -> Result<u64> {
        self.check_fence("signal", fence)?;
        self.submit(
            || {
                format!(
                    "queue `{}`: signal fence `{}` to {value}",
                    self.shared.name,
                    fence.name()
                )
            },
            || Submission::Signal {
                fence: fence.core(),
                value,
            },
        )
    }

    /// Queue-side `Wait` (Q3): nothing after it is fetched or executed until the wait's ticket is
    /// satisfied (F5): from this call on, the first signal (CPU or GPU) that makes the fence
    /// `>= value` satisfies it for good, even while the wait is still queued behind other work
    /// and even if the value is lowered again before the queue gets there. A value already
    /// reached satisfies it at once. Wait-before-signal is legal. Returns the submission's
    /// sequence number.
    #[doc(alias = "Wait")]
    pub fn wait(&self, fence: &Fence, value: u64) -> Result<u64> {
        self.check_fence("wait", fence)?;
        self.submit(
            || {
                format!(
                    "queue `{}`: wait on fence `{}` for {value}",
                    self.shared.name,
                    fence.name()
                )
            },
            || {
                let core = fence.core();
                // With hazard tracking the wait acquires the release of the signal current
                // when it registers if the value is reached then, else of the signal that
                // crosses it: registered after a second signal of the same value it acquires
                // that one, before it the first (a different schedule). The signal that
                // crosses the target and the registration commute (`FenceCore::note_held`).
                if self.shared.device.model.is_some() {
                    core.note_held(value);
                }
                // The ticket is named by the submission it belongs to (`footprint.rs`): the
                // host holds its turn until the submit, so no other submission comes between.
                let seq = lock(&self.shared.engine).submitted();
                let key = (self.shared.id, seq);
                Submission::Wait {
                    ticket: Ticket::issue(
                        core.clone(),
                        value,
                        self.shared.waker.clone(),
                        Some(key),
                    ),
                    fence: core,
                    fence_id: fence.id(),
                    value,
                }
            },
        )
    }

    /// What the queue has done so far.
    pub fn stats(&self) -> QueueStats {
        let e = lock(&self.shared.engine);
        let (busy_ns, blocked_ns) = self.shared.busy_blocked_ns();
        QueueStats {
            commands: e.commands_completed,
            submissions: e.completed_submissions,
            submitted: e.submitted(),
            busy_ns,
            blocked_ns,
        }
    }

    /// Whether everything submitted to this queue so far has completed (H2), without blocking:
    /// the polling form of [`wait_idle`](Self::wait_idle). After removal it is `true` (nothing
    /// submitted will run any more, F10), so a polling loop ends. It is a scheduling point on the
    /// deterministic driver (a loop that polls it lets the queue run), and like `wait_idle` it
    /// acquires nothing for the hazard analysis (D5): order later host reads of the queue's
    /// writes with a fence wait or [`Device::wait_idle`].
    pub fn is_idle(&self) -> bool {
        let dev = &self.shared.device;
        dev.yield_point();
        crate::footprint::record(crate::footprint::Obj::Idle(self.shared.id), Kind::Read);
        crate::footprint::record(crate::footprint::Obj::Submit(self.shared.id), Kind::Read);
        dev.is_removed() || lock(&self.shared.engine).is_idle()
    }

    /// GPU timestamp ticks per second (C12; default 100 MHz).
    #[doc(alias = "GetTimestampFrequency")]
    pub fn timestamp_frequency(&self) -> u64 {
        self.shared.device.desc.timestamp_frequency
    }

    /// System timestamp ticks per second (C12).
    pub fn system_timestamp_frequency(&self) -> u64 {
        SYSTEM_TIMESTAMP_FREQUENCY
    }

    /// Samples the GPU and system timestamps at once (`GetClockCalibration`, C12): `(gpu, cpu)`.
    #[doc(alias = "GetClockCalibration")]
    pub fn clock_calibration(&self) -> Result<(u64, u64)> {
        let dev = &self.shared.device;
        dev.check_live(|| format!("queue `{}`: clock_calibration", self.shared.name))?;
        // The host sees the time: it is part of what the program computes (`footprint.rs`).
        crate::footprint::record(crate::footprint::Obj::Clock, Kind::Write);
        let now = dev.now_ns();
        Ok((
            ticks(now, dev.desc.timestamp_frequency),
            ticks(now, SYSTEM_TIMESTAMP_FREQUENCY),
        ))
    }

    /// Blocks until everything submitted so far has completed, up to `timeout`. Errors:
    /// Timeout, DeviceRemoved.
    pub fn wait_idle(&self, timeout: Duration) -> Result<()> {
        let target = lock(&self.shared.engine).submitted();
        let o = self.shared.device.block(
            Cond::Fence(self.shared.progress.clone(), target),
            Some(timeout),
        );
        match o {
            WaitOutcome::Reached => Ok(()),
            WaitOutcome::Removed => Err(self
                .shared
                .device
                .removed_error(format!("queue `{}`: wait_idle", self.shared.name))),
            WaitOutcome::TimedOut => {
                let completed = lock(&self.shared.engine).completed_submissions;
                let name = &self.shared.name;
                let virtual_time = self.shared.device.virtual_time();
                let message = if virtual_time {
                    format!(
                        "queue `{name}`: wait_idle: nothing can run and the queue is not idle \
                         ({completed} of {target} submissions completed)"
                    )
                } else {
                    format!(
                        "queue `{name}`: wait_idle after {timeout:?} ({completed} of {target} \
                         submissions completed)"
                    )
                };
                Err(Error::timeout(
                    Waited::QueueIdle {
                        queue: name.to_string(),
                        completed,
                        submitted: target,
                    },
                    (!virtual_time).then_some(timeout),
                    message,
                ))
            }
        }
    }
}
