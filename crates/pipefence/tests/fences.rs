//! Fence rules F1-F11 (`docs/semantics.md`), one or more tests per rule, named by rule id.

use pipefence::{
    Device, DeviceDesc, Error, Event, Fence, FenceDesc, MultipleFenceWaitFlags, RemovalReason,
};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);
const SHORT: Duration = Duration::from_millis(50);

fn device() -> Device {
    Device::new(DeviceDesc::default()).unwrap()
}

#[test]
fn f1_fence_starts_at_initial_value() {
    let d = device();
    assert_eq!(
        d.create_fence(&FenceDesc::new(0))
            .unwrap()
            .completed_value(),
        0
    );
    assert_eq!(
        d.create_fence(&FenceDesc::new(41))
            .unwrap()
            .completed_value(),
        41
    );
    assert_eq!(
        d.create_fence(&FenceDesc::new(u64::MAX))
            .unwrap()
            .completed_value(),
        u64::MAX
    );
}

#[test]
fn f2_last_write_wins_and_may_lower() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    f.signal(10).unwrap();
    assert_eq!(f.completed_value(), 10);
    f.signal(3).unwrap();
    assert_eq!(f.completed_value(), 3);
    f.signal(3).unwrap();
    assert_eq!(f.completed_value(), 3);
}

#[test]
fn f4_completed_value_is_last_signal_then_max_after_removal() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(5)).unwrap();
    f.signal(7).unwrap();
    assert_eq!(f.completed_value(), 7);
    d.remove();
    assert_eq!(f.completed_value(), u64::MAX);
}

#[test]
fn f5_value_already_reached_satisfies_at_once() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(5)).unwrap();
    f.wait(5, Duration::ZERO).unwrap();
    f.wait(3, Duration::ZERO).unwrap();
    let e = f.wait(6, Duration::ZERO).unwrap_err();
    assert!(e.is_timeout(), "{e}");
}

#[test]
fn f5_wait_is_satisfied_by_greater_or_equal_signal() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let f2 = f.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        f2.signal(9).unwrap();
    });
    f.wait(4, T).unwrap();
    t.join().unwrap();
}

#[test]
fn f5_wait_for_max_only_by_max_signal() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    f.signal(u64::MAX - 1).unwrap();
    assert!(f.wait(u64::MAX, SHORT).unwrap_err().is_timeout());
    f.signal(u64::MAX).unwrap();
    f.wait(u64::MAX, Duration::ZERO).unwrap();
}

#[test]
fn f5_wait_for_max_released_by_removal() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let f2 = f.clone();
    let t = thread::spawn(move || f2.wait(u64::MAX, T));
    thread::sleep(Duration::from_millis(20));
    d.remove();
    let r = t.join().unwrap();
    assert!(matches!(r, Err(Error::DeviceRemoved { .. })), "{r:?}");
}

#[test]
fn f6_event_fires_once_per_crossing() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    f.set_event_on_completion(2, Some(&e)).unwrap();
    f.signal(1).unwrap();
    assert!(!e.is_set());
    f.signal(2).unwrap();
    assert!(e.try_wait());
    // Lower and cross again: the registration was consumed, nothing fires.
    f.signal(0).unwrap();
    f.signal(5).unwrap();
    assert!(!e.is_set());
}

#[test]
fn f6_event_fires_at_registration_if_reached() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(3)).unwrap();
    let e = Event::new();
    f.set_event_on_completion(3, Some(&e)).unwrap();
    assert!(e.try_wait());
}

#[test]
fn f6_one_event_registered_for_several_values_fires_for_each() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    f.set_event_on_completion(1, Some(&e)).unwrap();
    f.set_event_on_completion(2, Some(&e)).unwrap();
    f.signal(1).unwrap();
    assert!(e.try_wait());
    assert!(!e.is_set());
    f.signal(2).unwrap();
    assert!(e.try_wait());
}

#[test]
fn f6_several_events_on_one_value_all_fire() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let events: Vec<Event> = (0..5).map(|_| Event::new()).collect();
    for e in &events {
        f.set_event_on_completion(4, Some(e)).unwrap();
    }
    f.signal(4).unwrap();
    assert!(events.iter().all(Event::try_wait));
}

