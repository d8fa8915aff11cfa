//! Command lists (C1-C12): D3D12-style recording with deferred validation, closed into an
//! encoded packet stream in device memory (D2).

use crate::command::{
    encode, validate, Command, Comparison, Flush, ImmediateWrite, QueueKind, ValidationError,
    WaitEngine, Width, WriteSource,
};
use crate::engine::{ClosedList, Kernel, UserKernel};
use crate::error::{Error, Object, Result};
use crate::memory::Heap;
use crate::runtime::DeviceShared;
use std::sync::Arc;

/// How to create a command list ([`Device::create_command_list`](crate::Device::create_command_list)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandListDesc {
    /// The kind of queue it may be executed on (`D3D12_COMMAND_LIST_TYPE`).
    pub kind: QueueKind,
    /// A name for errors and reports (`list#N` if empty).
    pub name: String,
}

impl CommandListDesc {
    /// A list for queues of `kind`, named `name`.
    pub fn new(kind: QueueKind, name: &str) -> Self {
        CommandListDesc {
            kind,
            name: name.to_string(),
        }
    }
}

/// A command list (`ID3D12GraphicsCommandList` / `ID3D12XboxDmaCommandList`) for one queue
/// kind.
///
/// Recording never fails (like D3D12): the first invalid command is reported by
/// [`close`](Self::close), which names its index and the reason; [`validation_errors`](Self::validation_errors)
/// lists every invalid command. A closed list runs any number of times, on any queue of its
/// kind (Q1).
///
/// ```
/// use pipefence::{BufferDesc, CommandList, CommandListDesc, Comparison, Device, DeviceDesc, Heap, QueueKind, WaitEngine};
/// let device = Device::new(DeviceDesc::default())?;
/// let flags = device.create_buffer(&BufferDesc::new(64, Heap::Shared))?;
/// let mut list = device.create_command_list(&CommandListDesc::new(QueueKind::Compute, "consume"))?;
/// list.wait_value32(flags.address(2), Comparison::GreaterEqual, 1, u32::MAX, WaitEngine::Pfp);
/// let err = list.close().unwrap_err();
/// assert!(err.to_string().contains("command 0"), "{err}");
/// # Ok::<(), pipefence::Error>(())
/// ```
#[doc(alias = "ID3D12GraphicsCommandList")]
#[derive(Debug)]
pub struct CommandList {
    device: Arc<DeviceShared>,
    id: u32,
    name: Arc<str>,
    kind: QueueKind,
    commands: Vec<Command>,
    kernels: Vec<UserKernel>,
    closed: Option<Arc<ClosedList>>,
    recorded_while_closed: usize,
}

impl CommandList {
    pub(crate) fn new(device: Arc<DeviceShared>, id: u32, name: Arc<str>, kind: QueueKind) -> Self {
        CommandList {
            device,
            id,
            name,
            kind,
            commands: Vec::new(),
            kernels: Vec::new(),
            closed: None,
            recorded_while_closed: 0,
        }
    }

    /// The list's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A small id, unique per device, in creation order (reports name lists by it).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The queue kind it was created for.
    pub fn kind(&self) -> QueueKind {
        self.kind
    }

    /// Whether [`close`](Self::close) succeeded (and no [`reset`](Self::reset) since).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// The recorded commands.
    pub fn commands(&self) -> &[Command] {
        &self.commands
    }

    pub(crate) fn closed(&self) -> Option<&Arc<ClosedList>> {
        self.closed.as_ref()
    }

    pub(crate) fn device_shared(&self) -> &Arc<DeviceShared> {
        &self.device
    }

    fn record(&mut self, cmd: Command) -> &mut Self {
        if self.closed.is_some() {
            self.recorded_while_closed += 1;
        } else {
            self.commands.push(cmd);
        }
        self
    }

    /// `Wait32BitValueX` (C1, C2): stall `engine` until `(u32 at address & mask) cmp reference`.
    #[doc(alias = "Wait32BitValueX")]
    pub fn wait_value32(
        &mut self,
        address: u64,
        cmp: Comparison,
        reference: u32,
        mask: u32,
        engine: WaitEngine,
    ) -> &mut Self {
        self.record(Command::WaitValue {
            address,
            cond: crate::command::ValueCondition {
                width: Width::W32,
                cmp,
                reference: u64::from(reference),
                mask: u64::from(mask),
            },
            engine,
        })
    }

