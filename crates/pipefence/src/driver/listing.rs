//! The deterministic driver's listing of enabled small actors (hosts, engine stages,
//! retirements, write-backs), kept across failed tries (D4).
//!
//! A step lists every host and every queue's stages, which costs O(hosts + queues). An engine
//! stage picked from that list may turn out blocked or idle: a failed try, which counts as a
//! step and changes nothing but the set of disabled stages. The next step's list would be the
//! same list less that stage, so the scheduler keeps the list and takes the stage out instead
//! of listing everything again. With many blocked stages of high PCT priority, every progress
//! is followed by one failed try per such stage; listing again for each made a progress cost
//! O(queues^2).
//!
//! [`Left`] finds what a scan over the actions left would find: the k-th one in listing order
//! (a random pick) and the k-th PFP step (strict mode's run-ahead) with Fenwick trees, and the
//! one of highest PCT priority, the earliest on a tie, with a heap. Each costs O(log n).

use super::groups::Fenwick;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The actions of a listing still enabled after some were taken out, by position in listing
/// order.
#[derive(Debug)]
pub(super) struct Left {
    live: Vec<bool>,
    count: usize,
    /// No live position below this one.
    first: usize,
    all: Fenwick,
    pfps: Fenwick,
    pfp_count: usize,
    /// PCT: the current priority of each position, if it has one.
    priority: Vec<Option<u64>>,
    /// PCT: (priority, earlier position first) pairs; a pair whose position was taken out or
    /// has another priority now is stale and skipped when it reaches the top.
    heap: BinaryHeap<(u64, Reverse<usize>)>,
    /// PCT: positions without a priority, in listing order.
    unprioritized: Vec<usize>,
}

impl Left {
    /// All `n` positions live; `is_pfp` tells the PFP steps, `priority` the PCT priorities
    /// given so far (for PCT only: `pct`).
    pub(super) fn new(
        n: usize,
        is_pfp: impl Fn(usize) -> bool,
        priority: impl Fn(usize) -> Option<u64>,
        pct: bool,
    ) -> Left {
        let pfp: Vec<u32> = (0..n).map(|i| u32::from(is_pfp(i))).collect();
        let pfp_count = pfp.iter().map(|&c| c as usize).sum();
        let mut left = Left {
            live: vec![true; n],
            count: n,
            first: 0,
            all: Fenwick::from_cells(&vec![1; n]),
            pfps: Fenwick::from_cells(&pfp),
            pfp_count,
            priority: Vec::new(),
            heap: BinaryHeap::new(),
            unprioritized: Vec::new(),
        };
        if pct {
            left.priority = (0..n).map(&priority).collect();
            let pairs: Vec<(u64, Reverse<usize>)> = (0..n)
                .filter_map(|i| left.priority[i].map(|p| (p, Reverse(i))))
                .collect();
            left.heap = BinaryHeap::from(pairs);
            left.unprioritized = (0..n).filter(|&i| left.priority[i].is_none()).collect();
        }
        left
    }

    /// Live positions.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Takes position `pos` out (it must be live).
    pub(super) fn take(&mut self, pos: usize, is_pfp: bool) {
        debug_assert!(self.live[pos]);
        self.live[pos] = false;
        self.count -= 1;
        self.all.clear(pos);
        if is_pfp {
            self.pfps.clear(pos);
            self.pfp_count -= 1;
        }
    }

    /// The `k`-th live position in listing order (`k < len()`).
    pub(super) fn nth(&self, k: usize) -> usize {
        self.all.kth(k as u32)
    }

    /// Live PFP steps.
    pub(super) fn pfps(&self) -> usize {
        self.pfp_count
    }

    /// The `k`-th live PFP step in listing order (`k < pfps()`).
    pub(super) fn nth_pfp(&self, k: usize) -> usize {
        self.pfps.kth(k as u32)
    }

    /// The first live position.
    pub(super) fn first(&mut self) -> Option<usize> {
        while self.first < self.live.len() && !self.live[self.first] {
            self.first += 1;
        }
        (self.first < self.live.len()).then_some(self.first)
    }

    /// PCT: takes the live positions without a priority, in listing order.
    pub(super) fn take_unprioritized(&mut self) -> Vec<usize> {
        let mut v = std::mem::take(&mut self.unprioritized);
        v.retain(|&i| self.live[i]);
        v
    }

    /// PCT: gives position `pos` priority `p`.
    pub(super) fn set_priority(&mut self, pos: usize, p: u64) {
        self.priority[pos] = Some(p);
        self.heap.push((p, Reverse(pos)));
    }

    /// PCT: the live position of highest priority above zero (the earliest on a tie), with its
    /// priority, as a scan keeping the first strictly better one finds it.
    pub(super) fn best(&mut self) -> Option<(usize, u64)> {
        while let Some(&(p, Reverse(pos))) = self.heap.peek() {
            if self.live[pos] && self.priority[pos] == Some(p) {
                return (p > 0).then_some((pos, p));
            }
            self.heap.pop();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Every query answers what a scan over the live positions answers.
    #[test]
    fn left_answers_as_a_scan_over_the_live_positions() {
        let mut rng = Rng::new(11);
        for round in 0..50 {
            let n = 1 + rng.below(200) as usize;
            let pfp: Vec<bool> = (0..n).map(|_| rng.below(3) == 0).collect();
            // Small priorities, so ties and zeros happen.
            let mut prio: Vec<Option<u64>> = (0..n)
                .map(|_| (rng.below(4) > 0).then(|| rng.below(8)))
                .collect();
            let mut left = Left::new(n, |i| pfp[i], |i| prio[i], true);
            let mut live = vec![true; n];
            loop {
                let scan: Vec<usize> = (0..n).filter(|&i| live[i]).collect();
                assert_eq!(left.len(), scan.len(), "round {round}");
                for (k, &i) in scan.iter().enumerate() {
                    assert_eq!(left.nth(k), i);
                }
                let pfps: Vec<usize> = scan.iter().copied().filter(|&i| pfp[i]).collect();
                assert_eq!(left.pfps(), pfps.len());
                for (k, &i) in pfps.iter().enumerate() {
                    assert_eq!(left.nth_pfp(k), i);
                }
                assert_eq!(left.first(), scan.first().copied());
                if rng.below(4) == 0 {
                    for i in left.take_unprioritized() {
                        let p = rng.below(8);
                        prio[i] = Some(p);
                        left.set_priority(i, p);
                    }
                    let mut best = None;
                    let mut best_p = 0;
                    for &i in &scan {
                        let p = prio[i].expect("every live position has a priority");
                        if p > best_p {
                            best_p = p;
                            best = Some((i, p));
                        }
                    }
                    assert_eq!(left.best(), best, "round {round}");
                    if let Some((i, _)) = best {
                        if rng.below(2) == 0 {
                            let p = rng.below(8);
                            prio[i] = Some(p);
                            left.set_priority(i, p);
                        }
                    }
                }
                if scan.is_empty() {
                    break;
                }
                let i = scan[rng.below(scan.len() as u64) as usize];
                live[i] = false;
                left.take(i, pfp[i]);
            }
        }
    }
}
