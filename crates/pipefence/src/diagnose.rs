//! Diagnosis of a removed device (D6, D7): the removal report, the wait-for graph, and the
//! classification of each stuck queue.
//!
//! The report is built from snapshots of every engine, taken one engine at a time before the
//! fences are forced to `u64::MAX`. An edge `A -> B` means a pending signal or write on queue `B`
//! (including one queued behind `B`'s own waits) would satisfy `A`'s condition with its value.
//! Writes whose value is unknown until they happen (timestamps, kernels other than `fill`,
//! copies) count as possibly satisfying.

use crate::engine::{Fault, Pending, Site, Snapshot, Stage, WaitCondition};
use crate::error::RemovalReason;
use crate::runtime::{DeviceShared, QueueShared};
use crate::sync::shim::lock;
use crate::sync::Writer;
use serde::Serialize;
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

/// Why a queue (or the device) is stuck (D7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Classification {
    /// A GPU page fault (M3).
    PageFault,
    /// A command stream the decoder rejected (D2).
    MalformedPacket,
    /// A wait no value can satisfy (D6).
    NeverSatisfiable,
    /// A user kernel that panicked (E3, D7).
    KernelPanic,
    /// A dispatch group running longer than the watchdog timeout (D6).
    EndlessKernel,
    /// On a cycle of waits between queues, or every path leads into one.
    Deadlock,
    /// Waiting for something only the host can do.
    WaitingOnHost,
    /// Still running when another queue faulted (per queue only).
    Running,
}

impl Classification {
    /// The kebab-case name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Classification::PageFault => "page-fault",
            Classification::MalformedPacket => "malformed-packet",
            Classification::NeverSatisfiable => "never-satisfiable",
            Classification::KernelPanic => "kernel-panic",
            Classification::EndlessKernel => "endless-kernel",
            Classification::Deadlock => "deadlock",
            Classification::WaitingOnHost => "waiting-on-host",
            Classification::Running => "running",
        }
    }
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A place in a queue's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteReport {
    /// The queue's name.
    pub queue: String,
    /// The queue's id.
    pub queue_id: u32,
    /// The submission's sequence number on the queue.
    pub submission: u64,
    /// The command list's name, for commands of a list.
    pub list: Option<String>,
    /// The command list's id.
    pub list_id: Option<u32>,
    /// The command index in the list.
    pub command: Option<u32>,
    /// The operation (`wait-value64`, `signal`, `wait`, ...).
    pub op: String,
    /// The source line of the command (or of the queue call that submitted it) where the
    /// caller knows one: the scenario runner fills it in; the Rust API leaves it `None` (not
    /// serialized then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl fmt::Display for SiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.list, self.command) {
            (Some(l), Some(c)) => write!(
                f,
                "queue {}, list {l}, command {c} ({})",
                self.queue, self.op
            ),
            _ => write!(
                f,
                "queue {}, {} (submission {})",
                self.queue, self.op, self.submission
            ),
        }
    }
}

/// Who last wrote an address or a fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WriterReport {
    /// Never written since creation.
    Never,
    /// A host thread.
    Host {
        /// The host thread's name.
        host: String,
        /// The host id.
        host_id: u64,
        /// Clock nanoseconds of the write.
        ns: u64,
        /// The source line of the write (or signal) where the caller knows one: the scenario
        /// runner fills it in; the Rust API leaves it `None` (not serialized then).
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    },
    /// A queue.
    Queue {
        /// Where.
        site: SiteReport,
        /// Clock nanoseconds of the write.
        ns: u64,
    },
}

impl fmt::Display for WriterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriterReport::Never => f.write_str("never written"),
            WriterReport::Host { host, .. } => write!(f, "host {host}"),
            WriterReport::Queue { site, .. } => write!(f, "{site}"),
        }
    }
}

