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

pub(crate) mod kernels;
pub(crate) mod tracing;

use crate::api::DeviceShared;
use crate::clock::ticks;
use crate::command::{
    decode, Command, Comparison, DecodeError, Flush, ImmediateMode, KernelArgs, QueueKind,
    WaitEngine, Width, WriteSource,
};
use crate::memory::BufferCore;
use crate::sync::{FenceCore, Ticket, Writer};
use rustc_hash::FxHasher;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

pub use kernels::{Kernel, KernelContext, KernelFault, UserKernel};

/// System timestamps count ticks of the host monotonic clock at this frequency (C12).
pub const SYSTEM_TIMESTAMP_FREQUENCY: u64 = 10_000_000;

/// Words the PFP fetches from a command stream at a time.
const PREFETCH_WORDS: usize = 256;

/// A closed command list: its packets live in device memory (unmapped when the last
/// reference, the list or an execution in flight, is dropped).
#[derive(Debug)]
pub(crate) struct ClosedList {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) stream: Arc<BufferCore>,
    pub(crate) words: usize,
    pub(crate) kernels: Arc<[UserKernel]>,
}

impl Drop for ClosedList {
    fn drop(&mut self) {
        self.device.memory.unmap(self.stream.base);
    }
}

/// Where a packet came from: the queue's submission and, inside a list, the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site {
    /// The queue's submission sequence number (0-based, in submission order; the value
    /// `execute_command_lists`, `signal` and `wait` return).
    pub submission: u64,
    /// The command list's id ([`CommandList::id`](crate::CommandList::id)), for commands of a list.
    pub list: Option<u32>,
    /// The command index in the list.
    pub command: Option<u32>,
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

/// Which stage a driver steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The pre-fetch parser.
    Pfp,
    /// The micro engine.
    Me,
}

/// What a blocked stage waits for.
#[derive(Debug, Clone)]
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
        /// 32 or 64 bits.
        width: Width,
        /// The comparison.
        cmp: Comparison,
        /// The reference.
        reference: u64,
        /// The mask.
        mask: u64,
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
    /// Whether the condition can only be satisfied from outside the engine (a fence signal or a
    /// memory write), as opposed to the engine's own progress.
    pub fn is_external(&self) -> bool {
        matches!(
            self,
            WaitCondition::Fence { .. } | WaitCondition::Memory { .. }
        )
    }
}

/// How a GPU access faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A read.
    Read,
    /// A write.
    Write,
}

impl Access {
    /// `read` or `write`.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// A fault that removes the device.
#[derive(Debug, Clone)]
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
    pub(crate) device: &'a DeviceShared,
    /// A recent clock reading for bookkeeping (last-writer records), refreshed by the driver
    /// between batches of steps; timestamps read the clock itself.
    pub(crate) coarse_ns: std::cell::Cell<u64>,
}

impl<'a> EngineCtx<'a> {
    pub(crate) fn new(device: &'a DeviceShared) -> Self {
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

#[derive(Debug)]
enum PacketOp {
    Command {
        cmd: Command,
        indirect_groups: Option<u32>,
        /// The list, for dispatches (its user-kernel table).
        list: Option<Arc<ClosedList>>,
    },
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
    },
    SubmissionEnd,
}

#[derive(Debug)]
struct Packet {
    site: Site,
    op: PacketOp,
}

#[derive(Debug)]
struct Cursor {
    submission: u64,
    lists: Vec<Arc<ClosedList>>,
    list: usize,
    word: usize,
    command: u32,
    /// Prefetched words of the current list: `[cache_start, cache_start + cache.len())`.
    cache: Vec<u32>,
    cache_start: usize,
}

#[derive(Debug)]
enum MeOp {
    Wait {
        site: Site,
        cond: WaitCondition,
    },
    Flush {
        site: Site,
        flush: Flush,
    },
    Copy {
        site: Site,
        dst: u64,
        src: u64,
        bytes: u64,
    },
}

#[derive(Debug)]
enum RetireOp {
    Write {
        address: u64,
        width: Width,
        value: u64,
        source: WriteSource,
        op: &'static str,
        flush: Flush,
    },
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
    },
    SubmissionEnd,
}

