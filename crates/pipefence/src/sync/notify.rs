//! Wake-up targets: the [`Notify`] trait, the thread [`Parker`], and the spin policy.

use super::fence::Writer;
use super::shim::{current_thread, park_until, AtomicBool, AtomicU8, Ordering, Thread};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Something a fence signal, a memory write or a removal wakes. Implementations are cheap and
/// never block or take a fence lock (they are called after the lock is released).
pub(crate) trait Notify: Send + Sync {
    /// Wakes the waiter; it re-checks its condition itself.
    fn notify(&self);

    /// Wakes a fence waiter whose target a signal (or the fence's release) reached, with what
    /// reached it. Waiters that do not care about who crossed their target just wake.
    #[inline]
    fn crossed(&self, crossing: &Crossing) {
        let _ = crossing;
        self.notify();
    }

    /// A latch that a crossing sets for good, named for a reducing exploration
    /// (`footprint.rs`, [`crate::footprint::Obj::Ticket`]): its registration commutes with a
    /// signal that raises the value. `None` (the default): the registration writes the fence.
    fn latch_key(&self) -> Option<(u32, u64)> {
        None
    }
}

/// An opaque release token a fence signal carries (the hazard model's release clock, D5): a
/// queue wait acquires the release of the signal that satisfied its ticket (F5).
pub(crate) type Release = Arc<dyn std::any::Any + Send + Sync>;

/// What reached a fence waiter's target: the signal that crossed it (or the fence's release,
/// F11, or the device's removal, F10).
#[derive(Clone, Default)]
pub(crate) struct Crossing {
    /// Who wrote the value.
    pub(crate) writer: Writer,
    /// When (clock nanoseconds).
    pub(crate) ns: u64,
    /// The value it wrote (`u64::MAX` for a release or a removal).
    pub(crate) value: u64,
    /// The release the signal carried (hazard analysis only).
    pub(crate) release: Option<Release>,
    /// The fence was released by the application (F11), not signalled.
    pub(crate) fence_released: bool,
}

impl std::fmt::Debug for Crossing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crossing")
            .field("writer", &self.writer)
            .field("ns", &self.ns)
            .field("value", &self.value)
            .field("fence_released", &self.fence_released)
            .finish()
    }
}

/// A one-shot wake flag for one blocked thread.
///
/// States of `notified`: `false` (waiting) -> `true` (notified, set by [`Notify::notify`]). The
/// waiter re-checks the flag after every (possibly spurious) wake-up; no lock is needed because
/// the flag is the only state and the unpark token covers the race between the check and park.
#[derive(Debug)]
pub(crate) struct Parker {
    thread: Thread,
    notified: AtomicBool,
}

impl Parker {
    /// A parker for the calling thread.
    pub(crate) fn for_current_thread() -> Self {
        Parker {
            thread: current_thread(),
            notified: AtomicBool::new(false),
        }
    }

    /// Whether [`Notify::notify`] was called.
    #[inline]
    pub(crate) fn is_notified(&self) -> bool {
        self.notified.load(Ordering::Acquire)
    }

    /// Blocks the calling thread (which must be the one that created the parker) until
    /// notified or until `deadline`. Returns whether it was notified.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.is_notified() {
                return true;
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return self.is_notified();
                }
            }
            park_until(deadline);
        }
    }
}

