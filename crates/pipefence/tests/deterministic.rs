//! The deterministic driver (D4, D6): seeded schedules, exact hangs, replay.

use pipefence::explore::{deterministic_desc, explore};
use pipefence::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

#[test]
fn d4_async_compute_runs_and_replays_identically() {
    let body = |d: &Device| -> Result<(u64, u64)> {
        let data = d.create_buffer(&BufferDesc::new(16384, Heap::DeviceLocal).named("data"))?;
        let flags = d.create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        let gfx = d.create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))?;
        let asy = d.create_queue(&QueueDesc::new(QueueKind::Compute, "async"))?;
        let mut produce =
            d.create_command_list(&CommandListDesc::new(QueueKind::Direct, "produce"))?;
        produce
            .dispatch(&Kernel::fill(data.gpu_address(), 7), 64)
            .write_value64_bottom_of_pipe(
                flags.address(0),
                1,
                Flush::L2_WRITEBACK,
                WriteSource::Value,
            )
            .write_value64_bottom_of_pipe(
                flags.address(16),
                0,
                Flush::NONE,
                WriteSource::GpuTimestamp,
            );
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
        gfx.execute_command_lists(&[&produce])?;
        asy.execute_command_lists(&[&consume])?;
        asy.signal(&done, 1)?;
        done.wait(1, T)?;
        Ok((flags.read_u64(8)?, flags.read_u64(16)?))
    };
    let runs = explore(&DeviceDesc::default(), 0..50, body).unwrap();
    for r in &runs {
        let (sum, _) = r.value.as_ref().unwrap();
        assert_eq!(*sum, 28672, "seed {}", r.seed);
        assert!(r.removal.is_none());
    }
    // Same seed, same result (timestamps are virtual).
    let again = explore(&DeviceDesc::default(), 0..50, body).unwrap();
    for (a, b) in runs.iter().zip(&again) {
        assert_eq!(
            a.value.as_ref().unwrap(),
            b.value.as_ref().unwrap(),
            "seed {}",
            a.seed
        );
        assert_eq!(a.virtual_ns, b.virtual_ns);
    }
    let stamps: std::collections::BTreeSet<u64> =
        runs.iter().map(|r| r.value.as_ref().unwrap().1).collect();
    assert!(stamps.len() > 1, "schedules differ in timing");
}

#[test]
fn d6_deadlock_detected_at_once_with_same_report() {
    let runs = explore(&DeviceDesc::default(), 0..10, |d| -> Result<()> {
        let a = d.create_fence(&FenceDesc::new(0).named("a"))?;
        let b = d.create_fence(&FenceDesc::new(0).named("b"))?;
        let q1 = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q1"))?;
        let q2 = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q2"))?;
        q1.wait(&b, 1)?;
        q1.signal(&a, 1)?;
        q2.wait(&a, 1)?;
        q2.signal(&b, 1)?;
        a.wait(1, T)
    })
    .unwrap();
    for r in runs {
        assert!(r.value.unwrap_err().is_device_removed());
        let rep = r.removal.unwrap();
        assert_eq!(rep.classification, Some(Classification::Deadlock));
        assert_eq!(rep.cycle, vec!["q1", "q2"]);
        assert_eq!(rep.queues[0].waiting_for.as_deref(), Some("fence b >= 1"));
    }
}

#[test]
fn d4_host_threads_are_scheduled_and_host_waits_never_time_out() {
    let runs = explore(&DeviceDesc::default(), 0..30, |d| -> Result<u32> {
        let m = d.create_buffer(&BufferDesc::new(64, Heap::Shared).named("m"))?;
        let q = d.create_queue(&QueueDesc::new(QueueKind::Direct, "gfx"))?;
        let mut l = d.create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))?;
        l.write_value32_bottom_of_pipe(m.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value)
            .wait_value32(m.address(4), Comparison::Equal, 7, u32::MAX, WaitEngine::Me)
            .write_value32_top_of_pipe(m.address(8), 9, WriteSource::Value);
        l.close()?;
        let m2 = m.clone();
        let dev = d.clone();
        let h = host::spawn(d, "responder", move || -> Result<()> {
            // A virtual-time sleep far longer than any timeout: host waits never time out.
            host::sleep(&dev, Duration::from_secs(100));
            m2.wait_u32(0, Comparison::Equal, 1, u32::MAX, Duration::from_millis(1))?;
            m2.write_u32(4, 7)
        })
        .unwrap();
        q.execute_command_lists(&[&l])?;
        m.wait_u32(8, Comparison::Equal, 9, u32::MAX, Duration::from_millis(1))?;
        h.join().unwrap()?;
        m.read_u32(8)
    })
    .unwrap();
    for r in runs {
        assert_eq!(r.value.unwrap(), 9, "seed {}", r.seed);
        assert!(r.virtual_ns >= 100_000_000_000);
    }
}

#[test]
fn d6_blocked_host_wait_with_no_engine_work_times_out() {
    let d = Device::new(deterministic_desc(&DeviceDesc::default(), 3)).unwrap();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = f.wait(1, T).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(!d.is_removed());
}

#[test]
fn d6_endless_kernel_removed_at_launch_plus_timeout() {
    let runs = explore(
        &DeviceDesc {
            watchdog_timeout: Duration::from_millis(50),
            ..DeviceDesc::default()
        },
        0..5,
        |d| -> Result<u64> {
            let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
            let mut l = d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))?;
            l.dispatch(&Kernel::spin(10_000_000_000), 1);
            l.close()?;
            q.execute_command_lists(&[&l])?;
            let _ = d.wait_idle(T);
            Ok(0)
        },
    )
    .unwrap();
    for r in runs {
        let rep = r.removal.unwrap();
        assert_eq!(rep.classification, Some(Classification::EndlessKernel));
        // Removed exactly at launch + 50 ms of virtual time.
        assert!(
            r.virtual_ns >= 50_000_000 && r.virtual_ns < 60_000_000,
            "{}",
            r.virtual_ns
        );
    }
}

