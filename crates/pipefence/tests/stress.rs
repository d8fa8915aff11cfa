//! Stress (F9): 8 threads, more than 10^5 signals and waits with random values; each waiter
//! checks that it returned for the right reason; every wait is bounded by a timeout.

use pipefence::FenceDesc;
use pipefence::{Device, DeviceDesc, Event};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// A tiny deterministic PRNG (xorshift), one per thread.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn f9_stress_eight_threads_random_signals_and_waits_no_lost_wakeups() {
    let d = Device::new(DeviceDesc::default()).unwrap();
    let fences: Vec<_> = (0..4)
        .map(|_| d.create_fence(&FenceDesc::new(0)).unwrap())
        .collect();
    let ops = Arc::new(AtomicU64::new(0));
    let per_thread = 14_000u64;
    let mut ts = Vec::new();
    for t in 0..8u64 {
        let fences = fences.clone();
        let ops = ops.clone();
        ts.push(thread::spawn(move || {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
            for _ in 0..per_thread {
                let f = &fences[(rng.next() % 4) as usize];
                let v = rng.next() % 1000;
                match rng.next() % 4 {
                    0 => f.signal(v).unwrap(),
                    1 => {
                        // A wait satisfied by a signal this thread makes itself, after a
                        // registration that races other threads' signals.
                        let e = Event::new();
                        f.set_event_on_completion(v, Some(&e)).unwrap();
                        f.signal(v + 1).unwrap();
                        assert!(e.wait(Duration::from_secs(10)), "lost wakeup for {v}");
                    }
                    2 => {
                        // A timed wait: if it returns Ok the value must have reached v at
                        // some point; if it times out the wait must have lasted the timeout.
                        match f.wait(v, Duration::from_micros(200)) {
                            Ok(()) => {}
                            Err(e) => assert!(e.is_timeout(), "{e}"),
                        }
                    }
                    _ => {
                        // A wait another thread satisfies: signal then wait for the value
                        // (others may lower it; the wait must then time out, not hang).
                        f.signal(v).unwrap();
                        match f.wait(v, Duration::from_millis(5)) {
                            Ok(()) => {}
                            Err(e) => assert!(e.is_timeout(), "{e}"),
                        }
                    }
                }
                ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // A pair of threads that ping-pong through two fences: every hand-off must arrive.
    let (a, b) = (
        d.create_fence(&FenceDesc::new(0)).unwrap(),
        d.create_fence(&FenceDesc::new(0)).unwrap(),
    );
    let (a2, b2) = (a.clone(), b.clone());
    let pong = thread::spawn(move || {
        for i in 1..=5_000u64 {
            a2.wait(i, Duration::from_secs(10)).expect("ping lost");
            b2.signal(i).unwrap();
        }
    });
    for i in 1..=5_000u64 {
        a.signal(i).unwrap();
        b.wait(i, Duration::from_secs(10)).expect("pong lost");
    }
    pong.join().unwrap();
    for t in ts {
        t.join().unwrap();
    }
    assert!(ops.load(Ordering::Relaxed) >= 100_000);
}

/// D3, F5: a fence handed along a chain of 16 queues, round after round, while the engine
/// threads step the engines their signals wake (the threaded driver's hand-off): every queue
/// does its part of every round and the host sees each round end. Every fourth queue also
/// waits on a memory value the queue before it wrote and runs a dispatch, which an engine
/// stepped by another thread needs its own thread for (a memory-value watch, dispatches in
/// flight); a second host thread meanwhile signals a fence that two of the queues wait on too,
/// so wakes of one engine come from several threads at once. Each wait is bounded.
#[test]
fn d3_fence_handed_along_sixteen_queues_no_lost_wakeups() {
    use pipefence::{
        BufferDesc, CommandListDesc, Comparison, Heap, Kernel, QueueDesc, QueueKind, WaitEngine,
        WriteSource,
    };
    const QUEUES: usize = 16;
    const ROUNDS: u64 = 400;
    let d = Device::new(DeviceDesc::default()).unwrap();
    let queues: Vec<_> = (0..QUEUES)
        .map(|i| {
            d.create_queue(&QueueDesc::new(QueueKind::Compute, &format!("chain{i}")))
                .unwrap()
        })
        .collect();
    let start = d.create_fence(&FenceDesc::new(0)).unwrap();
    let side = d.create_fence(&FenceDesc::new(0)).unwrap();
    let fences: Vec<_> = (0..QUEUES)
        .map(|_| d.create_fence(&FenceDesc::new(0)).unwrap())
        .collect();
    let words = d
        .create_buffer(&BufferDesc::new(4096, Heap::Shared).named("words"))
        .unwrap();
    let out = d
        .create_buffer(&BufferDesc::new(4096, Heap::DeviceLocal).named("out"))
        .unwrap();
    for r in 1..=ROUNDS {
        for (i, q) in queues.iter().enumerate() {
            let prev = if i == 0 { &start } else { &fences[i - 1] };
            q.wait(prev, r).unwrap();
            if i % 4 == 3 {
                // The queue before wrote `r` into word i - 1 of this round (below).
                let mut l = d
                    .create_command_list(&CommandListDesc::new(QueueKind::Compute, "mixed"))
                    .unwrap();
                l.wait_value32(
                    words.address(4 * (i as u64 - 1)),
                    Comparison::GreaterEqual,
                    r as u32,
                    u32::MAX,
                    WaitEngine::Me,
                );
                l.dispatch(&Kernel::fill(out.address(64 * i as u64), r as u32), 2);
                l.close().unwrap();
                q.execute_command_lists(&[&l]).unwrap();
            }
            if i % 4 == 2 {
                let mut l = d
                    .create_command_list(&CommandListDesc::new(QueueKind::Compute, "write"))
                    .unwrap();
                l.write_value32_top_of_pipe(
                    words.address(4 * i as u64),
                    r as u32,
                    WriteSource::Value,
                );
                l.close().unwrap();
                q.execute_command_lists(&[&l]).unwrap();
            }
            if i == 5 || i == 11 {
                q.wait(&side, r).unwrap();
            }
            q.signal(&fences[i], r).unwrap();
        }
    }
    let side2 = side.clone();
    let pulser = thread::spawn(move || {
        for r in 1..=ROUNDS {
            side2.signal(r).unwrap();
            thread::yield_now();
        }
    });
    let last = fences.last().unwrap();
    for r in 1..=ROUNDS {
        start.signal(r).unwrap();
        last.wait(r, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("round {r} did not reach the host: {e}"));
    }
    pulser.join().unwrap();
    for (i, f) in fences.iter().enumerate() {
        assert_eq!(f.completed_value(), ROUNDS, "fence of queue {i}");
    }
    d.wait_idle(Duration::from_secs(20)).unwrap();
}
