//! Engine benchmarks: hand-offs between queues through fences, a host round trip through a
//! queue, command-processor throughput, kernel bandwidth, and the CPU cost of an engine blocked
//! on a memory wait. Every figure has a baseline measured in the same run.

use crate::fences::{condvar_pingpong, CondvarFence, WaitKind, WAIT_TIMEOUT};
use crate::harness::{ns_per_iter, Bench, Config, Goal, Report, Stats, Unit};
use pipefence::command::{decode, encode, Command};
use pipefence::CommandListDesc;
use pipefence::FenceDesc;
use pipefence::{
    Buffer, BufferDesc, CommandList, Comparison, Device, DeviceDesc, Fence, Heap, Kernel,
    MemoryModel, Queue, QueueDesc, QueueKind, WaitEngine, Width, WriteSource,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The engine benchmarks, in running order.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "engine/cross-queue-chain",
        about: "N compute queues hand a token along through fences; ns per hop vs N threads",
        run: bench_chain,
    },
    Bench {
        name: "engine/host-round-trip",
        about: "host signals A, a queue waiting on A signals B, host wakes; vs Condvar ping-pong",
        run: bench_round_trip,
    },
    Bench {
        name: "engine/command-throughput",
        about: "packets/s of satisfied waits and top-of-pipe writes vs a plain decode loop",
        run: bench_command_throughput,
    },
    Bench {
        name: "engine/kernel-bandwidth",
        about: "fill and add kernels over a large buffer, GB/s vs memset/add loops on threads",
        run: bench_kernel_bandwidth,
    },
    Bench {
        name: "engine/idle-cost",
        about: "CPU time of an engine blocked on an unsatisfied memory wait vs a Condvar thread",
        run: bench_idle_cost,
    },
];

fn err(e: pipefence::Error) -> String {
    e.to_string()
}

fn device(workers: usize) -> Result<Device, String> {
    device_with(workers, MemoryModel::Plain)
}

/// A threaded device with `workers` workers and the memory model `memory_model`.
pub(crate) fn device_with(workers: usize, memory_model: MemoryModel) -> Result<Device, String> {
    Device::new(DeviceDesc {
        workers,
        memory_model,
        ..DeviceDesc::default()
    })
    .map_err(|e| format!("Device::new: {e}"))
}

pub(crate) fn compute_queue(device: &Device, name: &str) -> Result<Queue, String> {
    device
        .create_queue(&QueueDesc::new(QueueKind::Compute, name))
        .map_err(err)
}

pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Seconds since `t` as f64.
fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// 1. Cross-queue chain.

/// Queue counts of the chain.
const CHAIN_QUEUES: [usize; 3] = [2, 4, 16];

/// ns per hop of `rounds` rounds through `queues`: queue 0 waits on `start`, queue i on queue
/// i-1's fence, each signals its own; the CPU signals `start` to r and waits on the last fence
/// for r. All `wait; signal` pairs are submitted before the timed loop. A round is N + 1 hops
/// (CPU to queue 0, N - 1 queue to queue, last queue to CPU).
pub(crate) fn engine_chain(device: &Device, queues: &[Queue], rounds: u64) -> Result<f64, String> {
    let start = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let fences = queues
        .iter()
        .map(|_| device.create_fence(&FenceDesc::new(0)).map_err(err))
        .collect::<Result<Vec<Fence>, String>>()?;
    for (i, q) in queues.iter().enumerate() {
        let prev = if i == 0 { &start } else { &fences[i - 1] };
        for r in 1..=rounds {
            q.wait(prev, r).map_err(err)?;
            q.signal(&fences[i], r).map_err(err)?;
        }
    }
    let last = fences.last().ok_or("chain without queues")?;
    let hops = rounds * (queues.len() as u64 + 1);
    let mut result = Ok(());
    let ns = ns_per_iter(hops, || {
        for r in 1..=rounds {
            if let Err(e) = start
                .signal(r)
                .and_then(|()| last.wait(r, WAIT_TIMEOUT))
                .map_err(err)
            {
                result = Err(format!("round {r}: {e}"));
                return;
            }
        }
    });
    result?;
    device.wait_idle(WAIT_TIMEOUT).map_err(err)?;
    Ok(ns)
}

