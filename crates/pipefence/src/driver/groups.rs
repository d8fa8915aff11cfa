//! The deterministic driver's dispatches in flight (D4): one record per launched dispatch, kept
//! so that one scheduling step costs O(log n) in the number of dispatches in flight, not O(n).
//!
//! The scheduler's enabled actions are, in order, the small actors (hosts, engine stages,
//! write-backs), then one "complete some groups" action per dispatch in flight (in launch
//! order), then the endless kernels. A random pick draws an index into that order; this module
//! finds the dispatch at an index with a Fenwick tree over launch slots. PCT picks the actor of
//! highest priority; the dispatches' priorities are kept in an ordered set, so the best one is
//! its last element. Both give exactly the choice a scan over every dispatch would give.

use crate::engine::{Kernel, Site};
use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

/// Ranges a dispatch's remaining groups may split into. Below it, the next group to complete is
/// any remaining one (every completion order of up to this many splits is reachable); at it,
/// the first or last group of a random range (the count stays bounded whatever the size).
const MAX_GROUP_RANGES: usize = 64;

/// The groups of one launched dispatch that have not completed: one record per dispatch, not
/// per group, so memory does not grow with the group count. Each completion of one or more of
/// its groups is one action (D4).
#[derive(Debug)]
pub(super) struct Group {
    pub(super) queue: u32,
    pub(super) index: u64,
    pub(super) kernel: Kernel,
    /// The groups not yet completed, as half-open ranges (in group order).
    left: VecDeque<(u32, u32)>,
    pub(super) ready: u64,
    pub(super) site: Site,
    pub(super) op: &'static str,
    /// PCT priority, given at the first pick that sees the dispatch.
    priority: Option<u64>,
}

impl Group {
    pub(super) fn new(
        queue: u32,
        index: u64,
        kernel: Kernel,
        groups: u32,
        ready: u64,
        site: Site,
        op: &'static str,
    ) -> Self {
        Group {
            queue,
            index,
            kernel,
            left: VecDeque::from([(0, groups)]),
            ready,
            site,
            op,
            priority: None,
        }
    }

    /// Takes the groups that complete in the next action, chosen with `below` (`below(n)`: an index under
    /// `n`, from the generator or a script): one group (half the
    /// time), or the whole of one remaining range at once (the same as completing them one
    /// after another with nothing in between, which is one of the schedules; it keeps a
    /// dispatch of 2^32 - 1 groups to a few dozen actions). Every interleaving of single
    /// completions stays reachable.
    fn take(&mut self, below: &mut dyn FnMut(u64) -> u64) -> Option<(u32, u32)> {
        let n = self.left.len();
        if n == 0 {
            return None;
        }
        let i = below(n as u64) as usize;
        let (start, end) = self.left[i];
        if end - start > 1 && below(2) == 0 {
            self.left.remove(i);
            return Some((start, end));
        }
        let g = if n < MAX_GROUP_RANGES {
            start + below(u64::from(end - start)) as u32
        } else if below(2) == 0 {
            start
        } else {
            end - 1
        };
        match (g == start, g + 1 == end) {
            (true, true) => {
                self.left.remove(i);
            }
            (true, false) => self.left[i].0 = g + 1,
            (false, true) => self.left[i].1 = g,
            (false, false) => {
                self.left[i].1 = g;
                self.left.insert(i + 1, (g + 1, end));
            }
        }
        Some((g, g + 1))
    }
}

/// Counts over a growing array of 0/1 cells: prefix sums, updates and "the k-th one" in
/// O(log n) (also the listing's, see `listing.rs`).
#[derive(Debug, Default)]
pub(super) struct Fenwick {
    /// 1-based: `tree[i - 1]` holds the sum of cells `(i - lowbit(i), i]`.
    tree: Vec<u32>,
}

#[inline]
fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl Fenwick {
    /// Sum of the first `i` cells.
    fn prefix(&self, mut i: usize) -> u32 {
        let mut s = 0;
        while i > 0 {
            s += self.tree[i - 1];
            i -= lowbit(i);
        }
        s
    }

    /// Cells holding `cells`, built in O(n).
    pub(super) fn from_cells(cells: &[u32]) -> Self {
        let mut tree = cells.to_vec();
        for i in 1..=tree.len() {
            let up = i + lowbit(i);
            if up <= tree.len() {
                tree[up - 1] += tree[i - 1];
            }
        }
        Fenwick { tree }
    }

    /// Appends a cell holding `v`.
    fn push(&mut self, v: u32) {
        let i = self.tree.len() + 1;
        let below = self.prefix(i - 1) - self.prefix(i - lowbit(i));
        self.tree.push(v + below);
    }

    /// Subtracts one from cell `cell` (0-based), which holds one.
    pub(super) fn clear(&mut self, cell: usize) {
        let mut i = cell + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] -= 1;
            i += lowbit(i);
        }
    }

    /// The 0-based cell of the `k`-th one (0-based `k`); `k` must be below the total.
    pub(super) fn kth(&self, k: u32) -> usize {
        let n = self.tree.len();
        let mut pos = 0;
        let mut rem = k + 1;
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next - 1] < rem {
                pos = next;
                rem -= self.tree[next - 1];
            }
            step >>= 1;
        }
        pos
    }

    fn reset(&mut self) {
        self.tree.clear();
    }
}

/// The dispatches in flight, in launch order.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// Launch slots; a completed dispatch leaves `None`. Cleared whenever nothing is in flight,
    /// so the slots never outnumber the dispatches launched since the device was last without
    /// work in flight.
    slots: Vec<Option<Group>>,
    alive: Fenwick,
    live: u32,
    /// Slots from here on have no PCT priority yet.
    unprioritized: usize,
    /// (priority, earlier slot first) of every dispatch with a priority.
    by_priority: BTreeSet<(u64, Reverse<usize>)>,
}