#[test]
fn f6_events_are_auto_reset_and_stay_set_when_registered_set() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(1)).unwrap();
    let e = Event::new();
    e.set();
    f.set_event_on_completion(1, Some(&e)).unwrap();
    assert!(e.is_set());
    assert!(e.wait(Duration::ZERO));
    assert!(!e.wait(Duration::ZERO), "auto-reset: the wait consumed it");
}

#[test]
fn f7_set_event_on_completion_none_blocks_until_reached() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let f2 = f.clone();
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        f2.set_event_on_completion(3, None).unwrap();
        tx.send(f2.completed_value()).unwrap();
    });
    assert!(
        rx.recv_timeout(SHORT).is_err(),
        "returned before the signal"
    );
    f.signal(3).unwrap();
    assert_eq!(rx.recv_timeout(T).unwrap(), 3);
    t.join().unwrap();
}

#[test]
fn f7_wait_times_out_with_a_message_naming_fence_and_value() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(1).named("frame")).unwrap();
    let start = Instant::now();
    let e = f.wait(2, Duration::from_millis(30)).unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert!(e.is_timeout());
    assert_eq!(e.hresult(), 0x102);
    let msg = e.to_string();
    assert!(
        msg.contains("frame") && msg.contains("wait for 2") && msg.contains("completed value 1"),
        "{msg}"
    );
}

#[test]
fn f7_zero_timeout_polls() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let start = Instant::now();
    assert!(f.wait(1, Duration::ZERO).unwrap_err().is_timeout());
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[test]
fn f7_wait_async_is_woken_by_signal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let f2 = f.clone();
    let signaller = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        f2.signal(2).unwrap();
    });
    rt.block_on(async {
        tokio::time::timeout(T, f.wait_async(2))
            .await
            .expect("future not woken")
            .unwrap();
    });
    signaller.join().unwrap();
}

#[test]
fn f7_wait_async_many_futures_and_drop_deregisters() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    rt.block_on(async {
        // A dropped pending future leaves nothing registered.
        let r = tokio::time::timeout(Duration::from_millis(10), f.wait_async(100)).await;
        assert!(r.is_err());
        let mut handles = Vec::new();
        for v in 1..=50u64 {
            let f = f.clone();
            handles.push(tokio::spawn(async move { f.wait_async(v).await }));
        }
        tokio::task::yield_now().await;
        let f2 = f.clone();
        thread::spawn(move || f2.signal(50).unwrap());
        for h in handles {
            tokio::time::timeout(T, h).await.unwrap().unwrap().unwrap();
        }
    });
}

#[test]
fn f7_wait_async_already_reached_is_ready() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let d = device();
    let f = d.create_fence(&FenceDesc::new(9)).unwrap();
    rt.block_on(async { f.wait_async(9).await.unwrap() });
}

fn multi(d: &Device, fences: &[&Fence], values: &[u64], flags: u32) -> pipefence::Result<()> {
    d.wait_multiple(fences, values, MultipleFenceWaitFlags(flags), SHORT)
}

#[test]
fn f8_all_fires_when_every_fence_reached() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    d.set_event_on_multiple_fence_completion(
        &[&a, &b],
        &[1, 2],
        MultipleFenceWaitFlags::ALL,
        Some(&e),
    )
    .unwrap();
    a.signal(1).unwrap();
    assert!(!e.is_set());
    let err = multi(&d, &[&a, &b], &[1, 2], 0).unwrap_err();
    assert!(err.is_timeout());
    // The message says where each fence is: the wait still waits for `b` (a single fence's
    // timeout says its completed value too).
    let text = err.to_string();
    assert!(
        text.contains(">= 1 (completed value 1)") && text.contains(">= 2 (completed value 0)"),
        "{text}"
    );
    b.signal(2).unwrap();
    assert!(e.try_wait());
    multi(&d, &[&a, &b], &[1, 2], 0).unwrap();
}

#[test]
fn f8_any_fires_once_at_the_first() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    d.set_event_on_multiple_fence_completion(
        &[&a, &b],
        &[1, 1],
        MultipleFenceWaitFlags::ANY,
        Some(&e),
    )
    .unwrap();
    b.signal(1).unwrap();
    assert!(e.try_wait());
    a.signal(1).unwrap();
    assert!(!e.is_set(), "ANY fires once");
    let c = d.create_fence(&FenceDesc::new(0)).unwrap();
    multi(&d, &[&c, &a], &[1, 1], 1).unwrap();
}

