//! Concurrency primitives: the one module that names locks, condition variables and atomics.
//!
//! Everything here imports them from `shim`, which picks `std` or `loom` (under `cfg(loom)`),
//! so the wake handshakes are model-checked (`RUSTFLAGS="--cfg loom" cargo test --release -p
//! pipefence --lib sync::`). The rest of the crate uses these types and never `std::sync`
//! directly (except `Arc`, whose reference count is not part of any protocol here).
//!
//! Contracts:
//! - Notifications are collected under a lock and fired after it is released (house style 4);
//!   a `Notify` implementation never takes a fence lock.
//! - A waiter re-checks its condition under the lock before sleeping, so no wakeup is lost (F9).
//! - Removal marks each fence under its lock, so a waiter that registers after removal sees it.

pub mod shim;

mod event;
mod fence;
mod multi;
mod notify;
mod ticket;
mod watch;

#[cfg(all(test, loom))]
mod loom_tests;

pub use event::Event;
pub use fence::FenceCore;
pub(crate) use fence::{FenceWaitFuture, WaitOutcome, Writer};
pub(crate) use multi::register_multiple;
pub(crate) use multi::wait_multiple;
pub use multi::MultipleFenceWaitFlags;
pub(crate) use notify::{
    cpus, defer_wakes, has_deferred, stop_deferring, take_deferred, Crossing, Deferred,
    EngineWaker, Notify, Parker, Release,
};
pub(crate) use ticket::Ticket;
pub(crate) use watch::{AddressWatches, WatchKey};
