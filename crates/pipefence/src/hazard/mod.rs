//! Strict mode and hazard detection (D5; the model is `docs/memory-model.md`).
//!
//! `Model` holds the happens-before analysis (vector clocks in the style of FastTrack) and, in
//! strict mode, the visibility model (`strict::Visibility`). The engine, the drivers and the
//! host API call its hooks when the device has one; it never blocks and never reads time.
//!
//! Clock components: each queue has six, its PFP, its ME, and its dispatches' reads, dispatches'
//! writes, copies' reads and copies' writes. A task component counts a *prefix*:
//! `C[dispatch writes(q)] = n` means "the writes of the first `n` dispatches of `q` happen
//! before", which is exact here because every edge that orders tasks (a flush, a Q7 boundary, a
//! bottom-of-pipe write, a signal) covers all earlier tasks of its queue. Reads and writes are
//! apart because a bottom-of-pipe write without `L2_WRITEBACK` releases the tasks' reads but not
//! their writes. Each host thread has one component.
//!
//! Shadow state (the last write and the unordered reads of each word) is kept in address
//! segments (`ShadowMap`), so a kernel group's range costs one entry, not one per word.

mod report;
pub(crate) mod strict;

pub use report::{AccessKind, Hazard, HazardAccess, HazardAgent, HazardKind, MemoryModel, Missing};

use crate::command::{Flush, Width};
use crate::core::DeviceCore;
use crate::engine::Site;
use crate::sync::FenceCore;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Reports kept per device (more are counted, not kept).
const MAX_HAZARDS: usize = 256;
/// Releases remembered per queue for naming the missing synchronization.
const RELEASE_LOG: usize = 256;
/// Reads remembered per word.
const MAX_READS: usize = 8;

/// A vector clock: component -> count (missing components are 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Vc(Vec<u32>);

impl Vc {
    fn get(&self, c: u32) -> u32 {
        self.0.get(c as usize).copied().unwrap_or(0)
    }

    fn raise(&mut self, c: u32, v: u32) {
        let i = c as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        if self.0[i] < v {
            self.0[i] = v;
        }
    }

    fn join(&mut self, o: &Vc) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a = (*a).max(*b);
        }
    }
}

/// One access's place in time: component and count. It happens before clock `C` when
/// `v <= C[comp]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Epoch {
    comp: u32,
    v: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Comp {
    Pfp(u32),
    Me(u32),
    /// A queue's dispatches' reads and writes, and its copies' (prefix counts). Reads and
    /// writes are apart because a bottom-of-pipe write without `L2_WRITEBACK` releases the
    /// reads of the tasks before it (they are complete) but not their writes.
    DispRead(u32),
    DispWrite(u32),
    CopyRead(u32),
    CopyWrite(u32),
    Host(u64),
}

/// A queue's task components: dispatch reads, dispatch writes, copy reads, copy writes.
#[derive(Debug, Clone, Copy)]
struct TaskComps {
    dr: u32,
    dw: u32,
    cr: u32,
    cw: u32,
}

impl TaskComps {
    /// Raises `c` so that the first `d` dispatches and `k` copies happen before it: their
    /// reads, and with `writes` their writes too.
    fn raise(&self, c: &mut Vc, d: u32, k: u32, writes: bool) {
        c.raise(self.dr, d);
        c.raise(self.cr, k);
        if writes {
            c.raise(self.dw, d);
            c.raise(self.cw, k);
        }
    }
}

/// Who performs an access, internally.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum AgentRec {
    Task { queue: u32, site: Site },
    Me { queue: u32, site: Site },
    Pfp { queue: u32, site: Site },
    Host { id: u64, line: Option<u32> },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AccRec {
    agent: AgentRec,
    op: &'static str,
    kernel: Option<Arc<str>>,
    kind: AccessKind,
}

type AccId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WKind {
    Data,
    Value,
    Atomic,
}

#[derive(Debug, Clone)]
struct LastWrite {
    ep: Epoch,
    kind: WKind,
    acc: AccId,
    /// For value writes: what a wait satisfied by it acquires.
    rel: Option<Arc<Vc>>,
    /// The writer's queue and, for tasks, which ones (for naming the missing link).
    from: WriterPos,
    seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterPos {
    /// Task `index` (dispatch or copy) of queue `queue`.
    Task {
        queue: u32,
        copy: bool,
        index: u32,
    },
    /// The ME of `queue` at ME epoch `me`.
    Cp {
        queue: u32,
    },
    Host,
}

#[derive(Debug, Clone, Default)]
struct Shadow {
    w: Option<LastWrite>,
    /// Data reads not ordered before each other since the last write.
    reads: SmallVec<[(Epoch, AccId, Option<u32>); 2]>,
    /// Per engine: its tasks' last read of the word (queue, invalidate generation, sequence).
    engine_reads: SmallVec<[(u32, u32, u64); 1]>,
}

/// Shadow state as segments: `start -> (end, shadow)`, disjoint, each a range of words with
/// the same history (a built-in kernel's group range stays one segment).
#[derive(Debug, Default)]
struct ShadowMap {
    segs: BTreeMap<u64, (u64, Shadow)>,
}

impl ShadowMap {
    /// Makes `a` a segment boundary.
    fn split(&mut self, a: u64) {
        let Some((&s, (e, _))) = self.segs.range(..a).next_back() else {
            return;
        };
        if *e <= a {
            return;
        }
        let Some((e, sh)) = self.segs.get_mut(&s) else {
            return;
        };
        let tail = (*e, sh.clone());
        *e = a;
        self.segs.insert(a, tail);
    }

