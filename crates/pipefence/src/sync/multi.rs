//! Waits on several fences at once (F8): ALL fires when every fence reached its value, ANY
//! fires once, at the first.

use super::fence::{FenceCore, Registration, WaitOutcome};
use super::notify::{spin_until, Notify, Parker, SPIN_NS};
use super::shim::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// `D3D12_MULTIPLE_FENCE_WAIT_FLAGS`: [`ALL`](Self::ALL) (also `NONE`, 0) or [`ANY`](Self::ANY)
/// (1). Any other bit is InvalidArg.
#[doc(alias = "D3D12_MULTIPLE_FENCE_WAIT_FLAGS")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MultipleFenceWaitFlags(pub u32);

impl MultipleFenceWaitFlags {
    /// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_NONE`: same as ALL.
    pub const NONE: Self = Self(0);
    /// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL`: every fence must reach its value.
    pub const ALL: Self = Self(0);
    /// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_ANY`: the first fence to reach its value completes.
    pub const ANY: Self = Self(1);

    /// Whether this is ANY; `None` for unknown bits.
    pub(crate) fn is_any(self) -> Option<bool> {
        match self.0 {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// The shared counter of one multi-fence wait.
///
/// `remaining` counts legs (ALL) that have not fired; `done` goes `false -> true` once, when the
/// target is notified. No lock: each leg fires at most once (the fence takes it out of its list).
struct MultiCore {
    any: bool,
    remaining: AtomicUsize,
    done: AtomicBool,
    target: Arc<dyn Notify>,
}

struct Leg(Arc<MultiCore>);

impl Notify for Leg {
    fn notify(&self) {
        let c = &self.0;
        let complete = if c.any {
            true
        } else {
            c.remaining.fetch_sub(1, Ordering::AcqRel) == 1
        };
        if complete && !c.done.swap(true, Ordering::AcqRel) {
            c.target.notify();
        }
    }
}

/// What a multi-fence wait notifies.
pub(crate) type MultiTarget = Arc<dyn Notify>;

/// The pending legs of a multi-fence registration: `(fence index, target, key)`.
pub(crate) type PendingLegs = Vec<(usize, u64, u64)>;

/// Registers `target` to be notified when all (or any) of `fences` reach their values.
/// Returns the legs still pending and a flag that reads `true` once the target was notified.
pub(crate) fn register_multiple(
    fences: &[(Arc<FenceCore>, u64)],
    any: bool,
    target: MultiTarget,
) -> (PendingLegs, impl Fn() -> bool) {
    let core = Arc::new(MultiCore {
        any,
        remaining: AtomicUsize::new(fences.len()),
        done: AtomicBool::new(false),
        target,
    });
    let mut pending = Vec::new();
    for (i, (fence, value)) in fences.iter().enumerate() {
        if let Registration::Pending(key) = fence.register(*value, Arc::new(Leg(core.clone()))) {
            pending.push((i, *value, key));
        }
        if any && core.done.load(Ordering::Acquire) {
            break;
        }
    }
    let done = move || core.done.load(Ordering::Acquire);
    (pending, done)
}

/// Blocks until all (or any) of `fences` reach their values, the device is removed, or the
/// deadline passes.
pub(crate) fn wait_multiple(
    fences: &[(Arc<FenceCore>, u64)],
    any: bool,
    deadline: Option<Instant>,
) -> WaitOutcome {
    let reached = || {
        if any {
            fences.iter().any(|(f, v)| f.completed_value() >= *v)
        } else {
            fences.iter().all(|(f, v)| f.completed_value() >= *v)
        }
    };
    let removed = || fences.iter().any(|(f, _)| f.is_removed());
    if removed() {
        return WaitOutcome::Removed;
    }
    if reached() {
        return WaitOutcome::Reached;
    }
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return WaitOutcome::TimedOut;
    }
    if spin_until(SPIN_NS, || reached() || removed()) {
        return if removed() {
            WaitOutcome::Removed
        } else {
            WaitOutcome::Reached
        };
    }
    let parker = Arc::new(Parker::for_current_thread());
    let (pending, done) = register_multiple(fences, any, parker.clone());
    let notified = parker.park(deadline) || done();
    for (i, target, key) in pending {
        fences[i].0.deregister(target, key);
    }
    if removed() {
        WaitOutcome::Removed
    } else if notified || done() {
        WaitOutcome::Reached
    } else {
        WaitOutcome::TimedOut
    }
}
