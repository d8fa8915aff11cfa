//! Exhaustive-exploration benchmarks (`pipefence check --exhaustive`, `docs/exploration.md`):
//!
//! - `schedules/exhaustive-rate`: schedules per second of the reduced exhaustive search
//!   against sampled `check` on the same scenario and the same number of schedules, measured
//!   in the same run (goal: at least 0.5x: the reduction's bookkeeping may cost, not
//!   dominate). Runs the search stops as asleep or repeated cost time and are not counted as
//!   schedules, so they weigh on the figure, as they do for a user. Each side's timing covers
//!   at least [`MIN_TIMED`] schedules (20 with `--quick`): a search of fewer is timed that many
//!   times over (its searches back to back), as sampled `check` runs at least that many.
//! - `schedules/exhaustive-jobs`: schedules per second of complete reduced searches on 2
//!   threads against 1 thread, in the same run (goal: at least 1.7x on this 2-core machine;
//!   the report is the same whatever the threads), and, for scale, two independent 1-thread
//!   searches run at once against one alone (what the machine gives two threads).
//! - `schedules/exhaustive-examples`: the wall time to prove each example, or, where the
//!   reduced search does not complete within 2,000 schedules, to explore it up to
//!   preemption bound 2 (goal: under 60 s each).

use crate::harness::{Bench, Config, Goal, Report, Stats, Unit};
use crate::schedules::{example_paths, load_kdl, workspace_dir};
use pipefence::explore::ExhaustiveOptions;
use pipefence_scenario::check::{check, CheckOptions};
use pipefence_scenario::exhaustive::{check_exhaustive, ExhaustiveCheckOptions, ExhaustiveReport};
use pipefence_scenario::plan::Scenario;
use std::time::Instant;

/// The exhaustive benchmarks, in running order.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "schedules/exhaustive-rate",
        about: "reduced exhaustive schedules/s vs sampled check schedules/s, same scenario",
        run: bench_rate,
    },
    Bench {
        name: "schedules/exhaustive-jobs",
        about: "complete reduced exhaustive searches: -j 2 schedules/s vs -j 1, same scenario",
        run: bench_jobs,
    },
    Bench {
        name: "schedules/exhaustive-examples",
        about: "time to prove each example, or to bound it at preemption bound 2",
        run: bench_examples,
    },
];

/// Every example and `tests/scenarios/*.kdl`, by name.
fn scenarios() -> Result<Vec<(String, Scenario)>, String> {
    let mut paths = example_paths()?;
    let dir = workspace_dir().join("tests/scenarios");
    let mut more: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
        .collect();
    more.sort();
    paths.extend(more);
    paths.iter().map(|p| load_kdl(p)).collect()
}

/// The search `schedules/exhaustive-rate` times (and `--workload exhaustive` counts): the
/// reduced one unless a preemption bound is given, strict off, one thread, no shrinking; its
/// report and seconds.
pub(crate) fn exhaustive(
    sc: &Scenario,
    max_schedules: u64,
    preemption_bound: Option<u32>,
) -> (ExhaustiveReport, f64) {
    exhaustive_with(sc, false, max_schedules, preemption_bound, 1)
}

fn exhaustive_with(
    sc: &Scenario,
    strict: bool,
    max_schedules: u64,
    preemption_bound: Option<u32>,
    jobs: usize,
) -> (ExhaustiveReport, f64) {
    let opts = ExhaustiveCheckOptions {
        strict,
        bounds: ExhaustiveOptions {
            max_schedules,
            preemption_bound,
            reduction: preemption_bound.is_none(),
        },
        shrink: None,
        parallel: pipefence::explore::Parallel { jobs, shard: None },
        fail_fast: false,
    };
    let t = Instant::now();
    let r = check_exhaustive(sc, &opts, |_| {});
    (r, t.elapsed().as_secs_f64())
}

/// Sampled `check` of `n` schedules as `schedules/exhaustive-rate` times it (and `--workload
/// sampled` counts): seeds from 0, strict off, one thread; the schedules run.
pub(crate) fn sampled(sc: &Scenario, n: u64) -> u64 {
    let opts = CheckOptions {
        schedules: n,
        seed: 0,
        strict: false,
    };
    check(sc, &opts, |_| {}).schedules
}