/// One queue with work left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct QueueReport {
    /// The queue's name.
    pub queue: String,
    /// The queue's id.
    pub queue_id: u32,
    /// Its classification (D7).
    pub class: Classification,
    /// Where it is stuck (or where its ME is), if anywhere.
    pub at: Option<SiteReport>,
    /// The stage that is stuck: `me` or `pfp`.
    pub stage: Option<String>,
    /// The condition in words (`flags+8 (u64) & 0xff >= 1`, `fence frame >= 3`).
    pub waiting_for: Option<String>,
    /// The fence it waits on, for queue waits.
    pub fence: Option<String>,
    /// The buffer it waits on, for memory-value waits.
    pub buffer: Option<String>,
    /// The byte offset in that buffer.
    pub offset: Option<u64>,
    /// The GPU address it waits on, for memory-value waits.
    pub address: Option<u64>,
    /// The current value of what it waits for.
    pub current: Option<u64>,
    /// Who last wrote it.
    pub last_writer: Option<WriterReport>,
    /// The last command it completed.
    pub last_completed: Option<SiteReport>,
    /// Open `begin_event` labels (breadcrumbs).
    pub events: Vec<String>,
    /// Queues with a pending signal or write that would satisfy it (wait-for graph edges).
    pub waits_on: Vec<String>,
    /// For each of those queues, the first pending command that would satisfy it.
    pub satisfiers: Vec<SiteReport>,
    /// Dispatches still in flight on it.
    pub dispatches_in_flight: usize,
}

/// The fault that removed the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FaultReport {
    /// `page-fault`, `kernel-panic`, `malformed-packet`, `never-satisfiable` or
    /// `endless-kernel`.
    pub kind: Classification,
    /// The faulting address (page faults), as `0x...`.
    pub address: Option<String>,
    /// `read` or `write` (page faults).
    pub access: Option<String>,
    /// Why (page faults: `unmapped`, `write to upload memory`).
    pub why: Option<String>,
    /// The buffer nearest to the address (page faults).
    pub buffer: Option<String>,
    /// Where the address is relative to that buffer (page faults): `8 bytes past the end of
    /// `buf` (size 256)`, `just past the end of ...`, `16 bytes before the start of ...`.
    pub near: Option<String>,
    /// The command.
    pub at: SiteReport,
    /// Word offset of the bad packet in its list (malformed packets).
    pub packet_offset: Option<usize>,
    /// Details.
    pub message: String,
}

/// What [`Device::removed_reason`](crate::Device::removed_reason) explains: why the device was
/// removed, each stuck queue, the cycle if there is one, and the fault (D7). Serializes with the
/// library's own field names; the scenario runner's `--json` prints a flattened form of it, with
/// scenario lines (`removed` in `docs/run.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RemovalReport {
    /// Why.
    pub reason: RemovalReason,
    /// The reason's HRESULT, as `0x887A0006`.
    pub hresult: String,
    /// The overall classification (`None` for a requested removal with nothing stuck).
    pub classification: Option<Classification>,
    /// The cycle of waits containing the earliest-created queue on any cycle, from that queue
    /// along the edges; empty if none.
    pub cycle: Vec<String>,
    /// Every queue with work left, in creation order.
    pub queues: Vec<QueueReport>,
    /// The fault, for faults.
    pub fault: Option<FaultReport>,
}

impl fmt::Display for RemovalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device removed: {} ({})", self.reason, self.hresult)?;
        // The classification, unless it says the reason again (`page-fault`).
        if let Some(c) = self
            .classification
            .filter(|c| c.to_string() != self.reason.to_string())
        {
            write!(f, ", {c}")?;
        }
        writeln!(f)?;
        if !self.cycle.is_empty() {
            writeln!(
                f,
                "  cycle: {} -> {}",
                self.cycle.join(" -> "),
                self.cycle[0]
            )?;
        }
        if let Some(fault) = &self.fault {
            write!(f, "  fault: {} at {}", fault.kind, fault.at)?;
            if let Some(a) = &fault.address {
                write!(
                    f,
                    ", {} of {a}",
                    fault.access.as_deref().unwrap_or("access")
                )?;
            }
            match (&fault.near, &fault.buffer) {
                (Some(n), _) => write!(f, ", {n}")?,
                (None, Some(b)) => write!(f, " (nearest buffer {b})")?,
                (None, None) => {}
            }
            writeln!(f, ": {}", fault.message)?;
        }
        for q in &self.queues {
            write!(f, "  queue {} [{}]", q.queue, q.class)?;
            if let Some(at) = &q.at {
                write!(f, " at {at}")?;
            }
            writeln!(f)?;
            if let Some(w) = &q.waiting_for {
                write!(f, "    waiting for {w}")?;
                if let Some(c) = q.current {
                    write!(f, " (current {c})")?;
                }
                writeln!(f)?;
            }
            if let Some(w) = &q.last_writer {
                writeln!(f, "    last writer: {w}")?;
            }
            if let Some(l) = &q.last_completed {
                writeln!(f, "    last completed: {l}")?;
            }
            if !q.events.is_empty() {
                writeln!(f, "    events: {}", q.events.join(" > "))?;
            }
            if !q.waits_on.is_empty() {
                writeln!(f, "    waits on: {}", q.waits_on.join(", "))?;
            }
        }
        Ok(())
    }
}