/// The same chain through `n` threads and `n + 1` [`CondvarFence`]s.
pub(crate) fn condvar_chain(n: usize, rounds: u64) -> Result<f64, String> {
    let c: Arc<Vec<CondvarFence>> = Arc::new((0..=n).map(|_| CondvarFence::default()).collect());
    let go = Arc::new(Barrier::new(n + 1));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (c, go) = (c.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                for r in 1..=rounds {
                    c[i].wait(r);
                    c[i + 1].signal(r);
                }
            })
        })
        .collect();
    go.wait();
    let hops = rounds * (n as u64 + 1);
    let mut result = Ok(());
    let ns = ns_per_iter(hops, || {
        for r in 1..=rounds {
            c[0].signal(r);
            if !c[n].wait_timeout(r, WAIT_TIMEOUT) {
                result = Err(format!("condvar chain round {r} timed out"));
                return;
            }
        }
    });
    if result.is_err() {
        for f in c.iter() {
            f.signal(u64::MAX);
        }
    }
    for t in threads {
        t.join()
            .map_err(|_| "condvar chain thread panicked".to_string())?;
    }
    result.map(|()| ns)
}

fn bench_chain(cfg: &Config) -> Result<Report, String> {
    let rounds = cfg.pick(2_000, 500);
    let reps = cfg.pick(5, 3);
    let workers = 1;
    let mut report = Report::new("engine/cross-queue-chain").note(format!(
        "{rounds} rounds x {reps} runs per N; a round: CPU signals `start`, queue 0 waits on it \
         and signals its fence, queue i waits on queue i-1's fence, CPU waits on the last \
         (Fence::wait, 30 s timeout); N + 1 hops per round; every queue wait/signal submitted \
         before the timed loop; device with {workers} worker; {} CPUs",
        cpus()
    ));
    report = report.note(
        "baseline: N threads, thread i waits (Condvar::wait) for counter i >= r and sets \
         counter i+1 = r (Mutex<u64>+Condvar each); CPU waits with Condvar::wait_timeout",
    );
    for n in CHAIN_QUEUES {
        let dev = device(workers)?;
        let queues = (0..n)
            .map(|i| compute_queue(&dev, &format!("chain{i}")))
            .collect::<Result<Vec<Queue>, String>>()?;
        let warm = (rounds / 10).max(20);
        engine_chain(&dev, &queues, warm)?;
        condvar_chain(n, warm)?;
        let (mut proj, mut base) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            proj.push(engine_chain(&dev, &queues, rounds)?);
            base.push(condvar_chain(n, rounds)?);
        }
        report = report
            .figure(
                format!("N={n} queues: ns per hop"),
                Stats::from_samples(proj),
                Unit::Ns,
            )
            .baseline(format!("{n} threads+Condvar"), Stats::from_samples(base))
            .ratio(1.0);
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// 2. Host round trip.

/// ns per round trip: the host signals `a` to i, the queue (waiting on `a` for i) signals `b`
/// to i, the host waits on `b` for i. `presubmit`: every `wait(a, i); signal(b, i)` pair is
/// submitted before the timed loop; otherwise each iteration submits its pair first (inside
/// the timed loop).
pub(crate) fn engine_round_trip(
    device: &Device,
    queue: &Queue,
    iters: u64,
    presubmit: bool,
) -> Result<f64, String> {
    let a = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    let b = device.create_fence(&FenceDesc::new(0)).map_err(err)?;
    if presubmit {
        for i in 1..=iters {
            queue.wait(&a, i).map_err(err)?;
            queue.signal(&b, i).map_err(err)?;
        }
    }
    let mut result = Ok(());
    let ns = ns_per_iter(iters, || {
        for i in 1..=iters {
            let step = || -> pipefence::Result<()> {
                if !presubmit {
                    queue.wait(&a, i)?;
                    queue.signal(&b, i)?;
                }
                a.signal(i)?;
                b.wait(i, WAIT_TIMEOUT)
            };
            if let Err(e) = step() {
                result = Err(format!("round trip {i}: {e}"));
                return;
            }
        }
    });
    result?;
    device.wait_idle(WAIT_TIMEOUT).map_err(err)?;
    Ok(ns)
}

fn bench_round_trip(cfg: &Config) -> Result<Report, String> {
    let iters = cfg.pick(10_000, 2_000);
    let reps = cfg.pick(5, 3);
    let dev = device(1)?;
    let queue = compute_queue(&dev, "rt")?;
    let warm = (iters / 10).max(100);
    let mut samples: [Vec<f64>; 3] = Default::default();
    engine_round_trip(&dev, &queue, warm, false)?;
    engine_round_trip(&dev, &queue, warm, true)?;
    condvar_pingpong(warm, WaitKind::Timed)?;
    for _ in 0..reps {
        samples[0].push(engine_round_trip(&dev, &queue, iters, false)?);
        samples[1].push(engine_round_trip(&dev, &queue, iters, true)?);
        samples[2].push(condvar_pingpong(iters, WaitKind::Timed)?);
    }
    let [per_iter, pre, cv] = samples;
    let base = Stats::from_samples(cv);
    Ok(Report::new("engine/host-round-trip")
        .note(format!(
            "{iters} round trips x {reps} runs: host Fence::signal(A, i), a compute queue's \
             wait(A, i) then signal(B, i), host Fence::wait(B, i, 30 s); device with 1 worker"
        ))
        .note(
            "`submitted per iteration` (the faithful one): each iteration submits its \
             wait/signal pair, then signals A, inside the timed loop; `pre-submitted`: all \
             pairs submitted before the timed loop",
        )
        .note(
            "baseline: two threads ping-pong through two Mutex<u64>+Condvar \
             (wait_timeout_while on both sides; fences/ping-pong's baseline)",
        )
        .figure(
            "round trip, submitted per iteration",
            Stats::from_samples(per_iter),
            Unit::Ns,
        )
        .baseline("Condvar ping-pong", base.clone())
        .ratio(1.0)
        .figure(
            "round trip, pre-submitted",
            Stats::from_samples(pre),
            Unit::Ns,
        )
        .baseline("Condvar ping-pong", base)
        .ratio(1.0))
}

// ---------------------------------------------------------------------------------------------
// 3. Command throughput.

/// Bytes of the small Shared buffer the throughput list reads and writes.
pub(crate) const SMALL_BUFFER: u64 = 64;
/// Distinct u32 slots the writes rotate over (offsets 8, 12, ..., 60).
const WRITE_SLOTS: u64 = 14;

pub(crate) fn write_offset(i: u64) -> u64 {
    8 + 4 * (i % WRITE_SLOTS)
}

/// `packets` commands alternating `wait_value32(buf+0 >= 0, ME)` and
/// `write_value32_top_of_pipe(buf + slot, i)`.
pub(crate) fn throughput_list(
    device: &Device,
    buf: &Buffer,
    packets: u64,
) -> Result<CommandList, String> {
    let mut l = device
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "throughput"))
        .map_err(err)?;
    for i in 0..packets / 2 {
        l.wait_value32(
            buf.address(0),
            Comparison::GreaterEqual,
            0,
            u32::MAX,
            WaitEngine::Me,
        );
        l.write_value32_top_of_pipe(buf.address(write_offset(i)), i as u32, WriteSource::Value);
    }
    l.close().map_err(err)?;
    Ok(l)
}

