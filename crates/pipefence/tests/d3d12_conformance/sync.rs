//! The fence and queue tests of d3d12_sync.c: queue waits, graphics/compute synchronization, fence values, CPU and GPU signals, multithreaded waits.

use super::*;

// ---------------------------------------------------------------------------------------------
// test_queue_wait

const GREEN: u32 = 0xff00_ff00;
const BLUE: u32 = 0xffff_0000;

fn queue_wait_body(d: &Device) {
    // No counterpart: render target, pixel shader, root signature, texture copy and resource
    // barriers. The draw that writes the colour held in a constant buffer becomes a list that
    // copies the colour from an upload buffer (read when the list runs, like the constant
    // buffer) into a readback buffer.
    let q = queue(d, QueueKind::Direct, "queue");
    let q2 = queue(d, QueueKind::Direct, "queue2");
    let event = Event::new();
    let f = fence(d, "fence", 1);
    let f2 = fence(d, "fence2", 0);
    let cb = buffer(d, "cb", 4, Heap::Upload);
    let rb = buffer(d, "readback", 4, Heap::Readback);
    let draw = list(d, QueueKind::Direct, "draw", |l| {
        l.copy_buffer_region(rb.address(0), cb.address(0), 4);
    });
    let colour = || rb.read_u32(0).unwrap();

    // A wait for a value the fence already holds does not hold anything back.
    cb.write_u32(0, GREEN).unwrap();
    q.wait(&f, 1).unwrap();
    execute(&q, &draw);
    q.wait_idle(T).unwrap();
    assert_eq!(colour(), GREEN);

    // A wait queued before the CPU signal holds back the list and the signal behind it.
    cb.write_u32(0, BLUE).unwrap();
    q.wait(&f, 2).unwrap();
    execute(&q, &draw);
    q.signal(&f2, 1).unwrap();
    f2.set_event_on_completion(1, Some(&event)).unwrap();
    assert!(!event.try_wait(), "the queue went past a wait for 2 at 1");
    assert_eq!(
        colour(),
        GREEN,
        "the list ran before its wait was satisfied"
    );
    assert_eq!(f2.completed_value(), 0);
    f.signal(2).unwrap();
    assert!(
        wait_event(d, &event),
        "the CPU signal did not release the queue"
    );
    assert!(!event.try_wait(), "the event was set twice");
    assert_eq!(colour(), BLUE);
    assert_eq!(f2.completed_value(), 1);

    // The same, released by another queue's signal.
    cb.write_u32(0, GREEN).unwrap();
    q.wait(&f, 3).unwrap();
    execute(&q, &draw);
    q.signal(&f2, 2).unwrap();
    f2.set_event_on_completion(2, Some(&event)).unwrap();
    assert!(!event.try_wait(), "the queue went past a wait for 3 at 2");
    assert_eq!(colour(), BLUE);
    assert_eq!(f2.completed_value(), 1);
    q2.signal(&f, 3).unwrap();
    assert!(
        wait_event(d, &event),
        "queue2's signal did not release the queue"
    );
    assert!(!event.try_wait(), "the event was set twice");
    assert_eq!(colour(), GREEN);
    assert_eq!(f2.completed_value(), 2);

    // Data written by the CPU after an insufficient signal but before the satisfying one is
    // what the list sees.
    q.wait(&f, 5).unwrap();
    execute(&q, &draw);
    f.signal(4).unwrap();
    cb.write_u32(0, BLUE).unwrap();
    f.signal(5).unwrap();
    q.wait_idle(T).unwrap();
    assert_eq!(colour(), BLUE);

    f.signal(6).unwrap();
    cb.write_u32(0, GREEN).unwrap();
    execute(&q, &draw);
    q.wait_idle(T).unwrap();
    assert_eq!(colour(), GREEN);

    // Signal, then wait for the same value, on one queue.
    cb.write_u32(0, BLUE).unwrap();
    q.signal(&f, 7).unwrap();
    q.wait(&f, 7).unwrap();
    execute(&q, &draw);
    q.wait_idle(T).unwrap();
    assert_eq!(colour(), BLUE);
    assert_eq!(f.completed_value(), 7);
}

#[test]
fn queue_wait() {
    // C: test_queue_wait. Rules: Q3 (a queue wait holds back what follows, queued before its
    // signal too), F5 (satisfied by >=, at once if already reached), Q4, Q6, F6, Q5, F4.
    queue_wait_body(&device());
}

