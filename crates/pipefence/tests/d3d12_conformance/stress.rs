//! The robustness and stress tests of d3d12_sync.c and the fence steps of the queue-buffer copy tests.

use super::*;

// ---------------------------------------------------------------------------------------------
// test_fence_wait_robustness (non-shared)

fn fence_wait_robustness_body(d: &Device) {
    // No counterpart: get_refcount (a queued signal or wait holds the fence, but that is not an
    // application handle and cannot be counted; dropping every `Fence` clone is the release),
    // command allocators, and the 256 MiB copies (heavy spin dispatches instead). Deviation: the
    // first queue's heavy work waits on a gate the test opens only after the release, so the
    // signal to `signal_fence` is certainly still pending then (the C test relies on 32 GB of
    // copies being slow).
    let qa = queue(d, QueueKind::Compute, "queue");
    let qb = queue(d, QueueKind::Compute, "compute_queue");
    let signal_fence = fence(d, "signal_fence", 0);
    let wait_fence = fence(d, "wait_fence", 0);
    let drain = fence(d, "drain_fence", 0);
    let gate = fence(d, "gate", 0);
    let marker = buffer(d, "marker", 256, Heap::Readback);
    let heavy0 = list(d, QueueKind::Compute, "heavy0", |l| {
        l.dispatch(&Kernel::spin(HEAVY_NS), HEAVY_GROUPS);
    });
    let heavy1 = list(d, QueueKind::Compute, "heavy1", |l| {
        l.dispatch(&Kernel::spin(HEAVY_NS), HEAVY_GROUPS)
            .dispatch(&Kernel::fill(marker.address(0), 0xd0), 1);
    });

    qa.wait(&gate, 1).unwrap();
    execute(&qa, &heavy0);
    qa.signal(&signal_fence, 1).unwrap();
    assert_eq!(signal_fence.completed_value(), 0);

    // A wait for a signal that never comes: only the release of the fence ends it.
    qb.wait(&signal_fence, u64::MAX).unwrap();
    qb.signal(&wait_fence, 1).unwrap();
    assert_eq!(wait_fence.completed_value(), 0);
    assert_eq!(signal_fence.completed_value(), 0);
    qb.wait(&wait_fence, 1).unwrap();

    // CPU waiters on the fence: an event and a future (the future does not keep it alive).
    let event = Event::new();
    signal_fence
        .set_event_on_completion(u64::MAX, Some(&event))
        .unwrap();
    let fut = pin!(signal_fence.wait_async(u64::MAX));
    assert_eq!(signal_fence.completed_value(), 0);
    assert_eq!(wait_fence.completed_value(), 0);

    // Release both fences while work that waits on them and signals them is queued.
    drop(signal_fence);
    drop(wait_fence);

    execute(&qb, &heavy1);
    qb.signal(&drain, 1).unwrap();
    gate.signal(1).unwrap();

    assert!(
        wait_event(d, &event),
        "F11: an event on a released fence was not set (removal: {:?})",
        d.removed_reason()
    );
    drain
        .wait(1, T)
        .expect("F11: the queue wait on a released fence was not satisfied");
    assert_eq!(drain.completed_value(), 1);
    assert_eq!(
        marker.read_u32(0).unwrap(),
        0xd0,
        "drain_fence was signalled before the work queued ahead of it"
    );
    poll_ready(d, fut).expect("F11: a future on a released fence did not complete with Ok");

    // Releasing early must not have signalled anything too early or hung a queue.
    qa.wait_idle(T).unwrap();
    qb.wait_idle(T).unwrap();
    assert_eq!(
        d.removed_reason(),
        None,
        "releasing a fence removed the device"
    );
}

#[test]
fn fence_wait_robustness() {
    // C: test_fence_wait_robustness (the non-shared half). Rules: F11 (dropping the last handle
    // releases every waiter as if u64::MAX was reached: event, future, queue waits; pending
    // signals to it are dropped; no removal), Q4 (drain after the work before it).
    fence_wait_robustness_body(&device());
}

