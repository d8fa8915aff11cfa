//! Trace events from the engines and drivers: slices per stage and worker, blocked waits with
//! the arrow from what released them, signals, removal; byte-identical per seed on the
//! deterministic driver.

use pipefence::explore::deterministic_desc;
use pipefence::trace::{SliceKind, TraceEvent, TraceRecorder, Track};
use pipefence::*;
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn async_compute(d: &Device) -> Result<u64> {
    let data = d.create_buffer(&BufferDesc::new(16384, Heap::DeviceLocal).named("data"))?;
    let flags = d.create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))?;
    let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
    let gfx = d.create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))?;
    let asy = d.create_queue(&QueueDesc::new(QueueKind::Compute, "async"))?;
    let mut produce = d.create_command_list(&CommandListDesc::new(QueueKind::Direct, "produce"))?;
    produce
        .dispatch(&Kernel::fill(data.gpu_address(), 7), 64)
        .write_value64_bottom_of_pipe(flags.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value);
    produce.close()?;
    let mut consume =
        d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "consume"))?;
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
    asy.execute_command_lists(&[&consume])?;
    gfx.execute_command_lists(&[&produce])?;
    asy.signal(&done, 1)?;
    done.wait(1, T)?;
    flags.read_u64(8)
}

fn traced(desc: DeviceDesc) -> (Vec<TraceEvent>, Result<u64>) {
    let rec = Arc::new(TraceRecorder::new());
    let d = Device::new(DeviceDesc {
        trace: Some(rec.clone()),
        ..desc
    })
    .unwrap();
    let r = async_compute(&d);
    d.tools().settle(T);
    (rec.events(), r)
}

fn has_slice(ev: &[TraceEvent], track: &Track, kind: SliceKind) -> bool {
    ev.iter().any(
        |e| matches!(e, TraceEvent::Slice { track: t, kind: k, .. } if t == track && *k == kind),
    )
}

#[test]
fn trace_threaded_run_has_stage_worker_and_flow_events() {
    let (ev, r) = traced(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    });
    assert_eq!(r.unwrap(), 28672);
    let gfx_me = Track::Me {
        queue: "gfx".into(),
    };
    let async_pfp = Track::Pfp {
        queue: "async".into(),
    };
    assert!(has_slice(&ev, &gfx_me, SliceKind::Busy), "{ev:#?}");
    assert!(ev.iter().any(|e| matches!(
        e,
        TraceEvent::Slice {
            track: Track::Worker { .. },
            kind: SliceKind::Kernel,
            ..
        }
    )));
    assert!(ev
        .iter()
        .any(|e| matches!(e, TraceEvent::Instant { name, .. } if name == "signal done = 1")));
    assert!(ev.iter().any(|e| matches!(
        e,
        TraceEvent::Slice {
            track: Track::Host { .. },
            ..
        }
    )));
    // If the consumer's PFP had to wait, the arrow comes from gfx's ME.
    if has_slice(&ev, &async_pfp, SliceKind::Blocked) {
        assert!(ev.iter().any(|e| matches!(e, TraceEvent::Flow { from, to, .. } if *from == gfx_me && *to == async_pfp)));
    }
    for e in &ev {
        if let TraceEvent::Slice {
            start_ns, end_ns, ..
        } = e
        {
            assert!(end_ns >= start_ns);
        }
    }
}

#[test]
fn trace_deterministic_traces_are_identical_per_seed_with_flows() {
    let mut flows = 0;
    for seed in 0..50 {
        let run = || {
            let (ev, r) = traced(deterministic_desc(&DeviceDesc::default(), seed));
            assert_eq!(r.unwrap(), 28672);
            serde_json::to_string(&ev).unwrap()
        };
        let a = run();
        assert_eq!(a, run(), "seed {seed}");
        flows += usize::from(a.contains("\"type\":\"flow\""));
    }
    assert!(
        flows > 0,
        "some schedule makes the consumer wait and records the releasing write"
    );
}

#[test]
fn trace_removal_point_is_an_error_instant() {
    let rec = Arc::new(TraceRecorder::new());
    let d = Device::new(DeviceDesc {
        trace: Some(rec.clone()),
        ..deterministic_desc(&DeviceDesc::default(), 1)
    })
    .unwrap();
    let a = d.create_fence(&FenceDesc::new(0).named("a")).unwrap();
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
        .unwrap();
    let m = d.create_buffer(&BufferDesc::new(64, Heap::Shared)).unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    l.close().unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&a, 1).unwrap();
    assert!(a.wait(1, T).unwrap_err().is_device_removed());
    let ev = rec.events();
    assert!(ev.iter().any(|e| matches!(e, TraceEvent::Instant { name, error: true, .. } if name.starts_with("device removed: hung"))), "{ev:#?}");
}

/// F5 in traces: the arrow into a released queue wait starts at the signal that satisfied its
/// ticket (here a pulse to 1 and back to 0 while the queue is parked), not at whatever signal
/// wrote the fence's current value when the queue went on.
#[test]
fn f5_trace_arrow_starts_at_the_signal_that_satisfied_the_ticket() {
    let mut arrows = 0;
    for seed in 0..30 {
        let rec = Arc::new(TraceRecorder::new());
        let d = Device::new(DeviceDesc {
            trace: Some(rec.clone()),
            ..deterministic_desc(&DeviceDesc::default(), seed)
        })
        .unwrap();
        let q = d
            .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
            .unwrap();
        let f = d.create_fence(&FenceDesc::new(0).named("f")).unwrap();
        let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
        q.wait(&f, 1).unwrap();
        q.signal(&done, 1).unwrap();
        pipefence::host::sleep(&d, Duration::from_millis(1));
        f.signal(1).unwrap();
        f.signal(0).unwrap();
        done.wait(1, T).unwrap();
        d.tools().settle(T);
        for e in rec.events() {
            if let TraceEvent::Flow {
                from,
                from_ns,
                to_ns,
                label,
                ..
            } = &e
            {
                if label.starts_with("fence f ") {
                    assert_eq!(label, "fence f = 1", "seed {seed}");
                    assert!(from_ns <= to_ns, "seed {seed}");
                    assert!(matches!(from, Track::Host { .. }), "seed {seed}: {from:?}");
                    arrows += 1;
                }
            }
        }
    }
    assert!(arrows > 0, "some schedule parks the queue before the pulse");
}
