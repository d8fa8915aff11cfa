//! Fence benchmarks: ping-pong latency (free and pinned to one CPU), the CPU cost of a blocked
//! waiter, how one signal scales with the number of waiters it releases, and the memory of a
//! pending waiter. Every figure has a baseline measured in the same run.
//!
//! This module holds the benchmark table and the helpers the benchmarks share; each benchmark
//! (and each baseline the others reuse) lives in its own file.

mod blocked;
mod condvar;
mod memory;
mod pingpong;
mod pinned;
mod scaling;
mod waiters;

pub(crate) use condvar::CondvarFence;
pub(crate) use pingpong::{condvar_pingpong, WaitKind};
pub use pinned::{pin_to_one_cpu, pinned_child};

use crate::harness::Bench;
use pipefence::{Device, DeviceDesc};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The fence benchmarks, in running order.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "fences/ping-pong",
        about: "two threads hand a token through two fences; round trip vs Mutex+Condvar",
        run: pingpong::bench_pingpong,
    },
    Bench {
        name: "fences/ping-pong-pinned",
        about: "the same with both threads pinned to one CPU (child process; no spinning)",
        run: pinned::bench_pingpong_pinned,
    },
    Bench {
        name: "fences/blocked-waiter",
        about: "CPU time of a thread blocked in Fence::wait, as % of one core",
        run: blocked::bench_blocked_waiter,
    },
    Bench {
        name: "fences/waiter-scaling",
        about: "a signal's fixed cost as n waiters grow, its cost per released waiter, heap per waiter (events, futures) vs a linear scan",
        run: scaling::bench_waiter_scaling,
    },
    Bench {
        name: "fences/waiter-memory",
        about: "heap bytes per pending waiter (events, futures) vs a plain Vec",
        run: memory::bench_waiter_memory,
    },
];

/// Hidden argument that makes the binary a pinned ping-pong child.
pub const PINNED_CHILD_ARG: &str = "--pinned-child";

/// Generous timeout for waits that should complete in microseconds (a hang fails loudly).
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

fn device() -> Result<Device, String> {
    Device::new(DeviceDesc::default()).map_err(|e| format!("Device::new: {e}"))
}

fn err(e: pipefence::Error) -> String {
    e.to_string()
}

/// Locks ignoring poisoning (a panicking benchmark thread is reported by `join`).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
