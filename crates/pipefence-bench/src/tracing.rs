//! Tracing benchmarks: what installing a trace sink ([`TraceRecorder`]) costs on three engine
//! workloads (a cross-queue fence chain, many small overlapping dispatches, and raw command
//! throughput). Each figure is "tracing on" against "tracing off" measured in the same run on
//! an identical device without a sink, the two interleaved run by run.

use crate::engine::{throughput_list, write_offset, SMALL_BUFFER};
use crate::fences::WAIT_TIMEOUT;
use crate::harness::{median, Bench, Config, Report, Stats, Unit};
use pipefence::trace::{TraceRecorder, TraceSink};
use pipefence::CommandListDesc;
use pipefence::{
    Buffer, BufferDesc, CommandList, Device, DeviceDesc, Heap, Kernel, Queue, QueueDesc, QueueKind,
};
use std::sync::Arc;
use std::time::Instant;

/// The tracing benchmarks, in running order.
pub const BENCHES: &[Bench] = &[Bench {
    name: "trace/overhead",
    about: "cost of a TraceRecorder sink: fence chain, overlapping dispatches, command throughput",
    run: bench_overhead,
}];

fn err(e: pipefence::Error) -> String {
    e.to_string()
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One side of the comparison: a device, and its recorder when tracing is on.
struct Side {
    dev: Device,
    recorder: Option<Arc<TraceRecorder>>,
}

impl Side {
    fn new(workers: usize, traced: bool) -> Result<Side, String> {
        let recorder = traced.then(|| Arc::new(TraceRecorder::new()));
        let dev = Device::new(DeviceDesc {
            workers,
            trace: recorder.clone().map(|r| -> Arc<dyn TraceSink> { r }),
            ..DeviceDesc::default()
        })
        .map_err(|e| format!("Device::new: {e}"))?;
        Ok(Side { dev, recorder })
    }

    fn compute_queue(&self, name: &str) -> Result<Queue, String> {
        self.dev
            .create_queue(&QueueDesc::new(QueueKind::Compute, name))
            .map_err(err)
    }

    /// Events the recorder holds (0 without one). Clones them all: call outside timed code.
    fn events(&self) -> usize {
        self.recorder.as_ref().map_or(0, |r| r.events().len())
    }
}

/// The samples of one figure.
struct Measured {
    on: Vec<f64>,
    off: Vec<f64>,
    /// Events the recorder received during each timed `on` run.
    events: Vec<usize>,
}

/// How a workload is measured: `build` sets one up on a device; `run(side, workload, warm)`
/// executes it once and returns its figure (`warm`: the warm-up run, which may be smaller).
/// `reps` interleaved on/off pairs (alternating which goes first). `fresh`: a new device (and
/// workload, with its warm-up run) for every run, so that each recorder holds one run's events
/// and reading them stays cheap; otherwise one device per side for the whole figure.
fn measure<W>(
    reps: usize,
    fresh: bool,
    workers: usize,
    build: impl Fn(&Side) -> Result<W, String>,
    run: impl Fn(&Side, &W, bool) -> Result<f64, String>,
) -> Result<Measured, String> {
    let make = |traced: bool| -> Result<(Side, W), String> {
        let side = Side::new(workers, traced)?;
        let w = build(&side)?;
        run(&side, &w, true)?;
        Ok((side, w))
    };
    let kept = if fresh {
        None
    } else {
        Some([make(true)?, make(false)?])
    };
    let mut m = Measured {
        on: Vec::new(),
        off: Vec::new(),
        events: Vec::new(),
    };
    for rep in 0..reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for traced in order {
            let one;
            let (side, w) = match &kept {
                Some(k) => {
                    let x = &k[usize::from(!traced)];
                    (&x.0, &x.1)
                }
                None => {
                    one = make(traced)?;
                    (&one.0, &one.1)
                }
            };
            let before = side.events();
            let v = run(side, w, false)?;
            if traced {
                let n = side.events() - before;
                if n == 0 {
                    return Err(format!("run {rep}: the traced device recorded no events"));
                }
                m.events.push(n);
                m.on.push(v);
            } else {
                m.off.push(v);
            }
        }
    }
    Ok(m)
}