/// The fault's classification.
pub(crate) fn fault_class(f: &Fault) -> Classification {
    match f {
        Fault::PageFault { .. } => Classification::PageFault,
        Fault::MalformedPacket { .. } => Classification::MalformedPacket,
        Fault::NeverSatisfiable { .. } => Classification::NeverSatisfiable,
        Fault::KernelPanic { .. } => Classification::KernelPanic,
        Fault::EndlessKernel { .. } => Classification::EndlessKernel,
    }
}

struct Node {
    q: Arc<QueueShared>,
    snap: Snapshot,
}

fn site_report(
    dev: &DeviceShared,
    queues: &[Node],
    queue: u32,
    site: Site,
    op: &str,
) -> SiteReport {
    let qname = queues
        .iter()
        .find(|n| n.q.id == queue)
        .map(|n| n.q.name.to_string())
        .unwrap_or_else(|| format!("queue#{queue}"));
    SiteReport {
        queue: qname,
        queue_id: queue,
        submission: site.submission,
        list: site.list.map(|id| dev.list_name(id)),
        list_id: site.list,
        command: site.command,
        op: op.to_string(),
        line: None,
    }
}

fn cond_buffer(dev: &DeviceShared, cond: &WaitCondition) -> Option<(String, u64)> {
    match cond {
        WaitCondition::Memory { address, .. } => dev
            .memory
            .resolve(*address, 1)
            .map(|(b, off)| (b.name.to_string(), off)),
        _ => None,
    }
}

fn current_value(dev: &DeviceShared, cond: &WaitCondition) -> Option<u64> {
    match cond {
        WaitCondition::Fence { fence, .. } => Some(fence.value_before_removal()),
        WaitCondition::Memory { address, cond } => {
            let (b, off) = dev.memory.resolve(*address, cond.width.bytes())?;
            b.load(off, cond.width)
        }
        _ => None,
    }
}

fn satisfies(cond: &WaitCondition, p: &Pending) -> bool {
    match (cond, p) {
        (
            WaitCondition::Fence {
                fence: f, value: v, ..
            },
            Pending::Signal { fence, value, .. },
        ) => Arc::ptr_eq(f, fence) && *value >= *v,
        (WaitCondition::Memory { address, cond: vc }, p) => {
            let width = &vc.width;
            let (lo, hi) = (*address, address + width.bytes());
            let holds = |v: u64| vc.holds(v & width.mask());
            match p {
                Pending::Write {
                    address: a,
                    width: w,
                    value,
                    ..
                } => {
                    if *a + w.bytes() <= lo || *a >= hi {
                        return false;
                    }
                    match value {
                        Some(v) if *a == *address && w == width => holds(*v),
                        _ => true,
                    }
                }
                Pending::Range {
                    start, end, value, ..
                } => {
                    if *end <= lo || *start >= hi {
                        return false;
                    }
                    match value {
                        Some(v) => holds((u64::from(*v) << 32) | u64::from(*v)),
                        None => true,
                    }
                }
                Pending::Signal { .. } => false,
            }
        }
        _ => false,
    }
}

fn writer_report(dev: &DeviceShared, nodes: &[Node], w: Writer, op: &str, ns: u64) -> WriterReport {
    match w {
        Writer::Never => WriterReport::Never,
        Writer::Host { host } => WriterReport::Host {
            host: crate::host_names::name_of(host),
            host_id: host,
            ns,
            line: None,
        },
        Writer::Engine { queue, site } => WriterReport::Queue {
            site: site_report(dev, nodes, queue, site, op),
            ns,
        },
    }
}