#[test]
fn fence_wait_robustness_explore() {
    // C: test_fence_wait_robustness, deterministic. Rules: F11, Q4.
    explore_seeds(30, fence_wait_robustness_body);
}

// ---------------------------------------------------------------------------------------------
// test_fence_wait_multiple (non-shared)

fn fence_wait_multiple_body(d: &Device) {
    const ALL: MultipleFenceWaitFlags = MultipleFenceWaitFlags::ALL;
    const ANY: MultipleFenceWaitFlags = MultipleFenceWaitFlags::ANY;
    let q1 = queue(d, QueueKind::Direct, "queue1");
    let q2 = queue(d, QueueKind::Compute, "queue2");
    let fences: Vec<Fence> = (0..4).map(|i| fence(d, &format!("fence{i}"), 0)).collect();
    let all: Vec<&Fence> = fences.iter().collect();
    let event = Event::new();
    assert!(!event.try_wait());

    // Bad arguments are InvalidArg (the runtime's crash with a null value array has no
    // counterpart; a count that does not match does).
    let invalid = |r: pipefence::Result<()>, what: &str| match r {
        Err(Error::InvalidArg(_)) => {}
        other => panic!("{what}: expected InvalidArg, got {other:?}"),
    };
    invalid(
        d.set_event_on_multiple_fence_completion(&[] as &[&Fence], &[], ALL, None),
        "no fences, no event",
    );
    invalid(
        d.set_event_on_multiple_fence_completion(&all[..0], &[], ANY, Some(&event)),
        "no fences",
    );
    invalid(
        d.set_event_on_multiple_fence_completion(
            &all,
            &[1, 2, 3, 4],
            MultipleFenceWaitFlags(0xffff_ffff),
            Some(&event),
        ),
        "unknown flags",
    );
    invalid(
        d.set_event_on_multiple_fence_completion(&all[..1], &[1, 2], ALL, Some(&event)),
        "1 fence, 2 values",
    );
    invalid(
        d.wait_multiple(&[] as &[&Fence], &[], ANY, T),
        "wait with no fences",
    );
    assert!(!event.try_wait(), "a rejected call set the event");

    // One fence.
    d.set_event_on_multiple_fence_completion(&all[..1], &[1], ALL, Some(&event))
        .unwrap();
    assert!(!event.try_wait());
    fences[0].signal(1).unwrap();
    assert!(wait_event(d, &event));
    assert!(!event.try_wait());

    // ALL of four, completed by CPU and queue signals.
    let values = [2, 1, 53, 11];
    d.set_event_on_multiple_fence_completion(&all, &values, ALL, Some(&event))
        .unwrap();
    assert!(!event.try_wait());
    fences[1].signal(4).unwrap();
    assert!(
        stays_unset(d, &event, Duration::from_millis(100)),
        "ALL set with one fence of four"
    );
    q1.signal(&fences[0], 2).unwrap();
    q2.signal(&fences[3], 14).unwrap();
    fences[2].signal(53).unwrap();
    assert!(
        wait_event(d, &event),
        "ALL not set with every fence reached"
    );
    assert!(!event.try_wait());
    // The blocking form (a NULL event in D3D12), bounded here.
    d.wait_multiple(&all, &values, ALL, T).unwrap();

    // ANY of four: set once, at the first.
    let values = [100, 200, 300, 400];
    d.set_event_on_multiple_fence_completion(&all, &values, ANY, Some(&event))
        .unwrap();
    assert!(!event.try_wait());
    q1.signal(&fences[1], 200).unwrap();
    q2.signal(&fences[2], 300).unwrap();
    assert!(wait_event(d, &event), "ANY not set");
    fences[0].signal(100).unwrap();
    assert!(
        stays_unset(d, &event, Duration::from_millis(100)),
        "ANY was set more than once"
    );
    d.wait_multiple(&all, &values, ANY, T).unwrap();
    // Already satisfied: set at once.
    d.set_event_on_multiple_fence_completion(&all, &values, ANY, Some(&event))
        .unwrap();
    assert!(
        wait_event(d, &event),
        "ANY already satisfied not set at once"
    );
}

