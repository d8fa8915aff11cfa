//! The pure packet decoder: the only reader of the packet format described in
//! [`super::opcode`].
//!
//! [`decode`] turns the packet at a word offset back into a [`Command`]. It never panics, never
//! reads outside `words`, and allocates at most what the input words hold, for any input. A
//! malformed packet is a [`DecodeError`] naming the packet's word offset and the offending value.
//!
//! The decoder accepts exactly the packets [`super::encode()`] writes (one encoding per command:
//! reserved bits, padding and lengths are checked), so a decoded packet re-encodes to the same
//! words. It does not judge commands: a packet holding `Comparison::None`, zero groups or unknown
//! flush bits decodes, and [`super::validate()`] rejects it.

use super::opcode::{self, LengthRule, OpcodeInfo, LENGTH_SHIFT, MAX_SHORT_LENGTH, OPCODE_MASK};
use super::opcode::{RESERVED_MASK, WAIT_VALUE, WRITE_IMMEDIATE, WRITE_VALUE_BOP};
use super::types::{Command, Comparison, Flush, ImmediateWrite, KernelArgs, ValueCondition};
use std::fmt;

/// A malformed packet: where it starts and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Word offset of the packet's header in the decoded stream.
    pub offset: usize,
    /// What is wrong.
    pub kind: DecodeErrorKind,
}

/// What is wrong with a malformed packet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The stream ends inside the packet (or before it: an offset at or past the end).
    Truncated {
        /// Words the packet needs (1 when there is no header at all).
        needed: usize,
        /// Words left from the packet's offset to the end of the stream.
        available: usize,
    },
    /// The opcode is not in [`opcode::OPCODES`].
    UnknownOpcode(u8),
    /// Reserved header bits (8..16) are set.
    ReservedBits {
        /// The whole header word.
        header: u32,
    },
    /// The packet's length does not match its opcode or its contents.
    BadLength {
        /// The packet's opcode.
        opcode: u8,
        /// The length the header gives, in words.
        length: usize,
        /// The length the opcode and contents call for.
        expected: LengthRule,
    },
    /// A long-form header for a packet that fits a short-form header.
    NonCanonicalLength {
        /// The packet's opcode.
        opcode: u8,
        /// The length the long-form header gives, in words.
        length: usize,
    },
    /// An enumeration operand has no meaning.
    BadEnum {
        /// The operand (`width`, `comparison`, `engine`, `source`, `immediate mode`,
        /// `kernel kind`).
        field: &'static str,
        /// The operand word.
        value: u32,
    },
    /// A label operand is malformed.
    BadString(StringError),
}

/// What is wrong with a label operand.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StringError {
    /// The byte length runs past the end of the packet.
    Overrun {
        /// The byte-length operand.
        bytes: u32,
        /// The bytes the packet has room for.
        room: usize,
    },
    /// A padding byte after the string is not zero.
    NonZeroPadding {
        /// Index of the byte within the string area.
        index: usize,
        /// Its value.
        value: u8,
    },
    /// The bytes are not UTF-8.
    InvalidUtf8 {
        /// Length of the longest valid UTF-8 prefix.
        valid_up_to: usize,
    },
}

impl fmt::Display for StringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StringError::Overrun { bytes, room } => write!(
                f,
                "label byte length {bytes} overruns the packet (room for {room} bytes)"
            ),
            StringError::NonZeroPadding { index, value } => write!(
                f,
                "label padding byte {index} is {value:#04x} (padding must be 0)"
            ),
            StringError::InvalidUtf8 { valid_up_to } => write!(
                f,
                "label is not valid UTF-8 (invalid byte at index {valid_up_to})"
            ),
        }
    }
}