fn last_writer(dev: &DeviceShared, nodes: &[Node], cond: &WaitCondition) -> Option<WriterReport> {
    match cond {
        WaitCondition::Fence { fence, .. } => {
            let (w, ns) = fence.last_writer();
            Some(writer_report(dev, nodes, w, "signal", ns))
        }
        WaitCondition::Memory { address, cond } => {
            let end = address + cond.width.bytes();
            // (seq, writer, op, ns): the newest wins.
            let mut best: Option<(u64, Writer, &'static str, u64)> = None;
            let mut consider = |seq: u64, w: Writer, op: &'static str, ns: u64| {
                if best.is_none_or(|b| seq >= b.0) {
                    best = Some((seq, w, op, ns));
                }
            };
            let words: Vec<u64> = crate::core::words_of(*address, cond.width.bytes()).collect();
            {
                let host = lock(&dev.host_writes);
                for h in words.iter().filter_map(|w| host.get(w)) {
                    consider(h.seq, h.writer, "cpu-write", h.ns);
                }
            }
            for n in nodes {
                let e = lock(&n.q.engine);
                for r in words.iter().filter_map(|w| e.writes.get(w)) {
                    consider(
                        r.seq,
                        Writer::Engine {
                            queue: n.q.id,
                            site: r.site,
                        },
                        r.op,
                        r.ns,
                    );
                }
                for r in e
                    .ranges
                    .iter()
                    .filter(|r| r.start < end && r.end > *address)
                {
                    consider(
                        r.seq,
                        Writer::Engine {
                            queue: n.q.id,
                            site: r.site,
                        },
                        r.op,
                        r.ns,
                    );
                }
            }
            Some(match best {
                None => WriterReport::Never,
                Some((_, w, op, ns)) => writer_report(dev, nodes, w, op, ns),
            })
        }
        _ => None,
    }
}

/// The wait-for graph and what is known of each node.
struct Graph<'a> {
    blocked: &'a [Option<&'a WaitCondition>],
    edges: &'a [BTreeSet<usize>],
    on_cycle: &'a [bool],
    /// Classes known without the graph: the faulting queue's (its fault), and in a hang with
    /// no other cause, the queues whose dispatch made no progress (endless kernels).
    forced: &'a [Option<Classification>],
}

impl Graph<'_> {
    /// The class of queue `a` (D7): its own fault; running when not blocked; deadlock on a
    /// cycle; waiting-on-host without edges; else what its successors agree on (the host wins
    /// a disagreement, since it can still release the queue).
    fn resolve(
        &self,
        a: usize,
        class: &mut Vec<Option<Classification>>,
        visiting: &mut Vec<bool>,
    ) -> Classification {
        if let Some(c) = class[a] {
            return c;
        }
        let c = if let Some(c) = self.forced[a] {
            c
        } else if self.blocked[a].is_none() {
            Classification::Running
        } else if self.on_cycle[a] || visiting[a] {
            Classification::Deadlock
        } else if self.edges[a].is_empty() {
            Classification::WaitingOnHost
        } else {
            visiting[a] = true;
            let succ: Vec<Classification> = self.edges[a]
                .iter()
                .map(|&b| self.resolve(b, class, visiting))
                .collect();
            visiting[a] = false;
            if succ.iter().all(|c| *c == succ[0]) {
                succ[0]
            } else if succ.contains(&Classification::WaitingOnHost) {
                Classification::WaitingOnHost
            } else if succ.contains(&Classification::Running) {
                Classification::Running
            } else {
                succ.iter()
                    .copied()
                    .min()
                    .unwrap_or(Classification::WaitingOnHost)
            }
        };
        class[a] = Some(c);
        c
    }

    /// The class of every queue.
    fn resolve_all(&self) -> Vec<Classification> {
        let n = self.blocked.len();
        let mut class: Vec<Option<Classification>> = vec![None; n];
        let mut visiting = vec![false; n];
        (0..n)
            .map(|a| self.resolve(a, &mut class, &mut visiting))
            .collect()
    }
}

/// The overall classifications, in the order the report's `classification` picks (D7).
const ORDER: [Classification; 7] = [
    Classification::PageFault,
    Classification::KernelPanic,
    Classification::MalformedPacket,
    Classification::NeverSatisfiable,
    Classification::EndlessKernel,
    Classification::Deadlock,
    Classification::WaitingOnHost,
];

