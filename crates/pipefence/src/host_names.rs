//! Host thread identities: each OS thread that calls into pipefence gets a host id, and may be
//! given a name, so reports can say which host thread last wrote a fence or an address. A
//! bottom module: every layer may name it; [`crate::host`] re-exports it.

use crate::sync::shim::{lock, Mutex};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::sync::OnceLock;

static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

fn names() -> &'static Mutex<BTreeMap<u64, String>> {
    static NAMES: OnceLock<Mutex<BTreeMap<u64, String>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(BTreeMap::new()))
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

/// Names the calling host thread in reports (`host main`, `host poller`).
pub fn set_current_name(name: &str) {
    let id = current_id();
    lock(names()).insert(id, name.to_string());
}

/// The name of a host thread: the one it was given, its OS thread name, or `thread#ID`.
pub fn name_of(id: u64) -> String {
    lock(names())
        .get(&id)
        .cloned()
        .unwrap_or_else(|| format!("thread#{id}"))
}
