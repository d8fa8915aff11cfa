//! The Rust equivalent of `examples/async-compute.kdl`: graphics fills a buffer and raises a
//! bottom-of-pipe flag (with L2 writeback); async compute waits for the flag on its pre-fetch
//! parser and sums the buffer; the host waits for the compute queue's fence.
//!
//! Run: `cargo run --release -p pipefence --example async_compute`

use pipefence::CommandListDesc;
use pipefence::FenceDesc;
use pipefence::{
    BufferDesc, Comparison, Device, DeviceDesc, Flush, Heap, Kernel, QueueDesc, QueueKind,
    WaitEngine, WriteSource,
};
use std::time::Duration;

fn main() -> pipefence::Result<()> {
    let device = Device::new(DeviceDesc {
        watchdog_timeout: Duration::from_millis(2000),
        ..DeviceDesc::default()
    })?;
    let data = device.create_buffer(&BufferDesc::new(16384, Heap::DeviceLocal).named("data"))?;
    let flags = device.create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))?;
    let done = device.create_fence(&FenceDesc::new(0).named("done"))?;
    let gfx = device.create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))?;
    let compute = device.create_queue(&QueueDesc::new(QueueKind::Compute, "async"))?;

    let mut produce =
        device.create_command_list(&CommandListDesc::new(QueueKind::Direct, "produce"))?;
    produce
        .begin_event("fill")
        .dispatch(&Kernel::fill(data.gpu_address(), 7), 64)
        .end_event()
        .write_value64_bottom_of_pipe(flags.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value);
    produce.close()?;

    let mut consume =
        device.create_command_list(&CommandListDesc::new(QueueKind::Compute, "consume"))?;
    consume
        .wait_value64(
            flags.address(0),
            Comparison::GreaterEqual,
            1,
            u64::MAX,
            WaitEngine::Pfp,
        )
        .dispatch(&Kernel::sum(flags.address(8), data.gpu_address()), 64);
    consume.close()?;

    gfx.execute_command_lists(&[&produce])?;
    compute.execute_command_lists(&[&consume])?;
    compute.signal(&done, 1)?;
    done.wait(1, Duration::from_secs(5))?;

    let sum = flags.read_u64(8)?;
    println!(
        "sum = {sum} (expected 28672), fence done = {}",
        done.completed_value()
    );
    assert_eq!(sum, 28672);
    Ok(())
}
