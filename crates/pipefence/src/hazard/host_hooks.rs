//! The hooks the host API calls: submissions, fence signals, satisfied fence and memory-value
//! waits, `wait_idle`, and buffer reads and writes, each from the calling host thread's clock;
//! and the source line a scenario labels a thread's calls with.
//!
//! Calls `rules`, `queue`, `shadow`, `clock`, `access` and, in strict mode, `strict`
//! (`wait_idle` writes everything back); reads the calling thread's id from `crate::host`; the
//! model calls nothing above it.

use super::access::{AccId, AccRec, AgentRec};
use super::clock::{fence_key, Actor, Comp, Epoch, Vc};
use super::shadow::{span_of, WKind, WriterPos};
use super::{AccessKind, Model};
use crate::command::Width;
use crate::sync::FenceCore;
use std::sync::Arc;

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

impl Model {
    fn host_clock(&mut self) -> (u64, u32) {
        let id = crate::host_names::current_id();
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

    /// A host wait on fences was satisfied: it acquires their release clocks (what the signals
    /// before it released: a read of each fence, for a reducing exploration, since a signal
    /// just before the acquire is acquired and one just after is not).
    pub(crate) fn host_acquire_fences(&mut self, fences: &[&FenceCore]) {
        let (id, _) = self.host_clock();
        let mut acquired = Vc::default();
        for f in fences {
            f.note(crate::footprint::Kind::Read);
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

    /// A host value write of the bytes `[start, end)` (`Buffer::write_slice`): one access.
    pub(crate) fn host_write_span(&mut self, op: &'static str, start: u64, end: u64) {
        let (id, c, h, acc) = self.host_access(op, AccessKind::ValueWrite);
        let rel = Arc::new(h.clone());
        let x = host_actor(&h, c, acc);
        self.write(&x, (start, end), WKind::Value, Some(rel), WriterPos::Host);
        self.tick_host(id, c);
    }

    /// A host data read of the bytes `[start, end)` (`Buffer::read_slice`): one access.
    pub(crate) fn host_read_span(&mut self, op: &'static str, start: u64, end: u64) {
        let (_, c, h, acc) = self.host_access(op, AccessKind::Read);
        let x = host_actor(&h, c, acc);
        self.data_read(&x, start, end);
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
            c.join(&s.t);
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
}