    /// Calls `f` on each segment of `[start, end)` in address order, creating empty segments
    /// for words never accessed.
    fn each(&mut self, start: u64, end: u64, mut f: impl FnMut(u64, u64, &mut Shadow)) {
        if start >= end {
            return;
        }
        self.split(start);
        self.split(end);
        let keys: SmallVec<[u64; 4]> = self.segs.range(start..end).map(|(k, _)| *k).collect();
        let mut cur = start;
        for k in keys {
            if k > cur {
                let (_, sh) = self.segs.entry(cur).or_insert((k, Shadow::default()));
                f(cur, k, sh);
            }
            if let Some((e, sh)) = self.segs.get_mut(&k) {
                f(k, *e, sh);
                cur = *e;
            }
        }
        if cur < end {
            let (_, sh) = self.segs.entry(cur).or_insert((end, Shadow::default()));
            f(cur, end, sh);
        }
    }
}

/// The clock of an agent making an access, and its own epoch.
struct Actor<'a> {
    clock: &'a Vc,
    me: Epoch,
    /// A task's other epoch (its writes' for a read, its reads' for a write): the same task.
    alt: Option<Epoch>,
    acc: AccId,
    /// The reading engine, for tasks (stale-cache tracking) and the queue for the
    /// same-queue rule.
    queue: Option<u32>,
    task: bool,
}

impl Actor<'_> {
    fn ordered(&self, e: Epoch) -> bool {
        e == self.me || Some(e) == self.alt || e.v <= self.clock.get(e.comp)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RelKind {
    Bop { writeback: bool, volatile: bool },
    Top,
}

#[derive(Debug, Clone)]
struct RelRec {
    me_epoch: u32,
    disp: u32,
    copy: u32,
    kind: RelKind,
    acc: AccId,
}

#[derive(Debug, Clone)]
struct Task {
    clock: Arc<Vc>,
    /// Its epochs for reads and for writes.
    read_ep: Epoch,
    write_ep: Epoch,
    copy: bool,
    index: u32,
    read: AccId,
    write: AccId,
    atomic: AccId,
}

#[derive(Debug, Clone)]
struct PfpRace {
    packet: u64,
    reader: AccId,
    writer: AccId,
    writer_ep: Epoch,
    span: Span,
}

impl QState {
    /// The PFP acquires `c`; the ME joins it when it reaches packet `pushed` (queue order).
    fn pfp_acquire(&mut self, c: &Vc, pushed: u64) {
        self.p.join(c);
        self.pending.push_back((pushed, self.p.clone()));
    }

    /// Advances the ME's own epoch in its order and release clocks.
    fn tick_me(&mut self, me: u32) {
        let v = self.o.get(me) + 1;
        self.o.raise(me, v);
        self.r.raise(me, v);
    }
}

#[derive(Debug, Default)]
struct QState {
    /// The PFP clock.
    p: Vc,
    /// The ME's order clock.
    o: Vc,
    /// The ME's release clock.
    r: Vc,
    /// Clocks the PFP acquired, joined into `o` and `r` when the ME reaches packet `.0`.
    pending: VecDeque<(u64, Vc)>,
    /// Host clocks released with submissions, by sequence number.
    subs: FxHashMap<u64, Vc>,
    tasks: FxHashMap<(bool, u32), Task>,
    /// Release clocks of bottom-of-pipe writes and signals, in retire order.
    retire: VecDeque<(Vc, Option<(u32, u32)>)>,
    releases: VecDeque<RelRec>,
    pfp_races: Vec<PfpRace>,
    /// The PFP epoch of the indirect-argument read of packet `.0`.
    pfp_reads: VecDeque<(u64, u32)>,
    /// ME waits satisfied while PFP races are pending: (access, what it acquired). All of them
    /// precede the packets the ME has not reached.
    me_waits: Vec<(AccId, Arc<Vc>)>,
    /// Bumped by each invalidate of this engine's read cache (older task reads no longer
    /// count for stale-cache reports).
    inval: u32,
    /// Tasks launched so far (dispatches, copies).
    disp: u32,
    copy: u32,
}

/// The hazard analysis and, in strict mode, the visibility model of one device.
#[derive(Debug)]
pub(crate) struct Model {
    comps: FxHashMap<Comp, u32>,
    accs: Vec<AccRec>,
    acc_index: FxHashMap<AccRec, AccId>,
    words: ShadowMap,
    queues: FxHashMap<u32, QState>,
    hosts: FxHashMap<u64, Vc>,
    fences: FxHashMap<usize, Arc<Vc>>,
    seq: u64,
    hazards: BTreeMap<HazardKey, (u64, u64, Option<Observed>)>,
    dropped: u64,
    pub(crate) vis: Option<strict::Visibility>,
}

/// What a strict schedule's stale-cache read returned: `None` the current value, else (old,
/// current, address) of the first stale word. (`None` outside strict mode.)
type Observed = Option<(u32, u32, u64)>;

/// A report's identity: kind, first and second access, what is missing.
type HazardKey = (HazardKind, AccId, AccId, MissingRec);

/// [`Missing`] with access ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum MissingRec {
    NoWriteback { release: AccId, volatile: bool },
    TopOfPipe { release: AccId },
    NoFlush,
    PfpBeforeWait { wait: AccId },
    NoInvalidate,
    Nothing,
}

impl PartialOrd for AccRec {
    fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
        None
    }
}

thread_local! {
    static SOURCE_LINE: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// Labels the calling host thread's following pipefence calls with a source line, for hazard
/// reports (the scenario runner sets the line of each action).
pub fn set_source_line(line: Option<u32>) {
    SOURCE_LINE.with(|l| l.set(line));
}

fn source_line() -> Option<u32> {
    SOURCE_LINE.with(|l| l.get())
}

/// The site an access is recorded under: every execution of a list command is one access
/// (submission 0), so a program that runs a list many times keeps one record per command.
fn one_site(site: Site) -> Site {
    if site.list.is_some() {
        Site {
            submission: 0,
            ..site
        }
    } else {
        site
    }
}

/// A host thread with clock `h` (its own component `c`) making access `acc`.
fn host_actor(h: &Vc, c: u32, acc: AccId) -> Actor<'_> {
    Actor {
        clock: h,
        me: Epoch {
            comp: c,
            v: h.get(c),
        },
        alt: None,
        acc,
        queue: None,
        task: false,
    }
}

/// A fence's key in the model (its address; the model outlives no fence it acts on).
fn fence_key(f: &FenceCore) -> usize {
    std::ptr::from_ref(f) as usize
}

/// Whether a flush set drops the engine's read cache (either invalidate flag; section 3).
fn invalidates(flush: Flush) -> bool {
    flush.contains(Flush::L1_INVALIDATE) || flush.contains(Flush::L2_INVALIDATE)
}

/// A byte range `[start, end)`.
type Span = (u64, u64);

