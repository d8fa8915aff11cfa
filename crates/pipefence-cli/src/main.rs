//! `pipefence`: the command line. Thin by design: arguments, then the scenario crate and the
//! library, then printing. Exit status (docs/scenario-language.md): 0 passed, 1 failed, 2 invalid
//! scenario or command line, 3 device removed unexpectedly.

use clap::{Parser, Subcommand, ValueEnum};
use pipefence_scenario::check::{check, CheckOptions};
use pipefence_scenario::run::{
    run, site_text, writer_text, DriverKind, Outcome, RunOptions, Status,
};
use pipefence_scenario::{parse, render_diagnostics};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod exhaustive;

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
        /// Explore every schedule (a depth-first search, no reduction) instead of sampling
        /// seeds; `complete: true` only when no bound cut it (docs/exploration.md).
        #[arg(long)]
        exhaustive: bool,
        /// With --exhaustive: stop after this many schedules (default 10000).
        #[arg(long, value_name = "N")]
        max_schedules: Option<u64>,
        /// With --exhaustive: only schedules with at most K preemptions.
        #[arg(long, value_name = "K")]
        preemption_bound: Option<u32>,
    },
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
                trace,
                timeline,
            )
        }
        Command::Check {
            file,
            schedules,
            seed,
            strict,
            json,
            exhaustive,
            max_schedules,
            preemption_bound,
        } => {
            if exhaustive {
                return exhaustive::command(&file, json, strict, max_schedules, preemption_bound);
            }
            if max_schedules.is_some() || preemption_bound.is_some() {
                return usage_error("--max-schedules and --preemption-bound need --exhaustive");
            }
            if schedules == 0 {
                return usage_error("--schedules must be at least 1");
            }
            if seed.checked_add(schedules - 1).is_none() {
                return usage_error(&format!(
                    "--seed {seed} with --schedules {schedules} runs past the last seed \
                     ({}); at most {} schedules fit from this seed",
                    u64::MAX,
                    (u64::MAX - seed).saturating_add(1)
                ));
            }
            check_command(&file, json, schedules, seed, strict)
        }
    }
}

/// Reads and parses a scenario; on failure prints the diagnostics (and the JSON error object
/// with `--json`) and returns the exit code.
fn load(
    file: &std::path::Path,
    json: bool,
) -> Result<(String, pipefence_scenario::plan::Scenario), ExitCode> {
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
        Ok(s) => Ok((name, s)),
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

fn check_command(
    file: &std::path::Path,
    json: bool,
    schedules: u64,
    seed: u64,
    strict: bool,
) -> ExitCode {
    let (name, scenario) = match load(file, json) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let opts = CheckOptions {
        schedules,
        seed,
        strict,
    };
    let mut last = std::time::Instant::now();
    let report = check(&scenario, &opts, |p| {
        if last.elapsed() >= std::time::Duration::from_millis(500) || p.done == p.total {
            last = std::time::Instant::now();
            eprint!(
                "\r{name}: {}/{} schedules, {:.0}/s, {} failing  ",
                p.done, p.total, p.per_second, p.failures
            );
            if p.done == p.total {
                eprintln!();
            }
        }
    });
    let ran = if report.interrupted {
        format!(
            "{} of {schedules} schedules (interrupted)",
            report.schedules
        )
    } else {
        format!("{} schedules", report.schedules)
    };
    let mut summary = format!(
        "{name}: {ran} (seeds {}..{}), {} distinct outcomes, {} failing, in {:.1} ms\n",
        seed,
        u128::from(seed) + u128::from(report.schedules),
        report.outcomes,
        report.failing,
        report.elapsed_ns as f64 / 1e6
    );
    let replay = if strict {
        "--strict"
    } else {
        "--driver deterministic"
    };
    let seeds = |v: &[u64], count: u64| {
        let mut s: Vec<String> = v.iter().map(u64::to_string).collect();
        if count > v.len() as u64 {
            s.push("...".to_string());
        }
        s.join(" ")
    };
    for f in report.failures.iter().take(SHOWN_FAILURES) {
        summary += &format!(
            "  seed {} ({:?}, exit {}): replay with `pipefence run {name} {replay} --seed {}`\n",
            f.seed, f.status, f.exit, f.seed
        );
        if f.count > 1 {
            summary += &format!(
                "    and {} more schedules with this outcome (seeds {})\n",
                f.count - 1,
                seeds(&f.seeds[1..], f.count - 1)
            );
        }
        for w in &f.what {
            summary += &format!("      {w}\n");
        }
    }
    let hidden: u64 = report
        .failures
        .iter()
        .skip(SHOWN_FAILURES)
        .map(|f| f.count)
        .sum::<u64>()
        + report.other_failing;
    if hidden > 0 {
        let mut first: Vec<u64> = report
            .failures
            .iter()
            .skip(SHOWN_FAILURES)
            .map(|f| f.seed)
            .chain(report.other_seeds.iter().copied())
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
    if json {
        eprint!("{summary}");
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return usage_error(&format!("cannot serialize the report: {e}")),
        }
    } else {
        print!("{summary}");
    }
    ExitCode::from(report.exit_code() as u8)
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
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
) -> ExitCode {
    let (name, scenario) = match load(file, json) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let opts = RunOptions {
        driver,
        seed,
        strict: mode.strict,
        validate: mode.validate,
        trace: trace.is_some() || timeline.is_some(),
        schedule: mode
            .schedule
            .as_deref()
            .and_then(|s| pipefence::explore::Script::from_schedule_string(s).ok())
            .map(std::sync::Arc::new),
    };
    let outcome = run(&scenario, &opts);
    let seed = match &mode.schedule {
        Some(s) => format!("schedule {s}"),
        None => format!("seed {seed}"),
    };
    let title = match (driver, mode.strict, mode.validate) {
        (DriverKind::Threaded, _, true) => format!("{name} (threaded, validate)"),
        (DriverKind::Threaded, _, false) => format!("{name} (threaded)"),
        (DriverKind::Deterministic, true, _) => format!("{name} (strict, {seed})"),
        (DriverKind::Deterministic, false, true) => {
            format!("{name} (deterministic, {seed}, validate)")
        }
        (DriverKind::Deterministic, false, false) => {
            format!("{name} (deterministic, {seed})")
        }
    };
    if let Some(path) = &trace {
        let text = pipefence::trace::chrome::chrome_json(&outcome.trace, &title);
        if let Err(e) = std::fs::write(path, text) {
            return usage_error(&format!(
                "cannot write the trace to {}: {e}",
                path.display()
            ));
        }
        eprintln!("trace: {} ({} events)", path.display(), outcome.trace.len());
    }
    if let Some(path) = &timeline {
        let text = pipefence::trace::svg::svg_timeline(&outcome.trace, &title);
        if let Err(e) = std::fs::write(path, text) {
            return usage_error(&format!(
                "cannot write the timeline to {}: {e}",
                path.display()
            ));
        }
        eprintln!("timeline: {}", path.display());
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
                "  {:w$}  {:8} {:>6} commands  busy {:>9}  blocked {:>9}\n",
                q.queue,
                q.kind,
                q.commands,
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