#[test]
fn queue_wait_explore() {
    // C: test_queue_wait, under deterministic schedules. Rules: as `queue_wait`.
    explore_seeds(50, queue_wait_body);
}

// ---------------------------------------------------------------------------------------------
// test_graphics_compute_queue_synchronization

/// One group that stores `expected + add` at `addr` if it holds `expected` (the C shaders'
/// `InterlockedCompareStore`; with a single group a plain read and write is enough).
fn compare_store(addr: u64, expected: u32, add: u32) -> Kernel {
    Kernel::User(UserKernel::new("compare-store", move |ctx| {
        if ctx.read_u32(addr) == expected {
            ctx.write_u32(addr, expected + add);
        }
    }))
}

fn graphics_compute_body(d: &Device) {
    // No counterpart: root signatures, pipeline states, descriptor heaps, UAV descriptors and
    // command allocators. The pixel shader's compare-store runs as a dispatch on the direct
    // queue, the UAV clear is a fill, the UAV barrier a flush_pipeline.
    let direct = queue(d, QueueKind::Direct, "queue");
    let compute = queue(d, QueueKind::Compute, "compute_queue");
    let f = fence(d, "fence", 0);
    let f2 = fence(d, "fence2", 0);
    let buf = buffer(d, "buffer", 1024, Heap::DeviceLocal);
    let addr = buf.address(0);
    let c0 = list(d, QueueKind::Compute, "compute0", |l| {
        l.dispatch(&Kernel::fill(addr, 0), 1)
            .flush_pipeline(Flush::NONE)
            .dispatch(&compare_store(addr, 0, 10), 1);
    });
    let g0 = list(d, QueueKind::Direct, "graphics0", |l| {
        l.dispatch(&compare_store(addr, 10, 2), 1);
    });
    let c1 = list(d, QueueKind::Compute, "compute1", |l| {
        l.dispatch(&compare_store(addr, 12, 10), 1);
    });
    let g1 = list(d, QueueKind::Direct, "graphics1", |l| {
        l.dispatch(&compare_store(addr, 22, 2), 1);
    });

    execute(&compute, &c0);
    compute.signal(&f, 1).unwrap();
    direct.wait(&f, 1).unwrap();
    execute(&direct, &g0);
    direct.signal(&f2, 1).unwrap();
    compute.wait(&f2, 1).unwrap();
    execute(&compute, &c1);
    compute.signal(&f, 2).unwrap();
    direct.wait(&f, 2).unwrap();
    execute(&direct, &g1);

    f2.wait(1, T).unwrap();
    // The readback runs on the direct queue, behind graphics1.
    let rb = buffer(d, "readback", 4, Heap::Readback);
    let read = list(d, QueueKind::Direct, "readback", |l| {
        l.copy_buffer_region(rb.address(0), addr, 4);
    });
    execute(&direct, &read);
    direct.wait_idle(T).unwrap();
    assert_eq!(
        rb.read_u32(0).unwrap(),
        24,
        "the four lists did not run strictly in turn"
    );
}

#[test]
fn graphics_compute_queue_synchronization() {
    // C: test_graphics_compute_queue_synchronization. Rules: Q3, Q4 (a signal releases the
    // work before it, writes included), Q6 (two queues handing work back and forth), F5.
    graphics_compute_body(&device());
}

#[test]
fn graphics_compute_queue_synchronization_explore() {
    // C: test_graphics_compute_queue_synchronization, deterministic. Rules: as above.
    explore_seeds(50, graphics_compute_body);
}

// ---------------------------------------------------------------------------------------------
// test_fence_values

