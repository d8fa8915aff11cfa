//! `pipefence`: the command line. Thin by design: arguments, then the scenario crate and the
//! library, then printing. Exit status (docs/scenario-language.md): 0 passed, 1 failed, 2 invalid
//! scenario or command line, 3 device removed unexpectedly.

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use pipefence_scenario::check::{
    check_with, parse_count, CheckMode, CheckOptions, CheckReport, Shard,
};
use pipefence_scenario::merge::{SampledOptions, ScenarioId, ShardedReport};
use pipefence_scenario::run::{
    run, site_text, writer_text, DriverKind, Outcome, RunOptions, Status,
};
use pipefence_scenario::{parse, render_diagnostics};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod exhaustive;
mod shard;

use shard::ShardSource;
mod html;

#[derive(Parser, Debug)]
#[command(
    name = "pipefence",
    version,
    about = "Run GPU multi-engine synchronization scenarios on the strictest legal software GPU",
    long_about = "pipefence executes Xbox D3D12 multi-engine synchronization (fences, queue waits and \
signals, masked memory-value waits on the ME or the PFP, top/bottom-of-pipe writes) on a software \
GPU and, when a program hangs, says why: which queue waits on what, who last wrote it, and the \
cycle between queues.\n\nExit status: 0 passed, 1 an expectation failed (or a host wait timed \
out), 2 invalid scenario or command line, 3 the device was removed unexpectedly."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Driver {
    /// Real threads, real time.
    Threaded,
    /// One thread, virtual time, a seeded schedule.
    Deterministic,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario once.
    Run {
        /// The scenario file (KDL).
        file: PathBuf,
        /// The driver.
        #[arg(long, value_enum, default_value_t = Driver::Threaded)]
        driver: Driver,
        /// The deterministic driver's schedule seed (default 0); only with `--driver
        /// deterministic` or `--strict`.
        #[arg(long)]
        seed: Option<u64>,
        /// Strict mode (docs/memory-model.md): the weakest legal GPU (per-engine write-back
        /// buffers, stale read caches, maximal PFP run-ahead) plus hazard reports; implies the
        /// deterministic driver. A hazard fails the run (exit 1).
        #[arg(long)]
        strict: bool,
        /// Hazard reports without changing any value (a validation layer, slower); works with
        /// either driver. A hazard fails the run (exit 1).
        #[arg(long)]
        validate: bool,
        /// Print exactly one JSON object on stdout (summaries go to stderr).
        #[arg(long)]
        json: bool,
        /// Write a Chrome/Perfetto trace.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Write an SVG timeline.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
        /// Write a self-contained HTML report: status, replay commands, the hang, hazards and
        /// failed expectations with their scenario lines, the timeline inline.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Replay one schedule of the deterministic driver from its schedule string (printed
        /// by `check --exhaustive` for every failure; docs/exploration.md); implies the
        /// deterministic driver. Not with `--seed`.
        #[arg(long, value_name = "STRING")]
        schedule: Option<String>,
    },
    /// Run a scenario under many deterministic schedules.
    Check {
        /// The scenario file (KDL).
        file: PathBuf,
        /// Number of schedules.
        #[arg(long, default_value_t = 100)]
        schedules: u64,
        /// First seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Strict mode for every schedule (see `run --strict`); a hazard fails the schedule.
        #[arg(long)]
        strict: bool,
        /// Print exactly one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Hazard reports in every schedule without changing any value (see `run --validate`);
        /// a hazard fails the schedule. `--strict` reports hazards already.
        #[arg(long)]
        validate: bool,
        /// Stop at the first failing schedule and report it.
        #[arg(long)]
        fail_fast: bool,
        /// Write an SVG timeline of each failing outcome's first seed (and of each other failing
        /// seed the report lists) into DIR, as DIR/seed-N.svg.
        #[arg(long, value_name = "DIR")]
        timeline: Option<PathBuf>,
        /// Write a Chrome/Perfetto trace of the same seeds into DIR, as DIR/seed-N.json.
        #[arg(long, value_name = "DIR")]
        trace: Option<PathBuf>,
        /// Write the HTML report (see `run --report`) of the first failing schedule (of the
        /// first seed when none fails).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Explore every schedule up to the order of independent actions (partial-order
        /// reduction) instead of sampling seeds; `complete: true` only when no bound cut it
        /// (docs/exploration.md).
        #[arg(long)]
        exhaustive: bool,
        /// With --exhaustive: no partial-order reduction (every interleaving counts apart).
        #[arg(long)]
        no_reduction: bool,
        /// With --exhaustive: stop after this many schedules (default 10000).
        #[arg(long, value_name = "N")]
        max_schedules: Option<u64>,
        /// With --exhaustive: only schedules with at most K preemptions.
        #[arg(long, value_name = "K")]
        preemption_bound: Option<u32>,
        /// Run only shard INDEX of TOTAL (0/4 to 3/4): the contiguous block of seeds from
        /// SEED + floor(INDEX * SCHEDULES / TOTAL) to SEED + floor((INDEX + 1) * SCHEDULES /
        /// TOTAL), so TOTAL shards run every seed once; `pipefence merge` combines their
        /// --json reports. Without it, Bazel's TEST_SHARD_INDEX / TEST_TOTAL_SHARDS (then
        /// TEST_SHARD_STATUS_FILE is touched) or a Kubernetes indexed job's
        /// JOB_COMPLETION_INDEX (with --total-shards) give the shard. Not with --exhaustive
        /// yet.
        #[arg(long, value_name = "INDEX/TOTAL")]
        shard: Option<String>,
        /// The number of shards when the index is JOB_COMPLETION_INDEX (a Kubernetes indexed
        /// job's completions); default PIPEFENCE_TOTAL_SHARDS.
        #[arg(long, value_name = "N")]
        total_shards: Option<String>,
        /// Threads that run schedules at once (default: the number of CPUs). The report, human
        /// and --json (but elapsed times), is the same whatever N; --fail-fast still stops at
        /// the lowest failing seed.
        #[arg(short = 'j', long, value_name = "N")]
        jobs: Option<String>,
    },
    /// Merge the --json reports of a check's shards (`check FILE --shard I/N --json`) into the
    /// report of the whole check: the same counts, outcomes and first seeds as the unsharded
    /// check; exit status as check's.
    Merge {
        /// Every shard's report, once each, in any order.
        #[arg(required = true, value_name = "REPORT")]
        files: Vec<PathBuf>,
        /// Print the merged report as one JSON object on stdout (the shape of `check --json`;
        /// the summary goes to stderr).
        #[arg(long)]
        json: bool,
    },
    /// Print shell completions on stdout (for example `pipefence completions bash >
    /// ~/.local/share/bash-completion/completions/pipefence`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout (for example `pipefence man | man -l -`).
    Man {
        /// Print the page of this subcommand instead (`pipefence man check` is
        /// pipefence-check(1)).
        command: Option<String>,
    },
}