impl Notify for Parker {
    #[inline]
    fn notify(&self) {
        self.notified.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Whether blocked waits may spin briefly before parking: only when the process may run on
/// more than one CPU (D8; spinning on one CPU only delays the thread that would wake us).
pub(crate) fn spin_allowed() -> bool {
    !cfg!(loom) && cpus() > 1
}

/// The CPUs the process may run on (read once: asking costs a dozen system calls, too many
/// for every device of an exploration).
pub(crate) fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Spin budget before a blocked wait parks: a CPU fence wait, a wait for several fences, an
/// engine with nothing to do (D8; none on one CPU).
pub(crate) const SPIN_NS: u64 = 20_000;

/// Spins for at most `budget_ns` while `done()` is false; returns `done()`'s last answer.
#[inline]
pub(crate) fn spin_until(budget_ns: u64, mut done: impl FnMut() -> bool) -> bool {
    if !spin_allowed() {
        return done();
    }
    let start = Instant::now();
    let mut i: u32 = 0;
    loop {
        if done() {
            return true;
        }
        std::hint::spin_loop();
        i = i.wrapping_add(1);
        if i.is_multiple_of(64) && crate::clock::duration_ns(start.elapsed()) >= budget_ns {
            return done();
        }
    }
}

/// A wake of a parked engine that an engine thread took on instead of unparking the engine's
/// thread ([`defer_wakes`]): the waker (compared, never read through: the engine may be gone
/// by the time the list is read) and its thread, to unpark when the wake is handed on.
pub(crate) struct Deferred {
    pub(crate) waker: *const EngineWaker,
    pub(crate) thread: Thread,
}

#[cfg(not(loom))]
thread_local! {
    /// The wakes of parked engines this thread took on ([`defer_wakes`]); `None` on threads
    /// that do not (hosts, shader workers).
    static DEFERRED: std::cell::RefCell<Option<Vec<Deferred>>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(loom)]
loom::thread_local! {
    static DEFERRED: std::cell::RefCell<Option<Vec<Deferred>>> = std::cell::RefCell::new(None);
}

/// From now on, a wake that this thread makes of a parked engine leaves the engine's thread
/// parked and is kept in this thread's list ([`take_deferred`]) instead: the thread (an engine
/// thread about to run out of work of its own) steps that engine itself, or hands the wake on
/// with [`EngineWaker::wake_thread`] (the threaded driver). The wake's state change is made as
/// usual (`NOTIFIED`), so every other waker leaves that engine to this thread; it must hand on
/// or serve every wake in its list.
pub(crate) fn defer_wakes() {
    DEFERRED.with(|d| *d.borrow_mut() = Some(Vec::new()));
}

/// From now on this thread makes its wakes at once again; the ones it kept are moved into
/// `out` (to hand on).
pub(crate) fn stop_deferring(out: &mut Vec<Deferred>) {
    DEFERRED.with(|d| {
        if let Some(mut v) = d.borrow_mut().take() {
            out.append(&mut v);
        }
    });
}

/// Whether this thread keeps wakes of parked engines that it has not handed on or served.
#[inline]
pub(crate) fn has_deferred() -> bool {
    DEFERRED.with(|d| d.borrow().as_ref().is_some_and(|v| !v.is_empty()))
}

/// Moves the wakes this thread keeps into `out`.
pub(crate) fn take_deferred(out: &mut Vec<Deferred>) {
    DEFERRED.with(|d| {
        if let Some(v) = d.borrow_mut().as_mut() {
            out.append(v);
        }
    });
}

/// Keeps the wake of `w` (parked, thread `t`) when this thread defers wakes.
#[inline]
fn defer(w: &EngineWaker, t: &Thread) -> bool {
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(v) => {
            v.push(Deferred {
                waker: w,
                thread: t.clone(),
            });
            true
        }
        None => false,
    })
}

/// Wakes an engine thread: a re-armable state word plus the thread's unpark token.
///
/// States of `state`: [`RUNNING`] (nothing new since the engine cleared it), [`NOTIFIED`]
/// (something may have changed; set by [`wake`](Self::wake)), [`PARKING`] (the engine found
/// nothing to do and is about to park or parked), [`PARKING_HELD`] (the same, with its PFP
/// held by a queue wait, whose ticket wakes it). The engine thread clears it to `RUNNING`
/// before stepping ([`clear`](Self::clear)) and parks only after moving it from `RUNNING` to
/// `PARKING` or `PARKING_HELD` ([`begin_park`](Self::begin_park)); a wake that finds `RUNNING`
/// or `NOTIFIED` does not unpark (the engine is running and will step again before it parks),
/// one that finds a parking state does. The unpark token covers a wake between `begin_park` and
/// the park. [`wake_for_submission`](Self::wake_for_submission) leaves a `PARKING_HELD` engine
/// parked: what was submitted queues behind the held wait, so stepping could not start it. No
/// transition needs a lock: every one is a single read-modify-write.
#[derive(Debug, Default)]
pub(crate) struct EngineWaker {
    state: AtomicU8,
    thread: OnceLock<Thread>,
}

