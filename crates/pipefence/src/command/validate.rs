//! Command validation: every rule about a recorded command (C1-C11) and about which commands a
//! queue kind accepts (Q1). `close()` runs it; the encoder and decoder never judge commands.
//!
//! Each broken rule is one [`ValidationError`] naming the offending value; a command that breaks
//! several rules appears several times. Errors are sorted by command index (stable: one
//! command's errors keep the order of the rules below).

use super::types::{
    Command, Comparison, Flush, KernelArgs, QueueKind, ValidationError, ValueCondition, WaitEngine,
    Width, WriteSource,
};

/// Every invalid command of a `kind` list, in index order.
///
/// `user_kernels` is the size of the list's kernel table (user-kernel indices must be below it).
///
/// Rules, by command:
/// - wait-value: comparison not `none`; on the pre-fetch parser only greater-equal; in a copy
///   list only greater-equal and only the micro engine; address aligned to the width; a 32-bit
///   wait's reference and mask fit 32 bits.
/// - write-value (bottom/top of pipe): address aligned to the width; 0 as the value of a
///   timestamp write; a 32-bit value fits 32 bits; no unknown flush bits (bottom of pipe).
/// - write-immediate: at least one write; every address 4-byte aligned.
/// - flush-pipeline: no unknown flush bits; not in a copy list.
/// - dispatch / dispatch-indirect: at least one group / a 4-byte aligned argument address; not
///   in a copy list; kernel operands aligned (fill, add: 4; sum: destination 8, source 4); a
///   user-kernel index in the kernel table.
/// - copy: both addresses 4-byte aligned; byte count a multiple of 4 (0 copies nothing).
/// - events: every end-event closes an open begin-event; every begin-event is closed.
pub fn validate(
    kind: QueueKind,
    commands: &[Command],
    user_kernels: usize,
) -> Vec<ValidationError> {
    let mut errors = Vec::new();
    let mut open_events: Vec<usize> = Vec::new();
    for (index, cmd) in commands.iter().enumerate() {
        let mut sink = Sink {
            index,
            command: cmd.name(),
            errors: &mut errors,
        };
        check(kind, cmd, user_kernels, &mut sink);
        match cmd {
            Command::BeginEvent { .. } => open_events.push(index),
            Command::EndEvent => {
                let closed = open_events.pop();
                if closed.is_none() {
                    sink.push("end-event has no open begin-event to close".to_string());
                }
            }
            _ => {}
        }
    }
    for index in open_events {
        if let Some(cmd @ Command::BeginEvent { label }) = commands.get(index) {
            errors.push(ValidationError {
                index,
                command: cmd.name(),
                message: format!("begin-event {label:?} is never closed by an end-event"),
            });
        }
    }
    errors.sort_by_key(|e| e.index);
    errors
}

/// Collects the errors of one command.
struct Sink<'a> {
    /// The command's index.
    index: usize,
    /// The command's name.
    command: &'static str,
    /// Where errors go.
    errors: &'a mut Vec<ValidationError>,
}

impl Sink<'_> {
    /// Records one broken rule.
    fn push(&mut self, message: String) {
        self.errors.push(ValidationError {
            index: self.index,
            command: self.command,
            message,
        });
    }

    /// Records `what` (an address) if it is not `align`-byte aligned.
    fn aligned(&mut self, what: &str, address: u64, align: u64, why: &str) {
        if !address.is_multiple_of(align) {
            self.push(format!(
                "{what} {address:#x} is not {align}-byte aligned{why}"
            ));
        }
    }

    /// Records unknown flush bits.
    fn flush(&mut self, flush: Flush) {
        if flush.unknown_bits() != 0 {
            self.push(format!(
                "flush has unknown bits {:#x} (the defined flags are {:#x}: {})",
                flush.unknown_bits(),
                Flush::ALL.0,
                Flush::ALL
            ));
        }
    }

    /// Records that `kind` does not accept this command.
    fn not_in_copy_list(&mut self, kind: QueueKind, why: &str) {
        if kind == QueueKind::Copy {
            let command = self.command;
            self.push(format!("{command} is not allowed in a copy list ({why})"));
        }
    }
}

