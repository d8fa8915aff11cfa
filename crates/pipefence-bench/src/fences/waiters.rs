//! The pending waiters of `fences/waiter-scaling` and `fences/waiter-memory`: Events and
//! futures on a pipefence fence, and the baseline, an O(n) fence that scans a plain Vec of
//! waiters on every signal. Each set keeps n waiters pending from one signal to the next.

use super::{err, lock};
use crate::alloc;
use pipefence::FenceDesc;
use pipefence::{Device, Event, Fence, FenceWait};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What the linear-scan baseline does to release a waiter.
pub(super) trait Fire {
    fn fire(&self);
}

impl Fire for Event {
    fn fire(&self) {
        self.set();
    }
}

impl Fire for Waker {
    fn fire(&self) {
        self.wake_by_ref();
    }
}

/// Baseline: an O(n) fence. Waiters live in a plain `Vec<(target, waiter)>`; a signal scans all
/// of them (`retain`), firing and removing those it reaches.
#[derive(Debug)]
pub(super) struct LinearFence<T> {
    state: Mutex<(u64, Vec<(u64, T)>)>,
}

impl<T> Default for LinearFence<T> {
    fn default() -> Self {
        LinearFence {
            state: Mutex::new((0, Vec::new())),
        }
    }
}

impl<T: Fire> LinearFence<T> {
    pub(super) fn register(&self, target: u64, w: T) {
        let mut s = lock(&self.state);
        if s.0 >= target {
            w.fire();
        } else {
            s.1.push((target, w));
        }
    }

    fn signal(&self, value: u64) {
        let mut s = lock(&self.state);
        s.0 = value;
        s.1.retain(|(t, w)| {
            if *t <= value {
                w.fire();
                false
            } else {
                true
            }
        });
    }

    fn pending(&self) -> usize {
        lock(&self.state).1.len()
    }
}

/// The noop waker's context.
fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// Polls `f` once.
fn poll_once(f: &mut FenceWait, cx: &mut Context<'_>) -> Poll<pipefence::Result<()>> {
    Pin::new(f).poll(cx)
}

/// Creates futures for values `1..=n` on `fence`, polls each once (registering it) and pushes
/// them onto `out`.
pub(super) fn register_futures(
    fence: &Fence,
    n: u64,
    out: &mut Vec<FenceWait>,
) -> Result<(), String> {
    let mut cx = noop_cx();
    for v in 1..=n {
        let mut f = fence.wait_async(v);
        if poll_once(&mut f, &mut cx).is_ready() {
            return Err(format!("wait_async({v}) was ready before any signal"));
        }
        out.push(f);
    }
    Ok(())
}

/// `n` waiters pending at the consecutive values `done + 1 ..= done + n`, on a pipefence fence
/// or on the baseline. After each signal the benchmark checks what it released and registers
/// as many waiters again at the top, so `n` stays the same from one signal to the next.
pub(super) trait PendingSet {
    /// Signals `done + k` (releasing `k` waiters); returns the wall time of that call in ns.
    fn signal_timed(&mut self, k: u64) -> Result<f64, String>;
    /// Checks that the last signal released its `k` waiters (and, with `check_next`, not the
    /// next one) and registers `k` waiters at the `k` values above the top.
    ///
    /// Checking the next waiter reads its memory, which the next signal would then find in
    /// cache: the timed batches check it only after their last signal.
    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String>;
}

/// Times one call (wall time in ns).
#[inline]
pub(super) fn timed<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_nanos() as f64)
}

/// The values a signal to `done` released, `k` of them, and their index in a ring of `n`.
fn released(done: u64, k: u64, n: u64) -> impl Iterator<Item = (u64, usize)> {
    (done - k + 1..=done).map(move |v| (v, ((v - 1) % n) as usize))
}

/// Events on a pipefence fence (`set_event_on_completion`).
pub(super) struct FenceEvents<'a> {
    fence: Fence,
    events: &'a [Event],
    done: u64,
}

impl<'a> FenceEvents<'a> {
    /// Registers `events[i]` at `i + 1` on a new fence; also returns the heap bytes that took.
    pub(super) fn new(device: &Device, events: &'a [Event]) -> Result<(Self, isize), String> {
        let fence = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
        let (r, bytes) = alloc::measure(|| {
            events
                .iter()
                .enumerate()
                .try_for_each(|(i, e)| fence.set_event_on_completion(i as u64 + 1, Some(e)))
        });
        r.map_err(err)?;
        let set = FenceEvents {
            fence,
            events,
            done: 0,
        };
        Ok((set, bytes))
    }
}

/// Consumes the events a signal to `done` released; with `check_next`, checks that the next
/// one is not set.
fn check_events(
    events: &[Event],
    done: u64,
    k: u64,
    check_next: bool,
    what: &str,
) -> Result<(), String> {
    let n = events.len() as u64;
    for (v, i) in released(done, k, n) {
        if !events[i].try_wait() {
            return Err(format!(
                "{what} signal({done}) did not set the event at {v}"
            ));
        }
    }
    if check_next && events[(done % n) as usize].is_set() {
        return Err(format!(
            "{what} signal({done}) set the event at {}",
            done + 1
        ));
    }
    Ok(())
}