/// [`EngineWaker`]: the engine is running, nothing new since it cleared the state.
const RUNNING: u8 = 0;
/// [`EngineWaker`]: a wake arrived since the engine cleared the state.
const NOTIFIED: u8 = 1;
/// [`EngineWaker`]: the engine is parking (or parked); a wake must unpark it.
const PARKING: u8 = 2;
/// [`EngineWaker`]: parking (or parked) with the PFP held by a queue wait: a wake must unpark
/// it, a submission need not.
const PARKING_HELD: u8 = 3;

impl EngineWaker {
    /// The thread to unpark (the engine thread, once it started).
    pub(crate) fn set_thread(&self, t: Thread) {
        let _ = self.thread.set(t);
    }

    /// Marks the engine as having something to re-check, and unparks it if it is parking: a
    /// running engine steps again before it parks, so a system call to wake it would be wasted.
    #[inline]
    pub(crate) fn wake(&self) {
        if self.state.swap(NOTIFIED, Ordering::SeqCst) >= PARKING {
            if let Some(t) = self.thread.get() {
                if !defer(self, t) {
                    t.unpark();
                }
            }
        }
    }

    /// Wakes the engine's own thread whatever the state (an engine stepped by another
    /// thread that needs its own: [`take_deferred`]).
    pub(crate) fn wake_thread(&self) {
        self.state.swap(NOTIFIED, Ordering::SeqCst);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Parks the engine with a plain store, overwriting any wake since the clear: the broken
    /// hand-off that the loom suite must catch.
    #[cfg(loom)]
    pub(crate) fn force_parking_for_test(&self) {
        self.state.store(PARKING_HELD, Ordering::SeqCst);
    }

    /// Whether a wake arrived since the last clear (the engine thread's own waker, read by
    /// the thread: then it steps its own engine before anything else; the loom models check
    /// it too).
    #[inline]
    pub(crate) fn notified(&self) -> bool {
        self.state.load(Ordering::Acquire) == NOTIFIED
    }

    /// Wakes the engine for a submission just queued (under the engine lock, before this call),
    /// unless it is parked with its PFP held by a queue wait: the submission queues behind that
    /// wait, and the wait's ticket wakes the engine, which then sees the submission too.
    /// The test is a read-modify-write (it writes back `PARKING_HELD`): the wake that later
    /// releases the engine swaps the state after it, so the engine's clear acquires what the
    /// submitter released before the test (the submission itself).
    #[inline]
    pub(crate) fn wake_for_submission(&self) {
        let held = self.state.compare_exchange(
            PARKING_HELD,
            PARKING_HELD,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        if held.is_err() {
            self.wake();
        }
    }

    /// Clears the state (the engine thread, before stepping). A read-modify-write: clearing a
    /// wake acquires what the waker released before it (a ticket's latch, say), so the step
    /// that follows sees it; a plain store could overwrite the wake and leave the step reading
    /// the latch stale, then park for good (found by loom).
    #[inline]
    pub(crate) fn clear(&self) {
        self.state.swap(RUNNING, Ordering::AcqRel);
    }

    /// Spins for at most [`SPIN_NS`] (not at all on one CPU, [`spin_allowed`]) until a wake
    /// arrives; returns whether one did. Only reads the state: a wake meanwhile finds the
    /// engine running and costs its waker no system call, and the engine steps again.
    #[inline]
    pub(crate) fn spin_for_wake(&self) -> bool {
        spin_until(SPIN_NS, || self.state.load(Ordering::Acquire) != RUNNING)
    }

    /// The engine thread is about to park: returns `false` (and the engine must step again
    /// instead of parking) if a wake arrived since the last clear; otherwise later wakes
    /// unpark the thread, until the next [`clear`](Self::clear). `held`: its PFP is held by a
    /// queue wait (then submissions do not wake it, see
    /// [`wake_for_submission`](Self::wake_for_submission)).
    #[inline]
    pub(crate) fn begin_park(&self, held: bool) -> bool {
        let to = if held { PARKING_HELD } else { PARKING };
        self.state
            .compare_exchange(RUNNING, to, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

impl Notify for EngineWaker {
    fn notify(&self) {
        self.wake();
    }
}