fn fence_values_body(d: &Device) {
    // No counterpart: the device reference count the C test checks on release.
    let q = queue(d, QueueKind::Direct, "queue");
    let mut next = 1u64 << 60;
    let f = fence(d, "fence", next);
    assert_eq!(f.completed_value(), next);
    // Scaled down from 100 rounds each.
    for _ in 0..32 {
        next += 1;
        q.signal(&f, next).unwrap();
        q.wait_idle(T).unwrap();
        assert_eq!(f.completed_value(), next);
    }
    for _ in 0..32 {
        next += 10_000;
        f.signal(next).unwrap();
        assert_eq!(f.completed_value(), next);
    }

    // A CPU signal may lower the value.
    let f = fence(d, "fence_cpu", 0);
    f.signal(1 << 60).unwrap();
    assert_eq!(f.completed_value(), 1 << 60);
    f.signal(0).unwrap();
    assert_eq!(f.completed_value(), 0);

    // So may a queue signal (the C test waits for idle with and without an event).
    let f = fence(d, "fence_gpu", 0);
    q.signal(&f, 1 << 60).unwrap();
    q.wait_idle(T).unwrap();
    assert_eq!(f.completed_value(), 1 << 60);
    q.signal(&f, 0).unwrap();
    d.wait_idle(T).unwrap();
    assert_eq!(f.completed_value(), 0);

    // The C test ends by releasing its queue; here the release comes with work still queued:
    // the work must still run (Q8).
    let gate = fence(d, "gate", 0);
    let done = fence(d, "done", 0);
    let dropped = queue(d, QueueKind::Direct, "dropped");
    dropped.wait(&gate, 1).unwrap();
    dropped.signal(&done, 1).unwrap();
    drop(dropped);
    gate.signal(1).unwrap();
    done.wait(1, T)
        .expect("Q8: work queued on a dropped queue was discarded");
}

#[test]
fn fence_values() {
    // C: test_fence_values. Rules: F1 (initial value), F2 (last write wins, CPU and GPU signals
    // may lower it), F4, Q4, Q8 (dropping the queue, then the device, discards nothing).
    let d = device();
    fence_values_body(&d);
    // The C test's last step releases the queue and the device; here they go with work queued.
    let gate = fence(&d, "gate2", 0);
    let done = fence(&d, "done2", 0);
    let q = queue(&d, QueueKind::Compute, "last");
    q.wait(&gate, 1).unwrap();
    q.signal(&done, 1).unwrap();
    drop(q);
    drop(d);
    gate.signal(1).unwrap();
    done.wait(1, T).expect(
        "Q8: work queued before the last Queue and Device handles were dropped was discarded",
    );
}

#[test]
fn fence_values_explore() {
    // C: test_fence_values, deterministic (the queue is dropped, the device is explore's).
    // Rules: F1, F2, F4, Q4, Q8.
    explore_seeds(30, fence_values_body);
}

// ---------------------------------------------------------------------------------------------
// test_cpu_signal_fence

fn cpu_signal_fence_body(d: &Device) {
    // No counterpart: the device reference count the C test checks on release.
    let f = fence(d, "fence", 0);
    for v in [1, 10, 5, 0] {
        f.signal(v).unwrap();
        assert_eq!(f.completed_value(), v);
    }

    // One event.
    let e1 = Event::new();
    assert!(!e1.try_wait());
    f.set_event_on_completion(5, Some(&e1)).unwrap();
    assert!(!e1.try_wait());
    f.signal(5).unwrap();
    assert!(e1.try_wait(), "not set on reaching 5");
    assert!(!e1.try_wait(), "not auto-reset");

    f.set_event_on_completion(6, Some(&e1)).unwrap();
    assert!(!e1.try_wait());
    f.signal(7).unwrap();
    assert!(e1.try_wait(), "not set on passing 6");
    assert!(!e1.try_wait());

    f.signal(10).unwrap();
    assert!(!e1.try_wait(), "a spent registration fired again");

    // A value already reached sets the event at once.
    assert!(!e1.try_wait());
    let reached = f.completed_value();
    for v in 0..=reached {
        f.set_event_on_completion(v, Some(&e1)).unwrap();
        assert!(e1.try_wait(), "value {v} <= {reached} did not fire at once");
        assert!(!e1.try_wait());
    }
    let v = reached + 1;
    f.set_event_on_completion(v, Some(&e1)).unwrap();
    assert!(!e1.try_wait());
    f.signal(v).unwrap();
    assert!(e1.try_wait());
    assert!(!e1.try_wait());

    // One event on several values; registering it twice for 12 sets it once.
    f.signal(0).unwrap();
    assert!(!e1.try_wait());
    for v in [3, 5, 9, 12, 12] {
        f.set_event_on_completion(v, Some(&e1)).unwrap();
    }
    assert!(!e1.try_wait());
    for v in 1..13 {
        f.signal(v).unwrap();
        if [3, 5, 9, 12].contains(&v) {
            assert!(e1.try_wait(), "not set at {v}");
        }
        assert!(!e1.try_wait(), "set again at {v}");
    }

    // Two events.
    f.signal(0).unwrap();
    assert_eq!(f.completed_value(), 0);
    let e2 = Event::new();
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    f.set_event_on_completion(100, Some(&e1)).unwrap();
    f.set_event_on_completion(u64::MAX, Some(&e2)).unwrap();
    for v in [50, 99] {
        f.signal(v).unwrap();
        assert!(!e1.try_wait(), "e1 set at {v}");
        assert!(!e2.try_wait(), "e2 set at {v}");
    }
    f.signal(100).unwrap();
    assert!(e1.try_wait());
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    // Spent: crossing 100 again sets nothing.
    for v in [101, 0, 100] {
        f.signal(v).unwrap();
        assert!(!e1.try_wait(), "e1 set again at {v}");
        assert!(!e2.try_wait(), "e2 set at {v}");
    }
    f.signal(u64::MAX).unwrap();
    assert!(!e1.try_wait());
    assert!(e2.try_wait(), "not set at u64::MAX");
    assert!(!e2.try_wait());
    for v in [u64::MAX, 0] {
        f.signal(v).unwrap();
        assert!(!e1.try_wait());
        assert!(!e2.try_wait());
    }

    // Two events on the same value.
    f.signal(0).unwrap();
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    f.set_event_on_completion(1, Some(&e1)).unwrap();
    f.set_event_on_completion(1, Some(&e2)).unwrap();
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    f.signal(3).unwrap();
    assert!(e1.try_wait());
    assert!(e2.try_wait());
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());

    // An event that is already set stays set when registered, and is set again on completion.
    f.signal(20).unwrap();
    assert_eq!(f.completed_value(), 20);
    assert!(!e1.try_wait());
    e1.set();
    f.set_event_on_completion(30, Some(&e1)).unwrap();
    assert!(e1.try_wait());
    assert!(!e1.try_wait());
    f.signal(30).unwrap();
    assert!(e1.try_wait());
    assert!(!e1.try_wait());
}