/// engine/command-throughput's workload on one device: a compute queue, the small Shared
/// buffer and the closed [`throughput_list`] of `packets` packets.
pub(crate) struct ThroughputRig {
    queue: Queue,
    buf: Buffer,
    list: CommandList,
    /// Packets of the list.
    pub(crate) packets: u64,
    /// Seconds recording and closing the list took.
    pub(crate) record_s: f64,
}

impl ThroughputRig {
    /// Creates the queue and buffer and records the list on `device`.
    pub(crate) fn new(device: &Device, packets: u64) -> Result<ThroughputRig, String> {
        let queue = compute_queue(device, "cp")?;
        let buf = device
            .create_buffer(&BufferDesc::new(SMALL_BUFFER, Heap::Shared).named("small"))
            .map_err(err)?;
        let t = Instant::now();
        let list = throughput_list(device, &buf, packets)?;
        let record_s = secs(t);
        Ok(ThroughputRig {
            queue,
            buf,
            list,
            packets,
            record_s,
        })
    }

    /// Packets per second of one execution of the list, from execute to `wait_idle` return.
    pub(crate) fn run(&self, device: &Device) -> Result<f64, String> {
        let t = Instant::now();
        self.queue
            .execute_command_lists(&[&self.list])
            .map_err(err)?;
        device.wait_idle(WAIT_TIMEOUT).map_err(err)?;
        Ok(self.packets as f64 / secs(t))
    }

