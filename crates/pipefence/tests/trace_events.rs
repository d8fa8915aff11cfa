//! Trace events from the engines and drivers: slices per stage and worker, blocked waits with
//! the arrow from what released them, signals, removal; byte-identical per seed on the
//! deterministic driver.

use pipefence::explore::deterministic_desc;
use pipefence::trace::{SliceKind, SyncKind, TraceEvent, TraceRecorder, Track};
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

/// The release-to-acquire edges (`TraceEvent::Sync`) of one run.
fn syncs(ev: &[TraceEvent]) -> Vec<(&Track, &Track, &str, SyncKind, bool)> {
    ev.iter()
        .filter_map(|e| match e {
            TraceEvent::Sync {
                from,
                to,
                label,
                wait,
                blocked,
                from_ns,
                to_ns,
            } => {
                assert!(from_ns <= to_ns, "{e:?}");
                Some((from, to, label.as_str(), *wait, *blocked))
            }
            _ => None,
        })
        .collect()
}

/// Every satisfied wait gets its edge, whether it blocked or not: the consumer's PFP memory
/// wait from the producer's bottom-of-pipe write, the host's fence wait from the queue signal;
/// every flow (a wait that blocked) has a blocked edge with the same ends.
#[test]
fn trace_every_satisfied_wait_has_a_sync_edge_blocked_or_not() {
    let gfx_me = Track::Me {
        queue: "gfx".into(),
    };
    let async_pfp = Track::Pfp {
        queue: "async".into(),
    };
    let async_me = Track::Me {
        queue: "async".into(),
    };
    let (mut passed, mut blocked) = (0, 0);
    for seed in 0..30 {
        let (ev, r) = traced(deterministic_desc(&DeviceDesc::default(), seed));
        assert_eq!(r.unwrap(), 28672);
        let s = syncs(&ev);
        let pfp: Vec<_> = s.iter().filter(|e| e.3 == SyncKind::PfpWait).collect();
        assert_eq!(pfp.len(), 1, "seed {seed}: {s:?}");
        assert_eq!((pfp[0].0, pfp[0].1), (&gfx_me, &async_pfp), "seed {seed}");
        assert!(pfp[0].2.ends_with("flags = 1"), "seed {seed}: {}", pfp[0].2);
        if pfp[0].4 {
            blocked += 1;
        } else {
            passed += 1;
        }
        let host: Vec<_> = s.iter().filter(|e| e.3 == SyncKind::HostWait).collect();
        assert_eq!(host.len(), 1, "seed {seed}: {s:?}");
        assert_eq!(host[0].0, &async_me, "seed {seed}");
        assert!(matches!(host[0].1, Track::Host { .. }), "seed {seed}");
        assert_eq!(host[0].2, "fence done = 1", "seed {seed}");
        for e in &ev {
            if let TraceEvent::Flow {
                from,
                from_ns,
                to,
                to_ns,
                ..
            } = e
            {
                assert!(
                    ev.iter().any(|x| matches!(x, TraceEvent::Sync { from: f, from_ns: fns, to: t, to_ns: tns, blocked: true, .. }
                        if f == from && fns == from_ns && t == to && tns == to_ns)),
                    "seed {seed}: {e:?}"
                );
            }
        }
    }
    assert!(
        passed > 0 && blocked > 0,
        "{passed} passed, {blocked} blocked"
    );
}