#[test]
fn cpu_signal_fence() {
    // C: test_cpu_signal_fence. Rules: F2 (CPU signals set and lower the value), F4, F6 (once
    // per registration, on crossing; at once if reached; auto-reset; one event twice for one
    // value is set once).
    cpu_signal_fence_body(&device());
}

#[test]
fn cpu_signal_fence_explore() {
    // C: test_cpu_signal_fence, deterministic (no queues: one schedule per seed is enough to
    // show nothing here depends on the driver). Rules: as above.
    explore_seeds(5, cpu_signal_fence_body);
}

// ---------------------------------------------------------------------------------------------
// test_gpu_signal_fence

fn gpu_signal_fence_body(d: &Device) {
    // No counterpart: the device reference count the C test checks on release.
    let q = queue(d, QueueKind::Direct, "queue");
    let f = fence(d, "fence", 0);
    // As in the C test, the queue is drained after every signal.
    let signal = |v: u64| {
        q.signal(&f, v).unwrap();
        q.wait_idle(T).unwrap();
    };
    signal(10);
    assert_eq!(f.completed_value(), 10);
    signal(0);
    assert_eq!(f.completed_value(), 0);

    let e1 = Event::new();
    assert!(!e1.try_wait());
    f.set_event_on_completion(5, Some(&e1)).unwrap();
    assert!(!e1.try_wait());
    signal(5);
    assert!(e1.try_wait(), "not set on reaching 5");
    assert!(!e1.try_wait());

    f.set_event_on_completion(6, Some(&e1)).unwrap();
    assert!(!e1.try_wait());
    signal(7);
    assert!(e1.try_wait(), "not set on passing 6");
    assert!(!e1.try_wait());

    signal(10);
    assert!(!e1.try_wait());

    // One event on several values (12 twice).
    signal(0);
    assert!(!e1.try_wait());
    for v in [3, 5, 9, 12, 12] {
        f.set_event_on_completion(v, Some(&e1)).unwrap();
    }
    assert!(!e1.try_wait());
    for v in 1..13 {
        signal(v);
        if [3, 5, 9, 12].contains(&v) {
            assert!(e1.try_wait(), "not set at {v}");
        }
        assert!(!e1.try_wait(), "set again at {v}");
    }

    // Two events.
    signal(0);
    assert_eq!(f.completed_value(), 0);
    let e2 = Event::new();
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    f.set_event_on_completion(100, Some(&e1)).unwrap();
    f.set_event_on_completion(u64::MAX, Some(&e2)).unwrap();
    for v in [50, 99] {
        signal(v);
        assert!(!e1.try_wait(), "e1 set at {v}");
        assert!(!e2.try_wait(), "e2 set at {v}");
    }
    signal(100);
    assert!(e1.try_wait());
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    for v in [101, 0, 100] {
        signal(v);
        assert!(!e1.try_wait(), "e1 set again at {v}");
        assert!(!e2.try_wait(), "e2 set at {v}");
    }
    signal(u64::MAX);
    assert!(!e1.try_wait());
    assert!(e2.try_wait(), "not set at u64::MAX");
    assert!(!e2.try_wait());
    for v in [u64::MAX, 0] {
        signal(v);
        assert!(!e1.try_wait());
        assert!(!e2.try_wait());
    }

    // Two events on one value.
    signal(0);
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    f.set_event_on_completion(1, Some(&e1)).unwrap();
    f.set_event_on_completion(1, Some(&e2)).unwrap();
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    signal(3);
    assert!(e1.try_wait());
    assert!(e2.try_wait());
    assert!(!e1.try_wait());
    assert!(!e2.try_wait());
    q.wait_idle(T).unwrap();
}

