//! The fence core: a 64-bit value, the waiters ordered by the value they wait for, and the
//! removal flag (F1-F10).
//!
//! State (`FenceState`, behind `state`): `value`, `removed`, `waiters`, `last_writer`.
//! `mirror` repeats `value` for lock-free reads (it becomes `u64::MAX` at removal); it is only
//! stored with the lock held, so a reader that sees it below a target and then takes the lock
//! reads the newest value. Transitions: a signal sets `value` and takes every waiter whose
//! target is `<= value` (they fire after the lock is released); removal sets `removed` and takes
//! every waiter. Both need the lock. A registration for a value already reached fires at once.
//!
//! Waiters live in a `BTreeMap` keyed by `(target, sequence)`, so a signal releasing `k` of `n`
//! waiters costs `O(k + log n)` and a timed-out waiter removes itself in `O(log n)`.

use super::notify::{spin_until, Notify, Parker};
use super::shim::{lock, AtomicBool, AtomicU64, Mutex, Ordering};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Who last wrote a fence or an address (for removal reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Writer {
    /// Never written since creation.
    #[default]
    Never,
    /// A host thread (pipefence host id, see [`crate::host`]).
    Host {
        /// The host id of the thread.
        host: u64,
    },
    /// A queue's engine, at a site (a command of a list, or a queue-level signal).
    Engine {
        /// Queue id.
        queue: u32,
        /// Where.
        site: crate::engine::Site,
    },
}

/// How a blocking wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitOutcome {
    /// The value reached the target (or a registration for it fired).
    Reached,
    /// The device was removed.
    Removed,
    /// The deadline passed first.
    TimedOut,
}

#[derive(Default)]
struct FenceState {
    value: u64,
    removed: bool,
    next_key: u64,
    waiters: BTreeMap<(u64, u64), Arc<dyn Notify>>,
    last_writer: Writer,
    last_write_ns: u64,
}

/// The shared state of one fence (opaque: reached through [`Fence`](crate::Fence)).
pub struct FenceCore {
    name: std::sync::OnceLock<Arc<str>>,
    mirror: AtomicU64,
    removed: AtomicBool,
    state: Mutex<FenceState>,
}

impl std::fmt::Debug for FenceCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FenceCore")
            .field("value", &self.mirror.load(Ordering::Relaxed))
            .field("removed", &self.removed.load(Ordering::Relaxed))
            .finish()
    }
}

/// The result of [`FenceCore::register`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registration {
    /// The target was already reached (or the device removed): the notifier was fired.
    Fired,
    /// Registered under this key (pass it to [`FenceCore::deregister`]).
    Pending(u64),
}