/// The median of event counts and their range.
fn events_text(v: &[usize]) -> String {
    let med = median(&v.iter().map(|&x| x as f64).collect::<Vec<_>>());
    match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) => format!("{med:.0} [{lo} .. {hi}]"),
        _ => "none".to_string(),
    }
}

/// ns of one execution of `list`, from execute_command_lists to `wait_idle` return.
fn execute_run(device: &Device, queue: &Queue, list: &CommandList) -> Result<f64, String> {
    let t = Instant::now();
    queue.execute_command_lists(&[list]).map_err(err)?;
    device.wait_idle(WAIT_TIMEOUT).map_err(err)?;
    Ok(t.elapsed().as_nanos() as f64)
}

// ---------------------------------------------------------------------------------------------
// 1. Cross-queue chain (engine/cross-queue-chain's workload).

const CHAIN_QUEUES: usize = 4;

/// engine/cross-queue-chain's timed chain (ns per hop).
fn chain_run(device: &Device, queues: &[Queue], rounds: u64) -> Result<f64, String> {
    crate::engine::engine_chain(device, queues, rounds)
}

// ---------------------------------------------------------------------------------------------
// 2. Overlapping dispatches.

const DISPATCHES: usize = 200;
const DISPATCH_GROUPS: u32 = 16;
const DISPATCH_BUFFER: u64 = 1 << 20;
const FILL_VALUE: u32 = 0xABAB_ABAB;
/// Bytes one dispatch group covers (64 u32 lanes).
const GROUP_BYTES: u64 = 256;

/// A closed list of [`DISPATCHES`] `fill` dispatches of [`DISPATCH_GROUPS`] groups each over a
/// fresh DeviceLocal buffer, nothing between them (they overlap).
fn dispatch_list(dev: &Device) -> Result<(Buffer, CommandList), String> {
    let buf = dev
        .create_buffer(&BufferDesc::new(DISPATCH_BUFFER, Heap::DeviceLocal).named("dst"))
        .map_err(err)?;
    let k = Kernel::fill(buf.gpu_address(), FILL_VALUE);
    let mut l = dev
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "dispatches"))
        .map_err(err)?;
    for _ in 0..DISPATCHES {
        l.dispatch(&k, DISPATCH_GROUPS);
    }
    l.close().map_err(err)?;
    Ok((buf, l))
}

