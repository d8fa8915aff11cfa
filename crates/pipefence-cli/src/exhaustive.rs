//! `pipefence check FILE --exhaustive`: every schedule, with honest bounds.

use super::{
    load, plural, problem_diagnostics, replay_program_here, shell_word, usage_error, ColorChoice,
    SHOWN_FAILURES,
};
use pipefence::explore::{ExhaustiveOptions, Parallel, Script, DEFAULT_MAX_SCHEDULES};
use pipefence_scenario::check::problems_of_outcomes;
use pipefence_scenario::diagnostic::SourceFile;
use pipefence_scenario::exhaustive::{
    check_exhaustive, ExhaustiveCheckOptions, ExhaustiveFailure, ExhaustiveReport,
};
use pipefence_scenario::merge::{ExhaustiveShardOptions, ShardedExhaustiveReport};
use pipefence_scenario::plan::Scenario;
use pipefence_scenario::run::{run, DriverKind, RunOptions};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The search flags of `check --exhaustive`.
pub(crate) struct Search {
    pub(crate) max_schedules: Option<u64>,
    pub(crate) preemption_bound: Option<u32>,
    pub(crate) reduction: bool,
    /// The shrink budget; `None` with `--no-shrink`.
    pub(crate) shrink: Option<u64>,
    /// `--fail-fast`: stop at the first failing schedule.
    pub(crate) fail_fast: bool,
}

