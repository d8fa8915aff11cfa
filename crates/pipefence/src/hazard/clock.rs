//! Vector clocks (FastTrack style): the clock `Vc`, an access's `Epoch`, the components a
//! device's clocks count (`Comp`: per queue its PFP, its ME, four task prefixes and its
//! retirements; per host thread one), the `Actor` an access is checked as, and the key a fence's release clock is
//! kept under. `Model::comp` numbers the components.
//!
//! Calls nothing but `access` (the id an actor's access has); the model calls nothing above it.

use super::access::AccId;
use super::Model;
use crate::sync::FenceCore;

/// A vector clock: component -> count (missing components are 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Vc(Vec<u32>);

impl Vc {
    pub(super) fn get(&self, c: u32) -> u32 {
        self.0.get(c as usize).copied().unwrap_or(0)
    }

    pub(super) fn raise(&mut self, c: u32, v: u32) {
        let i = c as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        if self.0[i] < v {
            self.0[i] = v;
        }
    }

    /// Whether `e` happens before this clock.
    pub(super) fn has(&self, e: Epoch) -> bool {
        e.v <= self.get(e.comp)
    }

    pub(super) fn join(&mut self, o: &Vc) {
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
pub(super) struct Epoch {
    pub(super) comp: u32,
    pub(super) v: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Comp {
    Pfp(u32),
    Me(u32),
    /// A queue's dispatches' reads and writes, and its copies' (prefix counts). Reads and
    /// writes are apart because a bottom-of-pipe write without `L2_WRITEBACK` releases the
    /// reads of the tasks before it (they are complete) but not their writes.
    DispRead(u32),
    DispWrite(u32),
    CopyRead(u32),
    CopyWrite(u32),
    /// A queue's retirements (bottom-of-pipe writes and signals, in retire order): they are
    /// not the ME's accesses, so later ME work is not ordered after them by running later.
    Retire(u32),
    Host(u64),
}

/// A queue's task components: dispatch reads, dispatch writes, copy reads, copy writes.
#[derive(Debug, Clone, Copy)]
pub(super) struct TaskComps {
    pub(super) dr: u32,
    pub(super) dw: u32,
    pub(super) cr: u32,
    pub(super) cw: u32,
}

impl TaskComps {
    /// Raises `c` so that the first `d` dispatches and `k` copies happen before it: their
    /// reads, and with `writes` their writes too.
    pub(super) fn raise(&self, c: &mut Vc, d: u32, k: u32, writes: bool) {
        c.raise(self.dr, d);
        c.raise(self.cr, k);
        if writes {
            c.raise(self.dw, d);
            c.raise(self.cw, k);
        }
    }
}

/// The clock of an agent making an access, and its own epoch.
pub(super) struct Actor<'a> {
    pub(super) clock: &'a Vc,
    pub(super) me: Epoch,
    /// A task's other epoch (its writes' for a read, its reads' for a write): the same task.
    pub(super) alt: Option<Epoch>,
    pub(super) acc: AccId,
    /// The reading engine, for tasks (stale-cache tracking) and the queue for the
    /// same-queue rule.
    pub(super) queue: Option<u32>,
    pub(super) task: bool,
}

impl Actor<'_> {
    pub(super) fn ordered(&self, e: Epoch) -> bool {
        e == self.me || Some(e) == self.alt || e.v <= self.clock.get(e.comp)
    }
}

/// A fence's key in the model (its address; the model outlives no fence it acts on).
pub(super) fn fence_key(f: &FenceCore) -> usize {
    std::ptr::from_ref(f) as usize
}

impl Model {
    pub(super) fn comp(&mut self, c: Comp) -> u32 {
        let n = self.comps.len() as u32;
        *self.comps.entry(c).or_insert(n)
    }

    pub(super) fn task_comps(&mut self, queue: u32) -> TaskComps {
        TaskComps {
            dr: self.comp(Comp::DispRead(queue)),
            dw: self.comp(Comp::DispWrite(queue)),
            cr: self.comp(Comp::CopyRead(queue)),
            cw: self.comp(Comp::CopyWrite(queue)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Vc;

    #[test]
    fn missing_components_are_zero_raise_never_lowers_join_takes_the_max() {
        let mut a = Vc::default();
        assert_eq!(a.get(5), 0);
        a.raise(2, 3);
        a.raise(2, 1);
        assert_eq!((a.get(0), a.get(2)), (0, 3));
        let mut b = Vc::default();
        b.raise(0, 4);
        b.raise(4, 1);
        a.join(&b);
        assert_eq!((a.get(0), a.get(2), a.get(4)), (4, 3, 1));
    }
}
