//! The engine: one per queue, a state machine of two stages that a driver advances (D1-D4).
//!
//! - The **pre-fetch parser** (PFP) takes submissions in order, fetches packets from the
//!   command lists' streams in device memory, decodes them (`crate::command::decode`), performs
//!   queue waits and PFP memory-value waits, reads `dispatch_indirect` arguments (C7), and pushes
//!   packets into a bounded FIFO (`fifo_depth`).
//! - The **micro engine** (ME) pops packets and executes them in order: ME waits, top-of-pipe
//!   and immediate writes, copies, dispatch launches, flushes, labels; bottom-of-pipe writes and
//!   queue signals go to the **retire queue**, which lands them in order once every earlier
//!   dispatch has finished (C3, Q4).
//!
//! A Copy queue's engine has only the ME: its ME step fetches when the FIFO is empty (D1).
//!
//! `Engine::step` never blocks, never reads real time (it asks the `EngineCtx` clock) and
//! starts no threads: a blocked step changes nothing and returns the condition it waits for,
//! so the threaded driver can park on it and a deterministic driver can pick another action.
//! Dispatches are handed to the driver as `Launch`es; the driver reports group completions
//! with `Engine::groups_done`. Retirement is its own action (`Engine::retire`).
//!
//! Contract: the engine trusts nothing in the command stream (a malformed packet is
//! [`Fault::MalformedPacket`]) and nothing about addresses (an access outside every live buffer,
//! or a write to Upload memory, is [`Fault::PageFault`], M3). It panics on no input.

/// `hook!(engine, ctx, |m| ...)` runs a hazard-model hook when the device tracks hazards (a
/// field test on plain devices). A macro, so that the closure is built inside the test: on a
/// plain device the hook's arguments are never gathered.
macro_rules! hook {
    ($engine:expr, $ctx:expr, $f:expr) => {
        if $engine.tracked {
            $crate::engine::Engine::tracked_hook($ctx, $f);
        }
    };
}

mod completed;
mod cp_memory;
pub(crate) mod kernels;
mod me;
mod pfp;
mod retire;
mod snapshot;
pub(crate) mod tracing;

use me::MeOp;
use pfp::{Cursor, Packet, PacketOp};
use retire::{Retire, RetireOp};
pub(crate) use snapshot::{FaultAt, Pending, Snapshot};

use crate::clock::ticks;
use crate::command::{
    decode, Command, DecodeError, Flush, ImmediateMode, KernelArgs, QueueKind, WaitEngine, Width,
    WriteSource,
};
use crate::core::DeviceCore;
use crate::footprint::{Kind, Obj};
use crate::memory::BufferCore;
use crate::sync::{FenceCore, Ticket, Writer};
use rustc_hash::FxHasher;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

pub use crate::types::{Access, Site, Stage, ValueCondition};
pub use kernels::{Kernel, KernelContext, KernelFault, UserKernel};

/// System timestamps count ticks of the host monotonic clock at this frequency (C12).
pub const SYSTEM_TIMESTAMP_FREQUENCY: u64 = 10_000_000;

/// A closed command list: its packets live in device memory (unmapped when the last
/// reference, the list or an execution in flight, is dropped).
#[derive(Debug)]
pub(crate) struct ClosedList {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
    pub(crate) device: Arc<DeviceCore>,
    pub(crate) stream: Arc<BufferCore>,
    pub(crate) words: usize,
    pub(crate) kernels: Arc<[UserKernel]>,
}

impl Drop for ClosedList {
    fn drop(&mut self) {
        self.device.memory.unmap(self.stream.base);
    }
}

impl Site {
    fn writer(&self, queue: u32) -> Writer {
        Writer::Engine { queue, site: *self }
    }
}

/// The `begin_event` labels open at a command (C10), outermost first.
pub(crate) type Labels = Arc<[Arc<str>]>;

/// A queue-level submission (Q2).
#[derive(Debug)]
pub(crate) enum Submission {
    Execute(Vec<Arc<ClosedList>>),
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
    },
    Wait {
        fence: Arc<FenceCore>,
        fence_id: u32,
        value: u64,
        /// Issued when `Queue::wait` was called (F5): the PFP tests it, not the value.
        ticket: Arc<Ticket>,
    },
}

