//! The vocabulary of recorded commands, shared by recording, the encoder, the decoder and the
//! engine. Plain data: no device objects, no closures (user kernels are an index into the
//! command list's kernel table).

use std::fmt;

/// A GPU virtual address (`D3D12_GPU_VIRTUAL_ADDRESS`).
pub type GpuAddress = u64;

/// The kind of a queue and of the command lists it executes (Q1).
#[doc(alias = "D3D12_COMMAND_LIST_TYPE")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueKind {
    /// Graphics queue (`D3D12_COMMAND_LIST_TYPE_DIRECT`): compute and copy work too.
    Direct,
    /// Async compute queue (`D3D12_COMMAND_LIST_TYPE_COMPUTE`).
    Compute,
    /// DMA queue (`D3D12_COMMAND_LIST_TYPE_COPY`): one stage (ME only), copies and value writes.
    Copy,
}

impl QueueKind {
    /// The scenario name: `direct`, `compute`, `copy`.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Direct => "direct",
            QueueKind::Compute => "compute",
            QueueKind::Copy => "copy",
        }
    }

    /// Whether this kind has a pre-fetch parser stage (D1): Direct and Compute do, Copy does not.
    pub fn has_pfp(self) -> bool {
        !matches!(self, QueueKind::Copy)
    }
}

impl fmt::Display for QueueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A comparison for memory-value waits (C1), `D3D12_COMPARISON_FUNC`.
///
/// Comparisons are unsigned and never cyclic. `None` exists only because D3D12 has it
/// (`D3D12_COMPARISON_FUNC_NONE`, 0): recording it is allowed, `close()` rejects it.
#[doc(alias = "D3D12_COMPARISON_FUNC")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// `D3D12_COMPARISON_FUNC_NONE` (0): invalid in a wait.
    None,
    /// Never satisfied (1).
    Never,
    /// `value < reference` (2).
    Less,
    /// `value == reference` (3).
    Equal,
    /// `value <= reference` (4).
    LessEqual,
    /// `value > reference` (5).
    Greater,
    /// `value != reference` (6).
    NotEqual,
    /// `value >= reference` (7).
    GreaterEqual,
    /// Always satisfied (8).
    Always,
}

impl Comparison {
    /// Every comparison, `None` included, in D3D12 order.
    pub const ALL: [Comparison; 9] = [
        Comparison::None,
        Comparison::Never,
        Comparison::Less,
        Comparison::Equal,
        Comparison::LessEqual,
        Comparison::Greater,
        Comparison::NotEqual,
        Comparison::GreaterEqual,
        Comparison::Always,
    ];

    /// The `D3D12_COMPARISON_FUNC` value (0 for `None`, 1..=8 otherwise).
    pub fn d3d12_value(self) -> u32 {
        match self {
            Comparison::None => 0,
            Comparison::Never => 1,
            Comparison::Less => 2,
            Comparison::Equal => 3,
            Comparison::LessEqual => 4,
            Comparison::Greater => 5,
            Comparison::NotEqual => 6,
            Comparison::GreaterEqual => 7,
            Comparison::Always => 8,
        }
    }

    /// The comparison for a `D3D12_COMPARISON_FUNC` value, if it is one.
    pub fn from_d3d12_value(value: u32) -> Option<Comparison> {
        // `ALL` is in D3D12 order: a value is its index.
        let c = *Comparison::ALL.get(usize::try_from(value).ok()?)?;
        (c.d3d12_value() == value).then_some(c)
    }

