//! The packet format's vocabulary: the header layout, the opcode table ([`OPCODES`]) with each
//! packet's length rule and operand words, and the word encodings of every enumeration operand.
//!
//! This module owns the numbers; [`mod@super::encode`] and [`mod@super::decode`] are their
//! only users, and `docs/command-stream.md` describes the same layout in prose.
//!
//! # Header
//!
//! Every packet starts with a header word:
//!
//! | bits   | field                                                        |
//! |--------|--------------------------------------------------------------|
//! | 0..8   | opcode ([`OPCODES`])                                         |
//! | 8..16  | reserved, must be 0                                          |
//! | 16..32 | total packet length in words, header included (1..=65535)    |
//!
//! A packet longer than [`MAX_SHORT_LENGTH`] words (only a huge label or a huge
//! `write-immediate` gets there) uses the *long form*: the length field is 0 and the next word
//! holds the total length in words, both header words included. The long form is used only when
//! the short form cannot hold the length, so every packet has exactly one encoding.
//!
//! # Operands
//!
//! 64-bit operands are two words, low word first. The width of a value command is an operand
//! word ([`width_word`]), not part of the opcode: one opcode per [`Command`] variant, and every
//! value/reference/mask operand is always stored as 64 bits (a 32-bit command with a value above
//! `u32::MAX` is encodable; validation rejects it).

use super::types::{Command, ImmediateMode, KernelArgs, WaitEngine, Width, WriteSource};
use std::fmt;

/// Bits of the header word holding the opcode.
pub const OPCODE_MASK: u32 = 0x0000_00ff;
/// Bits of the header word that are reserved and must be 0.
pub const RESERVED_MASK: u32 = 0x0000_ff00;
/// Shift of the length field in the header word.
pub const LENGTH_SHIFT: u32 = 16;
/// The largest total length (in words) a short-form header can hold.
pub const MAX_SHORT_LENGTH: usize = u16::MAX as usize;

/// `Command::WaitValue`.
pub const WAIT_VALUE: u8 = 0x01;
/// `Command::WriteValueBottomOfPipe`.
pub const WRITE_VALUE_BOP: u8 = 0x02;
/// `Command::WriteValueTopOfPipe`.
pub const WRITE_VALUE_TOP: u8 = 0x03;
/// `Command::WriteImmediate`.
pub const WRITE_IMMEDIATE: u8 = 0x04;
/// `Command::FlushPipeline`.
pub const FLUSH_PIPELINE: u8 = 0x05;
/// `Command::Dispatch`.
pub const DISPATCH: u8 = 0x06;
/// `Command::DispatchIndirect`.
pub const DISPATCH_INDIRECT: u8 = 0x07;
/// `Command::Copy`.
pub const COPY: u8 = 0x08;
/// `Command::SetMarker`.
pub const MARKER: u8 = 0x09;
/// `Command::BeginEvent`.
pub const BEGIN_EVENT: u8 = 0x0a;
/// `Command::EndEvent`.
pub const END_EVENT: u8 = 0x0b;

/// The allowed total length (in words, header included) of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LengthRule {
    /// Exactly this many words.
    Exactly(usize),
    /// At least this many words; the packet's contents (a count, a byte length, a kernel kind)
    /// fix the exact length.
    AtLeast(usize),
}

impl LengthRule {
    /// Whether a packet of `length` words satisfies the rule.
    pub fn allows(self, length: usize) -> bool {
        match self {
            LengthRule::Exactly(n) => length == n,
            LengthRule::AtLeast(n) => length >= n,
        }
    }

    /// The smallest length the rule allows.
    pub fn min(self) -> usize {
        match self {
            LengthRule::Exactly(n) | LengthRule::AtLeast(n) => n,
        }
    }
}

impl fmt::Display for LengthRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthRule::Exactly(n) => write!(f, "exactly {n}"),
            LengthRule::AtLeast(n) => write!(f, "at least {n}"),
        }
    }
}

/// One row of the opcode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// The packet name (the [`Command::name`] without its width suffix).
    pub name: &'static str,
    /// The opcode (header bits 0..8).
    pub opcode: u8,
    /// The allowed total length in words, header included.
    pub length: LengthRule,
    /// The operand words after the header, in order (descriptions, for docs and errors).
    pub operands: &'static [&'static str],
}