/// What a blocked stage waits for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WaitCondition {
    /// A queue wait (Q3) on a fence, held by the PFP.
    Fence {
        /// The fence.
        fence: Arc<FenceCore>,
        /// Its id on the device.
        fence_id: u32,
        /// The value waited for.
        value: u64,
    },
    /// A memory-value wait (C1) on the PFP or the ME.
    Memory {
        /// The address.
        address: u64,
        /// What the value at the address is compared with.
        cond: ValueCondition,
    },
    /// The PFP's FIFO is full: the ME must pop.
    FifoFull,
    /// The PFP waits for the previous `execute_command_lists` call to complete (Q7).
    Drain,
    /// The PFP is held by a `flush_pipeline` the ME has not completed (C8).
    FlushHold,
    /// The ME's `flush_pipeline` waits for earlier dispatches (C8).
    Dispatches,
}

impl WaitCondition {
    /// The condition in words, as reports and traces show it.
    pub(crate) fn label(&self, dev: &DeviceCore) -> String {
        match self {
            WaitCondition::Fence { fence, value, .. } => {
                format!("fence {} >= {value}", fence.name())
            }
            WaitCondition::Memory { address, cond } => {
                let m = if cond.mask & cond.width.mask() == cond.width.mask() {
                    String::new()
                } else {
                    format!(" & {:#x}", cond.mask)
                };
                format!(
                    "{} ({}){m} {} {}",
                    dev.address_text(*address),
                    cond.width.type_name(),
                    cond.cmp.symbol(),
                    cond.reference
                )
            }
            other => format!("{other:?}"),
        }
    }

    /// Whether the condition can only be satisfied from outside the engine (a fence signal or a
    /// memory write), as opposed to the engine's own progress.
    pub fn is_external(&self) -> bool {
        matches!(
            self,
            WaitCondition::Fence { .. } | WaitCondition::Memory { .. }
        )
    }
}

/// A fault that removes the device.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Fault {
    /// A GPU page fault (M3).
    PageFault {
        /// The faulting address.
        address: u64,
        /// Read or write.
        access: Access,
        /// The command.
        site: Site,
        /// The command's name (`write-value32-bop`, `dispatch`, ...).
        op: &'static str,
        /// Why: `unmapped` or `write to upload memory`.
        why: &'static str,
    },
    /// A packet the decoder rejected (D2).
    MalformedPacket {
        /// Where the packet is.
        site: Site,
        /// Word offset of the packet in its list's stream.
        offset: usize,
        /// The decoder's message.
        message: String,
    },
    /// A wait no value can satisfy (D6).
    NeverSatisfiable {
        /// The wait's site.
        site: Site,
        /// The wait's name (`wait-value32`, `wait-value64`).
        op: &'static str,
        /// The stage that reached it (a PFP or an ME wait).
        stage: Stage,
        /// The condition.
        condition: WaitCondition,
    },
    /// A user kernel that panicked in a group (E3: caught there; the device is removed at once).
    KernelPanic {
        /// The dispatch's site.
        site: Site,
        /// `dispatch` or `dispatch-indirect`.
        op: &'static str,
        /// The kernel's name.
        kernel: String,
        /// The group.
        group: u32,
        /// The panic's message.
        message: String,
    },
    /// A dispatch group that ran longer than the watchdog timeout (D6).
    EndlessKernel {
        /// The dispatch's site.
        site: Site,
        /// `dispatch` or `dispatch-indirect`.
        op: &'static str,
        /// The kernel's name.
        kernel: String,
        /// The group.
        group: u32,
    },
}

impl Fault {
    /// The reason the device is removed for this fault (E4, D7): a page fault is
    /// [`RemovalReason::PageFault`](crate::RemovalReason::PageFault), every other fault a hang.
    pub fn removal_reason(&self) -> crate::RemovalReason {
        match self {
            Fault::PageFault { .. } => crate::RemovalReason::PageFault,
            _ => crate::RemovalReason::Hung,
        }
    }

    /// Where the fault happened.
    pub fn site(&self) -> Site {
        match self {
            Fault::PageFault { site, .. }
            | Fault::MalformedPacket { site, .. }
            | Fault::NeverSatisfiable { site, .. }
            | Fault::KernelPanic { site, .. }
            | Fault::EndlessKernel { site, .. } => *site,
        }
    }

