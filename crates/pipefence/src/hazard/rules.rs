//! The access rules (`docs/memory-model.md` 5.1): a data read, a write or a satisfied wait is
//! checked against the shadow state of its words; a pair not ordered by happens-before is a
//! hazard, and `missing` names the synchronization that would have ordered it (the fix a report
//! suggests). PFP reads race until the ME reaches their packet (`defer_pfp`).
//!
//! Calls `shadow`, `queue`, `clock`, `access`, `findings` (to record a hazard) and, in strict
//! mode, `strict` (the stale value a read returned); the model calls nothing above it.

use super::access::{AccId, AgentRec};
use super::clock::{Actor, Comp, Epoch, Vc};
use super::findings::MissingRec;
use super::queue::{PfpRace, RelKind};
use super::shadow::{LastWrite, Span, WKind, WriterPos, MAX_READS};
use super::{HazardKind, Model};
use smallvec::SmallVec;
use std::sync::Arc;

/// A read a write races with: where, the read's epoch and access, the reader's queue.
type ReadRace = (Span, Epoch, AccId, Option<u32>);

impl Model {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
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
        // The ME's and the retirements' releases, in the queue's program order.
        let (mut top, mut bop) = (
            s.releases.iter().peekable(),
            s.retire_releases.iter().peekable(),
        );
        let in_order = std::iter::from_fn(|| match (top.peek(), bop.peek()) {
            (Some(a), Some(b)) if b.me_epoch < a.me_epoch => bop.next(),
            (Some(_), _) => top.next(),
            (None, _) => bop.next(),
        });
        for rel in in_order {
            let after_writer = match index {
                Some(i) if copy => rel.copy > i,
                Some(i) => rel.disp > i,
                None => true,
            };
            if !after_writer || !x_clock.has(rel.ep) {
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

    /// A data read of `[start, end)` by `x`.
    pub(super) fn data_read(&mut self, x: &Actor<'_>, start: u64, end: u64) {
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
    pub(super) fn write(
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
    pub(super) fn wait_read(&mut self, x: &Actor<'_>, (start, end): Span) -> Vc {
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
}