#[test]
fn gpu_signal_fence() {
    // C: test_gpu_signal_fence. Rules: Q4, F2 (a queue signal may lower the value), F6.
    gpu_signal_fence_body(&device());
}

#[test]
fn gpu_signal_fence_explore() {
    // C: test_gpu_signal_fence, deterministic. Rules: as above.
    explore_seeds(30, gpu_signal_fence_body);
}

// ---------------------------------------------------------------------------------------------
// test_multithread_fence_wait

/// The C test's event-waiting thread: registers an event for `value`, says it is ready, waits.
fn spawn_event_waiter(d: &Device, f: &Fence, ready: &Event, value: u64) -> host::HostHandle<bool> {
    let (f, ready) = (f.clone(), ready.clone());
    host::spawn(d, "event-waiter", move || {
        let e = Event::new();
        f.set_event_on_completion(value, Some(&e)).unwrap();
        ready.set();
        e.wait(T)
    })
    .unwrap()
}

/// The C test's busy-waiting thread: says it is ready, then polls the completed value.
fn spawn_busy_waiter(d: &Device, f: &Fence, ready: &Event, value: u64) -> host::HostHandle<bool> {
    let (f, ready) = (f.clone(), ready.clone());
    host::spawn(d, "busy-waiter", move || {
        ready.set();
        let start = Instant::now();
        while f.completed_value() < value {
            if start.elapsed() > T {
                return false;
            }
            std::hint::spin_loop();
        }
        true
    })
    .unwrap()
}

#[test]
fn multithread_fence_wait() {
    // C: test_multithread_fence_wait. Rules: F6 and F9 (an event registered on another thread
    // is set by a CPU or a queue signal; no lost wakeup), F4 (a polling thread sees the value).
    // Windows threads are host threads, the start handshake a pipefence Event; the device
    // reference count checked at the end has no counterpart. Threaded driver only: the waiting
    // threads block in `Event::wait` or spin on `completed_value`, which the deterministic
    // scheduler cannot see.
    let d = device();
    let q = queue(&d, QueueKind::Direct, "queue");
    let ready = Event::new();
    let f = fence(&d, "fence", 0);

    // Signalled by the CPU.
    let h = spawn_event_waiter(&d, &f, &ready, 1);
    assert!(ready.wait(T), "waiter did not start");
    f.signal(1).unwrap();
    assert!(h.join().unwrap(), "event waiter not woken by a CPU signal");

    let h = spawn_busy_waiter(&d, &f, &ready, 2);
    assert!(ready.wait(T), "waiter did not start");
    f.signal(2).unwrap();
    assert!(h.join().unwrap(), "busy waiter never saw the CPU signal");

    // Signalled by a queue.
    let h = spawn_event_waiter(&d, &f, &ready, 3);
    assert!(ready.wait(T), "waiter did not start");
    q.signal(&f, 3).unwrap();
    assert!(
        h.join().unwrap(),
        "event waiter not woken by a queue signal"
    );

    let h = spawn_busy_waiter(&d, &f, &ready, 4);
    assert!(ready.wait(T), "waiter did not start");
    q.signal(&f, 4).unwrap();
    assert!(h.join().unwrap(), "busy waiter never saw the queue signal");
}