    /// The index of the list's last write, and the value the engine left in its slot.
    pub(crate) fn last_write(&self) -> Result<(u64, u32), String> {
        let last = self.packets / 2 - 1;
        Ok((last, self.buf.read_u32(write_offset(last)).map_err(err)?))
    }
}

/// The word of `mem` holding byte offset `off` and the shift of its u32 half.
fn word_at(mem: &[AtomicU64], off: u64) -> Result<(&AtomicU64, u32), String> {
    let w = usize::try_from(off / 8)
        .ok()
        .and_then(|i| mem.get(i))
        .ok_or_else(|| format!("offset {off} outside the baseline buffer"))?;
    Ok((w, if off % 8 == 4 { 32 } else { 0 }))
}

/// Baseline: decodes `words` packet by packet and does each packet's memory access on `mem`
/// (mapped at `base`) the way the device memory does it (Acquire load; 32-bit store as a
/// compare-exchange on its 64-bit word). Returns the packets executed.
fn decode_loop(words: &[u32], base: u64, mem: &[AtomicU64]) -> Result<u64, String> {
    let mut off = 0;
    let mut packets = 0;
    while off < words.len() {
        let (cmd, len) = decode(words, off).map_err(|e| e.to_string())?;
        match cmd {
            Command::WaitValue {
                address,
                cond:
                    pipefence::ValueCondition {
                        width: Width::W32,
                        cmp,
                        reference,
                        mask,
                    },
                ..
            } => {
                let (w, shift) = word_at(mem, address.wrapping_sub(base))?;
                let v = u64::from((w.load(Ordering::Acquire) >> shift) as u32);
                if !cmp.holds(v, mask, reference) {
                    return Err(format!("baseline: wait at word {off} not satisfied"));
                }
            }
            Command::WriteValueTopOfPipe {
                address,
                width: Width::W32,
                value,
                ..
            } => {
                let (w, shift) = word_at(mem, address.wrapping_sub(base))?;
                let m = u64::from(u32::MAX) << shift;
                let v = (value & u64::from(u32::MAX)) << shift;
                let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |x| Some((x & !m) | v));
            }
            other => return Err(format!("baseline: unexpected command {}", other.name())),
        }
        off += len;
        packets += 1;
    }
    Ok(packets)
}

/// Packets per second of one [`decode_loop`] pass.
fn baseline_throughput(words: &[u32], base: u64, mem: &[AtomicU64]) -> Result<f64, String> {
    let t = Instant::now();
    let n = decode_loop(words, base, mem)?;
    Ok(n as f64 / secs(t))
}

/// The packets/s goal.
const THROUGHPUT_GOAL: f64 = 20e6;

fn bench_command_throughput(cfg: &Config) -> Result<Report, String> {
    let packets: u64 = cfg.pick(1_000_000, 100_000);
    let reps = cfg.pick(5, 3);
    let dev = device(1)?;
    let rig = ThroughputRig::new(&dev, packets)?;
    let record_s = rig.record_s;
    let words = encode(rig.list.commands());
    let mem: Vec<AtomicU64> = (0..SMALL_BUFFER / 8).map(|_| AtomicU64::new(0)).collect();
    let base = rig.buf.address(0);

    // Warm-up (and the check that both really ran every packet).
    rig.run(&dev)?;
    baseline_throughput(&words, base, &mem)?;
    let (last, got) = rig.last_write()?;
    let (w, shift) = word_at(&mem, write_offset(last))?;
    let got_base = (w.load(Ordering::Acquire) >> shift) as u32;
    if got != last as u32 || got_base != last as u32 {
        return Err(format!(
            "last write: engine wrote {got}, baseline {got_base}, expected {last}"
        ));
    }

    let (mut proj, mut basev) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        proj.push(rig.run(&dev)?);
        basev.push(baseline_throughput(&words, base, &mem)?);
    }
    let proj = Stats::from_samples(proj);
    let basev = Stats::from_samples(basev);
    Ok(Report::new("engine/command-throughput")
        .note(format!(
            "one compute queue executes one closed list of {packets} packets ({} words) x {reps} \
             runs (after 1 warm-up), alternating wait_value32(>= 0, ME; already satisfied) and \
             write_value32_top_of_pipe on a {SMALL_BUFFER} B Shared buffer; timed from \
             execute_command_lists to Device::wait_idle return; device with 1 worker; \
             recording + close took {:.0} ms (not timed)",
            words.len(),
            record_s * 1e3
        ))
        .note(
            "baseline: pipefence::command::decode over the same words (encode(list.commands())) \
             plus the same Acquire load / compare-exchange store on a Vec<AtomicU64>, one \
             thread, no engine",
        )
        .figure("packets per second", proj.clone(), Unit::PerSec)
        .baseline("decode loop", basev.clone())
        .higher_is_better()
        .goal(Goal::ValueAtLeast(THROUGHPUT_GOAL))
        .figure("packets per second vs baseline", proj, Unit::PerSec)
        .baseline("decode loop", basev)
        .higher_is_better()
        .ratio(0.5))
}

