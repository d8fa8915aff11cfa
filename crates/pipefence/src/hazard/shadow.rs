//! Shadow memory: for each word, its last write (with the release clock of a value write and
//! where the writer stands) and the reads since that are not ordered before each other, kept as
//! address segments (`ShadowMap`) so that a kernel group's range costs one entry.
//!
//! Calls only `clock` and `access` (the epochs and access ids it stores); the model calls
//! nothing above it.

use super::access::AccId;
use super::clock::{Epoch, Vc};
use crate::command::Width;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Reads remembered per word.
pub(super) const MAX_READS: usize = 8;

/// A byte range `[start, end)`.
pub(super) type Span = (u64, u64);

pub(super) fn span_of(address: u64, width: Width) -> Span {
    let a = address & !3;
    (a, a + width.bytes())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WKind {
    Data,
    Value,
    Atomic,
}

#[derive(Debug, Clone)]
pub(super) struct LastWrite {
    pub(super) ep: Epoch,
    pub(super) kind: WKind,
    pub(super) acc: AccId,
    /// For value writes: what a wait satisfied by it acquires.
    pub(super) rel: Option<Arc<Vc>>,
    /// The writer's queue and, for tasks, which ones (for naming the missing link).
    pub(super) from: WriterPos,
    pub(super) seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriterPos {
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
pub(super) struct Shadow {
    pub(super) w: Option<LastWrite>,
    /// Data reads not ordered before each other since the last write.
    pub(super) reads: SmallVec<[(Epoch, AccId, Option<u32>); 2]>,
    /// Per engine: its tasks' last read of the word (queue, invalidate generation, sequence).
    pub(super) engine_reads: SmallVec<[(u32, u32, u64); 1]>,
}

/// Shadow state as segments: `start -> (end, shadow)`, disjoint, each a range of words with
/// the same history (a built-in kernel's group range stays one segment).
#[derive(Debug, Default)]
pub(super) struct ShadowMap {
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
    pub(super) fn each(&mut self, start: u64, end: u64, mut f: impl FnMut(u64, u64, &mut Shadow)) {
        if start >= end {
            return;
        }
        // The common case, a word accessed before with the same span: one segment already
        // covers exactly `[start, end)` (then both ends are boundaries and it is the only
        // segment in the range): one lookup instead of two splits and a range walk.
        if let Some((e, sh)) = self.segs.get_mut(&start) {
            if *e == end {
                f(start, end, sh);
                return;
            }
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

#[cfg(test)]
mod tests {
    use super::{Epoch, ShadowMap};

    fn segments(m: &ShadowMap) -> Vec<(u64, u64)> {
        m.segs.iter().map(|(s, (e, _))| (*s, *e)).collect()
    }

    #[test]
    fn each_fills_gaps_and_splits_only_at_the_range_ends() {
        let mut m = ShadowMap::default();
        let mut seen = Vec::new();
        m.each(0, 64, |lo, hi, _| seen.push((lo, hi)));
        assert_eq!(seen, [(0, 64)]);
        seen.clear();
        m.each(16, 32, |lo, hi, sh| {
            seen.push((lo, hi));
            sh.reads.push((Epoch { comp: 0, v: 1 }, 7, None));
        });
        assert_eq!(seen, [(16, 32)]);
        assert_eq!(segments(&m), [(0, 16), (16, 32), (32, 64)]);
        let mut reads = Vec::new();
        m.each(8, 80, |lo, hi, sh| reads.push((lo, hi, sh.reads.len())));
        assert_eq!(reads, [(8, 16, 0), (16, 32, 1), (32, 64, 0), (64, 80, 0)]);
        assert_eq!(
            segments(&m),
            [(0, 8), (8, 16), (16, 32), (32, 64), (64, 80)]
        );
        m.each(40, 40, |_, _, _| panic!("an empty range has no segments"));
        // An exact segment is found as it is, and nothing is split.
        let mut exact = Vec::new();
        m.each(16, 32, |lo, hi, sh| exact.push((lo, hi, sh.reads.len())));
        assert_eq!(exact, [(16, 32, 1)]);
        assert_eq!(
            segments(&m),
            [(0, 8), (8, 16), (16, 32), (32, 64), (64, 80)]
        );
    }
}
