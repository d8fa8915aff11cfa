//! Engine conformance: Q1-Q7, M3, C1-C12, D1-D4, D8 (`docs/semantics.md`), one or more tests per rule.

mod common;

use common::{list, queue, shared};
use pipefence::Fault;
use pipefence::*;
use std::thread;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn device() -> Device {
    Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap()
}

fn device_fifo(fifo_depth: usize) -> Device {
    Device::new(DeviceDesc {
        workers: 2,
        fifo_depth,
        ..DeviceDesc::default()
    })
    .unwrap()
}

fn wait_u32(b: &Buffer, off: u64, v: u32) {
    b.wait_u32(off, Comparison::Equal, v, u32::MAX, T).unwrap();
}

/// A user kernel that spins until the u32 at `flag` is non-zero (at most 2 s), then writes 1
/// (seen) or 2 (gave up) to `out`.
fn waiter_kernel(flag: u64, out: u64) -> Kernel {
    Kernel::User(UserKernel::new("wait-flag", move |ctx| {
        let start = std::time::Instant::now();
        while ctx.read_u32(flag) == 0 {
            if start.elapsed() > Duration::from_secs(2) {
                ctx.write_u32(out, 2);
                return;
            }
            std::hint::spin_loop();
        }
        ctx.write_u32(out, 1);
    }))
}

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

// ---------------------------------------------------------------------------------------------
// Commands

const CMPS: [Comparison; 6] = [
    Comparison::Less,
    Comparison::Equal,
    Comparison::LessEqual,
    Comparison::Greater,
    Comparison::NotEqual,
    Comparison::GreaterEqual,
];

/// The C1 predicate written out by name, independently of the library.
fn expected(cmp: Comparison, v: u64, mask: u64, r: u64) -> bool {
    let m = v & mask;
    match cmp {
        Comparison::Less => m < r,
        Comparison::Equal => m == r,
        Comparison::LessEqual => m <= r,
        Comparison::Greater => m > r,
        Comparison::NotEqual => m != r,
        Comparison::GreaterEqual => m >= r,
        Comparison::Always => true,
        _ => false,
    }
}

fn run_comparison_cases(width: Width, cases: &[(u64, u64, u64)]) {
    // One queue per case: each waits, then writes its marker; unsatisfiable cases stay blocked.
    let d = Device::new(DeviceDesc {
        workers: 1,
        ..DeviceDesc::default()
    })
    .unwrap();
    let mem = shared(&d, "mem", 8 * 256);
    let marks = shared(&d, "marks", 4 * 256);
    let mut expect = Vec::new();
    let mut queues = Vec::new();
    let mut n = 0;
    for &(v, mask, r) in cases {
        for cmp in CMPS.into_iter().chain([Comparison::Always]) {
            let mm = mask & width.mask();
            if cmp.never_satisfiable(mm, r) {
                continue;
            }
            let off = n as u64 * 8;
            match width {
                Width::W32 => mem.write_u32(off, v as u32).unwrap(),
                Width::W64 => mem.write_u64(off, v).unwrap(),
            }
            let q = queue(&d, QueueKind::Compute, &format!("q{n}"));
            let l = list(&d, QueueKind::Compute, "l", |l| {
                match width {
                    Width::W32 => {
                        l.wait_value32(mem.address(off), cmp, r as u32, mask as u32, WaitEngine::Me)
                    }
                    Width::W64 => l.wait_value64(mem.address(off), cmp, r, mask, WaitEngine::Me),
                };
                l.write_value32_top_of_pipe(marks.address(n as u64 * 4), 1, WriteSource::Value);
            });
            q.execute_command_lists(&[&l]).unwrap();
            expect.push((n, cmp, v, mask, r, expected(cmp, v, mask & width.mask(), r)));
            queues.push(q);
            n += 1;
            assert!(n < 256);
        }
    }
    // Satisfied waits complete promptly; give every engine time to reach its wait.
    for (i, _, _, _, _, e) in &expect {
        if *e {
            marks
                .wait_u32(*i as u64 * 4, Comparison::Equal, 1, u32::MAX, T)
                .unwrap();
        }
    }
    thread::sleep(Duration::from_millis(30));
    for (i, cmp, v, mask, r, e) in expect {
        let got = marks.read_u32(i as u64 * 4).unwrap() == 1;
        assert_eq!(got, e, "{width:?} ({v:#x} & {mask:#x}) {cmp:?} {r:#x}");
    }
    assert!(!d.is_removed());
}

