//! `pipefence`: the command line. Thin by design: arguments, then the scenario crate and the
//! library, then printing. Exit status (docs/scenario-language.md): 0 passed, 1 failed, 2 invalid
//! scenario or command line, 3 device removed unexpectedly.

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use pipefence::explore::MAX_JOBS;
use pipefence_scenario::check::{
    check_with, parse_count, CheckMode, CheckOptions, CheckReport, Problem, Shard,
};
use pipefence_scenario::diagnostic::{self, SourceFile, Style};
use pipefence_scenario::merge::{SampledOptions, ScenarioId, ShardedReport};
use pipefence_scenario::run::{run, DriverKind, Outcome, RunOptions, Status};
use pipefence_scenario::{parse, render_diagnostics_styled};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The allocator: the exploration's runs allocate and free many small objects on every
/// thread, and a subtree explored on one thread is freed on another; mimalloc's per-thread
/// heaps made `check --exhaustive` 10% to 20% faster on one thread and up to 2x on two than
/// the C library's allocator (docs/exploration.md, "Exhaustive checks on threads and in
/// shards").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// When diagnostics are coloured.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Default)]
enum ColorChoice {
    /// On a terminal (or with CLICOLOR_FORCE set), unless NO_COLOR is set (to anything but the
    /// empty string).
    #[default]
    Auto,
    /// Always (ANSI escapes even on a pipe).
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// The style of text written to stdout (`stderr` false) or stderr.
    fn style(self, stderr: bool) -> Style {
        let on = match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                let set = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
                let terminal = if stderr {
                    std::io::stderr().is_terminal()
                } else {
                    std::io::stdout().is_terminal()
                };
                auto_color(
                    terminal,
                    set("NO_COLOR").is_some(),
                    set("CLICOLOR_FORCE").is_some_and(|v| v != "0"),
                )
            }
        };
        if on {
            Style::Color
        } else {
            Style::Plain
        }
    }
}

