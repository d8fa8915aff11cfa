//! `fences/ping-pong`: two threads hand a token back and forth through two pipefence fences,
//! against the same hand-off through two Mutex+Condvar fences, for each way of waiting. The
//! pinned variant (`pinned.rs`) reuses the measurement.

use super::{device, err, CondvarFence, WAIT_TIMEOUT};
use crate::harness::{ns_per_iter, Config, Report, Stats, Unit};
use pipefence::FenceDesc;
use pipefence::{Device, Fence};
use std::sync::{Arc, Barrier};

/// How the ping-pong threads wait: untimed (`Fence::wait_forever` vs `Condvar::wait`) or
/// with a (never reached) timeout (`Fence::wait(v, 30 s)` vs `Condvar::wait_timeout_while`).
/// A timed futex wait arms a kernel timer, which costs time on every block, so each variant is
/// compared with the baseline that waits the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitKind {
    /// `Fence::wait_forever` / `Condvar::wait`.
    Untimed,
    /// `Fence::wait(v, 30 s)` / `Condvar::wait_timeout_while`.
    Timed,
}

pub(super) const WAIT_KINDS: [WaitKind; 2] = [WaitKind::Untimed, WaitKind::Timed];

impl WaitKind {
    fn fence_wait(self, f: &Fence, v: u64) -> Result<(), String> {
        match self {
            WaitKind::Untimed => f.wait_forever(v),
            WaitKind::Timed => f.wait(v, WAIT_TIMEOUT),
        }
        .map_err(err)
    }

    fn condvar_wait(self, f: &CondvarFence, v: u64) -> Result<(), String> {
        match self {
            WaitKind::Untimed => {
                f.wait(v);
                Ok(())
            }
            WaitKind::Timed if f.wait_timeout(v, WAIT_TIMEOUT) => Ok(()),
            WaitKind::Timed => Err(format!("condvar wait for {v} timed out")),
        }
    }

    /// Label suffix and baseline name.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            WaitKind::Untimed => ("wait_forever", "Mutex+Condvar::wait"),
            WaitKind::Timed => ("wait(v, 30 s)", "Mutex+Condvar::wait_timeout"),
        }
    }

    pub(super) fn key(self) -> &'static str {
        match self {
            WaitKind::Untimed => "untimed",
            WaitKind::Timed => "timed",
        }
    }
}

/// Round trip in ns through two pipefence fences: A signals f1 to i then waits f2 for i; B
/// waits f1 for i then signals f2 to i.
fn fence_pingpong(device: &Device, iters: u64, kind: WaitKind) -> Result<f64, String> {
    let f1 = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let f2 = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let start = Arc::new(Barrier::new(2));
    let b = {
        let (f1, f2, start) = (f1.clone(), f2.clone(), start.clone());
        std::thread::spawn(move || -> Result<(), String> {
            start.wait();
            for i in 1..=iters {
                kind.fence_wait(&f1, i)?;
                f2.signal(i).map_err(err)?;
            }
            Ok(())
        })
    };
    start.wait();
    let mut result = Ok(());
    let ns = ns_per_iter(iters, || {
        for i in 1..=iters {
            if let Err(e) = f1
                .signal(i)
                .map_err(err)
                .and_then(|()| kind.fence_wait(&f2, i))
            {
                result = Err(e);
                return;
            }
        }
    });
    if result.is_err() {
        // Unblock B so that join returns.
        let _ = f1.signal(u64::MAX);
    }
    b.join()
        .map_err(|_| "ping-pong thread B panicked".to_string())??;
    result.map(|()| ns)
}

/// The same ping-pong through two [`CondvarFence`]s.
pub(crate) fn condvar_pingpong(iters: u64, kind: WaitKind) -> Result<f64, String> {
    let f1 = Arc::new(CondvarFence::default());
    let f2 = Arc::new(CondvarFence::default());
    let start = Arc::new(Barrier::new(2));
    let b = {
        let (f1, f2, start) = (f1.clone(), f2.clone(), start.clone());
        std::thread::spawn(move || -> Result<(), String> {
            start.wait();
            for i in 1..=iters {
                kind.condvar_wait(&f1, i)?;
                f2.signal(i);
            }
            Ok(())
        })
    };
    start.wait();
    let mut result = Ok(());
    let ns = ns_per_iter(iters, || {
        for i in 1..=iters {
            f1.signal(i);
            if let Err(e) = kind.condvar_wait(&f2, i) {
                result = Err(e);
                return;
            }
        }
    });
    if result.is_err() {
        f1.signal(u64::MAX);
    }
    b.join()
        .map_err(|_| "condvar ping-pong thread B panicked".to_string())??;
    result.map(|()| ns)
}

/// Samples of one wait kind: (pipefence, baseline), `reps` each.
pub(super) type PingPongSamples = (Vec<f64>, Vec<f64>);

/// `reps` samples of each ping-pong for each wait kind, interleaved (project, baseline,
/// project, ...) after one short warm-up of each.
pub(super) fn pingpong_samples(iters: u64, reps: usize) -> Result<[PingPongSamples; 2], String> {
    let device = device()?;
    let warm = (iters / 10).max(100);
    let mut out: [PingPongSamples; 2] = Default::default();
    for (kind, (fence, cv)) in WAIT_KINDS.into_iter().zip(out.iter_mut()) {
        fence_pingpong(&device, warm, kind)?;
        condvar_pingpong(warm, kind)?;
        for _ in 0..reps {
            fence.push(fence_pingpong(&device, iters, kind)?);
            cv.push(condvar_pingpong(iters, kind)?);
        }
    }
    Ok(out)
}

pub(super) fn pingpong_params(cfg: &Config) -> (u64, usize) {
    (cfg.pick(10_000, 2_000), cfg.pick(7, 3))
}

/// Adds one figure per wait kind to `report`, each with the ratio goal `goal`.
pub(super) fn pingpong_figures(
    mut report: Report,
    label: &str,
    samples: [PingPongSamples; 2],
    goal: f64,
) -> Report {
    for (kind, (fence, cv)) in WAIT_KINDS.into_iter().zip(samples) {
        let (how, base) = kind.describe();
        report = report
            .figure(
                format!("{label}, {how}"),
                Stats::from_samples(fence),
                Unit::Ns,
            )
            .baseline(base, Stats::from_samples(cv))
            .ratio(goal);
    }
    report
}

pub(super) fn bench_pingpong(cfg: &Config) -> Result<Report, String> {
    let (iters, reps) = pingpong_params(cfg);
    let samples = pingpong_samples(iters, reps)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let report = Report::new("fences/ping-pong").note(format!(
        "{iters} round trips x {reps} runs per wait kind; {cpus} CPUs available (fence waits \
         may spin before parking; the baseline never spins)"
    ));
    Ok(pingpong_figures(report, "round trip", samples, 0.5))
}