/// Queue waits, ME memory waits and host polls that find their value already there still get
/// an edge from the signal or write that put it there (the wait never blocked, so no flow).
#[test]
fn trace_waits_that_never_blocked_have_edges_from_their_releaser() {
    let rec = Arc::new(TraceRecorder::new());
    let d = Device::new(DeviceDesc {
        trace: Some(rec.clone()),
        ..deterministic_desc(&DeviceDesc::default(), 3)
    })
    .unwrap();
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
        .unwrap();
    let f = d.create_fence(&FenceDesc::new(0).named("f")).unwrap();
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let m = d
        .create_buffer(&BufferDesc::new(64, Heap::Shared).named("m"))
        .unwrap();
    f.signal(1).unwrap();
    m.write_u32(0, 5).unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.wait_value32(m.address(0), Comparison::Equal, 5, u32::MAX, WaitEngine::Me)
        .write_value32_top_of_pipe(m.address(8), 9, WriteSource::Value);
    l.close().unwrap();
    q.wait(&f, 1).unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    done.wait(1, T).unwrap();
    m.wait_u32(8, Comparison::Equal, 9, u32::MAX, T).unwrap();
    d.tools().settle(T);
    let ev = rec.events();
    let s = syncs(&ev);
    let kind = |k: SyncKind| s.iter().filter(|e| e.3 == k).collect::<Vec<_>>();
    let queue = kind(SyncKind::QueueWait);
    assert_eq!(queue.len(), 1, "{s:?}");
    assert_eq!(queue[0].2, "fence f = 1");
    assert!(matches!(queue[0].0, Track::Host { .. }));
    assert!(!queue[0].4, "the value was there before the wait");
    let me = kind(SyncKind::MeWait);
    assert_eq!(me.len(), 1, "{s:?}");
    assert_eq!(me[0].2, "cpu-write m = 5");
    assert!(!me[0].4);
    let poll = kind(SyncKind::HostPoll);
    assert_eq!(poll.len(), 1, "{s:?}");
    assert!(poll[0].2.ends_with("m+8 = 9"), "{}", poll[0].2);
    assert_eq!(poll[0].0, &Track::Me { queue: "q".into() });
    assert_eq!(kind(SyncKind::HostWait).len(), 1, "{s:?}");
    assert!(
        !ev.iter().any(|e| matches!(e, TraceEvent::Flow { .. })),
        "no wait blocked: {ev:#?}"
    );
}

/// C10 in traces: each `begin_event` ... `end_event` pair of the ME is a region with its
/// nesting depth, inner regions inside their parents; those still open at removal (the ME hangs
/// in a wait inside them) end there.
#[test]
fn c10_trace_begin_event_regions_nest_and_close_at_removal() {
    let rec = Arc::new(TraceRecorder::new());
    let d = Device::new(DeviceDesc {
        trace: Some(rec.clone()),
        ..deterministic_desc(&DeviceDesc::default(), 2)
    })
    .unwrap();
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
        .unwrap();
    let m = d.create_buffer(&BufferDesc::new(64, Heap::Shared)).unwrap();
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.begin_event("frame")
        .begin_event("pass")
        .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value)
        .end_event()
        .begin_event("stuck")
        .wait_value32(m.address(4), Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
        .end_event()
        .end_event();
    l.close().unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    assert!(done.wait(1, T).unwrap_err().is_device_removed());
    let regions: Vec<(String, u32, u64, u64)> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::Region {
                track,
                name,
                depth,
                start_ns,
                end_ns,
            } => {
                assert_eq!(track, Track::Me { queue: "q".into() });
                Some((name, depth, start_ns, end_ns))
            }
            _ => None,
        })
        .collect();
    let find = |n: &str| {
        regions
            .iter()
            .find(|r| r.0 == n)
            .unwrap_or_else(|| panic!("{n}: {regions:?}"))
    };
    let (frame, pass, stuck) = (find("frame"), find("pass"), find("stuck"));
    assert_eq!(regions.len(), 3, "{regions:?}");
    assert_eq!((frame.1, pass.1, stuck.1), (0, 1, 1));
    for inner in [pass, stuck] {
        assert!(frame.2 <= inner.2 && inner.3 <= frame.3, "{regions:?}");
    }
    assert!(pass.3 <= stuck.2, "{regions:?}");
}

/// A host multi-fence wait gets an edge from each fence that reached its value.
#[test]
fn trace_multi_fence_wait_has_an_edge_per_reached_fence() {
    let rec = Arc::new(TraceRecorder::new());
    let d = Device::new(DeviceDesc {
        trace: Some(rec.clone()),
        ..deterministic_desc(&DeviceDesc::default(), 5)
    })
    .unwrap();
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
        .unwrap();
    let a = d.create_fence(&FenceDesc::new(0).named("a")).unwrap();
    let b = d.create_fence(&FenceDesc::new(0).named("b")).unwrap();
    q.signal(&a, 1).unwrap();
    q.signal(&b, 2).unwrap();
    d.wait_multiple(&[&a, &b], &[1, 2], MultipleFenceWaitFlags::ALL, T)
        .unwrap();
    d.tools().settle(T);
    let ev = rec.events();
    let mut labels: Vec<&str> = syncs(&ev)
        .into_iter()
        .filter(|e| e.3 == SyncKind::HostWait)
        .map(|e| {
            assert_eq!(e.0, &Track::Me { queue: "q".into() });
            e.2
        })
        .collect();
    labels.sort_unstable();
    assert_eq!(labels, ["fence a = 1", "fence b = 2"]);
}
