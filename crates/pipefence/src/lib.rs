//! # pipefence
//!
//! A software GPU that executes the multi-engine synchronization of Xbox Direct3D 12: fences,
//! queue-side waits and signals, masked 32/64-bit memory-value waits on the micro engine or the
//! pre-fetch parser, top- and bottom-of-pipe value and timestamp writes with cache-flush flags,
//! and CPU-side waits on one or many fences. It runs the same program on the strictest legal
//! GPU and, when it hangs, says why.
//!
//! The behaviour contract is `docs/semantics.md` (rules E, F, Q, M, C, D, H); each rule has tests
//! named after it.
//!
//! ## Layers
//!
//! - [`api`] (re-exported at the root): [`Device`], [`Fence`], [`Buffer`], [`Event`]; validates
//!   every argument and returns an [`Error`] naming the object and value (E2).
//! - [`command`]: the recorded vocabulary, validation, encoder and pure decoder (D2).
//! - `memory`: the address space and atomic word storage (M1, M2).
//! - `sync`: fences, waiter lists, events, futures, address watches; the std/loom shim.
//!
//! A panic anywhere is a bug; bad input is an [`Error`] (E3).
//!
//! ## Example
//!
//! ```
//! use pipefence::{Device, DeviceDesc, Event};
//! use std::time::Duration;
//!
//! let device = Device::new(DeviceDesc::default())?;
//! let fence = device.create_named_fence("frame", 0)?;
//! let event = Event::new();
//! fence.set_event_on_completion(2, Some(&event))?;
//! let producer = {
//!     let fence = fence.clone();
//!     std::thread::spawn(move || -> pipefence::Result<()> {
//!         fence.signal(1)?;
//!         fence.signal(2)
//!     })
//! };
//! assert!(event.wait(Duration::from_secs(10)));
//! producer.join().unwrap()?;
//! assert_eq!(fence.completed_value(), 2);
//! # Ok::<(), pipefence::Error>(())
//! ```

#![warn(missing_docs)]

pub mod api;
pub mod clock;
pub mod command;
pub mod diagnose;
pub(crate) mod driver;
pub mod engine;
pub mod error;
pub mod explore;
pub mod hazard;
pub mod host;
pub(crate) mod memory;
mod rng;
pub mod sync;
pub mod trace;

pub use api::{
    AtomicWordView, Buffer, BufferDesc, CommandList, Device, DeviceDesc, Driver, Fence, FenceWait,
    Queue, QueueDesc, QueueStats,
};
pub use clock::{Clock, RealClock};
pub use command::{
    Comparison, Flush, ImmediateMode, ImmediateWrite, QueueKind, WaitEngine, Width, WriteSource,
};
pub use diagnose::{Classification, RemovalReport};
pub use driver::{Strategy, COPY_NS_PER_KIB};
pub use engine::{Kernel, KernelContext, KernelFault, UserKernel};
pub use error::{Error, RemovalReason, Result};
pub use hazard::{AccessKind, Hazard, HazardAccess, HazardAgent, HazardKind, MemoryModel, Missing};
pub use memory::Heap;
pub use sync::{Event, MultipleFenceWaitFlags};
