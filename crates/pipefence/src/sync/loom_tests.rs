//! Model checks of the wake handshakes (F9): signal vs wait vs register vs remove.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p pipefence --lib sync::`.
//! `loom_catches_broken_register_handshake` proves the suite can fail: with the re-check under
//! the lock switched off, loom finds the lost wakeup (a deadlock) and the model panics.

use super::event::Event;
use super::fence::{FenceCore, WaitOutcome, Writer, BREAK_REGISTER_RECHECK};
use super::multi::wait_multiple;
use loom::thread;
use std::sync::Arc;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
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