#[test]
fn c1_all_comparisons_32_bit_with_masks_and_boundaries() {
    let b31 = 1u64 << 31;
    let max = u64::from(u32::MAX);
    run_comparison_cases(
        Width::W32,
        &[
            (5, max, 5),
            (5, max, 6),
            (5, max, 4),
            (0xF5, 0x0F, 5),
            (0xF5, 0xF0, 0xF0),
            (b31, max, b31 - 1),
            (b31, max, b31),
            (b31 - 1, max, b31),
            (max, max, max),
            (max, max, max - 1),
            (0, max, 0),
            (7, 0, 1),
            (max, 0x8000_0000, 0x8000_0000),
        ],
    );
}

#[test]
fn c1_all_comparisons_64_bit_unsigned_never_cyclic() {
    let max = u64::MAX;
    let b32 = 1u64 << 32;
    run_comparison_cases(
        Width::W64,
        &[
            (max, max, max),
            (max, max, 0),
            (0, max, max),
            (b32, max, b32 - 1),
            (b32 - 1, max, b32),
            (
                0xFFFF_0000_0000_0000,
                0xFFFF_0000_0000_0000,
                0x8000_0000_0000_0000,
            ),
            (b32 | 5, u64::from(u32::MAX), 5),
            (1 << 63, 1 << 63, 1 << 63),
            (3, 0, 1),
        ],
    );
}

#[test]
fn c1_wait_wakes_on_gpu_and_cpu_writes() {
    let d = device();
    let m = shared(&d, "m", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value64(
            m.address(8),
            Comparison::Greater,
            10,
            u64::MAX,
            WaitEngine::Me,
        )
        .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    thread::sleep(Duration::from_millis(10));
    m.write_u64(8, 10).unwrap();
    thread::sleep(Duration::from_millis(10));
    assert_eq!(m.read_u32(0).unwrap(), 0);
    m.write_u64(8, 11).unwrap();
    wait_u32(&m, 0, 1);
}

#[test]
fn c2_pfp_wait_accepts_only_greater_equal() {
    let d = device();
    for cmp in [
        Comparison::Less,
        Comparison::Equal,
        Comparison::NotEqual,
        Comparison::Always,
    ] {
        let mut l = d
            .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
            .unwrap();
        l.wait_value64(0x1_0000_0000, cmp, 1, u64::MAX, WaitEngine::Pfp);
        let e = l.close().unwrap_err();
        assert!(matches!(e, Error::InvalidArg(_)), "{e}");
        assert!(e.to_string().contains("command 0"), "{e}");
    }
}

#[test]
fn c7_dispatch_indirect_behind_me_wait_reads_arguments_early_never_behind_pfp_wait() {
    for engine in [WaitEngine::Me, WaitEngine::Pfp] {
        let d = device();
        let q = queue(&d, QueueKind::Compute, "q");
        let gate = shared(&d, "gate", 64);
        let args = shared(&d, "args", 64);
        let out = d
            .create_buffer(&BufferDesc::new(8 * 256, Heap::Readback))
            .unwrap();
        args.write_u32(0, 2).unwrap();
        let l = list(&d, QueueKind::Compute, "l", |l| {
            l.wait_value32(
                gate.address(0),
                Comparison::GreaterEqual,
                1,
                u32::MAX,
                engine,
            )
            .dispatch_indirect(&Kernel::fill(out.gpu_address(), 1), args.address(0));
        });
        q.execute_command_lists(&[&l]).unwrap();
        thread::sleep(Duration::from_millis(50));
        // Change the arguments before releasing the wait.
        args.write_u32(0, 5).unwrap();
        gate.write_u32(0, 1).unwrap();
        q.wait_idle(T).unwrap();
        let groups = (0..8 * 64)
            .filter(|i| out.read_u32(i * 4).unwrap() == 1)
            .count()
            / 64;
        match engine {
            WaitEngine::Me => assert_eq!(groups, 2, "ME wait: the PFP read the arguments early"),
            WaitEngine::Pfp => assert_eq!(groups, 5, "PFP wait: arguments read after the wait"),
        }
    }
}

#[test]
fn c7_zero_group_count_from_memory_launches_nothing() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let args = shared(&d, "args", 64);
    let out = d
        .create_buffer(&BufferDesc::new(256, Heap::Readback))
        .unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch_indirect(&Kernel::fill(out.gpu_address(), 1), args.address(0))
            .write_value32_bottom_of_pipe(args.address(8), 1, Flush::NONE, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    wait_u32(&args, 8, 1);
    assert_eq!(out.read_u32(0).unwrap(), 0);
    assert!(!d.is_removed());
}

#[test]
fn c3_bottom_of_pipe_waits_for_dispatches_without_stalling_me() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&waiter_kernel(m.address(16), m.address(20)), 1)
            .write_value32_bottom_of_pipe(m.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value)
            .write_value32_top_of_pipe(m.address(4), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    // The top-of-pipe write after the BOP lands while the dispatch still runs.
    wait_u32(&m, 4, 1);
    assert_eq!(
        m.read_u32(0).unwrap(),
        0,
        "bottom-of-pipe write landed before the dispatch finished"
    );
    m.write_u32(16, 1).unwrap();
    wait_u32(&m, 0, 1);
    assert_eq!(m.read_u32(20).unwrap(), 1);
}

