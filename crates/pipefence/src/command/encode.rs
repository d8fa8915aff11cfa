//! The packet encoder: the only writer of the packet format described in [`super::opcode`].
//!
//! Encoding never fails and never judges: every [`Command`] value is encodable, invalid ones
//! included (`Comparison::None`, zero groups, misaligned addresses, unknown flush bits), so that
//! tests can build corrupted or rule-breaking streams. Only [`super::validate()`] rejects commands.

use super::opcode;
use super::types::{Command, KernelArgs, ValueCondition};

/// The most bytes a label packet can carry (its byte-length operand is one word). A longer label
/// (over 4 GiB) is cut at the last character boundary that fits.
const MAX_LABEL_BYTES: usize = u32::MAX as usize;

/// The most writes a `write-immediate` packet can carry so that its long-form length still fits
/// a word. More writes (tens of GiB of them) are cut to this many.
const MAX_IMMEDIATE_WRITES: usize = (u32::MAX as usize - 3) / 4;

/// Appends the packet for `cmd` to `out`.
///
/// The packet is [`opcode::opcode_of`]`(cmd)`'s header followed by its operands (see
/// [`opcode::OPCODES`]); a packet longer than [`opcode::MAX_SHORT_LENGTH`] words gets the long-form
/// header.
pub fn encode_into(cmd: &Command, out: &mut Vec<u32>) {
    let start = out.len();
    out.push(0); // header, patched once the length is known
    match cmd {
        Command::WaitValue {
            address,
            cond:
                ValueCondition {
                    width,
                    cmp,
                    reference,
                    mask,
                },
            engine,
        } => {
            push_u64(out, *address);
            out.push(opcode::width_word(*width));
            out.push(cmp.d3d12_value());
            push_u64(out, *reference);
            push_u64(out, *mask);
            out.push(opcode::engine_word(*engine));
        }
        Command::WriteValueBottomOfPipe {
            address,
            width,
            value,
            flush,
            source,
        } => {
            push_u64(out, *address);
            out.push(opcode::width_word(*width));
            push_u64(out, *value);
            out.push(flush.0);
            out.push(opcode::source_word(*source));
        }
        Command::WriteValueTopOfPipe {
            address,
            width,
            value,
            source,
        } => {
            push_u64(out, *address);
            out.push(opcode::width_word(*width));
            push_u64(out, *value);
            out.push(opcode::source_word(*source));
        }
        Command::WriteImmediate { writes } => {
            let writes = writes.get(..MAX_IMMEDIATE_WRITES).unwrap_or(writes);
            out.push(u32::try_from(writes.len()).unwrap_or(u32::MAX));
            for write in writes {
                push_u64(out, write.address);
                out.push(write.value);
                out.push(opcode::immediate_mode_word(write.mode));
            }
        }
        Command::FlushPipeline { flush } => out.push(flush.0),
        Command::Dispatch { kernel, groups } => {
            out.push(*groups);
            push_kernel(out, kernel);
        }
        Command::DispatchIndirect { kernel, args } => {
            push_u64(out, *args);
            push_kernel(out, kernel);
        }
        Command::Copy { dst, src, bytes } => {
            push_u64(out, *dst);
            push_u64(out, *src);
            push_u64(out, *bytes);
        }
        Command::SetMarker { label } | Command::BeginEvent { label } => push_string(out, label),
        Command::EndEvent => {}
    }
    finish_header(out, start, opcode::opcode_of(cmd));
}

/// Encodes `cmds`, in order, into one stream.
pub fn encode(cmds: &[Command]) -> Vec<u32> {
    let mut out = Vec::with_capacity(cmds.len().saturating_mul(8));
    for cmd in cmds {
        encode_into(cmd, &mut out);
    }
    out
}