/// `--color auto`: colour on a terminal or when forced (`CLICOLOR_FORCE`), never with
/// `NO_COLOR` (<https://no-color.org>).
fn auto_color(terminal: bool, no_color: bool, force: bool) -> bool {
    (terminal || force) && !no_color
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
        #[arg(long, allow_negative_numbers = true)]
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
        /// Colour in diagnostics: auto (on a terminal, unless NO_COLOR is set), always, never.
        #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
        color: ColorChoice,
    },
    /// Run a scenario under many deterministic schedules.
    Check {
        /// The scenario file (KDL).
        file: PathBuf,
        /// Number of schedules.
        #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
        schedules: u64,
        /// First seed.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
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
        /// Stop at the first failing schedule and report it. With --exhaustive: the first in
        /// the search's order (the same whatever -j); the check is then bounded by it, not a
        /// proof, and a search that finds no failure ends as it would without it.
        #[arg(long)]
        fail_fast: bool,
        /// Write an SVG timeline of each failing outcome's first seed (and of each other failing
        /// seed the report lists) into DIR, as DIR/seed-N.svg. With --exhaustive: of each
        /// listed failing outcome's schedule, shrunk when it was, as DIR/failure-N.svg (N as
        /// the outcomes are listed, from 1).
        #[arg(long, value_name = "DIR")]
        timeline: Option<PathBuf>,
        /// Write a Chrome/Perfetto trace of the same seeds (with --exhaustive: the same
        /// schedules) into DIR, as DIR/seed-N.json (DIR/failure-N.json).
        #[arg(long, value_name = "DIR")]
        trace: Option<PathBuf>,
        /// Write the HTML report (see `run --report`) of the first failing schedule (of the
        /// first seed when none fails). With --exhaustive: of the first failing outcome's
        /// schedule, shrunk when it was (of the search's first schedule when none fails).
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
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        max_schedules: Option<u64>,
        /// With --exhaustive: only schedules with at most K preemptions (each outcome they reach, with its fewest preemptions; one actor's independent actions, a dispatch's groups or a queue's early write-backs, are explored in one order, and a run at a state explored before goes no further; with --no-reduction or --shard every interleaving within the bound)
        #[arg(long, value_name = "K", allow_negative_numbers = true)]
        preemption_bound: Option<u32>,
        /// With --exhaustive: do not shrink failures (by default each distinct failing
        /// outcome is shrunk to the fewest preemptions that still fail the same way, and its
        /// decisive steps are printed).
        #[arg(long)]
        no_shrink: bool,
        /// With --exhaustive: shrinking runs at most N schedules in all (default 30000); a
        /// shrink the budget cut says so (`fewest: false`).
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        shrink_runs: Option<u64>,
        /// Run only shard INDEX of TOTAL (0/4 to 3/4): the contiguous block of seeds from
        /// SEED + floor(INDEX * SCHEDULES / TOTAL) to SEED + floor((INDEX + 1) * SCHEDULES /
        /// TOTAL), so TOTAL shards run every seed once; `pipefence merge` combines their
        /// --json reports. Without it, Bazel's TEST_SHARD_INDEX / TEST_TOTAL_SHARDS (then
        /// TEST_SHARD_STATUS_FILE is touched) or a Kubernetes indexed job's
        /// JOB_COMPLETION_INDEX (with --total-shards) give the shard. With --exhaustive: the
        /// INDEX-th of TOTAL contiguous blocks of the search's units (the subtrees its top is
        /// cut into, the same whatever the shards), each bound applying per shard.
        #[arg(long, value_name = "INDEX/TOTAL", allow_hyphen_values = true)]
        shard: Option<String>,
        /// The number of shards when the index is JOB_COMPLETION_INDEX (a Kubernetes indexed
        /// job's completions); default PIPEFENCE_TOTAL_SHARDS.
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        total_shards: Option<String>,
        /// Threads that run schedules at once (default: the number of CPUs; at most 1024). The
        /// report, human and --json (but elapsed times), is the same whatever N; --fail-fast
        /// still stops at the lowest failing seed. With --exhaustive the report is the same
        /// whatever N too: threads explore ahead the subtrees the reduced search will take, or
        /// the units of the plain search and of shards (docs/exploration.md).
        #[arg(short = 'j', long, value_name = "N", allow_negative_numbers = true)]
        jobs: Option<String>,
        /// Colour in diagnostics: auto (on a terminal, unless NO_COLOR is set), always, never.
        #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
        color: ColorChoice,
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
        /// Colour in diagnostics: auto (on a terminal, unless NO_COLOR is set), always, never.
        #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
        color: ColorChoice,
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

/// Whether the command asked for `--json`: a usage error then prints the `usage` object on
/// stdout too (`docs/run.schema.json`), so that a reader of stdout learns why there is no report.
static JSON_ASKED: AtomicBool = AtomicBool::new(false);

/// Prints a usage error (on stderr, and as the `usage` JSON object on stdout when the command
/// asked for `--json`); exit status 2.
fn usage_error(msg: &str) -> ExitCode {
    if JSON_ASKED.load(Ordering::Relaxed) {
        print_usage_json(msg);
    }
    error_on_stderr(msg)
}

/// Prints an error on stderr only (its JSON, if any, printed by the caller); exit status 2.
fn error_on_stderr(msg: &str) -> ExitCode {
    eprintln!("pipefence: {msg}");
    ExitCode::from(2)
}

/// The `usage` object: the command line (or what it names: a shard report to merge, an output
/// directory) is wrong, and no scenario was run.
fn print_usage_json(msg: &str) {
    let v = serde_json::json!({
        "version": 1,
        "status": "usage",
        "errors": [{"message": msg}],
    });
    println!("{v}");
}

/// Whether `--json` is among the arguments (before a `--`): the command line could not be
/// parsed, so only the words are known.
fn json_in_args() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// What a command-line error of clap's says, without its `error: ` and its usage lines: the
/// error and its tips.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.split("\n\nUsage:").next().unwrap_or(&text).trim();
    text.strip_prefix("error: ").unwrap_or(text).to_string()
}

