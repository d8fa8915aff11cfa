//! Revision 4 of the contract (`docs/semantics.md`): queue waits are tickets (F5, Q3), no lost
//! wake-up in parked queue waits (F9), fence release (F11), lifetimes (Q8), one event
//! registered twice for one value (F6). Each rule on the threaded driver and, where the test
//! allows, on every explored schedule of the deterministic driver.

use pipefence::explore::explore;
use pipefence::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn device() -> Device {
    Device::new(DeviceDesc::default()).unwrap()
}

fn compute(d: &Device, name: &str) -> Queue {
    d.create_queue(&QueueDesc::new(QueueKind::Compute, name))
        .unwrap()
}

/// Fences named `names`, each at 0.
fn fences<const N: usize>(d: &Device, names: [&str; N]) -> [Fence; N] {
    names.map(|n| d.create_fence(&FenceDesc::new(0).named(n)).unwrap())
}

/// A closed compute list of one `spin` dispatch of `ns` (real work that keeps a queue busy).
fn spin_list(d: &Device, ns: u64) -> CommandList {
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "spin"))
        .unwrap();
    l.dispatch(&Kernel::spin(ns), 1);
    l.close().unwrap();
    l
}

/// The reproduction of the lost wake-up: a queue parked on `wait(f, 1)`, whose fence is
/// raised and lowered again before its engine re-checks, must not park for good. With tickets
/// the pulse itself satisfies the wait.
#[test]
fn f9_parked_queue_wait_survives_raise_and_lower() {
    let d = device();
    let q = compute(&d, "q");
    let [f, done] = fences(&d, ["f", "done"]);
    q.wait(&f, 1).unwrap();
    q.signal(&done, 1).unwrap();
    // The sleeps only make it likely that the engine is parked when the pulse comes.
    std::thread::sleep(Duration::from_millis(5));
    f.signal(1).unwrap();
    f.signal(0).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    f.signal(1).unwrap();
    done.wait(1, T).unwrap();
    assert_eq!(done.completed_value(), 1);
    assert_eq!(d.removed_reason(), None);
}

/// F5: a pulse (raise then lower at once) while the queue is parked on the wait satisfies it,
/// every time: 100 pulses, 100 waits satisfied, none missed.
#[test]
fn f5_queue_wait_ticket_satisfied_by_pulse_while_parked() {
    let d = device();
    let q = compute(&d, "q");
    let [f, progress] = fences(&d, ["f", "progress"]);
    for i in 1..=100u64 {
        q.wait(&f, 1).unwrap();
        q.signal(&progress, i).unwrap();
        f.signal(1).unwrap();
        f.signal(0).unwrap();
        progress.wait(i, T).unwrap();
    }
    assert_eq!(progress.completed_value(), 100);
}

/// F5, Q3: a wait queued behind another wait and behind a long list is satisfied by a signal
/// made while it is still queued, even though the value is lowered before the queue gets
/// there.
#[test]
fn f5_queue_wait_ticket_satisfied_while_queued_behind_wait_and_list() {
    let d = device();
    let q = compute(&d, "q");
    let [gate, f, done] = fences(&d, ["gate", "f", "done"]);
    let long = spin_list(&d, 20_000_000);
    q.wait(&gate, 1).unwrap();
    q.execute_command_lists(&[&long]).unwrap();
    q.wait(&f, 5).unwrap();
    q.signal(&done, 1).unwrap();
    // The wait on f is queued behind the gate: pulse f past 5 and back.
    f.signal(7).unwrap();
    f.signal(0).unwrap();
    gate.signal(1).unwrap();
    done.wait(1, T).unwrap();
    assert_eq!(f.completed_value(), 0);
}

