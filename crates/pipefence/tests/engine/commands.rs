//! Commands (C1-C12).

use super::*;

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
    // Every schedule of the deterministic driver (the order of the PFP's parse and the host's
    // write of the arguments is the schedule's, not a matter of how long the host sleeps):
    // behind an ME wait the PFP may read the arguments before the host changes them, behind
    // a PFP wait it never does.
    for engine in [WaitEngine::Me, WaitEngine::Pfp] {
        let counts = every_schedule(DeviceDesc::default().fifo_depth, |d| {
            let q = queue(d, QueueKind::Compute, "q");
            let gate = shared(d, "gate", 64);
            let args = shared(d, "args", 64);
            let out = d
                .create_buffer(&BufferDesc::new(8 * 256, Heap::Readback))
                .unwrap();
            args.write_u32(0, 2).unwrap();
            let l = list(d, QueueKind::Compute, "l", |l| {
                l.wait_value32(
                    gate.address(0),
                    Comparison::GreaterEqual,
                    1,
                    u32::MAX,
                    engine,
                )
                .dispatch_indirect(&Kernel::fill(out.gpu_address(), 1), args.address(0));
            });
            q.execute_command_lists(&[&l]).ok()?;
            // Change the arguments before releasing the wait.
            args.write_u32(0, 5).ok()?;
            gate.write_u32(0, 1).ok()?;
            q.wait_idle(T).ok()?;
            let mut groups = 0;
            for i in 0..8 * 64 {
                groups += usize::from(out.read_u32(i * 4).ok()? == 1);
            }
            Some(groups / 64)
        });
        let counts: Vec<usize> = counts.into_iter().collect();
        match engine {
            WaitEngine::Me => assert_eq!(
                counts,
                vec![2, 5],
                "ME wait: the PFP reads the arguments early in some schedules"
            ),
            WaitEngine::Pfp => {
                assert_eq!(counts, vec![5], "PFP wait: arguments read after the wait")
            }
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
