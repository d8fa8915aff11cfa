//! Address watches: who to wake when a memory word changes (engines blocked in memory-value
//! waits, host `Buffer::wait_*` calls; D8, M4, H3).
//!
//! Protocol (no lost wakeups): a waiter registers, then reads the memory, then sleeps; a writer
//! stores, then calls [`AddressWatches::notify_word`]/[`notify_range`](AddressWatches::notify_range).
//! The SeqCst fences on both sides (Dekker's pattern) guarantee that either the waiter's read
//! sees the store or the writer sees the registration in `count`. Watches stay registered until
//! the waiter removes them: a notification means "re-check", not "satisfied".

use super::notify::Notify;
use super::shim::{fence, lock, AtomicUsize, Mutex, Ordering};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Watches keyed by 8-byte word address.
#[derive(Default)]
pub(crate) struct AddressWatches {
    count: AtomicUsize,
    map: Mutex<WatchMap>,
}

#[derive(Default)]
struct WatchMap {
    next_key: u64,
    by_word: BTreeMap<(u64, u64), Arc<dyn Notify>>,
}

impl std::fmt::Debug for AddressWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressWatches")
            .field("count", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

/// A registered watch; pass it back to [`AddressWatches::unwatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WatchKey {
    word: u64,
    key: u64,
}

impl AddressWatches {
    /// Watches the word containing `address`. The caller must read memory after this returns.
    pub(crate) fn watch(&self, address: u64, notify: Arc<dyn Notify>) -> WatchKey {
        let word = address & !7;
        let key = {
            let mut m = lock(&self.map);
            let key = m.next_key;
            m.next_key += 1;
            m.by_word.insert((word, key), notify);
            key
        };
        self.count.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        WatchKey { word, key }
    }

    /// Removes a watch.
    pub(crate) fn unwatch(&self, k: WatchKey) {
        if lock(&self.map).by_word.remove(&(k.word, k.key)).is_some() {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether anything watches any address (a hint for writers).
    #[inline]
    pub(crate) fn any(&self) -> bool {
        fence(Ordering::SeqCst);
        self.count.load(Ordering::SeqCst) != 0
    }

    /// Wakes the watchers of the word containing `address`. Call after the store.
    #[inline]
    pub(crate) fn notify_word(&self, address: u64) {
        if self.any() {
            let w = address & !7;
            self.notify_words(w, w + 8);
        }
    }

    /// Wakes the watchers of every word overlapping `[start, end)`. Call after the stores.
    #[inline]
    pub(crate) fn notify_range(&self, start: u64, end: u64) {
        if self.any() && end > start {
            self.notify_words(start & !7, end);
        }
    }

    /// Wakes every watcher (device removal).
    pub(crate) fn notify_all(&self) {
        self.notify_words(0, u64::MAX);
    }

    #[cold]
    fn notify_words(&self, start_word: u64, end: u64) {
        let hits: Vec<Arc<dyn Notify>> = {
            let m = lock(&self.map);
            m.by_word
                .range((start_word, 0)..(end, 0))
                .map(|(_, n)| n.clone())
                .collect()
        };
        for n in hits {
            n.notify();
        }
    }
}