// ---------------------------------------------------------------------------------------------
// 4. Kernel bandwidth.

/// Bytes one dispatch group covers (64 u32 lanes).
const GROUP_BYTES: u64 = 256;
/// The fill value: all four bytes equal, so that `write_bytes` produces the same words.
const FILL_BYTE: u8 = 0xAB;
pub(crate) const FILL_VALUE: u32 = u32::from_ne_bytes([FILL_BYTE; 4]);

/// Bytes per second of one execution of `list` moving `bytes`.
fn engine_bandwidth(
    device: &Device,
    queue: &Queue,
    list: &CommandList,
    bytes: u64,
) -> Result<f64, String> {
    let t = Instant::now();
    queue.execute_command_lists(&[list]).map_err(err)?;
    device.wait_idle(WAIT_TIMEOUT).map_err(err)?;
    Ok(bytes as f64 / secs(t))
}

/// Baseline fill: `write_bytes` over `threads` chunks of `dst`, one scoped thread each.
fn baseline_fill(dst: &mut [u32], threads: usize) -> f64 {
    let chunk = dst.len().div_ceil(threads.max(1)).max(1);
    let bytes = std::mem::size_of_val(dst) as f64;
    let t = Instant::now();
    std::thread::scope(|s| {
        for c in dst.chunks_mut(chunk) {
            s.spawn(move || {
                // SAFETY: `c` is a live, exclusively borrowed slice of `c.len()` u32s; any byte
                // pattern is a valid u32.
                unsafe { std::ptr::write_bytes(c.as_mut_ptr(), FILL_BYTE, c.len()) };
            });
        }
    });
    bytes / secs(t)
}

/// Baseline add: `dst[i] = src[i] + value` over `threads` chunks, one scoped thread each.
fn baseline_add(dst: &mut [u32], src: &[u32], value: u32, threads: usize) -> f64 {
    let chunk = dst.len().div_ceil(threads.max(1)).max(1);
    let bytes = 2.0 * std::mem::size_of_val(dst) as f64;
    let t = Instant::now();
    std::thread::scope(|s| {
        for (d, sc) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            s.spawn(move || {
                for (x, y) in d.iter_mut().zip(sc) {
                    *x = y.wrapping_add(value);
                }
            });
        }
    });
    bytes / secs(t)
}

/// engine/kernel-bandwidth's workload on one device: a compute queue, `dst` and `src`
/// DeviceLocal buffers of `size` bytes (`src` initialized to 7), and two closed lists of one
/// dispatch over all of `dst`: `fill` (with [`FILL_VALUE`]) and `add` (`dst = src + 1`).
pub(crate) struct KernelRig {
    queue: Queue,
    dst: Buffer,
    /// Kept alive: `add` reads it.
    _src: Buffer,
    fill: CommandList,
    add: CommandList,
    /// Bytes of each buffer.
    pub(crate) size: u64,
    /// Groups of each dispatch.
    pub(crate) groups: u32,
}