/// Writes the header of the packet that starts at `start` and runs to the end of `out`,
/// switching to the long form (inserting the length word) when the short form cannot hold it.
fn finish_header(out: &mut Vec<u32>, start: usize, opcode: u8) {
    let total = out.len().saturating_sub(start);
    let header = match u16::try_from(total) {
        // `MAX_SHORT_LENGTH` is `u16::MAX`: exactly the lengths a u16 holds are short.
        Ok(short) => opcode::short_header(opcode, short),
        Err(_) => {
            // Long form: length field 0, then the total length (now one word longer).
            let long = u32::try_from(total.saturating_add(1)).unwrap_or(u32::MAX);
            out.insert(start + 1, long);
            u32::from(opcode)
        }
    };
    if let Some(slot) = out.get_mut(start) {
        *slot = header;
    }
}

/// Appends a 64-bit operand, low word first.
fn push_u64(out: &mut Vec<u32>, value: u64) {
    out.push(value as u32);
    out.push((value >> 32) as u32);
}

/// Appends a kernel-kind word and that kernel's operands.
fn push_kernel(out: &mut Vec<u32>, kernel: &KernelArgs) {
    out.push(opcode::kernel_kind_word(kernel));
    match kernel {
        KernelArgs::Fill { dst, value } => {
            push_u64(out, *dst);
            out.push(*value);
        }
        KernelArgs::Add { dst, src, value } => {
            push_u64(out, *dst);
            push_u64(out, *src);
            out.push(*value);
        }
        KernelArgs::Sum { dst, src } => {
            push_u64(out, *dst);
            push_u64(out, *src);
        }
        KernelArgs::Spin { ns } => push_u64(out, *ns),
        KernelArgs::User { index } => out.push(*index),
    }
}