#[test]
fn f8_blocking_multi_wait_across_threads() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = d.create_fence(&FenceDesc::new(0)).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(10));
        a2.signal(1).unwrap();
        thread::sleep(Duration::from_millis(10));
        b2.signal(1).unwrap();
    });
    d.wait_multiple(&[&a, &b], &[1, 1], MultipleFenceWaitFlags::ALL, T)
        .unwrap();
    t.join().unwrap();
    let c = d.create_fence(&FenceDesc::new(0)).unwrap();
    let c2 = c.clone();
    let t = thread::spawn(move || c2.signal(1).unwrap());
    d.set_event_on_multiple_fence_completion(&[&c], &[1], MultipleFenceWaitFlags::ALL, None)
        .unwrap();
    t.join().unwrap();
}

#[test]
fn f8_argument_errors_are_invalid_arg() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    let err = d
        .set_event_on_multiple_fence_completion(
            &[] as &[&Fence],
            &[],
            MultipleFenceWaitFlags::ALL,
            Some(&e),
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArg(_)) && err.to_string().contains("count 0"),
        "{err}"
    );
    let err = d
        .set_event_on_multiple_fence_completion(
            &[&a],
            &[1, 2],
            MultipleFenceWaitFlags::ALL,
            Some(&e),
        )
        .unwrap_err();
    assert!(err.to_string().contains("1 fences but 2 values"), "{err}");
    let err = multi(&d, &[&a], &[1], 2).unwrap_err();
    assert!(
        matches!(err, Error::InvalidArg(_)) && err.to_string().contains("0x2"),
        "{err}"
    );
    assert_eq!(err.hresult(), 0x8007_0057);
    let other = device().create_fence(&FenceDesc::new(0)).unwrap();
    let err = multi(&d, &[&a, &other], &[1, 1], 0).unwrap_err();
    assert!(err.to_string().contains("another device"), "{err}");
}

#[test]
fn f3_cpu_rewind_then_later_signal_lands_last() {
    // The GPU-queue half of F3 is tested with the engine; here: a later signal always wins.
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    f.signal(5).unwrap();
    f.signal(1).unwrap();
    assert_eq!(f.completed_value(), 1);
    f.signal(2).unwrap();
    assert_eq!(f.completed_value(), 2);
}

#[test]
fn f9_signals_and_registrations_from_many_threads() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let mut ts = Vec::new();
    for i in 0..4u64 {
        let f = f.clone();
        ts.push(thread::spawn(move || {
            for v in 0..2000u64 {
                let e = Event::new();
                f.set_event_on_completion(v * 4 + i, Some(&e)).unwrap();
                f.signal(v * 4 + i).unwrap();
                assert!(e.wait(T), "lost wakeup at {}", v * 4 + i);
            }
        }));
    }
    for t in ts {
        t.join().unwrap();
    }
}

