//! `fences/waiter-memory`: the heap bytes per pending waiter (Events, futures) on a pipefence
//! fence against a plain Vec of waiters.

use super::waiters::{register_futures, LinearFence};
use super::{device, err};
use crate::alloc;
use crate::harness::{Config, Report, Stats, Unit};
use pipefence::FenceDesc;
use pipefence::{Event, FenceWait};
use std::task::Waker;

/// Pending waiters per fence in `fences/waiter-memory`.
const N_WAITERS: u64 = 100_000;

pub(super) fn bench_waiter_memory(_cfg: &Config) -> Result<Report, String> {
    let n = N_WAITERS;
    let device = device()?;
    let per = |bytes: isize| bytes as f64 / n as f64;

    let (events, event_bytes) = alloc::measure(|| (0..n).map(|_| Event::new()).collect::<Vec<_>>());
    let event_own = per(event_bytes) - std::mem::size_of::<Event>() as f64;

    let fence = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let (r, fence_bytes) = alloc::measure(|| -> Result<(), String> {
        for (i, e) in events.iter().enumerate() {
            fence
                .set_event_on_completion(i as u64 + 1, Some(e))
                .map_err(err)?;
        }
        Ok(())
    });
    r?;
    let lin = LinearFence::default();
    let ((), lin_bytes) = alloc::measure(|| {
        for (i, e) in events.iter().enumerate() {
            lin.register(i as u64 + 1, e.clone());
        }
    });

    let ffence = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let mut futs = Vec::with_capacity(n as usize);
    let (r, fut_bytes) = alloc::measure(|| register_futures(&ffence, n, &mut futs));
    r?;
    let wlin = LinearFence::default();
    let ((), wlin_bytes) = alloc::measure(|| {
        for v in 1..=n {
            wlin.register(v, Waker::noop().clone());
        }
    });
    drop(futs);

    Ok(Report::new("fences/waiter-memory")
        .note(format!(
            "net live heap bytes (counting global allocator) while registering n = {n} waiters \
             (values 1..=n), / n. Not counted: the Event itself ({} B heap + {} B handle, the \
             same in the baseline), the future itself ({} B inline, held by the caller)",
            event_own,
            std::mem::size_of::<Event>(),
            std::mem::size_of::<FenceWait>()
        ))
        .figure(
            "heap per pending Event waiter",
            Stats::single(per(fence_bytes)),
            Unit::Bytes,
        )
        .baseline("Vec<(u64, Event)>", Stats::single(per(lin_bytes)))
        .figure(
            "heap per pending future waiter (polled once)",
            Stats::single(per(fut_bytes)),
            Unit::Bytes,
        )
        .baseline("Vec<(u64, Waker)>", Stats::single(per(wlin_bytes))))
}
