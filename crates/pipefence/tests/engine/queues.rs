//! Queues (Q1-Q7) and memory faults (M3).

use super::*;

// ---------------------------------------------------------------------------------------------
// Queues

#[test]
fn q1_list_runs_only_on_its_queue_kind() {
    let d = device();
    let direct = queue(&d, QueueKind::Direct, "gfx");
    let compute = queue(&d, QueueKind::Compute, "async");
    let l = list(&d, QueueKind::Compute, "c", |l| {
        l.set_marker("m");
    });
    let e = direct.execute_command_lists(&[&l]).unwrap_err();
    assert!(matches!(e, Error::InvalidArg(_)), "{e}");
    assert!(e.to_string().contains("compute list"), "{e}");
    compute.execute_command_lists(&[&l]).unwrap();
    let open = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "open"))
        .unwrap();
    let e = compute.execute_command_lists(&[&open]).unwrap_err();
    assert!(
        matches!(e, Error::InvalidCall(_)) && e.to_string().contains("not closed"),
        "{e}"
    );
    assert!(matches!(
        compute.execute_command_lists(&[]),
        Err(Error::InvalidArg(_))
    ));
}

#[test]
fn q1_closed_list_runs_many_times_on_several_queues() {
    let d = device();
    let b = shared(&d, "sum", 64);
    let src = d
        .create_buffer(&BufferDesc::new(256, Heap::DeviceLocal).with_init(1))
        .unwrap();
    let l = list(&d, QueueKind::Compute, "sum", |l| {
        l.dispatch(&Kernel::sum(b.address(0), src.gpu_address()), 1);
    });
    let q1 = queue(&d, QueueKind::Compute, "a");
    let q2 = queue(&d, QueueKind::Compute, "b");
    for _ in 0..5 {
        q1.execute_command_lists(&[&l]).unwrap();
        q2.execute_command_lists(&[&l, &l]).unwrap();
    }
    d.wait_idle(T).unwrap();
    assert_eq!(b.read_u64(0).unwrap(), 15 * 64);
}

#[test]
fn q1_copy_lists_only_copy_write_and_wait_greater_equal() {
    let d = device();
    let b = shared(&d, "b", 64);
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Copy, "dma"))
        .unwrap();
    l.dispatch(&Kernel::fill(b.address(0), 1), 1);
    let e = l.close().unwrap_err();
    assert!(e.to_string().contains("command 0"), "{e}");
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Copy, "dma2"))
        .unwrap();
    l.wait_value32(b.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    assert!(l.close().is_err());
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Copy, "dma3"))
        .unwrap();
    l.wait_value32(
        b.address(0),
        Comparison::GreaterEqual,
        0,
        u32::MAX,
        WaitEngine::Me,
    )
    .copy_buffer_region(b.address(8), b.address(0), 8)
    .write_value32_bottom_of_pipe(b.address(16), 3, Flush::NONE, WriteSource::Value);
    l.close().unwrap();
    let q = queue(&d, QueueKind::Copy, "copy");
    q.execute_command_lists(&[&l]).unwrap();
    wait_u32(&b, 16, 3);
}

#[test]
fn q2_submissions_return_at_once() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = shared(&d, "b", 64);
    // The queue will be blocked on a fence nobody signals yet; every call still returns.
    q.wait(&f, 1).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.write_value32_top_of_pipe(b.address(0), 1, WriteSource::Value);
    });
    for _ in 0..100 {
        q.execute_command_lists(&[&l]).unwrap();
    }
    q.signal(&f, 2).unwrap();
    assert_eq!(b.read_u32(0).unwrap(), 0);
    f.signal(1).unwrap();
    d.wait_idle(T).unwrap();
    assert_eq!(f.completed_value(), 2);
}

#[test]
fn q3_queue_wait_stops_front_end_until_signal_wait_before_signal() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let other = queue(&d, QueueKind::Direct, "other");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = shared(&d, "b", 64);
    let args = shared(&d, "args", 64);
    args.write_u32(0, 1).unwrap();
    q.wait(&f, 5).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        // Behind a queue wait, even the PFP must not read the indirect arguments.
        l.dispatch_indirect(&Kernel::fill(b.address(32), 9), args.address(0))
            .write_value32_top_of_pipe(b.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        b.read_u32(0).unwrap(),
        0,
        "executed before the wait was satisfied"
    );
    args.write_u32(0, 0).unwrap();
    // Another queue signals (the signal is submitted after the wait).
    other.signal(&f, 5).unwrap();
    wait_u32(&b, 0, 1);
    d.wait_idle(T).unwrap();
    assert_eq!(
        b.read_u32(32).unwrap(),
        0,
        "the PFP read the arguments before the queue wait"
    );
}