impl KernelRig {
    /// Creates the queue, buffers and lists on `device`.
    pub(crate) fn new(device: &Device, size: u64) -> Result<KernelRig, String> {
        let groups = u32::try_from(size / GROUP_BYTES).map_err(|_| "too many groups")?;
        let queue = compute_queue(device, "kernels")?;
        let dst = device
            .create_buffer(&BufferDesc::new(size, Heap::DeviceLocal).named("dst"))
            .map_err(err)?;
        let src = device
            .create_buffer(
                &BufferDesc::new(size, Heap::DeviceLocal)
                    .named("src")
                    .with_init(7),
            )
            .map_err(err)?;
        let list = |name: &str, k: Kernel| -> Result<CommandList, String> {
            let mut l = device
                .create_command_list(&CommandListDesc::new(QueueKind::Compute, name))
                .map_err(err)?;
            l.dispatch(&k, groups);
            l.close().map_err(err)?;
            Ok(l)
        };
        let fill = list("fill", Kernel::fill(dst.gpu_address(), FILL_VALUE))?;
        let add = list("add", Kernel::add(dst.gpu_address(), src.gpu_address(), 1))?;
        Ok(KernelRig {
            queue,
            dst,
            _src: src,
            fill,
            add,
            size,
            groups,
        })
    }

    /// Bytes per second of one `fill` dispatch (bytes written).
    pub(crate) fn run_fill(&self, device: &Device) -> Result<f64, String> {
        engine_bandwidth(device, &self.queue, &self.fill, self.size)
    }

    /// Bytes per second of one `add` dispatch (bytes read plus bytes written).
    pub(crate) fn run_add(&self, device: &Device) -> Result<f64, String> {
        engine_bandwidth(device, &self.queue, &self.add, 2 * self.size)
    }

    /// Checks that the first, middle and last words of `dst` hold `want` after `what`.
    pub(crate) fn check(&self, what: &str, want: u32) -> Result<(), String> {
        for off in [0, self.size / 2, self.size - 4] {
            let got = self.dst.tools().debug_read_u32(off).map_err(err)?;
            if got != want {
                return Err(format!("{what}: dst[{off}] = {got:#x}, expected {want:#x}"));
            }
        }
        Ok(())
    }
}

/// The value of every `dst` word after [`KernelRig`]'s `add` (src 7 plus 1).
pub(crate) const ADD_RESULT: u32 = 8;

fn bench_kernel_bandwidth(cfg: &Config) -> Result<Report, String> {
    let size: u64 = cfg.pick(256, 64) << 20;
    let reps = cfg.pick(5, 3);
    let workers = cpus();
    let dev = device(workers)?;
    let rig = KernelRig::new(&dev, size)?;
    let groups = rig.groups;

    let n = (size / 4) as usize;
    let mut bdst = vec![1u32; n];
    let bsrc = vec![7u32; n];

    // Warm-up: touches every page on both sides.
    rig.run_fill(&dev)?;
    rig.run_add(&dev)?;
    baseline_fill(&mut bdst, workers);
    baseline_add(&mut bdst, &bsrc, 1, workers);

    let mut s: [Vec<f64>; 4] = Default::default();
    for _ in 0..reps {
        s[0].push(rig.run_fill(&dev)?);
        s[1].push(baseline_fill(&mut bdst, workers));
    }
    let check = |what: &str, want: u32, base: u32| -> Result<(), String> {
        rig.check(what, want)?;
        if base != want {
            return Err(format!("{what} baseline: {base:#x}, expected {want:#x}"));
        }
        Ok(())
    };
    check("fill", FILL_VALUE, bdst[n - 1])?;
    for _ in 0..reps {
        s[2].push(rig.run_add(&dev)?);
        s[3].push(baseline_add(&mut bdst, &bsrc, 1, workers));
    }
    check("add", ADD_RESULT, bdst[n / 2])?;
    let [ef, bf, ea, ba] = s;
    let mib = size >> 20;
    Ok(Report::new("engine/kernel-bandwidth")
        .note(format!(
            "one dispatch of {groups} groups ({mib} MiB, DeviceLocal) x {reps} runs per kernel \
             after 1 warm-up; {workers} workers ({} CPUs); timed from execute_command_lists to \
             Device::wait_idle return; GB/s = bytes moved (fill: {mib} MiB written; add: \
             {mib} MiB read + {mib} MiB written) / time",
            cpus()
        ))
        .note(format!(
            "baseline: the same bytes on a plain Vec<u32> split over {workers} scoped threads \
             (spawned in the timed region): ptr::write_bytes (fill), dst[i] = src[i] + 1 (add)"
        ))
        .figure("fill bandwidth", Stats::from_samples(ef), Unit::BytesPerSec)
        .baseline("write_bytes", Stats::from_samples(bf))
        .higher_is_better()
        .ratio(0.5)
        .figure("add bandwidth", Stats::from_samples(ea), Unit::BytesPerSec)
        .baseline("add loop", Stats::from_samples(ba))
        .higher_is_better()
        .ratio(0.5))
}

