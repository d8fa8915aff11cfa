//! Memory-model benchmarks (issue 7): what strict mode and the validation layer cost.
//!
//! `strict/schedules`: deterministic schedules of each example scenario under the three memory
//! models, plain (the baseline), strict and validate (hazard analysis only), on the same seeds
//! in the same run. The goal: a strict schedule costs at most three plain ones.
//!
//! `strict/validation-layer`: engine/command-throughput's and engine/kernel-bandwidth's
//! workloads on the threaded driver, on a device with [`MemoryModel::Validate`] against an
//! identical one with [`MemoryModel::Plain`]; the ratio is reported, no goal.

use crate::alloc;
use crate::engine::{cpus, device_with, KernelRig, ThroughputRig, ADD_RESULT, FILL_VALUE};
use crate::harness::{median, Bench, Config, Report, Stats, Unit};
use crate::schedules::{command_count, example_paths, load_kdl, workspace_dir};
use pipefence::{Device, MemoryModel};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::run::{run, DriverKind, RunOptions, Status};
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

/// The memory-model benchmarks, in running order.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "strict/schedules",
        about: "deterministic schedules per scenario: strict and validate vs plain, same seeds",
        run: bench_schedules,
    },
    Bench {
        name: "strict/validation-layer",
        about: "threaded command throughput and kernel bandwidth, MemoryModel::Validate vs Plain",
        run: bench_validation_layer,
    },
];

// ---------------------------------------------------------------------------------------------
// 1. Schedules per memory model.

/// The goal: a strict schedule takes at most this many times a plain one.
const STRICT_GOAL: f64 = 3.0;

/// Examples left out: `deadlock.kdl` expects a removal (hang detection, no data traffic).
const LEFT_OUT: &[&str] = &["deadlock"];

/// Scenarios measured besides the examples, relative to the workspace root.
const EXTRA: &[&str] = &["tests/scenarios/pfp-indirect-race.kdl"];

/// The measured scenarios: `examples/*.kdl` but [`LEFT_OUT`], then [`EXTRA`].
fn scenarios() -> Result<Vec<(String, Scenario)>, String> {
    let mut paths: Vec<PathBuf> = example_paths()?
        .into_iter()
        .filter(|p| {
            !p.file_stem()
                .is_some_and(|s| LEFT_OUT.iter().any(|l| s == *l))
        })
        .collect();
    paths.extend(EXTRA.iter().map(|p| workspace_dir().join(p)));
    paths.iter().map(|p| load_kdl(p)).collect()
}

/// A memory model as the scenario runner selects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Strict,
    Validate,
}

/// The models, in the order of their [`ModeRuns`] (plain first: it is the baseline).
const MODES: [Mode; 3] = [Mode::Plain, Mode::Strict, Mode::Validate];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Strict => "strict",
            Mode::Validate => "validate",
        }
    }

    /// The deterministic driver with seed `seed`, in this model.
    fn options(self, seed: u64) -> RunOptions {
        RunOptions {
            driver: DriverKind::Deterministic,
            seed,
            strict: self == Mode::Strict,
            validate: self == Mode::Validate,
            trace: false,
            schedule: None,
        }
    }
}

/// What one model measured on one scenario.
#[derive(Debug, Default)]
struct ModeRuns {
    /// ns per schedule, one sample per chunk of seeds.
    ns: Vec<f64>,
    /// Timed schedules.
    schedules: u64,
    /// Of which passed.
    passed: u64,
    /// Of which reported at least one hazard.
    with_hazards: u64,
}

impl ModeRuns {
    /// Runs `scenario` once per seed of `seeds` in `mode`, timing the whole chunk.
    fn chunk(&mut self, sc: &Scenario, mode: Mode, seeds: Range<u64>) {
        let n = seeds.end - seeds.start;
        let t = Instant::now();
        for seed in seeds {
            let o = run(sc, &mode.options(seed));
            self.passed += u64::from(o.status == Status::Passed);
            self.with_hazards += u64::from(!o.hazards.is_empty());
        }
        self.ns
            .push(t.elapsed().as_nanos() as f64 / n.max(1) as f64);
        self.schedules += n;
    }

    /// Median schedules per second.
    fn per_sec(&self) -> f64 {
        1e9 / median(&self.ns)
    }