#[test]
fn f10_blocked_waits_and_futures_return_device_removed() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let g = d.create_fence(&FenceDesc::new(0)).unwrap();
    let mut ts = Vec::new();
    for _ in 0..3 {
        let f = f.clone();
        ts.push(thread::spawn(move || f.wait(10, T)));
    }
    let (f2, g2) = (f.clone(), g.clone());
    let d2 = d.clone();
    let multi = thread::spawn(move || {
        d2.wait_multiple(&[&f2, &g2], &[1, 1], MultipleFenceWaitFlags::ALL, T)
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let fut = f.wait_async(10);
    let e = Event::new();
    f.set_event_on_completion(10, Some(&e)).unwrap();
    let f3 = f.clone();
    let null_event = thread::spawn(move || f3.set_event_on_completion(10, None));
    thread::sleep(Duration::from_millis(30));
    d.remove();
    for t in ts {
        let r = t.join().unwrap();
        assert!(
            matches!(
                r,
                Err(Error::DeviceRemoved {
                    reason: RemovalReason::Requested,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    assert!(multi.join().unwrap().unwrap_err().is_device_removed());
    let r = rt.block_on(async { tokio::time::timeout(T, fut).await.unwrap() });
    assert!(r.unwrap_err().is_device_removed());
    assert!(e.wait(T), "events fire on removal");
    null_event
        .join()
        .unwrap()
        .expect("set_event_on_completion(None) returns Ok after removal");
}

#[test]
fn f10_waits_begun_after_removal_fail_at_once() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    d.remove();
    let start = Instant::now();
    assert!(f.wait(1, T).unwrap_err().is_device_removed());
    assert!(f.wait(u64::MAX, T).unwrap_err().is_device_removed());
    assert!(f.signal(3).unwrap_err().is_device_removed());
    assert_eq!(f.signal(3).unwrap_err().hresult(), 0x887A_0005);
    f.set_event_on_completion(99, None).unwrap();
    let e = Event::new();
    f.set_event_on_completion(99, Some(&e)).unwrap();
    assert!(e.try_wait());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(rt
        .block_on(f.wait_async(5))
        .unwrap_err()
        .is_device_removed());
    assert!(start.elapsed() < Duration::from_secs(2));
    // A fence created after removal reads u64::MAX too.
    assert_eq!(
        d.create_fence(&FenceDesc::new(0))
            .map(|f| f.completed_value())
            .unwrap_or(u64::MAX),
        u64::MAX
    );
}

#[test]
fn e4_remove_reports_requested_and_is_idempotent() {
    let d = device();
    assert_eq!(d.removed_reason(), None);
    d.remove();
    d.remove();
    assert_eq!(d.removed_reason(), Some(RemovalReason::Requested));
    assert_eq!(RemovalReason::Requested.hresult(), 0x887A_0005);
    assert_eq!(RemovalReason::Hung.hresult(), 0x887A_0006);
    assert_eq!(RemovalReason::PageFault.hresult(), 0x887A_0006);
}

#[test]
fn f10_other_device_keeps_working() {
    let a = device();
    let b = device();
    let fa = a.create_fence(&FenceDesc::new(0)).unwrap();
    let fb = b.create_fence(&FenceDesc::new(0)).unwrap();
    a.remove();
    assert_eq!(fa.completed_value(), u64::MAX);
    fb.signal(4).unwrap();
    fb.wait(4, Duration::ZERO).unwrap();
    assert_eq!(b.removed_reason(), None);
}

/// E2: a timeout carries what it waited for and what it saw, as values, beside its message: a
/// fence wait, a wait on several fences and a memory wait on the threaded driver (real time:
/// `after` is the timeout) and the deterministic one (virtual time: `after` is `None`, and the
/// message does not claim that time passed), and a queue's wait_idle on the threaded driver.
#[test]
fn e2_a_timeout_says_what_it_waited_for_and_what_it_saw() {
    use pipefence::{
        BufferDesc, Comparison, FenceDesc, Heap, QueueDesc, QueueKind, ValueCondition, Waited,
        Width,
    };
    for desc in [
        DeviceDesc::default(),
        pipefence::explore::deterministic_desc(&DeviceDesc::default(), 0),
    ] {
        let virtual_time = !matches!(desc.driver, pipefence::Driver::Threaded);
        let d = Device::new(desc).unwrap();
        let after = (!virtual_time).then_some(SHORT);
        let f = d.create_fence(&FenceDesc::new(2).named("frame")).unwrap();
        let g = d.create_fence(&FenceDesc::new(0).named("other")).unwrap();
        let e = f.wait(5, SHORT).unwrap_err();
        let t = e.wait_timeout().expect("a timeout");
        assert_eq!(
            t.waited,
            Waited::Fence {
                fence: "frame".into(),
                value: 5,
                completed: 2
            }
        );
        assert_eq!(t.after, after);
        assert_eq!(e.to_string(), format!("timed out: {}", t.message()));
        assert_eq!(t.message().contains("after"), !virtual_time, "{e}");

        let e = d
            .wait_multiple(&[&f, &g], &[5, 1], MultipleFenceWaitFlags::ANY, SHORT)
            .unwrap_err();
        let t = e.wait_timeout().expect("a timeout");
        assert_eq!(
            t.waited,
            Waited::Fences {
                fences: vec![("frame".into(), 5, 2), ("other".into(), 1, 0)],
                any: true
            }
        );
        assert_eq!(t.after, after);

        let b = d
            .create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))
            .unwrap();
        b.write_u32(8, 3).unwrap();
        let e = b
            .wait_u32(8, Comparison::Equal, 4, u32::MAX, SHORT)
            .unwrap_err();
        let t = e.wait_timeout().expect("a timeout");
        assert_eq!(
            t.waited,
            Waited::Memory {
                buffer: "flags".into(),
                offset: 8,
                condition: ValueCondition {
                    width: Width::W32,
                    cmp: Comparison::Equal,
                    reference: 4,
                    mask: u64::from(u32::MAX),
                },
                value: 3
            }
        );
        assert_eq!(t.after, after);

        let q = d
            .create_queue(&QueueDesc::new(QueueKind::Compute, "q"))
            .unwrap();
        q.wait(&g, 1).unwrap();
        let e = q.wait_idle(SHORT).unwrap_err();
        if virtual_time {
            // Nothing can run while the queue has work: a hang at once (D6), not a timeout.
            assert!(e.is_device_removed(), "{e}");
            continue;
        }
        let t = e.wait_timeout().expect("a timeout");
        assert_eq!(
            t.waited,
            Waited::QueueIdle {
                queue: "q".into(),
                completed: 0,
                submitted: 1
            }
        );
        assert_eq!(t.after, after);
        assert!(Error::InvalidArg(Box::new(pipefence::Misuse::new(
            pipefence::Object::Device,
            None,
            ""
        )))
        .wait_timeout()
        .is_none());
        g.signal(1).unwrap();
        q.wait_idle(T).unwrap();
    }
}

/// A deterministic device (the creating thread is a host of its schedule).
fn deterministic(seed: u64) -> Device {
    Device::new(DeviceDesc {
        driver: pipefence::Driver::Deterministic {
            seed,
            strategy: pipefence::Strategy::Random,
        },
        ..DeviceDesc::default()
    })
    .unwrap()
}

#[test]
fn f7_timed_null_event_wait_reaches_and_times_out() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0).named("frame")).unwrap();
    let e = f.block_on_completion(1, Duration::ZERO).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(e.to_string().contains("fence `frame`: wait for 1"), "{e}");
    let e = f.block_on_completion(1, SHORT).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let f2 = f.clone();
    let t = thread::spawn(move || f2.signal(2));
    f.block_on_completion(2, T).unwrap();
    t.join().unwrap().unwrap();
    // Already reached: at once, even with a zero timeout.
    f.block_on_completion(1, Duration::ZERO).unwrap();
}

