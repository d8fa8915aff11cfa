//! Per-queue state: the PFP clock and the ME's order and release clocks, what the PFP acquired
//! ahead of the ME, the live tasks, the release clocks waiting to retire, the log of releases
//! (for naming what is missing), and the PFP reads whose races the ME decides later.
//!
//! Calls `clock` (the clocks it advances), `access` and `shadow` (types only); the model calls
//! nothing above it.

use super::access::AccId;
use super::clock::{Comp, Epoch, Vc};
use super::shadow::Span;
use super::Model;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;

/// Releases remembered per queue for naming the missing synchronization.
pub(super) const RELEASE_LOG: usize = 256;

/// Satisfied ME waits remembered per queue for naming a PFP race's missing wait.
pub(super) const ME_WAITS: usize = 64;

#[derive(Debug, Default)]
pub(super) struct QState {
    /// The PFP clock.
    pub(super) p: Vc,
    /// The ME's order clock.
    pub(super) o: Vc,
    /// The ME's release clock.
    pub(super) r: Vc,
    /// Clocks the PFP acquired, joined into `o` and `r` when the ME reaches packet `.0`.
    pub(super) pending: VecDeque<(u64, Vc)>,
    /// Host clocks released with submissions, by sequence number.
    pub(super) subs: FxHashMap<u64, Vc>,
    pub(super) tasks: FxHashMap<(bool, u32), Task>,
    /// Bottom-of-pipe writes and signals pushed and not yet retired, in retire order.
    pub(super) retire: VecDeque<Pushed>,
    /// The retirements' clock: each retirement's clock joins it, with its own epoch
    /// ([`Comp::Retire`]). Only retirements write it; a Q7 boundary and `wait_idle` (which
    /// wait for every retirement) read it.
    pub(super) t: Vc,
    /// What the retirements so far released (each retirement's release joins it, and the
    /// next one's release holds it: they land in order).
    pub(super) t_rel: Vc,
    /// The ME's top-of-pipe releases and the retirements' releases, each in its own order (a
    /// log is written by one agent, so what it holds does not depend on how the two
    /// interleave).
    pub(super) releases: VecDeque<RelRec>,
    pub(super) retire_releases: VecDeque<RelRec>,
    pub(super) pfp_races: Vec<PfpRace>,
    /// The PFP epoch of the indirect-argument read of packet `.0`.
    pub(super) pfp_reads: VecDeque<(u64, u32)>,
    /// The last [`ME_WAITS`] satisfied ME waits: (access, what it acquired). All of them
    /// precede the packets the ME has not reached. Kept whether or not a PFP race is pending,
    /// so a race's report does not depend on when the PFP read ran against the ME.
    pub(super) me_waits: VecDeque<(AccId, Arc<Vc>)>,
    /// Bumped by each invalidate of this engine's read cache (older task reads no longer
    /// count for stale-cache reports).
    pub(super) inval: u32,
    /// Tasks launched so far (dispatches, copies).
    pub(super) disp: u32,
    pub(super) copy: u32,
    /// The numbers of this queue's ME and PFP clock components (`Model::comp`), fixed when
    /// its state is created: the hot hooks read them here instead of looking them up.
    pub(super) me_c: u32,
    pub(super) pfp_c: u32,
    pub(super) ret_c: u32,
}

impl QState {
    /// The PFP acquires `c`; the ME joins it when it reaches packet `pushed` (queue order).
    pub(super) fn pfp_acquire(&mut self, c: &Vc, pushed: u64) {
        self.p.join(c);
        self.pending.push_back((pushed, self.p.clone()));
    }

    /// Advances the ME's own epoch in its order and release clocks.
    pub(super) fn tick_me(&mut self, me: u32) {
        let v = self.o.get(me) + 1;
        self.o.raise(me, v);
        self.r.raise(me, v);
    }
}

#[derive(Debug, Clone)]
pub(super) struct Task {
    pub(super) clock: Arc<Vc>,
    /// Its epochs for reads and for writes.
    pub(super) read_ep: Epoch,
    pub(super) write_ep: Epoch,
    pub(super) copy: bool,
    pub(super) index: u32,
    pub(super) read: AccId,
    pub(super) write: AccId,
    pub(super) atomic: AccId,
}

/// A bottom-of-pipe write or signal as the ME pushed it for retirement.
#[derive(Debug, Clone, Default)]
pub(super) struct Pushed {
    /// What it releases (fixed at the push; the retirements before it join it when it
    /// retires).
    pub(super) release: Vc,
    /// Whether it writes back the data of the tasks launched before it.
    pub(super) writeback: bool,
    /// The tasks launched before it (dispatches, copies).
    pub(super) tasks: (u32, u32),
    /// The ME's order clock at the push: what its write is ordered after.
    pub(super) order: Vc,
    /// The ME's epoch at the push (its place in the queue's program order).
    pub(super) me_epoch: u32,
}

#[derive(Debug, Clone)]
pub(super) struct RelRec {
    /// Its place in the queue's program order (the ME's epoch when the ME ran it or pushed
    /// it for retirement).
    pub(super) me_epoch: u32,
    /// Its own epoch (the ME's, or the retirements'): a reader acquired it when its clock
    /// holds it.
    pub(super) ep: Epoch,
    pub(super) disp: u32,
    pub(super) copy: u32,
    pub(super) kind: RelKind,
    pub(super) acc: AccId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RelKind {
    Bop { writeback: bool, volatile: bool },
    Top,
}

#[derive(Debug, Clone)]
pub(super) struct PfpRace {
    pub(super) packet: u64,
    pub(super) reader: AccId,
    pub(super) writer: AccId,
    pub(super) writer_ep: Epoch,
    pub(super) span: Span,
}

impl Model {
    /// The state of `queue`, created (with its clock components) on first use. One map
    /// lookup: the hooks call this several times per packet.
    pub(super) fn q(&mut self, queue: u32) -> &mut QState {
        let comps = &mut self.comps;
        self.queues.entry(queue).or_insert_with(|| {
            // Numbered as `comp` and `task_comps` would: ME, PFP, the task prefixes, retirements.
            let mut comp = |c: Comp| {
                let n = comps.len() as u32;
                *comps.entry(c).or_insert(n)
            };
            let me = comp(Comp::Me(queue));
            let pfp = comp(Comp::Pfp(queue));
            for c in [
                Comp::DispRead,
                Comp::DispWrite,
                Comp::CopyRead,
                Comp::CopyWrite,
            ] {
                comp(c(queue));
            }
            let ret = comp(Comp::Retire(queue));
            let mut s = QState {
                me_c: me,
                pfp_c: pfp,
                ret_c: ret,
                ..QState::default()
            };
            for c in [&mut s.p, &mut s.o, &mut s.r] {
                c.raise(me, 1);
                c.raise(pfp, 0);
            }
            s
        })
    }
}
