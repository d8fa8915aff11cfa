//! Engine conformance: Q1-Q7, M3, C1-C12, D1-D4, D8 (`docs/semantics.md`), one or more tests per rule.

#[path = "../common/mod.rs"]
mod common;

use common::{list, queue, shared};
use pipefence::Fault;
use pipefence::*;
use std::thread;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn device() -> Device {
    Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap()
}

/// The values `body` gives over every schedule of the deterministic driver (the reduced
/// exhaustive search, one schedule per class of equivalent ones) on a device with a FIFO of
/// `fifo_depth` packets: where a test's interleaving of the host and an engine is the
/// schedule's, not a matter of how long the host sleeps. `body` returns `None` where a call
/// fails: the search stops some runs early by removing their device, and those are not
/// schedules; every schedule explored runs to its end without removal, and the search is
/// complete.
fn every_schedule<T: Ord>(
    fifo_depth: usize,
    mut body: impl FnMut(&Device) -> Option<T>,
) -> std::collections::BTreeSet<T> {
    let base = DeviceDesc {
        workers: 1,
        fifo_depth,
        ..DeviceDesc::default()
    };
    let opts = pipefence::explore::ExhaustiveOptions {
        reduction: true,
        ..Default::default()
    };
    let mut values = std::collections::BTreeSet::new();
    let e = pipefence::explore::explore_exhaustive(&base, &opts, &mut body, |s| {
        assert!(s.removal.is_none(), "removed in {}", s.replay);
        values.insert(s.value.expect("a schedule explored runs to its end"));
        true
    })
    .unwrap();
    assert!(e.complete, "{e:?}");
    values
}

fn wait_u32(b: &Buffer, off: u64, v: u32) {
    b.wait_u32(off, Comparison::Equal, v, u32::MAX, T).unwrap();
}

/// A user kernel that spins until the u32 at `flag` is non-zero (at most 2 s), then writes 1
/// (seen) or 2 (gave up) to `out`.
fn waiter_kernel(flag: u64, out: u64) -> Kernel {
    Kernel::User(UserKernel::new("wait-flag", move |ctx| {
        let start = std::time::Instant::now();
        while ctx.read_u32(flag) == 0 {
            if start.elapsed() > Duration::from_secs(2) {
                ctx.write_u32(out, 2);
                return;
            }
            std::hint::spin_loop();
        }
        ctx.write_u32(out, 1);
    }))
}

mod commands;
mod model;
mod queues;