#[test]
fn fence_wait_multiple() {
    // C: test_fence_wait_multiple (the non-shared half). Rules: F8 (ALL and ANY, event and
    // blocking forms, InvalidArg for zero fences, mismatched counts, unknown flags), F6.
    fence_wait_multiple_body(&device());
}

#[test]
fn fence_wait_multiple_explore() {
    // C: test_fence_wait_multiple, deterministic. Rules: F8, F6.
    explore_seeds(50, fence_wait_multiple_body);
}

// ---------------------------------------------------------------------------------------------
// test_concurrent_signal_stress

fn concurrent_signal_stress_body(d: &Device) {
    let q1 = queue(d, QueueKind::Direct, "queue1");
    let q2 = queue(d, QueueKind::Compute, "queue2");
    let fences: Vec<Fence> = (0..4).map(|i| fence(d, &format!("fence{i}"), 0)).collect();
    let refs: Vec<&Fence> = fences.iter().collect();
    let mut values = [0u64; 4];
    let event = Event::new();
    for iteration in 0..10 {
        for _ in 0..2 {
            values[0] += 3;
            q1.signal(&fences[0], values[0]).unwrap();
            values[0] += 4;
            q1.signal(&fences[0], values[0]).unwrap();
            values[1] += 5;
            q2.signal(&fences[1], values[1]).unwrap();
            values[2] += 6;
            q1.signal(&fences[2], values[2]).unwrap();
            values[3] += 7;
            q2.signal(&fences[3], values[3]).unwrap();
        }
        d.set_event_on_multiple_fence_completion(
            &refs,
            &values,
            MultipleFenceWaitFlags::ALL,
            Some(&event),
        )
        .unwrap();
        assert!(
            wait_event(d, &event),
            "iteration {iteration}: the ALL event was never set (GPU likely hung)"
        );
    }
    for (f, v) in fences.iter().zip(values) {
        f.wait(v, T).unwrap();
    }
}

#[test]
fn concurrent_signal_stress() {
    // C: test_concurrent_signal_stress. Rules: Q4 (signals from two queues land), F8 (ALL over
    // fences signalled concurrently), F9. Scaled from 100 fresh devices to 25.
    for _ in 0..25 {
        concurrent_signal_stress_body(&device());
    }
}

#[test]
fn concurrent_signal_stress_explore() {
    // C: test_concurrent_signal_stress, deterministic. Rules: Q4, F8, F9.
    explore_seeds(50, concurrent_signal_stress_body);
}

// ---------------------------------------------------------------------------------------------
// test_fence_pending_signal_cpu_rewind_plain