#[derive(Debug)]
struct Retire {
    /// Dispatches with an index below this must finish first.
    after: u64,
    site: Site,
    op: RetireOp,
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

/// Dispatch destination ranges kept per engine (the oldest are forgotten).
const RANGE_RECORDS: usize = 4096;

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
    /// In-flight dispatches: index -> where, what, and the labels open at the dispatch (for
    /// `last_completed` when it finishes, and the breadcrumbs of a fault in it, D7).
    inflight_sites: BTreeMap<u64, (Site, &'static str, Labels)>,
    next_dispatch: u64,
    retire: VecDeque<Retire>,
    launches: Vec<Launch>,
    /// Open `begin_event` labels at the ME (exact breadcrumbs, C10).
    labels: Vec<Arc<str>>,
    /// The last command the ME (or, for its own waits, the PFP) completed.
    pub(crate) last_completed: Option<(Site, &'static str)>,
    /// Where the ME is: the packet it is executing or blocked in.
    me_site: Option<(Site, &'static str)>,
    /// Where the PFP is blocked on an external condition, if it is.
    pfp_blocked: Option<(Site, &'static str, WaitCondition)>,
    /// Completed submissions (the queue's progress fence follows this).
    pub(crate) completed_submissions: u64,
    /// Last command-processor write per 8-byte word.
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
    /// The device has a hazard model (the hooks run), and it is in strict mode.
    pub(crate) tracked: bool,
    pub(crate) strict: bool,
}

fn cond_of(
    address: u64,
    width: Width,
    cmp: Comparison,
    reference: u64,
    mask: u64,
) -> WaitCondition {
    WaitCondition::Memory {
        address,
        width,
        cmp,
        reference,
        mask,
    }
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
            last_completed: None,
            me_site: None,
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
                    if let Some((site, op, _)) = self.inflight_sites.remove(&index) {
                        // A dispatch completes when its last group does (D7).
                        self.last_completed = Some((site, op));
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

    /// Whether the next submission is a queue wait whose ticket is satisfied (F5).
    pub(crate) fn front_ticket_satisfied(&self) -> bool {
        matches!(self.ring.front(), Some((_, Submission::Wait { ticket, .. })) if ticket.is_satisfied())
    }

    /// Trace events at removal: open busy slices and still-blocked waits, closed at `now`.
    pub(crate) fn trace_close(
        &mut self,
        dev: &DeviceShared,
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

    /// A snapshot for diagnosis (D7).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut pending = Vec::new();
        for r in &self.retire {
            match &r.op {
                RetireOp::Write {
                    address,
                    width,
                    value,
                    source,
                    op,
                    ..
                } => pending.push(Pending::Write {
                    address: *address,
                    width: *width,
                    value: (*source == WriteSource::Value).then_some(*value),
                    site: r.site,
                    op,
                }),
                RetireOp::Signal { fence, value } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: r.site,
                }),
                RetireOp::SubmissionEnd => {}
            }
        }
        if let Some(MeOp::Copy {
            site, dst, bytes, ..
        }) = &self.me_op
        {
            pending.push(Pending::Range {
                start: *dst,
                end: dst.saturating_add(*bytes),
                value: None,
                site: *site,
                op: "copy",
            });
        }
        for p in &self.fifo {
            match &p.op {
                PacketOp::Command { cmd, .. } => pending_of(cmd, p.site, &mut pending),
                PacketOp::Signal { fence, value } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: p.site,
                }),
                PacketOp::SubmissionEnd => {}
            }
        }
        if let Some(cur) = &self.cursor {
            for (li, list) in cur.lists.iter().enumerate().skip(cur.list) {
                let (word, first) = if li == cur.list {
                    (cur.word, cur.command)
                } else {
                    (0, 0)
                };
                scan_list(list, word, first, cur.submission, &mut pending);
            }
        }
        for (seq, sub) in &self.ring {
            match sub {
                Submission::Execute(lists) => {
                    for l in lists {
                        scan_list(l, 0, 0, *seq, &mut pending);
                    }
                }
                Submission::Signal { fence, value, .. } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: Site {
                        submission: *seq,
                        list: None,
                        command: None,
                    },
                }),
                Submission::Wait { .. } => {}
            }
        }
        Snapshot {
            idle: self.is_idle(),
            blocked: self
                .blocked_on()
                .map(|(stage, site, op, cond)| (stage, site, op, cond.clone())),
            me_at: self.me_site,
            labels: self.labels.clone(),
            pfp_labels: {
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
            },
            dispatch_labels: self
                .inflight_sites
                .values()
                .map(|(s, _, l)| (*s, l.clone()))
                .collect(),
            last_completed: self.last_completed,
            pending,
            dispatches_in_flight: self.inflight.len() + self.launches.len(),
        }
    }

    // ----------------------------------------------------------------------------------------
    // Memory access by the command processor

    /// Makes the buffer cache hold the buffer of `[address, address + width)` and returns the
    /// offset in it. The cache is valid while the address space's generation (bumped by every
    /// unmap) is unchanged, so a hit costs no lock and no reference count.
    #[inline]
    fn resolve(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        access: Access,
        site: &Site,
        op: &'static str,
    ) -> Result<u64, Fault> {
        let generation = ctx.device.memory.generation();
        let hit = matches!(&self.buffer_cache, Some((g, b))
            if *g == generation
                && address >= b.base
                && b.contains(address - b.base, width.bytes()));
        if !hit {
            match ctx.device.memory.resolve(address, width.bytes()) {
                Some((b, _)) => self.buffer_cache = Some((generation, b)),
                None => {
                    return Err(Fault::PageFault {
                        address,
                        access,
                        site: *site,
                        op,
                        why: "unmapped",
                    })
                }
            }
        }
        let Some((_, buf)) = &self.buffer_cache else {
            unreachable!("filled above")
        };
        if access == Access::Write && !buf.heap.gpu_writable() {
            return Err(Fault::PageFault {
                address,
                access,
                site: *site,
                op,
                why: "write to upload memory",
            });
        }
        Ok(address - buf.base)
    }

    /// The cached buffer (after a successful [`resolve`](Self::resolve)).
    #[inline]
    fn cached(&self) -> Option<&BufferCore> {
        self.buffer_cache.as_ref().map(|(_, b)| &**b)
    }

    fn read(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        site: &Site,
        op: &'static str,
    ) -> Result<u64, Fault> {
        let off = self.resolve(ctx, address, width, Access::Read, site, op)?;
        let buf = self.cached();
        let v = match width {
            Width::W32 => buf.and_then(|b| b.load32(off)).map_or(0, u64::from),
            Width::W64 => buf.and_then(|b| b.load64(off)).unwrap_or(0),
        };
        if self.strict {
            return Ok(Self::strict_cp_read(ctx, self.queue_id, address, width, v));
        }
        Ok(v)
    }

    /// D5: the CP also sees its engine's dirty words once they are CP-visible.
    #[cold]
    #[inline(never)]
    fn strict_cp_read(ctx: &EngineCtx<'_>, queue: u32, address: u64, width: Width, v: u64) -> u64 {
        match ctx.device.model().as_ref().and_then(|m| m.vis.as_ref()) {
            Some(vis) => vis.cp_read(queue, address, width, v),
            None => v,
        }
    }

    fn write(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        value: u64,
        site: &Site,
        op: &'static str,
    ) -> Result<(), Fault> {
        let off = self.resolve(ctx, address, width, Access::Write, site, op)?;
        // Traced runs record the write before it becomes visible, so a waiter released by it
        // always finds who released it.
        if let Some(t) = self.trace.as_ref() {
            ctx.device.record_trace_write(
                address,
                Writer::Engine {
                    queue: self.queue_id,
                    site: *site,
                },
                t.now,
                op,
                value,
            );
        }
        if let Some(buf) = self.cached() {
            match width {
                Width::W32 => buf.store32(off, value as u32),
                Width::W64 => buf.store64(off, value),
            };
        }
        ctx.device.watches.notify_word(address);
        let seq = ctx.device.next_write_seq();
        self.writes.insert(
            address & !7,
            WriteRecord {
                site: *site,
                op,
                seq,
                ns: ctx.coarse_ns(),
            },
        );
        Ok(())
    }

    fn source_value(ctx: &EngineCtx<'_>, value: u64, source: WriteSource, width: Width) -> u64 {
        let v = match source {
            WriteSource::Value => value,
            WriteSource::GpuTimestamp => ticks(ctx.now_ns(), ctx.device.desc.timestamp_frequency),
            WriteSource::SystemTimestamp => ticks(ctx.now_ns(), SYSTEM_TIMESTAMP_FREQUENCY),
        };
        v & width.mask()
    }

    fn check_wait(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: &Site,
        op: &'static str,
        cond: &WaitCondition,
    ) -> Result<bool, Fault> {
        match cond {
            WaitCondition::Memory {
                address,
                width,
                cmp,
                reference,
                mask,
            } => {
                let v = self.read(ctx, *address, *width, site, op)?;
                Ok(cmp.holds(v, *mask, *reference))
            }
            WaitCondition::Fence { fence, value, .. } => Ok(fence.completed_value() >= *value),
            _ => Ok(true),
        }
    }

    // ----------------------------------------------------------------------------------------
    // Steps

    /// Advances one stage by at most one packet.
    pub(crate) fn step(&mut self, stage: Stage, ctx: &EngineCtx<'_>) -> Step {
        if let Some(t) = self.trace.as_mut() {
            // The driver refreshes this reading between batches of steps: one clock read per
            // batch, not per packet (back-to-back packets may share a slice and a timestamp).
            t.now = ctx.coarse_ns();
        }
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

    /// Runs a hazard-model hook when the device tracks hazards (a field test on plain devices).
    #[inline]
    fn hook(&self, ctx: &EngineCtx<'_>, f: impl FnOnce(&mut crate::hazard::Model)) {
        if self.tracked {
            ctx.device.with_model(f);
        }
    }

    fn push_packet(&mut self, p: Packet) {
        self.pushed += 1;
        self.fifo.push_back(p);
    }

    fn drained(&self) -> bool {
        self.fifo.is_empty()
            && self.me_op.is_none()
            && self.inflight.is_empty()
            && self.retire.is_empty()
            && self.launches.is_empty()
    }

    fn pfp_step(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if self.fifo.len() >= self.fifo_depth {
            return Step::Blocked(WaitCondition::FifoFull);
        }
        if self.flush_hold {
            return Step::Blocked(WaitCondition::FlushHold);
        }
        if self.cursor.is_none() {
            return self.pfp_next_submission(ctx);
        }
        self.pfp_fetch(ctx)
    }

    fn pfp_next_submission(&mut self, ctx: &EngineCtx<'_>) -> Step {
        let Some((seq, sub)) = self.ring.front() else {
            return Step::Idle;
        };
        let seq = *seq;
        let site = Site {
            submission: seq,
            list: None,
            command: None,
        };
        match sub {
            Submission::Wait {
                fence,
                fence_id,
                value,
                ticket,
            } => {
                let cond = WaitCondition::Fence {
                    fence: fence.clone(),
                    fence_id: *fence_id,
                    value: *value,
                };
                // F5, Q3: the ticket, not the current value (it may have been lowered since
                // the signal that satisfied the wait).
                if !ticket.is_satisfied() {
                    if let Some(t) = self.trace.as_mut() {
                        t.blocked(true);
                    }
                    self.pfp_blocked = Some((site, "wait", cond.clone()));
                    return Step::Blocked(cond);
                }
                let by = ticket.satisfied_by();
                if let Some(t) = self.trace.as_mut() {
                    t.unblocked_by(ctx.device, true, &cond, by.as_ref());
                }
                self.hook(ctx, |m| {
                    m.submission_start(self.queue_id, seq, self.pushed);
                    let release = by.as_ref().and_then(|c| c.release.as_ref());
                    m.queue_wait_acquire(self.queue_id, release, self.pushed);
                });
                self.pfp_blocked = None;
                self.ring.pop_front();
                // The wait completes its submission once everything before it has.
                self.push_packet(Packet {
                    site,
                    op: PacketOp::SubmissionEnd,
                });
                Step::Progressed
            }
            Submission::Signal { .. } => {
                let Some((_, Submission::Signal { fence, value, .. })) = self.ring.pop_front()
                else {
                    return Step::Idle;
                };
                self.hook(ctx, |m| {
                    m.submission_start(self.queue_id, seq, self.pushed);
                });
                self.push_packet(Packet {
                    site,
                    op: PacketOp::Signal { fence, value },
                });
                Step::Progressed
            }
            Submission::Execute(_) => {
                if !self.drained() {
                    // Q7: the previous call's work completes first.
                    return Step::Blocked(WaitCondition::Drain);
                }
                let Some((_, Submission::Execute(lists))) = self.ring.pop_front() else {
                    return Step::Idle;
                };
                self.hook(ctx, |m| {
                    // Q7: the previous call's work is complete and visible to this queue.
                    m.q7_boundary(self.queue_id);
                    m.submission_start(self.queue_id, seq, self.pushed);
                });
                self.cursor = Some(Cursor {
                    submission: seq,
                    lists,
                    list: 0,
                    word: 0,
                    command: 0,
                    cache: Vec::new(),
                    cache_start: 0,
                });
                Step::Progressed
            }
        }
    }

    fn pfp_fetch(&mut self, ctx: &EngineCtx<'_>) -> Step {
        let Some(cur) = self.cursor.as_mut() else {
            return Step::Idle;
        };
        // Next list, or the end of the submission.
        while cur.list < cur.lists.len() && cur.word >= cur.lists[cur.list].words {
            cur.list += 1;
            cur.word = 0;
            cur.command = 0;
            cur.cache.clear();
            cur.cache_start = 0;
        }
        if cur.list >= cur.lists.len() {
            let site = Site {
                submission: cur.submission,
                list: None,
                command: None,
            };
            self.cursor = None;
            self.push_packet(Packet {
                site,
                op: PacketOp::SubmissionEnd,
            });
            return Step::Progressed;
        }
        let li = cur.list;
        let site = Site {
            submission: cur.submission,
            list: Some(cur.lists[li].id),
            command: Some(cur.command),
        };
        let (cmd, len) = match fetch_decode(cur, li) {
            Ok(x) => x,
            Err(e) => {
                return Step::Faulted(Fault::MalformedPacket {
                    site,
                    offset: cur.word,
                    message: e.to_string(),
                })
            }
        };
        let op = cmd.name();
        let mut indirect_groups = None;
        match &cmd {
            Command::WaitValue {
                address,
                width,
                cmp,
                reference,
                mask,
                engine: WaitEngine::Pfp,
            } => {
                let cond = cond_of(*address, *width, *cmp, *reference, *mask);
                if cmp.never_satisfiable(*mask & width.mask(), *reference) {
                    return Step::Faulted(Fault::NeverSatisfiable {
                        site,
                        op,
                        stage: Stage::Pfp,
                        condition: cond,
                    });
                }
                match self.check_wait(ctx, &site, op, &cond) {
                    Err(f) => return Step::Faulted(f),
                    Ok(false) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.blocked(true);
                        }
                        self.pfp_blocked = Some((site, op, cond.clone()));
                        return Step::Blocked(cond);
                    }
                    Ok(true) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.unblocked(ctx.device, true, &cond);
                        }
                        self.hook(ctx, |m| {
                            m.wait_acquire(
                                self.queue_id,
                                true,
                                site,
                                op,
                                *address,
                                *width,
                                self.pushed,
                            );
                        });
                        self.pfp_blocked = None;
                        if let Some(c) = self.cursor.as_mut() {
                            c.word += len;
                            c.command += 1;
                        }
                        self.last_completed = Some((site, op));
                        self.commands_completed += 1;
                        return Step::Progressed;
                    }
                }
            }
            Command::DispatchIndirect { args, .. } => {
                // C7: the PFP reads the group count when it parses the command.
                self.hook(ctx, |m| {
                    m.pfp_read(self.queue_id, site, *args, self.pushed);
                });
                match self.read(ctx, *args, Width::W32, &site, op) {
                    Ok(n) => indirect_groups = Some(n as u32),
                    Err(f) => return Step::Faulted(f),
                }
            }
            Command::FlushPipeline { .. } => self.flush_hold = true,
            _ => {}
        }
        self.pfp_blocked = None;
        if let Some(c) = self.cursor.as_mut() {
            c.word += len;
            c.command += 1;
        }
        // Only dispatches need their list (for its user-kernel table).
        let list = match (&cmd, self.cursor.as_ref()) {
            (Command::Dispatch { .. } | Command::DispatchIndirect { .. }, Some(c)) => {
                c.lists.get(li).cloned()
            }
            _ => None,
        };
        self.push_packet(Packet {
            site,
            op: PacketOp::Command {
                cmd,
                indirect_groups,
                list,
            },
        });
        Step::Progressed
    }

    fn me_step(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if let Some(op) = self.me_op.take() {
            return self.me_resume(ctx, op);
        }
        let Some(packet) = self.fifo.pop_front() else {
            return Step::Idle;
        };
        let index = self.popped;
        self.popped += 1;
        self.hook(ctx, |m| {
            m.me_packet(self.queue_id, index);
        });
        let Packet { site, op } = packet;
        match op {
            PacketOp::Signal { fence, value } => {
                self.hook(ctx, |m| {
                    m.retire_pushed(self.queue_id, true);
                });
                self.retire.push_back(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::Signal { fence, value },
                });
                // It completes when it retires.
                self.complete_later("signal");
                Step::Progressed
            }
            PacketOp::SubmissionEnd => {
                self.retire.push_back(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::SubmissionEnd,
                });
                Step::Progressed
            }
            PacketOp::Command {
                cmd,
                indirect_groups,
                list,
            } => self.me_command(ctx, site, cmd, indirect_groups, list.as_ref()),
        }
    }

    /// The ME is done with a command that is complete now.
    fn complete(&mut self, site: Site, op: &'static str) {
        self.complete_later(op);
        self.last_completed = Some((site, op));
    }

    /// The ME is done with a command that completes later: a dispatch when its last group
    /// finishes, a bottom-of-pipe write or queue signal when it retires (D7's `last_completed`
    /// names only commands that really completed).
    fn complete_later(&mut self, op: &'static str) {
        if let Some(t) = self.trace.as_mut() {
            t.me_done(op);
        }
        self.me_site = None;
        self.commands_completed += 1;
    }

    fn me_resume(&mut self, ctx: &EngineCtx<'_>, op: MeOp) -> Step {
        match op {
            MeOp::Wait { site, cond } => {
                let name = self.me_site.as_ref().map_or("wait-value32", |(_, n)| *n);
                match self.check_wait(ctx, &site, name, &cond) {
                    Err(f) => Step::Faulted(f),
                    Ok(true) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.unblocked(ctx.device, false, &cond);
                        }
                        if let WaitCondition::Memory { address, width, .. } = &cond {
                            self.hook(ctx, |m| {
                                m.wait_acquire(
                                    self.queue_id,
                                    false,
                                    site,
                                    name,
                                    *address,
                                    *width,
                                    self.pushed,
                                )
                            });
                        }
                        self.complete(site, name);
                        Step::Progressed
                    }
                    Ok(false) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.blocked(false);
                        }
                        let c = cond.clone();
                        self.me_op = Some(MeOp::Wait { site, cond });
                        Step::Blocked(c)
                    }
                }
            }
            MeOp::Flush { site, flush } => {
                if !self.inflight.is_empty() || !self.launches.is_empty() {
                    self.me_op = Some(MeOp::Flush { site, flush });
                    return Step::Blocked(WaitCondition::Dispatches);
                }
                self.hook(ctx, |m| {
                    m.flush_done(self.queue_id, flush);
                });
                self.flush_hold = false;
                self.complete(site, "flush-pipeline");
                Step::Progressed
            }
            MeOp::Copy {
                site,
                dst,
                src,
                bytes,
            } => match self.copy(ctx, &site, dst, src, bytes) {
                Ok(()) => {
                    self.complete(site, "copy");
                    Step::Progressed
                }
                Err(f) => Step::Faulted(f),
            },
        }
    }

    fn copy(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: &Site,
        dst: u64,
        src: u64,
        bytes: u64,
    ) -> Result<(), Fault> {
        if bytes == 0 {
            return Ok(());
        }
        let fault = |address, access, why| Fault::PageFault {
            address,
            access,
            site: *site,
            op: "copy",
            why,
        };
        let (sb, so) = ctx
            .device
            .memory
            .resolve(src, bytes)
            .ok_or_else(|| fault(src, Access::Read, "unmapped"))?;
        let (db, doff) = ctx
            .device
            .memory
            .resolve(dst, bytes)
            .ok_or_else(|| fault(dst, Access::Write, "unmapped"))?;
        if !db.heap.gpu_writable() {
            return Err(fault(dst, Access::Write, "write to upload memory"));
        }
        let n = bytes / 4;
        let strict_copy = match ctx.device.model() {
            Some(mut m) => {
                let index = m.copy(self.queue_id, *site, dst, src, bytes);
                if let Some(vis) = m.vis.as_mut() {
                    // D5: a copy is an engine task; its reads may be stale, its writes dirty.
                    let mut vals = vec![0u32; n as usize];
                    vis.task_read(ctx.device, self.queue_id, src, &mut vals);
                    vis.task_write(ctx.device, self.queue_id, (true, index), dst, &vals);
                    true
                } else {
                    false
                }
            }
            None => false,
        };
        if !strict_copy {
            let vals: Vec<u32> = (0..n).map(|i| sb.load32(so + i * 4).unwrap_or(0)).collect();
            for (i, v) in vals.into_iter().enumerate() {
                db.store32(doff + i as u64 * 4, v);
            }
        }
        ctx.device.watches.notify_range(dst, dst + bytes);
        self.record_range(ctx, dst, dst + bytes, site, "copy");
        Ok(())
    }

    fn record_range(
        &mut self,
        ctx: &EngineCtx<'_>,
        start: u64,
        end: u64,
        site: &Site,
        op: &'static str,
    ) {
        if self.ranges.len() >= RANGE_RECORDS {
            self.ranges.pop_front();
        }
        self.ranges.push_back(RangeRecord {
            op,
            start,
            end,
            site: *site,
            seq: ctx.device.next_write_seq(),
            ns: ctx.coarse_ns(),
        });
    }

    fn me_command(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        cmd: Command,
        indirect_groups: Option<u32>,
        list: Option<&Arc<ClosedList>>,
    ) -> Step {
        let op = cmd.name();
        self.me_site = Some((site, op));
        match cmd {
            Command::WaitValue {
                address,
                width,
                cmp,
                reference,
                mask,
                engine: _,
            } => {
                let cond = cond_of(address, width, cmp, reference, mask);
                if cmp.never_satisfiable(mask & width.mask(), reference) {
                    return Step::Faulted(Fault::NeverSatisfiable {
                        site,
                        op,
                        stage: Stage::Me,
                        condition: cond,
                    });
                }
                self.me_resume(ctx, MeOp::Wait { site, cond })
            }
            Command::WriteValueTopOfPipe {
                address,
                width,
                value,
                source,
            } => {
                let v = Self::source_value(ctx, value, source, width);
                self.hook(ctx, |m| {
                    m.me_value_write(self.queue_id, site, op, address, width);
                });
                if let Err(f) = self.write(ctx, address, width, v, &site, op) {
                    return Step::Faulted(f);
                }
                self.complete(site, op);
                Step::Progressed
            }
            Command::WriteValueBottomOfPipe {
                address,
                width,
                value,
                source,
                flush,
            } => {
                self.hook(ctx, |m| {
                    m.retire_pushed(self.queue_id, flush.contains(Flush::L2_WRITEBACK));
                });
                self.retire.push_back(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::Write {
                        address,
                        width,
                        value,
                        source,
                        op,
                        flush,
                    },
                });
                self.complete_later(op);
                Step::Progressed
            }
            Command::WriteImmediate { writes } => {
                let later = writes.iter().any(|w| w.mode == ImmediateMode::MarkerOut);
                for w in writes {
                    match w.mode {
                        ImmediateMode::Default | ImmediateMode::MarkerIn => {
                            self.hook(ctx, |m| {
                                m.me_value_write(self.queue_id, site, op, w.address, Width::W32);
                            });
                            if let Err(f) = self.write(
                                ctx,
                                w.address,
                                Width::W32,
                                u64::from(w.value),
                                &site,
                                op,
                            ) {
                                return Step::Faulted(f);
                            }
                        }
                        ImmediateMode::MarkerOut => {
                            self.hook(ctx, |m| {
                                m.retire_pushed(self.queue_id, false);
                            });
                            self.retire.push_back(Retire {
                                after: self.next_dispatch,
                                site,
                                op: RetireOp::Write {
                                    address: w.address,
                                    width: Width::W32,
                                    value: u64::from(w.value),
                                    source: WriteSource::Value,
                                    op,
                                    flush: Flush::NONE,
                                },
                            })
                        }
                    }
                }
                if later {
                    self.complete_later(op);
                } else {
                    self.complete(site, op);
                }
                Step::Progressed
            }
            Command::FlushPipeline { flush } => self.me_resume(ctx, MeOp::Flush { site, flush }),
            Command::Dispatch { kernel, groups } => self.launch(ctx, site, &kernel, groups, list),
            Command::DispatchIndirect { kernel, .. } => {
                let groups = indirect_groups.unwrap_or(0);
                self.launch(ctx, site, &kernel, groups, list)
            }
            Command::Copy { dst, src, bytes } => {
                // The ME does not go on until the copy is done (C9): the copy itself is the
                // next ME step (a separate action for the deterministic driver).
                self.me_op = Some(MeOp::Copy {
                    site,
                    dst,
                    src,
                    bytes,
                });
                Step::Progressed
            }
            Command::SetMarker { .. } => {
                self.complete(site, op);
                Step::Progressed
            }
            Command::BeginEvent { label } => {
                self.labels.push(label.into());
                self.complete(site, op);
                Step::Progressed
            }
            Command::EndEvent => {
                self.labels.pop();
                self.complete(site, op);
                Step::Progressed
            }
        }
    }

    fn launch(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        args: &KernelArgs,
        groups: u32,
        list: Option<&Arc<ClosedList>>,
    ) -> Step {
        let table: &[UserKernel] = list.map_or(&[], |l| &l.kernels);
        let Some(kernel) = Kernel::from_args(args, table) else {
            return Step::Faulted(Fault::MalformedPacket {
                site,
                offset: 0,
                message: format!(
                    "dispatch of user kernel {args:?}: no such kernel in list `{}` ({} kernels)",
                    list.map_or("?", |l| &*l.name),
                    table.len()
                ),
            });
        };
        if let Some((start, end)) = kernel.write_range(0..groups) {
            let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
            self.record_range(ctx, start, end, &site, op);
        }
        if groups > 0 {
            let index = self.next_dispatch;
            self.next_dispatch += 1;
            self.hook(ctx, |m| {
                let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
                m.launch(self.queue_id, index, site, op, &kernel, groups);
            });
            self.inflight.insert(index, groups);
            let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
            self.inflight_sites
                .insert(index, (site, op, self.labels.as_slice().into()));
            self.launches.push(Launch {
                index,
                op: self.me_site.as_ref().map_or("dispatch", |(_, n)| *n),
                kernel,
                groups,
                site,
            });
        }
        let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
        if groups > 0 {
            self.complete_later(op);
        } else {
            self.complete(site, op);
        }
        Step::Progressed
    }

    /// Whether the head of the retire queue can land now.
    pub(crate) fn retire_ready(&self) -> bool {
        match self.retire.front() {
            None => false,
            Some(r) => self
                .inflight
                .first_key_value()
                .is_none_or(|(k, _)| *k >= r.after),
        }
    }

    /// Lands the head of the retire queue if every earlier dispatch finished (C3, Q4).
    pub(crate) fn retire(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if !self.retire_ready() {
            return if self.retire.is_empty() {
                Step::Idle
            } else {
                Step::Blocked(WaitCondition::Dispatches)
            };
        }
        let Some(r) = self.retire.pop_front() else {
            return Step::Idle;
        };
        match r.op {
            RetireOp::Write {
                address,
                width,
                value,
                source,
                op,
                flush,
            } => {
                self.hook(ctx, |m| {
                    m.bop_write(self.queue_id, r.site, op, address, width, flush);
                });
                let v = Self::source_value(ctx, value, source, width);
                if let Err(f) = self.write(ctx, address, width, v, &r.site, op) {
                    return Step::Faulted(f);
                }
                self.last_completed = Some((r.site, op));
            }
            RetireOp::Signal { fence, value } => {
                let mut release = None;
                self.hook(ctx, |m| {
                    release = Some(m.signal(self.queue_id, &fence));
                });
                let w = r.site.writer(self.queue_id);
                let now = ctx.now_ns();
                if let Some(t) = self.trace.as_mut() {
                    t.now = now;
                    t.signalled(fence.name(), value);
                }
                // A signal to a fence the application released is discarded (F11).
                fence.signal_with(value, w, now, release);
                self.last_completed = Some((r.site, "signal"));
                self.finish_submission(r.site.submission);
            }
            RetireOp::SubmissionEnd => self.finish_submission(r.site.submission),
        }
        Step::Progressed
    }

    fn finish_submission(&mut self, seq: u64) {
        self.completed_submissions = seq + 1;
        if let Some(p) = &self.progress {
            p.signal(self.completed_submissions, Writer::Never, 0);
        }
    }
}