// ---------------------------------------------------------------------------------------------
// 5. Idle cost.

/// CPU time of a clock (process or thread), in ns.
fn cpu_clock_ns(clock: libc::clockid_t) -> Result<u64, String> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(format!(
            "clock_gettime({clock}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The CPU-time clock of thread `tid` of this process (Linux's `MAKE_THREAD_CPUCLOCK(tid,
/// CPUCLOCK_SCHED)`, what `pthread_getcpuclockid` returns).
fn thread_clock(tid: i32) -> libc::clockid_t {
    ((!tid) << 3) | 6
}

/// The ids of this process's threads whose name (`comm`) satisfies `pred`.
fn threads_named(pred: impl Fn(&str) -> bool) -> Result<Vec<i32>, String> {
    let dir = std::fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if pred(comm.trim_end()) {
            out.push(tid);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// An engine thread's name: `pf<device>-q<queue>`.
fn is_engine_thread(comm: &str) -> bool {
    comm.strip_prefix("pf").is_some_and(|r| {
        r.split_once("-q").is_some_and(|(d, q)| {
            !d.is_empty()
                && !q.is_empty()
                && d.bytes().all(|b| b.is_ascii_digit())
                && q.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

/// CPU ns per second of wall time over a window: (process, watched thread).
#[derive(Debug, Clone, Copy)]
struct IdleSample {
    process: f64,
    thread: f64,
}

/// Measures, over `window` while this thread sleeps, the process CPU time and thread `tid`'s.
fn idle_window(window: Duration, tid: i32) -> Result<IdleSample, String> {
    let clock = thread_clock(tid);
    let (p0, t0) = (
        cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)?,
        cpu_clock_ns(clock)?,
    );
    let w = Instant::now();
    std::thread::sleep(window);
    let (p1, t1) = (
        cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)?,
        cpu_clock_ns(clock)?,
    );
    let wall = secs(w);
    Ok(IdleSample {
        process: (p1 - p0) as f64 / wall,
        thread: (t1 - t0) as f64 / wall,
    })
}

/// Time for a blocked thread to reach its wait before the window opens.
const SETTLE: Duration = Duration::from_millis(50);

/// One window with an engine blocked on `wait_value32(buf+0 == 1, ME)` (no atomic views).
fn engine_idle(window: Duration) -> Result<IdleSample, String> {
    let before = threads_named(is_engine_thread)?;
    let dev = device(1)?;
    let queue = compute_queue(&dev, "idle")?;
    let buf = dev
        .create_buffer(&BufferDesc::new(SMALL_BUFFER, Heap::Shared).named("flag"))
        .map_err(err)?;
    let mut l = dev
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "idle"))
        .map_err(err)?;
    l.wait_value32(
        buf.address(0),
        Comparison::Equal,
        1,
        u32::MAX,
        WaitEngine::Me,
    )
    .write_value32_top_of_pipe(buf.address(4), 1, WriteSource::Value);
    l.close().map_err(err)?;
    queue.execute_command_lists(&[&l]).map_err(err)?;
    // A new thread names itself once it runs: look for the engine thread after the settle.
    std::thread::sleep(SETTLE);
    let engine: Vec<i32> = threads_named(is_engine_thread)?
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    let sample = match engine[..] {
        [tid] => idle_window(window, tid),
        _ => Err(format!(
            "expected one new engine thread (pf*-q*), found {engine:?}"
        )),
    };
    let ran_early = buf.read_u32(4).map_err(err)? != 0;
    buf.write_u32(0, 1).map_err(err)?;
    dev.wait_idle(WAIT_TIMEOUT).map_err(err)?;
    if ran_early {
        return Err("the engine passed its wait before the flag was written".to_string());
    }
    if buf.read_u32(4).map_err(err)? != 1 {
        return Err("the engine did not run past its wait once released".to_string());
    }
    sample
}

/// Name of the baseline's blocked thread.
const CV_THREAD: &str = "bench-idle-cv";

/// One window with a thread blocked in `Condvar::wait`.
fn condvar_idle(window: Duration) -> Result<IdleSample, String> {
    let cv = Arc::new(CondvarFence::default());
    let t = {
        let cv = cv.clone();
        std::thread::Builder::new()
            .name(CV_THREAD.to_string())
            .spawn(move || cv.wait(1))
            .map_err(|e| format!("spawn: {e}"))?
    };
    std::thread::sleep(SETTLE);
    let sample = threads_named(|c| c == CV_THREAD).and_then(|tids| match tids[..] {
        [tid] => idle_window(window, tid),
        _ => Err(format!("expected one `{CV_THREAD}` thread, found {tids:?}")),
    });
    cv.signal(1);
    t.join()
        .map_err(|_| "condvar idle thread panicked".to_string())?;
    sample
}

/// The idle goal: CPU ns per second of wall time.
const IDLE_GOAL_NS_PER_S: f64 = 10e6;

fn bench_idle_cost(cfg: &Config) -> Result<Report, String> {
    let window = cfg.pick(Duration::from_secs(1), Duration::from_millis(300));
    let windows = cfg.pick(3, 1);
    let (mut e, mut c) = (Vec::new(), Vec::new());
    for _ in 0..windows {
        e.push(engine_idle(window)?);
        c.push(condvar_idle(window)?);
    }
    let proc_of = |v: &[IdleSample]| Stats::from_samples(v.iter().map(|s| s.process).collect());
    let thread_of = |v: &[IdleSample]| Stats::from_samples(v.iter().map(|s| s.thread).collect());
    Ok(Report::new("engine/idle-cost")
        .note(format!(
            "{windows} window(s) of {window:?} each while the main thread sleeps: a fresh device \
             (1 worker, default 2 s watchdog) whose compute queue is blocked in \
             wait_value32(== 1, ME) on a Shared buffer, no atomic views; then a thread blocked \
             in Condvar::wait (baseline), measured alone"
        ))
        .note(
            "figures are CPU time per second of wall time: the whole process \
             (CLOCK_PROCESS_CPUTIME_ID) and the blocked thread alone (the engine thread \
             pf*-q*, or the Condvar thread; its per-thread CPU clock)",
        )
        .figure(
            "process CPU per second, engine blocked",
            proc_of(&e),
            Unit::Ns,
        )
        .baseline("Condvar thread blocked", proc_of(&c))
        .goal(Goal::ValueBelow(IDLE_GOAL_NS_PER_S))
        .figure("engine thread CPU per second", thread_of(&e), Unit::Ns)
        .baseline("Condvar thread", thread_of(&c))
        .goal(Goal::ValueBelow(IDLE_GOAL_NS_PER_S)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_thread_names() {
        assert!(is_engine_thread("pf0-q0"));
        assert!(is_engine_thread("pf12-q15"));
        assert!(!is_engine_thread("pf0-w1"));
        assert!(!is_engine_thread("pf-q1"));
        assert!(!is_engine_thread("pf1-q"));
        assert!(!is_engine_thread("main"));
    }

    #[test]
    fn fill_value_matches_fill_byte() {
        assert_eq!(FILL_VALUE, 0xABAB_ABAB);
    }

    #[test]
    fn decode_loop_runs_a_small_list() {
        let dev = device(1).unwrap();
        let buf = dev
            .create_buffer(&BufferDesc::new(SMALL_BUFFER, Heap::Shared))
            .unwrap();
        let list = throughput_list(&dev, &buf, 40).unwrap();
        let words = encode(list.commands());
        let mem: Vec<AtomicU64> = (0..SMALL_BUFFER / 8).map(|_| AtomicU64::new(0)).collect();
        assert_eq!(decode_loop(&words, buf.address(0), &mem).unwrap(), 40);
        // Write 19 (the last) went to slot 19 % 14 = 5: offset 28, the high half of word 3.
        assert_eq!(mem[3].load(Ordering::Relaxed) >> 32, 19);
    }
}