#[test]
fn q4_signal_lands_after_earlier_work_with_its_writes_visible() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let data = d
        .create_buffer(&BufferDesc::new(64 * 256, Heap::Readback))
        .unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&Kernel::spin(20_000_000), 1)
            .dispatch(&Kernel::fill(data.gpu_address(), 5), 64);
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&f, 1).unwrap();
    f.wait(1, T).unwrap();
    for i in 0..(64 * 64) {
        assert_eq!(data.read_u32(i * 4).unwrap(), 5);
    }
}

#[test]
fn q5_signal_then_wait_on_same_queue_completes() {
    let d = device();
    let q = queue(&d, QueueKind::Direct, "q");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    q.signal(&f, 7).unwrap();
    q.wait(&f, 7).unwrap();
    q.signal(&f, 8).unwrap();
    f.wait(8, T).unwrap();
    q.wait_idle(T).unwrap();
}

#[test]
fn q6_queues_run_concurrently_one_unblocks_another() {
    let d = device();
    let a = queue(&d, QueueKind::Compute, "a");
    let b = queue(&d, QueueKind::Direct, "b");
    let m = shared(&d, "m", 64);
    let la = list(&d, QueueKind::Compute, "la", |l| {
        l.wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
            .write_value32_top_of_pipe(m.address(4), 2, WriteSource::Value);
    });
    let lb = list(&d, QueueKind::Direct, "lb", |l| {
        l.write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    a.execute_command_lists(&[&la]).unwrap();
    b.execute_command_lists(&[&lb]).unwrap();
    wait_u32(&m, 4, 2);
}

#[test]
fn q7_second_execute_parses_after_first_completes() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let args = d
        .create_buffer(&BufferDesc::new(256, Heap::DeviceLocal))
        .unwrap();
    let out = d
        .create_buffer(&BufferDesc::new(16 * 256, Heap::Readback))
        .unwrap();
    let first = list(&d, QueueKind::Compute, "first", |l| {
        l.dispatch(&Kernel::spin(10_000_000), 1)
            .dispatch(&Kernel::fill(args.gpu_address(), 3), 1);
    });
    let second = list(&d, QueueKind::Compute, "second", |l| {
        l.dispatch_indirect(&Kernel::fill(out.gpu_address(), 1), args.gpu_address());
    });
    q.execute_command_lists(&[&first]).unwrap();
    q.execute_command_lists(&[&second]).unwrap();
    q.wait_idle(T).unwrap();
    let filled = (0..16 * 64)
        .filter(|i| out.read_u32(i * 4).unwrap() == 1)
        .count();
    assert_eq!(
        filled,
        3 * 64,
        "the second call read its arguments before the first completed"
    );
}

#[test]
fn f3_gpu_signal_queued_before_cpu_rewind_lands_later() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let gate = d.create_fence(&FenceDesc::new(0)).unwrap();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    q.wait(&gate, 1).unwrap();
    q.signal(&f, 5).unwrap();
    f.signal(9).unwrap();
    f.signal(1).unwrap();
    assert_eq!(f.completed_value(), 1);
    gate.signal(1).unwrap();
    q.wait_idle(T).unwrap();
    assert_eq!(f.completed_value(), 5);
}