/// F5: a crossing before `Queue::wait` is called does not satisfy it (the ticket starts at the
/// call); the value at the call counts.
#[test]
fn f5_ticket_starts_at_the_call() {
    let d = device();
    let q = compute(&d, "q");
    let [f, done] = fences(&d, ["f", "done"]);
    f.signal(1).unwrap();
    f.signal(0).unwrap();
    q.wait(&f, 1).unwrap();
    q.signal(&done, 1).unwrap();
    assert!(matches!(
        done.wait(1, Duration::from_millis(50)),
        Err(Error::Timeout(_))
    ));
    f.signal(1).unwrap();
    done.wait(1, T).unwrap();
}

/// F5 on the deterministic driver: the ticket is satisfied by the signal action itself, so on
/// every schedule a pulse satisfies a wait queued behind another wait.
#[test]
fn f5_queue_wait_ticket_explore() {
    let runs = explore(&DeviceDesc::default(), 0..60, |d| -> Result<u64> {
        let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let alt = d.create_fence(&FenceDesc::new(0).named("alt"))?;
        let progress = d.create_fence(&FenceDesc::new(0).named("progress"))?;
        q.wait(&alt, 1)?;
        q.wait(&f, 1)?;
        q.wait(&f, 2)?;
        q.signal(&progress, 1)?;
        f.signal(1)?;
        f.signal(0)?;
        f.signal(2)?;
        f.signal(0)?;
        alt.signal(1)?;
        progress.wait(1, T)?;
        Ok(f.completed_value())
    })
    .unwrap();
    for r in &runs {
        assert!(r.removal.is_none(), "seed {}: {:?}", r.seed, r.removal);
        assert_eq!(*r.value.as_ref().unwrap(), 0, "seed {}", r.seed);
    }
}

/// Q3, D7: a queue whose next wait has a satisfied ticket is not stuck; the hang report names
/// only the queue that really waits (here on the host), whatever the schedule.
#[test]
fn q3_satisfied_ticket_is_not_reported_hung() {
    let runs = explore(&DeviceDesc::default(), 0..30, |d| -> Result<()> {
        let q1 = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q1"))?;
        let q2 = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q2"))?;
        let never = d.create_fence(&FenceDesc::new(0).named("never"))?;
        let pulsed = d.create_fence(&FenceDesc::new(0).named("pulsed"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        q1.wait(&never, 1)?;
        q2.wait(&pulsed, 1)?;
        q2.signal(&done, 1)?;
        pulsed.signal(1)?;
        pulsed.signal(0)?;
        // Keep the host blocked on something only q1 could release.
        let _ = d.wait_idle(T);
        Ok(())
    })
    .unwrap();
    for r in &runs {
        let rep = r.removal.as_ref().expect("q1 hangs");
        let names: Vec<&str> = rep.queues.iter().map(|q| q.queue.as_str()).collect();
        assert_eq!(names, ["q1"], "seed {}: {rep}", r.seed);
        assert_eq!(
            rep.queues[0].waiting_for.as_deref(),
            Some("fence never >= 1")
        );
    }
}

/// D5 with F5: a queue wait acquires the release of the signal that satisfied its ticket, not
/// of a later signal that overwrote the fence. The producer's dispatch writes `data`, then it
/// signals `f = 1`. A host thread that learns of it only by polling `completed_value` (which
/// acquires nothing) then signals `f = 2` and opens a gate. The consumer's wait on `f` was made
/// first, behind the gate, so the producer's signal satisfied its ticket: reading `data` after
/// it is ordered, and no hazard is reported, on any schedule. (Acquiring the last signal, the
/// host's, would report a race on `data`.)
#[test]
fn d5_queue_wait_acquires_the_signal_that_satisfied_its_ticket() {
    let base = DeviceDesc {
        memory_model: MemoryModel::Validate,
        ..DeviceDesc::default()
    };
    let polled = std::sync::atomic::AtomicU32::new(0);
    let runs = explore(&base, 0..60, |d| -> Result<Vec<Hazard>> {
        let data = d.create_buffer(&BufferDesc::new(4096, Heap::DeviceLocal).named("data"))?;
        let out = d.create_buffer(&BufferDesc::new(256, Heap::Readback).named("out"))?;
        let prod = d.create_queue(&QueueDesc::new(QueueKind::Compute, "producer"))?;
        let cons = d.create_queue(&QueueDesc::new(QueueKind::Compute, "consumer"))?;
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let gate = d.create_fence(&FenceDesc::new(0).named("gate"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        let mut write =
            d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "write"))?;
        write.dispatch(&Kernel::fill(data.gpu_address(), 7), 1);
        write.close()?;
        let mut read = d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "read"))?;
        read.copy_buffer_region(out.gpu_address(), data.gpu_address(), 256);
        read.close()?;
        cons.wait(&gate, 1)?;
        cons.wait(&f, 1)?;
        cons.execute_command_lists(&[&read])?;
        cons.signal(&done, 1)?;
        prod.execute_command_lists(&[&write])?;
        prod.signal(&f, 1)?;
        // Poll (a bounded number of times: a schedule may starve the producer meanwhile).
        let mut seen = false;
        for _ in 0..200 {
            if f.completed_value() >= 1 {
                seen = true;
                break;
            }
            pipefence::host::sleep(d, Duration::from_micros(100));
        }
        if !seen {
            f.wait(1, T)?; // acquires: this schedule checks nothing about tickets
        }
        polled.fetch_add(u32::from(seen), std::sync::atomic::Ordering::Relaxed);
        f.signal(2)?;
        gate.signal(1)?;
        done.wait(1, T)?;
        assert_eq!(out.read_u32(0)?, 7);
        Ok(d.hazards())
    })
    .unwrap();
    for r in &runs {
        assert!(r.removal.is_none(), "seed {}: {:?}", r.seed, r.removal);
        let h = r.value.as_ref().unwrap();
        assert!(h.is_empty(), "seed {}: {h:?}", r.seed);
    }
    let polled = polled.into_inner();
    assert!(polled >= 10, "only {polled} schedules polled the signal");
}