#[test]
fn f10_timed_null_event_wait_returns_ok_after_removal() {
    // Removal during the wait (another thread removes the device) and before it.
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let d2 = d.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        d2.remove();
    });
    f.block_on_completion(5, T).unwrap();
    t.join().unwrap();
    f.block_on_completion(6, T).unwrap();
    f.block_on_completion(6, Duration::ZERO).unwrap();
    // `wait` differs: removal is an error.
    assert!(f.wait(6, T).unwrap_err().is_device_removed());
}

#[test]
fn f10_timed_null_event_waits_on_the_deterministic_driver() {
    for seed in 0..4 {
        // Nothing will signal the fence and nothing can run: a timeout (D6), not Ok.
        let d = deterministic(seed);
        let f = d.create_fence(&FenceDesc::new(0).named("never")).unwrap();
        let e = f.block_on_completion(1, T).unwrap_err();
        assert!(e.is_timeout(), "seed {seed}: {e}");
        assert!(
            e.to_string().contains("nothing can run"),
            "seed {seed}: {e}"
        );
        let e = d
            .block_on_multiple_fence_completion(&[&f], &[1], MultipleFenceWaitFlags::ALL, T)
            .unwrap_err();
        assert!(e.is_timeout(), "seed {seed}: {e}");
        // Reached by a queue signal.
        let q = d
            .create_queue(&pipefence::QueueDesc::new(
                pipefence::QueueKind::Compute,
                "q",
            ))
            .unwrap();
        q.signal(&f, 3).unwrap();
        f.block_on_completion(3, T).unwrap();
        d.block_on_multiple_fence_completion(&[&f], &[3], MultipleFenceWaitFlags::ANY, T)
            .unwrap();
        // After removal: Ok, where `wait` and `wait_multiple` fail.
        d.remove();
        f.block_on_completion(9, T).unwrap();
        d.block_on_multiple_fence_completion(&[&f], &[9], MultipleFenceWaitFlags::ALL, T)
            .unwrap();
        assert!(f.wait(9, T).unwrap_err().is_device_removed());
        assert!(d
            .wait_multiple(&[&f], &[9], MultipleFenceWaitFlags::ALL, T)
            .unwrap_err()
            .is_device_removed());
    }
}

