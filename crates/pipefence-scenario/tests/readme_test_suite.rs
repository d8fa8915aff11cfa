//! The tests the README's "Using pipefence from an engine's test suite" shows, as they are
//! shown: one that explores a synchronization pattern with the library under strict mode, one
//! that checks every schedule of a program in one line, one that runs a scenario file's
//! schedules from a Rust test.

use pipefence::explore::explore;
use pipefence::{
    BufferDesc, CommandListDesc, Comparison, DeviceDesc, FenceDesc, Flush, Heap, Kernel,
    MemoryModel, QueueDesc, QueueKind, WaitEngine, WriteSource,
};
use std::time::Duration;

/// The async-compute handoff, on 100 schedules of the weakest GPU the documentation allows.
#[test]
fn async_compute_handoff_is_synchronized() -> pipefence::Result<()> {
    let desc = DeviceDesc {
        memory_model: MemoryModel::Strict,
        ..DeviceDesc::default()
    };
    let runs = explore(&desc, 0..100, |device| -> pipefence::Result<u64> {
        let data = device.create_buffer(&BufferDesc::new(4096, Heap::DeviceLocal).named("data"))?;
        let flag = device.create_buffer(&BufferDesc::new(64, Heap::Shared).named("flag"))?;
        let done = device.create_fence(&FenceDesc::new(0).named("done"))?;
        let gfx = device.create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))?;
        let compute = device.create_queue(&QueueDesc::new(QueueKind::Compute, "async"))?;

        let mut produce =
            device.create_command_list(&CommandListDesc::new(QueueKind::Direct, "produce"))?;
        produce
            .dispatch(&Kernel::fill(data.gpu_address(), 3), 16)
            .write_value32_bottom_of_pipe(
                flag.address(0),
                1,
                Flush::L2_WRITEBACK,
                WriteSource::Value,
            );
        produce.close()?;
        let mut consume =
            device.create_command_list(&CommandListDesc::new(QueueKind::Compute, "consume"))?;
        consume
            .wait_value32(
                flag.address(0),
                Comparison::Equal,
                1,
                u32::MAX,
                WaitEngine::Me,
            )
            .dispatch(&Kernel::sum(flag.address(8), data.gpu_address()), 16);
        consume.close()?;

        compute.execute_command_lists(&[&consume])?;
        gfx.execute_command_lists(&[&produce])?;
        compute.signal(&done, 1)?;
        done.wait(1, Duration::from_secs(5))?;
        let hazards = device.hazards();
        assert!(hazards.is_empty(), "{}", hazards[0]);
        flag.read_u64(8)
    })?;
    for run in runs {
        assert!(
            run.removal.is_none(),
            "seed {}: {:?}",
            run.seed,
            run.removal
        );
        assert_eq!(run.value?, 16 * 64 * 3, "seed {}", run.seed);
    }
    Ok(())
}

/// A scenario file kept with the engine's tests, checked under 100 strict schedules.
#[test]
fn ring_buffer_scenario_passes_every_schedule() {
    use pipefence_scenario::check::{check, CheckOptions};
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/ring-buffer.kdl"
    );
    let source = std::fs::read_to_string(file).expect("read the scenario");
    let scenario = pipefence_scenario::parse(file, &source).unwrap_or_else(|diags| {
        panic!(
            "{}",
            pipefence_scenario::render_diagnostics(file, &source, &diags)
        )
    });
    let opts = CheckOptions {
        schedules: 100,
        seed: 0,
        strict: true,
    };
    let report = check(&scenario, &opts, |_| {});
    assert_eq!(report.failing, 0, "{:#?}", report.failures);
}

#[test]
fn one_signal_is_seen_in_every_schedule() {
    use pipefence::explore::{check_every_schedule, EveryScheduleOptions};
    use pipefence::{Device, FenceDesc, QueueDesc, QueueKind};
    check_every_schedule(&EveryScheduleOptions::default(), |desc| {
        let device = Device::new(desc).map_err(|e| e.to_string())?;
        let q = device
            .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
            .map_err(|e| e.to_string())?;
        let f = device
            .create_fence(&FenceDesc::new(0))
            .map_err(|e| e.to_string())?;
        q.signal(&f, 1).map_err(|e| e.to_string())?;
        device
            .wait_idle(std::time::Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        (f.completed_value() == 1)
            .then_some(())
            .ok_or("fence not signalled".to_string())
    });
}