/// The opcode table: one packet per [`Command`] variant. Opcode 0 is never assigned, so zeroed
/// memory is an unknown opcode rather than a command.
pub const OPCODES: &[OpcodeInfo] = &[
    OpcodeInfo {
        name: "wait-value",
        opcode: WAIT_VALUE,
        length: LengthRule::Exactly(10),
        operands: &[
            "address lo",
            "address hi",
            "width",
            "comparison",
            "reference lo",
            "reference hi",
            "mask lo",
            "mask hi",
            "engine",
        ],
    },
    OpcodeInfo {
        name: "write-value-bop",
        opcode: WRITE_VALUE_BOP,
        length: LengthRule::Exactly(8),
        operands: &[
            "address lo",
            "address hi",
            "width",
            "value lo",
            "value hi",
            "flush",
            "source",
        ],
    },
    OpcodeInfo {
        name: "write-value-top",
        opcode: WRITE_VALUE_TOP,
        length: LengthRule::Exactly(7),
        operands: &[
            "address lo",
            "address hi",
            "width",
            "value lo",
            "value hi",
            "source",
        ],
    },
    OpcodeInfo {
        name: "write-immediate",
        opcode: WRITE_IMMEDIATE,
        length: LengthRule::AtLeast(2),
        operands: &["count", "count x (address lo, address hi, value, mode)"],
    },
    OpcodeInfo {
        name: "flush-pipeline",
        opcode: FLUSH_PIPELINE,
        length: LengthRule::Exactly(2),
        operands: &["flush"],
    },
    OpcodeInfo {
        name: "dispatch",
        opcode: DISPATCH,
        length: LengthRule::AtLeast(4),
        operands: &["groups", "kernel kind", "kernel operands"],
    },
    OpcodeInfo {
        name: "dispatch-indirect",
        opcode: DISPATCH_INDIRECT,
        length: LengthRule::AtLeast(5),
        operands: &["args lo", "args hi", "kernel kind", "kernel operands"],
    },
    OpcodeInfo {
        name: "copy",
        opcode: COPY,
        length: LengthRule::Exactly(7),
        operands: &[
            "dst lo", "dst hi", "src lo", "src hi", "bytes lo", "bytes hi",
        ],
    },
    OpcodeInfo {
        name: "marker",
        opcode: MARKER,
        length: LengthRule::AtLeast(2),
        operands: &["byte length", "UTF-8 bytes, zero-padded to a word"],
    },
    OpcodeInfo {
        name: "begin-event",
        opcode: BEGIN_EVENT,
        length: LengthRule::AtLeast(2),
        operands: &["byte length", "UTF-8 bytes, zero-padded to a word"],
    },
    OpcodeInfo {
        name: "end-event",
        opcode: END_EVENT,
        length: LengthRule::Exactly(1),
        operands: &[],
    },
];

/// The table row of `opcode`, if it is assigned.
pub fn info(opcode: u8) -> Option<&'static OpcodeInfo> {
    // The table lists opcodes 1, 2, ... in order: try the row at that index first.
    match OPCODES.get(usize::from(opcode).wrapping_sub(1)) {
        Some(i) if i.opcode == opcode => Some(i),
        _ => OPCODES.iter().find(|i| i.opcode == opcode),
    }
}

/// The opcode of the packet that encodes `cmd`.
pub fn opcode_of(cmd: &Command) -> u8 {
    match cmd {
        Command::WaitValue { .. } => WAIT_VALUE,
        Command::WriteValueBottomOfPipe { .. } => WRITE_VALUE_BOP,
        Command::WriteValueTopOfPipe { .. } => WRITE_VALUE_TOP,
        Command::WriteImmediate { .. } => WRITE_IMMEDIATE,
        Command::FlushPipeline { .. } => FLUSH_PIPELINE,
        Command::Dispatch { .. } => DISPATCH,
        Command::DispatchIndirect { .. } => DISPATCH_INDIRECT,
        Command::Copy { .. } => COPY,
        Command::SetMarker { .. } => MARKER,
        Command::BeginEvent { .. } => BEGIN_EVENT,
        Command::EndEvent => END_EVENT,
    }
}

/// A short-form header word. `length` must be in `1..=MAX_SHORT_LENGTH`; the long form is a
/// header with length field 0 followed by the length word (see the module docs).
pub fn short_header(opcode: u8, length: u16) -> u32 {
    u32::from(opcode) | (u32::from(length) << LENGTH_SHIFT)
}

/// Width operand: the width in bits, 32 or 64.
pub fn width_word(width: Width) -> u32 {
    width.bits()
}

/// The width for a width operand word.
pub fn width_from_word(word: u32) -> Option<Width> {
    match word {
        32 => Some(Width::W32),
        64 => Some(Width::W64),
        _ => None,
    }
}

/// Engine operand: 0 for the micro engine, 1 for the pre-fetch parser.
pub fn engine_word(engine: WaitEngine) -> u32 {
    match engine {
        WaitEngine::Me => 0,
        WaitEngine::Pfp => 1,
    }
}