/// Checks that the last group's last word was filled.
fn check_fill(buf: &Buffer) -> Result<(), String> {
    let last = u64::from(DISPATCH_GROUPS) * GROUP_BYTES - 4;
    let got = buf.tools().debug_read_u32(last).map_err(err)?;
    if got != FILL_VALUE {
        return Err(format!(
            "dispatches: dst[{last}] = {got:#x}, expected {FILL_VALUE:#x}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Command throughput (engine/command-throughput's workload).

// ---------------------------------------------------------------------------------------------

fn bench_overhead(cfg: &Config) -> Result<Report, String> {
    // 1. Chain: a fresh device per run (one run's events per recorder); warm-up as
    // engine/cross-queue-chain does.
    let rounds: u64 = cfg.pick(2_000, 500);
    let chain_reps = cfg.pick(15, 7);
    let chain = measure(
        chain_reps,
        true,
        1,
        |s| {
            (0..CHAIN_QUEUES)
                .map(|i| s.compute_queue(&format!("chain{i}")))
                .collect::<Result<Vec<Queue>, String>>()
        },
        |s, q, warm| chain_run(&s.dev, q, if warm { (rounds / 10).max(20) } else { rounds }),
    )?;

    // 2. Dispatches: a fresh device per run too.
    let disp_reps = cfg.pick(41, 21);
    let workers = cpus();
    let disp = measure(
        disp_reps,
        true,
        workers,
        |s| {
            let q = s.compute_queue("dispatch")?;
            let (b, l) = dispatch_list(&s.dev)?;
            Ok((q, b, l))
        },
        |s, (q, b, l), _| {
            let ns = execute_run(&s.dev, q, l)?;
            check_fill(b)?;
            Ok(ns)
        },
    )?;

    // 3. Throughput: one device per side (recording the list is slow; a run records few
    // events).
    let packets: u64 = cfg.pick(1_000_000, 100_000);
    let tp_reps = cfg.pick(7, 5);
    let last = packets / 2 - 1;
    let tp = measure(
        tp_reps,
        false,
        1,
        |s| {
            let q = s.compute_queue("cp")?;
            let b = s
                .dev
                .create_buffer(&BufferDesc::new(SMALL_BUFFER, Heap::Shared).named("small"))
                .map_err(err)?;
            let l = throughput_list(&s.dev, &b, packets)?;
            Ok((q, b, l))
        },
        |s, (q, b, l), _| {
            let ns = execute_run(&s.dev, q, l)?;
            let got = b.read_u32(write_offset(last)).map_err(err)?;
            if got != last as u32 {
                return Err(format!("throughput: last write {got}, expected {last}"));
            }
            Ok(ns)
        },
    )?;

    let mpps = |v: &[f64]| packets as f64 / median(v) * 1e3;
    Ok(Report::new("trace/overhead")
        .note(format!(
            "each figure: a device with a TraceRecorder sink (tracing on) vs an identical device \
             without one (tracing off, the baseline), runs interleaved on/off (order \
             alternating); {} CPUs",
            cpus()
        ))
        .note(format!(
            "chain: engine/cross-queue-chain's workload, N={CHAIN_QUEUES} queues, {rounds} rounds \
             per run, {chain_reps} runs per side, each on a fresh device (1 worker) after a \
             warm-up of {} rounds; ns per hop",
            (rounds / 10).max(20)
        ))
        .note(format!(
            "dispatches: one compute queue executes a list of {DISPATCHES} fill dispatches x \
             {DISPATCH_GROUPS} groups over a {} MiB DeviceLocal buffer (nothing between them: \
             they overlap); execute_command_lists to wait_idle; {disp_reps} runs per side, each \
             on a fresh device ({workers} workers) after 1 warm-up run",
            DISPATCH_BUFFER >> 20
        ))
        .note(format!(
            "throughput: engine/command-throughput's list of {packets} packets (satisfied \
             wait_value32 / write_value32_top_of_pipe); execute to wait_idle; {tp_reps} runs \
             per side on one device each (1 worker) after 1 warm-up run; median packets/s: on \
             {:.1} M/s, off {:.1} M/s",
            mpps(&tp.on),
            mpps(&tp.off)
        ))
        .note(format!(
            "trace events recorded per `on` run, median [min .. max] (TraceRecorder::events().len() \
             after minus before, not timed): chain {}; dispatches {}; throughput {}",
            events_text(&chain.events),
            events_text(&disp.events),
            events_text(&tp.events)
        ))
        .figure(
            format!("chain N={CHAIN_QUEUES}: ns per hop"),
            Stats::from_samples(chain.on),
            Unit::Ns,
        )
        .baseline("tracing off", Stats::from_samples(chain.off))
        .ratio(1.25)
        .figure(
            format!("{DISPATCHES} dispatches: time per run"),
            Stats::from_samples(disp.on),
            Unit::Ns,
        )
        .baseline("tracing off", Stats::from_samples(disp.off))
        .ratio(1.25)
        .figure(
            format!("{packets} packets: time per run"),
            Stats::from_samples(tp.on),
            Unit::Ns,
        )
        .baseline("tracing off", Stats::from_samples(tp.off))
        .ratio(2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_text_median_and_range() {
        assert_eq!(events_text(&[3, 1, 2]), "2 [1 .. 3]");
        assert_eq!(events_text(&[]), "none");
    }

    #[test]
    fn measure_counts_traced_events_only() {
        for fresh in [true, false] {
            let m = measure(
                2,
                fresh,
                1,
                |s| {
                    let q = s.compute_queue("t")?;
                    let (b, l) = dispatch_list(&s.dev)?;
                    Ok((q, b, l))
                },
                |s, (q, b, l), _| {
                    let ns = execute_run(&s.dev, q, l)?;
                    check_fill(b)?;
                    Ok(ns)
                },
            )
            .unwrap();
            assert_eq!((m.on.len(), m.off.len(), m.events.len()), (2, 2, 2));
            assert!(m.events.iter().all(|&n| n > 0));
        }
    }

    #[test]
    fn untraced_side_has_no_recorder() {
        let s = Side::new(1, false).unwrap();
        assert!(s.recorder.is_none());
        assert_eq!(s.events(), 0);
    }
}