pub(crate) fn command(
    file: &std::path::Path,
    json: bool,
    strict: bool,
    search: Search,
    parallel: super::Parallel,
    color: ColorChoice,
    outputs: &super::Outputs,
) -> ExitCode {
    let Search {
        max_schedules,
        preemption_bound,
        reduction,
        shrink,
        fail_fast,
    } = search;
    let given =
        |flag: &str| std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    if given("--schedules") || given("--seed") {
        return usage_error("--exhaustive explores every schedule: --schedules and --seed are for sampled checks (bound it with --max-schedules or --preemption-bound)");
    }
    if max_schedules == Some(0) {
        return usage_error("--max-schedules must be at least 1");
    }
    let (name, source, scenario, id) = match load(file, json, color) {
        Ok(l) => (l.name, l.source, l.scenario, l.id),
        Err(code) => return code,
    };
    if let Err(code) = super::touch_shard_status(parallel) {
        return code;
    }
    let opts = ExhaustiveCheckOptions {
        strict,
        bounds: ExhaustiveOptions {
            max_schedules: max_schedules.unwrap_or(DEFAULT_MAX_SCHEDULES),
            preemption_bound,
            reduction,
        },
        shrink,
        parallel: Parallel {
            jobs: parallel.jobs,
            shard: parallel.shard.map(|(s, _)| (s.index, s.total)),
        },
        fail_fast,
    };
    // Progress only on a terminal: a pipe or a log gets no `\r` lines.
    let terminal = std::io::stderr().is_terminal();
    let mut last = std::time::Instant::now();
    let mut shown = false;
    // When the search visited its last schedule: what follows, before the report comes back,
    // is the shrinking of its failures (the summary says how long that took).
    let mut searched = std::time::Instant::now();
    let report = check_exhaustive(&scenario, &opts, |p| {
        searched = std::time::Instant::now();
        if terminal && last.elapsed() >= std::time::Duration::from_millis(500) {
            last = std::time::Instant::now();
            shown = true;
            eprint!(
                "\r{name}: {} schedules, {:.0}/s, {} failing  ",
                p.done, p.per_second, p.failures
            );
        }
    });
    let shrink_ns = (shrink.is_some() && report.failures.iter().any(|f| f.shrunk.is_some()))
        .then(|| u64::try_from(searched.elapsed().as_nanos()).unwrap_or(u64::MAX))
        .map(|ns| ns.min(report.elapsed_ns));
    if shown {
        // Clear the progress line.
        eprint!("\r\x1b[2K");
    }
    if !report.interrupted {
        if let Err(code) = write_outputs(file, &name, &scenario, strict, &report, outputs) {
            return code;
        }
    }
    let title = match parallel.shard {
        Some((shard, _)) => format!("{name} (shard {}/{})", shard.index, shard.total),
        None => name.clone(),
    };
    let view = ExhaustiveView {
        name: &title,
        strict,
        complete: report.complete,
        bound: report.bound.as_deref(),
        schedules: report.schedules,
        outcomes: report.outcomes,
        failing: report.failing,
        elapsed_ns: report.elapsed_ns,
        shrink_ns,
        failures: report
            .failures
            .iter()
            .map(|f| ExhaustiveFailureView {
                status: format!("{:?}", f.status),
                exit: f.exit,
                count: f.count,
                replay: &f.replay,
                what: &f.what,
                shrunk: None,
            })
            .collect(),
        other_failing: report.other_failing,
        stopped_runs: report.sleep_blocked + report.repeated_runs,
        shard: parallel.shard.is_some(),
    };
    let mut summary = summary_header(&view);
    if preemption_bound.is_some()
        && reduction
        && report
            .bound
            .as_deref()
            .is_some_and(|b| b.starts_with("--preemption-bound"))
    {
        let search = if report.reduced {
            "reduces only the orders of one actor's independent actions (a dispatch's \
             groups, a queue's early write-backs) and keeps the states it explored"
        } else {
            // In shards, or where most runs of that search stopped asleep.
            "explores every interleaving without partial-order reduction"
        };
        summary += &format!(
            "  a preemption bound {search}; without --preemption-bound the reduced search may \
             prove this scenario in far fewer schedules\n"
        );
    }
    if parallel.shard.is_some() {
        summary += &shard_bound_note(report.bound.as_deref());
    }
    let flag = if strict { " --strict" } else { "" };
    let program = replay_program_here();
    let quoted = shell_word(&name);
    // Each distinct problem once, then each failing outcome with its problems and replay.
    let (problems, sets) =
        problems_of_outcomes(report.failures.iter().map(|f| (&f.outcome, f.count)));
    let src = SourceFile::new(&name, &source);
    summary += &problem_diagnostics(&src, &problems, report.failing, None, color.style(json));
    if !report.failures.is_empty() {
        summary += "failing outcomes:\n";
    }
    for (f, set) in report.failures.iter().zip(&sets).take(SHOWN_FAILURES) {
        let numbers: Vec<String> = set.iter().map(|i| (i + 1).to_string()).collect();
        let what = match numbers.len() {
            0 => "problems not kept".to_string(),
            1 => format!("problem {}", numbers[0]),
            _ => format!("problems {}", numbers.join(" + ")),
        };
        summary += &format!(
            "  {:?} (exit {}), {}, {what}: replay with `{program} run {quoted}{flag} --schedule {}`\n",
            f.status,
            f.exit,
            plural(f.count, "schedule"),
            f.replay
        );
        // Read from the report's JSON, as `merge` reads a shard's: one reading of it, so a
        // check and the merge of its shards say the same of each shrunk failure.
        if let Some(view) = f
            .shrunk
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| ShrunkView::from_json(&v))
        {
            summary += &shrunk_text(&view, &f.replay, &format!("{program} run {quoted}{flag}"));
        }
    }
    summary += &hidden_failures(
        report.failures.iter().map(|f| f.count),
        report.other_failing,
    );
    if json {
        eprint!("{summary}");
        let text = match parallel.shard {
            Some((shard, _)) => {
                let options = ExhaustiveShardOptions {
                    strict,
                    max_schedules: opts.bounds.max_schedules,
                    preemption_bound: opts.bounds.preemption_bound,
                    reduction: opts.bounds.reduction,
                    shrink: opts.shrink,
                    fail_fast: opts.fail_fast,
                };
                serde_json::to_string_pretty(&ShardedExhaustiveReport::new(
                    &report, shard, &id, options,
                ))
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

/// `--timeline DIR`, `--trace DIR` and `--report FILE` of an exhaustive check: each listed
/// failing outcome's schedule (its shrunk one when it was shrunk) run again with the trace on,
/// as DIR/failure-N.svg and DIR/failure-N.json (N from 1, as the outcomes are listed); the
/// report of the first of them, or, when none fails, of the search's first schedule (each
/// actor running on until it blocks or ends, then the first that can run). A schedule
/// replays exactly: each is what the search saw.
fn write_outputs(
    file: &std::path::Path,
    name: &str,
    scenario: &Scenario,
    strict: bool,
    report: &ExhaustiveReport,
    outputs: &super::Outputs,
) -> Result<(), ExitCode> {
    let replay = |script: Script| {
        let script = Arc::new(script);
        let outcome = run(
            scenario,
            &RunOptions {
                trace: true,
                ..RunOptions::scripted(strict, script.clone())
            },
        );
        let mode = super::Mode {
            strict,
            validate: false,
            schedule: Some(script.schedule_string()),
        };
        (mode, outcome)
    };
    // Each failure's schedule: the shrunk one when there is one. Its string came from this
    // search, so it decodes.
    let failure = |f: &ExhaustiveFailure| {
        let s = f.shrunk.as_ref().map_or(&f.replay, |s| &s.replay);
        Script::from_schedule_string(s)
            .map_err(|e| usage_error(&format!("cannot replay schedule `{s}`: {e}")))
    };
    if outputs.timeline.is_some() || outputs.trace.is_some() {
        for (i, f) in report.failures.iter().enumerate() {
            let (mode, outcome) = replay(failure(f)?);
            let title = super::run_title(name, DriverKind::Deterministic, &mode, 0);
            let path = |dir: &PathBuf, ext: &str| dir.join(format!("failure-{}.{ext}", i + 1));
            super::write_pictures(
                &outcome,
                &title,
                outputs.trace.as_ref().map(|d| path(d, "json")).as_deref(),
                outputs.timeline.as_ref().map(|d| path(d, "svg")).as_deref(),
            )?;
        }
    }
    if let Some(path) = &outputs.report {
        let script = match report.failures.first() {
            Some(f) => failure(f)?,
            None if report.reduced => Script::reducing(Vec::new(), None, Vec::new()),
            None => Script::new(Vec::new()),
        };
        let (mode, outcome) = replay(script);
        let at = super::Run {
            file,
            name,
            driver: DriverKind::Deterministic,
            mode: &mode,
            seed: 0,
        };
        super::write_report(path, &at, &outcome)?;
    }
    Ok(())
}

/// The line that counts the failing schedules not shown: those of the outcomes past the
/// first [`SHOWN_FAILURES`] (given by their counts, in order) and `other_failing`.
fn hidden_failures(counts: impl Iterator<Item = u64>, other_failing: u64) -> String {
    let hidden = counts.skip(SHOWN_FAILURES).sum::<u64>() + other_failing;
    if hidden == 0 {
        return String::new();
    }
    format!(
        "  {hidden} more failing schedules with other outcomes (--json lists up to 32 outcomes)\n"
    )
}

/// What the summary says of a shrunk failure: a report's `shrunk` object, read from its JSON
/// (the check's own report, or a merged shard's).
pub(crate) struct ShrunkView {
    pub(crate) replay: String,
    pub(crate) preemptions: u32,
    pub(crate) original_preemptions: u32,
    pub(crate) fewest: bool,
    /// Each decisive step in words.
    pub(crate) steps: Vec<String>,
}

impl ShrunkView {
    /// The view of a report's `shrunk` object in its JSON (this check's, or a shard's as it
    /// printed it); `None` when it is not one (a report edited by hand).
    pub(crate) fn from_json(v: &serde_json::Value) -> Option<ShrunkView> {
        let count = |k: &str| v.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
        Some(ShrunkView {
            replay: v.get("replay")?.as_str()?.to_string(),
            preemptions: count("preemptions")?,
            original_preemptions: count("original_preemptions")?,
            fewest: v.get("fewest")?.as_bool()?,
            steps: v
                .get("steps")?
                .as_array()?
                .iter()
                .filter_map(|s| Some(s.get("text")?.as_str()?.to_string()))
                .collect(),
        })
    }
}

/// A shrunk failure in words: its preemptions, whether they are the fewest, its replay and
/// its decisive steps. `run` is the replay command without `--schedule`.
fn shrunk_text(s: &ShrunkView, replayed: &str, run: &str) -> String {
    let n = plural(u64::from(s.preemptions), "preemption");
    let mut t = match (s.replay == replayed, s.fewest) {
        (true, true) => format!("    {n}, the fewest possible\n"),
        (true, false) => format!("    {n}, the fewest found\n"),
        (false, fewest) => format!(
            "    shrunk to {n} (the fewest {}; that schedule had {}): replay with `{run} \
             --schedule {}`\n",
            if fewest { "possible" } else { "found" },
            s.original_preemptions,
            s.replay
        ),
    };
    if !s.fewest {
        // The bounded check runs the shrink's own bounded search, on every thread.
        t += &format!(
            "      not proved the fewest: the shrink's budget (--shrink-runs) ran out before \
             every schedule with fewer preemptions was explored; `check --exhaustive \
             --preemption-bound {} --no-shrink` explores those, and says whether it finished \
             within its --max-schedules\n",
            s.preemptions.saturating_sub(1)
        );
    }
    if s.preemptions == 0 {
        t += "      it fails without any preemption: each actor runs until it blocks or ends, the \
              schedule choosing who runs next each time\n";
    }
    for (i, step) in s.steps.iter().enumerate() {
        t += &format!("      decisive step {}: {step}\n", i + 1);
    }
    t
}

/// What the summary of an exhaustive check says about one distinct failing outcome.
pub(crate) struct ExhaustiveFailureView<'a> {
    /// `Failed` or `Removed`.
    pub(crate) status: String,
    pub(crate) exit: i32,
    pub(crate) count: u64,
    pub(crate) replay: &'a str,
    pub(crate) what: &'a [String],
    /// The failure shrunk (merged shards keep their shard's shrink).
    pub(crate) shrunk: Option<ShrunkView>,
}

/// What the summary of an exhaustive check says, from its report or merged shards' reports.
pub(crate) struct ExhaustiveView<'a> {
    pub(crate) name: &'a str,
    pub(crate) strict: bool,
    pub(crate) complete: bool,
    pub(crate) bound: Option<&'a str>,
    pub(crate) schedules: u64,
    pub(crate) outcomes: usize,
    pub(crate) failing: u64,
    pub(crate) elapsed_ns: u64,
    /// Of `elapsed_ns`, the time spent shrinking failures after the search (known to the
    /// check that shrank them, not to a merge of shards).
    pub(crate) shrink_ns: Option<u64>,
    pub(crate) failures: Vec<ExhaustiveFailureView<'a>>,
    pub(crate) other_failing: u64,
    /// Runs stopped asleep or as repeats (not schedules).
    pub(crate) stopped_runs: u64,
    /// The report of one shard.
    pub(crate) shard: bool,
}

/// What the summary of a shard, or of merged shards, adds when `--max-schedules` cut it: the
/// shards' units together often hold more schedules than the unsharded search
/// (`docs/exploration.md`, "Exhaustive checks on threads and in shards"), so a check proved
/// unsharded can need a larger bound in shards.
pub(crate) fn shard_bound_note(bound: Option<&str>) -> String {
    match bound {
        Some(b) if b.starts_with("--max-schedules") => "  each shard stops at its \
            --max-schedules, and the shards' units together often hold more schedules than \
            the unsharded search: run the shards with a larger --max-schedules for a proof\n"
            .to_string(),
        _ => String::new(),
    }
}

/// The first line of an exhaustive check's human summary.
pub(crate) fn summary_header(r: &ExhaustiveView) -> String {
    let name = r.name;
    let ms = r.elapsed_ns as f64 / 1e6;
    // The rate is the search's: shrinking runs schedules of its own.
    let search_ns = r.elapsed_ns.saturating_sub(r.shrink_ns.unwrap_or(0));
    let per_s = if search_ns > 0 {
        r.schedules as f64 / (search_ns as f64 / 1e9)
    } else {
        0.0
    };
    // The time, and with `rate` the search's rate, before the shrink's time where it shrank.
    let time = |rate: bool| {
        let rate = if rate {
            format!(" ({per_s:.0}/s)")
        } else {
            String::new()
        };
        match r.shrink_ns {
            Some(shrink) => format!(
                "in {ms:.1} ms: the search {:.1} ms{rate}, shrinking the failures {:.1} ms",
                search_ns as f64 / 1e6,
                shrink as f64 / 1e6
            ),
            None => format!("in {ms:.1} ms{rate}"),
        }
    };
    let schedules = plural(r.schedules, "schedule");
    let outcomes = plural(r.outcomes as u64, "outcome");
    let stopped = if r.stopped_runs > 0 {
        let runs = if r.stopped_runs == 1 { "run" } else { "runs" };
        format!(
            " ({} more {runs} stopped as equivalent to one explored: asleep, or repeating \
             a schedule or state explored before)",
            r.stopped_runs
        )
    } else {
        String::new()
    };
    if r.shard && r.complete && r.schedules == 0 {
        format!(
            "{name}: no schedule to explore in this shard (its share of the search is empty, \
             or holds only runs equivalent to schedules of other shards), in {ms:.1} ms\n"
        )
    } else if r.complete && r.failing == 0 {
        format!(
            "{name}: proved: {schedules}, {outcomes}, all pass (every schedule of this \
             scenario in the model), in {ms:.1} ms ({per_s:.0}/s)\n"
        )
    } else if r.complete {
        format!(
            "{name}: every schedule explored: {schedules}, {outcomes}, {} failing, {}\n",
            r.failing,
            time(false)
        )
    } else {
        format!(
            "{name}: bounded by {}: {schedules} explored{stopped}, not a proof; {outcomes}, \
             {} failing, {}\n",
            r.bound.unwrap_or("a bound"),
            r.failing,
            time(true)
        )
    }
}

/// The human summary of an exhaustive check without its problems' diagnostics (merged
/// shards' reports, which keep no problem reports): the first line, then each failing outcome
/// with what failed and its replay.
pub(crate) fn summary(r: &ExhaustiveView) -> String {
    let (name, strict) = (r.name, r.strict);
    let mut summary = summary_header(r);
    let flag = if strict { " --strict" } else { "" };
    let program = replay_program_here();
    let quoted = shell_word(name);
    for f in r.failures.iter().take(SHOWN_FAILURES) {
        summary += &format!(
            "  {} (exit {}), {}: replay with `{program} run {quoted}{flag} --schedule {}`\n",
            f.status,
            f.exit,
            plural(f.count, "schedule"),
            f.replay
        );
        for w in f.what {
            summary += &format!("      {w}\n");
        }
        if let Some(s) = &f.shrunk {
            summary += &shrunk_text(s, f.replay, &format!("{program} run {quoted}{flag}"));
        }
    }
    summary += &hidden_failures(r.failures.iter().map(|f| f.count), r.other_failing);
    summary
}