/// F6: one event registered twice for one value is set once (one wait consumes it).
#[test]
fn f6_event_registered_twice_for_one_value_sets_once() {
    let d = device();
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let e = Event::new();
    f.set_event_on_completion(3, Some(&e)).unwrap();
    f.set_event_on_completion(3, Some(&e)).unwrap();
    let waiter = {
        let e = e.clone();
        std::thread::spawn(move || {
            let first = e.wait(T);
            // Auto-reset: a second set (from a duplicate registration) would be seen here.
            let second = e.wait(Duration::from_millis(100));
            (first, second)
        })
    };
    f.signal(5).unwrap();
    let (first, second) = waiter.join().unwrap();
    assert!(first);
    assert!(!second, "the event was set twice");
    // Different values are different registrations: each crossing sets it.
    f.signal(0).unwrap();
    f.set_event_on_completion(1, Some(&e)).unwrap();
    f.set_event_on_completion(2, Some(&e)).unwrap();
    f.signal(1).unwrap();
    assert!(e.wait(T));
    f.signal(2).unwrap();
    assert!(e.wait(T));
}

/// F11: dropping the last handle releases every waiter as if the fence reached `u64::MAX`:
/// events fire, futures return Ok, queue waits are satisfied; pending queue signals to it are
/// discarded; the device is not removed.
#[test]
fn f11_releasing_a_fence_releases_its_waiters() {
    let d = device();
    let busy = compute(&d, "busy");
    let waiting = compute(&d, "waiting");
    let [f, drain, gate] = fences(&d, ["f", "drain", "gate"]);
    // A queue signal to f still pending when f is released: discarded when it retires.
    busy.wait(&gate, 1).unwrap();
    busy.signal(&f, 5).unwrap();
    // A queue wait on f that nothing would satisfy.
    waiting.wait(&f, u64::MAX).unwrap();
    waiting.signal(&drain, 1).unwrap();
    let e = Event::new();
    f.set_event_on_completion(u64::MAX, Some(&e)).unwrap();
    let fut = f.wait_async(u64::MAX);
    let clone = f.clone();
    drop(f);
    assert!(!e.is_set(), "a clone is still a handle");
    drop(clone);
    assert!(e.wait(T), "the event fires on release");
    drain.wait(1, T).unwrap();
    assert!(block_on(fut).is_ok());
    gate.signal(1).unwrap();
    busy.wait_idle(T).unwrap();
    assert_eq!(d.removed_reason(), None);
}