#[test]
fn c3_bottom_of_pipe_writes_and_signals_land_in_submission_order() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&Kernel::spin(5_000_000), 1)
            .write_value32_bottom_of_pipe(m.address(0), 1, Flush::NONE, WriteSource::Value)
            .write_value32_bottom_of_pipe(m.address(4), 2, Flush::NONE, WriteSource::Value);
    });
    for _ in 0..3 {
        q.execute_command_lists(&[&l]).unwrap();
    }
    q.signal(&f, 1).unwrap();
    f.wait(1, T).unwrap();
    assert_eq!(m.read_u32(0).unwrap(), 1);
    assert_eq!(m.read_u32(4).unwrap(), 2);
}

#[test]
fn c3_timestamp_with_nonzero_value_is_invalid_arg() {
    let d = device();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Direct, "ts"))
        .unwrap();
    l.write_value64_bottom_of_pipe(0x1_0000_0000, 5, Flush::NONE, WriteSource::GpuTimestamp);
    let e = l.close().unwrap_err();
    assert!(matches!(e, Error::InvalidArg(_)), "{e}");
}

#[test]
fn c4_c12_bottom_of_pipe_timestamps_follow_top_of_pipe_timestamps() {
    let d = device();
    let q = queue(&d, QueueKind::Direct, "q");
    let m = d
        .create_buffer(&BufferDesc::new(64, Heap::Readback))
        .unwrap();
    let l = list(&d, QueueKind::Direct, "l", |l| {
        l.write_value64_top_of_pipe(m.address(0), 0, WriteSource::GpuTimestamp)
            .write_value64_top_of_pipe(m.address(8), 0, WriteSource::SystemTimestamp)
            .dispatch(&Kernel::spin(2_000_000), 1)
            .write_value64_bottom_of_pipe(m.address(16), 0, Flush::NONE, WriteSource::GpuTimestamp)
            .write_value32_bottom_of_pipe(
                m.address(24),
                0,
                Flush::NONE,
                WriteSource::SystemTimestamp,
            );
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.wait_idle(T).unwrap();
    let (top, bop) = (m.read_u64(0).unwrap(), m.read_u64(16).unwrap());
    assert!(top > 0 && bop > top, "top {top} bop {bop}");
    // 2 ms of spin at 100 MHz is at least 200_000 ticks.
    assert!(bop - top >= 200_000, "top {top} bop {bop}");
    assert!(m.read_u64(8).unwrap() > 0);
    assert!(m.read_u32(24).unwrap() > 0);
}

#[test]
fn c12_timestamp_frequency_and_calibration() {
    let d = device();
    let q = queue(&d, QueueKind::Copy, "dma");
    assert_eq!(q.timestamp_frequency(), 100_000_000);
    let (gpu, cpu) = q.clock_calibration().unwrap();
    assert!(gpu > 0 && cpu > 0);
    let d2 = Device::new(DeviceDesc {
        timestamp_frequency: 1000,
        ..DeviceDesc::default()
    })
    .unwrap();
    let q2 = queue(&d2, QueueKind::Compute, "q");
    assert_eq!(q2.timestamp_frequency(), 1000);
    let (g2, _) = q2.clock_calibration().unwrap();
    assert!(g2 >= 1000, "epoch lies 1 s before creation: {g2}");
}

#[test]
fn c5_write_buffer_immediate_modes() {
    let d = device();
    let q = queue(&d, QueueKind::Direct, "q");
    let m = shared(&d, "m", 64);
    let l = list(&d, QueueKind::Direct, "l", |l| {
        l.dispatch(&waiter_kernel(m.address(16), m.address(20)), 1)
            .write_buffer_immediate(&[
                ImmediateWrite {
                    address: m.address(0),
                    value: 1,
                    mode: ImmediateMode::MarkerIn,
                },
                ImmediateWrite {
                    address: m.address(4),
                    value: 2,
                    mode: ImmediateMode::MarkerOut,
                },
                ImmediateWrite {
                    address: m.address(8),
                    value: 3,
                    mode: ImmediateMode::Default,
                },
            ]);
    });
    q.execute_command_lists(&[&l]).unwrap();
    wait_u32(&m, 0, 1);
    wait_u32(&m, 8, 3);
    assert_eq!(
        m.read_u32(4).unwrap(),
        0,
        "MarkerOut landed before earlier work finished"
    );
    m.write_u32(16, 1).unwrap();
    wait_u32(&m, 4, 2);
    // With no prior work, MarkerOut behaves as MarkerIn.
    let l2 = list(&d, QueueKind::Direct, "l2", |l| {
        l.write_buffer_immediate(&[ImmediateWrite {
            address: m.address(12),
            value: 4,
            mode: ImmediateMode::MarkerOut,
        }]);
    });
    q.execute_command_lists(&[&l2]).unwrap();
    wait_u32(&m, 12, 4);
}

#[test]
fn c6_dispatches_overlap_without_flush_and_are_ordered_with_it() {
    for flush in [false, true] {
        // The waiting group may spin its full 2 s (with the flush it always does): a watchdog
        // far above that, so a loaded machine never turns the test into a hang.
        let d = Device::new(DeviceDesc {
            workers: 2,
            watchdog_timeout: Duration::from_secs(60),
            ..DeviceDesc::default()
        })
        .unwrap();
        let q = queue(&d, QueueKind::Compute, "q");
        let m = shared(&d, "m", 64);
        let l = list(&d, QueueKind::Compute, "l", |l| {
            // The first dispatch waits (up to 2 s) for a flag the second sets.
            l.dispatch(&waiter_kernel(m.address(0), m.address(4)), 1);
            if flush {
                l.flush_pipeline(Flush::NONE);
            }
            let flag = m.address(0);
            l.dispatch(
                &Kernel::User(UserKernel::new("set-flag", move |ctx| {
                    ctx.write_u32(flag, 1)
                })),
                1,
            );
        });
        q.execute_command_lists(&[&l]).unwrap();
        q.wait_idle(T).unwrap();
        let seen = m.read_u32(4).unwrap();
        if flush {
            assert_eq!(seen, 2, "flush_pipeline did not order the dispatches");
        } else {
            assert_eq!(seen, 1, "dispatches without flush did not overlap");
        }
    }
}

#[test]
fn c6_zero_groups_is_invalid_arg() {
    let d = device();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.set_marker("a").dispatch(&Kernel::spin(1), 0);
    let e = l.close().unwrap_err();
    assert!(e.to_string().contains("command 1"), "{e}");
}

#[test]
fn c8_flush_pipeline_holds_pfp_so_indirect_reads_earlier_results() {
    let d = device();
    let q = queue(&d, QueueKind::Compute, "q");
    let args = d
        .create_buffer(&BufferDesc::new(256, Heap::DeviceLocal))
        .unwrap();
    let out = d
        .create_buffer(&BufferDesc::new(16 * 256, Heap::Readback))
        .unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(&Kernel::spin(5_000_000), 1)
            .dispatch(&Kernel::fill(args.gpu_address(), 4), 1)
            .flush_pipeline(Flush::L2_WRITEBACK)
            .dispatch_indirect(&Kernel::fill(out.gpu_address(), 1), args.gpu_address());
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.wait_idle(T).unwrap();
    let groups = (0..16 * 64)
        .filter(|i| out.read_u32(i * 4).unwrap() == 1)
        .count()
        / 64;
    assert_eq!(groups, 4);
}

#[test]
fn c9_copy_completes_before_the_me_goes_on() {
    let d = device();
    let q = queue(&d, QueueKind::Copy, "dma");
    let src = d
        .create_buffer(&BufferDesc::new(4096, Heap::Upload))
        .unwrap();
    let dst = d
        .create_buffer(&BufferDesc::new(4096, Heap::Readback))
        .unwrap();
    for i in 0..1024 {
        src.write_u32(i * 4, i as u32 * 3).unwrap();
    }
    let m = shared(&d, "m", 64);
    let l = list(&d, QueueKind::Copy, "l", |l| {
        l.copy_buffer_region(dst.gpu_address(), src.gpu_address(), 4096)
            .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    wait_u32(&m, 0, 1);
    for i in 0..1024 {
        assert_eq!(dst.read_u32(i * 4).unwrap(), i as u32 * 3);
    }
}

#[test]
fn c10_unbalanced_events_are_invalid_arg() {
    let d = device();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
        .unwrap();
    l.end_event();
    assert!(l.close().unwrap_err().to_string().contains("command 0"));
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
        .unwrap();
    l.set_marker("x").begin_event("open");
    let e = l.close().unwrap_err();
    assert!(e.to_string().contains("command 1"), "{e}");
    assert_eq!(l.validation_errors().len(), 1);
}

#[test]
fn c11_misaligned_addresses_are_invalid_arg_with_every_error_listed() {
    let d = device();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
        .unwrap();
    l.wait_value32(
        0x1_0000_0002,
        Comparison::Equal,
        0,
        u32::MAX,
        WaitEngine::Me,
    )
    .write_value64_top_of_pipe(0x1_0000_0004, 0, WriteSource::Value)
    .set_marker("fine")
    .copy_buffer_region(0x1_0000_0000, 0x1_0000_0001, 4)
    .wait_value32(0x1_0000_0000, Comparison::None, 0, 0, WaitEngine::Me);
    let errors = l.validation_errors();
    let idx: Vec<usize> = errors.iter().map(|e| e.index).collect();
    assert_eq!(idx, vec![0, 1, 3, 4], "{errors:?}");
    let e = l.close().unwrap_err();
    assert!(e.to_string().contains("0x100000002"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Engine model

#[test]
fn d1_pfp_runs_ahead_of_a_blocked_me_up_to_fifo_depth() {
    let d = device_fifo(4);
    let q = queue(&d, QueueKind::Compute, "q");
    let gate = shared(&d, "gate", 64);
    let args = shared(&d, "args", 64);
    let out = d
        .create_buffer(&BufferDesc::new(16 * 256, Heap::Readback))
        .unwrap();
    for i in 0..12 {
        args.write_u32(i * 4, 1).unwrap();
    }
    let l = list(&d, QueueKind::Compute, "l", |l| {
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
    q.execute_command_lists(&[&l]).unwrap();
    thread::sleep(Duration::from_millis(50));
    for i in 0..12 {
        args.write_u32(i * 4, 0).unwrap();
    }
    gate.write_u32(0, 1).unwrap();
    q.wait_idle(T).unwrap();
    let launched: Vec<bool> = (0..12)
        .map(|i| out.read_u32(i * 256).unwrap() == 1)
        .collect();
    let n = launched.iter().filter(|b| **b).count();
    // The ME holds the wait; the FIFO (depth 4) holds four parsed dispatches.
    assert_eq!(n, 4, "{launched:?}");
    assert!(launched[..4].iter().all(|b| *b));
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