/// `n` and `what`, with an `s` unless `n` is 1 ("1 distinct outcome", "3 schedules").
fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("pipefence: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Ctrl-C: the first stops the run or check (its summary is printed, exit 130); a second
    // exits at once.
    let _ = ctrlc::set_handler(|| {
        if pipefence_scenario::run::interrupted() {
            std::process::exit(130);
        }
        pipefence_scenario::run::interrupt();
    });
    let code = command(cli);
    if pipefence_scenario::run::interrupted() {
        eprintln!("pipefence: interrupted");
        return ExitCode::from(130);
    }
    code
}

fn command(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run {
            file,
            driver,
            seed,
            strict,
            validate,
            json,
            trace,
            timeline,
            report,
            schedule,
        } => {
            if let (Some(_), Some(s)) = (&schedule, seed) {
                return usage_error(&format!(
                    "--schedule replays one schedule and --seed {s} samples one: give only one"
                ));
            }
            if strict && driver == Driver::Threaded && std::env::args().any(|a| a == "--driver") {
                return usage_error("--strict implies the deterministic driver; it cannot be used with --driver threaded");
            }
            if strict && validate {
                return usage_error(
                    "--strict already reports hazards; --validate is for the threaded driver",
                );
            }
            let driver = match driver {
                Driver::Threaded if !strict && schedule.is_none() => DriverKind::Threaded,
                _ => DriverKind::Deterministic,
            };
            if let (Some(s), DriverKind::Threaded) = (seed, driver) {
                return usage_error(&format!(
                    "--seed {s} chooses a schedule of the deterministic driver; the threaded \
                     driver has none (add --driver deterministic, or --strict)"
                ));
            }
            let schedule = match schedule
                .map(|s| pipefence::explore::Script::from_schedule_string(&s).map(|_| s))
            {
                Some(Err(e)) => return usage_error(&e),
                Some(Ok(s)) => Some(s),
                None => None,
            };
            let mode = Mode {
                strict,
                validate,
                schedule,
            };
            run_command(
                &file,
                json,
                seed.unwrap_or(0),
                driver,
                mode,
                Pictures {
                    trace,
                    timeline,
                    report,
                },
            )
        }
        Command::Check {
            file,
            schedules,
            seed,
            strict,
            json,
            validate,
            fail_fast,
            timeline,
            trace,
            report,
            exhaustive,
            max_schedules,
            preemption_bound,
            no_reduction,
            shard,
            total_shards,
            jobs,
        } => {
            let shard = match shard::resolve(shard.as_deref(), total_shards.as_deref()) {
                Ok(s) => s,
                Err(e) => return usage_error(&e),
            };
            if exhaustive {
                if let Some((s, source)) = shard {
                    let from = match source {
                        ShardSource::Flag => "--shard",
                        ShardSource::Bazel => "TEST_SHARD_INDEX/TEST_TOTAL_SHARDS",
                        ShardSource::Kubernetes => "JOB_COMPLETION_INDEX",
                    };
                    return usage_error(&format!(
                        "shard {}/{} (from {from}): sharding exhaustive checks is not supported \
                         yet; shard a sampled check, or run --exhaustive unsharded",
                        s.index, s.total
                    ));
                }
                if let Some(j) = jobs {
                    return usage_error(&format!(
                        "--jobs {j}: an exhaustive check runs on one thread (--jobs is for \
                         sampled checks)"
                    ));
                }
                if validate
                    || fail_fast
                    || timeline.is_some()
                    || trace.is_some()
                    || report.is_some()
                {
                    return usage_error(
                        "--exhaustive takes --strict, --json, --max-schedules and \
                         --preemption-bound; --validate, --fail-fast, --timeline, --trace and \
                         --report are for sampled schedules",
                    );
                }
                return exhaustive::command(
                    &file,
                    json,
                    strict,
                    max_schedules,
                    preemption_bound,
                    !no_reduction,
                );
            }
            if max_schedules.is_some() || preemption_bound.is_some() || no_reduction {
                return usage_error(
                    "--max-schedules, --preemption-bound and --no-reduction need --exhaustive",
                );
            }
            if strict && validate {
                return usage_error(
                    "--strict already reports hazards; --validate reports them without strict \
                     mode's weaker GPU (use one of the two)",
                );
            }
            if schedules == 0 {
                return usage_error("--schedules must be at least 1");
            }
            if seed.checked_add(schedules - 1).is_none() {
                return usage_error(&format!(
                    "--seed {seed} with --schedules {schedules} runs past the last seed \
                     ({}); at most {} fit from this seed",
                    u64::MAX,
                    plural((u64::MAX - seed).saturating_add(1), "schedule")
                ));
            }
            for (flag, dir) in [("--timeline", &timeline), ("--trace", &trace)] {
                if let Some(dir) = dir {
                    if let Err(e) = std::fs::create_dir_all(dir) {
                        return usage_error(&format!(
                            "{flag} {}: cannot create the directory: {e}",
                            dir.display()
                        ));
                    }
                }
            }
            let jobs = match jobs {
                None => std::thread::available_parallelism().map_or(1, usize::from),
                Some(j) => match parse_count(&j) {
                    Ok(0) => return usage_error("--jobs 0: at least 1 thread runs schedules"),
                    Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
                    Err(e) => return usage_error(&format!("--jobs {e}")),
                },
            };
            let opts = CheckOptions {
                schedules,
                seed,
                strict,
            };
            let mode = CheckMode {
                validate,
                fail_fast,
                ..CheckMode::default()
            };
            let parallel = Parallel { shard, jobs };
            check_command(
                &file,
                json,
                &opts,
                mode,
                parallel,
                Outputs {
                    timeline,
                    trace,
                    report,
                },
            )
        }
        Command::Merge { files, json } => shard::merge_command(&files, json),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "pipefence", &mut buf);
            print_bytes(&buf)
        }
        Command::Man { command } => {
            let mut cmd = Cli::command();
            cmd.build();
            let page = match command {
                None => cmd,
                Some(name) => match cmd.find_subcommand(&name) {
                    Some(sub) => sub.clone(),
                    None => {
                        let names: Vec<&str> =
                            cmd.get_subcommands().map(clap::Command::get_name).collect();
                        return usage_error(&format!(
                            "man {name}: no such subcommand (one of {})",
                            names.join(", ")
                        ));
                    }
                },
            };
            let mut buf = Vec::new();
            if let Err(e) = clap_mangen::Man::new(page)
                .source(format!("pipefence {}", env!("CARGO_PKG_VERSION")))
                .render(&mut buf)
            {
                return usage_error(&format!("cannot render the man page: {e}"));
            }
            print_bytes(&buf)
        }
    }
}