    /// The command's name (`packet` for a malformed packet).
    pub fn op(&self) -> &'static str {
        match self {
            Fault::PageFault { op, .. }
            | Fault::NeverSatisfiable { op, .. }
            | Fault::KernelPanic { op, .. }
            | Fault::EndlessKernel { op, .. } => op,
            Fault::MalformedPacket { .. } => "packet",
        }
    }
}

/// The result of one step.
#[derive(Debug, Clone)]
pub enum Step {
    /// The stage did something.
    Progressed,
    /// The stage cannot progress until the condition changes; nothing was changed.
    Blocked(WaitCondition),
    /// Nothing to do.
    Idle,
    /// A fault: the driver removes the device.
    Faulted(Fault),
}

/// A dispatch the driver must run.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) index: u64,
    pub(crate) op: &'static str,
    pub(crate) kernel: Kernel,
    pub(crate) groups: u32,
    pub(crate) site: Site,
}

/// What the engine needs from the device.
pub(crate) struct EngineCtx<'a> {
    pub(crate) device: &'a DeviceCore,
    /// A recent clock reading for bookkeeping (last-writer records), refreshed by the driver
    /// between batches of steps; timestamps read the clock itself.
    pub(crate) coarse_ns: std::cell::Cell<u64>,
}

impl<'a> EngineCtx<'a> {
    pub(crate) fn new(device: &'a DeviceCore) -> Self {
        EngineCtx {
            device,
            coarse_ns: std::cell::Cell::new(device.now_ns()),
        }
    }

    fn now_ns(&self) -> u64 {
        self.device.now_ns()
    }

    /// Refreshes the bookkeeping clock.
    pub(crate) fn refresh(&self) {
        self.coarse_ns.set(self.device.now_ns());
    }

    #[inline]
    pub(crate) fn coarse_ns(&self) -> u64 {
        self.coarse_ns.get()
    }
}

/// The last command-processor write of an address by this engine.
#[derive(Debug, Clone)]
pub(crate) struct WriteRecord {
    pub(crate) site: Site,
    pub(crate) op: &'static str,
    pub(crate) seq: u64,
    pub(crate) ns: u64,
}

/// A dispatch's destination range, for last-writer lookups.
#[derive(Debug, Clone)]
pub(crate) struct RangeRecord {
    pub(crate) op: &'static str,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) site: Site,
    pub(crate) seq: u64,
    pub(crate) ns: u64,
}

/// A dispatch in flight, as the ME launched it.
#[derive(Debug, Clone)]
pub(crate) struct InFlightSite {
    pub(crate) site: Site,
    pub(crate) op: &'static str,
    /// The labels open at it (C10).
    pub(crate) labels: Labels,
    /// Its ordinal (D7).
    pub(crate) ord: u64,
    /// The ME's last completion when it launched it (see `completed`).
    pub(crate) me_before: Option<completed::Entry>,
}

