//! Access records: who made an access (a queue's PFP, ME or tasks at a site, or a host thread
//! at a source line), the operation, kernel and kind, interned once into an `AccId` that the
//! shadow state and the reports refer to.
//!
//! Calls nothing (it uses the engine's `Site` and the public `AccessKind` as data); the model
//! calls nothing above it.

use super::{AccessKind, Model};
use crate::types::Site;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Who performs an access, internally.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum AgentRec {
    Task { queue: u32, site: Site },
    Me { queue: u32, site: Site },
    Pfp { queue: u32, site: Site },
    Host { id: u64, line: Option<u32> },
}

/// One access record, interned (see [`AccIndex`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct AccRec {
    pub(super) agent: AgentRec,
    pub(super) op: &'static str,
    pub(super) kernel: Option<Arc<str>>,
    pub(super) kind: AccessKind,
}

impl PartialOrd for AccRec {
    fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
        None
    }
}

pub(super) type AccId = u32;

/// The site an access is recorded under: every execution of a list command is one access
/// (submission 0), so a program that runs a list many times keeps one record per command.
pub(super) fn one_site(site: Site) -> Site {
    if site.list.is_some() {
        Site {
            submission: 0,
            ..site
        }
    } else {
        site
    }
}

/// The index from a record to its id, holding each record only once (in `Model::accs`): the
/// id under the record's hash, and the rare records whose hash another record has under the
/// record itself. A list of `n` commands keeps `n` records or so (one per command and kind of
/// access), so a record held twice (as the vector's element and the map's key, about 70 bytes
/// each) was most of the validation layer's memory per command.
///
/// In front of it, `by_command` remembers the ids of list commands' records by list, queue and
/// command index (two per command: a value write's and its release's, a wait's): a command
/// list runs its commands in order, so these, and the records they point to (created in the
/// same order), are read sequentially, where the hash index costs a cache miss or two per
/// lookup once a long list's records outgrow the caches. An entry is only a hint: it keeps
/// what, besides its list, queue and command, makes the record (the stage, the kind and the
/// operation's name, by address), and one that does not match falls back to the index.
#[derive(Debug, Default)]
pub(super) struct AccIndex {
    by_hash: FxHashMap<u64, AccId>,
    collided: FxHashMap<AccRec, AccId>,
    by_command: FxHashMap<(u32, u32), Vec<Hints>>,
}

/// The remembered ids of a list command's records ([`AccIndex::by_command`]): per slot (a
/// release, anything else), the record of that list, queue and command whose stage and kind
/// are these and whose operation is `op`. A list command's record is made of nothing else
/// ([`one_site`] leaves its submission out), so a hint that matches needs no look at the
/// record. The operation is compared by address and length ([`std::ptr::eq`]): the same text
/// at another address only misses the hint. A command's records share their operation.
#[derive(Debug, Clone, Copy)]
struct Hints {
    ids: [AccId; 2],
    stages: [u8; 2],
    kinds: [AccessKind; 2],
    op: &'static str,
}

/// No id remembered in [`AccIndex::by_command`].
const NO_HINTS: Hints = Hints {
    ids: [AccId::MAX; 2],
    stages: [u8::MAX; 2],
    kinds: [AccessKind::Read; 2],
    op: "",
};

fn rec_hash(r: &AccRec) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(r)
}

impl Model {
    pub(super) fn acc(&mut self, r: AccRec) -> AccId {
        let h = rec_hash(&r);
        let first = self.acc_index.by_hash.get(&h).copied();
        if let Some(id) = first {
            if self.accs[id as usize] == r {
                return id;
            }
            if let Some(id) = self.acc_index.collided.get(&r) {
                return *id;
            }
        }
        let id = self.accs.len() as AccId;
        if first.is_some() {
            self.acc_index.collided.insert(r.clone(), id);
        } else {
            self.acc_index.by_hash.insert(h, id);
        }
        self.accs.push(r);
        id
    }