/// A read a write races with: where, the read's epoch and access, the reader's queue.
type ReadRace = (Span, Epoch, AccId, Option<u32>);

fn span_of(address: u64, width: Width) -> Span {
    let a = address & !3;
    (a, a + width.bytes())
}

impl Model {
    pub(crate) fn new(mode: MemoryModel, seed: u64) -> Self {
        Model {
            comps: FxHashMap::default(),
            accs: Vec::new(),
            acc_index: FxHashMap::default(),
            words: ShadowMap::default(),
            queues: FxHashMap::default(),
            hosts: FxHashMap::default(),
            fences: FxHashMap::default(),
            seq: 0,
            hazards: BTreeMap::new(),
            dropped: 0,
            vis: (mode == MemoryModel::Strict).then(|| strict::Visibility::new(seed)),
        }
    }

    fn comp(&mut self, c: Comp) -> u32 {
        let n = self.comps.len() as u32;
        *self.comps.entry(c).or_insert(n)
    }

    fn acc(&mut self, r: AccRec) -> AccId {
        if let Some(id) = self.acc_index.get(&r) {
            return *id;
        }
        let id = self.accs.len() as AccId;
        self.accs.push(r.clone());
        self.acc_index.insert(r, id);
        id
    }

    fn task_comps(&mut self, queue: u32) -> TaskComps {
        TaskComps {
            dr: self.comp(Comp::DispRead(queue)),
            dw: self.comp(Comp::DispWrite(queue)),
            cr: self.comp(Comp::CopyRead(queue)),
            cw: self.comp(Comp::CopyWrite(queue)),
        }
    }

    fn q(&mut self, queue: u32) -> &mut QState {
        if !self.queues.contains_key(&queue) {
            let me = self.comp(Comp::Me(queue));
            let pfp = self.comp(Comp::Pfp(queue));
            self.task_comps(queue);
            let mut s = QState::default();
            for c in [&mut s.p, &mut s.o, &mut s.r] {
                c.raise(me, 1);
                c.raise(pfp, 0);
            }
            self.queues.insert(queue, s);
        }
        self.queues.get_mut(&queue).expect("inserted above")
    }

    fn host_clock(&mut self) -> (u64, u32) {
        let id = crate::host::current_id();
        let c = self.comp(Comp::Host(id));
        let h = self.hosts.entry(id).or_default();
        h.raise(c, 1);
        (id, c)
    }

