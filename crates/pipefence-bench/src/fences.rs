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
        about: "a signal's fixed cost as n waiters grow, its cost per released waiter, heap per waiter (events, futures) vs a linear scan",
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

/// Pending waiters per fence in `fences/waiter-memory`.
const N_WAITERS: u64 = 100_000;
/// Pending waiter counts at which `fences/waiter-scaling` measures the fixed cost of a signal.
const NS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// The pending waiter count at which it measures the marginal cost per released waiter.
const N_MARGINAL: u64 = 100_000;
/// Waiters released by one signal for the marginal cost (measured against k = 1).
const KS: [u64; 2] = [100, 10_000];
/// Goal for the fixed cost's growth, cost(largest n) / cost(smallest n) while n grows 1000x
/// (this benchmark's choice; the claim it checks is O(k + log n), not O(n)): an O(n) fence
/// grows about 1000x, an O(log n) one only by log n and by cache misses.
const GROWTH_GOAL: f64 = 10.0;
/// Goal for the marginal cost's flatness: max/min of the marginal cost per released waiter
/// over `KS` (an O(k + log n) signal costs the same per waiter whatever k).
const FLATNESS_GOAL: f64 = 3.0;

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

/// `n` waiters pending at the consecutive values `done + 1 ..= done + n`, on a pipefence fence
/// or on the baseline. After each signal the benchmark checks what it released and registers
/// as many waiters again at the top, so `n` stays the same from one signal to the next.
trait PendingSet {
    /// Signals `done + k` (releasing `k` waiters); returns the wall time of that call in ns.
    fn signal_timed(&mut self, k: u64) -> Result<f64, String>;
    /// Checks that the last signal released its `k` waiters (and, with `check_next`, not the
    /// next one) and registers `k` waiters at the `k` values above the top.
    ///
    /// Checking the next waiter reads its memory, which the next signal would then find in
    /// cache: the timed batches check it only after their last signal.
    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String>;
}

/// Times one call (wall time in ns).
#[inline]
fn timed<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_nanos() as f64)
}

/// The values a signal to `done` released, `k` of them, and their index in a ring of `n`.
fn released(done: u64, k: u64, n: u64) -> impl Iterator<Item = (u64, usize)> {
    (done - k + 1..=done).map(move |v| (v, ((v - 1) % n) as usize))
}

/// Events on a pipefence fence (`set_event_on_completion`).
struct FenceEvents<'a> {
    fence: Fence,
    events: &'a [Event],
    done: u64,
}

impl<'a> FenceEvents<'a> {
    /// Registers `events[i]` at `i + 1` on a new fence; also returns the heap bytes that took.
    fn new(device: &Device, events: &'a [Event]) -> Result<(Self, isize), String> {
        let fence = device.create_fence(0).map_err(err)?;
        let (r, bytes) = alloc::measure(|| {
            events
                .iter()
                .enumerate()
                .try_for_each(|(i, e)| fence.set_event_on_completion(i as u64 + 1, Some(e)))
        });
        r.map_err(err)?;
        let set = FenceEvents {
            fence,
            events,
            done: 0,
        };
        Ok((set, bytes))
    }
}

/// Consumes the events a signal to `done` released; with `check_next`, checks that the next
/// one is not set.
fn check_events(
    events: &[Event],
    done: u64,
    k: u64,
    check_next: bool,
    what: &str,
) -> Result<(), String> {
    let n = events.len() as u64;
    for (v, i) in released(done, k, n) {
        if !events[i].try_wait() {
            return Err(format!(
                "{what} signal({done}) did not set the event at {v}"
            ));
        }
    }
    if check_next && events[(done % n) as usize].is_set() {
        return Err(format!(
            "{what} signal({done}) set the event at {}",
            done + 1
        ));
    }
    Ok(())
}

/// Signals `fence` to `done + k` (releasing the next `k` waiters), timed; advances `done`.
fn signal_fence_timed(fence: &Fence, done: &mut u64, k: u64) -> Result<f64, String> {
    let v = *done + k;
    let (r, ns) = timed(|| fence.signal(v));
    r.map_err(err)?;
    *done = v;
    Ok(ns)
}

