//! The engine model (D1-D8), idle waits and removal.

use super::*;

// ---------------------------------------------------------------------------------------------
// Engine model

/// Every schedule of the deterministic driver (how far the PFP got before the host zeroed the
/// arguments is the schedule's, not a matter of how long the host sleeps): the PFP parses
/// ahead of the ME held by its wait, reading the indirect arguments, until the FIFO (depth 4)
/// is full, and no further.
#[test]
fn d1_pfp_runs_ahead_of_a_blocked_me_up_to_fifo_depth() {
    let launched_sets = every_schedule(4, |d| {
        let q = queue(d, QueueKind::Compute, "q");
        let gate = shared(d, "gate", 64);
        let args = shared(d, "args", 64);
        let out = d
            .create_buffer(&BufferDesc::new(16 * 256, Heap::Readback))
            .unwrap();
        for i in 0..12 {
            args.write_u32(i * 4, 1).unwrap();
        }
        let l = list(d, QueueKind::Compute, "l", |l| {
            l.wait_value32(
                gate.address(0),
                Comparison::GreaterEqual,
                1,
                u32::MAX,
                WaitEngine::Me,
            );
            for i in 0..12u64 {
                l.dispatch_indirect(&Kernel::fill(out.address(i * 256), 1), args.address(i * 4));
            }
        });
        q.execute_command_lists(&[&l]).ok()?;
        for i in 0..12 {
            args.write_u32(i * 4, 0).ok()?;
        }
        gate.write_u32(0, 1).ok()?;
        q.wait_idle(T).ok()?;
        (0..12)
            .map(|i| out.read_u32(i * 256).ok().map(|v| v == 1))
            .collect::<Option<Vec<bool>>>()
    });
    // The dispatches launched are those whose arguments the PFP read before the host zeroed
    // them: only among the first four (the FIFO's depth), and in some schedule all four.
    for launched in &launched_sets {
        assert!(launched[4..].iter().all(|b| !*b), "{launched:?}");
    }
    let four: Vec<bool> = (0..12).map(|i| i < 4).collect();
    assert!(launched_sets.contains(&four), "{launched_sets:?}");
}

#[test]
fn d2_corrupted_stream_is_a_malformed_packet_not_a_panic() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    let victim = list(&d, QueueKind::Compute, "victim", |l| {
        l.write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    let (addr, _) = victim.stream_address().unwrap();
    let vandal = list(&d, QueueKind::Compute, "vandal", |l| {
        l.dispatch(
            &Kernel::User(UserKernel::new("scribble", move |ctx| {
                ctx.write_u32(addr, 0xFFFF_FFFF)
            })),
            1,
        );
    });
    q.execute_command_lists(&[&vandal]).unwrap();
    q.execute_command_lists(&[&victim]).unwrap();
    for _ in 0..1000 {
        if d.is_removed() {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.removed_reason(), Some(RemovalReason::Hung));
    match d.removal_fault() {
        Some(Fault::MalformedPacket { offset, site, .. }) => {
            assert_eq!(offset, 0);
            assert_eq!(site.list, Some(victim.id()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.read_u32(0).unwrap(), 0);
}

#[test]
fn d3_dispatches_from_several_engines_share_the_workers() {
    let d = device();
    let sum = shared(&d, "sum", 64);
    let src = d
        .create_buffer(&BufferDesc::new(64 * 256, Heap::DeviceLocal).with_init(1))
        .unwrap();
    let queues: Vec<Queue> = (0..4)
        .map(|i| queue(&d, QueueKind::Compute, &format!("q{i}")))
        .collect();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&Kernel::sum(sum.address(0), src.gpu_address()), 64);
    });
    for q in &queues {
        for _ in 0..10 {
            q.execute_command_lists(&[&l]).unwrap();
        }
    }
    d.wait_idle(T).unwrap();
    assert_eq!(sum.read_u64(0).unwrap(), 4 * 10 * 64 * 64);
}

#[test]
fn d4_kernels_compute_right_results_across_queues_with_fences() {
    let d = device();
    let a = d
        .create_buffer(&BufferDesc::new(32 * 256, Heap::DeviceLocal))
        .unwrap();
    let b = d
        .create_buffer(&BufferDesc::new(32 * 256, Heap::DeviceLocal))
        .unwrap();
    let out = shared(&d, "out", 64);
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let g = d.create_fence(&FenceDesc::new(0)).unwrap();
    let gfx = queue(&d, QueueKind::Direct, "gfx");
    let comp = queue(&d, QueueKind::Compute, "comp");
    let copy = queue(&d, QueueKind::Copy, "copy");
    let l1 = list(&d, QueueKind::Direct, "fill", |l| {
        l.dispatch(&Kernel::fill(a.gpu_address(), 5), 32);
    });
    let l2 = list(&d, QueueKind::Copy, "copy", |l| {
        l.copy_buffer_region(b.gpu_address(), a.gpu_address(), 32 * 256);
    });
    let l3 = list(&d, QueueKind::Compute, "add-sum", |l| {
        l.dispatch(&Kernel::add(b.gpu_address(), b.gpu_address(), 2), 32)
            .flush_pipeline(Flush::NONE)
            .dispatch(&Kernel::sum(out.address(0), b.gpu_address()), 32);
    });
    comp.wait(&g, 1).unwrap();
    comp.execute_command_lists(&[&l3]).unwrap();
    copy.wait(&f, 1).unwrap();
    copy.execute_command_lists(&[&l2]).unwrap();
    copy.signal(&g, 1).unwrap();
    gfx.execute_command_lists(&[&l1]).unwrap();
    gfx.signal(&f, 1).unwrap();
    d.wait_idle(T).unwrap();
    assert_eq!(out.read_u64(0).unwrap(), 32 * 64 * 7);
}

#[test]
fn d8_engine_woken_by_writes_through_atomic_views_by_polling() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    let view = m.atomic_u64(8).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value64(m.address(8), Comparison::Equal, 3, u64::MAX, WaitEngine::Me)
            .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    thread::sleep(Duration::from_millis(20));
    view.store(3, std::sync::atomic::Ordering::SeqCst);
    wait_u32(&m, 0, 1);
}

#[test]
fn h2_wait_idle_times_out_on_blocked_queue_and_names_it() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "stuck");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    q.wait(&f, 1).unwrap();
    let e = d.wait_idle(Duration::from_millis(30)).unwrap_err();
    assert!(e.is_timeout() && e.to_string().contains("stuck"), "{e}");
    f.signal(1).unwrap();
    d.wait_idle(T).unwrap();
}

#[test]
fn e4_removal_stops_submissions() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.set_marker("m");
    });
    d.remove();
    assert!(q
        .execute_command_lists(&[&l])
        .unwrap_err()
        .is_device_removed());
    assert!(q.signal(&f, 1).unwrap_err().is_device_removed());
    assert!(q.wait(&f, 1).unwrap_err().is_device_removed());
    assert!(d.wait_idle(T).unwrap_err().is_device_removed());
}