/// Writes generated text to stdout; a closed pipe (`pipefence man | head`) is not an error.
fn print_bytes(buf: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => usage_error(&format!("cannot write to stdout: {e}")),
    }
}

/// Where `check` writes the timelines and traces of failing seeds, and the report of the
/// first.
#[derive(Debug)]
struct Outputs {
    timeline: Option<PathBuf>,
    trace: Option<PathBuf>,
    report: Option<PathBuf>,
}

/// Where `run` writes its trace, timeline and HTML report.
#[derive(Debug)]
struct Pictures {
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
    report: Option<PathBuf>,
}

/// The progress line of `check`: drawn on a terminal only (through indicatif, which rewrites
/// the line in place and fits it to the terminal's width); on a pipe or a log, nothing.
/// `failing` is read each time the line is drawn.
fn progress_bar(name: &str, total: u64, failing: Arc<AtomicU64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{wide_msg} {human_pos}/{human_len} schedules, {rate}, {failing} failing, eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = write!(w, "{:.0}/s", s.per_sec());
    })
    .with_key(
        "failing",
        move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", failing.load(Ordering::Relaxed));
        },
    );
    bar.set_style(style);
    bar.set_message(format!("{name}:"));
    bar
}

/// Reads and parses a scenario; on failure prints the diagnostics (and the JSON error object
/// with `--json`) and returns the exit code.
fn load(
    file: &std::path::Path,
    json: bool,
) -> Result<(String, pipefence_scenario::plan::Scenario), ExitCode> {
    load_identified(file, json).map(|(name, scenario, _)| (name, scenario))
}