impl PendingSet for FenceEvents<'_> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        signal_fence_timed(&self.fence, &mut self.done, k)
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        let n = self.events.len() as u64;
        check_events(self.events, self.done, k, check_next, "fence")?;
        for (v, i) in released(self.done, k, n) {
            self.fence
                .set_event_on_completion(v + n, Some(&self.events[i]))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// Futures on a pipefence fence (`wait_async`, polled once with a noop waker).
struct FenceFutures {
    fence: Fence,
    /// The future for value `v` is at `(v - 1) % n`.
    futs: Vec<FenceWait>,
    done: u64,
}

impl FenceFutures {
    fn new(device: &Device, n: u64) -> Result<(Self, isize), String> {
        let fence = device.create_fence(0).map_err(err)?;
        let mut futs = Vec::with_capacity(n as usize);
        let (r, bytes) = alloc::measure(|| register_futures(&fence, n, &mut futs));
        r?;
        let set = FenceFutures {
            fence,
            futs,
            done: 0,
        };
        Ok((set, bytes))
    }
}

impl PendingSet for FenceFutures {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        signal_fence_timed(&self.fence, &mut self.done, k)
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        let n = self.futs.len() as u64;
        let mut cx = noop_cx();
        for (v, i) in released(self.done, k, n) {
            if !matches!(poll_once(&mut self.futs[i], &mut cx), Poll::Ready(Ok(()))) {
                return Err(format!(
                    "signal({}) did not release the future at {v}",
                    self.done
                ));
            }
            let mut f = self.fence.wait_async(v + n);
            if poll_once(&mut f, &mut cx).is_ready() {
                return Err(format!("wait_async({}) was ready at {}", v + n, self.done));
            }
            self.futs[i] = f;
        }
        let next = (self.done % n) as usize;
        if check_next && poll_once(&mut self.futs[next], &mut cx).is_ready() {
            return Err(format!(
                "signal({}) released the future at {}",
                self.done,
                self.done + 1
            ));
        }
        Ok(())
    }
}

/// Events or (noop) wakers on the baseline.
struct Linear<'a, T> {
    lin: LinearFence<T>,
    /// The events (empty for wakers).
    events: &'a [Event],
    n: u64,
    done: u64,
}

impl<'a> Linear<'a, Event> {
    fn events(events: &'a [Event]) -> (Self, isize) {
        let lin = LinearFence::default();
        let ((), bytes) = alloc::measure(|| {
            for (i, e) in events.iter().enumerate() {
                lin.register(i as u64 + 1, e.clone());
            }
        });
        let n = events.len() as u64;
        let set = Linear {
            lin,
            events,
            n,
            done: 0,
        };
        (set, bytes)
    }
}

impl Linear<'static, Waker> {
    fn wakers(n: u64) -> (Self, isize) {
        let lin = LinearFence::default();
        let ((), bytes) = alloc::measure(|| {
            for v in 1..=n {
                lin.register(v, Waker::noop().clone());
            }
        });
        let set = Linear {
            lin,
            events: &[],
            n,
            done: 0,
        };
        (set, bytes)
    }
}

impl<T: Fire> Linear<'_, T> {
    fn signal(&mut self, k: u64) -> f64 {
        let v = self.done + k;
        let ((), ns) = timed(|| self.lin.signal(v));
        self.done = v;
        ns
    }

    fn check_pending(&self) -> Result<(), String> {
        if self.lin.pending() as u64 == self.n {
            Ok(())
        } else {
            Err(format!(
                "linear signal({}) left {} waiters pending, not {}",
                self.done,
                self.lin.pending(),
                self.n
            ))
        }
    }
}

impl PendingSet for Linear<'_, Event> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        Ok(self.signal(k))
    }

    fn refill(&mut self, k: u64, check_next: bool) -> Result<(), String> {
        check_events(self.events, self.done, k, check_next, "linear")?;
        for (v, i) in released(self.done, k, self.n) {
            self.lin.register(v + self.n, self.events[i].clone());
        }
        self.check_pending()
    }
}