/// The engine for an engine operand word.
pub fn engine_from_word(word: u32) -> Option<WaitEngine> {
    match word {
        0 => Some(WaitEngine::Me),
        1 => Some(WaitEngine::Pfp),
        _ => None,
    }
}

/// Source operand: 0 value, 1 GPU timestamp, 2 system timestamp.
pub fn source_word(source: WriteSource) -> u32 {
    match source {
        WriteSource::Value => 0,
        WriteSource::GpuTimestamp => 1,
        WriteSource::SystemTimestamp => 2,
    }
}

/// The source for a source operand word.
pub fn source_from_word(word: u32) -> Option<WriteSource> {
    match word {
        0 => Some(WriteSource::Value),
        1 => Some(WriteSource::GpuTimestamp),
        2 => Some(WriteSource::SystemTimestamp),
        _ => None,
    }
}

/// Immediate-mode operand: the `D3D12_WRITEBUFFERIMMEDIATE_MODE` value (0 default, 1 marker-in,
/// 2 marker-out).
pub fn immediate_mode_word(mode: ImmediateMode) -> u32 {
    match mode {
        ImmediateMode::Default => 0,
        ImmediateMode::MarkerIn => 1,
        ImmediateMode::MarkerOut => 2,
    }
}

/// The mode for an immediate-mode operand word.
pub fn immediate_mode_from_word(word: u32) -> Option<ImmediateMode> {
    match word {
        0 => Some(ImmediateMode::Default),
        1 => Some(ImmediateMode::MarkerIn),
        2 => Some(ImmediateMode::MarkerOut),
        _ => None,
    }
}

/// Kernel kind `fill`: operands dst lo, dst hi, value.
pub const KERNEL_FILL: u32 = 0;
/// Kernel kind `add`: operands dst lo, dst hi, src lo, src hi, value.
pub const KERNEL_ADD: u32 = 1;
/// Kernel kind `sum`: operands dst lo, dst hi, src lo, src hi.
pub const KERNEL_SUM: u32 = 2;
/// Kernel kind `spin`: operands ns lo, ns hi.
pub const KERNEL_SPIN: u32 = 3;
/// Kernel kind `user`: operand index (into the list's kernel table).
pub const KERNEL_USER: u32 = 4;

/// The kernel-kind operand word of `kernel`.
pub fn kernel_kind_word(kernel: &KernelArgs) -> u32 {
    match kernel {
        KernelArgs::Fill { .. } => KERNEL_FILL,
        KernelArgs::Add { .. } => KERNEL_ADD,
        KernelArgs::Sum { .. } => KERNEL_SUM,
        KernelArgs::Spin { .. } => KERNEL_SPIN,
        KernelArgs::User { .. } => KERNEL_USER,
    }
}