/// The per-queue state machine.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) queue_id: u32,
    pub(crate) kind: QueueKind,
    fifo_depth: usize,
    ring: VecDeque<(u64, Submission)>,
    next_submission: u64,
    cursor: Option<Cursor>,
    /// The PFP is held until the ME completes a `flush_pipeline` (C8).
    flush_hold: bool,
    fifo: VecDeque<Packet>,
    me_op: Option<MeOp>,
    /// In-flight dispatches: index -> groups not finished.
    inflight: BTreeMap<u64, u32>,
    /// In-flight dispatches: index -> where, what, the labels open at the dispatch and its
    /// ordinal (for `last_completed` when it finishes, and the breadcrumbs of a fault in it, D7).
    inflight_sites: BTreeMap<u64, InFlightSite>,
    next_dispatch: u64,
    retire: VecDeque<Retire>,
    launches: Vec<Launch>,
    /// Open `begin_event` labels at the ME (exact breadcrumbs, C10).
    labels: Vec<Arc<str>>,
    /// The same labels, shared by the dispatches and retirements that carry them.
    labels_shared: Labels,
    /// The commands completed (by the ME, the PFP for its own waits, dispatches, retirement),
    /// by ordinal (D7's `last_completed`).
    completed: completed::Completed,
    /// Where the ME is: the packet it is executing or blocked in.
    me_site: Option<(Site, &'static str)>,
    /// Where the engine faulted, if it did (the report's breadcrumbs and `last_completed`).
    fault_at: Option<FaultAt>,
    /// Where the PFP is blocked on an external condition, if it is.
    pfp_blocked: Option<(Site, &'static str, WaitCondition)>,
    /// Completed submissions (the queue's progress fence follows this).
    pub(crate) completed_submissions: u64,
    /// Last command-processor write per 4-byte word.
    pub(crate) writes: HashMap<u64, WriteRecord, BuildHasherDefault<FxHasher>>,
    /// The buffer of the last CP access, with the address-space generation it is valid for.
    buffer_cache: Option<(u64, Arc<BufferCore>)>,
    /// Recent dispatch destination ranges.
    pub(crate) ranges: VecDeque<RangeRecord>,
    /// Commands completed by the ME (statistics).
    pub(crate) commands_completed: u64,
    /// Signalled with the number of completed submissions (for `wait_idle`, H2).
    progress: Option<Arc<FenceCore>>,
    /// Trace buffer, when the device has a trace sink.
    pub(crate) trace: Option<tracing::EngineTrace>,
    /// Packets pushed into the FIFO and popped from it so far (hazard clocks follow them).
    pushed: u64,
    popped: u64,
    /// Entries pushed into the retire queue and retired so far (footprints name its slots).
    retire_pushed: u64,
    retire_popped: u64,
    /// The device has a hazard model (the hooks run), and it is in strict mode.
    pub(crate) tracked: bool,
    pub(crate) strict: bool,
}

impl Engine {
    pub(crate) fn new(
        queue_id: u32,
        kind: QueueKind,
        fifo_depth: usize,
        progress: Option<Arc<FenceCore>>,
    ) -> Self {
        Engine {
            queue_id,
            kind,
            fifo_depth: if kind.has_pfp() { fifo_depth.max(1) } else { 1 },
            ring: VecDeque::new(),
            next_submission: 0,
            cursor: None,
            flush_hold: false,
            fifo: VecDeque::new(),
            me_op: None,
            inflight: BTreeMap::new(),
            inflight_sites: BTreeMap::new(),
            next_dispatch: 0,
            retire: VecDeque::new(),
            launches: Vec::new(),
            labels: Vec::new(),
            labels_shared: Arc::from([]),
            completed: completed::Completed::default(),
            me_site: None,
            fault_at: None,
            pfp_blocked: None,
            completed_submissions: 0,
            writes: HashMap::default(),
            buffer_cache: None,
            ranges: VecDeque::new(),
            commands_completed: 0,
            progress,
            trace: None,
            pushed: 0,
            popped: 0,
            retire_pushed: 0,
            retire_popped: 0,
            tracked: false,
            strict: false,
        }
    }

    /// Queues a submission; returns its sequence number.
    pub(crate) fn submit(&mut self, s: Submission) -> u64 {
        let seq = self.next_submission;
        self.next_submission += 1;
        self.ring.push_back((seq, s));
        seq
    }

    /// Submissions queued so far.
    pub(crate) fn submitted(&self) -> u64 {
        self.next_submission
    }

    /// Whether every submission has completed.
    pub(crate) fn is_idle(&self) -> bool {
        self.completed_submissions == self.next_submission
    }

    /// The byte count of a copy the ME started and has not finished (its completion is the
    /// next ME step; the deterministic driver gives it a cost).
    pub(crate) fn copy_pending(&self) -> Option<u64> {
        match &self.me_op {
            Some(MeOp::Copy { bytes, .. }) => Some(*bytes),
            _ => None,
        }
    }

    /// Packets pushed into the FIFO and popped from it so far. A step that returns `Blocked` or
    /// `Idle` with these unchanged only looked: it changed nothing another stage, a host or the
    /// scheduler's listing could see (a Copy engine's ME may fetch a packet, or an ME pop one,
    /// and then block on it).
    pub(crate) fn packets_moved(&self) -> (u64, u64) {
        (self.pushed, self.popped)
    }

    /// Takes the dispatches launched since the last call.
    pub(crate) fn take_launches(&mut self) -> Vec<Launch> {
        std::mem::take(&mut self.launches)
    }

    /// Whether launches are pending.
    pub(crate) fn has_launches(&self) -> bool {
        !self.launches.is_empty()
    }

    /// Reports `n` finished groups of dispatch `index`. Returns whether the dispatch finished.
    pub(crate) fn groups_done(&mut self, index: u64, n: u32) -> bool {
        match self.inflight.get_mut(&index) {
            Some(left) => {
                *left = left.saturating_sub(n);
                if *left == 0 {
                    self.inflight.remove(&index);
                    if let Some(d) = self.inflight_sites.remove(&index) {
                        // A dispatch completes when its last group does (D7); with no earlier
                        // dispatch or retirement pending, everything before it has completed.
                        let settled = self
                            .inflight_sites
                            .first_key_value()
                            .is_none_or(|(i, _)| *i > index)
                            && self.retire.front().is_none_or(|r| r.ord > d.ord);
                        if self.completed.dispatch_done((d.ord, d.site, d.op), settled) {
                            self.prune_completed();
                        }
                    }
                    true
                } else {
                    false
                }
            }
            None => false,
        }
    }

    /// Dispatches in flight.
    pub(crate) fn dispatches_in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// The external condition the engine is stuck on, if any: the ME's memory wait first,
    /// else the PFP's queue wait or memory wait. With the stage name.
    pub(crate) fn blocked_on(&self) -> Option<(Stage, Site, &'static str, &WaitCondition)> {
        if let Some(MeOp::Wait { site, cond }) = &self.me_op {
            let op = self.me_site.as_ref().map_or("wait-value32", |(_, n)| *n);
            return Some((Stage::Me, *site, op, cond));
        }
        if self.front_ticket_satisfied() {
            // Q3: a queue whose next wait has a satisfied ticket is not stuck (its PFP goes on
            // at its next step).
            return None;
        }
        self.pfp_blocked
            .as_ref()
            .map(|(site, op, cond)| (Stage::Pfp, *site, *op, cond))
    }

    /// The addresses of the memory-value waits its stages were found blocked on (the ME's, then
    /// the PFP's): a write there may let one of them go on.
    pub(crate) fn memory_waits(&self) -> impl Iterator<Item = u64> {
        let me = match &self.me_op {
            Some(MeOp::Wait {
                cond: WaitCondition::Memory { address, .. },
                ..
            }) => Some(*address),
            _ => None,
        };
        let pfp = match &self.pfp_blocked {
            Some((_, _, WaitCondition::Memory { address, .. })) => Some(*address),
            _ => None,
        };
        me.into_iter().chain(pfp)
    }

    /// What the PFP was found blocked on at its current wait (a queue wait or a memory-value
    /// wait), if it was.
    pub(crate) fn pfp_blocked_on(&self) -> Option<&WaitCondition> {
        self.pfp_blocked.as_ref().map(|(_, _, c)| c)
    }

    /// Forgets that the PFP was found blocked (its wait holds now: the driver's report of a
    /// removal says where it is, not that it is stuck).
    pub(crate) fn pfp_unblocked(&mut self) {
        self.pfp_blocked = None;
    }

    /// Whether the next submission is a queue wait whose ticket is satisfied (F5).
    pub(crate) fn front_ticket_satisfied(&self) -> bool {
        matches!(self.ring.front(), Some((_, Submission::Wait { ticket, .. })) if ticket.is_satisfied())
    }

    /// Trace events at removal: open busy slices and still-blocked waits, closed at `now`.
    pub(crate) fn trace_close(
        &mut self,
        dev: &DeviceCore,
        now: u64,
    ) -> Vec<crate::trace::TraceEvent> {
        let pfp = self.pfp_blocked.as_ref().map(|(_, _, c)| c.clone());
        let me = match &self.me_op {
            Some(MeOp::Wait { cond, .. }) => Some(cond.clone()),
            _ => None,
        };
        let Some(t) = self.trace.as_mut() else {
            return Vec::new();
        };
        t.now = now;
        t.close_open(dev, pfp.as_ref(), me.as_ref());
        t.drain()
    }

    // ----------------------------------------------------------------------------------------
    // Memory access by the command processor

    // ----------------------------------------------------------------------------------------
    // Steps

    /// Advances one stage by at most one packet.
    pub(crate) fn step(&mut self, stage: Stage, ctx: &EngineCtx<'_>) -> Step {
        self.trace_now(ctx);
        match stage {
            Stage::Pfp if self.kind.has_pfp() => self.pfp_step(ctx),
            Stage::Pfp => Step::Idle,
            Stage::Me => {
                if !self.kind.has_pfp() && self.fifo.is_empty() && self.me_op.is_none() {
                    // A Copy engine's ME fetches for itself (D1).
                    match self.pfp_step(ctx) {
                        Step::Progressed => {}
                        other => return other,
                    }
                    if self.fifo.is_empty() {
                        return Step::Progressed;
                    }
                }
                self.me_step(ctx)
            }
        }
    }

    /// Whether [`step`](Self::step) of `stage` would progress (or fault) now: `false` exactly
    /// when it would return `Blocked` or `Idle`. It changes nothing another stage, a host or a
    /// driver can see (it may fill the PFP's prefetch cache), so a scripted schedule lists
    /// only the stages that can run (`driver/deterministic`), and a blocked stage is never a
    /// choice.
    pub(crate) fn can_progress(&mut self, stage: Stage, ctx: &EngineCtx<'_>) -> bool {
        match stage {
            Stage::Pfp => self.kind.has_pfp() && self.pfp_can_progress(ctx),
            Stage::Me => {
                if !self.kind.has_pfp() && self.fifo.is_empty() && self.me_op.is_none() {
                    // A Copy engine's ME fetches for itself (D1): it progresses when the fetch
                    // does.
                    return self.pfp_can_progress(ctx);
                }
                self.me_can_progress(ctx)
            }
        }
    }

    /// Steps the PFP while it progresses (what [`step`](Self::step) does, once per step): whether
    /// it progressed, and the step that ended the run (never `Progressed`). The threaded
    /// driver's eager fetch: one trace and stage test per run, not per packet.
    pub(crate) fn run_pfp(&mut self, ctx: &EngineCtx<'_>) -> (bool, Step) {
        if !self.kind.has_pfp() {
            return (false, Step::Idle);
        }
        self.trace_now(ctx);
        let mut progressed = false;
        loop {
            progressed |= self.pfp_fetch_common();
            match self.pfp_step(ctx) {
                Step::Progressed => progressed = true,
                other => return (progressed, other),
            }
        }
    }

    /// Steps the ME up to `max` times while it progresses (as [`step`](Self::step) does):
    /// whether it progressed, and the step that ended the run (`Progressed` when `max` ran out).
    pub(crate) fn run_me(&mut self, ctx: &EngineCtx<'_>, max: u32) -> (bool, Step) {
        if !self.kind.has_pfp() {
            // A Copy engine's ME fetches for itself: step by step.
            let mut progressed = false;
            for _ in 0..max {
                match self.step(Stage::Me, ctx) {
                    Step::Progressed => progressed = true,
                    other => return (progressed, other),
                }
            }
            return (progressed, Step::Progressed);
        }
        self.trace_now(ctx);
        let mut progressed = false;
        let mut left = max;
        while left > 0 {
            let (n, fault) = self.me_run_common(ctx, left);
            if n > 0 {
                progressed = true;
                left -= n;
            }
            if let Some(step) = fault {
                return (progressed, step);
            }
            if left == 0 {
                break;
            }
            match self.me_step(ctx) {
                Step::Progressed => {
                    progressed = true;
                    left -= 1;
                }
                other => return (progressed, other),
            }
        }
        (progressed, Step::Progressed)
    }

    /// The trace's clock reading for the steps that follow: the driver refreshes it between
    /// batches of steps, so one reading per batch, not per packet (back-to-back packets may
    /// share a slice and a timestamp).
    #[inline]
    fn trace_now(&mut self, ctx: &EngineCtx<'_>) {
        if let Some(t) = self.trace.as_mut() {
            t.now = ctx.coarse_ns();
        }
    }

    /// A fault of `stage` at the command it is at: records the command's ordinal, the labels
    /// open at it and the last command completed before it, as they are at the fault (D7), and
    /// returns the step.
    #[cold]
    fn fault(&mut self, stage: Stage, f: Fault) -> Step {
        let (ord, labels) = match stage {
            // The PFP faults at the item it fetches: the waits it passed are before it.
            Stage::Pfp => (self.pfp_ord(), self.pfp_labels().into()),
            Stage::Me => (self.me_ord(), self.labels_shared.clone()),
        };
        self.fault_at = Some(FaultAt {
            site: f.site(),
            labels,
            last_completed: self.completed.before(ord, None),
            ord,
        });
        Step::Faulted(f)
    }

    #[cold]
    fn prune_completed(&mut self) {
        let pending = self.oldest_pending_ord();
        self.completed.prune(pending);
    }

    /// Ordinals (queue order, D7's `last_completed`): packet `i` of the FIFO stream (the
    /// `pushed` and `popped` counts) has ordinal `2i + 1`; the PFP's own waits passed between
    /// packets `i - 1` and `i` have `2i` (the later of two such waits replaces the earlier).
    /// The ordinal of the ME's packet.
    #[inline]
    fn me_ord(&self) -> u64 {
        (2 * self.popped).saturating_sub(1)
    }

    /// The ordinal that bounds the PFP's position: its next item (a wait of its own or a
    /// packet) and every wait it passed are below it.
    fn pfp_ord(&self) -> u64 {
        2 * self.pushed + 1
    }

    /// The ordinal of the oldest item not completed: every item ordered before it has.
    fn oldest_pending_ord(&self) -> u64 {
        // The PFP's next item.
        let mut p = 2 * self.pushed;
        if let Some(f) = &self.fault_at {
            p = p.min(f.ord);
        }
        if !self.fifo.is_empty() {
            p = p.min(2 * self.popped + 1);
        }
        if self.me_op.is_some() || self.me_site.is_some() {
            p = p.min(self.me_ord());
        }
        if let Some((_, d)) = self.inflight_sites.first_key_value() {
            p = p.min(d.ord);
        }
        if let Some(r) = self.retire.front() {
            p = p.min(r.ord);
        }
        p
    }

    /// The labels open at the PFP's position: the ME's, plus the label commands it parsed and
    /// the ME has not executed yet.
    fn pfp_labels(&self) -> Vec<Arc<str>> {
        let mut l = self.labels.clone();
        for p in &self.fifo {
            match &p.op {
                PacketOp::Command {
                    cmd: Command::BeginEvent { label },
                    ..
                } => l.push(label.as_str().into()),
                PacketOp::Command {
                    cmd: Command::EndEvent,
                    ..
                } => {
                    l.pop();
                }
                _ => {}
            }
        }
        l
    }

    /// A hazard-model hook on a tracked device (see `hook!`).
    #[cold]
    #[inline(never)]
    fn tracked_hook(ctx: &EngineCtx<'_>, f: impl FnOnce(&mut crate::hazard::Model)) {
        ctx.device.with_model(f);
    }

    fn push_packet(&mut self, site: Site, op: PacketOp) {
        // The slot is a division: computed only when something records it.
        if crate::footprint::recording() {
            self.note(
                Obj::Fifo(self.queue_id, self.fifo_slot(self.pushed)),
                Kind::Write,
            );
        }
        self.pushed += 1;
        self.fifo.push_back(Packet { site, op });
    }

    /// The FIFO slot of packet `n` (`footprint.rs`).
    fn fifo_slot(&self, n: u64) -> u64 {
        n % self.fifo_depth as u64
    }

    /// Puts `r` at the end of the retire queue.
    fn push_retire(&mut self, r: Retire) {
        self.note(
            Obj::RetireSlot(self.queue_id, self.retire_pushed),
            Kind::Write,
        );
        self.retire_pushed += 1;
        self.retire.push_back(r);
    }

    /// Records an access for a reducing exploration (`footprint.rs`: the engine's own state
    /// that its stages and other actors share).
    #[inline]
    fn note(&self, obj: Obj, kind: Kind) {
        crate::footprint::record(obj, kind);
    }

    fn drained(&self) -> bool {
        self.fifo.is_empty()
            && self.me_op.is_none()
            && self.inflight.is_empty()
            && self.retire.is_empty()
            && self.launches.is_empty()
    }
}
