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