fn main() -> ExitCode {
    // A reader that closes the pipe early (`pipefence check ... --json | head`) ends the
    // process as it ends `cat` or `grep`, by SIGPIPE, not as a failed print (a panic: Rust
    // ignores SIGPIPE by default).
    #[cfg(unix)]
    // SAFETY: restoring a signal's default disposition at startup, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout; an error, with --json, prints its JSON there too.
            if e.use_stderr() && json_in_args() {
                print_usage_json(&clap_message(&e));
            }
            e.exit()
        }
    };
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
    let json = match &cli.command {
        Command::Run { json, .. } | Command::Check { json, .. } | Command::Merge { json, .. } => {
            *json
        }
        _ => false,
    };
    JSON_ASKED.store(json, Ordering::Relaxed);
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
            color,
        } => {
            if let (Some(_), Some(s)) = (&schedule, seed) {
                return usage_error(&format!(
                    "--schedule replays one schedule and --seed {s} samples one: give only one"
                ));
            }
            let threaded_asked =
                driver == Driver::Threaded && std::env::args().any(|a| a == "--driver");
            if strict && threaded_asked {
                return usage_error("--strict implies the deterministic driver; it cannot be used with --driver threaded");
            }
            if schedule.is_some() && threaded_asked {
                return usage_error(
                    "--schedule replays a schedule of the deterministic driver; the threaded \
                     driver has none (leave out --driver threaded)",
                );
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
                (json, color),
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
            no_shrink,
            shrink_runs,
            shard,
            total_shards,
            jobs,
            color,
        } => {
            let shard = match shard::resolve(shard.as_deref(), total_shards.as_deref()) {
                Ok(s) => s,
                Err(e) => return usage_error(&e),
            };
            let jobs = match jobs {
                None => std::thread::available_parallelism()
                    .map_or(1, usize::from)
                    .min(MAX_JOBS),
                Some(j) => match parse_count(&j) {
                    Ok(0) => return usage_error("--jobs 0: at least 1 thread runs schedules"),
                    Ok(n) if n > MAX_JOBS as u64 => {
                        return usage_error(&format!(
                            "--jobs {n}: at most {MAX_JOBS} threads run schedules"
                        ))
                    }
                    Ok(n) => usize::try_from(n).unwrap_or(MAX_JOBS),
                    Err(e) => return usage_error(&format!("--jobs {e} (1 to {MAX_JOBS} threads)")),
                },
            };
            let parallel = Parallel { shard, jobs };
            let outputs = Outputs {
                timeline,
                trace,
                report,
            };
            if exhaustive {
                if validate {
                    return usage_error(
                        "--exhaustive takes --strict (whose hazards fail a schedule); \
                         --validate is for sampled schedules",
                    );
                }
                if no_shrink && shrink_runs.is_some() {
                    return usage_error("--no-shrink and --shrink-runs: choose one");
                }
                if shrink_runs == Some(0) {
                    return usage_error(
                        "--shrink-runs must be at least 1 (--no-shrink turns shrinking off)",
                    );
                }
                let shrink = (!no_shrink)
                    .then(|| shrink_runs.unwrap_or(pipefence::explore::DEFAULT_SHRINK_RUNS));
                if let Err(code) = outputs.make_dirs() {
                    return code;
                }
                return exhaustive::command(
                    &file,
                    json,
                    strict,
                    exhaustive::Search {
                        max_schedules,
                        preemption_bound,
                        reduction: !no_reduction,
                        shrink,
                        fail_fast,
                    },
                    parallel,
                    color,
                    &outputs,
                );
            }
            if max_schedules.is_some()
                || preemption_bound.is_some()
                || no_reduction
                || no_shrink
                || shrink_runs.is_some()
            {
                return usage_error(
                    "--max-schedules, --preemption-bound, --no-reduction, --no-shrink and \
                     --shrink-runs need --exhaustive",
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
            if let Err(code) = outputs.make_dirs() {
                return code;
            }
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
            check_command(&file, (json, color), &opts, mode, parallel, outputs)
        }
        Command::Merge { files, json, color } => shard::merge_command(&files, json, color),
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

impl Outputs {
    /// Creates the `--timeline` and `--trace` directories (a usage error when it cannot).
    fn make_dirs(&self) -> Result<(), ExitCode> {
        for (flag, dir) in [("--timeline", &self.timeline), ("--trace", &self.trace)] {
            if let Some(dir) = dir {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return Err(usage_error(&format!(
                        "{flag} {}: cannot create the directory: {e}",
                        dir.display()
                    )));
                }
            }
        }
        Ok(())
    }
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

/// A scenario read and parsed: its name in messages, its text and its plan.
#[derive(Debug)]
struct Loaded {
    name: String,
    source: String,
    /// Its name and hash (what `merge` compares).
    id: ScenarioId,
    scenario: pipefence_scenario::plan::Scenario,
}

/// Reads and parses a scenario; on failure prints the diagnostics (and the JSON error object
/// with `--json`) and returns the exit code.
fn load(file: &std::path::Path, json: bool, color: ColorChoice) -> Result<Loaded, ExitCode> {
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
        error_on_stderr(&message)
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
        Ok(scenario) => Ok(Loaded {
            name,
            source,
            id,
            scenario,
        }),
        Err(diags) => {
            let style = color.style(true) == Style::Color;
            eprint!(
                "{}",
                render_diagnostics_styled(&name, &source, &diags, style)
            );
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
pub(crate) struct Parallel {
    /// The shard, and whether it came from Bazel's environment.
    pub(crate) shard: Option<(Shard, ShardSource)>,
    /// Threads.
    pub(crate) jobs: usize,
}

/// Touches Bazel's `TEST_SHARD_STATUS_FILE` when the shard came from Bazel (it fails a test
/// that shards without).
fn touch_shard_status(parallel: Parallel) -> Result<(), ExitCode> {
    if let Some((_, ShardSource::Bazel)) = parallel.shard {
        // Bazel asks a test that shards to touch this file, or it fails the test.
        // Set but empty: as unset (there is no file to touch).
        if let Some(path) = std::env::var_os("TEST_SHARD_STATUS_FILE").filter(|p| !p.is_empty()) {
            if let Err(e) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                return Err(usage_error(&format!(
                    "TEST_SHARD_STATUS_FILE {}: cannot create it: {e}",
                    Path::new(&path).display()
                )));
            }
        }
    }
    Ok(())
}

fn check_command(
    file: &std::path::Path,
    (json, color): (bool, ColorChoice),
    whole: &CheckOptions,
    mode: CheckMode,
    parallel: Parallel,
    outputs: Outputs,
) -> ExitCode {
    let loaded = match load(file, json, color) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let (name, scenario, id) = (&loaded.name, &loaded.scenario, &loaded.id);
    if let Err(code) = touch_shard_status(parallel) {
        return code;
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
    let bar = progress_bar(name, opts.schedules, Arc::clone(&failing));
    let report = check_with(
        scenario,
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
        if let Err(code) = write_failing_seeds(name, scenario, &report, run_mode.clone(), &outputs)
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
            let outcome = run(scenario, &opts);
            let at = Run {
                file,
                name,
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
        None => name.to_string(),
    };
    let view = CheckView {
        title: &title,
        name,
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
                problems: &f.problems,
            })
            .collect(),
        other_failing: report.other_failing,
        other_seeds: &report.other_seeds,
    };
    let src = SourceFile::new(name, &loaded.source);
    let summary = check_summary(&view, &src, &report.problems, color.style(json));
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
                serde_json::to_string_pretty(&ShardedReport::new(&report, shard, id, options))
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
    /// Its problems: indices into the report's problems.
    problems: &'a [usize],
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

/// `check`'s human summary: the first line, each distinct problem once as a diagnostic
/// (`problems`: the report's, rendered against `src`), then the failing schedules grouped by
/// their problems.
fn check_summary(
    r: &CheckView,
    src: &SourceFile<'_>,
    problems: &[Problem],
    style: Style,
) -> String {
    let hint = CheckHint {
        program: replay_program_here(),
        file: shell_word(r.name),
        replay: replay_flags(r.strict, r.validate),
    };
    let mut summary = check_header(r);
    summary += &problem_diagnostics(src, problems, r.failing, Some(&hint), style);
    summary += &check_outcomes(r, &hint);
    summary
}

/// The first line of `check`'s human summary: what ran, the outcomes and the failing count.
fn check_header(r: &CheckView) -> String {
    let (seed, schedules) = (r.seed, r.asked);
    let ran = if r.interrupted {
        format!("{} of {schedules} schedules (interrupted)", r.schedules)
    } else if r.fail_fast && r.failing > 0 && r.schedules < schedules {
        format!(
            "{} of {schedules} schedules (--fail-fast: stopped at the first failing one)",
            r.schedules
        )
    } else {
        plural(r.schedules, "schedule")
    };
    format!(
        "{}: {ran} (seeds {}..{}), {}, {} failing, in {:.1} ms\n",
        r.title,
        seed,
        u128::from(seed) + u128::from(r.schedules),
        plural(r.outcomes as u64, "distinct outcome"),
        r.failing,
        r.elapsed_ns as f64 / 1e6
    )
}

/// The flags `run` replays a check's seed with.
fn replay_flags(strict: bool, validate: bool) -> &'static str {
    if strict {
        "--strict"
    } else if validate {
        "--driver deterministic --validate"
    } else {
        "--driver deterministic"
    }
}

/// How `check`'s report tells to replay a seed: `PROGRAM run FILE REPLAY --seed N`.
#[derive(Debug)]
pub(crate) struct CheckHint {
    program: String,
    file: String,
    replay: &'static str,
}

impl CheckHint {
    fn command(&self, seed: u64) -> String {
        format!(
            "`{} run {} {} --seed {seed}`",
            self.program, self.file, self.replay
        )
    }
}

/// Seeds as a list, with `...` when `count` says there are more than listed.
fn seed_list(v: &[u64], count: u64) -> String {
    let mut s: Vec<String> = v.iter().map(u64::to_string).collect();
    if count > v.len() as u64 {
        s.push("...".to_string());
    }
    s.join(" ")
}

/// Each problem once as a diagnostic, with how many of the `failing` schedules had it and, when
/// schedules are seeds (`hint`), their first seeds and the replay of the first. Results of a
/// failed expectation are told by seed only then.
pub(crate) fn problem_diagnostics(
    src: &SourceFile<'_>,
    problems: &[pipefence_scenario::check::Problem],
    failing: u64,
    hint: Option<&CheckHint>,
    style: Style,
) -> String {
    use pipefence_scenario::check::ProblemDetail;
    let n = problems.len();
    if n == 0 {
        return String::new();
    }
    let mut out = format!(
        "{} in the {}:\n\n",
        plural(n as u64, "distinct problem"),
        plural(failing, "failing schedule")
    );
    for (i, p) in problems.iter().enumerate().take(SHOWN_FAILURES) {
        let seeds = if p.seeds.is_empty() {
            String::new()
        } else {
            format!(" (seeds {})", seed_list(&p.seeds, p.count))
        };
        let mut notes = vec![format!(
            "problem {} of {n}: in {} of {}{seeds}",
            i + 1,
            p.count,
            plural(failing, "failing schedule"),
        )];
        let checked = (p.variants.len() > 1)
            .then(|| diagnostic::common_detail(p.variants.iter().map(|v| v.what.as_str())))
            .flatten();
        if p.variants.len() > 1 {
            // The most frequent results, up to SHOWN_RESULTS of them.
            let mut shown: Vec<&pipefence_scenario::check::Variant> = p.variants.iter().collect();
            shown.sort_by_key(|v| std::cmp::Reverse(v.count));
            shown.truncate(SHOWN_RESULTS);
            let listed: u64 = shown.iter().map(|v| v.count).sum();
            let strip = checked.as_ref().map(|c| format!("{c}, "));
            let mut found: Vec<String> = shown
                .iter()
                .map(|v| {
                    let what = strip
                        .as_deref()
                        .and_then(|c| v.what.strip_prefix(c))
                        .unwrap_or(&v.what);
                    // A merged count a shard may have left among its other results.
                    let at_least = if v.at_least { "at least " } else { "" };
                    match hint {
                        Some(_) => {
                            format!(
                                "{what} in {at_least}{} (seed {})",
                                plural(v.count, "schedule"),
                                v.seed
                            )
                        }
                        None => format!("{what} in {at_least}{}", plural(v.count, "schedule")),
                    }
                })
                .collect();
            if listed < p.count {
                found.push(format!(
                    "other results in {}",
                    plural(p.count - listed, "schedule")
                ));
            }
            notes.push(format!("found: {}", found.join("; ")));
        }
        if let (Some(hint), Some(&seed)) = (hint, p.seeds.first()) {
            notes.push(format!("replay with {}", hint.command(seed)));
        }
        out += &match &p.detail {
            ProblemDetail::Hazard(h) => diagnostic::hazard(src, h, style, &notes),
            ProblemDetail::Expectation(e) => {
                let detail = checked.as_deref().unwrap_or(&e.detail);
                diagnostic::expectation(src, e.line, detail, style, &notes)
            }
            ProblemDetail::HostError(e) => diagnostic::host_error(src, e, style, &notes),
            ProblemDetail::Removed(r) => diagnostic::removal(src, r, false, style, &notes),
            // A problem kept without its report: its words.
            _ => format!("{}\n  = {}\n", p.what, notes.join("\n  = ")),
        };
        out.push('\n');
    }
    if n > SHOWN_FAILURES {
        out += &format!(
            "{} more distinct problems (--json lists up to {})\n\n",
            n - SHOWN_FAILURES,
            pipefence_scenario::check::MAX_PROBLEMS
        );
    }
    out
}

/// The failing schedules grouped by the set of problems they had (the outcomes of a group
/// differ only in values, like what a stale read returned): one line each, with the number of
/// schedules and outcomes and the first seeds.
fn check_outcomes(report: &CheckView, hint: &CheckHint) -> String {
    if report.failures.is_empty() {
        return String::new();
    }
    let mut sets: Vec<(&[usize], u64, u64, Vec<u64>)> = Vec::new();
    for f in &report.failures {
        let i = match sets.iter().position(|s| s.0 == f.problems) {
            Some(i) => i,
            None => {
                sets.push((f.problems, 0, 0, Vec::new()));
                sets.len() - 1
            }
        };
        let set = &mut sets[i];
        set.1 += f.count;
        set.2 += 1;
        set.3.extend(f.seeds);
    }
    let mut out = format!(
        "failing schedules by problem (replay one with {}):\n",
        hint.command(report.failures[0].seed)
            .replace(&format!("--seed {}`", report.failures[0].seed), "--seed N`")
    );
    for (problems, count, outcomes, mut seeds) in sets {
        let numbers: Vec<String> = problems.iter().map(|i| (i + 1).to_string()).collect();
        let what = match numbers.len() {
            0 => "problems not kept (see --json)".to_string(),
            1 => format!("problem {} alone", numbers[0]),
            _ => format!("problems {}", numbers.join(" + ")),
        };
        seeds.sort_unstable();
        seeds.truncate(8);
        out += &format!("  {what}: {}", plural(count, "schedule"));
        if outcomes > 1 {
            out += &format!(" in {}", plural(outcomes, "outcome"));
        }
        out += &format!(" (seeds {})\n", seed_list(&seeds, count));
    }
    if report.other_failing > 0 {
        out += &format!(
            "  {} more failing schedules with other outcomes (seeds {}; --json keeps up to {} \
             outcomes)\n",
            report.other_failing,
            seed_list(report.other_seeds, report.other_failing),
            pipefence_scenario::check::MAX_FAILURE_GROUPS
        );
    }
    out
}

/// Results of one failed expectation `check` lists (the most frequent).
const SHOWN_RESULTS: usize = 4;

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
    (json, color): (bool, ColorChoice),
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
    let loaded = match load(file, json, color) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let (name, scenario) = (&loaded.name, &loaded.scenario);
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
    let outcome = run(scenario, &opts);
    let mismatch = opts.schedule.as_ref().and_then(|s| s.replay_mismatch());
    if let (Some(why), Some(s)) = (mismatch, &mode.schedule) {
        let other = if mode.strict {
            "without --strict"
        } else {
            "with --strict"
        };
        return usage_error(&format!(
            "schedule string `{s}` is not a schedule of {}{}: {why}. A schedule string \
             replays the scenario and mode it was printed for (was it printed by a check \
             {other}, or of another file?)",
            file.display(),
            if mode.strict { " with --strict" } else { "" }
        ));
    }
    let title = run_title(name, driver, &mode, seed);
    if let Err(code) = write_pictures(&outcome, &title, trace.as_deref(), timeline.as_deref()) {
        return code;
    }
    if let Some(path) = &report {
        let at = Run {
            file,
            name,
            driver,
            mode: &mode,
            seed,
        };
        if let Err(code) = write_report(path, &at, &outcome) {
            return code;
        }
    }
    let src = SourceFile::new(name, &loaded.source);
    let summary = human_summary(&src, &outcome, color.style(json));
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
    let summary = human_summary(&SourceFile::new(at.name, &source), outcome, Style::Plain);
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

/// The report of a run: status, queues, expectations, then each hazard, host error and the
/// removal as a diagnostic.
fn human_summary(src: &SourceFile<'_>, o: &Outcome, style: Style) -> String {
    let name = src.name();
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
                "  {:w$}  {:8} {:>6} {:<18}  busy {:>9}  blocked {:>9}\n",
                q.queue,
                q.kind,
                q.commands,
                if q.commands == 1 {
                    "command processed"
                } else {
                    "commands processed"
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
    if !o.host_errors.is_empty() {
        s += "host errors:\n";
        for e in &o.host_errors {
            s += &format!("  line {:>4}  host {}: {}\n", e.line, e.host, e.message);
        }
    }
    if !o.hazards.is_empty() {
        s += &format!("{}:\n", plural(o.hazards.len() as u64, "hazard"));
        for h in &o.hazards {
            s.push('\n');
            s += &diagnostic::hazard(src, h, style, &[]);
        }
    }
    if let Some(r) = &o.removed {
        s.push('\n');
        s += &diagnostic::removal(src, r, o.status != Status::Removed, style, &[]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{auto_color, replay_program, shell_word};

    #[test]
    fn color_auto_is_on_a_terminal_or_forced_and_off_with_no_color() {
        assert!(auto_color(true, false, false));
        assert!(auto_color(false, false, true));
        assert!(!auto_color(false, false, false));
        assert!(!auto_color(true, true, false));
        assert!(!auto_color(false, true, true));
    }
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
