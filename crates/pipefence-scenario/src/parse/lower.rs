//! Lowering to the library: a parsed command as a `pipefence::command::Command` at fake GPU
//! addresses, so that the library's own validation can run on each list, and its messages with
//! the addresses as written.

use pipefence::command::{Command, ImmediateWrite, KernelArgs};

use crate::plan::{Addr, KernelDecl, ListCommand};

/// The fake GPU address used to validate commands: each buffer at its own 4 GiB-aligned base,
/// so that alignment is kept.
fn fake_address(addr: Addr) -> u64 {
    const BASE: u64 = 0x1_0000_0000;
    BASE.wrapping_add((addr.buffer as u64).wrapping_mul(BASE))
        .wrapping_add(addr.offset)
}

/// The library form of a command (for validation).
pub(super) fn lower(cmd: &ListCommand) -> Command {
    match cmd {
        ListCommand::WaitValue { addr, cond, engine } => Command::WaitValue {
            address: fake_address(*addr),
            cond: *cond,
            engine: *engine,
        },
        ListCommand::WriteBottomOfPipe {
            addr,
            width,
            value,
            flush,
            source,
        } => Command::WriteValueBottomOfPipe {
            address: fake_address(*addr),
            width: *width,
            value: *value,
            flush: *flush,
            source: *source,
        },
        ListCommand::WriteTopOfPipe {
            addr,
            width,
            value,
            source,
        } => Command::WriteValueTopOfPipe {
            address: fake_address(*addr),
            width: *width,
            value: *value,
            source: *source,
        },
        ListCommand::WriteImmediate { addr, value, mode } => Command::WriteImmediate {
            writes: vec![ImmediateWrite {
                address: fake_address(*addr),
                value: *value,
                mode: *mode,
            }],
        },
        ListCommand::FlushPipeline { flush } => Command::FlushPipeline { flush: *flush },
        ListCommand::Dispatch { kernel, groups } => Command::Dispatch {
            kernel: lower_kernel(kernel),
            groups: *groups,
        },
        ListCommand::DispatchIndirect { kernel, args } => Command::DispatchIndirect {
            kernel: lower_kernel(kernel),
            args: fake_address(*args),
        },
        ListCommand::Copy { dst, src, bytes } => Command::Copy {
            dst: fake_address(*dst),
            src: fake_address(*src),
            bytes: *bytes,
        },
        ListCommand::Marker(label) => Command::SetMarker {
            label: label.clone(),
        },
        ListCommand::BeginEvent(label) => Command::BeginEvent {
            label: label.clone(),
        },
        ListCommand::EndEvent => Command::EndEvent,
    }
}

/// The library form of a kernel.
fn lower_kernel(kernel: &KernelDecl) -> KernelArgs {
    match kernel {
        KernelDecl::Fill { dst, value } => KernelArgs::Fill {
            dst: fake_address(*dst),
            value: *value,
        },
        KernelDecl::Add { dst, src, value } => KernelArgs::Add {
            dst: fake_address(*dst),
            src: fake_address(*src),
            value: *value,
        },
        KernelDecl::Sum { dst, src } => KernelArgs::Sum {
            dst: fake_address(*dst),
            src: fake_address(*src),
        },
        KernelDecl::Spin { ns } => KernelArgs::Spin { ns: *ns },
    }
}

/// What stands in for a command node that failed its own checks, so that the indices of the
/// others are kept: an event node keeps its effect on event balance, anything else is a marker
/// (which no rule rejects).
pub(super) fn placeholder(name: &str) -> Command {
    match name {
        "begin-event" => Command::BeginEvent {
            label: String::new(),
        },
        "end-event" => Command::EndEvent,
        _ => Command::SetMarker {
            label: String::new(),
        },
    }
}

/// Replaces the fake GPU addresses in a library message by the addresses as written
/// (`address 0x100000002 is not ...` becomes ``address `flags+2` is not ...``). Only a hex word
/// right after `address`, `destination` or `source` is an address.
pub(super) fn name_addresses(message: &str, addrs: &[(Addr, String)]) -> String {
    let mut words: Vec<String> = message.split(' ').map(str::to_string).collect();
    for i in 1..words.len() {
        let after_address = words
            .get(i - 1)
            .is_some_and(|w| matches!(w.as_str(), "address" | "destination" | "source"));
        if !after_address {
            continue;
        }
        let Some(word) = words.get(i) else { continue };
        let text = addrs
            .iter()
            .find(|(addr, _)| format!("{:#x}", fake_address(*addr)) == *word)
            .map(|(_, text)| format!("`{text}`"));
        if let (Some(text), Some(slot)) = (text, words.get_mut(i)) {
            *slot = text;
        }
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_addresses_are_named() {
        let addr = Addr {
            buffer: 1,
            offset: 2,
        };
        let text = name_addresses(
            &format!(
                "address {:#x} is not 8-byte aligned (64-bit wait)",
                fake_address(addr)
            ),
            &[(addr, "flags+2".to_string())],
        );
        assert_eq!(
            text,
            "address `flags+2` is not 8-byte aligned (64-bit wait)"
        );
        // A value that happens to equal the address is left alone.
        let value = format!("value {:#x} does not fit", fake_address(addr));
        assert_eq!(name_addresses(&value, &[(addr, "x".to_string())]), value);
    }
}