    /// The scenario name (`greater-equal`, ...; `none` for `None`).
    pub fn name(self) -> &'static str {
        match self {
            Comparison::None => "none",
            Comparison::Never => "never",
            Comparison::Less => "less",
            Comparison::Equal => "equal",
            Comparison::LessEqual => "less-equal",
            Comparison::Greater => "greater",
            Comparison::NotEqual => "not-equal",
            Comparison::GreaterEqual => "greater-equal",
            Comparison::Always => "always",
        }
    }

    /// The comparison with this scenario name.
    pub fn from_name(name: &str) -> Option<Comparison> {
        Comparison::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The operator used in condition text (`>=`, ...).
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::None => "<none>",
            Comparison::Never => "never",
            Comparison::Less => "<",
            Comparison::Equal => "==",
            Comparison::LessEqual => "<=",
            Comparison::Greater => ">",
            Comparison::NotEqual => "!=",
            Comparison::GreaterEqual => ">=",
            Comparison::Always => "always",
        }
    }

    /// `(value & mask) cmp reference`, unsigned (C1). `None` is never satisfied.
    #[inline]
    pub fn holds(self, value: u64, mask: u64, reference: u64) -> bool {
        let v = value & mask;
        match self {
            Comparison::None | Comparison::Never => false,
            Comparison::Less => v < reference,
            Comparison::Equal => v == reference,
            Comparison::LessEqual => v <= reference,
            Comparison::Greater => v > reference,
            Comparison::NotEqual => v != reference,
            Comparison::GreaterEqual => v >= reference,
            Comparison::Always => true,
        }
    }

    /// Whether no value of the given width can ever satisfy `(value & mask) cmp reference`
    /// (the D6 table; `mask` is truncated to the width by the caller).
    pub fn never_satisfiable(self, mask: u64, reference: u64) -> bool {
        let (m, r) = (mask, reference);
        match self {
            Comparison::None | Comparison::Never => true,
            Comparison::Less => r == 0,
            Comparison::Equal => r & !m != 0,
            Comparison::NotEqual => m == 0 && r == 0,
            Comparison::Greater => r >= m,
            Comparison::GreaterEqual => r > m,
            Comparison::LessEqual | Comparison::Always => false,
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The width of a memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// 32 bits, 4-byte aligned.
    W32,
    /// 64 bits, 8-byte aligned.
    W64,
}

impl Width {
    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            Width::W32 => 4,
            Width::W64 => 8,
        }
    }

    /// Size in bits.
    pub fn bits(self) -> u32 {
        match self {
            Width::W32 => 32,
            Width::W64 => 64,
        }
    }

    /// All ones at this width.
    pub fn mask(self) -> u64 {
        match self {
            Width::W32 => u64::from(u32::MAX),
            Width::W64 => u64::MAX,
        }
    }

    /// `u32` / `u64`, for condition text.
    pub fn type_name(self) -> &'static str {
        match self {
            Width::W32 => "u32",
            Width::W64 => "u64",
        }
    }
}

/// Which stage performs a memory-value wait (C2), `D3D12XBOX_WAIT_FLAGS`.
#[doc(alias = "D3D12XBOX_WAIT_FLAGS")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitEngine {
    /// The micro engine (`D3D12XBOX_WAIT_FLAG_NONE`).
    Me,
    /// The pre-fetch parser (`D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP`): GreaterEqual only.
    Pfp,
}

impl WaitEngine {
    /// The scenario name: `me` or `pfp`.
    pub fn name(self) -> &'static str {
        match self {
            WaitEngine::Me => "me",
            WaitEngine::Pfp => "pfp",
        }
    }
}

/// Cache actions of a bottom-of-pipe write or a pipeline flush (C3, C8), `D3D12XBOX_FLUSH`.
///
/// A set of flags; bits outside [`Flush::ALL`] are recordable and rejected by `close()`.
/// It has the usual bitflags vocabulary ([`empty`](Self::empty), [`all`](Self::all),
/// [`bits`](Self::bits), [`from_bits`](Self::from_bits), [`contains`](Self::contains),
/// [`insert`](Self::insert), `|`, `&`); [`Flush::NONE`] and [`Flush::ALL`] remain.
///
/// ```
/// use pipefence::Flush;
/// let mut f = Flush::empty();
/// assert!(f.is_empty() && f == Flush::NONE);
/// f |= Flush::L2_WRITEBACK;
/// assert!(f.contains(Flush::L2_WRITEBACK) && !f.intersects(Flush::L1_INVALIDATE));
/// assert_eq!(Flush::from_bits(0x40), None);
/// assert_eq!(Flush::all().bits(), 31);
/// ```
#[doc(alias = "D3D12XBOX_FLUSH")]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flush(pub u32);