/// The number of operand words that follow a kernel-kind word, if `kind` is a kernel kind.
pub fn kernel_operand_words(kind: u32) -> Option<usize> {
    match kind {
        KERNEL_FILL => Some(3),
        KERNEL_ADD => Some(5),
        KERNEL_SUM => Some(4),
        KERNEL_SPIN => Some(2),
        KERNEL_USER => Some(1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::encode::encode_into;
    use crate::command::types::{Comparison, Flush, ImmediateWrite, ValueCondition};
    use std::collections::HashSet;

    fn kernels() -> Vec<KernelArgs> {
        vec![
            KernelArgs::Fill {
                dst: 0x1000,
                value: 7,
            },
            KernelArgs::Add {
                dst: 0x1000,
                src: 0x2000,
                value: 1,
            },
            KernelArgs::Sum {
                dst: 0x1000,
                src: 0x2000,
            },
            KernelArgs::Spin { ns: 1_000 },
            KernelArgs::User { index: 3 },
        ]
    }

    /// At least one example of every opcode, and every variable-length shape.
    fn examples() -> Vec<Command> {
        let mut out = vec![
            Command::WaitValue {
                address: 0x1000,
                cond: ValueCondition {
                    width: Width::W64,
                    cmp: Comparison::GreaterEqual,
                    reference: 1,
                    mask: u64::MAX,
                },
                engine: WaitEngine::Pfp,
            },
            Command::WriteValueBottomOfPipe {
                address: 0x1000,
                width: Width::W32,
                value: 5,
                flush: Flush::L2_WRITEBACK,
                source: WriteSource::Value,
            },
            Command::WriteValueTopOfPipe {
                address: 0x1000,
                width: Width::W64,
                value: 0,
                source: WriteSource::GpuTimestamp,
            },
            Command::FlushPipeline { flush: Flush::ALL },
            Command::Copy {
                dst: 0x1000,
                src: 0x2000,
                bytes: 64,
            },
            Command::EndEvent,
        ];
        for n in 0..4u32 {
            let writes = (0..n)
                .map(|i| ImmediateWrite {
                    address: 0x1000 + 4 * u64::from(i),
                    value: i,
                    mode: ImmediateMode::MarkerOut,
                })
                .collect();
            out.push(Command::WriteImmediate { writes });
        }
        for kernel in kernels() {
            out.push(Command::Dispatch {
                kernel: kernel.clone(),
                groups: 2,
            });
            out.push(Command::DispatchIndirect {
                kernel,
                args: 0x3000,
            });
        }
        for label in ["", "a", "ab", "abc", "abcd", "abcde", "\u{e9}v\u{e9}nement"] {
            out.push(Command::SetMarker {
                label: label.to_string(),
            });
            out.push(Command::BeginEvent {
                label: label.to_string(),
            });
        }
        out
    }

    #[test]
    fn opcode_table_self_test() {
        let mut numbers = HashSet::new();
        let mut names = HashSet::new();
        for row in OPCODES {
            assert!(
                numbers.insert(row.opcode),
                "duplicate opcode {:#04x}",
                row.opcode
            );
            assert!(names.insert(row.name), "duplicate name {}", row.name);
            assert_ne!(row.opcode, 0, "opcode 0 is never assigned");
            assert_eq!(info(row.opcode), Some(row));
            assert!(row.length.min() >= 1);
            if let LengthRule::Exactly(n) = row.length {
                assert_eq!(n, 1 + row.operands.len(), "{}: operand list", row.name);
            }
        }

        let mut seen = HashSet::new();
        for cmd in examples() {
            let mut words = Vec::new();
            encode_into(&cmd, &mut words);
            let header = words[0];
            let opcode = (header & OPCODE_MASK) as u8;
            let length = (header >> LENGTH_SHIFT) as usize;
            let row = info(opcode).unwrap_or_else(|| panic!("{cmd:?}: opcode {opcode:#04x}"));
            assert_eq!(opcode, opcode_of(&cmd));
            assert_eq!(header & RESERVED_MASK, 0, "{cmd:?}");
            assert_eq!(length, words.len(), "{cmd:?}: header length");
            assert!(
                row.length.allows(length),
                "{cmd:?}: {length} vs {}",
                row.length
            );
            // The table name is the command name without its width.
            assert_eq!(
                cmd.name().replace("32", "").replace("64", ""),
                row.name,
                "{cmd:?}"
            );
            seen.insert(opcode);
        }
        let all: HashSet<u8> = OPCODES.iter().map(|r| r.opcode).collect();
        assert_eq!(seen, all, "every opcode has an example");
        // The smallest variable packets are reachable: the minimum is not just a lower bound.
        for row in OPCODES {
            let min = examples()
                .iter()
                .filter(|c| opcode_of(c) == row.opcode)
                .map(|c| {
                    let mut w = Vec::new();
                    encode_into(c, &mut w);
                    w.len()
                })
                .min();
            assert_eq!(min, Some(row.length.min()), "{}: minimum length", row.name);
        }
    }

    #[test]
    fn unassigned_opcodes_have_no_info() {
        assert!(info(0).is_none());
        assert!(info(0x3f).is_none());
        assert!(info(0xff).is_none());
    }

    #[test]
    fn enum_words_round_trip() {
        for w in [Width::W32, Width::W64] {
            assert_eq!(width_from_word(width_word(w)), Some(w));
        }
        for e in [WaitEngine::Me, WaitEngine::Pfp] {
            assert_eq!(engine_from_word(engine_word(e)), Some(e));
        }
        for s in [
            WriteSource::Value,
            WriteSource::GpuTimestamp,
            WriteSource::SystemTimestamp,
        ] {
            assert_eq!(source_from_word(source_word(s)), Some(s));
        }
        for m in [
            ImmediateMode::Default,
            ImmediateMode::MarkerIn,
            ImmediateMode::MarkerOut,
        ] {
            assert_eq!(immediate_mode_from_word(immediate_mode_word(m)), Some(m));
        }
        for k in kernels() {
            assert!(kernel_operand_words(kernel_kind_word(&k)).is_some());
        }
        assert_eq!(width_from_word(0), None);
        assert_eq!(engine_from_word(2), None);
        assert_eq!(source_from_word(3), None);
        assert_eq!(immediate_mode_from_word(3), None);
        assert_eq!(kernel_operand_words(5), None);
    }
}