    fn tick_host(&mut self, id: u64, c: u32) {
        if let Some(h) = self.hosts.get_mut(&id) {
            let v = h.get(c) + 1;
            h.raise(c, v);
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    // ----------------------------------------------------------------------------------------
    // Recording hazards

    fn report(&mut self, kind: HazardKind, first: AccId, second: AccId, m: MissingRec, r: Span) {
        self.report_obs(kind, first, second, m, r, None);
    }

    fn report_obs(
        &mut self,
        kind: HazardKind,
        first: AccId,
        second: AccId,
        m: MissingRec,
        (lo, hi): Span,
        observed: Option<Observed>,
    ) {
        // Two unordered writes are one report whichever landed first.
        let (first, second) = if kind == HazardKind::WriteWrite && first > second {
            (second, first)
        } else {
            (first, second)
        };
        let key = (kind, first, second, m);
        if let Some((l, h, o)) = self.hazards.get_mut(&key) {
            *l = (*l).min(lo);
            *h = (*h).max(hi);
            // A stale value seen in any part of the range is worth saying.
            if matches!(o, Some(None)) && matches!(observed, Some(Some(_))) {
                *o = observed;
            }
            return;
        }
        if self.hazards.len() >= MAX_HAZARDS {
            self.dropped += 1;
            return;
        }
        self.hazards.insert(key, (lo, hi, observed));
    }

    /// Names what is missing between writer `w` (at `pos`) and an access by `x`.
    fn missing(&self, pos: WriterPos, x_queue: Option<u32>, x_clock: &Vc) -> MissingRec {
        let (wq, copy, index) = match pos {
            WriterPos::Task { queue, copy, index } => (queue, copy, Some(index)),
            WriterPos::Cp { queue } => (queue, false, None),
            WriterPos::Host => return MissingRec::Nothing,
        };
        if x_queue == Some(wq) {
            return MissingRec::NoFlush;
        }
        let Some(s) = self.queues.get(&wq) else {
            return MissingRec::Nothing;
        };
        let me = self.comps.get(&Comp::Me(wq)).copied().unwrap_or(u32::MAX);
        let acquired = x_clock.get(me);
        for rel in &s.releases {
            let after_writer = match index {
                Some(i) if copy => rel.copy > i,
                Some(i) => rel.disp > i,
                None => true,
            };
            if !after_writer || rel.me_epoch > acquired {
                continue;
            }
            return match rel.kind {
                RelKind::Bop {
                    writeback: false,
                    volatile,
                } => MissingRec::NoWriteback {
                    release: rel.acc,
                    volatile,
                },
                RelKind::Top if index.is_some() => MissingRec::TopOfPipe { release: rel.acc },
                _ => continue,
            };
        }
        MissingRec::Nothing
    }

    // ----------------------------------------------------------------------------------------
    // The access rules (docs/memory-model.md 5.1)

    /// A data read of `[start, end)` by `x`.
    fn data_read(&mut self, x: &Actor<'_>, start: u64, end: u64) {
        let seq = self.next_seq();
        // The reading engine's invalidate generation (stale-cache tracking, tasks only).
        let engine = match (x.task, x.queue) {
            (true, Some(q)) => Some((q, self.q(q).inval)),
            _ => None,
        };
        let mut racy: SmallVec<[(Span, Epoch, AccId, WriterPos); 2]> = SmallVec::new();
        let mut stale: SmallVec<[(Span, AccId); 2]> = SmallVec::new();
        self.words.each(start, end, |lo, hi, sh| {
            if let Some(w) = &sh.w {
                if !x.ordered(w.ep) {
                    racy.push(((lo, hi), w.ep, w.acc, w.from));
                } else if let Some((q, inval)) = engine {
                    let own = matches!(w.from, WriterPos::Task { queue, .. } if queue == q);
                    let before = sh
                        .engine_reads
                        .iter()
                        .any(|(eq, g, s)| *eq == q && *g == inval && *s < w.seq);
                    if !own && before {
                        stale.push(((lo, hi), w.acc));
                    }
                }
            }
            if let Some((q, inval)) = engine {
                match sh.engine_reads.iter_mut().find(|(eq, _, _)| *eq == q) {
                    Some(e) => *e = (q, inval, seq),
                    None => sh.engine_reads.push((q, inval, seq)),
                }
            }
            sh.reads.retain(|(e, _, _)| !x.ordered(*e));
            if sh.reads.len() < MAX_READS {
                sh.reads.push((x.me, x.acc, x.queue));
            }
        });
        let pfp = matches!(self.accs[x.acc as usize].agent, AgentRec::Pfp { .. });
        for (span, ep, acc, from) in racy {
            let m = self.missing(from, x.queue, x.clock);
            if pfp && m != MissingRec::NoFlush {
                self.defer_pfp(x.queue, x.me, x.acc, acc, ep, span);
            } else {
                self.report(HazardKind::UnreleasedRead, acc, x.acc, m, span);
            }
        }
        if let Some((q, _)) = engine {
            for (span, wacc) in stale {
                let observed = self.vis.as_ref().map(|v| v.last_stale(q, span));
                self.report_obs(
                    HazardKind::StaleCache,
                    wacc,
                    x.acc,
                    MissingRec::NoInvalidate,
                    span,
                    observed,
                );
            }
        }
    }

    /// A race between the PFP read with epoch `read_ep` (by `reader` on `queue`) and a write:
    /// decided when the ME reaches the read's packet (was a wait there to guard it?).
    fn defer_pfp(
        &mut self,
        queue: Option<u32>,
        read_ep: Epoch,
        reader: AccId,
        writer: AccId,
        writer_ep: Epoch,
        span: Span,
    ) {
        let Some(q) = queue else { return };
        let packet = self
            .q(q)
            .pfp_reads
            .iter()
            .find(|(_, e)| *e == read_ep.v)
            .map(|p| p.0);
        let Some(packet) = packet else {
            // The ME already ran the dispatch: nothing can guard the read any more.
            self.report(
                HazardKind::UnreleasedRead,
                writer,
                reader,
                MissingRec::Nothing,
                span,
            );
            return;
        };
        let s = self.q(q);
        if let Some(r) = s
            .pfp_races
            .iter_mut()
            .find(|r| r.packet == packet && r.writer == writer && r.reader == reader)
        {
            r.span = (r.span.0.min(span.0), r.span.1.max(span.1));
            return;
        }
        s.pfp_races.push(PfpRace {
            packet,
            reader,
            writer,
            writer_ep,
            span,
        });
    }

    /// A write of `[start, end)` by `x`.
    fn write(
        &mut self,
        x: &Actor<'_>,
        (start, end): Span,
        kind: WKind,
        rel: Option<Arc<Vc>>,
        pos: WriterPos,
    ) {
        let seq = self.next_seq();
        let mut ww: SmallVec<[(Span, AccId, WriterPos); 2]> = SmallVec::new();
        let mut wr: SmallVec<[ReadRace; 2]> = SmallVec::new();
        self.words.each(start, end, |lo, hi, sh| {
            if let Some(w) = &sh.w {
                let sync_pair = matches!(
                    (w.kind, kind),
                    (WKind::Atomic, WKind::Atomic)
                        | (WKind::Atomic, WKind::Value)
                        | (WKind::Value, WKind::Atomic)
                );
                if !sync_pair && !x.ordered(w.ep) {
                    ww.push(((lo, hi), w.acc, w.from));
                }
            }
            for (e, acc, rq) in &sh.reads {
                if !x.ordered(*e) {
                    wr.push(((lo, hi), *e, *acc, *rq));
                }
            }
            sh.reads.clear();
            sh.w = Some(LastWrite {
                ep: x.me,
                kind,
                acc: x.acc,
                rel: rel.clone(),
                from: pos,
                seq,
            });
        });
        for (span, acc, from) in ww {
            let m = self.missing(from, x.queue, x.clock);
            self.report(HazardKind::WriteWrite, acc, x.acc, m, span);
        }
        for (span, e, acc, rq) in wr {
            // A write landing on data an unordered reader read.
            let pfp = matches!(self.accs[acc as usize].agent, AgentRec::Pfp { .. });
            if pfp && rq.is_some() && rq != x.queue {
                self.defer_pfp(rq, e, acc, x.acc, x.me, span);
            } else {
                // Reported as the same pair a read after the write would give: the write,
                // then the read it was not released to.
                let m = match self.reader_clock(e, acc) {
                    Some(c) => self.missing(pos, rq, &c),
                    None => match (pos, rq) {
                        (WriterPos::Task { queue, .. } | WriterPos::Cp { queue }, Some(r))
                            if r == queue =>
                        {
                            MissingRec::NoFlush
                        }
                        _ => MissingRec::Nothing,
                    },
                };
                self.report(HazardKind::UnreleasedRead, x.acc, acc, m, span);
            }
        }
    }

    /// The clock an earlier read was made with, when it is still known: a dispatch's clock
    /// at launch, or the host thread's clock now (it only grows).
    fn reader_clock(&self, e: Epoch, acc: AccId) -> Option<Vc> {
        match &self.accs[acc as usize].agent {
            AgentRec::Task { queue, .. } => {
                if self.comps.get(&Comp::DispRead(*queue)) != Some(&e.comp) {
                    return None;
                }
                let s = self.queues.get(queue)?;
                let t = s.tasks.get(&(false, e.v.checked_sub(1)?))?;
                Some((*t.clock).clone())
            }
            AgentRec::Host { id, .. } => self.hosts.get(id).cloned(),
            _ => None,
        }
    }

    /// A satisfied wait reads `[start, end)`: a data write not ordered before it is reported;
    /// the release clocks of the value writes it read are returned for the waiter to acquire.
    fn wait_read(&mut self, x: &Actor<'_>, (start, end): Span) -> Vc {
        let mut acquired = Vc::default();
        let mut racy: SmallVec<[(Span, AccId, WriterPos); 1]> = SmallVec::new();
        self.words.each(start, end, |lo, hi, sh| {
            if let Some(w) = &sh.w {
                match w.kind {
                    WKind::Value => {
                        if let Some(r) = &w.rel {
                            acquired.join(r);
                        }
                    }
                    WKind::Atomic => {}
                    WKind::Data => {
                        if !x.ordered(w.ep) {
                            racy.push(((lo, hi), w.acc, w.from));
                        }
                    }
                }
            }
        });
        for (span, acc, from) in racy {
            let m = self.missing(from, x.queue, x.clock);
            self.report(HazardKind::UnreleasedRead, acc, x.acc, m, span);
        }
        acquired
    }

    // ----------------------------------------------------------------------------------------
    // Engine hooks

    fn queue_acc(
        &mut self,
        queue: u32,
        stage: u8,
        site: Site,
        op: &'static str,
        kind: AccessKind,
    ) -> AccId {
        let agent = match stage {
            0 => AgentRec::Pfp {
                queue,
                site: one_site(site),
            },
            1 => AgentRec::Me {
                queue,
                site: one_site(site),
            },
            _ => AgentRec::Task {
                queue,
                site: one_site(site),
            },
        };
        self.acc(AccRec {
            agent,
            op,
            kernel: None,
            kind,
        })
    }

    /// The PFP starts submission `seq` (any kind): it acquires what the host released with it.
    pub(crate) fn submission_start(&mut self, queue: u32, seq: u64, pushed: u64) {
        let s = self.q(queue);
        if let Some(h) = s.subs.remove(&seq) {
            s.pfp_acquire(&h, pushed);
        }
    }

    /// A Q7 boundary: the previous call's tasks join the ME's order clock; the PFP joins it.
    /// Strict: their writes become CP-visible and the engine's read cache is dropped.
    pub(crate) fn q7_boundary(&mut self, queue: u32) {
        self.tasks_done(queue, false);
        if let Some(v) = self.vis.as_mut() {
            v.mark_cp_visible(queue);
        }
        self.invalidate(queue);
    }

    /// Every task launched on `queue` so far has finished and the PFP was held (a flush or a
    /// Q7 boundary): the tasks join the ME's order clock and the PFP joins it; their reads join
    /// the release clock, their writes too with `writeback`. Returns the task counts.
    fn tasks_done(&mut self, queue: u32, writeback: bool) -> (u32, u32) {
        let tc = self.task_comps(queue);
        let s = self.q(queue);
        let (d, c) = (s.disp, s.copy);
        tc.raise(&mut s.o, d, c, true);
        tc.raise(&mut s.r, d, c, writeback);
        let o = s.o.clone();
        s.p.join(&o);
        s.tasks.clear();
        (d, c)
    }

    /// Drops `queue`'s engine read cache: older task reads no longer count for stale-cache.
    fn invalidate(&mut self, queue: u32) {
        self.q(queue).inval += 1;
        if let Some(v) = self.vis.as_mut() {
            v.invalidate(queue);
        }
    }

    /// Pops the release clock of the retiring bottom-of-pipe write or signal; with a
    /// write-back it joins the release clock and (strict) writes the tasks' data back first.
    /// Returns the clock and whether it wrote back.
    fn retired(&mut self, queue: u32) -> (Vc, bool) {
        let (clock, upto) = self.q(queue).retire.pop_front().unwrap_or_default();
        if let Some((d, c)) = upto {
            self.q(queue).r.join(&clock);
            if let Some(v) = self.vis.as_mut() {
                v.write_back_tasks(queue, d, c);
            }
        }
        (clock, upto.is_some())
    }

    /// A queue wait is satisfied at the PFP: it acquires `release`, the release of the signal
    /// that satisfied its ticket (F5), not of whatever signal wrote the fence's current value.
    /// `None` (a ticket the fence's release or the device's removal satisfied) acquires nothing.
    pub(crate) fn queue_wait_acquire(
        &mut self,
        queue: u32,
        release: Option<&crate::sync::Release>,
        pushed: u64,
    ) {
        let f = release.and_then(|r| r.clone().downcast::<Vc>().ok());
        if let Some(f) = f {
            self.q(queue).pfp_acquire(&f, pushed);
        }
        self.invalidate(queue);
    }

    /// A memory-value wait is satisfied (on the PFP when `pfp`, else on the ME).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wait_acquire(
        &mut self,
        queue: u32,
        pfp: bool,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
        pushed: u64,
    ) {
        let acc = self.queue_acc(queue, if pfp { 0 } else { 1 }, site, op, AccessKind::Wait);
        let me_c = self.comp(Comp::Me(queue));
        let pfp_c = self.comp(Comp::Pfp(queue));
        let s = self.q(queue);
        let (clock, me) = if pfp {
            (
                s.p.clone(),
                Epoch {
                    comp: pfp_c,
                    v: s.p.get(pfp_c),
                },
            )
        } else {
            (
                s.o.clone(),
                Epoch {
                    comp: me_c,
                    v: s.o.get(me_c),
                },
            )
        };
        let x = Actor {
            alt: None,
            clock: &clock,
            me,
            acc,
            queue: Some(queue),
            task: false,
        };
        let acquired = self.wait_read(&x, span_of(address, width));
        let s = self.q(queue);
        if pfp {
            s.pfp_acquire(&acquired, pushed);
        } else {
            s.o.join(&acquired);
            s.r.join(&acquired);
            if !s.pfp_races.is_empty() {
                // The ME is at the packet after the last one it popped.
                s.me_waits.push((acc, Arc::new(acquired)));
            }
        }
    }

    /// The PFP reads a `dispatch_indirect`'s arguments for packet `packet`.
    pub(crate) fn pfp_read(&mut self, queue: u32, site: Site, address: u64, packet: u64) {
        let acc = self.queue_acc(queue, 0, site, "dispatch-indirect", AccessKind::Read);
        let pfp_c = self.comp(Comp::Pfp(queue));
        let s = self.q(queue);
        let v = s.p.get(pfp_c) + 1;
        s.p.raise(pfp_c, v);
        s.pfp_reads.push_back((packet, v));
        let clock = s.p.clone();
        let x = Actor {
            alt: None,
            clock: &clock,
            me: Epoch { comp: pfp_c, v },
            acc,
            queue: Some(queue),
            task: false,
        };
        self.data_read(&x, address & !3, (address & !3) + 4);
    }

    /// The ME pops packet `packet`: what the PFP acquired up to it joins the ME's clocks.
    pub(crate) fn me_packet(&mut self, queue: u32, packet: u64) {
        let pfp_c = self.comp(Comp::Pfp(queue));
        let s = self.q(queue);
        while s.pending.front().is_some_and(|(k, _)| *k <= packet) {
            if let Some((_, c)) = s.pending.pop_front() {
                s.o.join(&c);
                s.r.join(&c);
            }
        }
        while s.pfp_reads.front().is_some_and(|(k, _)| *k <= packet) {
            if let Some((_, e)) = s.pfp_reads.pop_front() {
                s.o.raise(pfp_c, e);
                s.r.raise(pfp_c, e);
            }
        }
        if s.pfp_races.iter().any(|r| r.packet <= packet) {
            let (due, keep): (Vec<_>, Vec<_>) =
                s.pfp_races.drain(..).partition(|r| r.packet <= packet);
            s.pfp_races = keep;
            let waits = std::mem::take(&mut s.me_waits);
            for r in due {
                let wait = waits
                    .iter()
                    .find(|(_, c)| r.writer_ep.v <= c.get(r.writer_ep.comp))
                    .map(|w| w.0);
                let (kind, m) = match wait {
                    Some(w) => (
                        HazardKind::PfpReadBeforeWait,
                        MissingRec::PfpBeforeWait { wait: w },
                    ),
                    None => (HazardKind::UnreleasedRead, MissingRec::Nothing),
                };
                self.report(kind, r.writer, r.reader, m, r.span);
            }
            let s = self.q(queue);
            if !s.pfp_races.is_empty() {
                s.me_waits = waits;
            }
        }
    }

    /// The ME writes a value at once (top-of-pipe, immediate DEFAULT / MARKER_IN).
    pub(crate) fn me_value_write(
        &mut self,
        queue: u32,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
    ) {
        let rel = Arc::new(self.q(queue).r.clone());
        self.value_write_at(queue, site, op, address, width, rel, RelKind::Top);
    }

    /// A bottom-of-pipe write or signal enters the retire queue: its release clock is fixed now.
    pub(crate) fn retire_pushed(&mut self, queue: u32, full: bool) {
        let tc = self.task_comps(queue);
        let s = self.q(queue);
        let (d, c) = (s.disp, s.copy);
        let mut clock = if full { s.o.clone() } else { s.r.clone() };
        // It lands once the earlier tasks finished: their reads are released either way, their
        // writes only with a write-back.
        tc.raise(&mut clock, d, c, full);
        s.retire.push_back((clock, full.then_some((d, c))));
    }

    /// A bottom-of-pipe write (or MARKER_OUT) retires.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bop_write(
        &mut self,
        queue: u32,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
        flush: Flush,
    ) {
        let (clock, writeback) = self.retired(queue);
        if invalidates(flush) {
            self.invalidate(queue);
        }
        let volatile = flush.contains(Flush::L1_VOLATILE) || flush.contains(Flush::L2_VOLATILE);
        self.value_write_at(
            queue,
            site,
            op,
            address,
            width,
            Arc::new(clock),
            RelKind::Bop {
                writeback,
                volatile,
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn value_write_at(
        &mut self,
        queue: u32,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
        rel: Arc<Vc>,
        kind: RelKind,
    ) {
        let acc = self.queue_acc(queue, 1, site, op, AccessKind::ValueWrite);
        let me_c = self.comp(Comp::Me(queue));
        let s = self.q(queue);
        let clock = s.o.clone();
        let me = Epoch {
            comp: me_c,
            v: clock.get(me_c),
        };
        let (d, c) = (s.disp, s.copy);
        let rel_acc = self.queue_acc(queue, 1, site, op, AccessKind::Release);
        let s = self.q(queue);
        if s.releases.len() >= RELEASE_LOG {
            s.releases.pop_front();
        }
        s.releases.push_back(RelRec {
            me_epoch: me.v,
            disp: d,
            copy: c,
            kind,
            acc: rel_acc,
        });
        let x = Actor {
            alt: None,
            clock: &clock,
            me,
            acc,
            queue: Some(queue),
            task: false,
        };
        let span = span_of(address, width);
        self.write(&x, span, WKind::Value, Some(rel), WriterPos::Cp { queue });
        if let Some(v) = self.vis.as_mut() {
            v.cp_write(queue, address, width);
        }
        let s = self.q(queue);
        s.o.raise(me_c, me.v + 1);
        s.r.raise(me_c, me.v + 1);
    }

    /// A queue signal retires: the fence's release clock is everything before it. Returns it,
    /// for the signal to carry to the tickets it satisfies.
    pub(crate) fn signal(&mut self, queue: u32, fence: &FenceCore) -> crate::sync::Release {
        let (clock, _) = self.retired(queue);
        let me_c = self.comp(Comp::Me(queue));
        self.q(queue).tick_me(me_c);
        let clock = Arc::new(clock);
        self.fences.insert(fence_key(fence), clock.clone());
        clock
    }

    /// A `flush_pipeline` completes on the ME.
    pub(crate) fn flush_done(&mut self, queue: u32, flush: Flush) {
        let wb = flush.contains(Flush::L2_WRITEBACK);
        let (d, c) = self.tasks_done(queue, wb);
        if let Some(v) = self.vis.as_mut() {
            if wb {
                v.write_back_tasks(queue, d, c);
            }
            v.mark_cp_visible(queue);
        }
        if invalidates(flush) {
            self.invalidate(queue);
        }
    }

    /// A dispatch with at least one group is launched: task `index`, forked from the ME's
    /// order clock. Built-ins record their declared ranges now.
    pub(crate) fn launch(
        &mut self,
        queue: u32,
        index: u64,
        site: Site,
        op: &'static str,
        kernel: &crate::engine::Kernel,
        groups: u32,
    ) {
        let tc = self.task_comps(queue);
        let me_c = self.comp(Comp::Me(queue));
        let s = self.q(queue);
        s.disp = s.disp.max(index as u32 + 1);
        let clock = Arc::new(s.o.clone());
        // A fork: the ME's later accesses get a new epoch, so they are not taken to happen
        // before the task (which only knows the ME up to here).
        s.tick_me(me_c);
        let name: Arc<str> = kernel.name().into();
        let mk = |kind| AccRec {
            agent: AgentRec::Task {
                queue,
                site: one_site(site),
            },
            op,
            kernel: Some(name.clone()),
            kind,
        };
        let v = index as u32 + 1;
        let task = Task {
            clock,
            read_ep: Epoch { comp: tc.dr, v },
            write_ep: Epoch { comp: tc.dw, v },
            copy: false,
            index: index as u32,
            read: self.acc(mk(AccessKind::Read)),
            write: self.acc(mk(AccessKind::Write)),
            atomic: self.acc(mk(AccessKind::Atomic)),
        };
        self.q(queue)
            .tasks
            .insert((false, index as u32), task.clone());
        if self.vis.is_none() {
            self.builtin_ranges(queue, &task, kernel, 0..groups);
        }
    }

    /// Strict mode: group `group` of built-in task `index` ran; its declared ranges are
    /// checked now.
    pub(crate) fn group_accesses(
        &mut self,
        queue: u32,
        index: u64,
        kernel: &crate::engine::Kernel,
        group: u32,
    ) {
        let key = (false, index as u32);
        if let Some(t) = self
            .queues
            .get(&queue)
            .and_then(|s| s.tasks.get(&key))
            .cloned()
        {
            self.builtin_ranges(queue, &t, kernel, group..group + 1);
        }
    }

    fn builtin_ranges(
        &mut self,
        queue: u32,
        task: &Task,
        kernel: &crate::engine::Kernel,
        groups: std::ops::Range<u32>,
    ) {
        let gb = crate::engine::kernels::GROUP_BYTES;
        let first = u64::from(groups.start) * gb;
        let bytes = u64::from(groups.end - groups.start) * gb;
        use crate::engine::Kernel as K;
        let (task, dst, src) = match kernel {
            K::Fill { dst, .. } => (task, dst.wrapping_add(first), 0),
            K::Add { dst, src, .. } => (task, dst.wrapping_add(first), src.wrapping_add(first)),
            K::Sum { dst, src } => (task, *dst, src.wrapping_add(first)),
            K::Spin { .. } | K::User(_) => return,
        };
        match kernel {
            K::Fill { .. } => self.task_range(queue, task, dst, bytes, WKind::Data, false),
            K::Add { .. } => {
                self.task_range(queue, task, src, bytes, WKind::Data, true);
                self.task_range(queue, task, dst, bytes, WKind::Data, false);
            }
            _ => {
                self.task_range(queue, task, src, bytes, WKind::Data, true);
                self.task_range(queue, task, dst, 8, WKind::Atomic, false);
            }
        }
    }

    fn task_range(
        &mut self,
        queue: u32,
        t: &Task,
        start: u64,
        bytes: u64,
        kind: WKind,
        read: bool,
    ) {
        let pos = WriterPos::Task {
            queue,
            copy: t.copy,
            index: t.index,
        };
        let (me, alt) = if read {
            (t.read_ep, t.write_ep)
        } else {
            (t.write_ep, t.read_ep)
        };
        let x = Actor {
            clock: &t.clock,
            me,
            alt: Some(alt),
            acc: match (read, kind) {
                (true, _) => t.read,
                (false, WKind::Atomic) => t.atomic,
                _ => t.write,
            },
            queue: Some(queue),
            task: true,
        };
        let (lo, hi) = (start & !3, start.saturating_add(bytes));
        if read {
            self.data_read(&x, lo, hi);
        } else {
            self.write(&x, (lo, hi), kind, None, pos);
        }
    }

    /// A user kernel's group of task `index` accessed memory (recorded after the group ran).
    pub(crate) fn user_accesses(&mut self, queue: u32, index: u64, log: &[(u64, u8, AccessKind)]) {
        let Some(t) = self
            .queues
            .get(&queue)
            .and_then(|s| s.tasks.get(&(false, index as u32)))
            .cloned()
        else {
            return;
        };
        for (addr, words, kind) in log {
            let (wk, read) = match kind {
                AccessKind::Read => (WKind::Data, true),
                AccessKind::Atomic => (WKind::Atomic, false),
                _ => (WKind::Data, false),
            };
            self.task_range(queue, &t, *addr, u64::from(*words) * 4, wk, read);
        }
    }

    /// A copy by the ME (copy number `index`): a task forked from the ME's order clock that the
    /// ME waits for (joined into the order clock, not the release clock).
    pub(crate) fn copy(&mut self, queue: u32, site: Site, dst: u64, src: u64, bytes: u64) -> u32 {
        let tc = self.task_comps(queue);
        let me_c = self.comp(Comp::Me(queue));
        let s = self.q(queue);
        let index = s.copy;
        s.copy += 1;
        let clock = Arc::new(s.o.clone());
        // A fork: the ME's later accesses get a new epoch, so they are not taken to happen
        // before the task (which only knows the ME up to here).
        s.tick_me(me_c);
        let mk = |kind| AccRec {
            agent: AgentRec::Task {
                queue,
                site: one_site(site),
            },
            op: "copy",
            kernel: None,
            kind,
        };
        let task = Task {
            clock,
            read_ep: Epoch {
                comp: tc.cr,
                v: index + 1,
            },
            write_ep: Epoch {
                comp: tc.cw,
                v: index + 1,
            },
            copy: true,
            index,
            read: self.acc(mk(AccessKind::Read)),
            write: self.acc(mk(AccessKind::Write)),
            atomic: self.acc(mk(AccessKind::Atomic)),
        };
        self.task_range(queue, &task, src, bytes, WKind::Data, true);
        self.task_range(queue, &task, dst, bytes, WKind::Data, false);
        // The ME waits for the copy: later work is ordered after it; its reads are over.
        let s = self.q(queue);
        s.o.raise(tc.cr, index + 1);
        s.o.raise(tc.cw, index + 1);
        s.r.raise(tc.cr, index + 1);
        index
    }

    // ----------------------------------------------------------------------------------------
    // Host hooks

    /// The calling host thread's access `op`: its id, clock component, clock (a copy) and
    /// access record.
    fn host_access(&mut self, op: &'static str, kind: AccessKind) -> (u64, u32, Vc, AccId) {
        let (id, c) = self.host_clock();
        let acc = self.acc(AccRec {
            agent: AgentRec::Host {
                id,
                line: source_line(),
            },
            op,
            kernel: None,
            kind,
        });
        let h = self.hosts.get(&id).cloned().unwrap_or_default();
        (id, c, h, acc)
    }

    /// The host submits `seq` to `queue`: the submission carries the host's clock.
    pub(crate) fn host_submit(&mut self, queue: u32, seq: u64) {
        let (id, c) = self.host_clock();
        let h = self.hosts.get(&id).cloned().unwrap_or_default();
        self.q(queue).subs.insert(seq, h);
        self.tick_host(id, c);
    }

    /// The host signals a fence. Returns the release clock, for the signal to carry.
    pub(crate) fn host_signal(&mut self, fence: &FenceCore) -> crate::sync::Release {
        let (id, c) = self.host_clock();
        let h = Arc::new(self.hosts.get(&id).cloned().unwrap_or_default());
        self.fences.insert(fence_key(fence), h.clone());
        self.tick_host(id, c);
        h
    }

    /// A host wait on fences was satisfied: it acquires their release clocks.
    pub(crate) fn host_acquire_fences(&mut self, fences: &[&FenceCore]) {
        let (id, _) = self.host_clock();
        let mut acquired = Vc::default();
        for f in fences {
            if let Some(c) = self.fences.get(&fence_key(f)) {
                acquired.join(c);
            }
        }
        if let Some(h) = self.hosts.get_mut(&id) {
            h.join(&acquired);
        }
    }

    /// A host value write (`Buffer::write_*`).
    pub(crate) fn host_write(&mut self, op: &'static str, address: u64, width: Width) {
        let (id, c, h, acc) = self.host_access(op, AccessKind::ValueWrite);
        let rel = Arc::new(h.clone());
        let x = host_actor(&h, c, acc);
        self.write(
            &x,
            span_of(address, width),
            WKind::Value,
            Some(rel),
            WriterPos::Host,
        );
        self.tick_host(id, c);
    }

    /// A host data read (`Buffer::read_*`).
    pub(crate) fn host_read(&mut self, op: &'static str, address: u64, width: Width) {
        let (_, c, h, acc) = self.host_access(op, AccessKind::Read);
        let x = host_actor(&h, c, acc);
        let (lo, hi) = span_of(address, width);
        self.data_read(&x, lo, hi);
    }

    /// A host memory-value wait (`Buffer::wait_*`, `cpu-poll`) was satisfied.
    pub(crate) fn host_wait(&mut self, op: &'static str, address: u64, width: Width) {
        let (id, c, h, acc) = self.host_access(op, AccessKind::Wait);
        let x = host_actor(&h, c, acc);
        let acquired = self.wait_read(&x, span_of(address, width));
        if let Some(h) = self.hosts.get_mut(&id) {
            h.join(&acquired);
        }
    }

    /// `wait_idle` returned: a full release by each queue, acquired by the host.
    pub(crate) fn host_wait_idle(&mut self) {
        let (id, _) = self.host_clock();
        let qs: Vec<u32> = self.queues.keys().copied().collect();
        let mut acquired = Vc::default();
        for q in qs {
            let tc = self.task_comps(q);
            let s = self.q(q);
            let mut c = s.o.clone();
            tc.raise(&mut c, s.disp, s.copy, true);
            acquired.join(&c);
        }
        if let Some(v) = self.vis.as_mut() {
            v.write_back_all();
        }
        if let Some(h) = self.hosts.get_mut(&id) {
            h.join(&acquired);
        }
    }

    // ----------------------------------------------------------------------------------------
    // Results

    fn access(&self, dev: &DeviceCore, id: AccId) -> HazardAccess {
        let r = &self.accs[id as usize];
        let agent = match &r.agent {
            AgentRec::Task { queue, site }
            | AgentRec::Me { queue, site }
            | AgentRec::Pfp { queue, site } => HazardAgent::Queue {
                queue: dev.queue_name(*queue),
                stage: match r.agent {
                    AgentRec::Task { .. } => "task",
                    AgentRec::Me { .. } => "me",
                    _ => "pfp",
                },
                site: *site,
                list: site.list.map(|l| dev.list_name(l)),
            },
            AgentRec::Host { id, line } => HazardAgent::Host {
                host: crate::host::name_of(*id),
                line: *line,
            },
        };
        HazardAccess {
            agent,
            op: r.op,
            kernel: r.kernel.as_ref().map(|k| k.to_string()),
            kind: r.kind,
        }
    }

    /// The hazards found so far, in a stable order.
    pub(crate) fn hazards(&self, dev: &DeviceCore) -> Vec<Hazard> {
        self.hazards
            .iter()
            .map(|((kind, first, second, m), (lo, hi, observed))| Hazard {
                kind: *kind,
                address: *lo,
                bytes: hi - lo,
                buffer: dev
                    .memory
                    .resolve(*lo, 4)
                    .map(|(b, off)| (b.name.to_string(), off)),
                first: self.access(dev, *first),
                second: self.access(dev, *second),
                missing: match m {
                    MissingRec::NoWriteback { release, volatile } => Missing::NoWriteback {
                        release: self.access(dev, *release),
                        volatile: *volatile,
                    },
                    MissingRec::TopOfPipe { release } => Missing::TopOfPipe {
                        release: self.access(dev, *release),
                    },
                    MissingRec::NoFlush => Missing::NoFlush,
                    MissingRec::PfpBeforeWait { wait } => Missing::PfpBeforeWait {
                        wait: self.access(dev, *wait),
                    },
                    MissingRec::NoInvalidate => Missing::NoInvalidate,
                    MissingRec::Nothing => Missing::Nothing,
                },
                observed: observed.map(|o| match o {
                    Some((old, cur, a)) => {
                        let at = match dev.memory.resolve(a, 4) {
                            Some((b, off)) => format!("{}+{off:#x}", b.name),
                            None => format!("{a:#x}"),
                        };
                        format!("old value {old} at {at}, current {cur}")
                    }
                    None => "the current value".to_string(),
                }),
            })
            .collect()
    }

    /// Reports not kept because of the cap.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}
