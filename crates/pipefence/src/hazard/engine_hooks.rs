//! The hooks the engine and the kernels call: submissions started, Q7 boundaries, queue and
//! memory-value waits satisfied, PFP reads, packets the ME pops, value writes, bottom-of-pipe
//! retirements, signals, flushes, launches, task accesses and copies. Each advances the queue's
//! clocks and checks its accesses.
//!
//! Calls `rules`, `findings` (a PFP race decided at its packet), `queue`, `shadow`, `clock`,
//! `access` and, in strict mode, `strict` (write-backs, invalidates); reads a built-in kernel's
//! declared ranges (`crate::engine::Kernel`, `GROUP_BYTES`) as data; the model calls nothing
//! above it.

use super::access::{one_site, AccRec, AgentRec};
use super::clock::{fence_key, Actor, Comp, Epoch, Vc};
use super::findings::MissingRec;
use super::queue::{Pushed, RelKind, RelRec, Task, ME_WAITS, RELEASE_LOG};
use super::shadow::{span_of, WKind, WriterPos};
use super::{AccessKind, HazardKind, Model};
use crate::command::{Flush, Width};
use crate::footprint::{record, Kind, Obj};
use crate::sync::FenceCore;
use crate::types::Site;
use std::sync::Arc;

/// A retiring bottom-of-pipe write or signal ([`Model::retired`]).
struct Retired {
    /// What its write is ordered after (with its own epoch).
    order: Vc,
    /// What it releases.
    release: Vc,
    /// Its epoch, of the queue's retirements.
    ep: Epoch,
    /// The ME's epoch when the ME pushed it (its place in the queue's program order).
    me_epoch: u32,
    /// The tasks launched before it (dispatches, copies).
    tasks: (u32, u32),
    writeback: bool,
}

/// Whether a flush set drops the engine's read cache (either invalidate flag; section 3).
fn invalidates(flush: Flush) -> bool {
    flush.contains(Flush::L1_INVALIDATE) || flush.contains(Flush::L2_INVALIDATE)
}

impl Model {
    /// The PFP starts submission `seq` (any kind): it acquires what the host released with it.
    pub(crate) fn submission_start(&mut self, queue: u32, seq: u64, pushed: u64) {
        let s = self.q(queue);
        if let Some(h) = s.subs.remove(&seq) {
            s.pfp_acquire(&h, pushed);
        }
    }