fn cpu_rewind_body(d: &Device, iterations: u64) {
    // No counterpart: descriptor heaps with a million descriptors, 256 dummy buffers and the
    // load shader (a heavy spin dispatch instead), command allocators. Deviation: the heavy
    // list and its signal of 10 wait on a gate that opens right after the CPU rewind, so the
    // rewind always lands while that signal is pending; the C test reads 9, then rewinds, and
    // admits the race (a GPU quick enough to signal 10 in between deadlocks it, or skips).
    let q = queue(d, QueueKind::Compute, "queue");
    let q2 = queue(d, QueueKind::Compute, "queue2");
    let f = fence(d, "fence", 8);
    let alt = fence(d, "fence_alt", 0);
    let gate = fence(d, "gate", 0);
    let trivial = list(d, QueueKind::Compute, "trivial", |l| {
        l.dispatch(&Kernel::spin(1_000), 1);
    });
    let heavy = list(d, QueueKind::Compute, "heavy", |l| {
        l.dispatch(&Kernel::spin(HEAVY_NS), HEAVY_GROUPS);
    });
    for iter in 1..=iterations {
        f.signal(8).unwrap();
        alt.signal(0).unwrap();
        execute(&q, &trivial);
        q.signal(&f, 9).unwrap();
        q.wait(&gate, iter).unwrap();
        execute(&q, &heavy);
        q.signal(&f, 10).unwrap();

        // The queue is busy (here: held) with a signal of 10 pending.
        f.wait(9, T).unwrap();
        assert_eq!(f.completed_value(), 9);
        f.signal(0).unwrap();
        assert_eq!(f.completed_value(), 0);
        gate.signal(iter).unwrap();

        // A wait for 9 queued after the rewind: only the pending 10 may satisfy it.
        q2.wait(&f, 9).unwrap();
        q2.signal(&alt, 1).unwrap();
        let e = Event::new();
        alt.set_event_on_completion(1, Some(&e)).unwrap();
        assert!(
            wait_event(d, &e),
            "iteration {iter}: queue2 never passed its wait for 9 (the pending signal of 10 was lost)"
        );
        assert_eq!(
            f.completed_value(),
            10,
            "iteration {iter}: queue2 went on before the first queue's signal of 10 landed"
        );
    }
}

#[test]
fn fence_pending_signal_cpu_rewind_plain() {
    // C: test_fence_pending_signal_cpu_rewind_plain. Rules: F3 (a queue signal queued before a
    // CPU rewind lands after it), F2, F5 (the wait queued after the rewind needs a new signal),
    // Q4, Q6. The C test's 64 iterations.
    cpu_rewind_body(&device(), 64);
}

#[test]
fn fence_pending_signal_cpu_rewind_plain_explore() {
    // C: test_fence_pending_signal_cpu_rewind_plain, deterministic. Rules: F3, F2, F5, Q4, Q6.
    explore_seeds(50, |d| cpu_rewind_body(d, 4));
}

// ---------------------------------------------------------------------------------------------
// test_fence_ping_pong_deadlock_stress_plain

/// The smallest form of the rewinding host (the C test's FIXME: a value that pulses up and down
/// before the queue gets to look at it). The pulse must not be lost, and a later signal must
/// still release the queue (F9); with tickets (F5) the pulse alone already does. Repeated a few
/// times, since a lost wakeup here is a race.
fn pulse_regression(d: &Device, q: &Queue) {
    for round in 0..8 {
        let pulse = fence(d, "pulse", 0);
        let pulse_done = fence(d, "pulse_done", 0);
        q.wait(&pulse, 1).unwrap();
        q.signal(&pulse_done, 1).unwrap();
        host::sleep(d, Duration::from_millis(5));
        pulse.signal(1).unwrap();
        pulse.signal(0).unwrap();
        host::sleep(d, Duration::from_millis(20));
        pulse.signal(1).unwrap();
        pulse_done.wait(1, T).unwrap_or_else(|e| {
            panic!(
                "F9 (round {round}): a queue wait was not released by a pulse to 1 and back, \
                 then a signal of 1: {e}"
            )
        });
    }
}

fn ping_pong_body(d: &Device, pairs: u64, max_rewinds: u64) {
    // No counterpart: the descriptor heap, 256 buffers and the load shader (each list is a small
    // spin dispatch instead of 100 load groups), command allocators.
    let q = queue(d, QueueKind::Compute, "queue");
    let q2 = queue(d, QueueKind::Compute, "queue2");
    pulse_regression(d, &q);
    ping_pong_chain(d, &q, &q2, pairs, max_rewinds);
}