/// [`load`], also returning the file's name and hash (what `merge` compares).
fn load_identified(
    file: &std::path::Path,
    json: bool,
) -> Result<(String, pipefence_scenario::plan::Scenario, ScenarioId), ExitCode> {
    let name = file.display().to_string();
    let fail = |line: usize, column: usize, message: String| {
        if json {
            let v = serde_json::json!({
                "version": 1,
                "status": "invalid",
                "errors": [{"line": line, "column": column, "message": message}],
            });
            println!("{v}");
        }
        usage_error(&message)
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return Err(fail(0, 0, format!("{name}: cannot read: {e}"))),
    };
    let id = ScenarioId::new(&name, &bytes);
    let source = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            // Where the first byte that is not UTF-8 is (E3: every input error has a position).
            let bytes = e.as_bytes();
            let at = e.utf8_error().valid_up_to();
            let before = &bytes[..at];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            let column = String::from_utf8_lossy(&before[line_start..])
                .chars()
                .count()
                + 1;
            return Err(fail(
                line,
                column,
                format!(
                    "{name}:{line}:{column}: byte {:#04x} is not UTF-8 (scenario files are UTF-8 \
                     text)",
                    bytes[at]
                ),
            ));
        }
    };
    match parse(&name, &source) {
        Ok(s) => Ok((name, s, id)),
        Err(diags) => {
            eprint!("{}", render_diagnostics(&name, &source, &diags));
            if json {
                let errors: Vec<serde_json::Value> = diags
                    .iter()
                    .map(|d| {
                        serde_json::json!({
                            "line": d.pos.line,
                            "column": d.pos.column,
                            "message": format!("{name}:{}:{}: {}", d.pos.line, d.pos.column, d.message),
                        })
                    })
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({"version": 1, "status": "invalid", "errors": errors})
                );
            }
            Err(ExitCode::from(2))
        }
    }
}

/// `check`'s sharding and threads, as asked.
#[derive(Debug, Clone, Copy)]
struct Parallel {
    /// The shard, and whether it came from Bazel's environment.
    shard: Option<(Shard, ShardSource)>,
    /// Threads.
    jobs: usize,
}

fn check_command(
    file: &std::path::Path,
    json: bool,
    whole: &CheckOptions,
    mode: CheckMode,
    parallel: Parallel,
    outputs: Outputs,
) -> ExitCode {
    let (name, scenario, id) = match load_identified(file, json) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Some((_, ShardSource::Bazel)) = parallel.shard {
        // Bazel asks a test that shards to touch this file, or it fails the test.
        if let Some(path) = std::env::var_os("TEST_SHARD_STATUS_FILE") {
            if let Err(e) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                return usage_error(&format!(
                    "TEST_SHARD_STATUS_FILE {}: cannot create it: {e}",
                    Path::new(&path).display()
                ));
            }
        }
    }
    let opts = match parallel.shard {
        Some((shard, _)) => shard.options(whole),
        None => whole.clone(),
    };
    let mode = CheckMode {
        jobs: parallel.jobs,
        shard_data: parallel.shard.is_some(),
        ..mode
    };
    let failing = Arc::new(AtomicU64::new(0));
    let bar = progress_bar(&name, opts.schedules, Arc::clone(&failing));
    let report = check_with(
        &scenario,
        &opts,
        mode,
        |p| {
            failing.store(p.failures, Ordering::Relaxed);
            bar.set_position(p.done);
        },
        |_, _| {},
    );
    bar.finish_and_clear();
    if !report.interrupted {
        let run_mode = Mode {
            strict: opts.strict,
            validate: mode.validate,
            schedule: None,
        };
        if let Err(code) =
            write_failing_seeds(&name, &scenario, &report, run_mode.clone(), &outputs)
        {
            return code;
        }
        if let Some(path) = &outputs.report {
            let seed = report
                .failures
                .first()
                .map(|f| f.seed)
                .or_else(|| report.other_seeds.first().copied())
                .unwrap_or(whole.seed);
            let opts = RunOptions {
                driver: DriverKind::Deterministic,
                seed,
                strict: whole.strict,
                validate: mode.validate,
                trace: true,
                schedule: None,
            };
            let outcome = run(&scenario, &opts);
            let at = Run {
                file,
                name: &name,
                driver: DriverKind::Deterministic,
                mode: &run_mode,
                seed,
            };
            if let Err(code) = write_report(path, &at, &outcome) {
                return code;
            }
        }
    }
    let title = match parallel.shard {
        Some((shard, _)) => format!("{name} (shard {}/{})", shard.index, shard.total),
        None => name.clone(),
    };
    let view = CheckView {
        title: &title,
        name: &name,
        seed: opts.seed,
        asked: opts.schedules,
        strict: opts.strict,
        validate: mode.validate,
        fail_fast: mode.fail_fast,
        schedules: report.schedules,
        outcomes: report.outcomes,
        failing: report.failing,
        interrupted: report.interrupted,
        elapsed_ns: report.elapsed_ns,
        failures: report
            .failures
            .iter()
            .map(|f| FailureView {
                seed: f.seed,
                count: f.count,
                seeds: &f.seeds,
                status: format!("{:?}", f.status),
                exit: f.exit,
                what: &f.what,
            })
            .collect(),
        other_failing: report.other_failing,
        other_seeds: &report.other_seeds,
    };
    let summary = check_summary(&view);
    if json {
        eprint!("{summary}");
        let text = match parallel.shard {
            Some((shard, _)) => {
                let options = SampledOptions {
                    seed: whole.seed,
                    schedules: whole.schedules,
                    strict: whole.strict,
                    validate: mode.validate,
                    fail_fast: mode.fail_fast,
                };
                serde_json::to_string_pretty(&ShardedReport::new(&report, shard, &id, options))
            }
            None => serde_json::to_string_pretty(&report),
        };
        match text {
            Ok(s) => println!("{s}"),
            Err(e) => return usage_error(&format!("cannot serialize the report: {e}")),
        }
    } else {
        print!("{summary}");
    }
    ExitCode::from(report.exit_code() as u8)
}