/// F11 on the deterministic driver: a queue parked on a fence the application drops goes on.
#[test]
fn f11_release_satisfies_queue_wait_explore() {
    let runs = explore(&DeviceDesc::default(), 0..30, |d| -> Result<u64> {
        let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        q.wait(&f, 1)?;
        q.signal(&f, 9)?; // discarded: f is released before it retires
        q.signal(&done, 1)?;
        drop(f);
        done.wait(1, T)?;
        Ok(done.completed_value())
    })
    .unwrap();
    for r in &runs {
        assert!(r.removal.is_none(), "seed {}", r.seed);
        assert_eq!(*r.value.as_ref().unwrap(), 1);
    }
}

/// Q8: dropping the `Queue` and `Device` handles does not discard submitted work: a later CPU
/// signal lets it land.
#[test]
fn q8_dropping_queue_and_device_keeps_submitted_work() {
    let d = device();
    let q = compute(&d, "q");
    let [f, done] = fences(&d, ["f", "done"]);
    q.wait(&f, 1).unwrap();
    q.signal(&done, 1).unwrap();
    drop(q);
    drop(d);
    std::thread::sleep(Duration::from_millis(10));
    f.signal(1).unwrap();
    done.wait(1, T).unwrap();
}

/// Q8: submitted work keeps the buffers it uses alive: a buffer dropped while a dispatch that
/// writes it is still queued stays mapped until that work completed (no page fault).
#[test]
fn q8_submitted_work_keeps_its_buffers_alive() {
    let d = device();
    let q = compute(&d, "q");
    let [f, done] = fences(&d, ["f", "done"]);
    let buf = d
        .create_buffer(&BufferDesc::new(4096, Heap::DeviceLocal))
        .unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "fill"))
        .unwrap();
    l.dispatch(&Kernel::fill(buf.gpu_address(), 1), 16);
    l.close().unwrap();
    q.wait(&f, 1).unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    let address = buf.gpu_address();
    drop(buf);
    drop(l);
    f.signal(1).unwrap();
    done.wait(1, T).unwrap();
    q.wait_idle(T).unwrap();
    assert_eq!(d.removed_reason(), None);
    // Work submitted after the drop faults, as before (M3).
    let mut late = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "late"))
        .unwrap();
    late.dispatch(&Kernel::fill(address, 1), 1);
    late.close().unwrap();
    q.execute_command_lists(&[&late]).unwrap();
    let _ = q.wait_idle(T);
    assert_eq!(d.removed_reason(), Some(RemovalReason::PageFault));
}

/// Q8 on the deterministic driver: dropping a `Queue` handle keeps its work.
#[test]
fn q8_dropping_a_queue_keeps_its_work_explore() {
    let runs = explore(&DeviceDesc::default(), 0..30, |d| -> Result<u64> {
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        {
            let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
            q.wait(&f, 1)?;
            q.signal(&done, 1)?;
        }
        f.signal(1)?;
        done.wait(1, T)?;
        Ok(done.completed_value())
    })
    .unwrap();
    for r in &runs {
        assert!(r.removal.is_none(), "seed {}", r.seed);
        assert_eq!(*r.value.as_ref().unwrap(), 1);
    }
}

/// A minimal executor: polls `fut` on this thread, parking between wake-ups (bounded by the
/// future's own completion; the test's fence is released before this is called).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let deadline = std::time::Instant::now() + T;
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "future never completed"
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }
}