/// Appends a string operand: its UTF-8 byte length, then the bytes four to a word (first byte in
/// the low bits), the last word zero-padded.
fn push_string(out: &mut Vec<u32>, label: &str) {
    let mut end = label.len().min(MAX_LABEL_BYTES);
    while !label.is_char_boundary(end) {
        end -= 1; // terminates: 0 is a char boundary
    }
    let bytes = label.as_bytes().get(..end).unwrap_or_default();
    out.push(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    for chunk in bytes.chunks(4) {
        let mut word = [0u8; 4];
        for (slot, byte) in word.iter_mut().zip(chunk) {
            *slot = *byte;
        }
        out.push(u32::from_le_bytes(word));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::opcode::MAX_SHORT_LENGTH;
    use crate::command::types::{
        Comparison, Flush, ImmediateMode, ImmediateWrite, WaitEngine, Width, WriteSource,
    };

    #[test]
    fn wait_packet_layout() {
        let words = encode(&[Command::WaitValue {
            address: 0x1_0000_1000,
            cond: ValueCondition {
                width: Width::W64,
                cmp: Comparison::GreaterEqual,
                reference: 0x2_0000_0003,
                mask: u64::MAX,
            },
            engine: WaitEngine::Pfp,
        }]);
        assert_eq!(
            words,
            vec![
                0x000a_0001,
                0x0000_1000,
                0x1,
                64,
                7,
                3,
                2,
                u32::MAX,
                u32::MAX,
                1
            ]
        );
    }

    #[test]
    fn write_and_copy_layouts() {
        let bop = encode(&[Command::WriteValueBottomOfPipe {
            address: 0x20,
            width: Width::W32,
            value: 9,
            flush: Flush(0x40 | 1),
            source: WriteSource::SystemTimestamp,
        }]);
        assert_eq!(bop, vec![0x0008_0002, 0x20, 0, 32, 9, 0, 0x41, 2]);
        let top = encode(&[Command::WriteValueTopOfPipe {
            address: 0x20,
            width: Width::W64,
            value: u64::MAX,
            source: WriteSource::Value,
        }]);
        assert_eq!(top, vec![0x0007_0003, 0x20, 0, 64, u32::MAX, u32::MAX, 0]);
        let copy = encode(&[Command::Copy {
            dst: 1,
            src: 2,
            bytes: 3,
        }]);
        assert_eq!(copy, vec![0x0007_0008, 1, 0, 2, 0, 3, 0]);
        assert_eq!(
            encode(&[Command::FlushPipeline { flush: Flush(31) }]),
            vec![0x0002_0005, 31]
        );
        assert_eq!(encode(&[Command::EndEvent]), vec![0x0001_000b]);
    }

    #[test]
    fn immediate_and_kernel_layouts() {
        let imm = encode(&[Command::WriteImmediate {
            writes: vec![
                ImmediateWrite {
                    address: 0x10,
                    value: 5,
                    mode: ImmediateMode::MarkerIn,
                },
                ImmediateWrite {
                    address: 0x14,
                    value: 6,
                    mode: ImmediateMode::MarkerOut,
                },
            ],
        }]);
        assert_eq!(imm, vec![0x000a_0004, 2, 0x10, 0, 5, 1, 0x14, 0, 6, 2]);
        let dispatch = encode(&[Command::Dispatch {
            kernel: KernelArgs::Add {
                dst: 0x100,
                src: 0x200,
                value: 3,
            },
            groups: 4,
        }]);
        assert_eq!(dispatch, vec![0x0008_0006, 4, 1, 0x100, 0, 0x200, 0, 3]);
        let indirect = encode(&[Command::DispatchIndirect {
            kernel: KernelArgs::User { index: 2 },
            args: 0x40,
        }]);
        assert_eq!(indirect, vec![0x0005_0007, 0x40, 0, 4, 2]);
    }

    #[test]
    fn string_bytes_are_little_endian_and_zero_padded() {
        let words = encode(&[Command::SetMarker {
            label: "abcde".into(),
        }]);
        assert_eq!(words, vec![0x0004_0009, 5, 0x6463_6261, 0x0000_0065]);
        let empty = encode(&[Command::BeginEvent {
            label: String::new(),
        }]);
        assert_eq!(empty, vec![0x0002_000a, 0]);
    }

    #[test]
    fn invalid_commands_are_encodable() {
        let words = encode(&[
            Command::WaitValue {
                address: 3,
                cond: ValueCondition {
                    width: Width::W32,
                    cmp: Comparison::None,
                    reference: u64::MAX,
                    mask: u64::MAX,
                },
                engine: WaitEngine::Pfp,
            },
            Command::Dispatch {
                kernel: KernelArgs::User { index: u32::MAX },
                groups: 0,
            },
            Command::WriteImmediate { writes: vec![] },
        ]);
        assert_eq!(words.len(), 10 + 4 + 2);
        assert_eq!(words[14..], [0x0002_0004, 0]);
    }

    #[test]
    fn huge_label_uses_the_long_form() {
        let label = "x".repeat(4 * MAX_SHORT_LENGTH);
        let words = encode(&[Command::SetMarker { label }]);
        // header, length word, byte length, then the bytes.
        let total = 3 + MAX_SHORT_LENGTH;
        assert_eq!(words.len(), total);
        assert_eq!(words[0], u32::from(opcode::MARKER));
        assert_eq!(words[1] as usize, total);
        assert_eq!(words[2] as usize, 4 * MAX_SHORT_LENGTH);
    }

    #[test]
    fn longest_short_form_packet() {
        // 1 header + 1 byte length + 65533 words of bytes = 65535 words: still short form.
        let label = "y".repeat(4 * (MAX_SHORT_LENGTH - 2));
        let words = encode(&[Command::BeginEvent { label }]);
        assert_eq!(words.len(), MAX_SHORT_LENGTH);
        assert_eq!(words[0] >> 16, 0xffff);
        // One more byte needs one more word: long form, plus its length word.
        let label = "y".repeat(4 * (MAX_SHORT_LENGTH - 2) + 1);
        let words = encode(&[Command::BeginEvent { label }]);
        assert_eq!(words.len(), MAX_SHORT_LENGTH + 2);
        assert_eq!(words[0] >> 16, 0);
        assert_eq!(words[1] as usize, MAX_SHORT_LENGTH + 2);
    }

    #[test]
    fn encode_appends() {
        let mut out = vec![0xdead_beef];
        encode_into(&Command::EndEvent, &mut out);
        assert_eq!(out, vec![0xdead_beef, 0x0001_000b]);
    }
}