impl Flush {
    /// No cache action.
    pub const NONE: Flush = Flush(0);
    /// `D3D12XBOX_FLUSH_BOP_TEXTURE_L1_INVALIDATE`.
    pub const L1_INVALIDATE: Flush = Flush(1);
    /// `D3D12XBOX_FLUSH_BOP_TEXTURE_L1_VOLATILE`.
    pub const L1_VOLATILE: Flush = Flush(2);
    /// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_INVALIDATE`.
    pub const L2_INVALIDATE: Flush = Flush(4);
    /// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_VOLATILE`.
    pub const L2_VOLATILE: Flush = Flush(8);
    /// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK`.
    pub const L2_WRITEBACK: Flush = Flush(16);
    /// Every defined flag.
    pub const ALL: Flush = Flush(31);

    const NAMES: [(Flush, &'static str); 5] = [
        (Flush::L1_INVALIDATE, "l1-invalidate"),
        (Flush::L1_VOLATILE, "l1-volatile"),
        (Flush::L2_INVALIDATE, "l2-invalidate"),
        (Flush::L2_VOLATILE, "l2-volatile"),
        (Flush::L2_WRITEBACK, "l2-writeback"),
    ];

    /// No cache action: the same as [`Flush::NONE`], under the name bitflags types use.
    #[inline]
    pub const fn empty() -> Flush {
        Flush::NONE
    }

    /// Every defined flag: the same as [`Flush::ALL`], under the name bitflags types use.
    #[inline]
    pub const fn all() -> Flush {
        Flush::ALL
    }

    /// The raw bits (what `D3D12XBOX_FLUSH` holds), unknown bits included.
    #[inline]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set with these bits, or `None` if any bit is not a defined flag.
    #[inline]
    pub const fn from_bits(bits: u32) -> Option<Flush> {
        if bits & !Flush::ALL.0 == 0 {
            Some(Flush(bits))
        } else {
            None
        }
    }

    /// The set with these bits, unknown bits kept (recordable; `close()` rejects them, C3).
    #[inline]
    pub const fn from_bits_retain(bits: u32) -> Flush {
        Flush(bits)
    }

    /// Whether no flag (and no unknown bit) is set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: Flush) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    #[inline]
    pub const fn intersects(self, other: Flush) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the flags of `other`.
    #[inline]
    pub fn insert(&mut self, other: Flush) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    #[inline]
    pub fn remove(&mut self, other: Flush) {
        self.0 &= !other.0;
    }

    /// Bits that are not defined flags.
    pub fn unknown_bits(self) -> u32 {
        self.0 & !Flush::ALL.0
    }

    /// Parses the scenario form: space-separated flag names (empty or `none` for no flag).
    pub fn parse(text: &str) -> Result<Flush, String> {
        let mut flush = Flush::NONE;
        for word in text.split_whitespace() {
            if word == "none" {
                continue;
            }
            match Flush::NAMES.iter().find(|(_, n)| *n == word) {
                Some((f, _)) => flush |= *f,
                None => {
                    return Err(format!(
                        "unknown flush flag `{word}` (expected some of: l1-invalidate l1-volatile l2-invalidate l2-volatile l2-writeback)"
                    ))
                }
            }
        }
        Ok(flush)
    }
}

impl std::ops::BitOr for Flush {
    type Output = Flush;
    fn bitor(self, rhs: Flush) -> Flush {
        Flush(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Flush {
    fn bitor_assign(&mut self, rhs: Flush) {
        self.0 |= rhs.0;
    }
}

impl std::ops::BitAnd for Flush {
    type Output = Flush;
    fn bitand(self, rhs: Flush) -> Flush {
        Flush(self.0 & rhs.0)
    }
}

impl fmt::Debug for Flush {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flush({self})")
    }
}

impl fmt::Display for Flush {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (flag, name) in Flush::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(" ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if self.unknown_bits() != 0 {
            if !first {
                f.write_str(" ")?;
            }
            write!(f, "0x{:x}", self.unknown_bits())?;
            first = false;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// What a value write stores (C3), `D3D12XBOX_WRITE_VALUE_BOP_FLAGS`.
#[doc(alias = "D3D12XBOX_WRITE_VALUE_BOP_FLAGS")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteSource {
    /// The given value (`..._FLAG_NONE`).
    Value,
    /// The GPU timestamp (`..._FLAG_GPU_TIMESTAMP`); the value must be 0.
    GpuTimestamp,
    /// The system timestamp (`..._FLAG_SYSTEM_TIMESTAMP`); the value must be 0.
    SystemTimestamp,
}

impl WriteSource {
    /// The scenario name: `value`, `gpu-timestamp`, `system-timestamp`.
    pub fn name(self) -> &'static str {
        match self {
            WriteSource::Value => "value",
            WriteSource::GpuTimestamp => "gpu-timestamp",
            WriteSource::SystemTimestamp => "system-timestamp",
        }
    }
}

/// The mode of one `write_buffer_immediate` write (C5), `D3D12_WRITEBUFFERIMMEDIATE_MODE`.
#[doc(alias = "D3D12_WRITEBUFFERIMMEDIATE_MODE")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImmediateMode {
    /// An ordered copy-like write.
    Default,
    /// Written when the micro engine reaches it (like a top-of-pipe write).
    MarkerIn,
    /// Written after earlier work finished (like a bottom-of-pipe write).
    MarkerOut,
}

impl ImmediateMode {
    /// The scenario name: `default`, `marker-in`, `marker-out`.
    pub fn name(self) -> &'static str {
        match self {
            ImmediateMode::Default => "default",
            ImmediateMode::MarkerIn => "marker-in",
            ImmediateMode::MarkerOut => "marker-out",
        }
    }
}

/// One write of `write_buffer_immediate` (`D3D12_WRITEBUFFERIMMEDIATE_PARAMETER` plus its mode).
#[doc(alias = "D3D12_WRITEBUFFERIMMEDIATE_PARAMETER")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmediateWrite {
    /// Destination, 4-byte aligned.
    pub address: GpuAddress,
    /// The 32-bit value.
    pub value: u32,
    /// When it is written.
    pub mode: ImmediateMode,
}

