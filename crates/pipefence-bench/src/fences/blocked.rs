//! `fences/blocked-waiter`: the CPU time of a thread blocked in `Fence::wait`, as % of one
//! core, against a thread blocked in a condvar wait.

use super::{device, err, CondvarFence};
use crate::harness::{Config, Goal, Report, Stats, Unit};
use pipefence::FenceDesc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// CPU time consumed by the calling thread, in ns.
fn thread_cpu_ns() -> Result<u64, String> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Err(format!(
            "clock_gettime(CLOCK_THREAD_CPUTIME_ID): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Runs `wait` on the calling thread and returns its CPU time as % of the wall time it took.
fn cpu_percent_of(wait: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    let c0 = thread_cpu_ns()?;
    let t0 = Instant::now();
    wait()?;
    let wall = t0.elapsed().as_nanos() as f64;
    let cpu = (thread_cpu_ns()? - c0) as f64;
    Ok(100.0 * cpu / wall)
}

/// One window: `per` threads blocked in `Fence::wait(1, 2 s)` and `per` in a condvar wait,
/// all released after `window`. Returns each thread's CPU % (fence, condvar).
fn blocked_window(window: Duration, per: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let device = device()?;
    let fence = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let cv = Arc::new(CondvarFence::default());
    let start = Arc::new(Barrier::new(2 * per + 1));
    let timeout = Duration::from_secs(2);
    let mut fence_threads = Vec::new();
    let mut cv_threads = Vec::new();
    for _ in 0..per {
        let (f, go) = (fence.clone(), start.clone());
        fence_threads.push(std::thread::spawn(move || {
            go.wait();
            cpu_percent_of(|| f.wait(1, timeout).map_err(err))
        }));
        let (cv, go) = (cv.clone(), start.clone());
        cv_threads.push(std::thread::spawn(move || {
            go.wait();
            cpu_percent_of(|| {
                if cv.wait_timeout(1, timeout) {
                    Ok(())
                } else {
                    Err("condvar waiter timed out".to_string())
                }
            })
        }));
    }
    start.wait();
    std::thread::sleep(window);
    let signalled = fence.signal(1).map_err(err);
    cv.signal(1);
    let join = |v: Vec<std::thread::JoinHandle<Result<f64, String>>>| {
        v.into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| "blocked waiter panicked".to_string())?
            })
            .collect::<Result<Vec<f64>, String>>()
    };
    let (f, c) = (join(fence_threads), join(cv_threads));
    signalled?;
    Ok((f?, c?))
}

pub(super) fn bench_blocked_waiter(cfg: &Config) -> Result<Report, String> {
    let window = cfg.pick(Duration::from_secs(1), Duration::from_millis(300));
    let windows = cfg.pick(3, 1);
    let per = 7;
    let (mut fence, mut cv) = (Vec::new(), Vec::new());
    for _ in 0..windows {
        let (f, c) = blocked_window(window, per)?;
        fence.extend(f);
        cv.extend(c);
    }
    Ok(Report::new("fences/blocked-waiter")
        .note(format!(
            "{windows} window(s) of {window:?}, {per} fence waiters + {per} condvar waiters each; \
             CPU time of each waiting thread (CLOCK_THREAD_CPUTIME_ID, wait entry to return)"
        ))
        .figure(
            "blocked waiter CPU (% of a core)",
            Stats::from_samples(fence),
            Unit::Percent,
        )
        .baseline("Condvar::wait_timeout", Stats::from_samples(cv))
        .goal(Goal::ValueBelow(1.0)))
}