/// A dispatch in flight, by slot.
pub(super) type Slot = usize;

impl InFlight {
    /// Dispatches in flight.
    pub(super) fn len(&self) -> usize {
        self.live as usize
    }

    pub(super) fn push(&mut self, g: Group) {
        self.slots.push(Some(g));
        self.alive.push(1);
        self.live += 1;
    }

    /// The `k`-th dispatch in flight in launch order (`k < len()`).
    pub(super) fn nth(&self, k: usize) -> Slot {
        self.alive.kth(k as u32)
    }

    pub(super) fn get(&self, slot: Slot) -> Option<&Group> {
        self.slots.get(slot)?.as_ref()
    }

    /// Gives every dispatch without a PCT priority one, in launch order (`draw` draws it), and
    /// returns the dispatch of highest priority (the earliest on a tie) with its priority.
    pub(super) fn best(&mut self, mut draw: impl FnMut() -> u64) -> Option<(Slot, u64)> {
        for slot in self.unprioritized..self.slots.len() {
            if let Some(g) = self.slots[slot].as_mut() {
                let p = draw();
                g.priority = Some(p);
                self.by_priority.insert((p, Reverse(slot)));
            }
        }
        self.unprioritized = self.slots.len();
        self.by_priority.last().map(|&(p, Reverse(slot))| (slot, p))
    }

    /// Sets the PCT priority of the dispatch at `slot`.
    pub(super) fn set_priority(&mut self, slot: Slot, p: u64) {
        if let Some(g) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            if let Some(old) = g.priority.replace(p) {
                self.by_priority.remove(&(old, Reverse(slot)));
            }
            self.by_priority.insert((p, Reverse(slot)));
        }
    }

    /// Takes the groups of the dispatch at `slot` that complete in the next action (see
    /// [`Group::take`]); a dispatch with none left is gone.
    pub(super) fn take(
        &mut self,
        slot: Slot,
        below: &mut dyn FnMut(u64) -> u64,
    ) -> Option<(u32, u32)> {
        let g = self.slots.get_mut(slot)?.as_mut()?;
        let taken = g.take(below);
        if g.left.is_empty() {
            self.remove(slot);
        }
        taken
    }

    /// The groups left of the dispatch at `slot`, in group order, when there are at most
    /// `max` of them (a reducing exploration's alternatives: one per group).
    pub(super) fn groups_left(&self, slot: Slot, max: u64) -> Option<Vec<u32>> {
        let g = self.get(slot)?;
        let n: u64 = g.left.iter().map(|&(s, e)| u64::from(e - s)).sum();
        (n <= max).then(|| g.left.iter().flat_map(|&(s, e)| s..e).collect())
    }

    /// The groups left of the dispatch at `slot` when they are one range of at least two.
    pub(super) fn one_range_left(&self, slot: Slot) -> Option<(u32, u32)> {
        match self.get(slot)?.left.as_slices() {
            ([(s, e)], []) | ([], [(s, e)]) if e - s >= 2 => Some((*s, *e)),
            _ => None,
        }
    }

    /// Takes every group left of the dispatch at `slot` ([`InFlight::one_range_left`]).
    pub(super) fn take_all(&mut self, slot: Slot) -> Option<(u32, u32)> {
        let range = self.one_range_left(slot)?;
        self.remove(slot);
        Some(range)
    }

    /// Takes group `group` of the dispatch at `slot` (one of [`InFlight::groups_left`]).
    pub(super) fn take_group(&mut self, slot: Slot, group: u32) -> Option<(u32, u32)> {
        let g = self.slots.get_mut(slot)?.as_mut()?;
        let i = g.left.iter().position(|&(s, e)| s <= group && group < e)?;
        let (start, end) = g.left[i];
        match (group == start, group + 1 == end) {
            (true, true) => {
                g.left.remove(i);
            }
            (true, false) => g.left[i].0 = group + 1,
            (false, true) => g.left[i].1 = group,
            (false, false) => {
                g.left[i].1 = group;
                g.left.insert(i + 1, (group + 1, end));
            }
        }
        if g.left.is_empty() {
            self.remove(slot);
        }
        Some((group, group + 1))
    }

    fn remove(&mut self, slot: Slot) {
        let Some(g) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        if let Some(p) = g.priority {
            self.by_priority.remove(&(p, Reverse(slot)));
        }
        self.alive.clear(slot);
        self.live -= 1;
        if self.live == 0 {
            self.slots.clear();
            self.alive.reset();
            self.unprioritized = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn fenwick_finds_the_kth_live_cell_as_a_scan_would() {
        let mut rng = Rng::new(7);
        let mut f = Fenwick::default();
        let mut cells: Vec<bool> = Vec::new();
        for _ in 0..2000 {
            if cells.is_empty() || rng.below(3) > 0 {
                f.push(1);
                cells.push(true);
            } else {
                let live: Vec<usize> = (0..cells.len()).filter(|&i| cells[i]).collect();
                if live.is_empty() {
                    continue;
                }
                let c = live[rng.below(live.len() as u64) as usize];
                f.clear(c);
                cells[c] = false;
            }
            let live: Vec<usize> = (0..cells.len()).filter(|&i| cells[i]).collect();
            for (k, &c) in live.iter().enumerate() {
                assert_eq!(f.kth(k as u32), c);
            }
            assert_eq!(f.prefix(cells.len()) as usize, live.len());
            let built: Vec<u32> = cells.iter().map(|&c| u32::from(c)).collect();
            assert_eq!(Fenwick::from_cells(&built).tree, f.tree);
        }
    }
}
