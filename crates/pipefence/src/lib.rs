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
//! The API is re-exported at the root: [`Device`], [`Queue`], [`Fence`], [`Event`],
//! [`Buffer`], [`CommandList`]; it validates every argument and returns an [`Error`] naming
//! the object and value (E2). What only tools need (test runners, the scenario runner: watching
//! progress, settling a deterministic run, declaring a hang, reading any heap) is behind
//! [`Device::tools`] and [`Buffer::tools`] ([`DeviceTools`], [`BufferTools`]); a real GPU gives
//! a program none of it. Public modules beside it: [`command`] (the recorded vocabulary,
//! validation, encoder and pure decoder of the packet stream, D2), [`diagnose`] (removal
//! reports, D7), [`trace`] (trace events, sinks and renderers), [`explore`] (running a
//! program under many deterministic schedules) and [`host`] (host threads on the
//! deterministic driver). Inside, dependencies run one way (`docs/architecture.md`):
//! `types, sync, memory, command, clock` -> `core` -> `hazard`, kernels -> `engine` ->
//! `runtime`, `driver`, `diagnose` -> `api`.
//!
//! A panic anywhere is a bug; bad input is an [`Error`] (E3).
//!
//! ## Example
//!
//! ```
//! use pipefence::{Device, DeviceDesc, Event, FenceDesc};
//! use std::time::Duration;
//!
//! let device = Device::new(DeviceDesc::default())?;
//! let fence = device.create_fence(&FenceDesc::new(0).named("frame"))?;
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

mod api;
mod choice;
mod clock;
pub mod command;
pub(crate) mod core;
pub mod diagnose;
pub(crate) mod driver;
mod engine;
mod error;
pub mod explore;
pub mod footprint;
mod hazard;
pub mod host;
mod host_names;
pub(crate) mod memory;
mod rng;
pub(crate) mod runtime;
mod sync;
pub mod trace;
pub(crate) mod types;

pub use api::{
    AtomicWordView, Buffer, BufferDesc, BufferTools, CommandList, CommandListDesc, Device,
    DeviceDesc, DeviceTools, Driver, Fence, FenceDesc, FenceWait, Queue, QueueDesc, QueueStats,
    MAX_FIFO_DEPTH, MAX_WORKERS,
};
pub use clock::{Clock, RealClock, CLOCK_EPOCH_NS};
pub use command::{
    Comparison, Flush, ImmediateMode, ImmediateWrite, QueueKind, WaitEngine, Width, WriteSource,
};
pub use diagnose::{Classification, RemovalReport};
pub use driver::{ScheduleStats, Strategy, COPY_NS_PER_KIB};
pub use engine::kernels::{DEFAULT_GROUP_COST_NS, GROUP_BYTES, LANES};
pub use engine::{
    Fault, Kernel, KernelContext, KernelFault, UserKernel, WaitCondition,
    SYSTEM_TIMESTAMP_FREQUENCY,
};
pub use error::{Error, Misuse, Object, RemovalReason, Result, WaitTimeout, Waited};
pub use hazard::{
    set_source_line, AccessKind, Hazard, HazardAccess, HazardAgent, HazardKind, MemoryModel,
    Missing, Vocabulary,
};
pub use memory::{Heap, MAX_BUFFER_SIZE};
pub use sync::{Event, MultipleFenceWaitFlags};
pub use types::{Access, Site, Stage, ValueCondition};