fn ping_pong_chain(d: &Device, q: &Queue, q2: &Queue, pairs: u64, max_rewinds: u64) {
    let f = fence(d, "fence", 0);
    let alt = fence(d, "fence_alt", 0);
    let work = list(d, QueueKind::Compute, "load", |l| {
        l.dispatch(&Kernel::spin(20_000), 4);
    });
    // A long wait-before-signal chain that hands the fence back and forth between the queues.
    for i in 0..pairs {
        execute(q, &work);
        q.wait(&f, 2 * i + 1).unwrap();
        q.signal(&f, 2 * i + 2).unwrap();
        q.signal(&alt, 2 * i + 2).unwrap(); // races with queue2's, harmlessly
    }
    for j in 0..pairs {
        q2.wait(&f, 2 * j).unwrap();
        q2.signal(&alt, 2 * j + 1).unwrap();
        q2.signal(&f, 2 * j + 1).unwrap();
    }
    let target = 2 * pairs;

    // While the queues work, the CPU keeps rewinding the fence to 0. Each queue wait is a
    // ticket: once a signal reached its value it stays satisfied, so the chain cannot stall.
    let mut seen = alt.completed_value();
    let mut since = Instant::now();
    let mut rewinds = 0u64;
    let mut stalled = false;
    while alt.completed_value() < target && rewinds < max_rewinds {
        let now = alt.completed_value();
        if now != seen {
            seen = now;
            since = Instant::now();
        } else if since.elapsed() > T {
            stalled = true;
            break;
        }
        f.signal(0).unwrap();
        rewinds += 1;
    }
    let outcome = if stalled {
        Err(format!("no progress for {T:?}"))
    } else {
        alt.wait(target, T).map_err(|e| e.to_string())
    };
    if let Err(why) = outcome {
        // Force the chain through, as the C test does, so that the queues drain.
        let start = Instant::now();
        while alt.completed_value() < target && start.elapsed() < T {
            if f.signal(u64::MAX).is_err() {
                break;
            }
            std::thread::yield_now();
        }
        panic!(
            "the queues deadlocked (fence_alt last seen at {seen} of {target}) after {rewinds} \
             CPU rewinds: {why}"
        );
    }
    d.wait_idle(T).unwrap();
}

#[test]
fn fence_ping_pong_deadlock_stress_plain() {
    // C: test_fence_ping_pong_deadlock_stress_plain. Rules: F5 and Q3 (queue waits are tickets:
    // a CPU rewind after a signal does not take back a wait it satisfied), F2, F9 (plus the
    // pulse regression), Q6. Scaled from 2048 round trips to 1024.
    ping_pong_body(&device(), 1024, u64::MAX);
}

#[test]
fn fence_ping_pong_deadlock_stress_plain_explore() {
    // C: test_fence_ping_pong_deadlock_stress_plain, deterministic: a bounded number of rewinds,
    // then a scheduled wait (a poll loop could starve the engines under PCT). Rules: F5, Q3, F2,
    // F9, Q6.
    explore_seeds(50, |d| ping_pong_body(d, 64, 500));
}

// ---------------------------------------------------------------------------------------------
// test_fence_signal_order_deadlock_stress_plain

