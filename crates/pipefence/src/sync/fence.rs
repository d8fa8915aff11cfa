//! The fence core: a 64-bit value, the waiters ordered by the value they wait for, and the
//! removal and release flags (F1-F11 of `docs/semantics.md`).
//!
//! State (`FenceState`, behind `state`): `value`, `removed`, `released`, `waiters`,
//! `last_writer`, `last_release`. `mirror` repeats `value` for lock-free reads (it becomes
//! `u64::MAX` at removal); it is only stored with the lock held, so a reader that sees it below
//! a target and then takes the lock reads the newest value. Transitions: a signal sets `value`
//! and takes every waiter whose target is `<= value` (they fire after the lock is released,
//! each told which signal crossed its target); removal sets `removed` and takes every waiter;
//! the application's release of its last handle (F11) sets `released` and takes every waiter
//! as if the value reached `u64::MAX`, and later signals are discarded. All need the lock. A
//! registration for a value already reached (or on a removed or released fence) fires at once.
//!
//! Waiters live in a [`Waiters`] set ordered by `(target, sequence)`: a signal releasing `k` of
//! `n` waiters costs `O(k + log n)` (lowest first, nothing proportional to the waiters left
//! behind) and a timed-out waiter removes itself in `O(log n)` (amortized).

use super::notify::{spin_until, Crossing, Notify, Parker, Release, SPIN_NS};
use super::shim::{lock, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::footprint::{self, Kind, Obj};
use std::collections::{BTreeMap, VecDeque};
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
        site: crate::types::Site,
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
    /// The application dropped its last handle (F11).
    released: bool,
    next_key: u64,
    waiters: Waiters,
    last_writer: Writer,
    last_write_ns: u64,
    /// The release the last signal carried (hazard analysis only).
    last_release: Option<Release>,
}

impl FenceState {
    /// What reached a target that is already reached now.
    fn current_crossing(&self) -> Crossing {
        if self.released || self.removed {
            return Crossing {
                value: u64::MAX,
                fence_released: self.released,
                ..Crossing::default()
            };
        }
        Crossing {
            writer: self.last_writer,
            ns: self.last_write_ns,
            value: self.value,
            release: self.last_release.clone(),
            fence_released: false,
        }
    }

    /// Whether a registration for `target` would fire at once.
    fn reached(&self, target: u64) -> bool {
        self.removed || self.released || self.value >= target
    }
}

