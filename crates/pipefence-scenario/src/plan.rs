//! The validated form of a scenario: what the parser produces and the runner executes.
//!
//! Every name is resolved to an index into the declaration vectors, every value is range-checked
//! and every command has passed the library's command validation, so the runner never meets an
//! invalid plan (a failure there is a bug, reported as such, never a panic). Line and column
//! numbers are 1-based and point at the node in the source file.

use pipefence::{
    Comparison, Flush, Heap, ImmediateMode, QueueKind, RemovalReason, WaitEngine, Width,
    WriteSource,
};

/// A position in the scenario file (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// An address: a buffer (index into [`Scenario::buffers`]) and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    /// Index into [`Scenario::buffers`].
    pub buffer: usize,
    /// Byte offset.
    pub offset: u64,
}

/// `device` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDecl {
    /// `tdr-ms` (default 2000).
    pub tdr_ms: u64,
    /// `workers` (default: cores).
    pub workers: Option<usize>,
    /// `fifo-depth` (default 16).
    pub fifo_depth: usize,
    /// `timestamp-hz` (default 100000000).
    pub timestamp_hz: u64,
}

impl Default for DeviceDecl {
    fn default() -> Self {
        DeviceDecl {
            tdr_ms: 2000,
            workers: None,
            fifo_depth: 16,
            timestamp_hz: 100_000_000,
        }
    }
}

/// `buffer NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDecl {
    /// Name.
    pub name: String,
    /// Bytes (a positive multiple of 4).
    pub size: u64,
    /// Heap.
    pub heap: Heap,
    /// u32 written to every element.
    pub init: u32,
    /// Where declared.
    pub pos: Pos,
}

/// `fence NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceDecl {
    /// Name.
    pub name: String,
    /// Initial value.
    pub initial: u64,
    /// Where declared.
    pub pos: Pos,
}

/// `queue NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDecl {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: QueueKind,
    /// Where declared.
    pub pos: Pos,
}

/// A built-in kernel with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelDecl {
    /// `fill dst= value=`.
    Fill {
        /// Destination.
        dst: Addr,
        /// Value.
        value: u32,
    },
    /// `add dst= src= value=`.
    Add {
        /// Destination.
        dst: Addr,
        /// Source.
        src: Addr,
        /// Addend.
        value: u32,
    },
    /// `sum dst= src=`.
    Sum {
        /// Destination (8-byte aligned).
        dst: Addr,
        /// Source.
        src: Addr,
    },
    /// `spin ns=`.
    Spin {
        /// Nanoseconds per group.
        ns: u64,
    },
}

/// A command of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListCommand {
    /// `wait-value32` / `wait-value64`.
    WaitValue {
        /// Address.
        addr: Addr,
        /// Width, comparison, reference and mask (default all ones at the width).
        cond: pipefence::ValueCondition,
        /// `me` or `pfp`.
        engine: WaitEngine,
    },
    /// `write-value32-bop` / `write-value64-bop`.
    WriteBottomOfPipe {
        /// Address.
        addr: Addr,
        /// Width.
        width: Width,
        /// Value.
        value: u64,
        /// Flush flags.
        flush: Flush,
        /// Source.
        source: WriteSource,
    },
    /// `write-value32-top` / `write-value64-top`.
    WriteTopOfPipe {
        /// Address.
        addr: Addr,
        /// Width.
        width: Width,
        /// Value.
        value: u64,
        /// Source.
        source: WriteSource,
    },
    /// `write-immediate`.
    WriteImmediate {
        /// Address.
        addr: Addr,
        /// Value.
        value: u32,
        /// Mode.
        mode: ImmediateMode,
    },
    /// `flush-pipeline`.
    FlushPipeline {
        /// Flush flags.
        flush: Flush,
    },
    /// `dispatch KERNEL`.
    Dispatch {
        /// Kernel.
        kernel: KernelDecl,
        /// Groups (at least 1).
        groups: u32,
    },
    /// `dispatch-indirect KERNEL`.
    DispatchIndirect {
        /// Kernel.
        kernel: KernelDecl,
        /// Address of the u32 group count.
        args: Addr,
    },
    /// `copy`.
    Copy {
        /// Destination.
        dst: Addr,
        /// Source.
        src: Addr,
        /// Bytes (a multiple of 4).
        bytes: u64,
    },
    /// `marker TEXT`.
    Marker(String),
    /// `begin-event TEXT`.
    BeginEvent(String),
    /// `end-event`.
    EndEvent,
}

/// A command with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandDecl {
    /// The command.
    pub cmd: ListCommand,
    /// Where.
    pub pos: Pos,
}