fn signal_order_body(d: &Device, iterations: u64) {
    // Deviation: before queue_b's wait for fence_alt 1 is submitted, the host waits until
    // queue_a has finished the previous iteration (a `tail` fence it signals last). Otherwise
    // queue_b could see the previous iteration's 2 before queue_a resets fence_alt to 0, and
    // queue_a would then wait for a 2 that never comes: a race in the C test itself, which
    // native drivers rarely lose but a schedule explorer finds. The race the test is about
    // stays: the CPU rewinds `fence` to 0 while queue_a's wait for 10 may still be pending.
    let q = queue(d, QueueKind::Compute, "queue");
    let qa = queue(d, QueueKind::Compute, "queue_a");
    let qb = queue(d, QueueKind::Compute, "queue_b");
    let f = fence(d, "fence", 0);
    let alt = fence(d, "fence_alt", 0);
    let tail = fence(d, "queue_a_tail", 0);
    for iter in 0..iterations {
        f.signal(0).unwrap();

        // queue: a wait-before-signal chain on the odd values.
        for k in 0..5 {
            q.wait(&f, 2 * k + 1).unwrap();
            q.signal(&f, 2 * k + 2).unwrap();
        }

        // queue_a and queue_b duel on fence_alt.
        qa.signal(&alt, 1).unwrap();
        qa.wait(&alt, 2).unwrap();
        if iter > 0 {
            tail.wait(iter, T).unwrap_or_else(|e| {
                panic!(
                    "iteration {iter}: queue_a never finished the previous iteration (its wait \
                     for fence 10, overtaken by the CPU rewind to 0?): {e}"
                )
            });
        }
        qb.wait(&alt, 1).unwrap();
        qb.signal(&alt, 2).unwrap();

        // queue_a unblocks queue, then the two ping-pong on fence.
        qa.signal(&f, 1).unwrap();
        for k in 1..5 {
            qa.wait(&f, 2 * k).unwrap();
            qa.signal(&f, 2 * k + 1).unwrap();
        }
        qa.wait(&f, 10).unwrap();
        qa.signal(&alt, 0).unwrap();
        qa.signal(&tail, iter + 1).unwrap();

        f.wait(10, T)
            .unwrap_or_else(|e| panic!("iteration {iter}: the chain deadlocked: {e}"));
    }
    tail.wait(iterations, T)
        .unwrap_or_else(|e| panic!("queue_a never passed its last wait for fence 10: {e}"));
    d.wait_idle(T).unwrap();
}

#[test]
fn fence_signal_order_deadlock_stress_plain() {
    // C: test_fence_signal_order_deadlock_stress_plain. Rules: F5 and Q3 (queue waits are
    // tickets: queue_a's wait for 10 stays satisfied after the CPU rewinds the fence for the
    // next iteration), F2, Q4, Q6. Scaled from 16384 iterations to 4096.
    signal_order_body(&device(), 4096);
}

#[test]
fn fence_signal_order_deadlock_stress_plain_explore() {
    // C: test_fence_signal_order_deadlock_stress_plain, deterministic. Rules: F5, Q3, F2, Q4,
    // Q6.
    explore_seeds(50, |d| signal_order_body(d, 16));
}

// ---------------------------------------------------------------------------------------------
// test_fence_signal_availability_plain

fn signal_availability_body(d: &Device) {
    let q = queue(d, QueueKind::Compute, "queue");
    let q2 = queue(d, QueueKind::Compute, "queue2");
    // Round 0 raises the fence with a queue signal, round 1 with a CPU signal.
    for round in 0..2 {
        let f = fence(d, "fence", 0);
        let alt = fence(d, "fence_alt", 0);
        let progress = fence(d, "fence_progress", 0);
        for v in 1..=4 {
            q.wait(&f, v).unwrap();
        }
        q.signal(&progress, 1).unwrap();
        q.wait(&alt, 1).unwrap();
        for v in 5..=8 {
            q.wait(&f, v).unwrap();
        }
        q.signal(&progress, 2).unwrap();

        // 8 satisfies every wait on `fence` at once, also those still behind the wait on alt.
        if round == 0 {
            q2.signal(&f, 8).unwrap();
        } else {
            f.signal(8).unwrap();
        }
        progress.wait(1, T).unwrap();
        f.signal(0).unwrap();

        // The queue is stuck on fence_alt.
        let e = Event::new();
        progress.set_event_on_completion(2, Some(&e)).unwrap();
        assert!(
            stays_unset(d, &e, Duration::from_millis(100)),
            "round {round}: the queue went past its wait on fence_alt"
        );
        assert_eq!(progress.completed_value(), 1);

        // Once alt is signalled, the waits for 5..8 were satisfied by the 8 long ago, although
        // the fence now reads 0.
        alt.signal(1).unwrap();
        let e = Event::new();
        progress.set_event_on_completion(2, Some(&e)).unwrap();
        let remembered = wait_event(d, &e);
        // Let the queue through either way, so that a failure does not leave it stuck.
        let _ = f.signal(8);
        let drained = progress.wait(2, T);
        assert!(
            remembered,
            "round {round}: F5: the queue waits for 5..8 forgot the signal of 8 that came while \
             they were queued behind the wait on fence_alt"
        );
        drained.unwrap();
    }
}