/// A write or signal an engine has not performed yet (for the wait-for graph, D7).
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// A queue signal.
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
        site: Site,
    },
    /// A command-processor value write; `value` is `None` for timestamps.
    Write {
        address: u64,
        width: Width,
        value: Option<u64>,
        site: Site,
        op: &'static str,
    },
    /// Writes by a dispatch or copy to `[start, end)`; `value` is the u32 stored by `fill`.
    Range {
        start: u64,
        end: u64,
        value: Option<u32>,
        site: Site,
        op: &'static str,
    },
}

impl Pending {
    /// Where the write or signal is, and its operation's name.
    pub(crate) fn site_op(&self) -> (Site, &'static str) {
        match self {
            Pending::Signal { site, .. } => (*site, "signal"),
            Pending::Write { site, op, .. } | Pending::Range { site, op, .. } => (*site, op),
        }
    }
}

/// What diagnosis needs from one engine.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) idle: bool,
    pub(crate) blocked: Option<(Stage, Site, &'static str, WaitCondition)>,
    pub(crate) me_at: Option<(Site, &'static str)>,
    /// The labels open at the ME (at the command it executes or is blocked in).
    pub(crate) labels: Vec<Arc<str>>,
    /// The labels open at the PFP's position (the ME's, plus the label commands it parsed
    /// and the ME has not executed yet).
    pub(crate) pfp_labels: Vec<Arc<str>>,
    /// The labels open at each dispatch in flight.
    pub(crate) dispatch_labels: Vec<(Site, Labels)>,
    pub(crate) last_completed: Option<(Site, &'static str)>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) dispatches_in_flight: usize,
}

fn pending_of(cmd: &Command, site: Site, out: &mut Vec<Pending>) {
    let op = cmd.name();
    match cmd {
        Command::WriteValueTopOfPipe {
            address,
            width,
            value,
            source,
        }
        | Command::WriteValueBottomOfPipe {
            address,
            width,
            value,
            source,
            ..
        } => out.push(Pending::Write {
            address: *address,
            width: *width,
            value: (*source == WriteSource::Value).then_some(*value),
            site,
            op,
        }),
        Command::WriteImmediate { writes } => {
            for w in writes {
                out.push(Pending::Write {
                    address: w.address,
                    width: Width::W32,
                    value: Some(u64::from(w.value)),
                    site,
                    op,
                });
            }
        }
        Command::Dispatch { kernel, groups } => {
            let range = |dst: u64| {
                (
                    dst,
                    dst.saturating_add(u64::from(*groups) * kernels::GROUP_BYTES),
                )
            };
            let (start, end, value) = match kernel {
                KernelArgs::Fill { dst, value } => (range(*dst).0, range(*dst).1, Some(*value)),
                KernelArgs::Add { dst, .. } => (range(*dst).0, range(*dst).1, None),
                KernelArgs::Sum { dst, .. } => (*dst, dst.saturating_add(8), None),
                KernelArgs::Spin { .. } => return,
                // A user kernel may write anywhere.
                KernelArgs::User { .. } => (0, u64::MAX, None),
            };
            out.push(Pending::Range {
                start,
                end,
                value,
                site,
                op,
            });
        }
        Command::DispatchIndirect { kernel, .. } => {
            let start = match kernel {
                KernelArgs::Fill { dst, .. }
                | KernelArgs::Add { dst, .. }
                | KernelArgs::Sum { dst, .. } => *dst,
                KernelArgs::Spin { .. } => return,
                KernelArgs::User { .. } => 0,
            };
            out.push(Pending::Range {
                start,
                end: u64::MAX,
                value: None,
                site,
                op,
            });
        }
        Command::Copy { dst, bytes, .. } => out.push(Pending::Range {
            start: *dst,
            end: dst.saturating_add(*bytes),
            value: None,
            site,
            op,
        }),
        _ => {}
    }
}

/// Decodes a list from `word` on and collects its pending writes.
fn scan_list(list: &ClosedList, word: usize, first: u32, submission: u64, out: &mut Vec<Pending>) {
    let words: Vec<u32> = (word..list.words)
        .map(|w| list.stream.load32(w as u64 * 4).unwrap_or(0))
        .collect();
    let mut off = 0;
    let mut index = first;
    while off < words.len() {
        let Ok((cmd, len)) = decode(&words, off) else {
            break;
        };
        let site = Site {
            submission,
            list: Some(list.id),
            command: Some(index),
        };
        pending_of(&cmd, site, out);
        off += len;
        index += 1;
    }
}

/// Fetches (through the PFP's prefetch cache) and decodes the packet at the cursor.
fn fetch_decode(cur: &mut Cursor, li: usize) -> Result<(Command, usize), DecodeError> {
    let Cursor {
        lists,
        word,
        cache,
        cache_start,
        ..
    } = cur;
    let list = &lists[li];
    let word = *word;
    loop {
        let in_cache = word >= *cache_start && word < *cache_start + cache.len();
        if !in_cache {
            refill(cache, cache_start, word, list, PREFETCH_WORDS);
        }
        match decode(cache, word - *cache_start) {
            Ok((cmd, len)) => return Ok((cmd, len)),
            Err(e) => {
                let cached_end = *cache_start + cache.len();
                if cached_end < list.words {
                    // The packet may continue past the prefetched words: fetch more.
                    let want = (cache.len() * 2).max(PREFETCH_WORDS);
                    refill(cache, cache_start, word, list, want);
                    if *cache_start + cache.len() > cached_end {
                        continue;
                    }
                }
                return Err(DecodeError { offset: word, ..e });
            }
        }
    }
}

/// Reads `words` words of `list`'s stream from device memory, starting at `word`.
fn refill(
    cache: &mut Vec<u32>,
    cache_start: &mut usize,
    word: usize,
    list: &ClosedList,
    words: usize,
) {
    let end = (word + words).min(list.words);
    cache.clear();
    *cache_start = word;
    list.stream
        .read_words32(word, end.saturating_sub(word), cache);
}