    /// `passed/schedules`, plus the schedules with hazards when there are any.
    fn outcome(&self) -> String {
        let mut s = format!("{}/{}", self.passed, self.schedules);
        if self.with_hazards > 0 {
            s += &format!(" ({} with hazards)", self.with_hazards);
        }
        s
    }
}

/// Measures `sc` in every model: one untimed warm-up schedule each (seed 0), then `chunks`
/// chunks of `per_chunk` seeds (seeds 0, 1, ...), every model running the same chunk before
/// the next one starts, in an order rotating chunk by chunk.
fn measure(sc: &Scenario, chunks: u64, per_chunk: u64) -> [ModeRuns; 3] {
    for mode in MODES {
        let _ = run(sc, &mode.options(0));
    }
    let mut m: [ModeRuns; 3] = Default::default();
    for c in 0..chunks {
        let seeds = c * per_chunk..(c + 1) * per_chunk;
        for k in 0..MODES.len() {
            let i = (k + c as usize) % MODES.len();
            m[i].chunk(sc, MODES[i], seeds.clone());
        }
    }
    m
}

fn bench_schedules(cfg: &Config) -> Result<Report, String> {
    let chunks: u64 = cfg.pick(10, 3);
    let per_chunk: u64 = cfg.pick(50, 4);
    let schedules = chunks * per_chunk;
    let scenarios = scenarios()?;
    let mut report = Report::new("strict/schedules")
        .note(format!(
            "{schedules} deterministic schedules per scenario and memory model (seeds 0..{}, \
             the same in every model) as {chunks} chunks of {per_chunk}, after 1 untimed \
             warm-up schedule per model; each schedule is one pipefence_scenario::run::run \
             (a fresh device); the three models take turns chunk by chunk (order rotating); \
             figure: wall time per schedule of each chunk",
            schedules - 1
        ))
        .note(
            "models: plain (RunOptions{driver: Deterministic}, the baseline), strict \
             (strict: true: visibility model plus hazard analysis), validate (deterministic, \
             validate: true: hazard analysis only); goal: strict <= 3x plain's time per \
             schedule (i.e. plain/strict schedules/s <= 3); validate: ratio reported, no goal",
        )
        .note(format!(
            "scenarios: examples/*.kdl except {}, and {}; passed = schedules whose status is \
             passed (strict and validate fail a schedule that reports a hazard)",
            LEFT_OUT
                .iter()
                .map(|l| format!("{l}.kdl"))
                .collect::<Vec<_>>()
                .join(", "),
            EXTRA.join(", ")
        ));
    // Per chunk: the time of one schedule of every scenario, per model.
    let mut totals: [Vec<f64>; 3] = Default::default();
    for t in &mut totals {
        t.resize(chunks as usize, 0.0);
    }
    let mut figures = Vec::new();
    for (name, sc) in &scenarios {
        let m = measure(sc, chunks, per_chunk);
        for (total, runs) in totals.iter_mut().zip(&m) {
            for (t, ns) in total.iter_mut().zip(&runs.ns) {
                *t += ns;
            }
        }
        let each = |f: &dyn Fn(&ModeRuns) -> String| {
            MODES
                .iter()
                .zip(&m)
                .map(|(mode, r)| format!("{} {}", mode.name(), f(r)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        report = report.note(format!(
            "{name} ({} cmds): schedules/s {}; passed: {}",
            command_count(sc),
            each(&|r| Unit::PerSec.format(r.per_sec())),
            each(&ModeRuns::outcome),
        ));
        figures.push((name.clone(), m));
    }
    let [plain_total, strict_total, validate_total] = totals;
    for (name, [plain, strict, validate]) in figures {
        report = report
            .figure(
                format!("{name}: strict, time per schedule"),
                Stats::from_samples(strict.ns),
                Unit::Ns,
            )
            .baseline("plain", Stats::from_samples(plain.ns.clone()))
            .ratio(STRICT_GOAL)
            .figure(
                format!("{name}: validate, time per schedule"),
                Stats::from_samples(validate.ns),
                Unit::Ns,
            )
            .baseline("plain", Stats::from_samples(plain.ns));
    }
    let n = scenarios.len();
    Ok(report
        .figure(
            format!("all {n}: strict, one schedule of each"),
            Stats::from_samples(strict_total),
            Unit::Ns,
        )
        .baseline("plain", Stats::from_samples(plain_total.clone()))
        .ratio(STRICT_GOAL)
        .figure(
            format!("all {n}: validate, one schedule of each"),
            Stats::from_samples(validate_total),
            Unit::Ns,
        )
        .baseline("plain", Stats::from_samples(plain_total)))
}

// ---------------------------------------------------------------------------------------------
// 2. The validation layer on the threaded driver.

/// One device per memory model: `[plain, validate]`.
fn devices(workers: usize) -> Result<[Device; 2], String> {
    Ok([
        device_with(workers, MemoryModel::Plain)?,
        device_with(workers, MemoryModel::Validate)?,
    ])
}

/// `reps` interleaved runs of `run(i)` for i = 0 (plain) and 1 (validate), the order
/// alternating: the samples `[plain, validate]`.
fn interleaved(
    reps: usize,
    mut run: impl FnMut(usize) -> Result<f64, String>,
) -> Result<[Vec<f64>; 2], String> {
    let mut s: [Vec<f64>; 2] = Default::default();
    for rep in 0..reps {
        for k in 0..2 {
            let i = (k + rep) % 2;
            s[i].push(run(i)?);
        }
    }
    Ok(s)
}

/// The hazards device `dev` reported, in words (`none` when there are none).
fn hazards_text(dev: &Device) -> String {
    let (kept, dropped) = (dev.hazards().len(), dev.hazards_dropped());
    if kept == 0 && dropped == 0 {
        "none".to_string()
    } else {
        format!("{kept} reported, {dropped} dropped")
    }
}

/// plain / validate medians (the validation layer's slowdown on a higher-is-better figure).
fn slowdown(s: &[Vec<f64>; 2]) -> String {
    Unit::Factor.format(median(&s[0]) / median(&s[1]))
}

fn bench_validation_layer(cfg: &Config) -> Result<Report, String> {
    // Command throughput (engine/command-throughput's list), one worker.
    let packets: u64 = cfg.pick(1_000_000, 100_000);
    let tp_reps = cfg.pick(7, 3);
    let tp_devs = devices(1)?;
    let tp_rigs = [
        ThroughputRig::new(&tp_devs[0], packets)?,
        ThroughputRig::new(&tp_devs[1], packets)?,
    ];
    // Warm-up (measuring what one execution leaves on the heap), and the check that every
    // packet ran.
    let mut tp_heap = Vec::new();
    for (dev, rig) in tp_devs.iter().zip(&tp_rigs) {
        let (r, bytes) = alloc::measure(|| rig.run(dev));
        r?;
        tp_heap.push(bytes);
        let (last, got) = rig.last_write()?;
        if got != last as u32 {
            return Err(format!(
                "throughput ({:?}): last write {got}, expected {last}",
                dev.desc().memory_model
            ));
        }
    }
    let tp = interleaved(tp_reps, |i| tp_rigs[i].run(&tp_devs[i]))?;

    // Kernel bandwidth (engine/kernel-bandwidth's dispatches), at a smaller size: the
    // validation layer keeps shadow state for the memory a dispatch touches.
    let size: u64 = cfg.pick(4, 1) << 20;
    let k_reps = cfg.pick(5, 3);
    let workers = cpus();
    let k_devs = devices(workers)?;
    let mut k_rigs = Vec::new();
    let mut heap = Vec::new();
    for dev in &k_devs {
        // Warm-up: the first fill and add (measuring what they leave on the heap).
        let (rig, bytes) = alloc::measure(|| -> Result<KernelRig, String> {
            let rig = KernelRig::new(dev, size)?;
            rig.run_fill(dev)?;
            rig.run_add(dev)?;
            Ok(rig)
        });
        let rig = rig?;
        rig.check("add", ADD_RESULT)?;
        heap.push(bytes);
        k_rigs.push(rig);
    }
    let fill = interleaved(k_reps, |i| k_rigs[i].run_fill(&k_devs[i]))?;
    for r in &k_rigs {
        r.check("fill", FILL_VALUE)?;
    }
    let add = interleaved(k_reps, |i| k_rigs[i].run_add(&k_devs[i]))?;
    for r in &k_rigs {
        r.check("add", ADD_RESULT)?;
    }
    let mib = size >> 20;
    let groups = k_rigs[0].groups;
    let words = 2 * size / 4;

    let figure = |r: Report, label: String, unit: Unit, [plain, validate]: [Vec<f64>; 2]| {
        r.figure(label, Stats::from_samples(validate), unit)
            .baseline("plain", Stats::from_samples(plain))
            .higher_is_better()
    };
    let slow = (slowdown(&tp), slowdown(&fill), slowdown(&add));
    let report = Report::new("strict/validation-layer")
        .note(
            "each figure: a threaded device with DeviceDesc.memory_model = Validate (hazard \
             analysis) vs an identical device with Plain (the baseline), runs interleaved \
             (order alternating), each side on its own device for the whole figure; ratio = \
             validate/plain (higher is better); no goal",
        )
        .note(format!(
            "throughput: engine/command-throughput's list of {packets} packets (satisfied \
             wait_value32 / write_value32_top_of_pipe on a Shared buffer), 1 worker; execute \
             to wait_idle; {tp_reps} runs per side after 1 warm-up"
        ))
        .note(format!(
            "fill / add: engine/kernel-bandwidth's dispatches over {mib} MiB DeviceLocal \
             buffers ({groups} groups; that benchmark uses 256 MiB), {workers} workers ({} \
             CPUs); GB/s = bytes written (fill) or read + written (add) / time from execute to \
             wait_idle; {k_reps} runs per side after 1 warm-up fill + add",
            cpus()
        ))
        .note(format!(
            "slowdown plain/validate (medians): throughput {}, fill {}, add {}",
            slow.0, slow.1, slow.2
        ))
        .note(format!(
            "heap left allocated (alloc::measure, untimed warm-ups): by one execution of the \
             {packets}-packet list: validate {} ({} per packet), plain {}; by creating the \
             kernel buffers and lists plus the first fill + add ({words} words of dst and src \
             touched): validate {} ({} per word), plain {}",
            Unit::Bytes.format(tp_heap[1] as f64),
            Unit::Bytes.format(tp_heap[1] as f64 / packets as f64),
            Unit::Bytes.format(tp_heap[0] as f64),
            Unit::Bytes.format(heap[1] as f64),
            Unit::Bytes.format(heap[1] as f64 / words as f64),
            Unit::Bytes.format(heap[0] as f64),
        ))
        .note(format!(
            "hazards on the validate devices (expected none): throughput {}, kernels {}",
            hazards_text(&tp_devs[1]),
            hazards_text(&k_devs[1])
        ));
    let report = figure(
        report,
        format!("{packets} packets: packets per second"),
        Unit::PerSec,
        tp,
    );
    let report = figure(
        report,
        format!("fill {mib} MiB: bandwidth"),
        Unit::BytesPerSec,
        fill,
    );
    Ok(figure(
        report,
        format!("add {mib} MiB: bandwidth"),
        Unit::BytesPerSec,
        add,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_load_without_deadlock() {
        let sc = scenarios().unwrap();
        let names: Vec<&str> = sc.iter().map(|(n, _)| n.as_str()).collect();
        assert!(!names.contains(&"deadlock"), "{names:?}");
        assert!(names.contains(&"pfp-indirect-race"), "{names:?}");
        assert!(names.contains(&"missing-writeback"), "{names:?}");
    }

    #[test]
    fn modes_select_the_runner_options() {
        let o = Mode::Strict.options(7);
        assert_eq!(
            (o.driver, o.seed, o.strict, o.validate),
            (DriverKind::Deterministic, 7, true, false)
        );
        let o = Mode::Validate.options(3);
        assert_eq!((o.strict, o.validate), (false, true));
        let o = Mode::Plain.options(0);
        assert_eq!((o.strict, o.validate), (false, false));
    }

    #[test]
    fn interleaved_alternates_order() {
        let mut order = Vec::new();
        let s = interleaved(3, |i| {
            order.push(i);
            Ok(i as f64)
        })
        .unwrap();
        assert_eq!(order, [0, 1, 1, 0, 0, 1]);
        assert_eq!(s, [vec![0.0; 3], vec![1.0; 3]]);
    }
}
