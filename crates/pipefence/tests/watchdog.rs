//! The threaded driver's watchdog (`docs/semantics.md` D6) and the classification of what it
//! removes (D7): long but finite kernels are progress, never a hang; only a group that can run
//! longer than the timeout is timed; a wait is removed only when the device stops progressing;
//! durations saturate instead of wrapping.
//!
//! None of these tests depends on the machine's speed: the removals they expect come from a
//! wait nothing satisfies or a group that never ends, and the runs they expect to pass rest on
//! rules (a group's declared cost, a dispatch in flight), not on how fast the workers run.

mod common;

use common::{list, queue, shared, wait_removed};
use pipefence::diagnose::Classification;
use pipefence::explore::explore;
use pipefence::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A bound against hanging only, far above any run here.
const T: Duration = Duration::from_secs(60);

fn device(workers: usize, tdr_ms: u64) -> Device {
    Device::new(DeviceDesc {
        workers,
        watchdog_timeout: Duration::from_millis(tdr_ms),
        ..DeviceDesc::default()
    })
    .unwrap()
}

fn entry<'a>(r: &'a RemovalReport, name: &str) -> &'a diagnose::QueueReport {
    r.queues
        .iter()
        .find(|q| q.queue == name)
        .unwrap_or_else(|| panic!("no entry for {name}: {r}"))
}

/// D6: a `spin` group of 50 ms never exceeds a 100 ms watchdog, however many workers share the
/// cores. With eight workers per core each group busy-waits its 50 ms and then waits for the
/// CPU (on 2 cores they measured up to 270 ms from start to end), and the watchdog, timing
/// every group in real time, removed the device as an endless kernel every time. A group whose
/// declared cost is within the timeout is bound to complete and is not timed.
#[test]
fn d6_groups_within_the_timeout_are_never_endless_when_workers_outnumber_cores() {
    let cores = thread::available_parallelism().map_or(2, |n| n.get());
    let workers = 8 * cores;
    let d = device(workers, 100);
    let q1 = queue(&d, QueueKind::Compute, "q1");
    let q2 = queue(&d, QueueKind::Direct, "q2");
    let groups = 2 * workers as u32;
    let c = list(&d, QueueKind::Compute, "c", |l| {
        l.dispatch(&Kernel::spin(50_000_000), groups);
    });
    let e = list(&d, QueueKind::Direct, "e", |l| {
        l.dispatch(&Kernel::spin(50_000_000), groups);
    });
    q1.execute_command_lists(&[&c]).unwrap();
    q2.execute_command_lists(&[&e]).unwrap();
    let idle = d.wait_idle(T);
    assert!(!d.is_removed(), "{}", d.removal_report().unwrap());
    idle.unwrap();
}

/// D6: a group that can run past the timeout is still timed from when a worker starts it: a
/// user kernel that does not return is removed as an endless kernel, with its group named.
#[test]
fn d6_a_user_kernel_that_never_returns_is_still_an_endless_kernel() {
    let d = device(2, 100);
    let q = queue(&d, QueueKind::Compute, "q");
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.dispatch(
            &Kernel::User(UserKernel::new("forever", move |_| {
                while !s.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(1));
                }
            })),
            1,
        );
    });
    q.execute_command_lists(&[&l]).unwrap();
    let r = wait_removed(&d, T);
    stop.store(true, Ordering::SeqCst);
    assert_eq!(r.classification, Some(Classification::EndlessKernel), "{r}");
    let f = r.fault.as_ref().expect("fault");
    assert_eq!(f.kind, Classification::EndlessKernel);
    assert!(
        f.message.contains("group 0 of kernel `forever`"),
        "{}",
        f.message
    );
}