/// The fewest schedules one timing of `schedules/exhaustive-rate` covers, on either side (a
/// proof of one schedule takes about 20 µs here: fewer schedules time little more than the
/// machine's noise).
const MIN_TIMED: u64 = 500;

fn bench_rate(cfg: &Config) -> Result<Report, String> {
    let max: u64 = cfg.pick(1000, 60);
    let reps = cfg.pick(3, 1);
    let min_timed = cfg.pick(MIN_TIMED, 20);
    let mut report = Report::new("schedules/exhaustive-rate").note(format!(
        "each scenario: the reduced exhaustive search (check --exhaustive, strict off, no \
         shrinking) up to {max} schedules, {reps} time(s), a search of fewer than \
         {min_timed} schedules timed over as many searches back to back as make {min_timed}; \
         baseline: sampled check of as many schedules (at least {min_timed}); figure: \
         schedules/s; ratio = exhaustive / sampled"
    ));
    for (name, sc) in scenarios()? {
        let (mut ex, mut rates) = (Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..reps {
            let (r, mut secs) = exhaustive(&sc, max, None);
            let mut searched = r.schedules;
            while searched < min_timed && r.schedules > 0 {
                let (again, s) = exhaustive(&sc, max, None);
                if again.schedules != r.schedules {
                    return Err(format!("{name}: the same search found another number"));
                }
                searched += again.schedules;
                secs += s;
            }
            ex.push(searched as f64 / secs);
            let n = r.schedules.max(min_timed);
            let t = Instant::now();
            sampled(&sc, n);
            rates.push(n as f64 / t.elapsed().as_secs_f64());
            last = Some(r);
        }
        let r = last.ok_or("no repetition ran")?;
        let what = if r.complete {
            format!("complete, {}", r.schedules)
        } else {
            format!("bounded, {}", r.schedules)
        };
        report = report
            .figure(
                format!("{name} ({what}; {} asleep): schedules/s", r.sleep_blocked),
                Stats::from_samples(ex),
                Unit::PerSec,
            )
            .baseline("sampled check", Stats::from_samples(rates))
            .higher_is_better()
            .ratio(0.5);
    }
    Ok(report)
}

/// Scenarios whose reduced search completes in a second or so (hundreds to thousands of
/// schedules: smaller ones measure the threads' start, not the search), with `--strict` or not.
/// (ring-buffer in the plain model was one of them until its search left the clock out of the
/// relation: it is one schedule now. async-compute `--strict` was one until its search shrank
/// to 2 schedules, which leave a second thread nothing to explore; the example ring cut to
/// four frames, 589 strict schedules then, 112 now, took its place. cpu-gpu-handshake
/// `--strict`, 30 schedules of 5 ms in all (6 since a host whose poll only a release lets
/// pass follows the whole release), gave way to a host polling a flag raised top-of-pipe,
/// 1,091 strict schedules of about 0.35 s. page-fault and stale-cache
/// `--strict`, 6,419 (3,388 until a CPU wait's registration became an action of its own)
/// and 96 schedules of a fraction of a millisecond each, stay to show what
/// small runs get.)
const JOBS_SCENARIOS: [(&str, bool); 4] = [
    ("tests/scenarios/page-fault.kdl", true),
    (
        "crates/pipefence-bench/scenarios/host-flag-top-of-pipe.kdl",
        true,
    ),
    (
        "crates/pipefence-bench/scenarios/ring-buffer-four-frames.kdl",
        true,
    ),
    ("tests/scenarios/stale-cache.kdl", true),
];

fn bench_jobs(cfg: &Config) -> Result<Report, String> {
    let reps = cfg.pick(3, 1);
    let cases = cfg.pick(&JOBS_SCENARIOS[..], &JOBS_SCENARIOS[..1]);
    let mut report = Report::new("schedules/exhaustive-jobs").note(format!(
        "each scenario: the complete reduced exhaustive search (no shrinking), {reps} time(s) \
         on 2 threads and on 1, alternating; figure: schedules/s on 2 threads; baseline: on 1; \
         ratio = 2 threads / 1 thread (the two reports are checked to be the same); beside it, \
         for scale, two independent 1-thread searches run at once against one alone: the \
         most that two threads can give on this machine at this time"
    ));
    for &(file, strict) in cases {
        let (name, sc) = load_kdl(&workspace_dir().join(file))?;
        let (mut two, mut one) = (Vec::new(), Vec::new());
        let mut last = None;
        let mut pair = Vec::new();
        for _ in 0..reps {
            let (r1, s1) = exhaustive_with(&sc, strict, 100_000, None, 1);
            let (r2, s2) = exhaustive_with(&sc, strict, 100_000, None, 2);
            // The machine's own ceiling: the same 1-thread search twice at once, on two
            // threads that share nothing but the scenario.
            let t = Instant::now();
            let n: u64 = std::thread::scope(|s| {
                let a = s.spawn(|| exhaustive_with(&sc, strict, 100_000, None, 1).0.schedules);
                let b = exhaustive_with(&sc, strict, 100_000, None, 1).0.schedules;
                a.join().unwrap_or(0) + b
            });
            pair.push(n as f64 / t.elapsed().as_secs_f64());
            if (r1.schedules, r1.outcomes, r1.failing, r1.complete)
                != (r2.schedules, r2.outcomes, r2.failing, r2.complete)
            {
                return Err(format!("{name}: -j 2 and -j 1 disagree"));
            }
            one.push(r1.schedules as f64 / s1);
            two.push(r2.schedules as f64 / s2);
            last = Some(r1);
        }
        let r = last.ok_or("no repetition ran")?;
        let strict = if strict { " --strict" } else { "" };
        let what = if r.complete { "complete" } else { "bounded" };
        report = report
            .figure(
                format!(
                    "{name}{strict} ({what}, {} schedules, {} asleep): schedules/s on 2 threads",
                    r.schedules, r.sleep_blocked
                ),
                Stats::from_samples(two),
                Unit::PerSec,
            )
            .baseline("1 thread", Stats::from_samples(one.clone()))
            .higher_is_better()
            .ratio(1.7)
            .figure(
                format!(
                    "{name}{strict}: two independent 1-thread searches at once, schedules/s \
                     in all (what this machine gives two threads that share nothing)"
                ),
                Stats::from_samples(pair),
                Unit::PerSec,
            )
            .baseline("1 thread", Stats::from_samples(one))
            .higher_is_better();
    }
    Ok(report)
}

fn bench_examples(cfg: &Config) -> Result<Report, String> {
    let reduced: u64 = cfg.pick(100_000, 100);
    let max: u64 = cfg.pick(100_000, 100);
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut report = Report::new("schedules/exhaustive-examples").note(format!(
        "each example: the reduced exhaustive search up to {reduced} schedules (no \
         shrinking, -j {jobs}: every CPU, as check --exhaustive runs by default); where it \
         does not complete, the plain search bounded to 2 preemptions (up to {max} schedules) \
         instead; figure: wall time of the search that gave the result; goal: under 60 s, for \
         a search that reached its end (one cut by its schedule limit first is info: neither \
         proved nor bounded)"
    ));
    for path in example_paths()? {
        let (name, sc) = load_kdl(&path)?;
        let (r, secs) = exhaustive_with(&sc, false, reduced, None, jobs);
        // Whether the search reached its end: proved, or every schedule within 2 preemptions.
        let (how, reached, r, secs) = if r.complete {
            ("proved".to_string(), true, r, secs)
        } else {
            let (b, s) = exhaustive_with(&sc, false, max, Some(2), jobs);
            let (how, reached) = match (&b.bound, b.complete) {
                (_, true) => ("proved within bound 2".to_string(), true),
                (Some(bound), false) if bound.starts_with("--preemption-bound") => {
                    ("every schedule within 2 preemptions".to_string(), true)
                }
                (Some(bound), false) => (
                    format!("NOT bounded at 2 preemptions: {bound} came first"),
                    false,
                ),
                (None, false) => ("stopped".to_string(), false),
            };
            (how, reached, b, s)
        };
        report = report
            .figure(
                format!(
                    "{name}: {how}, {} schedules, {} failing",
                    r.schedules, r.failing
                ),
                Stats::single(secs * 1e9),
                Unit::Ns,
            )
            .goal(if reached {
                Goal::ValueBelow(60e9)
            } else {
                Goal::None
            });
    }
    Ok(report)
}