/// The shared state of one fence (opaque: reached through [`Fence`](crate::Fence)).
pub struct FenceCore {
    name: std::sync::OnceLock<Arc<str>>,
    /// The fence's id on its device (`footprint.rs` keys; `u64::MAX` until set).
    id: std::sync::atomic::AtomicU64,
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

impl FenceCore {
    pub(crate) fn new(initial: u64) -> Self {
        FenceCore {
            name: std::sync::OnceLock::new(),
            id: std::sync::atomic::AtomicU64::new(u64::MAX),
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

    /// Sets the fence's id on its device (at creation).
    pub(crate) fn set_id(&self, id: u64) {
        self.id.store(id, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records an access for a reducing exploration (`footprint.rs`).
    #[inline]
    pub(crate) fn note(&self, kind: Kind) {
        footprint::record(Obj::Fence(self.footprint_id()), kind);
    }

    /// The fence's id in footprints.
    #[inline]
    fn footprint_id(&self) -> u64 {
        self.id.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The fence's name.
    pub fn name(&self) -> &str {
        self.name.get().map_or("fence", |n| n)
    }

    /// The completed value (F4): what the last signal wrote, `u64::MAX` after removal.
    #[inline]
    pub(crate) fn completed_value(&self) -> u64 {
        self.note(Kind::Read);
        self.mirror.load(Ordering::Acquire)
    }

    /// Whether the device was removed (as seen by this fence).
    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// The value the last signal wrote, even after removal (for reports).
    pub(crate) fn value_before_removal(&self) -> u64 {
        self.note(Kind::Read);
        lock(&self.state).value
    }

    /// The last writer and the time of the write (clock nanoseconds).
    pub(crate) fn last_writer(&self) -> (Writer, u64) {
        let s = lock(&self.state);
        (s.last_writer, s.last_write_ns)
    }

    /// Sets the value (F2: last write wins) and fires every waiter it satisfies. Returns
    /// `false` (and changes nothing) if the device was removed. On a released fence (F11) the
    /// signal is discarded (and returns `true`: nothing is wrong).
    pub(crate) fn signal(&self, value: u64, writer: Writer, now_ns: u64) -> bool {
        self.signal_with(value, writer, now_ns, None)
    }

    /// [`signal`](Self::signal) carrying a release token (the hazard model's release clock),
    /// which the waiters it satisfies are told of.
    pub(crate) fn signal_with(
        &self,
        value: u64,
        writer: Writer,
        now_ns: u64,
        release: Option<Release>,
    ) -> bool {
        self.note(Kind::Write);
        let fired = {
            let mut s = lock(&self.state);
            if s.removed {
                return false;
            }
            if s.released {
                return true;
            }
            if value < s.value {
                // A latch registered for a target it takes back below fires at once if it
                // registers before this signal, waits if after (`register_inner`).
                footprint::record(
                    Obj::FenceDown(self.footprint_id(), value + 1, s.value),
                    Kind::Write,
                );
            }
            self.note_change(s.value, value);
            s.value = value;
            s.last_writer = writer;
            s.last_write_ns = now_ns;
            s.last_release = release;
            self.mirror.store(value, Ordering::Release);
            if s.waiters.is_empty() {
                // Nothing to fire (a queue's progress fence, mostly): skip building the set.
                return true;
            }
            let mut fired = s.waiters.take_reached(value);
            if fired.first.is_some() {
                fired.crossing = Some(s.current_crossing());
            }
            fired
        };
        fired.fire();
        true
    }

    /// Records what a signal (or the release) that takes the value from `old` to `new` changes
    /// for latches. A latch registered for a target reached before and after it fires at once
    /// either way, told of the signal before this one if it registers first, of this one if
    /// after ([`Obj::FenceHeld`]); a latch registered for a target it crosses is set by it or,
    /// registered after it, awaits it: one schedule either way ([`Obj::FenceCross`]).
    fn note_change(&self, old: u64, new: u64) {
        let id = self.footprint_id();
        footprint::record(Obj::FenceHeld(id, 0, old.min(new)), Kind::Write);
        if new > old {
            footprint::record(Obj::FenceCross(id, old + 1, new), Kind::Write);
        }
    }

    /// Records that a latch about to be registered for `target` depends on which signal it
    /// is told of (a queue wait acquires that signal's release, D5): the last signal if the
    /// target is reached now, else the one that crosses it. A signal that keeps the target
    /// reached changes that, whether the target is reached at the registration or not:
    /// registered while it is below, before the crossing signal, the latch comes before that
    /// one too, and a schedule where it comes after both is another ([`Obj::FenceHeld`]).
    /// The crossing signal itself commutes with the registration ([`Obj::FenceCross`]).
    pub(crate) fn note_held(&self, target: u64) {
        footprint::record(
            Obj::FenceHeld(self.footprint_id(), target, target),
            Kind::Read,
        );
    }

    /// Registers `notify` to fire once the value is `>= target` (F6: on crossing). If it is
    /// already reached, or the device was removed, or the fence released, fires it at once.
    pub(crate) fn register(&self, target: u64, notify: Arc<dyn Notify>) -> Registration {
        self.register_inner(target, notify, false)
    }

    /// [`register`](Self::register), unless the same notifier is already pending for the same
    /// target (F6: one event registered twice for one value is set once). Returns
    /// `Pending` with the existing key in that case.
    pub(crate) fn register_once(&self, target: u64, notify: Arc<dyn Notify>) -> Registration {
        self.register_inner(target, notify, true)
    }

    fn register_inner(&self, target: u64, notify: Arc<dyn Notify>, once: bool) -> Registration {
        // A latch's registration (`Notify::latch_key`) touches only its latch while it waits:
        // a signal that raises the value across its target sets the latch whether it comes
        // before the registration (which then fires at once) or after (which fires it), and a
        // signal below the target leaves it pending either way. When the target is already
        // reached it reads what the last signal wrote (the crossing it is told of), which only
        // a signal that found the target reached and left it so changes ([`Obj::FenceHeld`]).
        let latch = notify.latch_key();
        if let Some((a, b)) = latch {
            let id = self.footprint_id();
            footprint::record(Obj::Ticket(a, b), Kind::Update);
            footprint::record(Obj::FenceDown(id, target, target), Kind::Read);
        } else {
            self.note(Kind::Write);
        }
        let crossing = {
            let mut s = lock(&self.state);
            #[cfg(loom)]
            let skip_recheck = BREAK_REGISTER_RECHECK.with(|b| b.get());
            #[cfg(not(loom))]
            let skip_recheck = false;
            if skip_recheck || !s.reached(target) {
                if once {
                    if let Some(key) = s.waiters.find(target, &notify) {
                        return Registration::Pending(key);
                    }
                }
                let key = s.next_key;
                s.next_key += 1;
                s.waiters.insert(target, key, notify);
                return Registration::Pending(key);
            }
            if latch.is_some() {
                // What crossed the target: the last signal (or the release). Registered
                // before the signal that crossed it, the latch would hold the same signal,
                // but not in every schedule that follows: a host's wait for any of several
                // fences registered first can pass on another fence before this signal. So
                // the registration reads the crossing ([`Obj::FenceCross`]), and the search
                // reverses it with that signal.
                let id = self.footprint_id();
                footprint::record(Obj::FenceCross(id, target, target), Kind::Read);
            }
            s.current_crossing()
        };
        notify.crossed(&crossing);
        Registration::Fired
    }

    /// The application dropped its last handle of the fence (F11): every waiter fires as if
    /// the value reached `u64::MAX`, later registrations fire at once, later signals are
    /// discarded. The device is not affected. Idempotent.
    pub(crate) fn release(&self) {
        self.note(Kind::Write);
        let (mut fired, crossing) = {
            let mut s = lock(&self.state);
            if s.released || s.removed {
                return;
            }
            // The release crosses every target above the value (`register_inner`).
            self.note_change(s.value, u64::MAX);
            s.released = true;
            (std::mem::take(&mut s.waiters), s.current_crossing())
        };
        let mut f = fired.take_reached(u64::MAX);
        f.crossing = Some(crossing);
        f.fire();
    }

    /// Removes a pending registration. Returns `true` if it was still pending (it will not
    /// fire), `false` if it already fired.
    pub(crate) fn deregister(&self, target: u64, key: u64) -> bool {
        self.note(Kind::Write);
        let (pending, dropped) = lock(&self.state).waiters.remove(target, key);
        drop(dropped);
        pending
    }

    /// Device removal (F10): the value reads `u64::MAX`, later signals fail, every waiter fires.
    pub(crate) fn remove(&self) {
        let mut fired = {
            let mut s = lock(&self.state);
            if s.removed {
                return;
            }
            s.removed = true;
            self.removed.store(true, Ordering::Release);
            self.mirror.store(u64::MAX, Ordering::Release);
            std::mem::take(&mut s.waiters)
        };
        fired.take_reached(u64::MAX).fire();
    }

    /// Blocks until the value is `>= target`, the device is removed, or `deadline` passes
    /// (`None`: no deadline). The wait registers first, so every crossing after the call
    /// satisfies it, even one lowered again at once (F5, F6); then it spins briefly on its
    /// registration when more than one CPU is available, then parks.
    pub(crate) fn wait_until(&self, target: u64, deadline: Option<Instant>) -> WaitOutcome {
        if let Some(o) = self.poll_outcome(target) {
            return o;
        }
        let immediate = deadline.is_some_and(|d| d <= Instant::now());
        if immediate {
            return WaitOutcome::TimedOut;
        }
        let parker = Arc::new(Parker::for_current_thread());
        let key = match self.register(target, parker.clone()) {
            Registration::Fired => return self.fired_outcome(),
            Registration::Pending(k) => k,
        };
        if spin_until(SPIN_NS, || parker.is_notified()) || parker.park(deadline) {
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

/// A pending registration in [`Waiters::queue`]; `notify` is `None` once withdrawn.
struct Slot {
    target: u64,
    key: u64,
    notify: Option<Arc<dyn Notify>>,
}

/// Queue capacity (in slots) above which an emptied queue hands its buffer back.
const SHRINK_ABOVE: usize = 1024;

/// The pending registrations of a fence, ordered by `(target, key)` (keys grow with each
/// registration, so a target's waiters fire in registration order).
///
/// Fences count up, so registrations normally arrive in target order: those go to the back of
/// `queue`, a ring buffer sorted by `(target, key)`, and a signal pops its front: `O(1)` per
/// released waiter, touching only the slots it releases (32 bytes each, contiguous). A
/// `BTreeMap` alone (what this replaced) descends from its root for each waiter popped and
/// rebalances leaves as it goes, reading and moving the neighbouring waiters: about 4x the
/// cost per released waiter, and about 64 bytes per pending one (against 32 to 64 here, as the
/// ring buffer's capacity doubles). A registration whose target is below the queue's last goes
/// to `others`, a `BTreeMap` (`O(log n)` to insert and to take). A signal takes the reached
/// waiters of both, merged lowest first.
///
/// Withdrawing a registration (a timed-out wait, a dropped future) from `others` is a B-tree
/// removal; from `queue` it finds the slot by binary search and leaves a tombstone, popped
/// at once from either end and otherwise when a signal reaches it, or when tombstones make up
/// more than half of the queue (then the queue is compacted: `O(n)` after at least `n / 2`
/// withdrawals, so `O(log n)` amortized per withdrawal). The queue's buffer shrinks when it is
/// a quarter full, so memory stays proportional to the waiters pending.
#[derive(Default)]
struct Waiters {
    queue: VecDeque<Slot>,
    /// Tombstones in `queue`.
    withdrawn: usize,
    others: BTreeMap<(u64, u64), Arc<dyn Notify>>,
}

impl Waiters {
    /// Whether no registration is pending (nor a tombstone left).
    #[inline]
    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.others.is_empty()
    }

    fn insert(&mut self, target: u64, key: u64, notify: Arc<dyn Notify>) {
        if self.queue.back().is_none_or(|b| b.target <= target) {
            self.queue.push_back(Slot {
                target,
                key,
                notify: Some(notify),
            });
        } else {
            self.others.insert((target, key), notify);
        }
    }

    /// The key of a pending registration of the same notifier (same allocation) for `target`.
    fn find(&self, target: u64, notify: &Arc<dyn Notify>) -> Option<u64> {
        let same = |n: &Arc<dyn Notify>| std::ptr::addr_eq(Arc::as_ptr(n), Arc::as_ptr(notify));
        if let Some(((_, k), _)) = self
            .others
            .range((target, 0)..=(target, u64::MAX))
            .find(|(_, n)| same(n))
        {
            return Some(*k);
        }
        let start = self.queue.partition_point(|s| s.target < target);
        self.queue
            .range(start..)
            .take_while(|s| s.target == target)
            .find(|s| s.notify.as_ref().is_some_and(same))
            .map(|s| s.key)
    }

    /// Withdraws a registration: whether it was pending, and what to drop after the lock is
    /// released (the notifier, and a buffer given back).
    fn remove(&mut self, target: u64, key: u64) -> (bool, Fired) {
        let mut dropped = Fired::default();
        if !self.others.is_empty() {
            if let Some(n) = self.others.remove(&(target, key)) {
                dropped.push(n);
                return (true, dropped);
            }
        }
        let Ok(i) = self
            .queue
            .binary_search_by(|s| (s.target, s.key).cmp(&(target, key)))
        else {
            return (false, dropped);
        };
        let Some(n) = self.queue[i].notify.take() else {
            return (false, dropped);
        };
        dropped.push(n);
        self.withdrawn += 1;
        while self.queue.back().is_some_and(|s| s.notify.is_none()) {
            self.queue.pop_back();
            self.withdrawn -= 1;
        }
        while self.queue.front().is_some_and(|s| s.notify.is_none()) {
            self.queue.pop_front();
            self.withdrawn -= 1;
        }
        if self.withdrawn > self.queue.len() / 2 {
            self.queue.retain(|s| s.notify.is_some());
            self.withdrawn = 0;
        }
        self.shrink(&mut dropped);
        (true, dropped)
    }

    /// Takes every waiter whose target is `<= value`, lowest first: `O(1)` for each taken from
    /// `queue`, `O(log n)` for each taken from `others`, nothing for the waiters left behind.
    fn take_reached(&mut self, value: u64) -> Fired {
        let mut fired = Fired::default();
        loop {
            let q = self.queue.front().filter(|s| s.target <= value);
            let o = match self.others.first_key_value() {
                Some((&(t, k), _)) if t <= value => Some((t, k)),
                _ => None,
            };
            let from_queue = match (q, o) {
                (None, None) => break,
                (Some(s), Some(o)) => (s.target, s.key) < o,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if from_queue {
                if let Some(n) = self.queue.pop_front().and_then(|s| s.notify) {
                    fired.push(n);
                } else {
                    self.withdrawn -= 1;
                }
            } else if let Some((_, n)) = self.others.pop_first() {
                fired.push(n);
            }
        }
        self.shrink(&mut fired);
        fired
    }

    /// Gives back a large queue buffer that is at most a quarter full (into `out`, which drops
    /// it after the lock is released). Moving the `len` slots left is paid for by the at least
    /// `len` pops since the buffer last grew or shrank.
    fn shrink(&mut self, out: &mut Fired) {
        let cap = self.queue.capacity();
        if cap > SHRINK_ABOVE && self.queue.len() <= cap / 4 {
            let mut smaller = VecDeque::with_capacity(self.queue.len() * 2);
            smaller.extend(self.queue.drain(..));
            out.buffer = std::mem::replace(&mut self.queue, smaller);
        }
    }
}

/// Waiters taken from a fence, to fire (or drop) after its lock is released. The first one is
/// held inline, so releasing one waiter allocates nothing.
#[derive(Default)]
struct Fired {
    first: Option<Arc<dyn Notify>>,
    rest: Vec<Arc<dyn Notify>>,
    /// A queue buffer given back by [`Waiters::shrink`] (freed outside the lock).
    buffer: VecDeque<Slot>,
    /// What crossed their targets (`None`: a removal, they are only woken).
    crossing: Option<Crossing>,
}

impl Fired {
    #[inline]
    fn push(&mut self, n: Arc<dyn Notify>) {
        if self.first.is_none() {
            self.first = Some(n);
        } else {
            self.rest.push(n);
        }
    }

    /// Fires them, lowest target first.
    fn fire(self) {
        match &self.crossing {
            Some(c) => {
                for n in self.first.into_iter().chain(self.rest) {
                    n.crossed(c);
                }
            }
            None => {
                for n in self.first.into_iter().chain(self.rest) {
                    n.notify();
                }
            }
        }
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// A notifier that records its id in a shared log when fired.
    struct Rec(u64, Arc<StdMutex<Vec<u64>>>);

    impl Notify for Rec {
        fn notify(&self) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    fn fired_ids(w: &mut Waiters, value: u64, log: &Arc<StdMutex<Vec<u64>>>) -> Vec<u64> {
        w.take_reached(value).fire();
        std::mem::take(&mut *log.lock().unwrap())
    }

    /// Registrations in and out of target order are released lowest first (by target, then
    /// registration order), each once, and only when reached.
    #[test]
    fn waiters_release_lowest_first_across_queue_and_tree() {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let mut w = Waiters::default();
        // (target, id); keys are the registration order.
        let regs = [
            (5, 0),
            (7, 1),
            (3, 2),
            (7, 3),
            (9, 4),
            (1, 5),
            (5, 6),
            (12, 7),
        ];
        for (key, &(t, id)) in regs.iter().enumerate() {
            w.insert(t, key as u64, Arc::new(Rec(id, log.clone())));
        }
        assert!(!w.others.is_empty() && !w.queue.is_empty());
        assert_eq!(fired_ids(&mut w, 0, &log), Vec::<u64>::new());
        assert_eq!(fired_ids(&mut w, 5, &log), [5, 2, 0, 6]);
        assert_eq!(fired_ids(&mut w, 5, &log), Vec::<u64>::new());
        assert_eq!(fired_ids(&mut w, 8, &log), [1, 3]);
        assert_eq!(fired_ids(&mut w, u64::MAX, &log), [4, 7]);
        assert!(w.queue.is_empty() && w.others.is_empty() && w.withdrawn == 0);
    }

    /// A withdrawn registration never fires; withdrawing twice, or after it fired, says so.
    #[test]
    fn withdrawn_waiters_do_not_fire() {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let mut w = Waiters::default();
        for key in 0..10u64 {
            w.insert(key + 1, key, Arc::new(Rec(key, log.clone())));
        }
        w.insert(2, 10, Arc::new(Rec(10, log.clone()))); // out of order: in the tree
        assert!(w.remove(4, 3).0);
        assert!(!w.remove(4, 3).0);
        assert!(w.remove(2, 10).0);
        assert!(!w.remove(2, 10).0);
        assert!(!w.remove(4, 99).0);
        assert!(w.remove(10, 9).0); // the last: popped at once
        assert_eq!(w.queue.len(), 9);
        assert_eq!(fired_ids(&mut w, 5, &log), [0, 1, 2, 4]);
        assert!(!w.remove(1, 0).0, "already fired");
        assert_eq!(fired_ids(&mut w, u64::MAX, &log), [5, 6, 7, 8]);
        assert!(w.queue.is_empty() && w.withdrawn == 0);
    }

    /// Tombstones never outnumber the pending registrations (beyond a constant), and the
    /// queue's buffer shrinks as it empties.
    #[test]
    fn tombstones_and_buffer_stay_bounded() {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let mut w = Waiters::default();
        let n = 10_000u64;
        for key in 0..n {
            w.insert(key + 1, key, Arc::new(Rec(key, log.clone())));
        }
        // Withdraw every registration but the first and the last, from the middle out.
        for key in (1..n - 1).rev() {
            if key % 2 == 0 {
                assert!(w.remove(key + 1, key).0);
            }
        }
        for key in 1..n - 1 {
            if key % 2 == 1 {
                assert!(w.remove(key + 1, key).0);
            }
            assert!(w.withdrawn <= w.queue.len() / 2 + 1);
        }
        assert_eq!(w.queue.len() - w.withdrawn, 2);
        assert!(w.queue.capacity() <= 2 * SHRINK_ABOVE);
        assert_eq!(fired_ids(&mut w, u64::MAX, &log), [0, n - 1]);

        // A burst of registrations released in steps: the buffer follows.
        for key in 0..n {
            w.insert(key + 1, key, Arc::new(Rec(key, log.clone())));
        }
        let mut v = 0;
        while v < n {
            v += 100;
            let _ = w.take_reached(v);
            let pending = (n - v.min(n)) as usize;
            assert_eq!(w.queue.len(), pending);
            assert!(w.queue.capacity() <= (4 * pending).max(2 * SHRINK_ABOVE));
        }
    }

    /// A fence releases exactly the waiters a signal reaches (through the core API).
    #[test]
    fn fence_core_signal_and_deregister() {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let f = FenceCore::new(0);
        let mut keys = Vec::new();
        for id in 0..6u64 {
            let target = [4, 2, 6, 2, 9, 5][id as usize];
            match f.register(target, Arc::new(Rec(id, log.clone()))) {
                Registration::Pending(k) => keys.push((target, k)),
                Registration::Fired => panic!("fired before any signal"),
            }
        }
        assert!(f.deregister(keys[2].0, keys[2].1));
        assert!(f.signal(5, Writer::Never, 0));
        assert_eq!(std::mem::take(&mut *log.lock().unwrap()), [1, 3, 0, 5]);
        assert!(!f.deregister(keys[0].0, keys[0].1));
        assert_eq!(
            f.register(3, Arc::new(Rec(6, log.clone()))),
            Registration::Fired
        );
        f.remove();
        assert_eq!(std::mem::take(&mut *log.lock().unwrap()), [6, 4]);
    }
}