#[test]
fn f8_timed_null_event_multi_wait_reaches_and_times_out() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0).named("a")).unwrap();
    let b = d.create_fence(&FenceDesc::new(0).named("b")).unwrap();
    let all = MultipleFenceWaitFlags::ALL;
    let any = MultipleFenceWaitFlags::ANY;
    let e = d
        .block_on_multiple_fence_completion(&[&a, &b], &[1, 1], any, Duration::ZERO)
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(
        e.to_string().contains(
            "block_on_multiple_fence_completion (any): fence `a` >= 1 (completed value 0), \
             fence `b` >= 1 (completed value 0)"
        ),
        "{e}"
    );
    a.signal(1).unwrap();
    d.block_on_multiple_fence_completion(&[&a, &b], &[1, 1], any, Duration::ZERO)
        .unwrap();
    let e = d
        .block_on_multiple_fence_completion(&[&a, &b], &[1, 1], all, SHORT)
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let b2 = b.clone();
    let t = thread::spawn(move || b2.signal(1));
    d.block_on_multiple_fence_completion(&[&a, &b], &[1, 1], all, T)
        .unwrap();
    t.join().unwrap().unwrap();
    // The argument errors are those of the event form.
    assert!(matches!(
        d.block_on_multiple_fence_completion(&[&a], &[1, 2], all, T),
        Err(Error::InvalidArg(_))
    ));
}

#[test]
fn f8_timed_null_event_multi_wait_returns_ok_after_removal() {
    let d = device();
    let a = d.create_fence(&FenceDesc::new(0)).unwrap();
    let b = d.create_fence(&FenceDesc::new(0)).unwrap();
    let all = MultipleFenceWaitFlags::ALL;
    let d2 = d.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        d2.remove();
    });
    d.block_on_multiple_fence_completion(&[&a, &b], &[1, 2], all, T)
        .unwrap();
    t.join().unwrap();
    d.block_on_multiple_fence_completion(&[&a, &b], &[3, 4], all, Duration::ZERO)
        .unwrap();
    assert!(d
        .wait_multiple(&[&a, &b], &[3, 4], all, T)
        .unwrap_err()
        .is_device_removed());
}

#[test]
fn f8_multi_fence_calls_take_slices_of_fences_or_of_references() {
    let d = device();
    let owned: Vec<Fence> = (0..3)
        .map(|i| d.create_fence(&FenceDesc::new(i)).unwrap())
        .collect();
    let all = MultipleFenceWaitFlags::ALL;
    // &[Fence], &Vec<Fence>, an array of Fence, &Vec<&Fence>, &[&Fence].
    d.wait_multiple(&owned[..], &[0, 1, 2], all, T).unwrap();
    d.wait_multiple(&owned, &[0, 1, 2], all, T).unwrap();
    let array = [owned[0].clone(), owned[1].clone()];
    d.wait_multiple(&array, &[0, 1], all, T).unwrap();
    let refs: Vec<&Fence> = owned.iter().collect();
    d.wait_multiple(&refs, &[0, 1, 2], all, T).unwrap();
    d.wait_multiple(&refs[..], &[0, 1, 2], all, T).unwrap();
    let e = Event::new();
    d.set_event_on_multiple_fence_completion(&owned, &[0, 1, 3], all, Some(&e))
        .unwrap();
    assert!(!e.try_wait());
    owned[2].signal(3).unwrap();
    assert!(e.wait(T));
    d.set_event_on_multiple_fence_completion(&refs, &[0, 1, 3], all, None)
        .unwrap();
    d.block_on_multiple_fence_completion(&owned, &[0, 1, 3], all, Duration::ZERO)
        .unwrap();
    // Three fences, two values.
    let err = d.wait_multiple(&owned, &[0, 1], all, T).unwrap_err();
    assert!(err.to_string().contains("3 fences but 2 values"), "{err}");
}

#[test]
fn f1_fence_device_is_its_device_while_a_device_handle_lives() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let got = f.device().expect("the device is alive");
    // The same device: a fence of `got` is accepted by `d`'s multi-fence wait.
    let g = got.create_fence(&FenceDesc::new(1)).unwrap();
    d.wait_multiple(&[&f, &g], &[0, 1], MultipleFenceWaitFlags::ALL, T)
        .unwrap();
    drop(got);
    drop(g);
    // A fence does not keep its device: once every Device handle is gone it has none.
    drop(d);
    assert!(f.device().is_none());
    assert_eq!(f.completed_value(), 0);
}