/// D4: a failed try (an engine stage found blocked or idle) is a step that changes nothing but
/// the disabled stages, so it never lists every host and queue again: the next step takes the
/// failed stage out of the listing it was picked from. 200 queues each run one 1-group dispatch;
/// under PCT every group completion re-enables the 200 blocked MEs, and those of higher priority
/// than the dispatches are tried one by one. Before, each of those tries listed every queue
/// again (O(queues^2) per completion, a cubic run: 512 queues took minutes); now a listing is
/// made only after an action that changed something.
#[test]
fn d4_a_failed_try_never_lists_every_queue_again() {
    const QUEUES: usize = 200;
    for seed in [1, 2, 4] {
        let d = Device::new(deterministic_desc(&DeviceDesc::default(), seed)).unwrap();
        let f = d.create_fence(&FenceDesc::new(0)).unwrap();
        let mut l = d
            .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
            .unwrap();
        l.dispatch(&Kernel::spin(1), 1);
        l.close().unwrap();
        let queues: Vec<Queue> = (0..QUEUES)
            .map(|i| {
                d.create_queue(&QueueDesc::new(QueueKind::Compute, &format!("q{i}")))
                    .unwrap()
            })
            .collect();
        for (i, q) in queues.iter().enumerate() {
            q.execute_command_lists(&[&l]).unwrap();
            q.signal(&f, i as u64 + 1).unwrap();
        }
        d.wait_idle(T).unwrap();
        let s = d
            .tools()
            .schedule_stats()
            .expect("a deterministic device has stats");
        // Every dispatch completed, and the seeds reach the case: many failed tries.
        assert!(s.steps >= QUEUES as u64, "seed {seed}: {s:?}");
        if seed != 4 {
            assert!(s.failed_tries >= 10 * QUEUES as u64, "seed {seed}: {s:?}");
        }
        // At most one listing per action that changed something, none per failed try (before:
        // one per step, failed tries included).
        assert!(s.listings <= s.steps - s.failed_tries, "seed {seed}: {s:?}");
    }
}

/// D4: a listing tests only the hosts that may run. A chain of 300 host threads (host i waits
/// for the fence to reach i, then signals i + 1) keeps almost every host blocked on the fence
/// for the whole run; a blocked host is tested again only once a ticket of its wait is
/// satisfied. Before, every listing tested every host (hosts x listings: about quadratic), and
/// every hand-off woke every host thread to find the turn was not its own.
#[test]
fn d4_a_listing_tests_only_hosts_that_may_run() {
    const HOSTS: u64 = 300;
    for seed in [1, 2, 4] {
        let d = Device::new(deterministic_desc(&DeviceDesc::default(), seed)).unwrap();
        let f = d.create_fence(&FenceDesc::new(0)).unwrap();
        let hosts: Vec<_> = (0..HOSTS)
            .map(|i| {
                let f = f.clone();
                host::spawn(&d, &format!("h{i}"), move || -> Result<()> {
                    f.wait(i, T)?;
                    f.signal(i + 1)
                })
                .unwrap()
            })
            .collect();
        f.wait(HOSTS, T).unwrap();
        for h in hosts {
            h.join().unwrap().unwrap();
        }
        let s = d
            .tools()
            .schedule_stats()
            .expect("a deterministic device has stats");
        assert!(s.listings >= 3 * HOSTS, "seed {seed}: {s:?}");
        // A few tests per host wait (when it blocks, and when its ticket is satisfied) and per
        // join, not one per host and listing.
        assert!(
            s.blocked_host_tests <= 4 * HOSTS + s.listings,
            "seed {seed}: {s:?}"
        );
    }
}

/// D4: a step of the deterministic driver examines the hosts, engine stages and write-backs one
/// by one, never every dispatch in flight (those are counted and chosen without a scan), so a
/// schedule costs about linear time in the work done. Strict mode's maximal PFP run-ahead puts
/// most of the 3000 one-group dispatches of one list in flight at once (seed 3): before, every one of them was
/// listed at every step (3000 x steps).
#[test]
fn d4_a_step_never_lists_every_dispatch_in_flight() {
    // The schedules reach the case: over a thousand dispatches in flight at one step.
    let mut most_in_flight = 0;
    for model in [MemoryModel::Plain, MemoryModel::Strict] {
        for seed in 0..4 {
            let desc = DeviceDesc {
                memory_model: model,
                ..deterministic_desc(&DeviceDesc::default(), seed)
            };
            let d = Device::new(desc).unwrap();
            let q = d
                .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
                .unwrap();
            let f = d.create_fence(&FenceDesc::new(0)).unwrap();
            let mut l = d
                .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
                .unwrap();
            for _ in 0..3000 {
                l.dispatch(&Kernel::spin(1), 1);
            }
            l.close().unwrap();
            q.execute_command_lists(&[&l]).unwrap();
            q.signal(&f, 1).unwrap();
            f.wait(1, T).unwrap();
            d.wait_idle(T).unwrap();
            let s = d
                .tools()
                .schedule_stats()
                .expect("a deterministic device has stats");
            // Every dispatch ran as at least one action.
            assert!(s.steps >= 3000, "{model:?} seed {seed}: {s:?}");
            // Host, 3 stages per queue, write-backs: a handful, whatever the dispatch count.
            assert!(s.max_listed <= 8, "{model:?} seed {seed}: {s:?}");
            most_in_flight = most_in_flight.max(s.max_dispatches_in_flight);
        }
    }
}
