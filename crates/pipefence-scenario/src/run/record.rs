//! Recording a scenario's command lists on a device, and their encoded command streams.

use crate::plan::{Addr, KernelDecl, ListCommand, Scenario};
use pipefence::CommandListDesc;
use pipefence::{
    Buffer, BufferDesc, CommandList, Device, DeviceDesc, ImmediateWrite, Kernel, Width,
};

/// Records one command of a list.
pub(super) fn record(l: &mut CommandList, buffers: &[Buffer], cmd: &ListCommand) {
    let a = |x: Addr| buffers[x.buffer].address(x.offset);
    let kernel = |k: &KernelDecl| match k {
        KernelDecl::Fill { dst, value } => Kernel::fill(a(*dst), *value),
        KernelDecl::Add { dst, src, value } => Kernel::add(a(*dst), a(*src), *value),
        KernelDecl::Sum { dst, src } => Kernel::sum(a(*dst), a(*src)),
        KernelDecl::Spin { ns } => Kernel::spin(*ns),
    };
    match cmd {
        ListCommand::WaitValue { addr, cond, engine } => match cond.width {
            Width::W32 => l.wait_value32(
                a(*addr),
                cond.cmp,
                cond.reference as u32,
                cond.mask as u32,
                *engine,
            ),
            Width::W64 => l.wait_value64(a(*addr), cond.cmp, cond.reference, cond.mask, *engine),
        },
        ListCommand::WriteBottomOfPipe {
            addr,
            width,
            value,
            flush,
            source,
        } => match width {
            Width::W32 => l.write_value32_bottom_of_pipe(a(*addr), *value as u32, *flush, *source),
            Width::W64 => l.write_value64_bottom_of_pipe(a(*addr), *value, *flush, *source),
        },
        ListCommand::WriteTopOfPipe {
            addr,
            width,
            value,
            source,
        } => match width {
            Width::W32 => l.write_value32_top_of_pipe(a(*addr), *value as u32, *source),
            Width::W64 => l.write_value64_top_of_pipe(a(*addr), *value, *source),
        },
        ListCommand::WriteImmediate { addr, value, mode } => {
            l.write_buffer_immediate(&[ImmediateWrite {
                address: a(*addr),
                value: *value,
                mode: *mode,
            }])
        }
        ListCommand::FlushPipeline { flush } => l.flush_pipeline(*flush),
        ListCommand::Dispatch { kernel: k, groups } => l.dispatch(&kernel(k), *groups),
        ListCommand::DispatchIndirect { kernel: k, args } => {
            l.dispatch_indirect(&kernel(k), a(*args))
        }
        ListCommand::Copy { dst, src, bytes } => l.copy_buffer_region(a(*dst), a(*src), *bytes),
        ListCommand::Marker(t) => l.set_marker(t),
        ListCommand::BeginEvent(t) => l.begin_event(t),
        ListCommand::EndEvent => l.end_event(),
    };
}

/// The encoded command stream (the packet words `CommandList::close` writes) of each list of the
/// scenario, by list name, recorded on a plain device with the scenario's buffers. For tooling
/// that works on command streams: the decoder's fuzz corpus is made from these
/// (`cargo run -p pipefence-scenario --example decode-corpus`).
///
/// # Errors
/// The device or a buffer could not be created; the message names it.
pub fn encoded_lists(sc: &Scenario) -> Result<Vec<(String, Vec<u32>)>, String> {
    let device = Device::new(DeviceDesc::default()).map_err(|e| format!("device: {e}"))?;
    let mut buffers = Vec::new();
    for b in &sc.buffers {
        let buf = device
            .create_buffer(&BufferDesc::new(b.size, b.heap).named(&b.name))
            .map_err(|e| format!("buffer `{}`: {e}", b.name))?;
        buffers.push(buf);
    }
    let mut out = Vec::new();
    for l in &sc.lists {
        let mut cl = device
            .create_command_list(&CommandListDesc::new(l.kind, &l.name))
            .map_err(|e| format!("list `{}`: {e}", l.name))?;
        for c in &l.commands {
            record(&mut cl, &buffers, &c.cmd);
        }
        out.push((l.name.clone(), pipefence::command::encode(cl.commands())));
    }
    Ok(out)
}