    /// `Wait64BitValueX` (C1, C2): the 64-bit form.
    #[doc(alias = "Wait64BitValueX")]
    pub fn wait_value64(
        &mut self,
        address: u64,
        cmp: Comparison,
        reference: u64,
        mask: u64,
        engine: WaitEngine,
    ) -> &mut Self {
        self.record(Command::WaitValue {
            address,
            cond: crate::command::ValueCondition {
                width: Width::W64,
                cmp,
                reference,
                mask,
            },
            engine,
        })
    }

    /// `Write32BitValueBottomOfPipeX` (C3): written once every earlier dispatch finished; the
    /// engine does not stall. Earlier work's writes are visible to other agents only with
    /// `Flush::L2_WRITEBACK`.
    #[doc(alias = "Write32BitValueBottomOfPipeX")]
    pub fn write_value32_bottom_of_pipe(
        &mut self,
        address: u64,
        value: u32,
        flush: Flush,
        source: WriteSource,
    ) -> &mut Self {
        self.record(Command::WriteValueBottomOfPipe {
            address,
            width: Width::W32,
            value: u64::from(value),
            flush,
            source,
        })
    }

    /// `Write64BitValueBottomOfPipeX` (C3).
    #[doc(alias = "Write64BitValueBottomOfPipeX")]
    pub fn write_value64_bottom_of_pipe(
        &mut self,
        address: u64,
        value: u64,
        flush: Flush,
        source: WriteSource,
    ) -> &mut Self {
        self.record(Command::WriteValueBottomOfPipe {
            address,
            width: Width::W64,
            value,
            flush,
            source,
        })
    }

    /// `Write32BitValueTopOfPipeX` (C4): written when the micro engine reaches it.
    #[doc(alias = "Write32BitValueTopOfPipeX")]
    pub fn write_value32_top_of_pipe(
        &mut self,
        address: u64,
        value: u32,
        source: WriteSource,
    ) -> &mut Self {
        self.record(Command::WriteValueTopOfPipe {
            address,
            width: Width::W32,
            value: u64::from(value),
            source,
        })
    }

    /// `Write64BitValueTopOfPipeX` (C4).
    #[doc(alias = "Write64BitValueTopOfPipeX")]
    pub fn write_value64_top_of_pipe(
        &mut self,
        address: u64,
        value: u64,
        source: WriteSource,
    ) -> &mut Self {
        self.record(Command::WriteValueTopOfPipe {
            address,
            width: Width::W64,
            value,
            source,
        })
    }

    /// `WriteBufferImmediate` (C5): 32-bit writes, each Default, MarkerIn or MarkerOut.
    #[doc(alias = "WriteBufferImmediate")]
    pub fn write_buffer_immediate(&mut self, writes: &[ImmediateWrite]) -> &mut Self {
        self.record(Command::WriteImmediate {
            writes: writes.to_vec(),
        })
    }

    /// `FlushPipelineX` (C8): waits for every earlier dispatch and copy on this engine, then
    /// performs the cache actions; holds the PFP until done.
    #[doc(alias = "FlushPipelineX")]
    #[doc(alias = "ResourceBarrier")]
    pub fn flush_pipeline(&mut self, flush: Flush) -> &mut Self {
        self.record(Command::FlushPipeline { flush })
    }

    /// `Dispatch` (C6): launches `groups` groups of `kernel` on the shader workers; the micro
    /// engine does not wait for them.
    #[doc(alias = "Dispatch")]
    pub fn dispatch(&mut self, kernel: &Kernel, groups: u32) -> &mut Self {
        let kernel = kernel.to_args(&mut self.kernels);
        self.record(Command::Dispatch { kernel, groups })
    }

