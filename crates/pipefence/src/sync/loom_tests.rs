//! Model checks of the wake handshakes (F9): signal vs wait vs register vs remove.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p pipefence --lib sync::`.
//! `loom_catches_broken_register_handshake` proves the suite can fail: with the re-check under
//! the lock switched off, loom finds the lost wakeup (a deadlock) and the model panics.
//! `loom_catches_queue_wait_reading_the_value` does the same for the queue wait's handshake:
//! with the ticket's latch replaced by a re-read of the fence's value (the behaviour before
//! tickets), a signal raised and lowered before the engine re-checks is lost.
//! `loom_catches_a_served_engine_parked_by_a_store` does the same for the threaded driver's
//! hand-off: an engine stepped by the thread whose signal woke it, parked again with a plain
//! store instead of `begin_park`'s compare-and-swap, loses another thread's wake.

use super::event::Event;
use super::fence::{FenceCore, WaitOutcome, Writer, BREAK_REGISTER_RECHECK};
use super::multi::wait_multiple;
use super::notify::{defer_wakes, take_deferred, EngineWaker};
use super::shim::{lock, AtomicBool, Mutex, Ordering};
use super::ticket::{Ticket, BREAK_TICKET_LATCH};
use loom::thread;
use std::sync::Arc;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// The threaded driver's engine loop, reduced to one queue wait (`driver::threaded`): the
/// engine thread names itself to its waker, then clears the waker, steps (the PFP tests the
/// ticket), and parks only if `begin_park` finds no wake since the clear (a wake unparks it
/// only once `begin_park` ran). Runs on a spawned thread (loom's
/// `unpark` must not reach a thread blocked in `join`).
fn spawn_engine(ticket: Arc<Ticket>, waker: Arc<EngineWaker>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        waker.set_thread(thread::current());
        loop {
            waker.clear();
            if ticket.is_satisfied() {
                return;
            }
            if !waker.begin_park(true) {
                continue;
            }
            thread::park();
        }
    })
}

/// F9, F5: a queue parked on `wait(f, 1)`: a signal satisfies its ticket and the fence is
/// lowered again before the engine re-checks. The engine still goes on (no lost wake-up).
fn queue_wait_signal_lower_recheck_park() -> Arc<Ticket> {
    let f = Arc::new(FenceCore::new(0));
    let waker = Arc::new(EngineWaker::default());
    let ticket = Ticket::issue(f.clone(), 1, waker.clone(), None);
    let engine = spawn_engine(ticket.clone(), waker);
    f.signal(1, Writer::Never, 0);
    f.signal(0, Writer::Never, 0);
    engine.join().unwrap();
    ticket
}

#[test]
fn f9_queue_wait_signal_vs_lower_vs_recheck_vs_park() {
    model(|| {
        let ticket = queue_wait_signal_lower_recheck_park();
        assert!(ticket.is_satisfied());
        assert_eq!(ticket.satisfied_by().map(|c| c.value), Some(1));
    });
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_catches_queue_wait_reading_the_value() {
    model(|| {
        BREAK_TICKET_LATCH.with(|b| b.set(true));
        let _ = queue_wait_signal_lower_recheck_park();
    });
}

/// F5, Q3: a submission queued behind a held queue wait does not wake the engine
/// (`wake_for_submission` leaves a `PARKING_HELD` engine parked), and neither it nor the
/// signal that releases the wait is lost: the engine steps once both are in, whatever the
/// order of the submission, the signal, the engine's step and its park.
#[test]
fn q3_submission_behind_held_wait_vs_signal_vs_park() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let waker = Arc::new(EngineWaker::default());
        let ticket = Ticket::issue(f.clone(), 1, waker.clone(), None);
        let queued = Arc::new(Mutex::new(0u32));
        let engine = {
            let (ticket, waker, queued) = (ticket.clone(), waker.clone(), queued.clone());
            thread::spawn(move || {
                waker.set_thread(thread::current());
                loop {
                    waker.clear();
                    let n = *lock(&queued);
                    let held = !ticket.is_satisfied();
                    if !held && n == 1 {
                        return;
                    }
                    if !waker.begin_park(held) {
                        continue;
                    }
                    thread::park();
                }
            })
        };
        let submitter = {
            let (waker, queued) = (waker.clone(), queued.clone());
            thread::spawn(move || {
                *lock(&queued) += 1;
                waker.wake_for_submission();
            })
        };
        f.signal(1, Writer::Never, 0);
        submitter.join().unwrap();
        engine.join().unwrap();
    });
}

/// F5: a ticket issued while another thread pulses the fence is satisfied exactly when the
/// pulse's crossing came after the issue (the value was below the target at the issue), and a
/// satisfied ticket records the crossing signal's value.
#[test]
fn f5_ticket_issue_vs_pulse() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let f2 = f.clone();
        let t = thread::spawn(move || {
            f2.signal(3, Writer::Never, 0);
            f2.signal(0, Writer::Never, 0);
        });
        let waker = Arc::new(EngineWaker::default());
        let ticket = Ticket::issue(f.clone(), 2, waker.clone(), None);
        t.join().unwrap();
        assert_eq!(f.completed_value(), 0);
        if ticket.is_satisfied() {
            assert!(waker.notified());
            assert_eq!(ticket.satisfied_by().map(|c| c.value), Some(3));
        }
    });
}

/// F11 vs F9: releasing the fence while a queue is parked on it satisfies the ticket.
#[test]
fn f11_release_vs_parked_queue_wait() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let waker = Arc::new(EngineWaker::default());
        let ticket = Ticket::issue(f.clone(), u64::MAX, waker.clone(), None);
        let engine = spawn_engine(ticket.clone(), waker);
        f.release();
        engine.join().unwrap();
        assert!(ticket.satisfied_by().is_some_and(|c| c.fence_released));
        // Later signals are discarded; the fence is not removed.
        assert!(f.signal(3, Writer::Never, 0));
        assert!(!f.is_removed());
    });
}