/// D6: a memory-value wait on another queue's bottom-of-pipe write behind a long but finite
/// kernel (4 groups of 100 ms, a 150 ms watchdog, one worker) is not a hang: the device
/// progresses through that kernel. The wait was removed at about 150 ms, and the report called
/// the writer, whose groups completed every 100 ms, an endless kernel.
#[test]
fn d6_a_memory_wait_behind_a_long_finite_kernel_is_not_removed() {
    let d = device(1, 150);
    let s = shared(&d, "s", 64);
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let q = queue(&d, QueueKind::Compute, "q");
    let r = queue(&d, QueueKind::Compute, "r");
    let w = list(&d, QueueKind::Compute, "w", |l| {
        l.dispatch(&Kernel::spin(100_000_000), 4)
            .write_value32_bottom_of_pipe(s.address(0), 1, Flush::L2_WRITEBACK, WriteSource::Value);
    });
    let x = list(&d, QueueKind::Compute, "x", |l| {
        l.wait_value32(s.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.execute_command_lists(&[&w]).unwrap();
    r.execute_command_lists(&[&x]).unwrap();
    r.signal(&done, 1).unwrap();
    let waited = done.wait(1, T);
    assert!(!d.is_removed(), "{}", d.removal_report().unwrap());
    waited.unwrap();
}

/// D6: the CPU/GPU handshake (the GPU writes a flag, the host polls it and answers, the GPU's
/// memory wait sees the answer) behind a 600 ms dispatch of 60 ms groups with a 100 ms watchdog
/// passes: the queue's memory wait starts while its own kernel still runs, and was removed as
/// waiting on the host 100 ms later.
#[test]
fn d6_the_cpu_gpu_handshake_behind_a_long_kernel_is_not_removed() {
    let d = device(1, 100);
    let s = shared(&d, "s", 64);
    let q = queue(&d, QueueKind::Direct, "q");
    let l = list(&d, QueueKind::Direct, "l", |l| {
        l.dispatch(&Kernel::spin(60_000_000), 10)
            .write_value32_bottom_of_pipe(s.address(4), 1, Flush::L2_WRITEBACK, WriteSource::Value)
            .wait_value32(s.address(8), Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
            .write_value32_bottom_of_pipe(
                s.address(12),
                1,
                Flush::L2_WRITEBACK,
                WriteSource::Value,
            );
    });
    q.execute_command_lists(&[&l]).unwrap();
    let polled = s.wait_u32(4, Comparison::Equal, 1, u32::MAX, T);
    assert!(!d.is_removed(), "{}", d.removal_report().unwrap());
    polled.unwrap();
    s.write_u32(8, 1).unwrap();
    let idle = q.wait_idle(T);
    assert!(!d.is_removed(), "{}", d.removal_report().unwrap());
    idle.unwrap();
    assert_eq!(s.read_u32(12).unwrap(), 1);
}

/// D6: a memory-value wait that nothing will satisfy is still removed once the device stops
/// progressing: here after the other queue's finite kernel has completed. The report names the
/// stuck wait (waiting on the host: no queue has a write that could satisfy it).
#[test]
fn d6_a_stuck_memory_wait_is_removed_once_the_device_stops_progressing() {
    let d = device(1, 100);
    let s = shared(&d, "s", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let r = queue(&d, QueueKind::Compute, "r");
    let w = list(&d, QueueKind::Compute, "w", |l| {
        l.dispatch(&Kernel::spin(40_000_000), 4);
    });
    let x = list(&d, QueueKind::Compute, "x", |l| {
        l.wait_value32(s.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.execute_command_lists(&[&w]).unwrap();
    r.execute_command_lists(&[&x]).unwrap();
    let rep = wait_removed(&d, T);
    assert_eq!(rep.reason, RemovalReason::Hung);
    assert_eq!(
        rep.classification,
        Some(Classification::WaitingOnHost),
        "{rep}"
    );
    let re = entry(&rep, "r");
    assert_eq!(re.class, Classification::WaitingOnHost);
    assert_eq!(re.waiting_for.as_deref(), Some("s (u32) == 1"));
    // The kernel was not cut short: the stall clock stood still while it was in flight.
    if let Some(qe) = rep.queues.iter().find(|e| e.queue == "q") {
        assert_eq!(qe.dispatches_in_flight, 0, "{rep}");
    }
}

/// D7: a hang with no fault while a queue runs an endless kernel and another waits on memory
/// for a write behind that kernel (what the memory-value watchdog finds when it fires before
/// the endless-kernel watchdog, or the scenario runner's `declare_hung`) classifies both as
/// endless-kernel: the waiting queue's path leads to the endless one, as behind an
/// endless-kernel fault. The waiting queue's entry was `running`.
#[test]
fn d7_a_wait_behind_a_kernel_found_endless_takes_that_class() {
    let d = device(2, 60_000);
    let s = shared(&d, "s", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let r = queue(&d, QueueKind::Compute, "r");
    let w = list(&d, QueueKind::Compute, "w", |l| {
        l.dispatch(&Kernel::spin(30_000_000_000), 1)
            .write_value32_top_of_pipe(s.address(0), 1, WriteSource::Value)
            .write_value32_bottom_of_pipe(s.address(8), 1, Flush::L2_WRITEBACK, WriteSource::Value);
    });
    let x = list(&d, QueueKind::Compute, "x", |l| {
        l.write_value32_top_of_pipe(s.address(4), 1, WriteSource::Value)
            .wait_value32(s.address(8), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.execute_command_lists(&[&w]).unwrap();
    r.execute_command_lists(&[&x]).unwrap();
    // q's dispatch is in flight once the write after it landed; r's ME reaches its wait in the
    // same batch of steps as the write before it, so once that write is seen, the report (which
    // takes r's engine lock) finds r in its wait.
    s.wait_u32(0, Comparison::Equal, 1, u32::MAX, T).unwrap();
    s.wait_u32(4, Comparison::Equal, 1, u32::MAX, T).unwrap();
    let rep = d.tools().declare_hung();
    assert_eq!(
        rep.classification,
        Some(Classification::EndlessKernel),
        "{rep}"
    );
    let qe = entry(&rep, "q");
    assert_eq!(qe.class, Classification::EndlessKernel, "{rep}");
    assert_eq!(qe.at.as_ref().map(|a| a.op.as_str()), Some("dispatch"));
    let re = entry(&rep, "r");
    assert_eq!(re.class, Classification::EndlessKernel, "{rep}");
    assert_eq!(re.waits_on, ["q"]);
    assert_eq!(re.waiting_for.as_deref(), Some("s+8 (u32) == 1"));
}

/// D6, D4: a watchdog of `u64::MAX` ms saturates to `u64::MAX` ns instead of wrapping, so a
/// group costing `u64::MAX` ns is within it and completes (it was removed as an endless kernel
/// "longer than the watchdog timeout (18446744073709551.615s)"); the virtual clock saturates.
#[test]
fn d6_a_watchdog_of_u64_max_ms_is_not_exceeded_by_any_group() {
    let desc = DeviceDesc {
        watchdog_timeout: Duration::from_millis(u64::MAX),
        ..DeviceDesc::default()
    };
    let runs = explore(&desc, 0..4, |d| -> Result<u64> {
        let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let mut l = d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))?;
        l.dispatch(&Kernel::spin(u64::MAX), 1);
        l.close()?;
        q.execute_command_lists(&[&l])?;
        q.signal(&f, 1)?;
        f.wait(1, Duration::MAX)?;
        Ok(f.completed_value())
    })
    .unwrap();
    for r in runs {
        assert!(r.removal.is_none(), "{}", r.removal.unwrap());
        assert_eq!(r.value.unwrap(), 1);
        assert_eq!(r.virtual_ns, u64::MAX, "the virtual clock saturated");
    }
}

/// D6, H1: `finite_work_in_flight` (what the scenario runner's hang monitor treats as progress,
/// like the engines' watchdog) holds while a dispatch bound to complete runs, not once it is
/// done, and never for a group that can run past the timeout.
#[test]
fn d6_finite_work_in_flight_is_a_dispatch_bound_to_complete() {
    let d = device(1, 60_000);
    let s = shared(&d, "s", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    assert!(!d.tools().finite_work_in_flight());
    let short = list(&d, QueueKind::Compute, "short", |l| {
        l.dispatch(&Kernel::spin(1_000_000), 4);
    });
    q.execute_command_lists(&[&short]).unwrap();
    q.wait_idle(T).unwrap();
    assert!(
        !d.tools().finite_work_in_flight(),
        "counted after it completed"
    );
    // 30 s per group, within the 60 s watchdog: bound to complete.
    let long = list(&d, QueueKind::Compute, "long", |l| {
        l.dispatch(&Kernel::spin(30_000_000_000), 1)
            .write_value32_top_of_pipe(s.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&long]).unwrap();
    s.wait_u32(0, Comparison::Equal, 1, u32::MAX, T).unwrap();
    let start = Instant::now();
    while !d.tools().finite_work_in_flight() {
        assert!(
            start.elapsed() < T,
            "a finite dispatch in flight is not counted"
        );
        thread::sleep(Duration::from_millis(1));
    }
    d.remove();
    // Past the watchdog: timed, not counted.
    let d = device(1, 100);
    let s = shared(&d, "s", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let endless = list(&d, QueueKind::Compute, "endless", |l| {
        l.dispatch(&Kernel::spin(30_000_000_000), 1)
            .write_value32_top_of_pipe(s.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&endless]).unwrap();
    let _ = s.wait_u32(0, Comparison::Equal, 1, u32::MAX, T);
    assert!(!d.tools().finite_work_in_flight());
    let r = wait_removed(&d, T);
    assert_eq!(r.classification, Some(Classification::EndlessKernel), "{r}");
}

/// Queue statistics: a queue stuck in a wait shows the time it is stuck while it is stuck and
/// after the removal that ends it (before, the time was added only when the wait ended, so a
/// queue stuck until removal showed "blocked 0.0 ms").
#[test]
fn queue_stats_count_the_time_a_stuck_queue_is_blocked() {
    let d = device(2, 60_000);
    let q = queue(&d, QueueKind::Compute, "stuck");
    let f = d.create_fence(&FenceDesc::new(0).named("never")).unwrap();
    q.wait(&f, 1).unwrap();
    let start = Instant::now();
    while q.stats().blocked_ns == 0 {
        assert!(
            start.elapsed() < T,
            "no blocked time after {T:?}: {:?}",
            q.stats()
        );
        thread::sleep(Duration::from_millis(1));
    }
    let seen = q.stats().blocked_ns;
    d.remove();
    let after = q.stats().blocked_ns;
    assert!(after >= seen, "blocked time went back: {seen} then {after}");
}
