//! D3D12 conformance: a port of the fence and queue-synchronization tests of vkd3d-proton's
//! conformance suite (`tests/d3d12_sync.c`, plus the fence steps of the queue-buffer copy tests
//! in `tests/d3d12_copy.c`). That suite also runs on native D3D12, so what it expects is what
//! real drivers do. Only the behaviour is ported, not the code: textures, shaders, root
//! signatures and descriptor heaps become pipefence buffers, built-in kernels and copies.
//!
//! Each test is named after the C test it ports and names the rules of `docs/semantics.md` it
//! checks (F1-F11 for fences, Q1-Q8 for queues). Every wait has a timeout, so a bug fails a test
//! instead of hanging it; a sleep only ever gives a bug more room to show. Where a test needs
//! neither real time nor OS threads of its own, an `_explore` twin runs the same body under many
//! schedules of the deterministic driver.

#[path = "../common/mod.rs"]
mod common;

use common::{buffer, fence, list, queue};
use pipefence::explore::explore;
use pipefence::{
    host, Buffer, CommandList, Device, DeviceDesc, Driver, Error, Event, Fence, FenceWait, Flush,
    Heap, Kernel, MultipleFenceWaitFlags, Queue, QueueKind, UserKernel,
};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The bound of every wait: far longer than any test needs, so that only a bug reaches it.
const T: Duration = Duration::from_secs(10);

/// A "heavy GPU load" dispatch: this many groups of `spin(HEAVY_NS)` (D3D12's tests use large
/// copies or a load shader; a debug build on two cores wants something smaller).
const HEAVY_NS: u64 = 2_000_000;
const HEAVY_GROUPS: u32 = 4;

fn device() -> Device {
    Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap()
}

fn is_deterministic(d: &Device) -> bool {
    matches!(d.desc().driver, Driver::Deterministic { .. })
}

fn execute(q: &Queue, l: &CommandList) {
    q.execute_command_lists(&[l]).unwrap();
}

/// `wait_event(event, INFINITE) == WAIT_OBJECT_0`, bounded by `T`; consumes the event.
///
/// An `Event` wait blocks its thread where the deterministic scheduler cannot see it, so on that
/// driver the host instead waits (scheduled) until every queue is idle and then takes the event
/// if it is set. Every caller waits for an event that a CPU signal or queued work sets.
fn wait_event(d: &Device, e: &Event) -> bool {
    if is_deterministic(d) {
        d.wait_idle(T).is_ok() && e.try_wait()
    } else {
        e.wait(T)
    }
}

/// `wait_event(event, ms) == WAIT_TIMEOUT`: the event is still not set after `dur` (real time
/// on the threaded driver, virtual time on the deterministic one). Consumes the event.
fn stays_unset(d: &Device, e: &Event, dur: Duration) -> bool {
    host::sleep(d, dur);
    !e.try_wait()
}

/// Polls a fence future until it completes (bounded by `T`; on the deterministic driver it must
/// already have completed).
fn poll_ready(d: &Device, mut fut: Pin<&mut FenceWait>) -> pipefence::Result<()> {
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r;
        }
        assert!(
            !is_deterministic(d) && start.elapsed() < T,
            "the future is still pending"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// Runs `body` under deterministic schedules `0..seeds` (the strategy `explore` picks per seed)
/// and fails at the first schedule where it panics or the device is removed (a hang is detected
/// at once there), naming the seed.
fn explore_seeds(seeds: u64, body: impl Fn(&Device)) {
    for seed in 0..seeds {
        let runs = explore(&DeviceDesc::default(), seed..seed + 1, |d| {
            catch_unwind(AssertUnwindSafe(|| body(d))).map_err(|p| panic_text(&*p))
        })
        .unwrap();
        for r in runs {
            if let Err(m) = &r.value {
                panic!("seed {}: {m}", r.seed);
            }
            if let Some(rep) = &r.removal {
                panic!("seed {}: {rep}", r.seed);
            }
        }
    }
}

mod stress;
mod sync;