/// The per-command rules (events are checked across the list by [`validate`]).
fn check(kind: QueueKind, cmd: &Command, user_kernels: usize, sink: &mut Sink<'_>) {
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
            if *cmp == Comparison::None {
                sink.push(
                    "comparison `none` is not allowed in a wait (it never compares)".to_string(),
                );
            } else if *cmp != Comparison::GreaterEqual {
                if kind == QueueKind::Copy {
                    sink.push(format!(
                        "comparison `{cmp}` is not allowed in a copy list (the DMA engine's \
                         waits accept only greater-equal)"
                    ));
                } else if *engine == WaitEngine::Pfp {
                    sink.push(format!(
                        "comparison `{cmp}` is not allowed on the pre-fetch parser (pfp waits \
                         accept only greater-equal)"
                    ));
                }
            }
            if *engine == WaitEngine::Pfp && !kind.has_pfp() {
                sink.push(
                    "engine `pfp` is not available in a copy list (the DMA engine has one stage)"
                        .to_string(),
                );
            }
            let why = format!(" ({}-bit wait)", width.bits());
            sink.aligned("address", *address, width.bytes(), &why);
            if *width == Width::W32 {
                fits_32(sink, "reference", *reference, "wait");
                fits_32(sink, "mask", *mask, "wait");
            }
        }
        Command::WriteValueBottomOfPipe {
            address,
            width,
            value,
            flush,
            source,
        } => {
            write_value(sink, *address, *width, *value, *source);
            sink.flush(*flush);
        }
        Command::WriteValueTopOfPipe {
            address,
            width,
            value,
            source,
        } => write_value(sink, *address, *width, *value, *source),
        Command::WriteImmediate { writes } => {
            if writes.is_empty() {
                sink.push("write-immediate has no writes (at least one is required)".to_string());
            }
            for (i, write) in writes.iter().enumerate() {
                let what = if writes.len() > 1 {
                    format!("write {i}: address")
                } else {
                    "address".to_string()
                };
                sink.aligned(&what, write.address, 4, "");
            }
        }
        Command::FlushPipeline { flush } => {
            sink.flush(*flush);
            sink.not_in_copy_list(kind, "the DMA engine has no pipeline to flush");
        }
        Command::Dispatch { kernel, groups } => {
            if *groups == 0 {
                sink.push("group count 0: a dispatch needs at least 1 group".to_string());
            }
            sink.not_in_copy_list(kind, "the DMA engine runs no kernels");
            kernel_args(sink, kernel, user_kernels);
        }
        Command::DispatchIndirect { kernel, args } => {
            sink.aligned("indirect arguments address", *args, 4, "");
            sink.not_in_copy_list(kind, "the DMA engine runs no kernels");
            kernel_args(sink, kernel, user_kernels);
        }
        Command::Copy { dst, src, bytes } => {
            sink.aligned("destination", *dst, 4, "");
            sink.aligned("source", *src, 4, "");
            if bytes % 4 != 0 {
                sink.push(format!("byte count {bytes} is not a multiple of 4"));
            }
        }
        Command::SetMarker { .. } | Command::BeginEvent { .. } | Command::EndEvent => {}
    }
}

/// The rules shared by bottom- and top-of-pipe value writes.
fn write_value(sink: &mut Sink<'_>, address: u64, width: Width, value: u64, source: WriteSource) {
    let why = format!(" ({}-bit write)", width.bits());
    sink.aligned("address", address, width.bytes(), &why);
    if source != WriteSource::Value && value != 0 {
        sink.push(format!(
            "value {value:#x} must be 0 with source `{}` (the timestamp is written instead)",
            source.name()
        ));
    } else if width == Width::W32 {
        fits_32(sink, "value", value, "write");
    }
}

/// Records a 32-bit operand above `u32::MAX`.
fn fits_32(sink: &mut Sink<'_>, what: &str, value: u64, access: &str) {
    if value > u64::from(u32::MAX) {
        sink.push(format!(
            "{what} {value:#x} does not fit a 32-bit {access} (above 0xffffffff)"
        ));
    }
}

