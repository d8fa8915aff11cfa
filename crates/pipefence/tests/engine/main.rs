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