/// What `check`'s summary says about one distinct failing outcome.
struct FailureView<'a> {
    seed: u64,
    count: u64,
    seeds: &'a [u64],
    /// `Failed` or `Removed`.
    status: String,
    exit: i32,
    what: &'a [String],
}

/// What `check`'s summary says, from a check's report or from merged shards' reports.
struct CheckView<'a> {
    /// The summary's first word: the file, maybe with the shard.
    title: &'a str,
    /// The scenario file, for the replay hints.
    name: &'a str,
    seed: u64,
    /// Schedules asked for.
    asked: u64,
    strict: bool,
    validate: bool,
    fail_fast: bool,
    schedules: u64,
    outcomes: usize,
    failing: u64,
    interrupted: bool,
    elapsed_ns: u64,
    failures: Vec<FailureView<'a>>,
    other_failing: u64,
    other_seeds: &'a [u64],
}

/// `check`'s human summary.
fn check_summary(r: &CheckView) -> String {
    let (name, seed, schedules) = (r.name, r.seed, r.asked);
    let ran = if r.interrupted {
        format!("{} of {schedules} schedules (interrupted)", r.schedules)
    } else if r.fail_fast && r.failing > 0 && r.schedules < schedules {
        format!(
            "{} of {schedules} schedules (--fail-fast: stopped at the first failing one)",
            r.schedules
        )
    } else {
        format!("{} schedules", r.schedules)
    };
    let mut summary = format!(
        "{}: {ran} (seeds {}..{}), {}, {} failing, in {:.1} ms\n",
        r.title,
        seed,
        u128::from(seed) + u128::from(r.schedules),
        plural(r.outcomes as u64, "distinct outcome"),
        r.failing,
        r.elapsed_ns as f64 / 1e6
    );
    let replay = if r.strict {
        "--strict"
    } else if r.validate {
        "--driver deterministic --validate"
    } else {
        "--driver deterministic"
    };
    let program = replay_program_here();
    let quoted_name = shell_word(name);
    let seeds = |v: &[u64], count: u64| {
        let mut s: Vec<String> = v.iter().map(u64::to_string).collect();
        if count > v.len() as u64 {
            s.push("...".to_string());
        }
        s.join(" ")
    };
    for f in r.failures.iter().take(SHOWN_FAILURES) {
        summary += &format!(
            "  seed {} ({}, exit {}): replay with `{program} run {quoted_name} {replay} --seed {}`\n",
            f.seed, f.status, f.exit, f.seed
        );
        if f.count > 1 {
            summary += &format!(
                "    and {} more schedules with this outcome (seeds {})\n",
                f.count - 1,
                seeds(f.seeds.get(1..).unwrap_or_default(), f.count - 1)
            );
        }
        for w in f.what {
            summary += &format!("      {w}\n");
        }
    }
    let hidden: u64 = r
        .failures
        .iter()
        .skip(SHOWN_FAILURES)
        .map(|f| f.count)
        .sum::<u64>()
        + r.other_failing;
    if hidden > 0 {
        let mut first: Vec<u64> = r
            .failures
            .iter()
            .skip(SHOWN_FAILURES)
            .map(|f| f.seed)
            .chain(r.other_seeds.iter().copied())
            .collect();
        first.sort_unstable();
        first.truncate(8);
        summary += &format!(
            "  {hidden} more failing schedules with other outcomes (seeds {}; --json lists up to \
             {} outcomes with counts)\n",
            seeds(&first, hidden),
            pipefence_scenario::check::MAX_FAILURE_GROUPS
        );
    }
    summary
}

/// Failing seeds `check` prints in full (the rest are listed by seed).
const SHOWN_FAILURES: usize = 10;

/// Strict mode and validation, as asked on the command line.
#[derive(Debug, Clone)]
struct Mode {
    strict: bool,
    validate: bool,
    /// `--schedule`: the schedule string replayed.
    schedule: Option<String>,
}

