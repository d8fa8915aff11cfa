//! The threaded driver's watchdog (`docs/semantics.md` D6) and the classification of what it
//! removes (D7): long but finite kernels are progress, never a hang; only a group that can run
//! longer than the timeout is timed; a wait is removed only when the device stops progressing;
//! durations saturate instead of wrapping.
//!
//! None of these tests depends on the machine's speed: the removals they expect come from a
//! wait nothing satisfies or a group that never ends, and the runs they expect to pass rest on
//! rules (a group's declared cost, a dispatch in flight), not on how fast the workers run.

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

fn queue(d: &Device, kind: QueueKind, name: &str) -> Queue {
    d.create_queue(&QueueDesc::new(kind, name)).unwrap()
}

fn list(d: &Device, kind: QueueKind, name: &str, f: impl FnOnce(&mut CommandList)) -> CommandList {
    let mut l = d
        .create_command_list(&CommandListDesc::new(kind, name))
        .unwrap();
    f(&mut l);
    l.close().unwrap();
    l
}

fn wait_removed(d: &Device) -> Arc<RemovalReport> {
    let start = Instant::now();
    while !d.is_removed() {
        assert!(start.elapsed() < T, "device not removed within {T:?}");
        thread::sleep(Duration::from_millis(2));
    }
    d.removal_report().expect("report")
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
    let r = wait_removed(&d);
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