/// What the report says of the command a queue entry names: where, the stage and the wait (for
/// a stuck wait), the labels open at it and the last command completed before it.
struct Named<'a> {
    stage: Option<Stage>,
    at: Option<(Site, &'static str)>,
    cond: Option<&'a WaitCondition>,
    labels: Vec<Arc<str>>,
    last_completed: Option<(Site, &'static str)>,
}

/// The command the faulting queue's entry names: the faulting command, as it was at the fault
/// (D7), whatever the engine's stages did after it (the ME running past a bottom-of-pipe write
/// or a dispatch, the PFP reaching a later wait).
fn named_fault<'a>(snap: &'a Snapshot, f: &'a Fault) -> Named<'a> {
    let site = f.site();
    let (labels, last_completed) = match (
        &snap.fault_at,
        snap.dispatches.iter().find(|d| d.site == site),
    ) {
        (Some(at), _) if at.site == site => (at.labels.to_vec(), at.last_completed),
        (_, Some(d)) => (d.labels.to_vec(), d.last_completed),
        _ => (snap.labels.clone(), snap.last_completed),
    };
    // A never-satisfiable wait faulted instead of blocking: its entry is the stuck wait it is
    // (condition, current value, last writer).
    let (stage, cond) = match f {
        Fault::NeverSatisfiable {
            stage, condition, ..
        } => (Some(*stage), Some(condition)),
        _ => (None, None),
    };
    Named {
        stage,
        at: Some((site, f.op())),
        cond,
        labels,
        last_completed,
    }
}

/// The command a queue's entry names when it did not fault: the wait it is stuck in, else the
/// oldest dispatch for an endless kernel, else the ME's command.
fn named_state(snap: &Snapshot, endless: bool) -> Named<'_> {
    if let Some((stage, site, op, cond)) = &snap.blocked {
        return Named {
            stage: Some(*stage),
            at: Some((*site, op)),
            cond: Some(cond),
            labels: match stage {
                Stage::Pfp => snap.pfp_labels.clone(),
                Stage::Me => snap.labels.clone(),
            },
            last_completed: snap.blocked_last,
        };
    }
    if let Some(d) = snap.dispatches.first().filter(|_| endless) {
        // Like an endless-kernel fault, the entry names the dispatch and the labels open at it
        // (D7), not the ME's position past it.
        return Named {
            stage: None,
            at: Some((d.site, d.op)),
            cond: None,
            labels: d.labels.to_vec(),
            last_completed: d.last_completed,
        };
    }
    Named {
        stage: None,
        at: snap.me_at,
        cond: None,
        labels: snap.labels.clone(),
        last_completed: if snap.me_at.is_some() {
            snap.me_at_last
        } else {
            snap.last_completed
        },
    }
}