impl PendingSet for Linear<'_, Waker> {
    fn signal_timed(&mut self, k: u64) -> Result<f64, String> {
        Ok(self.signal(k))
    }

    fn refill(&mut self, k: u64, _check_next: bool) -> Result<(), String> {
        if self.lin.pending() as u64 != self.n - k {
            return Err(format!(
                "linear signal({}) released the wrong wakers",
                self.done
            ));
        }
        for (v, _) in released(self.done, k, self.n) {
            self.lin.register(v + self.n, Waker::noop().clone());
        }
        self.check_pending()
    }
}

/// Median cost in ns of an empty `Instant::now()` .. `elapsed()` pair.
fn timer_overhead_ns() -> f64 {
    let samples: Vec<f64> = (0..1001).map(|_| timed(|| ()).1).collect();
    crate::harness::median(&samples)
}

/// The mean time in ns of one of `signals` signals each releasing `k` waiters, minus the
/// timer's own cost, leaving out signals that took more than 4x the batch's median (preempted:
/// on a shared machine one of those would swing the mean of a batch, while the occasional
/// slower signal of an amortized structure stays in). After each signal (untimed) the released
/// waiters are checked and replaced; untimed batches (warm-up) check after every signal that it
/// released no more than `k`, timed ones after the last.
fn signal_ns(
    set: &mut dyn PendingSet,
    k: u64,
    signals: usize,
    timer_ns: f64,
    timed: bool,
) -> Result<f64, String> {
    let mut samples = Vec::with_capacity(signals);
    for i in 0..signals {
        samples.push(set.signal_timed(k)? - timer_ns);
        set.refill(k, !timed || i + 1 == signals)?;
    }
    let limit = 4.0 * crate::harness::median(&samples).max(timer_ns);
    let kept: Vec<f64> = samples.into_iter().filter(|&x| x <= limit).collect();
    Ok(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// The kinds of waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaiterKind {
    Event,
    Future,
}

/// Samples of one kind of waiter: pipefence (`.0`) and baseline (`.1`).
#[derive(Debug, Default)]
struct Series {
    /// Per n: the cost of a signal releasing 1 waiter, one sample per run.
    fixed: Vec<(Vec<f64>, Vec<f64>)>,
    /// Per k in `KS`: the marginal cost per released waiter at `N_MARGINAL`, one per run.
    marginal: Vec<(Vec<f64>, Vec<f64>)>,
    /// The first signal after registering the largest n (one sample).
    cold: (f64, f64),
    /// Heap bytes per pending waiter, the largest over n.
    bytes: (f64, f64),
}

/// Signal counts per timed batch: (pipefence, baseline) for k = 1 at `n`. The baseline's
/// signals cost O(n) each, so it gets fewer at large n (at least 5).
fn fixed_signals(cfg: &Config, n: u64) -> (usize, usize) {
    let proj = cfg.pick(1_000, 300);
    let base = (cfg.pick(5_000_000, 1_500_000) / n).clamp(5, proj as u64) as usize;
    (proj, base)
}

/// Signal counts per timed batch for the marginal cost at `k`: (pipefence, baseline).
fn marginal_signals(cfg: &Config, k: u64) -> (usize, usize) {
    if k <= 100 {
        (cfg.pick(100, 30), cfg.pick(50, 15))
    } else {
        (cfg.pick(5, 3), cfg.pick(5, 3))
    }
}

/// Measures one kind of waiter at every n.
fn measure_kind(
    cfg: &Config,
    device: &Device,
    kind: WaiterKind,
    events: &[Event],
    reps: usize,
    timer_ns: f64,
) -> Result<Series, String> {
    let mut out = Series::default();
    out.marginal.resize_with(KS.len(), Default::default);
    let largest = NS[NS.len() - 1];
    for &n in &NS {
        let ev = &events[..n as usize];
        for e in ev {
            e.reset();
        }
        let ((mut proj, pb), (mut base, bb)): ((Box<dyn PendingSet + '_>, isize), _) = match kind {
            WaiterKind::Event => {
                let (p, pb) = FenceEvents::new(device, ev)?;
                let (b, bb) = Linear::events(ev);
                ((Box::new(p), pb), (Box::new(b) as Box<dyn PendingSet>, bb))
            }
            WaiterKind::Future => {
                let (p, pb) = FenceFutures::new(device, n)?;
                let (b, bb) = Linear::wakers(n);
                ((Box::new(p), pb), (Box::new(b) as Box<dyn PendingSet>, bb))
            }
        };
        out.bytes.0 = out.bytes.0.max(pb as f64 / n as f64);
        out.bytes.1 = out.bytes.1.max(bb as f64 / n as f64);
        if n == largest {
            out.cold = (
                signal_ns(proj.as_mut(), 1, 1, timer_ns, true)?,
                signal_ns(base.as_mut(), 1, 1, timer_ns, true)?,
            );
        }
        // Warm-up (results unused): the signal path in cache, as in a running program.
        let (ps, bs) = fixed_signals(cfg, n);
        signal_ns(proj.as_mut(), 1, ps / 10, timer_ns, false)?;
        signal_ns(base.as_mut(), 1, 2, timer_ns, false)?;
        let (mut pf, mut bf) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let p1 = signal_ns(proj.as_mut(), 1, ps, timer_ns, true)?;
            let b1 = signal_ns(base.as_mut(), 1, bs, timer_ns, true)?;
            pf.push(p1);
            bf.push(b1);
            if n == N_MARGINAL {
                for (i, &k) in KS.iter().enumerate() {
                    let (pk, bk) = marginal_signals(cfg, k);
                    let pk = signal_ns(proj.as_mut(), k, pk, timer_ns, true)?;
                    let bk = signal_ns(base.as_mut(), k, bk, timer_ns, true)?;
                    out.marginal[i].0.push((pk - p1) / (k - 1) as f64);
                    out.marginal[i].1.push((bk - b1) / (k - 1) as f64);
                }
            }
        }
        out.fixed.push((pf, bf));
    }
    Ok(out)
}

/// `10^e` for a power of ten above 10, else the number.
fn pow10(n: u64) -> String {
    match (2..20).find(|&e| 10u64.pow(e) == n) {
        Some(e) => format!("10^{e}"),
        None => n.to_string(),
    }
}

fn bench_waiter_scaling(cfg: &Config) -> Result<Report, String> {
    let reps = cfg.pick(7, 3);
    let device = device()?;
    let timer_ns = timer_overhead_ns();
    let largest = NS[NS.len() - 1];
    let smallest = NS[0];
    let events: Vec<Event> = (0..largest).map(|_| Event::new()).collect();
    let mut report = Report::new("fences/waiter-scaling")
        .note(format!(
            "n waiters pending at consecutive values on one fence; each timed signal releases \
             the lowest k, which are then checked and registered again above the top \
             (untimed), so n stays constant; a run's figure is the mean time of one signal \
             over a batch (leaving out those over 4x the batch's median: preempted), minus \
             the timer's own cost ({timer_ns:.0} ns); medians over {reps} runs, after a \
             warm-up"
        ))
        .note(
            "baseline: Vec<(value, waiter)> under a Mutex, scanned linearly by each signal \
             (an O(n) fence)",
        )
        .note(format!(
            "fixed cost: a signal releasing 1 of n waiters, for n = {}; growth: its cost at \
             n = {} / at n = {}, while n grows {}x (goal < {GROWTH_GOAL}x: no O(n) term). \
             The waiters were allocated in value order, so releasing them in order streams \
             through memory; the cold figure is the first signal after the setup, which \
             finds the fence, the signal path and the waiter out of cache",
            NS.map(pow10).join(", "),
            pow10(largest),
            pow10(smallest),
            largest / smallest
        ))
        .note(format!(
            "marginal cost per released waiter: (time(k) - time(1)) / (k - 1) at n = {}, \
             time(1) from the same run; flatness: max/min over k = {} (goal <= \
             {FLATNESS_GOAL}x). The Vec scan's cost is almost all in its O(n) fixed part: its \
             marginal cost is near zero or even below (a waiter released is one fewer to \
             move), and at k = {} within noise; its flatness is n/a when one is not positive",
            pow10(N_MARGINAL),
            KS.map(pow10).join(", "),
            pow10(KS[0])
        ))
        .note(
            "memory: net heap bytes allocated while registering the n waiters, / n, largest \
             over n (the Event or future itself not counted: see fences/waiter-memory)",
        );
    for (kind, name) in [(WaiterKind::Event, "Event"), (WaiterKind::Future, "future")] {
        let s = measure_kind(cfg, &device, kind, &events, reps, timer_ns)?;
        let fixed: Vec<(Stats, Stats)> = s
            .fixed
            .into_iter()
            .map(|(p, b)| (Stats::from_samples(p), Stats::from_samples(b)))
            .collect();
        for (&n, (p, b)) in NS.iter().zip(&fixed) {
            report = report
                .figure(
                    format!("{name}: fixed cost, signal releasing 1 of n = {}", pow10(n)),
                    p.clone(),
                    Unit::Ns,
                )
                .baseline("Vec scan", b.clone());
        }
        let (first, last) = (&fixed[0], &fixed[fixed.len() - 1]);
        report = report
            .figure(
                format!(
                    "{name}: fixed cost growth, n = {} / n = {} (n: {}x)",
                    pow10(largest),
                    pow10(smallest),
                    largest / smallest
                ),
                Stats::single(last.0.median / first.0.median),
                Unit::Factor,
            )
            .baseline("Vec scan", Stats::single(last.1.median / first.1.median))
            .goal(Goal::ValueBelow(GROWTH_GOAL))
            .figure(
                format!(
                    "{name}: first signal after registering n = {} (cold caches, 1 sample)",
                    pow10(largest)
                ),
                Stats::single(s.cold.0),
                Unit::Ns,
            )
            .baseline("Vec scan", Stats::single(s.cold.1));
        let marginal: Vec<(Stats, Stats)> = s
            .marginal
            .into_iter()
            .map(|(p, b)| (Stats::from_samples(p), Stats::from_samples(b)))
            .collect();
        for (&k, (p, b)) in KS.iter().zip(&marginal) {
            report = report
                .figure(
                    format!(
                        "{name}: marginal cost per released waiter, k = {}, n = {}",
                        pow10(k),
                        pow10(N_MARGINAL)
                    ),
                    p.clone(),
                    Unit::Ns,
                )
                .baseline("Vec scan", b.clone());
        }
        // max/min of the medians; undefined (n/a) when one is not positive, as the Vec
        // scan's can be: its cost hardly depends on k (see the note).
        let flat = |pick: fn(&(Stats, Stats)) -> f64| {
            let meds = marginal.iter().map(pick);
            let (max, min) = (
                meds.clone().fold(f64::NAN, f64::max),
                meds.fold(f64::NAN, f64::min),
            );
            if min > 0.0 {
                max / min
            } else {
                f64::NAN
            }
        };
        report = report
            .figure(
                format!(
                    "{name}: marginal cost flatness, max/min over k = {}",
                    KS.map(pow10).join(", ")
                ),
                Stats::single(flat(|m| m.0.median)),
                Unit::Factor,
            )
            .baseline("Vec scan", Stats::single(flat(|m| m.1.median)))
            .goal(Goal::ValueAtMost(FLATNESS_GOAL))
            .figure(
                format!("{name}: heap per pending waiter (largest over n)"),
                Stats::single(s.bytes.0),
                Unit::Bytes,
            )
            .baseline(
                match kind {
                    WaiterKind::Event => "Vec<(u64, Event)>",
                    WaiterKind::Future => "Vec<(u64, Waker)>",
                },
                Stats::single(s.bytes.1),
            );
    }
    Ok(report)
}

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