fn run_command(
    file: &std::path::Path,
    json: bool,
    seed: u64,
    driver: DriverKind,
    mode: Mode,
    pictures: Pictures,
) -> ExitCode {
    let Pictures {
        trace,
        timeline,
        report,
    } = pictures;
    let (name, scenario) = match load(file, json) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let opts = RunOptions {
        driver,
        seed,
        strict: mode.strict,
        validate: mode.validate,
        trace: trace.is_some() || timeline.is_some() || report.is_some(),
        schedule: mode
            .schedule
            .as_deref()
            .and_then(|s| pipefence::explore::Script::from_schedule_string(s).ok())
            .map(std::sync::Arc::new),
    };
    let outcome = run(&scenario, &opts);
    let title = run_title(&name, driver, &mode, seed);
    if let Err(code) = write_pictures(&outcome, &title, trace.as_deref(), timeline.as_deref()) {
        return code;
    }
    if let Some(path) = &report {
        let at = Run {
            file,
            name: &name,
            driver,
            mode: &mode,
            seed,
        };
        if let Err(code) = write_report(path, &at, &outcome) {
            return code;
        }
    }
    let summary = human_summary(&name, &outcome);
    if json {
        eprint!("{summary}");
        match serde_json::to_string_pretty(&outcome) {
            Ok(s) => println!("{s}"),
            Err(e) => return usage_error(&format!("cannot serialize the outcome: {e}")),
        }
    } else {
        print!("{summary}");
    }
    let _ = std::io::stdout().flush();
    ExitCode::from(outcome.exit_code() as u8)
}

/// The title of a run's trace and timeline.
fn run_title(name: &str, driver: DriverKind, mode: &Mode, seed: u64) -> String {
    let seed = match &mode.schedule {
        Some(s) => format!("schedule {s}"),
        None => format!("seed {seed}"),
    };
    match (driver, mode.strict, mode.validate) {
        (DriverKind::Threaded, _, true) => format!("{name} (threaded, validate)"),
        (DriverKind::Threaded, _, false) => format!("{name} (threaded)"),
        (DriverKind::Deterministic, true, _) => format!("{name} (strict, {seed})"),
        (DriverKind::Deterministic, false, true) => {
            format!("{name} (deterministic, {seed}, validate)")
        }
        (DriverKind::Deterministic, false, false) => {
            format!("{name} (deterministic, {seed})")
        }
    }
}

/// Writes a run's Chrome trace and SVG timeline where asked, saying so on stderr.
fn write_pictures(
    outcome: &Outcome,
    title: &str,
    trace: Option<&Path>,
    timeline: Option<&Path>,
) -> Result<(), ExitCode> {
    if let Some(path) = trace {
        let text = pipefence::trace::chrome::chrome_json(&outcome.trace, title);
        if let Err(e) = std::fs::write(path, text) {
            return Err(usage_error(&format!(
                "cannot write the trace to {}: {e}",
                path.display()
            )));
        }
        eprintln!("trace: {} ({} events)", path.display(), outcome.trace.len());
    }
    if let Some(path) = timeline {
        let text = pipefence::trace::svg::svg_timeline(&outcome.trace, title);
        if let Err(e) = std::fs::write(path, text) {
            return Err(usage_error(&format!(
                "cannot write the timeline to {}: {e}",
                path.display()
            )));
        }
        eprintln!("timeline: {}", path.display());
    }
    Ok(())
}

/// One run as the command line gave it (for its report's title and replay commands).
struct Run<'a> {
    file: &'a Path,
    name: &'a str,
    driver: DriverKind,
    mode: &'a Mode,
    seed: u64,
}

/// The commands that replay a run: the run itself, with its trace, timeline and report, and
/// with `--json`; for the threaded driver (no schedule to replay) a deterministic run instead.
fn replay_commands(at: &Run<'_>) -> Vec<String> {
    let program = replay_program_here();
    let file = shell_word(at.name);
    let base = match at.driver {
        DriverKind::Threaded => {
            let validate = if at.mode.validate { " --validate" } else { "" };
            return vec![
                format!("{program} run {file}{validate}"),
                format!(
                    "# the threaded driver's schedule does not replay; a reproducible run:\n{program} run {file} --driver deterministic{validate} --seed 0"
                ),
            ];
        }
        _ => {
            let flags = if at.mode.strict {
                "--strict"
            } else if at.mode.validate {
                "--driver deterministic --validate"
            } else {
                "--driver deterministic"
            };
            let which = match &at.mode.schedule {
                Some(s) => format!("--schedule {}", shell_word(s)),
                None => format!("--seed {}", at.seed),
            };
            format!("{program} run {file} {flags} {which}")
        }
    };
    vec![
        base.clone(),
        format!("{base} --timeline timeline.svg --trace trace.json --report report.html"),
        format!("{base} --json"),
    ]
}

/// Writes the HTML report of `outcome` (a run with its trace) to `path`, saying so on stderr.
fn write_report(path: &Path, at: &Run<'_>, outcome: &Outcome) -> Result<(), ExitCode> {
    let source = std::fs::read_to_string(at.file).unwrap_or_default();
    let title = run_title(at.name, at.driver, at.mode, at.seed);
    let replay = replay_commands(at);
    let summary = human_summary(at.name, outcome);
    let page = html::Page {
        name: at.name,
        source: &source,
        title: &title,
        outcome,
        summary: &summary,
        replay: &replay,
    };
    if let Err(e) = std::fs::write(path, html::report(&page)) {
        return Err(usage_error(&format!(
            "cannot write the report to {}: {e}",
            path.display()
        )));
    }
    eprintln!("report: {}", path.display());
    Ok(())
}