/// Builds the removal report (D7). `fault` is the faulting queue's id and the fault.
pub(crate) fn build_report(
    dev: &DeviceShared,
    reason: RemovalReason,
    fault: Option<&(u32, Fault)>,
) -> RemovalReport {
    let nodes: Vec<Node> = dev
        .live_queues()
        .into_iter()
        .map(|q| {
            let snap = lock(&q.engine).snapshot();
            Node { q, snap }
        })
        .collect();
    let n = nodes.len();
    // Base state of each queue. The faulting queue is described by its fault, not by what its
    // stages reached after it: it has no wait of its own in the graph.
    let is_fault_queue: Vec<bool> = nodes
        .iter()
        .map(|nd| fault.is_some_and(|(q, _)| *q == nd.q.id))
        .collect();
    let blocked: Vec<Option<&WaitCondition>> = nodes
        .iter()
        .zip(&is_fault_queue)
        .map(|(nd, faulted)| {
            nd.snap
                .blocked
                .as_ref()
                .map(|(_, _, _, c)| c)
                .filter(|c| c.is_external() && !faulted)
        })
        .collect();
    // Edges, with the first pending command behind each.
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    let mut satisfiers: Vec<Vec<SiteReport>> = vec![Vec::new(); n];
    for (a, cond) in blocked.iter().enumerate() {
        let Some(cond) = cond else { continue };
        for (b, nb) in nodes.iter().enumerate() {
            if let Some(p) = nb.snap.pending.iter().find(|p| satisfies(cond, p)) {
                edges[a].insert(b);
                let (site, op) = p.site_op();
                satisfiers[a].push(site_report(dev, &nodes, nb.q.id, site, op));
            }
        }
    }
    let reaches = |from: usize, to: usize| -> bool {
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = edges[from].iter().copied().collect();
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            if !std::mem::replace(&mut seen[x], true) {
                stack.extend(edges[x].iter().copied());
            }
        }
        false
    };
    let on_cycle: Vec<bool> = (0..n).map(|a| reaches(a, a)).collect();
    // Classes, resolved along the edges.
    let mut forced: Vec<Option<Classification>> = is_fault_queue
        .iter()
        .map(|faulted| fault.filter(|_| *faulted).map(|(_, f)| fault_class(f)))
        .collect();
    let reported: Vec<bool> = nodes
        .iter()
        .zip(&is_fault_queue)
        .map(|(nd, f)| !nd.snap.idle || *f)
        .collect();
    let resolve = |forced: &[Option<Classification>]| {
        Graph {
            blocked: &blocked,
            edges: &edges,
            on_cycle: &on_cycle,
            forced,
        }
        .resolve_all()
    };
    let mut class = resolve(&forced);
    let has_cause =
        |class: &[Classification]| (0..n).any(|i| reported[i] && ORDER.contains(&class[i]));
    let mut endless = vec![false; n];
    if reason == RemovalReason::Hung && fault.is_none() && !has_cause(&class) {
        // A hang with no fault while no queue is stuck but behind running queues (declared,
        // H1, or an engine's watchdog): the queues that still run a dispatch made no progress
        // for the watchdog timeout (not even one group completed): endless kernels. The queues
        // waiting on them take that class, as they would behind an endless-kernel fault.
        for i in 0..n {
            if reported[i]
                && class[i] == Classification::Running
                && nodes[i].snap.dispatches_in_flight > 0
            {
                endless[i] = true;
                forced[i] = Some(Classification::EndlessKernel);
            }
        }
        if endless.contains(&true) {
            class = resolve(&forced);
        }
    }
    // The cycle through the earliest-created queue on any cycle, by the shortest path.
    let mut cycle = Vec::new();
    if let Some(q0) = (0..n).find(|&a| on_cycle[a]) {
        let mut prev = vec![usize::MAX; n];
        let mut queue = VecDeque::new();
        let mut found = false;
        for &b in &edges[q0] {
            if b == q0 {
                found = true;
                break;
            }
            if prev[b] == usize::MAX {
                prev[b] = q0;
                queue.push_back(b);
            }
        }
        let mut last = q0;
        while !found {
            let Some(x) = queue.pop_front() else { break };
            for &b in &edges[x] {
                if b == q0 {
                    found = true;
                    last = x;
                    break;
                }
                if prev[b] == usize::MAX {
                    prev[b] = x;
                    queue.push_back(b);
                }
            }
        }
        let mut path = Vec::new();
        let mut x = last;
        while x != q0 {
            path.push(x);
            x = prev[x];
        }
        path.push(q0);
        path.reverse();
        cycle = path.iter().map(|&i| nodes[i].q.name.to_string()).collect();
    }
    // Queue reports.
    let mut queues = Vec::new();
    for (i, nd) in nodes.iter().enumerate() {
        if !reported[i] {
            continue;
        }
        // The labels and `last_completed` are those of the command the entry names, on every
        // driver (D7): at the faulting command, the stuck wait, the endless dispatch, else the
        // ME.
        let named = match fault.filter(|_| is_fault_queue[i]) {
            Some((_, f)) => named_fault(&nd.snap, f),
            None => named_state(&nd.snap, endless[i]),
        };
        let cond = named.cond;
        let target = cond.and_then(|c| cond_buffer(dev, c));
        queues.push(QueueReport {
            queue: nd.q.name.to_string(),
            queue_id: nd.q.id,
            class: class[i],
            at: named
                .at
                .map(|(s, op)| site_report(dev, &nodes, nd.q.id, s, op)),
            stage: named.stage.map(|s| {
                match s {
                    Stage::Me => "me",
                    Stage::Pfp => "pfp",
                }
                .to_string()
            }),
            waiting_for: cond.map(|c| c.label(dev)),
            fence: match cond {
                Some(WaitCondition::Fence { fence, .. }) => Some(fence.name().to_string()),
                _ => None,
            },
            buffer: target.as_ref().map(|(b, _)| b.clone()),
            offset: target.as_ref().map(|(_, o)| *o),
            address: match cond {
                Some(WaitCondition::Memory { address, .. }) => Some(*address),
                _ => None,
            },
            current: cond.and_then(|c| current_value(dev, c)),
            last_writer: cond.and_then(|c| last_writer(dev, &nodes, c)),
            last_completed: named
                .last_completed
                .map(|(s, op)| site_report(dev, &nodes, nd.q.id, s, op)),
            events: named.labels.iter().map(|l| l.to_string()).collect(),
            waits_on: edges[i]
                .iter()
                .map(|&b| nodes[b].q.name.to_string())
                .collect(),
            satisfiers: satisfiers[i].clone(),
            dispatches_in_flight: nd.snap.dispatches_in_flight,
        });
    }
    let mut classification = ORDER.into_iter().find(|c| {
        queues.iter().any(|q| q.class == *c) || fault.is_some_and(|(_, f)| fault_class(f) == *c)
    });
    if classification.is_none() && reason == RemovalReason::Hung && !queues.is_empty() {
        // A hung report is never unclassified.
        classification = Some(Classification::WaitingOnHost);
    }
    let fault = fault.map(|(q, f)| fault_report(dev, &nodes, *q, f));
    RemovalReport {
        reason,
        hresult: format!("0x{:08X}", reason.hresult()),
        classification,
        cycle,
        queues,
        fault,
    }
}