#[test]
fn f5_queue_wait_stays_satisfied_after_fence_lowered() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let done = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = shared(&d, "b", 64);
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value32(b.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.wait(&f, 3).unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    f.signal(3).unwrap();
    thread::sleep(Duration::from_millis(20));
    f.signal(0).unwrap();
    b.write_u32(0, 1).unwrap();
    done.wait(1, T).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Memory faults

fn expect_page_fault(d: &Device, address: u64, access: &str, op: &str) -> Fault {
    for _ in 0..1000 {
        if d.is_removed() {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.removed_reason(), Some(RemovalReason::PageFault));
    let f = d.removal_fault().expect("fault recorded");
    match &f {
        Fault::PageFault {
            address: a,
            access: ac,
            op: o,
            ..
        } => {
            assert_eq!(*a, address, "{f:?}");
            assert_eq!(ac.name(), access);
            assert_eq!(*o, op);
        }
        other => panic!("not a page fault: {other:?}"),
    }
    f
}

#[test]
fn m3_write_to_unmapped_address_is_page_fault() {
    let d = device();
    let b = shared(&d, "b", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let fence = d.create_fence(&FenceDesc::new(0)).unwrap();
    let bad = b.address(64); // one past the end: in the gap
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.set_marker("before").write_value32_bottom_of_pipe(
            bad,
            1,
            Flush::NONE,
            WriteSource::Value,
        );
    });
    let lid = l.id();
    q.execute_command_lists(&[&l]).unwrap();
    let f = expect_page_fault(&d, bad, "write", "write-value32-bop");
    if let Fault::PageFault { site, .. } = f {
        assert_eq!(site.command, Some(1));
        assert_eq!(site.list, Some(lid));
    }
    assert_eq!(RemovalReason::PageFault.hresult(), 0x887A_0006);
    assert!(q.signal(&fence, 1).unwrap_err().is_device_removed());
}

#[test]
fn m3_gpu_write_to_upload_memory_is_page_fault() {
    let d = device();
    let up = d
        .create_buffer(&BufferDesc::new(64, Heap::Upload).named("up"))
        .unwrap();
    let q = queue(&d, QueueKind::Direct, "q");
    let l = list(&d, QueueKind::Direct, "l", |l| {
        l.write_value32_top_of_pipe(up.address(8), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    expect_page_fault(&d, up.address(8), "write", "write-value32-top");
}

#[test]
fn m3_kernel_past_buffer_end_is_page_fault() {
    let d = device();
    let b = d
        .create_buffer(&BufferDesc::new(256, Heap::DeviceLocal))
        .unwrap();
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&Kernel::fill(b.gpu_address(), 1), 2);
    });
    q.execute_command_lists(&[&l]).unwrap();
    expect_page_fault(&d, b.address(256), "write", "dispatch");
}

#[test]
fn m3_wait_on_unmapped_address_is_page_fault() {
    let d = device();
    let b = shared(&d, "b", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value32(
            b.address(4096),
            Comparison::Equal,
            1,
            u32::MAX,
            WaitEngine::Me,
        );
    });
    q.execute_command_lists(&[&l]).unwrap();
    expect_page_fault(&d, b.address(4096), "read", "wait-value32");
}

#[test]
fn h2_queue_is_idle_polls_what_wait_idle_waits_for() {
    let deterministic = |seed| {
        Device::new(DeviceDesc {
            driver: Driver::Deterministic {
                seed,
                strategy: Strategy::Random,
            },
            ..DeviceDesc::default()
        })
        .unwrap()
    };
    for d in [device(), deterministic(0), deterministic(3)] {
        let q = queue(&d, QueueKind::Compute, "q");
        assert!(q.is_idle(), "nothing submitted");
        let gate = d.create_fence(&FenceDesc::new(0).named("gate")).unwrap();
        q.wait(&gate, 1).unwrap();
        assert!(!q.is_idle(), "blocked on the gate");
        gate.signal(1).unwrap();
        // Polling lets the queue run, on the deterministic driver too (a scheduling point).
        let start = std::time::Instant::now();
        while !q.is_idle() {
            assert!(start.elapsed() < T, "the queue never became idle");
            thread::yield_now();
        }
        q.wait_idle(T).unwrap();
        // After removal nothing submitted will run: idle, so a polling loop ends.
        q.wait(&gate, 5).unwrap();
        assert!(!q.is_idle());
        d.remove();
        assert!(q.is_idle());
    }
}

#[test]
fn c3_flush_has_the_bitflags_vocabulary() {
    assert_eq!(Flush::empty(), Flush::NONE);
    assert!(Flush::empty().is_empty() && !Flush::L1_VOLATILE.is_empty());
    assert_eq!(Flush::all(), Flush::ALL);
    assert_eq!(Flush::default(), Flush::empty());
    let mut f = Flush::empty();
    f |= Flush::L2_WRITEBACK;
    f.insert(Flush::L1_INVALIDATE);
    assert_eq!(f.bits(), 17);
    assert!(
        f.contains(Flush::L2_WRITEBACK) && f.intersects(Flush::L1_INVALIDATE | Flush::L2_VOLATILE)
    );
    assert!(!f.intersects(Flush::L2_VOLATILE));
    assert_eq!(f & Flush::L1_INVALIDATE, Flush::L1_INVALIDATE);
    f.remove(Flush::L1_INVALIDATE);
    assert_eq!(f, Flush::L2_WRITEBACK);
    assert_eq!(Flush::from_bits(16), Some(Flush::L2_WRITEBACK));
    assert_eq!(Flush::from_bits(32), None);
    assert_eq!(Flush::from_bits_retain(33).unknown_bits(), 32);
    assert_eq!(Flush::empty().to_string(), "none");
    // A recorded empty set is as NONE; unknown retained bits are still rejected at close().
    let d = device();
    let b = shared(&d, "b", 64);
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.write_value32_bottom_of_pipe(b.address(0), 1, Flush::empty(), WriteSource::Value);
    l.close().unwrap();
    let mut bad = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "bad"))
        .unwrap();
    bad.flush_pipeline(Flush::from_bits_retain(64));
    assert!(matches!(bad.close(), Err(Error::InvalidArg(_))));
}
