use pipefence::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

#[test]
fn smoke_fill_sum_across_queues() {
    let d = Device::new(DeviceDesc::default()).unwrap();
    let data = d
        .create_buffer(&BufferDesc::new(16384, Heap::DeviceLocal).named("data"))
        .unwrap();
    let flags = d
        .create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))
        .unwrap();
    let done = d.create_named_fence("done", 0).unwrap();
    let gfx = d
        .create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))
        .unwrap();
    let asy = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "async"))
        .unwrap();
    let mut produce = d.create_command_list(QueueKind::Direct, "produce").unwrap();
    produce
        .begin_event("fill")
        .dispatch(&Kernel::fill(data.gpu_address(), 7), 64)
        .end_event()
        .write_value64_bottom_of_pipe(flags.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value);
    produce.close().unwrap();
    let mut consume = d
        .create_command_list(QueueKind::Compute, "consume")
        .unwrap();
    consume
        .wait_value64(
            flags.address(0),
            Comparison::GreaterEqual,
            1,
            u64::MAX,
            WaitEngine::Pfp,
        )
        .dispatch(&Kernel::sum(flags.address(8), data.gpu_address()), 64);
    consume.close().unwrap();
    asy.execute_command_lists(&[&consume]).unwrap();
    gfx.execute_command_lists(&[&produce]).unwrap();
    asy.signal(&done, 1).unwrap();
    done.wait(1, T).unwrap();
    assert_eq!(flags.read_u64(8).unwrap(), 28672);
    d.wait_idle(T).unwrap();
}
