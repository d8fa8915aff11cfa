//! Footprints: which objects an action of the deterministic driver touched, and how, for the
//! partial-order reduction of exhaustive exploration (`docs/exploration.md`, "The dependence
//! relation").
//!
//! While a reducing exploration runs an action, the memory, fence, queue and clock code record
//! their accesses here ([`record`]); the scheduler takes them as the action's footprint
//! ([`take`]). Two actions are dependent when their footprints [`conflict`]: they touch a common
//! object and at least one of the two accesses neither reads nor commutes with the other. The
//! recorder is per OS thread (the deterministic driver runs one action at a time, each on the
//! thread that performs it) and costs one relaxed load per access when no exploration records.
//!
//! It calls nothing else in the crate.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An object an action touches. Every key is deterministic for a given program and schedule
/// prefix (addresses, queue ids, fence ids, host slots), so footprints of different runs
/// compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Obj {
    /// Memory bytes `[start, end)` by GPU virtual address.
    Mem(u64, u64),
    /// A fence (by its id on the device): its value, waiters and events.
    Fence(u64),
    /// A queue's engine state: its FIFO, retire queue, current command and completed list.
    Queue(u32),
    /// One dispatch (queue, index): its launch, read by each of its groups.
    Dispatch(u32, u64),
    /// One line of a queue's strict-mode cache (by the line's address).
    Line(u32, u64),
    /// Every line of a queue's strict-mode cache at once (an invalidation or write-back of all).
    Cache(u32),
    /// The virtual clock.
    Clock,
    /// A host thread (its state: running, finished).
    Host(u32),
    /// The device's removal.
    Device,
    /// Everything (an action whose footprint is not known precisely).
    All,
}

/// How an object is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Reads only: commutes with other reads.
    Read,
    /// A commutative update whose result nobody reads in the action (an atomic add without its
    /// result, a group's completion count, the clock moving to a later time): commutes with
    /// other updates of its kind, not with reads or writes.
    Update,
    /// Any other access.
    Write,
}

/// One access.
pub type Access = (Obj, Kind);

/// An action's accesses, sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Footprint {
    accesses: Vec<Access>,
}

impl Footprint {
    /// A footprint of these accesses.
    pub fn new(mut accesses: Vec<Access>) -> Self {
        accesses.sort_unstable_by_key(|&(o, k)| (k, o));
        accesses.dedup();
        // Merge adjacent or overlapping memory ranges of the same kind (a loop over words
        // records one range per word).
        let mut out: Vec<Access> = Vec::with_capacity(accesses.len());
        for a in accesses {
            if let (Some((Obj::Mem(_, e0), k0)), (Obj::Mem(s1, e1), k1)) = (out.last_mut(), a) {
                if *k0 == k1 && s1 <= *e0 {
                    *e0 = (*e0).max(e1);
                    continue;
                }
            }
            out.push(a);
        }
        Footprint { accesses: out }
    }

    /// The accesses.
    pub fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    /// Whether two actions with these footprints are dependent (they may not commute).
    pub fn conflicts(&self, other: &Footprint) -> bool {
        for &(o1, k1) in &self.accesses {
            for &(o2, k2) in &other.accesses {
                if kinds_conflict(k1, k2) && objects_overlap(o1, o2) {
                    return true;
                }
            }
        }
        false
    }
}

fn kinds_conflict(a: Kind, b: Kind) -> bool {
    !matches!(
        (a, b),
        (Kind::Read, Kind::Read) | (Kind::Update, Kind::Update)
    )
}

fn objects_overlap(a: Obj, b: Obj) -> bool {
    match (a, b) {
        (Obj::All, _) | (_, Obj::All) => true,
        (Obj::Mem(s1, e1), Obj::Mem(s2, e2)) => s1 < e2 && s2 < e1,
        (Obj::Line(q1, _), Obj::Cache(q2)) | (Obj::Cache(q1), Obj::Line(q2, _)) => q1 == q2,
        _ => a == b,
    }
}

/// Recorders active in the process (a quick test before the thread-local one).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static REC: RefCell<Option<Vec<Access>>> = const { RefCell::new(None) };
}

/// Starts recording on this thread (dropping whatever was recorded).
pub(crate) fn start() {
    REC.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_none() {
            ACTIVE.fetch_add(1, Ordering::Relaxed);
        }
        *r = Some(Vec::new());
    });
}

/// Stops recording on this thread; returns what was recorded since [`start`] (empty when it
/// was not recording).
pub(crate) fn take() -> Footprint {
    REC.with(|r| match r.borrow_mut().take() {
        Some(v) => {
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
            Footprint::new(v)
        }
        None => Footprint::default(),
    })
}

/// Records an access, when this thread records.
#[inline]
pub(crate) fn record(obj: Obj, kind: Kind) {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    REC.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.push((obj, kind));
        }
    });
}

/// Records an access to `len` bytes of memory from `address`.
#[inline]
pub(crate) fn record_mem(address: u64, len: u64, kind: Kind) {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    record(Obj::Mem(address, address.saturating_add(len.max(1))), kind);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(a: &[Access]) -> Footprint {
        Footprint::new(a.to_vec())
    }

    #[test]
    fn reads_and_updates_commute_among_themselves_only() {
        let r = fp(&[(Obj::Mem(0, 4), Kind::Read)]);
        let u = fp(&[(Obj::Mem(0, 4), Kind::Update)]);
        let w = fp(&[(Obj::Mem(2, 6), Kind::Write)]);
        let far = fp(&[(Obj::Mem(4, 8), Kind::Write)]);
        assert!(!r.conflicts(&r) && !u.conflicts(&u));
        assert!(r.conflicts(&u) && r.conflicts(&w) && u.conflicts(&w));
        assert!(!r.conflicts(&far) && far.conflicts(&w));
        let line = fp(&[(Obj::Line(1, 64), Kind::Write)]);
        assert!(line.conflicts(&fp(&[(Obj::Cache(1), Kind::Read)])));
        assert!(!line.conflicts(&fp(&[(Obj::Line(1, 128), Kind::Write)])));
        assert!(!line.conflicts(&fp(&[(Obj::Cache(2), Kind::Write)])));
        assert!(fp(&[(Obj::All, Kind::Read)]).conflicts(&line));
    }

    #[test]
    fn word_ranges_merge() {
        let f = fp(&[
            (Obj::Mem(8, 12), Kind::Write),
            (Obj::Mem(0, 4), Kind::Write),
            (Obj::Mem(4, 8), Kind::Write),
            (Obj::Mem(4, 8), Kind::Read),
        ]);
        assert_eq!(
            f.accesses(),
            &[(Obj::Mem(4, 8), Kind::Read), (Obj::Mem(0, 12), Kind::Write)]
        );
    }

    #[test]
    fn the_recorder_is_per_thread_and_off_by_default() {
        record(Obj::Clock, Kind::Read);
        assert!(take().accesses().is_empty());
        start();
        record(Obj::Clock, Kind::Read);
        std::thread::spawn(|| record(Obj::Device, Kind::Write))
            .join()
            .unwrap();
        assert_eq!(take().accesses(), &[(Obj::Clock, Kind::Read)]);
        assert!(take().accesses().is_empty());
    }
}