    /// `ExecuteIndirect` with a dispatch signature (C7): the group count (one u32 at
    /// `args`) is read by the pre-fetch parser when it parses the command.
    #[doc(alias = "ExecuteIndirect")]
    pub fn dispatch_indirect(&mut self, kernel: &Kernel, args: u64) -> &mut Self {
        let kernel = kernel.to_args(&mut self.kernels);
        self.record(Command::DispatchIndirect { kernel, args })
    }

    /// `CopyBufferRegion` (C9): copies `bytes` (a multiple of 4) from `src` to `dst`; the micro
    /// engine waits for it.
    #[doc(alias = "CopyBufferRegion")]
    pub fn copy_buffer_region(&mut self, dst: u64, src: u64, bytes: u64) -> &mut Self {
        self.record(Command::Copy { dst, src, bytes })
    }

    /// `SetMarker` (C10).
    #[doc(alias = "SetMarker")]
    pub fn set_marker(&mut self, label: &str) -> &mut Self {
        self.record(Command::SetMarker {
            label: label.to_string(),
        })
    }

    /// `BeginEvent` (C10): opens a label that breadcrumbs and hang reports show.
    #[doc(alias = "BeginEvent")]
    pub fn begin_event(&mut self, label: &str) -> &mut Self {
        self.record(Command::BeginEvent {
            label: label.to_string(),
        })
    }

    /// `EndEvent` (C10).
    #[doc(alias = "EndEvent")]
    pub fn end_event(&mut self) -> &mut Self {
        self.record(Command::EndEvent)
    }

    /// Every invalid command, in index order.
    pub fn validation_errors(&self) -> Vec<ValidationError> {
        validate(self.kind, &self.commands, self.kernels.len())
    }

    /// Validates and encodes the list into device memory (`Close`). Errors: InvalidArg naming
    /// the first invalid command's index and the reason; InvalidCall if the list is already
    /// closed; DeviceRemoved.
    #[doc(alias = "Close")]
    pub fn close(&mut self) -> Result<()> {
        if self.closed.is_some() {
            return Err(Error::invalid_call(
                Object::CommandList(self.name.to_string()),
                None,
                format!(
                    "command list `{}`: close() on a closed list{}",
                    self.name,
                    if self.recorded_while_closed > 0 {
                        format!(
                        " ({} commands were recorded after close and dropped; call reset() first)",
                        self.recorded_while_closed
                    )
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        if let Some(e) = self.validation_errors().into_iter().next() {
            return Err(Error::invalid_arg(
                Object::CommandList(self.name.to_string()),
                Some(e.index as u64),
                format!("command list `{}`: {e}", self.name),
            ));
        }
        self.device
            .check_live(|| format!("command list `{}`: close", self.name))?;
        let words = encode(&self.commands);
        let bytes = (words.len() as u64 * 4).max(4);
        let stream = self
            .device
            .memory
            .allocate(
                Some(&format!("commands:{}", self.name)),
                Heap::DeviceLocal,
                bytes,
                0,
            )
            .map_err(|_| {
                Error::out_of_memory(
                    Object::CommandList(self.name.to_string()),
                    Some(bytes),
                    format!(
                        "command list `{}`: {} bytes of command stream",
                        self.name, bytes
                    ),
                )
            })?;
        for (i, w) in words.iter().enumerate() {
            stream.store32(i as u64 * 4, *w);
        }
        self.closed = Some(Arc::new(ClosedList {
            id: self.id,
            name: self.name.clone(),
            device: self.device.core.clone(),
            stream,
            words: words.len(),
            kernels: self.kernels.clone().into(),
        }));
        Ok(())
    }

    /// Reopens the list for recording, empty (`Reset`). Executions in flight keep their copy.
    #[doc(alias = "Reset")]
    pub fn reset(&mut self) {
        self.commands.clear();
        self.kernels.clear();
        self.closed = None;
        self.recorded_while_closed = 0;
    }

    /// The GPU address range of the encoded stream, once closed (a kernel that writes there
    /// corrupts the commands, which the engine reports as a malformed packet).
    pub fn stream_address(&self) -> Option<(u64, u64)> {
        self.closed
            .as_ref()
            .map(|c| (c.stream.base, c.words as u64 * 4))
    }
}