/// The table name of `opcode`, for messages.
fn opcode_name(opcode: u8) -> &'static str {
    opcode::info(opcode).map_or("unknown", |i| i.name)
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeErrorKind::Truncated { needed, available } => write!(
                f,
                "truncated: the packet needs {needed} word{} but {available} remain{}",
                if *needed == 1 { "" } else { "s" },
                if *available == 1 { "s" } else { "" },
            ),
            DecodeErrorKind::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            DecodeErrorKind::ReservedBits { header } => write!(
                f,
                "header {header:#010x} has reserved bits 8..16 set ({:#04x}, must be 0)",
                (header & RESERVED_MASK) >> 8
            ),
            DecodeErrorKind::BadLength {
                opcode,
                length,
                expected,
            } => write!(
                f,
                "{} packet (opcode {opcode:#04x}) is {length} words long, expected {expected}",
                opcode_name(*opcode)
            ),
            DecodeErrorKind::NonCanonicalLength { opcode, length } => write!(
                f,
                "{} packet (opcode {opcode:#04x}) has a long-form length of {length} words \
                 (the long form is only for packets over {MAX_SHORT_LENGTH} words)",
                opcode_name(*opcode)
            ),
            DecodeErrorKind::BadEnum { field, value } => {
                write!(f, "unknown {field} value {value} ({value:#x})")
            }
            DecodeErrorKind::BadString(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "packet at word {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for DecodeError {}

/// Decodes the packet at word `offset` of `words`: the command and the packet's length in words.
///
/// Pure: the same words and offset always give the same result. Any input is accepted; an
/// `offset` at or past the end is [`DecodeErrorKind::Truncated`].
pub fn decode(words: &[u32], offset: usize) -> Result<(Command, usize), DecodeError> {
    decode_packet(words.get(offset..).unwrap_or_default())
        .map_err(|kind| DecodeError { offset, kind })
}

/// Decodes a whole stream, packet after packet, stopping at the first malformed one.
pub fn decode_all(words: &[u32]) -> Result<Vec<Command>, DecodeError> {
    let mut commands = Vec::new();
    let mut offset = 0;
    while offset < words.len() {
        let (cmd, len) = decode(words, offset)?;
        commands.push(cmd);
        offset += len; // len >= 1 and offset + len <= words.len()
    }
    Ok(commands)
}

/// Decodes the packet at the start of `rest` (the stream from the packet's offset on).
fn decode_packet(rest: &[u32]) -> Result<(Command, usize), DecodeErrorKind> {
    if let Some(ok) = decode_common(rest) {
        return Ok(ok);
    }
    decode_general(rest)
}

/// The short-form header of an `n`-word packet of opcode `op`.
const fn short_header(op: u8, n: u32) -> u32 {
    (n << LENGTH_SHIFT) | op as u32
}

/// The fixed-length packets the command processor sees most (value waits and writes), when well
/// formed: every operand in range, exactly the table's length. `None` for anything else, which
/// [`decode_general`] decodes (or rejects, saying why) the same as ever: for a well-formed
/// packet both give the same command.
#[inline]
pub(crate) fn decode_common(rest: &[u32]) -> Option<(Command, usize)> {
    const WAIT: u32 = short_header(WAIT_VALUE, 10);
    const BOP: u32 = short_header(WRITE_VALUE_BOP, 8);
    const TOP: u32 = short_header(opcode::WRITE_VALUE_TOP, 7);
    let u64_of = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    match *rest.first()? {
        WAIT => {
            let &[_, a0, a1, w, c, r0, r1, m0, m1, e] = rest.first_chunk::<10>()?;
            Some((
                Command::WaitValue {
                    address: u64_of(a0, a1),
                    cond: ValueCondition {
                        width: opcode::width_from_word(w)?,
                        cmp: Comparison::from_d3d12_value(c)?,
                        reference: u64_of(r0, r1),
                        mask: u64_of(m0, m1),
                    },
                    engine: opcode::engine_from_word(e)?,
                },
                10,
            ))
        }
        TOP => {
            let &[_, a0, a1, w, v0, v1, src] = rest.first_chunk::<7>()?;
            Some((
                Command::WriteValueTopOfPipe {
                    address: u64_of(a0, a1),
                    width: opcode::width_from_word(w)?,
                    value: u64_of(v0, v1),
                    source: opcode::source_from_word(src)?,
                },
                7,
            ))
        }
        BOP => {
            let &[_, a0, a1, w, v0, v1, flush, src] = rest.first_chunk::<8>()?;
            Some((
                Command::WriteValueBottomOfPipe {
                    address: u64_of(a0, a1),
                    width: opcode::width_from_word(w)?,
                    value: u64_of(v0, v1),
                    flush: Flush(flush),
                    source: opcode::source_from_word(src)?,
                },
                8,
            ))
        }
        _ => None,
    }
}

/// Decodes any packet, checking everything in order (see [`decode`]).
fn decode_general(rest: &[u32]) -> Result<(Command, usize), DecodeErrorKind> {
    let Some(&header) = rest.first() else {
        return Err(DecodeErrorKind::Truncated {
            needed: 1,
            available: 0,
        });
    };
    let op = (header & OPCODE_MASK) as u8;
    let info = opcode::info(op).ok_or(DecodeErrorKind::UnknownOpcode(op))?;
    if header & RESERVED_MASK != 0 {
        return Err(DecodeErrorKind::ReservedBits { header });
    }
    let short = (header >> LENGTH_SHIFT) as usize;
    let (length, header_words) = if short != 0 {
        (short, 1)
    } else {
        let Some(&long) = rest.get(1) else {
            return Err(DecodeErrorKind::Truncated {
                needed: 2,
                available: rest.len(),
            });
        };
        let length = usize::try_from(long).unwrap_or(usize::MAX);
        if length <= MAX_SHORT_LENGTH + 1 {
            // A long form of 65536 words would be a 65535-word short form.
            return Err(DecodeErrorKind::NonCanonicalLength { opcode: op, length });
        }
        (length, 2)
    };
    let Some(packet) = rest.get(..length) else {
        return Err(DecodeErrorKind::Truncated {
            needed: length,
            available: rest.len(),
        });
    };
    if !info.length.allows(length) {
        return Err(bad_length(info, length, info.length));
    }
    let mut r = Reader {
        words: packet,
        pos: header_words,
        info,
    };
    let cmd = decode_operands(&mut r)?;
    r.finish()?;
    Ok((cmd, length))
}

/// The [`DecodeErrorKind::BadLength`] for a packet.
fn bad_length(info: &OpcodeInfo, length: usize, expected: LengthRule) -> DecodeErrorKind {
    DecodeErrorKind::BadLength {
        opcode: info.opcode,
        length,
        expected,
    }
}

/// Reads the operands of one packet whose total length is already known to be in the packet.
struct Reader<'a> {
    /// The whole packet, header included.
    words: &'a [u32],
    /// Index of the next operand word.
    pos: usize,
    /// The packet's table row.
    info: &'static OpcodeInfo,
}