/// `list NAME { ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDecl {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: QueueKind,
    /// Commands, in order (the command index is the position in this vector).
    pub commands: Vec<CommandDecl>,
    /// Where declared.
    pub pos: Pos,
}

/// What an `expect` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `equals=V`.
    Equals(u64),
    /// `cmp= reference= [mask=]`.
    Compare {
        /// Comparison.
        cmp: Comparison,
        /// Reference.
        reference: u64,
        /// Mask (all ones at the width by default).
        mask: u64,
    },
    /// `cmp= reference-at=ADDRESS [mask=]`: compare with another location (read with the same
    /// width and mask).
    CompareAt {
        /// Comparison.
        cmp: Comparison,
        /// The other location.
        other: Addr,
        /// Mask.
        mask: u64,
    },
}

/// A host action (top level, or inside `host NAME { }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionKind {
    /// `execute QUEUE LIST...`.
    Execute {
        /// Queue index.
        queue: usize,
        /// List indices.
        lists: Vec<usize>,
    },
    /// `signal QUEUE FENCE VALUE`.
    Signal {
        /// Queue index.
        queue: usize,
        /// Fence index.
        fence: usize,
        /// Value.
        value: u64,
    },
    /// `wait QUEUE FENCE VALUE`.
    Wait {
        /// Queue index.
        queue: usize,
        /// Fence index.
        fence: usize,
        /// Value.
        value: u64,
    },
    /// `cpu-signal FENCE VALUE`.
    CpuSignal {
        /// Fence index.
        fence: usize,
        /// Value.
        value: u64,
    },
    /// `cpu-wait FENCE VALUE timeout-ms=`.
    CpuWait {
        /// Fence index.
        fence: usize,
        /// Value.
        value: u64,
        /// Timeout (default 10000).
        timeout_ms: u64,
    },
    /// `cpu-wait-multiple { FENCE VALUE; ... } mode= timeout-ms=`.
    CpuWaitMultiple {
        /// (fence index, value) pairs.
        fences: Vec<(usize, u64)>,
        /// `mode=any`.
        any: bool,
        /// Timeout (default 10000).
        timeout_ms: u64,
    },
    /// `cpu-write ADDRESS value= width=`.
    CpuWrite {
        /// Address.
        addr: Addr,
        /// Width.
        width: Width,
        /// Value.
        value: u64,
    },
    /// `cpu-poll ADDRESS cmp= reference= mask= width= timeout-ms=`.
    CpuPoll {
        /// Address.
        addr: Addr,
        /// Width.
        width: Width,
        /// Comparison.
        cmp: Comparison,
        /// Reference.
        reference: u64,
        /// Mask.
        mask: u64,
        /// Timeout (default 10000).
        timeout_ms: u64,
    },
    /// `sleep ms=`.
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// `wait-idle` (`timeout-ms`, default 10000).
    WaitIdle {
        /// Timeout.
        timeout_ms: u64,
    },
    /// `remove-device`.
    RemoveDevice,
    /// `expect ADDRESS`.
    Expect {
        /// Address.
        addr: Addr,
        /// Width.
        width: Width,
        /// Consecutive elements (default 1).
        count: u64,
        /// What must hold.
        check: Check,
    },
    /// `expect-fence FENCE`.
    ExpectFence {
        /// Fence index.
        fence: usize,
        /// What must hold (`CompareAt` is not allowed).
        check: Check,
    },
    /// The main thread reaches `host NAME { }`: start that host thread.
    StartHost(usize),
}

/// An action with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// The action.
    pub kind: ActionKind,
    /// Where.
    pub pos: Pos,
}

/// `host NAME { ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostDecl {
    /// Name.
    pub name: String,
    /// Its actions.
    pub actions: Vec<Action>,
    /// Where declared.
    pub pos: Pos,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scenario {
    /// The file name used in messages.
    pub file: String,
    /// Device settings.
    pub device: DeviceDecl,
    /// Buffers.
    pub buffers: Vec<BufferDecl>,
    /// Fences.
    pub fences: Vec<FenceDecl>,
    /// Queues.
    pub queues: Vec<QueueDecl>,
    /// Lists.
    pub lists: Vec<ListDecl>,
    /// The main host program.
    pub main: Vec<Action>,
    /// `host` threads (started by [`ActionKind::StartHost`] in `main`).
    pub hosts: Vec<HostDecl>,
    /// `expect-removed reason=`, with its position.
    pub expect_removed: Option<(RemovalReason, Pos)>,
}

/// One mistake in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where.
    pub pos: Pos,
    /// What is wrong, naming the offending value.
    pub message: String,
}
