//! Host thread identities: each OS thread that calls into pipefence gets a host id, and may be
//! given a name, so reports can say which host thread last wrote a fence or an address. A
//! bottom module: every layer may name it; [`crate::host`] re-exports it.

use crate::sync::shim::{lock, Mutex};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::sync::OnceLock;

static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    static POSITION: Cell<u32> = const { Cell::new(0) };
}

/// Says where the calling host thread is in its own program (a scenario's line, say): a
/// narrated exploration's decisive steps name it (`explore::Narrated`). 0 clears it.
pub fn set_current_position(position: u32) {
    POSITION.with(|p| p.set(position));
}

/// The calling host thread's position ([`set_current_position`]), if it set one.
pub fn current_position() -> Option<u32> {
    POSITION.with(|p| Some(p.get()).filter(|&x| x != 0))
}

/// Names kept at most: a name is looked up while its device lives, so only recent ones matter,
/// and a process that runs many schedules (each with its own host threads) must not keep every
/// name it ever gave (about 0.6 KB per `check` schedule with six host threads before).
const MAX_NAMES: usize = 4096;

/// The names given, the least recently given first out.
#[derive(Default)]
struct Names {
    by_id: HashMap<u64, (String, u64)>,
    by_stamp: BTreeMap<u64, u64>,
    next_stamp: u64,
}

impl Names {
    fn set(&mut self, id: u64, name: &str) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some((_, old)) = self.by_id.insert(id, (name.to_string(), stamp)) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(stamp, id);
        while self.by_id.len() > MAX_NAMES {
            let Some((_, oldest)) = self.by_stamp.pop_first() else {
                break;
            };
            self.by_id.remove(&oldest);
        }
    }
}

fn names() -> &'static Mutex<Names> {
    static NAMES: OnceLock<Mutex<Names>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(Names::default()))
}

/// The calling thread's host id (assigned on first use, never 0).
pub fn current_id() -> u64 {
    CURRENT.with(|c| {
        let id = c.get();
        if id != 0 {
            return id;
        }
        let id = NEXT_ID.fetch_add(1, StdOrdering::Relaxed);
        c.set(id);
        id
    })
}

/// Names the calling host thread in reports (`host main`, `host poller`). The most recent
/// 4096 names are kept.
pub fn set_current_name(name: &str) {
    let id = current_id();
    lock(names()).set(id, name);
}

/// The name of a host thread: the one it was given (if it is among the most recent 4096), or
/// `thread#ID`.
pub fn name_of(id: u64) -> String {
    lock(names())
        .by_id
        .get(&id)
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| format!("thread#{id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_and_the_most_recent_kept() {
        let mut n = Names::default();
        for id in 0..(MAX_NAMES as u64 * 3) {
            n.set(id, "h");
            n.set(7, "main"); // renamed often: always among the most recent
        }
        assert_eq!(n.by_id.len(), MAX_NAMES);
        assert_eq!(n.by_stamp.len(), MAX_NAMES);
        assert_eq!(n.by_id.get(&7).map(|(s, _)| s.as_str()), Some("main"));
        assert!(n.by_id.contains_key(&(MAX_NAMES as u64 * 3 - 1)));
        assert!(!n.by_id.contains_key(&0));
    }

    /// Every schedule of `check` names its host threads anew: the names given stay bounded
    /// however many threads were ever named (before, every name was kept for good).
    #[test]
    fn names_given_by_many_threads_stay_bounded() {
        for batch in 0..(MAX_NAMES * 2 / 64 + 1) {
            let threads: Vec<_> = (0..64)
                .map(|i| std::thread::spawn(move || set_current_name(&format!("h{batch}.{i}"))))
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
        set_current_name("me");
        assert!(lock(names()).by_id.len() <= MAX_NAMES);
        assert_eq!(name_of(current_id()), "me");
    }
}
