//! Queue-wait tickets (F5, Q3 of `docs/semantics.md`): a queue wait is satisfied for good by
//! the first signal that makes its fence reach the value after `Queue::wait` was called.
//!
//! `Queue::wait(f, v)` makes a [`Ticket`] and registers it on the fence at once (a value
//! already reached satisfies it at once). The fence's signal (or its release by the
//! application, F11, or the device's removal, F10) fires the registration: the ticket latches
//! `satisfied` and records what crossed it, then wakes the queue's engine. The engine's PFP
//! tests the latch, never the fence's current value, so a value that is lowered again before
//! the queue reaches the wait still satisfies it, and a wake-up can never be lost to a lower
//! value read on the re-check (F9).
//!
//! States of `satisfied`: `false` (pending) -> `true` (satisfied; never goes back). `by` is
//! written once, before `satisfied` is set (Release), and read after it is seen (Acquire).

use super::fence::FenceCore;
use super::notify::{Crossing, Notify};
use super::shim::{lock, AtomicBool, Mutex, Ordering};
use std::sync::Arc;

#[cfg(loom)]
thread_local! {
    /// Fault injection for the loom suite: when set, [`Ticket::is_satisfied`] re-reads the
    /// fence's current value instead of the latch (the behaviour before tickets, which lost
    /// wake-ups when the value was lowered before the engine re-checked).
    pub(crate) static BREAK_TICKET_LATCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One queue wait's ticket.
pub(crate) struct Ticket {
    fence: Arc<FenceCore>,
    target: u64,
    satisfied: AtomicBool,
    by: Mutex<Option<Crossing>>,
    /// The engine to wake once satisfied.
    waker: Arc<dyn Notify>,
    /// Its name in footprints (`footprint.rs`): the queue and submission of a queue wait, the
    /// host and wait of a host's.
    key: Option<(u32, u64)>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("fence", &self.fence.name())
            .field("target", &self.target)
            .field("satisfied", &self.satisfied.load(Ordering::Relaxed))
            .finish()
    }
}

impl Ticket {
    /// A ticket for `fence >= target`, registered on the fence now: from this moment the first
    /// crossing satisfies it. `waker` is notified once, when it is satisfied.
    /// `key` names it in footprints (`footprint.rs`); `None`: tests of it read the fence.
    pub(crate) fn issue(
        fence: Arc<FenceCore>,
        target: u64,
        waker: Arc<dyn Notify>,
        key: Option<(u32, u64)>,
    ) -> Arc<Self> {
        let t = Arc::new(Ticket {
            fence: fence.clone(),
            target,
            satisfied: AtomicBool::new(false),
            by: Mutex::new(None),
            waker,
            key,
        });
        let _ = fence.register(target, t.clone());
        t
    }

    /// Whether a signal (or the fence's release, or removal) satisfied the ticket.
    #[inline]
    pub(crate) fn is_satisfied(&self) -> bool {
        #[cfg(loom)]
        if BREAK_TICKET_LATCH.with(|b| b.get()) {
            return self.fence.completed_value() >= self.target;
        }
        self.note(crate::footprint::Kind::Read);
        self.satisfied.load(Ordering::Acquire)
    }

    /// Whether the ticket is satisfied, recording no access (a test the exploration does not
    /// see: the caller records what it read).
    #[inline]
    pub(crate) fn is_satisfied_unrecorded(&self) -> bool {
        self.satisfied.load(Ordering::Acquire)
    }

    /// Records a read of the ticket's fence, not of its latch (`footprint.rs`): a read that
    /// a signal of the fence can come after in another schedule (the latch's is the queue's
    /// plumbing, forced), for a wait that did not need this ticket.
    pub(crate) fn note_fence_read(&self) {
        self.fence.note(crate::footprint::Kind::Read);
    }

    /// Records an access to the latch (`footprint.rs`): the ticket's own object, or the fence
    /// for a ticket without a key.
    fn note(&self, kind: crate::footprint::Kind) {
        match self.key {
            Some((a, b)) => crate::footprint::record(crate::footprint::Obj::Ticket(a, b), kind),
            None => self.fence.note(kind),
        }
    }

    /// What satisfied it (`None` while pending, or when a removal did).
    pub(crate) fn satisfied_by(&self) -> Option<Crossing> {
        self.note(crate::footprint::Kind::Read);
        if !self.satisfied.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.by).clone()
    }

    fn satisfy(&self, by: Option<&Crossing>) {
        // Setting the latch commutes with setting it again (its registration and the signal
        // that crosses it, in either order, leave it set by that signal).
        self.note(crate::footprint::Kind::Update);
        if self.satisfied.load(Ordering::Acquire) {
            return;
        }
        if let Some(c) = by {
            *lock(&self.by) = Some(c.clone());
        }
        self.satisfied.store(true, Ordering::Release);
        self.waker.notify();
    }
}

impl Notify for Ticket {
    fn notify(&self) {
        self.satisfy(None);
    }

    fn crossed(&self, crossing: &Crossing) {
        self.satisfy(Some(crossing));
    }

    fn latch_key(&self) -> Option<(u32, u64)> {
        self.key
    }
}
