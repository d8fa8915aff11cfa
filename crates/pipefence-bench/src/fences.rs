//! Fence benchmarks: ping-pong latency (free and pinned to one CPU), the CPU cost of a blocked
//! waiter, how one signal scales with the number of waiters it releases, and the memory of a
//! pending waiter. Every figure has a baseline measured in the same run.

use crate::alloc;
use crate::harness::{ns_per_iter, Bench, Config, Goal, Report, Stats, Unit};
use pipefence::{Device, DeviceDesc, Event, Fence, FenceWait};
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Barrier, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The fence benchmarks, in running order.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "fences/ping-pong",
        about: "two threads hand a token through two fences; round trip vs Mutex+Condvar",
        run: bench_pingpong,
    },
    Bench {
        name: "fences/ping-pong-pinned",
        about: "the same with both threads pinned to one CPU (child process; no spinning)",
        run: bench_pingpong_pinned,
    },
    Bench {
        name: "fences/blocked-waiter",
        about: "CPU time of a thread blocked in Fence::wait, as % of one core",
        run: bench_blocked_waiter,
    },
    Bench {
        name: "fences/waiter-scaling",
        about: "one signal releasing k of 100000 waiters (events, futures) vs a linear scan",
        run: bench_waiter_scaling,
    },
    Bench {
        name: "fences/waiter-memory",
        about: "heap bytes per pending waiter (events, futures) vs a plain Vec",
        run: bench_waiter_memory,
    },
];

/// Hidden argument that makes the binary a pinned ping-pong child.
pub const PINNED_CHILD_ARG: &str = "--pinned-child";

/// Generous timeout for waits that should complete in microseconds (a hang fails loudly).
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

fn device() -> Result<Device, String> {
    Device::new(DeviceDesc::default()).map_err(|e| format!("Device::new: {e}"))
}

fn err(e: pipefence::Error) -> String {
    e.to_string()
}

/// Locks ignoring poisoning (a panicking benchmark thread is reported by `join`).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Baseline: a "fence" made of a Mutex<u64> and a Condvar, the classic blocking implementation.

/// A 64-bit value behind a mutex, with a condition variable notified on every signal. No
/// spinning.
#[derive(Debug, Default)]
pub(crate) struct CondvarFence {
    value: Mutex<u64>,
    cv: Condvar,
}

impl CondvarFence {
    pub(crate) fn signal(&self, v: u64) {
        *lock(&self.value) = v;
        self.cv.notify_all();
    }