/// A fault report with no address, buffer or packet offset.
fn plain_fault(kind: Classification, at: SiteReport, message: String) -> FaultReport {
    FaultReport {
        kind,
        address: None,
        access: None,
        why: None,
        buffer: None,
        near: None,
        at,
        packet_offset: None,
        message,
    }
}

/// Where `address` is relative to the buffer `name` at `base` of `size` bytes, when outside it:
/// `8 bytes past the end of `buf` (size 256)`.
fn near_text(address: u64, base: u64, size: u64, name: &str) -> Option<String> {
    let end = base.saturating_add(size);
    let what = if address < base {
        format!("{} bytes before the start of", base - address)
    } else if address == end {
        "just past the end of".to_string()
    } else if address > end {
        format!("{} bytes past the end of", address - end)
    } else {
        return None;
    };
    Some(format!("{what} `{name}` (size {size})"))
}

fn fault_report(dev: &DeviceShared, nodes: &[Node], queue: u32, f: &Fault) -> FaultReport {
    let at = site_report(dev, nodes, queue, f.site(), f.op());
    let nearest = match f {
        Fault::PageFault { address, .. } => dev.memory.nearest(*address),
        _ => None,
    };
    match f {
        Fault::PageFault {
            address,
            access,
            why,
            ..
        } => FaultReport {
            kind: Classification::PageFault,
            address: Some(format!("{address:#x}")),
            access: Some(access.name().to_string()),
            why: Some(why.to_string()),
            buffer: nearest.as_ref().map(|b| b.name.to_string()),
            near: nearest
                .as_ref()
                .and_then(|b| near_text(*address, b.base, b.size, &b.name)),
            message: format!("{} {} {address:#x} ({why})", f.op(), access.name()),
            at,
            packet_offset: None,
        },
        Fault::MalformedPacket {
            offset, message, ..
        } => FaultReport {
            kind: Classification::MalformedPacket,
            address: None,
            access: None,
            why: None,
            buffer: None,
            near: None,
            at,
            packet_offset: Some(*offset),
            message: message.clone(),
        },
        Fault::NeverSatisfiable { condition, .. } => plain_fault(
            Classification::NeverSatisfiable,
            at,
            format!("{} can never hold", condition.label(dev)),
        ),
        Fault::KernelPanic {
            kernel,
            group,
            message,
            ..
        } => plain_fault(
            Classification::KernelPanic,
            at,
            format!("group {group} of kernel `{kernel}` panicked: {message}"),
        ),
        Fault::EndlessKernel { kernel, group, .. } => plain_fault(
            Classification::EndlessKernel,
            at,
            format!(
                "group {group} of kernel `{kernel}` ran longer than the watchdog timeout ({:?})",
                dev.desc.watchdog_timeout
            ),
        ),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::near_text;

    #[test]
    fn d7_a_page_fault_says_how_far_outside_its_nearest_buffer() {
        let (base, size) = (0x1000, 256);
        assert_eq!(
            near_text(base + 264, base, size, "buf").as_deref(),
            Some("8 bytes past the end of `buf` (size 256)")
        );
        assert_eq!(
            near_text(base + 256, base, size, "buf").as_deref(),
            Some("just past the end of `buf` (size 256)")
        );
        assert_eq!(
            near_text(base - 16, base, size, "buf").as_deref(),
            Some("16 bytes before the start of `buf` (size 256)")
        );
        // Inside the buffer (a write to upload memory): nothing to say.
        assert_eq!(near_text(base + 8, base, size, "buf"), None);
    }
}
