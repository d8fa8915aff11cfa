//! The public, validated, D3D12-shaped API: [`Device`], [`Fence`], [`Buffer`], [`Event`](crate::Event).
//!
//! This layer validates every argument and turns misuse into an [`Error`](crate::Error) that
//! names the object and the value (E2); the layers below assume valid input. What tools need
//! beyond it (test runners, the scenario runner) is behind [`Device::tools`] and
//! [`Buffer::tools`] ([`DeviceTools`], [`BufferTools`]): a real GPU gives a program none of it.

mod buffer;
mod device;
mod fence;
mod list;
mod queue;
mod tools;

pub use buffer::{AtomicWordView, Buffer, BufferDesc};
pub use device::{Device, DeviceDesc, Driver, MAX_FIFO_DEPTH, MAX_WORKERS};
pub use fence::{Fence, FenceDesc, FenceWait};
pub use list::{CommandList, CommandListDesc};
pub use queue::{Queue, QueueDesc, QueueStats};
pub use tools::{BufferTools, DeviceTools};