    pub(super) fn queue_acc(
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
        let r = AccRec {
            agent,
            op,
            kernel: None,
            kind,
        };
        let (Some(list), Some(command)) = (site.list, site.command) else {
            return self.acc(r);
        };
        let slot = usize::from(kind == AccessKind::Release);
        let command = command as usize;
        let hit = self
            .acc_index
            .by_command
            .get(&(list, queue))
            .and_then(|v| v.get(command))
            .filter(|h| {
                h.ids[slot] != AccId::MAX
                    && h.stages[slot] == stage
                    && h.kinds[slot] == kind
                    && std::ptr::eq(h.op, op)
            });
        if let Some(h) = hit {
            return h.ids[slot];
        }
        let id = self.acc(r);
        let v = self.acc_index.by_command.entry((list, queue)).or_default();
        if v.len() <= command {
            v.resize(command + 1, NO_HINTS);
        }
        let h = &mut v[command];
        if !std::ptr::eq(h.op, op) {
            // Another operation on this command (a list recorded again): the other slot's
            // id is of the old one.
            *h = NO_HINTS;
            h.op = op;
        }
        h.ids[slot] = id;
        h.stages[slot] = stage;
        h.kinds[slot] = kind;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hazard::MemoryModel;

    fn rec(command: u32) -> AccRec {
        AccRec {
            agent: AgentRec::Me {
                queue: 0,
                site: Site {
                    submission: 0,
                    list: Some(1),
                    command: Some(command),
                },
            },
            op: "write",
            kernel: None,
            kind: AccessKind::ValueWrite,
        }
    }

    /// One id per distinct record, the same id for an equal one, each record kept once; a
    /// record whose hash another one has still gets its own id.
    #[test]
    fn acc_interns_each_record_once() {
        let mut m = Model::new(MemoryModel::Validate, 0);
        let ids: Vec<AccId> = (0..100).map(|c| m.acc(rec(c))).collect();
        assert_eq!(ids, (0..100).collect::<Vec<AccId>>());
        assert_eq!(m.acc(rec(42)), 42);
        assert_eq!(m.accs.len(), 100);
        // A forced collision: another record filed under record 7's hash.
        let h = rec_hash(&rec(1000));
        m.acc_index.by_hash.insert(h, 7);
        assert_eq!(m.acc(rec(1000)), 100);
        assert_eq!(m.acc(rec(1000)), 100);
        assert_eq!(m.acc(rec(7)), 7);
        assert_eq!(m.accs.len(), 101);
    }

    /// The per-command hint returns the id the index would, and a hint that points to another
    /// record (another op on the same command and slot) falls back to the index.
    #[test]
    fn queue_acc_hint_never_changes_the_id() {
        let mut m = Model::new(MemoryModel::Validate, 0);
        let site = |submission, command| Site {
            submission,
            list: Some(3),
            command: Some(command),
        };
        let a = m.queue_acc(0, 1, site(0, 5), "write", AccessKind::ValueWrite);
        let r = m.queue_acc(0, 1, site(0, 5), "write", AccessKind::Release);
        assert_ne!(a, r);
        // Another execution (submission) of the same command: the same records.
        assert_eq!(
            m.queue_acc(0, 1, site(7, 5), "write", AccessKind::ValueWrite),
            a
        );
        assert_eq!(
            m.queue_acc(0, 1, site(7, 5), "write", AccessKind::Release),
            r
        );
        // The same slot with another op, then the first op again.
        let b = m.queue_acc(0, 1, site(0, 5), "wait", AccessKind::Wait);
        assert!(b != a && b != r);
        assert_eq!(
            m.queue_acc(0, 1, site(1, 5), "write", AccessKind::ValueWrite),
            a
        );
        assert_eq!(m.queue_acc(0, 1, site(1, 5), "wait", AccessKind::Wait), b);
        // After another op took the command's hints, the first op's release is its own
        // record still (not the other op's, whose stage and kind are the same).
        let w = m.queue_acc(0, 1, site(0, 5), "other-write", AccessKind::ValueWrite);
        let wr = m.queue_acc(0, 1, site(0, 5), "other-write", AccessKind::Release);
        assert!(w != a && wr != r);
        assert_eq!(
            m.queue_acc(0, 1, site(2, 5), "write", AccessKind::Release),
            r
        );
        assert_eq!(
            m.queue_acc(0, 1, site(2, 5), "other-write", AccessKind::Release),
            wr
        );
        // Another queue or stage has its own records.
        assert_ne!(
            m.queue_acc(1, 1, site(0, 5), "write", AccessKind::ValueWrite),
            a
        );
        assert_ne!(
            m.queue_acc(0, 0, site(0, 5), "write", AccessKind::ValueWrite),
            a
        );
        assert_eq!(m.accs.len(), 7);
    }
}