/// `check --timeline DIR` / `--trace DIR`: replays the first seed of each kept failing outcome
/// and each other failing seed the report lists (a schedule replays exactly), with the trace
/// on, and writes DIR/seed-N.svg and DIR/seed-N.json.
fn write_failing_seeds(
    name: &str,
    scenario: &pipefence_scenario::plan::Scenario,
    report: &CheckReport,
    mode: Mode,
    outputs: &Outputs,
) -> Result<(), ExitCode> {
    if outputs.timeline.is_none() && outputs.trace.is_none() {
        return Ok(());
    }
    let seeds = report
        .failures
        .iter()
        .map(|f| f.seed)
        .chain(report.other_seeds.iter().copied());
    for seed in seeds {
        let opts = RunOptions {
            driver: DriverKind::Deterministic,
            seed,
            strict: mode.strict,
            validate: mode.validate,
            trace: true,
            schedule: None,
        };
        let outcome = run(scenario, &opts);
        let title = run_title(name, DriverKind::Deterministic, &mode, seed);
        let file = |dir: &PathBuf, ext: &str| dir.join(format!("seed-{seed}.{ext}"));
        write_pictures(
            &outcome,
            &title,
            outputs.trace.as_ref().map(|d| file(d, "json")).as_deref(),
            outputs.timeline.as_ref().map(|d| file(d, "svg")).as_deref(),
        )?;
    }
    Ok(())
}

/// The `pipefence` that PATH finds, resolved (None when there is none).
fn program_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(format!("{program}{}", std::env::consts::EXE_SUFFIX)))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// How a replay hint spells the program so that the command works where the user is, given
/// the resolved `pipefence` PATH finds, the resolved running binary and the resolved current
/// directory: `pipefence` when PATH finds this very binary; `cargo run --release -p
/// pipefence-cli --` when it is a Cargo build (`R/target/PROFILE/pipefence`, or
/// `R/target/TRIPLE/PROFILE/pipefence`) and the current directory is inside `R`; otherwise the
/// binary's own path.
/// The program a replay hint names for this process, where the user is ([`replay_program`]).
fn replay_program_here() -> String {
    replay_program(
        program_on_path("pipefence").as_deref(),
        std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .ok()
            .as_deref(),
        std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .ok()
            .as_deref(),
    )
}

fn replay_program(on_path: Option<&Path>, exe: Option<&Path>, cwd: Option<&Path>) -> String {
    let Some(exe) = exe else {
        return "pipefence".to_string();
    };
    if on_path == Some(exe) {
        return "pipefence".to_string();
    }
    let checkout = exe
        .ancestors()
        .skip(2)
        .take(2)
        .find(|a| a.file_name().is_some_and(|n| n == "target"))
        .and_then(Path::parent);
    if let (Some(root), Some(cwd)) = (checkout, cwd) {
        if cwd.starts_with(root) {
            return "cargo run --release -p pipefence-cli --".to_string();
        }
    }
    shell_word(&exe.display().to_string())
}