/// A kernel and its arguments as recorded in a dispatch (C6).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KernelArgs {
    /// `dst[i] = value` for u32 element `i = group * 64 + lane`.
    Fill {
        /// Destination base (4-byte aligned).
        dst: GpuAddress,
        /// The value stored.
        value: u32,
    },
    /// `dst[i] = src[i] + value` (wrapping).
    Add {
        /// Destination base (4-byte aligned).
        dst: GpuAddress,
        /// Source base (4-byte aligned).
        src: GpuAddress,
        /// The addend.
        value: u32,
    },
    /// `dst (u64) += sum of src[i]` over every lane (atomic).
    Sum {
        /// Destination (8-byte aligned).
        dst: GpuAddress,
        /// Source base (4-byte aligned).
        src: GpuAddress,
    },
    /// Each group busies itself for `ns` nanoseconds.
    Spin {
        /// Nanoseconds per group.
        ns: u64,
    },
    /// A user kernel: an index into the command list's kernel table.
    User {
        /// Index into the list's kernel table.
        index: u32,
    },
}

impl KernelArgs {
    /// The built-in name (`fill`, `add`, `sum`, `spin`) or `user`.
    pub fn name(&self) -> &'static str {
        match self {
            KernelArgs::Fill { .. } => "fill",
            KernelArgs::Add { .. } => "add",
            KernelArgs::Sum { .. } => "sum",
            KernelArgs::Spin { .. } => "spin",
            KernelArgs::User { .. } => "user",
        }
    }
}

/// What a memory-value wait compares (C1): the 32- or 64-bit value at its address, masked,
/// against a reference (`(value & mask) cmp reference`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueCondition {
    /// 32 or 64 bits.
    pub width: Width,
    /// The comparison.
    pub cmp: Comparison,
    /// The reference.
    pub reference: u64,
    /// The mask.
    pub mask: u64,
}

impl ValueCondition {
    /// Whether `value` (read at [`width`](Self::width)) satisfies the condition.
    #[inline]
    pub fn holds(&self, value: u64) -> bool {
        self.cmp.holds(value, self.mask, self.reference)
    }