/// Signals `fence` to `done + k` (releasing the next `k` waiters), timed; advances `done`.
fn signal_fence_timed(fence: &Fence, done: &mut u64, k: u64) -> Result<f64, String> {
    let v = *done + k;
    let (r, ns) = timed(|| fence.signal(v));
    r.map_err(err)?;
    *done = v;
    Ok(ns)
}

impl PendingSet for FenceEvents<'_> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        signal_fence_timed(&self.fence, &mut self.done, k)
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        let n = self.events.len() as u64;
        check_events(self.events, self.done, k, check_next, "fence")?;
        for (v, i) in released(self.done, k, n) {
            self.fence
                .set_event_on_completion(v + n, Some(&self.events[i]))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// Futures on a pipefence fence (`wait_async`, polled once with a noop waker).
pub(super) struct FenceFutures {
    fence: Fence,
    /// The future for value `v` is at `(v - 1) % n`.
    futs: Vec<FenceWait>,
    done: u64,
}

impl FenceFutures {
    pub(super) fn new(device: &Device, n: u64) -> Result<(Self, isize), String> {
        let fence = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
        let mut futs = Vec::with_capacity(n as usize);
        let (r, bytes) = alloc::measure(|| register_futures(&fence, n, &mut futs));
        r?;
        let set = FenceFutures {
            fence,
            futs,
            done: 0,
        };
        Ok((set, bytes))
    }
}

impl PendingSet for FenceFutures {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        signal_fence_timed(&self.fence, &mut self.done, k)
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        let n = self.futs.len() as u64;
        let mut cx = noop_cx();
        for (v, i) in released(self.done, k, n) {
            if !matches!(poll_once(&mut self.futs[i], &mut cx), Poll::Ready(Ok(()))) {
                return Err(format!(
                    "signal({}) did not release the future at {v}",
                    self.done
                ));
            }
            let mut f = self.fence.wait_async(v + n);
            if poll_once(&mut f, &mut cx).is_ready() {
                return Err(format!("wait_async({}) was ready at {}", v + n, self.done));
            }
            self.futs[i] = f;
        }
        let next = (self.done % n) as usize;
        if check_next && poll_once(&mut self.futs[next], &mut cx).is_ready() {
            return Err(format!(
                "signal({}) released the future at {}",
                self.done,
                self.done + 1
            ));
        }
        Ok(())
    }
}

/// Events or (noop) wakers on the baseline.
pub(super) struct Linear<'a, T> {
    lin: LinearFence<T>,
    /// The events (empty for wakers).
    events: &'a [Event],
    n: u64,
    done: u64,
}

impl<'a> Linear<'a, Event> {
    pub(super) fn events(events: &'a [Event]) -> (Self, isize) {
        let lin = LinearFence::default();
        let ((), bytes) = alloc::measure(|| {
            for (i, e) in events.iter().enumerate() {
                lin.register(i as u64 + 1, e.clone());
            }
        });
        let n = events.len() as u64;
        let set = Linear {
            lin,
            events,
            n,
            done: 0,
        };
        (set, bytes)
    }
}

impl Linear<'static, Waker> {
    pub(super) fn wakers(n: u64) -> (Self, isize) {
        let lin = LinearFence::default();
        let ((), bytes) = alloc::measure(|| {
            for v in 1..=n {
                lin.register(v, Waker::noop().clone());
            }
        });
        let set = Linear {
            lin,
            events: &[],
            n,
            done: 0,
        };
        (set, bytes)
    }
}

impl<T: Fire> Linear<'_, T> {
    fn signal(&mut self, k: u64) -> f64 {
        let v = self.done + k;
        let ((), ns) = timed(|| self.lin.signal(v));
        self.done = v;
        ns
    }

    fn check_pending(&self) -> Result<(), String> {
        if self.lin.pending() as u64 == self.n {
            Ok(())
        } else {
            Err(format!(
                "linear signal({}) left {} waiters pending, not {}",
                self.done,
                self.lin.pending(),
                self.n
            ))
        }
    }
}

impl PendingSet for Linear<'_, Event> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        Ok(self.signal(k))
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        check_events(self.events, self.done, k, check_next, "linear")?;
        for (v, i) in released(self.done, k, self.n) {
            self.lin.register(v + self.n, self.events[i].clone());
        }
        self.check_pending()
    }
}

impl PendingSet for Linear<'_, Waker> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        Ok(self.signal(k))
    }

    fn refill(&mut self, k: u64, _check_next: bool) -> Result<(), String> {
        if self.lin.pending() as u64 != self.n - k {
            return Err(format!(
                "linear signal({}) released the wrong wakers",
                self.done
            ));
        }
        for (v, _) in released(self.done, k, self.n) {
            self.lin.register(v + self.n, Waker::noop().clone());
        }
        self.check_pending()
    }
}