#[cfg(loom)]
thread_local! {
    /// Fault injection for the loom suite: when set, `register` skips its re-check of the
    /// value under the lock (a deliberately broken wake handshake that loom must catch).
    pub(crate) static BREAK_REGISTER_RECHECK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Spin budget before a blocked CPU wait parks (D8; none on one CPU).
const SPIN_NS: u64 = 20_000;

impl FenceCore {
    pub(crate) fn new(initial: u64) -> Self {
        FenceCore {
            name: std::sync::OnceLock::new(),
            mirror: AtomicU64::new(initial),
            removed: AtomicBool::new(false),
            state: Mutex::new(FenceState {
                value: initial,
                ..FenceState::default()
            }),
        }
    }

    /// Names the fence (once, at creation).
    pub(crate) fn set_name(&self, name: &str) {
        let _ = self.name.set(name.into());
    }

    /// The fence's name.
    pub fn name(&self) -> &str {
        self.name.get().map_or("fence", |n| n)
    }

    /// The completed value (F4): what the last signal wrote, `u64::MAX` after removal.
    #[inline]
    pub(crate) fn completed_value(&self) -> u64 {
        self.mirror.load(Ordering::Acquire)
    }

    /// Whether the device was removed (as seen by this fence).
    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// The value the last signal wrote, even after removal (for reports).
    pub(crate) fn value_before_removal(&self) -> u64 {
        lock(&self.state).value
    }

    /// The last writer and the time of the write (clock nanoseconds).
    pub(crate) fn last_writer(&self) -> (Writer, u64) {
        let s = lock(&self.state);
        (s.last_writer, s.last_write_ns)
    }

    /// Sets the value (F2: last write wins) and fires every waiter it satisfies. Returns
    /// `false` (and changes nothing) if the device was removed.
    pub(crate) fn signal(&self, value: u64, writer: Writer, now_ns: u64) -> bool {
        let fired = {
            let mut s = lock(&self.state);
            if s.removed {
                return false;
            }
            s.value = value;
            s.last_writer = writer;
            s.last_write_ns = now_ns;
            self.mirror.store(value, Ordering::Release);
            take_reached(&mut s.waiters, value)
        };
        fire(fired);
        true
    }

    /// Registers `notify` to fire once the value is `>= target` (F6: on crossing). If it is
    /// already reached, or the device was removed, fires it at once.
    pub(crate) fn register(&self, target: u64, notify: Arc<dyn Notify>) -> Registration {
        {
            let mut s = lock(&self.state);
            #[cfg(loom)]
            let skip_recheck = BREAK_REGISTER_RECHECK.with(|b| b.get());
            #[cfg(not(loom))]
            let skip_recheck = false;
            if skip_recheck || !(s.removed || s.value >= target) {
                let key = s.next_key;
                s.next_key += 1;
                s.waiters.insert((target, key), notify);
                return Registration::Pending(key);
            }
        }
        notify.notify();
        Registration::Fired
    }

    /// Removes a pending registration. Returns `true` if it was still pending (it will not
    /// fire), `false` if it already fired.
    pub(crate) fn deregister(&self, target: u64, key: u64) -> bool {
        lock(&self.state).waiters.remove(&(target, key)).is_some()
    }

    /// Device removal (F10): the value reads `u64::MAX`, later signals fail, every waiter fires.
    pub(crate) fn remove(&self) {
        let fired = {
            let mut s = lock(&self.state);
            if s.removed {
                return;
            }
            s.removed = true;
            self.removed.store(true, Ordering::Release);
            self.mirror.store(u64::MAX, Ordering::Release);
            std::mem::take(&mut s.waiters)
        };
        fire(fired.into_values());
    }

    /// Blocks until the value is `>= target`, the device is removed, or `deadline` passes
    /// (`None`: no deadline). Spins briefly first when more than one CPU is available.
    pub(crate) fn wait_until(&self, target: u64, deadline: Option<Instant>) -> WaitOutcome {
        if let Some(o) = self.poll_outcome(target) {
            return o;
        }
        let immediate = deadline.is_some_and(|d| d <= Instant::now());
        if immediate {
            return WaitOutcome::TimedOut;
        }
        if spin_until(SPIN_NS, || {
            self.is_removed() || self.mirror.load(Ordering::Acquire) >= target
        }) {
            if let Some(o) = self.poll_outcome(target) {
                return o;
            }
        }
        let parker = Arc::new(Parker::for_current_thread());
        let key = match self.register(target, parker.clone()) {
            Registration::Fired => return self.fired_outcome(),
            Registration::Pending(k) => k,
        };
        if parker.park(deadline) {
            return self.fired_outcome();
        }
        // Timed out: withdraw, unless a signal fired us in the meantime.
        if self.deregister(target, key) {
            WaitOutcome::TimedOut
        } else {
            self.fired_outcome()
        }
    }

    #[inline]
    fn poll_outcome(&self, target: u64) -> Option<WaitOutcome> {
        if self.is_removed() {
            Some(WaitOutcome::Removed)
        } else if self.mirror.load(Ordering::Acquire) >= target {
            // Re-check removal: the mirror reads u64::MAX once removed.
            Some(if self.is_removed() {
                WaitOutcome::Removed
            } else {
                WaitOutcome::Reached
            })
        } else {
            None
        }
    }

    /// The outcome of a registration that fired: removal takes precedence.
    fn fired_outcome(&self) -> WaitOutcome {
        if self.is_removed() {
            WaitOutcome::Removed
        } else {
            WaitOutcome::Reached
        }
    }
}

/// Takes every waiter whose target is `<= value`, lowest first: `O(k log n)` for `k` taken,
/// with no work proportional to the waiters left behind.
fn take_reached(
    waiters: &mut BTreeMap<(u64, u64), Arc<dyn Notify>>,
    value: u64,
) -> Vec<Arc<dyn Notify>> {
    let mut fired = Vec::new();
    while let Some(e) = waiters.first_entry() {
        if e.key().0 > value {
            break;
        }
        fired.push(e.remove());
    }
    fired
}

fn fire(fired: impl IntoIterator<Item = Arc<dyn Notify>>) {
    for n in fired {
        n.notify();
    }
}

/// A future slot: the waker to wake and whether the registration fired.
#[derive(Default)]
struct FutureSlot {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Notify for FutureSlot {
    fn notify(&self) {
        self.fired.store(true, Ordering::Release);
        let w = lock(&self.waker).take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// A future for `value >= target` (F7), woken by the signalling thread.
pub(crate) struct FenceWaitFuture {
    core: Arc<FenceCore>,
    target: u64,
    slot: Option<(u64, Arc<FutureSlot>)>,
}

impl FenceWaitFuture {
    pub(crate) fn new(core: Arc<FenceCore>, target: u64) -> Self {
        FenceWaitFuture {
            core,
            target,
            slot: None,
        }
    }
}

impl Future for FenceWaitFuture {
    type Output = WaitOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WaitOutcome> {
        let this = &mut *self;
        if let Some(o) = this.core.poll_outcome(this.target) {
            return Poll::Ready(o);
        }
        match &this.slot {
            Some((_, slot)) => {
                *lock(&slot.waker) = Some(cx.waker().clone());
                // Re-check after publishing the waker: a notify in between took no waker.
                if slot.fired.load(Ordering::Acquire) {
                    this.slot = None;
                    return Poll::Ready(this.core.fired_outcome());
                }
                Poll::Pending
            }
            None => {
                let slot = Arc::new(FutureSlot::default());
                *lock(&slot.waker) = Some(cx.waker().clone());
                match this.core.register(this.target, slot.clone()) {
                    Registration::Fired => Poll::Ready(this.core.fired_outcome()),
                    Registration::Pending(key) => {
                        this.slot = Some((key, slot));
                        Poll::Pending
                    }
                }
            }
        }
    }
}

impl Drop for FenceWaitFuture {
    fn drop(&mut self) {
        if let Some((key, _)) = self.slot.take() {
            self.core.deregister(self.target, key);
        }
    }
}