#[test]
fn fence_signal_availability_plain() {
    // C: test_fence_signal_availability_plain. Rules: F5 and Q3 (a queue wait is a ticket from
    // the moment it is queued: the first signal that reaches its value satisfies it for good,
    // even while it is still behind other waits and after the value is lowered again), F2, Q4.
    signal_availability_body(&device());
}

#[test]
fn fence_signal_availability_plain_explore() {
    // C: test_fence_signal_availability_plain, deterministic. Rules: F5, Q3, F2, Q4.
    explore_seeds(50, signal_availability_body);
}

// ---------------------------------------------------------------------------------------------
// d3d12_copy.c: test_queue_buffer (test_copy_queue_buffer, test_compute_queue_buffer,
// test_graphics_queue_buffer)

fn queue_buffer_body(d: &Device, kind: QueueKind, words: u64) {
    // No counterpart: command allocators and resource state transitions. CopyResource is a
    // copy_buffer_region of the whole buffer.
    let bytes = words * 4;
    let direct = queue(d, QueueKind::Direct, "queue");
    let other = queue(d, kind, "copy_queue");
    let f = fence(d, "fence", 0);
    let a = buffer(d, "a", bytes, Heap::Upload);
    for i in 0..words {
        a.write_u32(i * 4, i as u32).unwrap();
    }
    let b = buffer(d, "b", bytes, Heap::DeviceLocal);
    let c = buffer(d, "c", bytes, Heap::DeviceLocal);
    let dd = buffer(d, "d", bytes, Heap::DeviceLocal);
    let rb = buffer(d, "readback", bytes, Heap::Readback);
    let copy = |k: QueueKind, name: &str, dst: &Buffer, src: &Buffer| {
        list(d, k, name, |l| {
            l.copy_buffer_region(dst.gpu_address(), src.gpu_address(), bytes);
        })
    };

    // Round trip between the direct queue and the other one, handed over by fence.
    execute(&direct, &copy(QueueKind::Direct, "b<-a", &b, &a));
    direct.signal(&f, 1).unwrap();
    other.wait(&f, 1).unwrap();
    execute(&other, &copy(kind, "c<-b", &c, &b));
    other.signal(&f, 2).unwrap();
    direct.wait(&f, 2).unwrap();
    let last = list(d, QueueKind::Direct, "d<-c, readback<-d", |l| {
        l.copy_buffer_region(dd.gpu_address(), c.gpu_address(), bytes)
            .copy_buffer_region(rb.gpu_address(), dd.gpu_address(), bytes);
    });
    execute(&direct, &last);
    direct.wait_idle(T).unwrap();
    for i in 0..words {
        let v = rb.read_u32(i * 4).unwrap();
        assert_eq!(
            v, i as u32,
            "{kind:?} queue: word {i} lost in the round trip"
        );
    }
}

#[test]
fn queue_buffer() {
    // C (d3d12_copy.c): test_queue_buffer through test_copy_queue_buffer,
    // test_compute_queue_buffer and test_graphics_queue_buffer. Rules: Q1 (copies run on every
    // queue kind), Q4 (a signal makes the copy's writes visible to the waiting queue), Q3, Q6.
    // Scaled from 4 MiB to 256 KiB.
    for kind in [QueueKind::Copy, QueueKind::Compute, QueueKind::Direct] {
        queue_buffer_body(&device(), kind, 64 * 1024);
    }
}

#[test]
fn queue_buffer_explore() {
    // C (d3d12_copy.c): test_queue_buffer, deterministic, 4 KiB buffers. Rules: Q1, Q4, Q3, Q6.
    explore_seeds(10, |d| {
        for kind in [QueueKind::Copy, QueueKind::Compute, QueueKind::Direct] {
            queue_buffer_body(d, kind, 1024);
        }
    });
}