/// The rules on a dispatch's kernel operands.
fn kernel_args(sink: &mut Sink<'_>, kernel: &KernelArgs, user_kernels: usize) {
    match kernel {
        KernelArgs::Fill { dst, .. } => sink.aligned("fill destination", *dst, 4, ""),
        KernelArgs::Add { dst, src, .. } => {
            sink.aligned("add destination", *dst, 4, "");
            sink.aligned("add source", *src, 4, "");
        }
        KernelArgs::Sum { dst, src } => {
            sink.aligned("sum destination", *dst, 8, " (it is a u64)");
            sink.aligned("sum source", *src, 4, "");
        }
        KernelArgs::Spin { .. } => {}
        KernelArgs::User { index } => {
            let in_table = usize::try_from(*index).is_ok_and(|i| i < user_kernels);
            if !in_table {
                sink.push(format!(
                    "user kernel index {index} is out of range (the list has {user_kernels} \
                     user kernel{})",
                    if user_kernels == 1 { "" } else { "s" }
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::types::{ImmediateMode, ImmediateWrite};

    /// `(index, message)` of every error.
    fn errors(kind: QueueKind, cmds: &[Command], user_kernels: usize) -> Vec<(usize, String)> {
        validate(kind, cmds, user_kernels)
            .into_iter()
            .map(|e| (e.index, e.message))
            .collect()
    }

    /// The messages for one command in a direct list.
    fn direct(cmd: Command) -> Vec<String> {
        one(QueueKind::Direct, cmd)
    }

    /// The messages for one command in a `kind` list (with 2 user kernels).
    fn one(kind: QueueKind, cmd: Command) -> Vec<String> {
        errors(kind, &[cmd], 2)
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    }

    fn wait(cmp: Comparison, engine: WaitEngine) -> Command {
        Command::WaitValue {
            address: 0x1000,
            cond: ValueCondition {
                width: Width::W64,
                cmp,
                reference: 1,
                mask: u64::MAX,
            },
            engine,
        }
    }

    fn wait32(address: u64, reference: u64, mask: u64) -> Command {
        Command::WaitValue {
            address,
            cond: ValueCondition {
                width: Width::W32,
                cmp: Comparison::GreaterEqual,
                reference,
                mask,
            },
            engine: WaitEngine::Me,
        }
    }

    fn bop(address: u64, width: Width, value: u64, source: WriteSource, flush: Flush) -> Command {
        Command::WriteValueBottomOfPipe {
            address,
            width,
            value,
            flush,
            source,
        }
    }

    fn top(address: u64, width: Width, value: u64, source: WriteSource) -> Command {
        Command::WriteValueTopOfPipe {
            address,
            width,
            value,
            source,
        }
    }

    fn imm(addresses: &[u64]) -> Command {
        Command::WriteImmediate {
            writes: addresses
                .iter()
                .map(|&address| ImmediateWrite {
                    address,
                    value: 1,
                    mode: ImmediateMode::Default,
                })
                .collect(),
        }
    }

    fn dispatch(kernel: KernelArgs, groups: u32) -> Command {
        Command::Dispatch { kernel, groups }
    }

    fn fill(dst: u64) -> KernelArgs {
        KernelArgs::Fill { dst, value: 0 }
    }

    fn begin(label: &str) -> Command {
        Command::BeginEvent {
            label: label.to_string(),
        }
    }

    /// One valid command of every kind that a copy list accepts.
    fn copy_safe() -> Vec<Command> {
        vec![
            wait(Comparison::GreaterEqual, WaitEngine::Me),
            bop(0x10, Width::W64, 5, WriteSource::Value, Flush::ALL),
            top(0x10, Width::W32, 5, WriteSource::Value),
            top(0x10, Width::W64, 0, WriteSource::GpuTimestamp),
            imm(&[0x20, 0x24]),
            Command::Copy {
                dst: 0x100,
                src: 0x200,
                bytes: 64,
            },
            Command::SetMarker { label: "m".into() },
            begin("e"),
            Command::EndEvent,
        ]
    }

    /// One valid command of every kind.
    fn everything() -> Vec<Command> {
        let mut cmds = copy_safe();
        cmds.extend([
            wait(Comparison::Less, WaitEngine::Me),
            wait(Comparison::GreaterEqual, WaitEngine::Pfp),
            Command::FlushPipeline {
                flush: Flush::L2_WRITEBACK,
            },
            dispatch(fill(0x100), 1),
            dispatch(
                KernelArgs::Add {
                    dst: 0x100,
                    src: 0x204,
                    value: 1,
                },
                3,
            ),
            dispatch(
                KernelArgs::Sum {
                    dst: 0x108,
                    src: 0x204,
                },
                3,
            ),
            dispatch(KernelArgs::Spin { ns: 7 }, 1),
            dispatch(KernelArgs::User { index: 1 }, 1),
            Command::DispatchIndirect {
                kernel: KernelArgs::User { index: 0 },
                args: 0x40,
            },
        ]);
        cmds
    }

    #[test]
    fn valid_lists_have_no_errors() {
        assert_eq!(errors(QueueKind::Copy, &copy_safe(), 0), vec![]);
        assert_eq!(errors(QueueKind::Direct, &[], 0), vec![]);
    }

    #[test]
    fn q1_direct_and_compute_accept_everything() {
        for kind in [QueueKind::Direct, QueueKind::Compute] {
            assert_eq!(errors(kind, &everything(), 2), vec![], "{kind}");
        }
    }

    #[test]
    fn c1_none_comparison_rejected() {
        for engine in [WaitEngine::Me, WaitEngine::Pfp] {
            assert_eq!(
                direct(wait(Comparison::None, engine)),
                vec!["comparison `none` is not allowed in a wait (it never compares)"]
            );
        }
    }

    #[test]
    fn c1_me_wait_accepts_every_comparison() {
        for cmp in Comparison::ALL
            .into_iter()
            .filter(|c| *c != Comparison::None)
        {
            assert_eq!(
                direct(wait(cmp, WaitEngine::Me)),
                Vec::<String>::new(),
                "{cmp}"
            );
        }
    }

    #[test]
    fn c2_pfp_wait_rejects_less() {
        assert_eq!(
            direct(wait(Comparison::Less, WaitEngine::Pfp)),
            vec![
                "comparison `less` is not allowed on the pre-fetch parser (pfp waits accept only \
                 greater-equal)"
            ]
        );
        for cmp in Comparison::ALL {
            let n = one(QueueKind::Compute, wait(cmp, WaitEngine::Pfp)).len();
            assert_eq!(n, usize::from(cmp != Comparison::GreaterEqual), "{cmp}");
        }
    }

    #[test]
    fn q1_copy_list_rejects_non_ge_wait() {
        assert_eq!(
            one(QueueKind::Copy, wait(Comparison::Equal, WaitEngine::Me)),
            vec![
                "comparison `equal` is not allowed in a copy list (the DMA engine's waits accept \
                 only greater-equal)"
            ]
        );
        assert_eq!(
            one(
                QueueKind::Copy,
                wait(Comparison::GreaterEqual, WaitEngine::Me)
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn q1_copy_list_rejects_pfp_wait() {
        assert_eq!(
            one(
                QueueKind::Copy,
                wait(Comparison::GreaterEqual, WaitEngine::Pfp)
            ),
            vec!["engine `pfp` is not available in a copy list (the DMA engine has one stage)"]
        );
        // A non-GE pfp wait in a copy list: the copy rule and the engine rule, not the pfp rule.
        assert_eq!(
            one(QueueKind::Copy, wait(Comparison::Less, WaitEngine::Pfp)).len(),
            2
        );
    }

    #[test]
    fn c11_misaligned_wait_address() {
        assert_eq!(
            direct(wait32(0x10002, 0, 0)),
            vec!["address 0x10002 is not 4-byte aligned (32-bit wait)"]
        );
        let mut w64 = wait(Comparison::GreaterEqual, WaitEngine::Me);
        if let Command::WaitValue { address, .. } = &mut w64 {
            *address = 0x10004;
        }
        assert_eq!(
            direct(w64),
            vec!["address 0x10004 is not 8-byte aligned (64-bit wait)"]
        );
        assert!(direct(wait32(0x10004, 0, 0)).is_empty());
    }

    #[test]
    fn c1_w32_reference_and_mask_must_fit() {
        assert_eq!(
            direct(wait32(0x10, 1 << 32, u64::from(u32::MAX))),
            vec!["reference 0x100000000 does not fit a 32-bit wait (above 0xffffffff)"]
        );
        assert_eq!(
            direct(wait32(0x10, 0, u64::MAX)),
            vec!["mask 0xffffffffffffffff does not fit a 32-bit wait (above 0xffffffff)"]
        );
        // 64-bit waits take any reference and mask.
        let mut w = wait(Comparison::GreaterEqual, WaitEngine::Me);
        if let Command::WaitValue {
            cond: ValueCondition { reference, .. },
            ..
        } = &mut w
        {
            *reference = u64::MAX;
        }
        assert!(direct(w).is_empty());
    }

    #[test]
    fn c3_timestamp_with_value_rejected() {
        for source in [WriteSource::GpuTimestamp, WriteSource::SystemTimestamp] {
            assert_eq!(
                direct(bop(0x10, Width::W64, 5, source, Flush::NONE)),
                vec![format!(
                    "value 0x5 must be 0 with source `{}` (the timestamp is written instead)",
                    source.name()
                )]
            );
            assert!(direct(bop(0x10, Width::W64, 0, source, Flush::NONE)).is_empty());
        }
    }

    #[test]
    fn c4_top_timestamp_with_value_rejected() {
        assert_eq!(
            direct(top(0x10, Width::W32, 1, WriteSource::SystemTimestamp)).len(),
            1
        );
        assert!(direct(top(0x10, Width::W32, 0, WriteSource::SystemTimestamp)).is_empty());
    }

    #[test]
    fn c11_misaligned_write_address() {
        assert_eq!(
            direct(bop(0x14, Width::W64, 0, WriteSource::Value, Flush::NONE)),
            vec!["address 0x14 is not 8-byte aligned (64-bit write)"]
        );
        assert_eq!(
            direct(top(0x13, Width::W32, 0, WriteSource::Value)),
            vec!["address 0x13 is not 4-byte aligned (32-bit write)"]
        );
    }

    #[test]
    fn c3_w32_value_must_fit() {
        assert_eq!(
            direct(bop(
                0x10,
                Width::W32,
                1 << 32,
                WriteSource::Value,
                Flush::NONE
            )),
            vec!["value 0x100000000 does not fit a 32-bit write (above 0xffffffff)"]
        );
        assert_eq!(
            direct(top(0x10, Width::W32, u64::MAX, WriteSource::Value)).len(),
            1
        );
        assert!(direct(top(
            0x10,
            Width::W32,
            u64::from(u32::MAX),
            WriteSource::Value
        ))
        .is_empty());
    }

    #[test]
    fn c3_bop_unknown_flush_bits_rejected() {
        assert_eq!(
            direct(bop(0x10, Width::W32, 0, WriteSource::Value, Flush(0x41))),
            vec![
                "flush has unknown bits 0x40 (the defined flags are 0x1f: l1-invalidate \
                 l1-volatile l2-invalidate l2-volatile l2-writeback)"
            ]
        );
    }

    #[test]
    fn c5_empty_write_immediate_rejected() {
        assert_eq!(
            direct(imm(&[])),
            vec!["write-immediate has no writes (at least one is required)"]
        );
    }

    #[test]
    fn c5_misaligned_immediate_address() {
        assert_eq!(
            direct(imm(&[0x6])),
            vec!["address 0x6 is not 4-byte aligned"]
        );
        assert_eq!(
            direct(imm(&[0x4, 0x8, 0x6, 0xb])),
            vec![
                "write 2: address 0x6 is not 4-byte aligned",
                "write 3: address 0xb is not 4-byte aligned"
            ]
        );
        assert!(one(QueueKind::Copy, imm(&[0x4])).is_empty());
    }

    #[test]
    fn c8_flush_unknown_bits_rejected() {
        let msgs = direct(Command::FlushPipeline {
            flush: Flush(0x8000_0000),
        });
        assert_eq!(msgs.len(), 1);
        assert!(
            msgs[0].starts_with("flush has unknown bits 0x80000000"),
            "{msgs:?}"
        );
    }

    #[test]
    fn q1_copy_list_rejects_flush_pipeline() {
        assert_eq!(
            one(
                QueueKind::Copy,
                Command::FlushPipeline { flush: Flush::NONE }
            ),
            vec![
                "flush-pipeline is not allowed in a copy list (the DMA engine has no pipeline to \
                 flush)"
            ]
        );
    }

    #[test]
    fn c6_zero_groups_rejected() {
        assert_eq!(
            direct(dispatch(fill(0x10), 0)),
            vec!["group count 0: a dispatch needs at least 1 group"]
        );
    }

    #[test]
    fn q1_copy_list_rejects_dispatch() {
        assert_eq!(
            one(QueueKind::Copy, dispatch(fill(0x10), 1)),
            vec!["dispatch is not allowed in a copy list (the DMA engine runs no kernels)"]
        );
        assert_eq!(
            one(
                QueueKind::Copy,
                Command::DispatchIndirect {
                    kernel: fill(0x10),
                    args: 0x20
                }
            ),
            vec![
                "dispatch-indirect is not allowed in a copy list (the DMA engine runs no kernels)"
            ]
        );
    }

    #[test]
    fn c6_kernel_operand_alignment() {
        assert_eq!(
            direct(dispatch(fill(0x11), 1)),
            vec!["fill destination 0x11 is not 4-byte aligned"]
        );
        assert_eq!(
            direct(dispatch(
                KernelArgs::Add {
                    dst: 0x2,
                    src: 0x3,
                    value: 0
                },
                1
            )),
            vec![
                "add destination 0x2 is not 4-byte aligned",
                "add source 0x3 is not 4-byte aligned"
            ]
        );
        assert_eq!(
            direct(dispatch(KernelArgs::Sum { dst: 0x4, src: 0x6 }, 1)),
            vec![
                "sum destination 0x4 is not 8-byte aligned (it is a u64)",
                "sum source 0x6 is not 4-byte aligned"
            ]
        );
    }

    #[test]
    fn c6_user_kernel_index_out_of_range() {
        let cmd = dispatch(KernelArgs::User { index: 2 }, 1);
        assert_eq!(
            direct(cmd.clone()),
            vec!["user kernel index 2 is out of range (the list has 2 user kernels)"]
        );
        assert_eq!(
            errors(QueueKind::Direct, std::slice::from_ref(&cmd), 1)[0].1,
            "user kernel index 2 is out of range (the list has 1 user kernel)"
        );
        assert!(errors(QueueKind::Direct, &[cmd], 3).is_empty());
    }

    #[test]
    fn c7_indirect_args_misaligned() {
        assert_eq!(
            direct(Command::DispatchIndirect {
                kernel: KernelArgs::Spin { ns: 1 },
                args: 0x42
            }),
            vec!["indirect arguments address 0x42 is not 4-byte aligned"]
        );
    }

    #[test]
    fn c7_indirect_kernel_args_checked() {
        assert_eq!(
            direct(Command::DispatchIndirect {
                kernel: KernelArgs::User { index: 9 },
                args: 0x40
            }),
            vec!["user kernel index 9 is out of range (the list has 2 user kernels)"]
        );
    }

    #[test]
    fn c9_copy_misaligned() {
        assert_eq!(
            direct(Command::Copy {
                dst: 0x2,
                src: 0x5,
                bytes: 8
            }),
            vec![
                "destination 0x2 is not 4-byte aligned",
                "source 0x5 is not 4-byte aligned"
            ]
        );
    }

    #[test]
    fn c9_copy_bytes_not_multiple_of_4() {
        assert_eq!(
            one(
                QueueKind::Copy,
                Command::Copy {
                    dst: 0,
                    src: 0,
                    bytes: 6
                }
            ),
            vec!["byte count 6 is not a multiple of 4"]
        );
        assert!(direct(Command::Copy {
            dst: 0,
            src: 0,
            bytes: 0
        })
        .is_empty());
    }

    #[test]
    fn c10_unbalanced_end_event() {
        let cmds = [begin("a"), Command::EndEvent, Command::EndEvent];
        let errs = validate(QueueKind::Direct, &cmds, 0);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].index, 2);
        assert_eq!(errs[0].command, "end-event");
        assert_eq!(
            errs[0].to_string(),
            "command 2 (end-event): end-event has no open begin-event to close"
        );
    }

    #[test]
    fn c10_unclosed_begin_event() {
        let cmds = [
            begin("outer"),
            begin("fill"),
            Command::EndEvent,
            begin("tail"),
        ];
        assert_eq!(
            errors(QueueKind::Copy, &cmds, 0),
            vec![
                (
                    0,
                    "begin-event \"outer\" is never closed by an end-event".to_string()
                ),
                (
                    3,
                    "begin-event \"tail\" is never closed by an end-event".to_string()
                ),
            ]
        );
    }

    #[test]
    fn c10_nested_events_balance() {
        let cmds = [
            begin("a"),
            begin("b"),
            Command::EndEvent,
            begin("c"),
            Command::EndEvent,
            Command::EndEvent,
        ];
        assert!(validate(QueueKind::Compute, &cmds, 0).is_empty());
    }

    #[test]
    fn errors_sorted_by_index_and_cover_every_invalid_command() {
        let cmds = [
            begin("never closed"),
            dispatch(fill(0x1), 0),
            Command::EndEvent,
            Command::EndEvent,
            Command::FlushPipeline { flush: Flush(64) },
        ];
        let errs = validate(QueueKind::Copy, &cmds, 0);
        let indices: Vec<usize> = errs.iter().map(|e| e.index).collect();
        // dispatch: groups, copy list, fill alignment; flush: bits, copy list.
        assert_eq!(indices, vec![1, 1, 1, 3, 4, 4]);
        assert_eq!(errs[0].command, "dispatch");
        assert!(errs[1].message.contains("copy list"));
    }
}