    /// Whether no value at this width can satisfy the condition (D6: such a wait faults at once
    /// instead of hanging).
    pub fn never_satisfiable(&self) -> bool {
        self.cmp
            .never_satisfiable(self.mask & self.width.mask(), self.reference)
    }
}

/// One recorded command (C1-C12). The encoder turns it into a packet; the decoder gives it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Command {
    /// `Wait32BitValueX` / `Wait64BitValueX` (C1, C2).
    WaitValue {
        /// Address of the value.
        address: GpuAddress,
        /// What the value is compared with (width, comparison, reference, mask).
        cond: ValueCondition,
        /// ME or PFP.
        engine: WaitEngine,
    },
    /// `Write32/64BitValueBottomOfPipeX` (C3).
    WriteValueBottomOfPipe {
        /// Destination.
        address: GpuAddress,
        /// 32 or 64 bits.
        width: Width,
        /// The value (0 with a timestamp source).
        value: u64,
        /// Cache actions.
        flush: Flush,
        /// Value or timestamp.
        source: WriteSource,
    },
    /// `Write32/64BitValueTopOfPipeX` (C4).
    WriteValueTopOfPipe {
        /// Destination.
        address: GpuAddress,
        /// 32 or 64 bits.
        width: Width,
        /// The value (0 with a timestamp source).
        value: u64,
        /// Value or timestamp.
        source: WriteSource,
    },
    /// `WriteBufferImmediate` (C5).
    WriteImmediate {
        /// The writes, in order.
        writes: Vec<ImmediateWrite>,
    },
    /// `FlushPipelineX` (C8).
    FlushPipeline {
        /// Cache actions performed once earlier work finished.
        flush: Flush,
    },
    /// `Dispatch` (C6).
    Dispatch {
        /// Kernel and arguments.
        kernel: KernelArgs,
        /// Number of groups (at least 1).
        groups: u32,
    },
    /// `ExecuteIndirect` with a dispatch signature (C7).
    DispatchIndirect {
        /// Kernel and arguments.
        kernel: KernelArgs,
        /// Address of the u32 group count (4-byte aligned).
        args: GpuAddress,
    },
    /// `CopyBufferRegion` (C9).
    Copy {
        /// Destination (4-byte aligned).
        dst: GpuAddress,
        /// Source (4-byte aligned).
        src: GpuAddress,
        /// Byte count (multiple of 4).
        bytes: u64,
    },
    /// `SetMarker` (C10).
    SetMarker {
        /// The label.
        label: String,
    },
    /// `BeginEvent` (C10).
    BeginEvent {
        /// The label.
        label: String,
    },
    /// `EndEvent` (C10).
    EndEvent,
}

impl Command {
    /// The scenario node name of this command (`wait-value64`, `write-value32-bop`, ...), used
    /// in errors, reports and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Command::WaitValue { cond, .. } => match cond.width {
                Width::W32 => "wait-value32",
                Width::W64 => "wait-value64",
            },
            Command::WriteValueBottomOfPipe {
                width: Width::W32, ..
            } => "write-value32-bop",
            Command::WriteValueBottomOfPipe {
                width: Width::W64, ..
            } => "write-value64-bop",
            Command::WriteValueTopOfPipe {
                width: Width::W32, ..
            } => "write-value32-top",
            Command::WriteValueTopOfPipe {
                width: Width::W64, ..
            } => "write-value64-top",
            Command::WriteImmediate { .. } => "write-immediate",
            Command::FlushPipeline { .. } => "flush-pipeline",
            Command::Dispatch { .. } => "dispatch",
            Command::DispatchIndirect { .. } => "dispatch-indirect",
            Command::Copy { .. } => "copy",
            Command::SetMarker { .. } => "marker",
            Command::BeginEvent { .. } => "begin-event",
            Command::EndEvent => "end-event",
        }
    }
}

/// One invalid command found by validation (`close()` / `validation_errors()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// Index of the command in its list (0-based, in recording order).
    pub index: usize,
    /// The command's name ([`Command::name`]).
    pub command: &'static str,
    /// What is wrong, naming the offending value.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command {} ({}): {}",
            self.index, self.command, self.message
        )
    }
}