#[test]
fn f9_signal_vs_blocking_wait_never_loses_wakeup() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let f2 = f.clone();
        let t = thread::spawn(move || {
            f2.signal(1, Writer::Never, 0);
        });
        assert_eq!(f.wait_until(1, None), WaitOutcome::Reached);
        t.join().unwrap();
    });
}

#[test]
fn f9_signal_vs_event_registration_fires_once() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let e = Event::new();
        let f2 = f.clone();
        let t = thread::spawn(move || {
            f2.signal(2, Writer::Never, 0);
        });
        let _ = f.register(1, e.notifier());
        t.join().unwrap();
        // Whatever the order, the crossing of 1 set the event exactly once.
        assert!(e.try_wait());
        assert!(!e.try_wait());
    });
}

#[test]
fn f10_remove_vs_wait_releases_waiter() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let f2 = f.clone();
        let t = thread::spawn(move || f2.remove());
        assert_eq!(f.wait_until(5, None), WaitOutcome::Removed);
        t.join().unwrap();
        assert_eq!(f.completed_value(), u64::MAX);
        assert!(!f.signal(7, Writer::Never, 0));
    });
}

#[test]
fn f9_two_signallers_and_all_wait() {
    model(|| {
        let a = Arc::new(FenceCore::new(0));
        let b = Arc::new(FenceCore::new(0));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || {
            a2.signal(1, Writer::Never, 0);
            b2.signal(1, Writer::Never, 0);
        });
        let pairs = vec![(a.clone(), 1), (b.clone(), 1)];
        assert_eq!(wait_multiple(&pairs, false, None), WaitOutcome::Reached);
        t.join().unwrap();
    });
}

#[test]
fn f9_signal_vs_remove_vs_event() {
    model(|| {
        let f = Arc::new(FenceCore::new(0));
        let e = Event::new();
        let (f2, f3) = (f.clone(), f.clone());
        let t1 = thread::spawn(move || {
            f2.signal(1, Writer::Never, 0);
        });
        let t2 = thread::spawn(move || f3.remove());
        let _ = f.register(1, e.notifier());
        t1.join().unwrap();
        t2.join().unwrap();
        // Either the crossing or the removal fired the registration.
        assert!(e.try_wait());
    });
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_catches_broken_register_handshake() {
    model(|| {
        BREAK_REGISTER_RECHECK.with(|b| b.set(true));
        let f = Arc::new(FenceCore::new(0));
        let f2 = f.clone();
        let t = thread::spawn(move || {
            f2.signal(1, Writer::Never, 0);
        });
        let _ = f.wait_until(1, None);
        t.join().unwrap();
    });
}

/// The threaded driver's hand-off (`driver::threaded::serve_deferred`), reduced to one engine
/// parked on two queue waits: a thread that defers wakes signals the first wait's fence (the
/// wake of the parked engine is kept, not delivered) and then steps the engine itself as its
/// own thread would (clear, step, `begin_park`, again if a wake came meanwhile), while the main
/// thread signals the second wait's fence with a plain wake. Whoever steps the engine past both
/// waits finishes it (the engine's own thread is woken to end). No interleaving loses a wake:
/// the engine always gets past both waits.
fn served_wake_vs_own_thread_vs_plain_wake(park_by_store: bool) {
    let f = Arc::new(FenceCore::new(0));
    let g = Arc::new(FenceCore::new(0));
    let waker = Arc::new(EngineWaker::default());
    let t1 = Ticket::issue(f.clone(), 1, waker.clone(), None);
    let t2 = Ticket::issue(g.clone(), 1, waker.clone(), None);
    let done = Arc::new(AtomicBool::new(false));
    // A step of the engine: past both waits once both tickets are satisfied.
    let step = {
        let (t1, t2, done) = (t1.clone(), t2.clone(), done.clone());
        move || {
            if t1.is_satisfied() && t2.is_satisfied() {
                done.store(true, Ordering::SeqCst);
            }
            done.load(Ordering::SeqCst)
        }
    };
    let engine = {
        let (waker, step) = (waker.clone(), step.clone());
        thread::spawn(move || {
            waker.set_thread(thread::current());
            loop {
                waker.clear();
                if step() {
                    return;
                }
                if !waker.begin_park(true) {
                    continue;
                }
                thread::park();
            }
        })
    };
    let server = {
        let waker = waker.clone();
        thread::spawn(move || {
            defer_wakes();
            f.signal(1, Writer::Never, 0);
            let mut kept = Vec::new();
            take_deferred(&mut kept);
            for d in kept {
                assert!(std::ptr::eq(d.waker, Arc::as_ptr(&waker)));
                let mut parked = false;
                for _ in 0..3 {
                    waker.clear();
                    if step() {
                        break;
                    }
                    if park_by_store {
                        waker.force_parking_for_test();
                        parked = true;
                        break;
                    }
                    if waker.begin_park(true) {
                        parked = true;
                        break;
                    }
                }
                if !parked {
                    // Past both waits (or too many tries): its own thread takes it on.
                    waker.wake_thread();
                }
            }
        })
    };
    g.signal(1, Writer::Never, 0);
    server.join().unwrap();
    engine.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn d3_served_wake_vs_own_thread_vs_plain_wake() {
    model(|| served_wake_vs_own_thread_vs_plain_wake(false));
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_catches_a_served_engine_parked_by_a_store() {
    model(|| served_wake_vs_own_thread_vs_plain_wake(true));
}