    /// A Q7 boundary: the previous call's tasks and retirements join the ME's order clock
    /// (the boundary waits for both); the PFP joins it. Strict: the tasks' writes become
    /// CP-visible and the engine's read cache is dropped.
    pub(crate) fn q7_boundary(&mut self, queue: u32) {
        let s = self.q(queue);
        s.o.join(&s.t);
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

    /// Pops the retiring bottom-of-pipe write or signal, an access of the queue's
    /// retirements: ordered after what the ME had done when it pushed it and after the
    /// retirements before it (they land in order), not after what the ME did since. Its release
    /// holds what it was pushed with, what the retirements before it released and its own
    /// epoch. The ME's
    /// release clock takes its epoch (a later top-of-pipe write releases the CP writes already
    /// landed) and, with a write-back, what it released; (strict) the tasks' data is written
    /// back first.
    fn retired(&mut self, queue: u32) -> Retired {
        record(Obj::Released(queue), Kind::Update);
        let s = self.q(queue);
        let p = s.retire.pop_front().unwrap_or_default();
        let ret_c = s.ret_c;
        let ep = Epoch {
            comp: ret_c,
            v: s.t.get(ret_c) + 1,
        };
        let mut order = p.order;
        order.join(&s.t);
        order.raise(ret_c, ep.v);
        // What the earlier retirements released, not what they were ordered after (the ME's
        // order clock holds tasks' writes that no write-back released).
        let mut release = p.release;
        release.join(&s.t_rel);
        release.raise(ret_c, ep.v);
        s.t.join(&order);
        s.t_rel.join(&release);
        s.r.raise(ret_c, ep.v);
        if p.writeback {
            s.r.join(&release);
        }
        if let (true, Some(v)) = (p.writeback, self.vis.as_mut()) {
            v.write_back_tasks(queue, p.tasks.0, p.tasks.1);
        }
        Retired {
            order,
            release,
            ep,
            me_epoch: p.me_epoch,
            tasks: p.tasks,
            writeback: p.writeback,
        }
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
        let s = self.q(queue);
        let (me_c, pfp_c) = (s.me_c, s.pfp_c);
        // The waiting stage's clock is lent to the check, not copied (the check reads no
        // queue's clocks), and put back before the wait acquires.
        let (clock, me) = if pfp {
            let me = Epoch {
                comp: pfp_c,
                v: s.p.get(pfp_c),
            };
            (std::mem::take(&mut s.p), me)
        } else {
            let me = Epoch {
                comp: me_c,
                v: s.o.get(me_c),
            };
            (std::mem::take(&mut s.o), me)
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
            s.p = clock;
        } else {
            s.o = clock;
        }
        if pfp {
            s.pfp_acquire(&acquired, pushed);
        } else {
            s.o.join(&acquired);
            s.r.join(&acquired);
            // The ME is at the packet after the last one it popped.
            if s.me_waits.len() >= ME_WAITS {
                s.me_waits.pop_front();
            }
            s.me_waits.push_back((acc, Arc::new(acquired)));
        }
    }

    /// The PFP reads a `dispatch_indirect`'s arguments for packet `packet`.
    pub(crate) fn pfp_read(&mut self, queue: u32, site: Site, address: u64, packet: u64) {
        let acc = self.queue_acc(queue, 0, site, "dispatch-indirect", AccessKind::Read);
        let s = self.q(queue);
        let pfp_c = s.pfp_c;
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
        let s = self.q(queue);
        let pfp_c = s.pfp_c;
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
            self.q(queue).me_waits = waits;
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
        self.value_write_at(queue, site, op, address, width, None, RelKind::Top);
    }

    /// A bottom-of-pipe write or signal enters the retire queue: what it is ordered after and
    /// its release clock are fixed now. The ME ticks: what it does next is not before it.
    pub(crate) fn retire_pushed(&mut self, queue: u32, full: bool) {
        let tc = self.task_comps(queue);
        let s = self.q(queue);
        let (d, c) = (s.disp, s.copy);
        let mut release = if full {
            s.o.clone()
        } else {
            record(Obj::Released(queue), Kind::Read);
            s.r.clone()
        };
        // It lands once the earlier tasks finished: their reads are released either way, their
        // writes only with a write-back.
        tc.raise(&mut release, d, c, full);
        let me_c = s.me_c;
        s.retire.push_back(Pushed {
            release,
            writeback: full,
            tasks: (d, c),
            order: s.o.clone(),
            me_epoch: s.o.get(me_c),
        });
        s.tick_me(me_c);
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
        let retired = self.retired(queue);
        if invalidates(flush) {
            self.invalidate(queue);
        }
        let volatile = flush.contains(Flush::L1_VOLATILE) || flush.contains(Flush::L2_VOLATILE);
        let kind = RelKind::Bop {
            writeback: retired.writeback,
            volatile,
        };
        self.value_write_at(queue, site, op, address, width, Some(retired), kind);
    }

    #[allow(clippy::too_many_arguments)]
    fn value_write_at(
        &mut self,
        queue: u32,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
        retired: Option<Retired>,
        kind: RelKind,
    ) {
        let acc = self.queue_acc(queue, 1, site, op, AccessKind::ValueWrite);
        let rel_acc = self.queue_acc(queue, 1, site, op, AccessKind::Release);
        let s = self.q(queue);
        let me_c = s.me_c;
        let top = retired.is_none();
        let (clock, me, rel, me_epoch, (d, c)) = match retired {
            Some(r) => (r.order, r.ep, Arc::new(r.release), r.me_epoch, r.tasks),
            None => {
                // A top-of-pipe write: the ME's release clock now. The ME's order clock is
                // lent to the check, not copied (nothing below reads a queue's clocks), and
                // put back before the ME ticks.
                record(Obj::Released(queue), Kind::Read);
                let rel = Arc::new(s.r.clone());
                let clock = std::mem::take(&mut s.o);
                let me = Epoch {
                    comp: me_c,
                    v: clock.get(me_c),
                };
                (clock, me, rel, me.v, (s.disp, s.copy))
            }
        };
        let log = if top {
            &mut s.releases
        } else {
            &mut s.retire_releases
        };
        if log.len() >= RELEASE_LOG {
            log.pop_front();
        }
        log.push_back(RelRec {
            me_epoch,
            ep: me,
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
        if top {
            let s = self.q(queue);
            s.o = clock;
            s.o.raise(me_c, me.v + 1);
            s.r.raise(me_c, me.v + 1);
        }
    }

    /// A queue signal retires: the fence's release clock is everything before it. Returns it,
    /// for the signal to carry to the tickets it satisfies.
    pub(crate) fn signal(&mut self, queue: u32, fence: &FenceCore) -> crate::sync::Release {
        let clock = Arc::new(self.retired(queue).release);
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
}