impl Reader<'_> {
    /// The next word. Running off the packet is a length error (the packet is too short for its
    /// contents), never a panic.
    fn word(&mut self) -> Result<u32, DecodeErrorKind> {
        let w = self.words.get(self.pos).copied().ok_or_else(|| {
            bad_length(
                self.info,
                self.words.len(),
                LengthRule::AtLeast(self.pos + 1),
            )
        })?;
        self.pos += 1;
        Ok(w)
    }

    /// The next two words as a 64-bit operand, low word first.
    fn u64(&mut self) -> Result<u64, DecodeErrorKind> {
        let lo = self.word()?;
        let hi = self.word()?;
        Ok(u64::from(lo) | (u64::from(hi) << 32))
    }

    /// The next word as an enumeration operand.
    fn enumeration<T>(
        &mut self,
        field: &'static str,
        parse: impl FnOnce(u32) -> Option<T>,
    ) -> Result<T, DecodeErrorKind> {
        let value = self.word()?;
        parse(value).ok_or(DecodeErrorKind::BadEnum { field, value })
    }

    /// Words left in the packet after the read position.
    fn remaining(&self) -> usize {
        self.words.len().saturating_sub(self.pos)
    }

    /// Checks that the rest of the packet is exactly `words` more words.
    fn expect_remaining(&self, words: u64) -> Result<(), DecodeErrorKind> {
        if self.remaining() as u64 == words {
            return Ok(());
        }
        let expected = (self.pos as u64).saturating_add(words);
        let expected = usize::try_from(expected).unwrap_or(usize::MAX);
        Err(bad_length(
            self.info,
            self.words.len(),
            LengthRule::Exactly(expected),
        ))
    }

    /// Checks that every word of the packet was read.
    fn finish(&self) -> Result<(), DecodeErrorKind> {
        self.expect_remaining(0)
    }

    /// A kernel-kind word and that kernel's operands, which must end the packet.
    fn kernel(&mut self) -> Result<KernelArgs, DecodeErrorKind> {
        let kind = self.enumeration("kernel kind", |k| {
            opcode::kernel_operand_words(k).map(|n| (k, n))
        })?;
        let (kind, operands) = kind;
        self.expect_remaining(operands as u64)?;
        Ok(match kind {
            opcode::KERNEL_FILL => KernelArgs::Fill {
                dst: self.u64()?,
                value: self.word()?,
            },
            opcode::KERNEL_ADD => KernelArgs::Add {
                dst: self.u64()?,
                src: self.u64()?,
                value: self.word()?,
            },
            opcode::KERNEL_SUM => KernelArgs::Sum {
                dst: self.u64()?,
                src: self.u64()?,
            },
            opcode::KERNEL_SPIN => KernelArgs::Spin { ns: self.u64()? },
            _ => KernelArgs::User {
                index: self.word()?,
            },
        })
    }

    /// A label operand: byte length, then the bytes zero-padded to a word; it must end the
    /// packet.
    fn string(&mut self) -> Result<String, DecodeErrorKind> {
        let bytes = self.word()?;
        let room = self.remaining().saturating_mul(4);
        let len = usize::try_from(bytes).unwrap_or(usize::MAX);
        if len > room {
            return Err(DecodeErrorKind::BadString(StringError::Overrun {
                bytes,
                room,
            }));
        }
        // `len <= room`, so this is at most the packet's own size.
        self.expect_remaining(u64::from(bytes).div_ceil(4))?;
        let mut buf = Vec::with_capacity(len);
        let mut index = 0;
        while self.remaining() > 0 {
            for byte in self.word()?.to_le_bytes() {
                if index < len {
                    buf.push(byte);
                } else if byte != 0 {
                    return Err(DecodeErrorKind::BadString(StringError::NonZeroPadding {
                        index,
                        value: byte,
                    }));
                }
                index += 1;
            }
        }
        String::from_utf8(buf).map_err(|e| {
            DecodeErrorKind::BadString(StringError::InvalidUtf8 {
                valid_up_to: e.utf8_error().valid_up_to(),
            })
        })
    }
}