/// `word` as one POSIX shell word: unchanged when it is made of characters no shell treats
/// specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn ms(ns: u64) -> String {
    if ns == u64::MAX {
        // A saturated virtual clock (D4): the time that passed is not known beyond that.
        return "over 584 years (the virtual clock saturated)".to_string();
    }
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn human_summary(name: &str, o: &Outcome) -> String {
    let mut s = String::new();
    let status = match o.status {
        Status::Passed => "passed",
        Status::Failed => "FAILED",
        Status::Removed => "DEVICE REMOVED",
    };
    s += &format!("{name}: {status} in {}\n", ms(o.elapsed_ns));
    if !o.queues.is_empty() {
        s += "queues:\n";
        let w = o.queues.iter().map(|q| q.queue.len()).max().unwrap_or(0);
        for q in &o.queues {
            s += &format!(
                "  {:w$}  {:8} {:>6} {:<8}  busy {:>9}  blocked {:>9}\n",
                q.queue,
                q.kind,
                q.commands,
                if q.commands == 1 {
                    "command"
                } else {
                    "commands"
                },
                ms(q.busy_ns),
                ms(q.blocked_ns)
            );
        }
    }
    if !o.expectations.is_empty() {
        s += "expectations:\n";
        for e in &o.expectations {
            let mark = match e.passed {
                Some(true) => "ok  ",
                Some(false) => "FAIL",
                None => "--  ",
            };
            let nr = if e.passed.is_none() {
                " (not reached)"
            } else {
                ""
            };
            s += &format!("  line {:>4}  {mark}  {}{nr}\n", e.line, e.detail);
        }
    }
    if !o.hazards.is_empty() {
        s += &format!("hazards ({}):\n", o.hazards.len());
        for h in &o.hazards {
            s += &format!("  {}\n", h.message);
        }
    }
    if !o.host_errors.is_empty() {
        s += "host errors:\n";
        for e in &o.host_errors {
            s += &format!("  line {:>4}  host {}: {}\n", e.line, e.host, e.message);
        }
    }
    if let Some(r) = &o.removed {
        s += &format!("device removed: {} ({})", r.reason, r.hresult);
        if let Some(c) = &r.classification {
            s += &format!(", {c}");
        }
        s += "\n";
        if !r.cycle.is_empty() {
            s += &format!("  cycle: {} -> {}\n", r.cycle.join(" -> "), r.cycle[0]);
        }
        if let Some(f) = &r.fault {
            s += &format!("  fault: {}", f.kind);
            if let (Some(a), Some(acc)) = (&f.address, &f.access) {
                s += &format!(", {acc} of {a}");
            }
            if let Some(b) = &f.buffer {
                s += &format!(" (nearest buffer {b})");
            }
            s += &format!(" by {}", f.at.op);
            if let Some(l) = f.at.line {
                s += &format!(" at line {l}");
            }
            s += &format!(": {}\n", f.message);
        }
        for q in &r.queues {
            s += &format!("  queue {} [{}]", q.queue, q.class);
            if let Some(op) = q.at.as_ref().map(|s| &s.op) {
                s += &format!(" stuck in {op}");
            }
            if let Some((Some(l), Some(c))) = q.at.as_ref().map(|s| (&s.list, s.command)) {
                s += &format!(" (list {l}, command {c})");
            }
            if let Some(line) = q.at.as_ref().and_then(|s| s.line) {
                s += &format!(" at line {line}");
            }
            s += "\n";
            if let Some(w) = &q.waiting_for {
                s += &format!("      waiting for {w}");
                if let Some(c) = q.current {
                    s += &format!(", current value {c}");
                }
                s += "\n";
            }
            if let Some(w) = &q.last_writer {
                s += &format!("      last writer: {}\n", writer_text(w));
            }
            if let Some(l) = &q.last_completed {
                s += &format!("      last completed: {}\n", site_text(l));
            }
            if !q.events.is_empty() {
                s += &format!("      events: {}\n", q.events.join(" > "));
            }
            if !q.waits_on.is_empty() {
                s += &format!("      released only by: {}\n", q.waits_on.join(", "));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{replay_program, shell_word};
    use std::path::Path;

    const CARGO: &str = "cargo run --release -p pipefence-cli --";

    #[test]
    fn replay_program_is_pipefence_when_path_finds_this_binary() {
        let exe = Path::new("/home/u/.cargo/bin/pipefence");
        assert_eq!(
            replay_program(Some(exe), Some(exe), Some(Path::new("/tmp"))),
            "pipefence"
        );
        // Also for a build in a checkout, when PATH leads to it.
        let exe = Path::new("/src/pipefence/target/release/pipefence");
        assert_eq!(
            replay_program(Some(exe), Some(exe), Some(Path::new("/src/pipefence"))),
            "pipefence"
        );
    }

    #[test]
    fn replay_program_is_cargo_run_for_a_build_of_the_checkout_the_user_is_in() {
        let exe = Path::new("/src/pipefence/target/debug/pipefence");
        for cwd in ["/src/pipefence", "/src/pipefence/examples"] {
            assert_eq!(replay_program(None, Some(exe), Some(Path::new(cwd))), CARGO);
        }
        // Another pipefence on PATH (an older install) is not the one that ran.
        let other = Path::new("/usr/local/bin/pipefence");
        assert_eq!(
            replay_program(Some(other), Some(exe), Some(Path::new("/src/pipefence"))),
            CARGO
        );
        // A build for a target triple.
        let exe = Path::new("/src/pipefence/target/x86_64-unknown-linux-gnu/release/pipefence");
        assert_eq!(
            replay_program(None, Some(exe), Some(Path::new("/src/pipefence/docs"))),
            CARGO
        );
    }

    #[test]
    fn replay_program_is_the_binarys_path_elsewhere() {
        let exe = Path::new("/src/pipefence/target/debug/pipefence");
        // Outside the checkout, or in a directory that only shares a prefix with it.
        for cwd in ["/tmp", "/src/pipefence-other", "/src"] {
            assert_eq!(
                replay_program(None, Some(exe), Some(Path::new(cwd))),
                "/src/pipefence/target/debug/pipefence",
                "{cwd}"
            );
        }
        // Not a Cargo build (no target/PROFILE/ above it), not on PATH.
        let exe = Path::new("/opt/tools/pipefence");
        assert_eq!(
            replay_program(None, Some(exe), Some(Path::new("/opt/tools"))),
            "/opt/tools/pipefence"
        );
        // A path a shell would split is quoted.
        let exe = Path::new("/home/u/my tools/pipefence");
        assert_eq!(
            replay_program(None, Some(exe), None),
            "'/home/u/my tools/pipefence'"
        );
        // Unknown binary (current_exe failed): the installed name.
        assert_eq!(replay_program(None, None, None), "pipefence");
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(
            shell_word("tests/scenarios/a-b_c.kdl"),
            "tests/scenarios/a-b_c.kdl"
        );
        assert_eq!(shell_word("my file.kdl"), "'my file.kdl'");
        assert_eq!(shell_word("it's.kdl"), "'it'\\''s.kdl'");
        assert_eq!(shell_word(""), "''");
    }
}