    pub(crate) fn wait(&self, v: u64) {
        let mut g = lock(&self.value);
        while *g < v {
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Returns whether the value was reached before `timeout`.
    pub(crate) fn wait_timeout(&self, v: u64, timeout: Duration) -> bool {
        let g = lock(&self.value);
        let (g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |x| *x < v)
            .unwrap_or_else(|p| p.into_inner());
        *g >= v
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Ping-pong.

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

const WAIT_KINDS: [WaitKind; 2] = [WaitKind::Untimed, WaitKind::Timed];

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

    fn key(self) -> &'static str {
        match self {
            WaitKind::Untimed => "untimed",
            WaitKind::Timed => "timed",
        }
    }
}

/// Round trip in ns through two pipefence fences: A signals f1 to i then waits f2 for i; B
/// waits f1 for i then signals f2 to i.
fn fence_pingpong(device: &Device, iters: u64, kind: WaitKind) -> Result<f64, String> {
    let f1 = device.create_fence(0).map_err(err)?;
    let f2 = device.create_fence(0).map_err(err)?;
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
type PingPongSamples = (Vec<f64>, Vec<f64>);

/// `reps` samples of each ping-pong for each wait kind, interleaved (project, baseline,
/// project, ...) after one short warm-up of each.
fn pingpong_samples(iters: u64, reps: usize) -> Result<[PingPongSamples; 2], String> {
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

fn pingpong_params(cfg: &Config) -> (u64, usize) {
    (cfg.pick(10_000, 2_000), cfg.pick(7, 3))
}

/// Adds one figure per wait kind to `report`, each with the ratio goal `goal`.
fn pingpong_figures(
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

fn bench_pingpong(cfg: &Config) -> Result<Report, String> {
    let (iters, reps) = pingpong_params(cfg);
    let samples = pingpong_samples(iters, reps)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let report = Report::new("fences/ping-pong").note(format!(
        "{iters} round trips x {reps} runs per wait kind; {cpus} CPUs available (fence waits \
         may spin before parking; the baseline never spins)"
    ));
    Ok(pingpong_figures(report, "round trip", samples, 0.5))
}

/// Restricts the calling thread (at process start: the whole process, since threads inherit
/// it) to the first CPU it may run on (normally CPU 0). Returns that CPU.
pub fn pin_to_one_cpu() -> Result<usize, String> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes (the empty set) is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a writable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    let max = libc::CPU_SETSIZE as usize;
    // SAFETY: `c < CPU_SETSIZE`, so CPU_ISSET reads within `set`.
    let cpu = (0..max)
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .ok_or("sched_getaffinity returned an empty CPU set")?;
    // SAFETY: `set` is a valid `cpu_set_t` and `cpu < CPU_SETSIZE`, so both write within it.
    unsafe {
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
    }
    // SAFETY: pid 0 is the calling thread; `set` is a readable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(format!(
            "sched_setaffinity(CPU {cpu}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(cpu)
}

/// The child side of `--pinned-child pingpong --iters N --reps R`: `main` has already pinned
/// the process (`pinned`); runs the ping-pongs and prints one `pinned-result` line.
pub fn pinned_child(pinned: Result<usize, String>, args: &[String]) -> ExitCode {
    let run = || -> Result<String, String> {
        let cpu = pinned?;
        let mut it = args.iter();
        let what = it.next().ok_or("--pinned-child: missing benchmark name")?;
        if what != "pingpong" {
            return Err(format!("--pinned-child: unknown benchmark `{what}`"));
        }
        let (mut iters, mut reps) = (0u64, 0usize);
        while let Some(a) = it.next() {
            let v = it
                .next()
                .ok_or(format!("--pinned-child: {a} needs a value"))?;
            match a.as_str() {
                "--iters" => iters = v.parse().map_err(|e| format!("--iters {v}: {e}"))?,
                "--reps" => reps = v.parse().map_err(|e| format!("--reps {v}: {e}"))?,
                _ => return Err(format!("--pinned-child: unknown argument {a}")),
            }
        }
        let par = std::thread::available_parallelism().map_or(1, |n| n.get());
        let samples = pingpong_samples(iters.max(1), reps.max(1))?;
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut line = format!("pinned-result cpu={cpu} parallelism={par}");
        for (kind, (fence, cv)) in WAIT_KINDS.into_iter().zip(&samples) {
            let k = kind.key();
            line += &format!(" fence_{k}_ns={} condvar_{k}_ns={}", list(fence), list(cv));
        }
        Ok(line)
    };
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pinned child: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench_pingpong_pinned(cfg: &Config) -> Result<Report, String> {
    let (iters, reps) = pingpong_params(cfg);
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = std::process::Command::new(&exe)
        .args([
            PINNED_CHILD_ARG,
            "pingpong",
            "--iters",
            &iters.to_string(),
            "--reps",
            &reps.to_string(),
        ])
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "pinned child failed ({}): {}{}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("pinned-result "))
        .ok_or_else(|| format!("pinned child printed no result: {stdout}"))?;
    let field = |key: &str| -> Result<&str, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| format!("pinned child result lacks `{key}`: {line}"))
    };
    let samples = |key: &str| -> Result<Vec<f64>, String> {
        field(key)?
            .split(',')
            .map(|x| x.parse::<f64>().map_err(|e| format!("{key} `{x}`: {e}")))
            .collect()
    };
    let mut parsed: [PingPongSamples; 2] = Default::default();
    for (kind, slot) in WAIT_KINDS.into_iter().zip(parsed.iter_mut()) {
        let k = kind.key();
        *slot = (
            samples(&format!("fence_{k}_ns"))?,
            samples(&format!("condvar_{k}_ns"))?,
        );
    }
    let cpu = field("cpu")?;
    let par = field("parallelism")?;
    let mut report = Report::new("fences/ping-pong-pinned").note(format!(
        "{iters} round trips x {reps} runs per wait kind in a child process pinned to CPU \
         {cpu}; available_parallelism there = {par} (so no spinning)"
    ));
    if par != "1" {
        report = report.note("WARNING: the child saw more than one CPU; waits may have spun");
    }
    Ok(pingpong_figures(report, "round trip, 1 CPU", parsed, 1.2))
}

// ---------------------------------------------------------------------------------------------
// Blocked waiter CPU cost.

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
    let fence = device.create_fence(0).map_err(err)?;
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

fn bench_blocked_waiter(cfg: &Config) -> Result<Report, String> {
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

// ---------------------------------------------------------------------------------------------
// Waiter scaling and memory.

/// Pending waiters per fence.
const N_WAITERS: u64 = 100_000;
/// Waiters released by the measured signal.
const KS: [u64; 3] = [1, 100, 10_000];

/// What the linear-scan baseline does to release a waiter.
trait Fire {
    fn fire(&self);
}

impl Fire for Event {
    fn fire(&self) {
        self.set();
    }
}

impl Fire for Waker {
    fn fire(&self) {
        self.wake_by_ref();
    }
}

/// Baseline: an O(n) fence. Waiters live in a plain `Vec<(target, waiter)>`; a signal scans all
/// of them (`retain`), firing and removing those it reaches.
#[derive(Debug)]
struct LinearFence<T> {
    state: Mutex<(u64, Vec<(u64, T)>)>,
}

impl<T> Default for LinearFence<T> {
    fn default() -> Self {
        LinearFence {
            state: Mutex::new((0, Vec::new())),
        }
    }
}

impl<T: Fire> LinearFence<T> {
    fn register(&self, target: u64, w: T) {
        let mut s = lock(&self.state);
        if s.0 >= target {
            w.fire();
        } else {
            s.1.push((target, w));
        }
    }

    fn signal(&self, value: u64) {
        let mut s = lock(&self.state);
        s.0 = value;
        s.1.retain(|(t, w)| {
            if *t <= value {
                w.fire();
                false
            } else {
                true
            }
        });
    }

    fn pending(&self) -> usize {
        lock(&self.state).1.len()
    }
}

/// The noop waker's context.
fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// Polls `f` once.
fn poll_once(f: &mut FenceWait, cx: &mut Context<'_>) -> Poll<pipefence::Result<()>> {
    Pin::new(f).poll(cx)
}

/// Registers `events[i]` at value `i + 1` on a fresh fence.
fn fence_with_events(device: &Device, events: &[Event]) -> Result<Fence, String> {
    let fence = device.create_fence(0).map_err(err)?;
    for (i, e) in events.iter().enumerate() {
        fence
            .set_event_on_completion(i as u64 + 1, Some(e))
            .map_err(err)?;
    }
    Ok(fence)
}

/// Creates futures for values `1..=n` on `fence`, polls each once (registering it) and pushes
/// them onto `out`.
fn register_futures(fence: &Fence, n: u64, out: &mut Vec<FenceWait>) -> Result<(), String> {
    let mut cx = noop_cx();
    for v in 1..=n {
        let mut f = fence.wait_async(v);
        if poll_once(&mut f, &mut cx).is_ready() {
            return Err(format!("wait_async({v}) was ready before any signal"));
        }
        out.push(f);
    }
    Ok(())
}

/// ns per released waiter of two signals on a fresh fence with `events` (values 1..=n)
/// registered: the first to `k` (releasing waiters 1..=k), then the next to `2k` (releasing the
/// next `k`, with the signal path now in cache).
fn scaling_events_fence(device: &Device, events: &[Event], k: u64) -> Result<[f64; 2], String> {
    for e in events {
        e.reset();
    }
    let fence = fence_with_events(device, events)?;
    let mut out = [0.0; 2];
    for (j, v) in [k, 2 * k].into_iter().enumerate() {
        let mut r = Ok(());
        out[j] = ns_per_iter(k, || r = fence.signal(v));
        r.map_err(err)?;
        let vu = v as usize;
        if !events[vu - 1].is_set() || events.get(vu).is_some_and(Event::is_set) {
            return Err(format!("signal({v}) released the wrong events"));
        }
    }
    Ok(out)
}

fn scaling_events_linear(events: &[Event], k: u64) -> Result<[f64; 2], String> {
    for e in events {
        e.reset();
    }
    let lin = LinearFence::default();
    for (i, e) in events.iter().enumerate() {
        lin.register(i as u64 + 1, e.clone());
    }
    let mut out = [0.0; 2];
    for (j, v) in [k, 2 * k].into_iter().enumerate() {
        out[j] = ns_per_iter(k, || lin.signal(v));
        let vu = v as usize;
        if !events[vu - 1].is_set() || lin.pending() != events.len() - vu {
            return Err(format!("linear signal({v}) released the wrong events"));
        }
    }
    Ok(out)
}

fn scaling_futures_fence(device: &Device, n: u64, k: u64) -> Result<[f64; 2], String> {
    let fence = device.create_fence(0).map_err(err)?;
    let mut futs = Vec::with_capacity(n as usize);
    register_futures(&fence, n, &mut futs)?;
    let mut cx = noop_cx();
    let mut out = [0.0; 2];
    for (j, v) in [k, 2 * k].into_iter().enumerate() {
        let mut r = Ok(());
        out[j] = ns_per_iter(k, || r = fence.signal(v));
        r.map_err(err)?;
        let vu = v as usize;
        let released = matches!(poll_once(&mut futs[vu - 1], &mut cx), Poll::Ready(Ok(())));
        let next_pending = futs
            .get_mut(vu)
            .is_none_or(|f| poll_once(f, &mut cx).is_pending());
        if !(released && next_pending) {
            return Err(format!("signal({v}) released the wrong futures"));
        }
    }
    Ok(out)
}

fn scaling_futures_linear(n: u64, k: u64) -> Result<[f64; 2], String> {
    let lin = LinearFence::default();
    for v in 1..=n {
        lin.register(v, Waker::noop().clone());
    }
    let mut out = [0.0; 2];
    for (j, v) in [k, 2 * k].into_iter().enumerate() {
        out[j] = ns_per_iter(k, || lin.signal(v));
        if lin.pending() as u64 != n - v {
            return Err(format!("linear signal({v}) released the wrong wakers"));
        }
    }
    Ok(out)
}

/// max/min of the per-k medians.
fn flatness(per_k: &[Stats]) -> f64 {
    let meds = per_k.iter().map(|s| s.median);
    let max = meds.clone().fold(f64::NAN, f64::max);
    let min = meds.fold(f64::NAN, f64::min);
    max / min
}

fn bench_waiter_scaling(cfg: &Config) -> Result<Report, String> {
    let reps = cfg.pick(7, 3);
    let n = N_WAITERS;
    let device = device()?;
    let events: Vec<Event> = (0..n).map(|_| Event::new()).collect();
    // samples[k index][series][first signal, second signal]; series: event fence, event
    // linear, future fence, future linear.
    let mut samples: Vec<[[Vec<f64>; 2]; 4]> = vec![Default::default(); KS.len()];
    for _ in 0..reps {
        for (i, &k) in KS.iter().enumerate() {
            let runs = [
                scaling_events_fence(&device, &events, k)?,
                scaling_events_linear(&events, k)?,
                scaling_futures_fence(&device, n, k)?,
                scaling_futures_linear(n, k)?,
            ];
            for (series, r) in runs.into_iter().enumerate() {
                for (j, ns) in r.into_iter().enumerate() {
                    samples[i][series][j].push(ns);
                }
            }
        }
    }
    let stats: Vec<[[Stats; 2]; 4]> = samples
        .into_iter()
        .map(|s| s.map(|w| w.map(Stats::from_samples)))
        .collect();
    let mut report = Report::new("fences/waiter-scaling")
        .note(format!(
            "n = {n} pending waiters (values 1..=n) on a fresh fence per run; one signal(k) \
             releases k of them; time of that call / k; {reps} runs"
        ))
        .note(
            "baseline: Vec<(value, waiter)> under a Mutex, scanned linearly by each signal \
             (an O(n) fence)",
        )
        .note(
            "`warm`: the next signal on the same fence (to 2k, releasing the next k), after \
             the first one brought the signal path into cache",
        );
    for (kind, fi, li) in [("Event", 0, 1), ("future", 2, 3)] {
        for (i, k) in KS.iter().enumerate() {
            report = report
                .figure(
                    format!("{kind} waiters: ns per released waiter, k={k}"),
                    stats[i][fi][0].clone(),
                    Unit::Ns,
                )
                .baseline("Vec scan", stats[i][li][0].clone());
        }
        report = report
            .figure(
                format!("{kind} waiters: ns per released waiter, k={}, warm", KS[0]),
                stats[0][fi][1].clone(),
                Unit::Ns,
            )
            .baseline("Vec scan", stats[0][li][1].clone());
        let proj: Vec<Stats> = stats.iter().map(|s| s[fi][0].clone()).collect();
        let lin: Vec<Stats> = stats.iter().map(|s| s[li][0].clone()).collect();
        report = report
            .figure(
                format!("{kind} waiters: flatness, max/min ns per waiter over k"),
                Stats::single(flatness(&proj)),
                Unit::Factor,
            )
            .baseline("Vec scan", Stats::single(flatness(&lin)))
            .goal(Goal::ValueAtMost(FLATNESS_GOAL));
    }
    Ok(report)
}

/// The flatness goal (this benchmark's choice; the claim it checks is O(k + log n), not O(n)):
/// the per-waiter cost of a signal releasing 1 waiter may be at most this many times that of
/// one releasing 10 000. An O(n) scan of 100 000 waiters is hundreds to thousands of times off.
const FLATNESS_GOAL: f64 = 20.0;

fn bench_waiter_memory(_cfg: &Config) -> Result<Report, String> {
    let n = N_WAITERS;
    let device = device()?;
    let per = |bytes: isize| bytes as f64 / n as f64;

    let (events, event_bytes) = alloc::measure(|| (0..n).map(|_| Event::new()).collect::<Vec<_>>());
    let event_own = per(event_bytes) - std::mem::size_of::<Event>() as f64;

    let fence = device.create_fence(0).map_err(err)?;
    let (r, fence_bytes) = alloc::measure(|| -> Result<(), String> {
        for (i, e) in events.iter().enumerate() {
            fence
                .set_event_on_completion(i as u64 + 1, Some(e))
                .map_err(err)?;
        }
        Ok(())
    });
    r?;
    let lin = LinearFence::default();
    let ((), lin_bytes) = alloc::measure(|| {
        for (i, e) in events.iter().enumerate() {
            lin.register(i as u64 + 1, e.clone());
        }
    });

    let ffence = device.create_fence(0).map_err(err)?;
    let mut futs = Vec::with_capacity(n as usize);
    let (r, fut_bytes) = alloc::measure(|| register_futures(&ffence, n, &mut futs));
    r?;
    let wlin = LinearFence::default();
    let ((), wlin_bytes) = alloc::measure(|| {
        for v in 1..=n {
            wlin.register(v, Waker::noop().clone());
        }
    });
    drop(futs);

    Ok(Report::new("fences/waiter-memory")
        .note(format!(
            "net live heap bytes (counting global allocator) while registering n = {n} waiters \
             (values 1..=n), / n. Not counted: the Event itself ({} B heap + {} B handle, the \
             same in the baseline), the future itself ({} B inline, held by the caller)",
            event_own,
            std::mem::size_of::<Event>(),
            std::mem::size_of::<FenceWait>()
        ))
        .figure(
            "heap per pending Event waiter",
            Stats::single(per(fence_bytes)),
            Unit::Bytes,
        )
        .baseline("Vec<(u64, Event)>", Stats::single(per(lin_bytes)))
        .figure(
            "heap per pending future waiter (polled once)",
            Stats::single(per(fut_bytes)),
            Unit::Bytes,
        )
        .baseline("Vec<(u64, Waker)>", Stats::single(per(wlin_bytes))))
}