/// Decodes the operands of the packet `r` reads, by opcode.
fn decode_operands(r: &mut Reader<'_>) -> Result<Command, DecodeErrorKind> {
    Ok(match r.info.opcode {
        WAIT_VALUE => Command::WaitValue {
            address: r.u64()?,
            cond: ValueCondition {
                width: r.enumeration("width", opcode::width_from_word)?,
                cmp: r.enumeration("comparison", Comparison::from_d3d12_value)?,
                reference: r.u64()?,
                mask: r.u64()?,
            },
            engine: r.enumeration("engine", opcode::engine_from_word)?,
        },
        WRITE_VALUE_BOP => Command::WriteValueBottomOfPipe {
            address: r.u64()?,
            width: r.enumeration("width", opcode::width_from_word)?,
            value: r.u64()?,
            flush: Flush(r.word()?),
            source: r.enumeration("source", opcode::source_from_word)?,
        },
        opcode::WRITE_VALUE_TOP => Command::WriteValueTopOfPipe {
            address: r.u64()?,
            width: r.enumeration("width", opcode::width_from_word)?,
            value: r.u64()?,
            source: r.enumeration("source", opcode::source_from_word)?,
        },
        WRITE_IMMEDIATE => {
            let count = r.word()?;
            r.expect_remaining(u64::from(count) * 4)?;
            // The length check bounds `count` by the packet's size.
            let mut writes = Vec::with_capacity(r.remaining() / 4);
            for _ in 0..count {
                writes.push(ImmediateWrite {
                    address: r.u64()?,
                    value: r.word()?,
                    mode: r.enumeration("immediate mode", opcode::immediate_mode_from_word)?,
                });
            }
            Command::WriteImmediate { writes }
        }
        opcode::FLUSH_PIPELINE => Command::FlushPipeline {
            flush: Flush(r.word()?),
        },
        opcode::DISPATCH => Command::Dispatch {
            groups: r.word()?,
            kernel: r.kernel()?,
        },
        opcode::DISPATCH_INDIRECT => Command::DispatchIndirect {
            args: r.u64()?,
            kernel: r.kernel()?,
        },
        opcode::COPY => Command::Copy {
            dst: r.u64()?,
            src: r.u64()?,
            bytes: r.u64()?,
        },
        opcode::MARKER => Command::SetMarker { label: r.string()? },
        opcode::BEGIN_EVENT => Command::BeginEvent { label: r.string()? },
        opcode::END_EVENT => Command::EndEvent,
        other => return Err(DecodeErrorKind::UnknownOpcode(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::encode::{encode, encode_into};
    use crate::command::types::{ImmediateMode, WaitEngine, Width, WriteSource};

    fn err(words: &[u32], offset: usize) -> DecodeError {
        match decode(words, offset) {
            Err(e) => e,
            Ok(ok) => panic!("decoded {ok:?}"),
        }
    }

    fn wait() -> Command {
        Command::WaitValue {
            address: 0x1000,
            cond: ValueCondition {
                width: Width::W64,
                cmp: Comparison::GreaterEqual,
                reference: 7,
                mask: u64::MAX,
            },
            engine: WaitEngine::Me,
        }
    }

    #[test]
    fn d2_round_trip_at_offset() {
        let cmds = vec![
            Command::EndEvent,
            wait(),
            Command::SetMarker {
                label: "h\u{e9}llo".into(),
            },
            Command::WriteImmediate {
                writes: vec![ImmediateWrite {
                    address: 4,
                    value: 1,
                    mode: ImmediateMode::Default,
                }],
            },
        ];
        let words = encode(&cmds);
        assert_eq!(decode(&words, 1), Ok((wait(), 10)));
        assert_eq!(decode_all(&words), Ok(cmds));
        assert_eq!(decode_all(&[]), Ok(vec![]));
    }

    #[test]
    fn d2_offset_past_end_is_truncated() {
        let words = encode(&[Command::EndEvent]);
        for offset in [1, 2, usize::MAX] {
            let e = err(&words, offset);
            assert_eq!(e.offset, offset);
            assert_eq!(
                e.kind,
                DecodeErrorKind::Truncated {
                    needed: 1,
                    available: 0
                }
            );
        }
    }

    #[test]
    fn d2_truncated_packet() {
        let words = encode(&[wait()]);
        let e = err(&words[..4], 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::Truncated {
                needed: 10,
                available: 4
            }
        );
        assert_eq!(
            e.to_string(),
            "packet at word 0: truncated: the packet needs 10 words but 4 remain"
        );
    }

    #[test]
    fn d2_unknown_opcode_message() {
        let mut words = encode(&vec![Command::EndEvent; 13]);
        words[12] = 0x0001_003f;
        let e = err(&words, 12);
        assert_eq!(e.kind, DecodeErrorKind::UnknownOpcode(0x3f));
        assert_eq!(e.to_string(), "packet at word 12: unknown opcode 0x3f");
        assert_eq!(decode_all(&words), Err(e));
        assert_eq!(err(&[0], 0).kind, DecodeErrorKind::UnknownOpcode(0));
    }

    #[test]
    fn d2_reserved_bits_rejected() {
        let e = err(&[0x0001_200b], 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::ReservedBits {
                header: 0x0001_200b
            }
        );
        assert!(e.to_string().contains("0x0001200b"), "{e}");
    }

    #[test]
    fn d2_fixed_length_mismatch() {
        let mut words = encode(&[Command::FlushPipeline { flush: Flush(1) }]);
        words.push(0);
        words[0] = 0x0003_0005;
        let e = err(&words, 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::BadLength {
                opcode: opcode::FLUSH_PIPELINE,
                length: 3,
                expected: LengthRule::Exactly(2)
            }
        );
        assert_eq!(
            e.to_string(),
            "packet at word 0: flush-pipeline packet (opcode 0x05) is 3 words long, \
             expected exactly 2"
        );
        // Length 0 is the long form; a missing length word is truncation.
        assert_eq!(
            err(&[0x0000_000b], 0).kind,
            DecodeErrorKind::Truncated {
                needed: 2,
                available: 1
            }
        );
    }

    #[test]
    fn d2_long_form_must_be_needed() {
        let e = err(&[0x0000_000b, 2], 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::NonCanonicalLength {
                opcode: opcode::END_EVENT,
                length: 2
            }
        );
        let e = err(&[0x0000_000b, 0x1_0000], 0);
        assert!(matches!(e.kind, DecodeErrorKind::NonCanonicalLength { .. }));
        let e = err(&[0x0000_000b, u32::MAX], 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::Truncated {
                needed: u32::MAX as usize,
                available: 2
            }
        );
    }

    #[test]
    fn d2_long_form_round_trips() {
        // The longest short-form label, the shortest long-form one, and a bigger one.
        let short_max = 4 * (MAX_SHORT_LENGTH - 2);
        for n in [short_max, short_max + 1, 300_001] {
            let cmd = Command::BeginEvent {
                label: "x".repeat(n - 2) + "\u{e9}",
            };
            let words = encode(std::slice::from_ref(&cmd));
            assert_eq!(decode(&words, 0), Ok((cmd, words.len())), "{n}");
        }
        // A fixed packet can never be long.
        let mut words = vec![0x0000_0005, 0x1_0001];
        words.resize(0x1_0001, 0);
        assert!(matches!(
            err(&words, 0).kind,
            DecodeErrorKind::BadLength { .. }
        ));
    }

    #[test]
    fn d2_bad_enums_name_field_and_value() {
        let cases: [(usize, &str); 3] = [(3, "width"), (4, "comparison"), (9, "engine")];
        for (index, field) in cases {
            let mut words = encode(&[wait()]);
            words[index] = 99;
            let e = err(&words, 0);
            assert_eq!(e.kind, DecodeErrorKind::BadEnum { field, value: 99 });
            assert_eq!(
                e.to_string(),
                format!("packet at word 0: unknown {field} value 99 (0x63)")
            );
        }
        let mut top = encode(&[Command::WriteValueTopOfPipe {
            address: 0,
            width: Width::W32,
            value: 0,
            source: WriteSource::Value,
        }]);
        top[6] = 3;
        assert_eq!(
            err(&top, 0).kind,
            DecodeErrorKind::BadEnum {
                field: "source",
                value: 3
            }
        );
        let mut imm = encode(&[Command::WriteImmediate {
            writes: vec![ImmediateWrite {
                address: 0,
                value: 0,
                mode: ImmediateMode::MarkerIn,
            }],
        }]);
        imm[5] = 7;
        assert_eq!(
            err(&imm, 0).kind,
            DecodeErrorKind::BadEnum {
                field: "immediate mode",
                value: 7
            }
        );
    }

    #[test]
    fn d2_kernel_kind_fixes_the_length() {
        let mut words = encode(&[Command::Dispatch {
            kernel: KernelArgs::User { index: 1 },
            groups: 1,
        }]);
        words[2] = opcode::KERNEL_SPIN; // spin needs two operand words, the packet has one
        assert_eq!(
            err(&words, 0).kind,
            DecodeErrorKind::BadLength {
                opcode: opcode::DISPATCH,
                length: 4,
                expected: LengthRule::Exactly(5)
            }
        );
        words[2] = 42;
        assert_eq!(
            err(&words, 0).kind,
            DecodeErrorKind::BadEnum {
                field: "kernel kind",
                value: 42
            }
        );
    }

    #[test]
    fn d2_immediate_count_must_match_length() {
        let mut words = encode(&[Command::WriteImmediate { writes: vec![] }]);
        words[1] = u32::MAX; // no allocation: the length check comes first
        assert_eq!(
            err(&words, 0).kind,
            DecodeErrorKind::BadLength {
                opcode: WRITE_IMMEDIATE,
                length: 2,
                expected: LengthRule::Exactly(2 + 4 * u32::MAX as usize)
            }
        );
    }

    #[test]
    fn d2_string_errors() {
        let words = encode(&[Command::SetMarker {
            label: "abcde".into(),
        }]);
        // Byte length past the packet.
        let mut over = words.clone();
        over[1] = u32::MAX;
        let e = err(&over, 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::BadString(StringError::Overrun {
                bytes: u32::MAX,
                room: 8
            })
        );
        assert!(e.to_string().contains("4294967295"), "{e}");
        // Byte length that leaves a whole spare word.
        let mut short = words.clone();
        short[1] = 4;
        assert_eq!(
            err(&short, 0).kind,
            DecodeErrorKind::BadLength {
                opcode: opcode::MARKER,
                length: 4,
                expected: LengthRule::Exactly(3)
            }
        );
        // Non-zero padding.
        let mut pad = words.clone();
        pad[3] |= 0x4100;
        assert_eq!(
            err(&pad, 0).kind,
            DecodeErrorKind::BadString(StringError::NonZeroPadding {
                index: 5,
                value: 0x41
            })
        );
        // Invalid UTF-8.
        let mut bad = words;
        bad[2] = 0x6463_ff61;
        let e = err(&bad, 0);
        assert_eq!(
            e.kind,
            DecodeErrorKind::BadString(StringError::InvalidUtf8 { valid_up_to: 1 })
        );
        assert!(e.to_string().contains("UTF-8"), "{e}");
    }

    #[test]
    fn d2_decode_does_not_judge_commands() {
        let cmd = Command::WaitValue {
            address: 3,
            cond: ValueCondition {
                width: Width::W32,
                cmp: Comparison::None,
                reference: u64::MAX,
                mask: 0,
            },
            engine: WaitEngine::Pfp,
        };
        let flush = Command::FlushPipeline {
            flush: Flush(0xffff_ffff),
        };
        let mut words = Vec::new();
        encode_into(&cmd, &mut words);
        encode_into(&flush, &mut words);
        assert_eq!(decode_all(&words), Ok(vec![cmd, flush]));
    }

    /// The value-wait and value-write packets' short path gives what the general decoder gives,
    /// for well-formed packets and for every single-word corruption of them (which it leaves
    /// to the general decoder, or decodes the same).
    #[test]
    fn common_packets_decode_as_the_general_decoder_does() {
        let mut cmds = vec![wait()];
        for (width, source) in [
            (Width::W32, WriteSource::Value),
            (Width::W64, WriteSource::GpuTimestamp),
            (Width::W32, WriteSource::SystemTimestamp),
        ] {
            cmds.push(Command::WriteValueTopOfPipe {
                address: 0x1_0000_0008,
                width,
                value: 0xdead_beef_0123,
                source,
            });
            cmds.push(Command::WriteValueBottomOfPipe {
                address: 0x2000,
                width,
                value: 5,
                flush: Flush(3),
                source,
            });
        }
        let specials = [0, 1, 2, 3, 7, 8, 9, 32, 64, 0xff, 0x100, u32::MAX];
        for cmd in &cmds {
            let words = encode(std::slice::from_ref(cmd));
            assert_eq!(decode_common(&words), Some((cmd.clone(), words.len())));
            assert_eq!(decode_general(&words), Ok((cmd.clone(), words.len())));
            // Too short, and followed by more words.
            assert_eq!(decode_common(&words[..words.len() - 1]), None);
            let mut longer = words.clone();
            longer.push(0x000b_0001);
            assert_eq!(decode_packet(&longer), decode_general(&longer));
            for i in 0..words.len() {
                for k in 0..specials.len() + 8 {
                    let mut w = words.clone();
                    // The special values, then arbitrary ones (bits of a Weyl sequence).
                    w[i] = match specials.get(k) {
                        Some(&v) => v,
                        None => (i as u32 * 8 + k as u32).wrapping_mul(0x9e37_79b9),
                    };
                    if let Some(ok) = decode_common(&w) {
                        assert_eq!(Ok(ok), decode_general(&w), "{w:x?}");
                    }
                    assert_eq!(decode_packet(&w), decode_general(&w), "{w:x?}");
                }
            }
        }
    }

    #[test]
    fn decode_error_is_an_error() {
        let e: Box<dyn std::error::Error> = Box::new(err(&[], 0));
        assert_eq!(
            e.to_string(),
            "packet at word 0: truncated: the packet needs 1 word but 0 remain"
        );
    }
}
