//! `pipefence check --shard`, the shard from the environment (Bazel, Kubernetes indexed jobs),
//! and `pipefence merge` (docs/exploration.md).

use super::exhaustive::{
    ExhaustiveFailureView, ExhaustiveView, ShrunkView as ExhaustiveShrunkView,
};
use super::{check_summary, usage_error, CheckView, ColorChoice, FailureView};
use pipefence_scenario::check::{parse_count, problem_details, Shard};
use pipefence_scenario::diagnostic::SourceFile;
use pipefence_scenario::merge::{merge, Input, Merged, MergedCheck, ScenarioId};
use pipefence_scenario::run::{run, DriverKind, RunOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Where a shard came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardSource {
    /// `--shard INDEX/TOTAL`.
    Flag,
    /// `TEST_SHARD_INDEX` and `TEST_TOTAL_SHARDS` (Bazel; `TEST_SHARD_STATUS_FILE` is touched).
    Bazel,
    /// `JOB_COMPLETION_INDEX` with `--total-shards` or `PIPEFENCE_TOTAL_SHARDS`.
    Kubernetes,
}

/// An environment variable: `None` when unset, an error naming it when not UTF-8.
fn env(key: &str) -> Result<Option<String>, String> {
    match std::env::var(key) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "{key}={}: not a whole number (not even UTF-8)",
            v.to_string_lossy()
        )),
    }
}

/// A count from `what` (a flag or a variable) holding `text`.
fn count(what: &str, text: &str) -> Result<u64, String> {
    parse_count(text).map_err(|e| {
        if text.is_empty() {
            format!("{what} is empty: it must be a whole number")
        } else {
            format!("{what} {e}")
        }
    })
}

/// The shard this check runs, from `--shard`, else from Bazel's `TEST_SHARD_INDEX` /
/// `TEST_TOTAL_SHARDS`, else from a Kubernetes indexed job's `JOB_COMPLETION_INDEX` with
/// `--total-shards` or `PIPEFENCE_TOTAL_SHARDS`; `None` when nothing asks for one.
pub(crate) fn resolve(
    flag: Option<&str>,
    total_flag: Option<&str>,
) -> Result<Option<(Shard, ShardSource)>, String> {
    if let Some(text) = flag {
        if let Some(t) = total_flag {
            return Err(format!(
                "--total-shards {t} is the total for JOB_COMPLETION_INDEX; --shard {text} gives \
                 its own total (give one of the two)"
            ));
        }
        let shard = Shard::parse(text).map_err(|e| format!("--{e}"))?;
        // The flag wins; a shard the environment also asks for is said to be left unused
        // (whatever its values: the flag's user chose), as Bazel's status file is not touched.
        let set: Vec<String> = [
            "TEST_SHARD_INDEX",
            "TEST_TOTAL_SHARDS",
            "JOB_COMPLETION_INDEX",
        ]
        .into_iter()
        .filter_map(|k| std::env::var_os(k).map(|v| format!("{k}={}", v.to_string_lossy())))
        .collect();
        if !set.is_empty() {
            eprintln!(
                "pipefence: --shard {text} chooses the shard: {} not used",
                set.join(" ")
            );
        }
        return Ok(Some((shard, ShardSource::Flag)));
    }
    match (env("TEST_SHARD_INDEX")?, env("TEST_TOTAL_SHARDS")?) {
        (Some(i), Some(n)) => {
            if let Some(t) = total_flag {
                return Err(format!(
                    "--total-shards {t} is the total for JOB_COMPLETION_INDEX; Bazel's \
                     TEST_TOTAL_SHARDS={n} gives the total here"
                ));
            }
            let index = count(&format!("TEST_SHARD_INDEX={i}:"), &i)?;
            let total = count(&format!("TEST_TOTAL_SHARDS={n}:"), &n)?;
            return Shard::new(index, total)
                .map(|s| Some((s, ShardSource::Bazel)))
                .map_err(|e| format!("TEST_SHARD_INDEX={i} TEST_TOTAL_SHARDS={n}: {e}"));
        }
        (Some(i), None) => {
            return Err(format!(
                "TEST_SHARD_INDEX={i} is set but TEST_TOTAL_SHARDS is not: Bazel sets both"
            ))
        }
        (None, Some(n)) => {
            return Err(format!(
                "TEST_TOTAL_SHARDS={n} is set but TEST_SHARD_INDEX is not: Bazel sets both"
            ))
        }
        (None, None) => {}
    }
    let total = match total_flag {
        Some(t) => Some((format!("--total-shards {t}:"), t.to_string())),
        None => env("PIPEFENCE_TOTAL_SHARDS")?.map(|t| (format!("PIPEFENCE_TOTAL_SHARDS={t}:"), t)),
    };
    match (env("JOB_COMPLETION_INDEX")?, total) {
        (Some(k), Some((what, t))) => {
            let index = count(&format!("JOB_COMPLETION_INDEX={k}:"), &k)?;
            let total = count(&what, &t)?;
            Shard::new(index, total)
                .map(|s| Some((s, ShardSource::Kubernetes)))
                .map_err(|e| format!("JOB_COMPLETION_INDEX={k} with {what} {e}"))
        }
        (Some(k), None) => Err(format!(
            "JOB_COMPLETION_INDEX={k} is set (a Kubernetes indexed job) but not the total number \
             of shards: give --total-shards N or PIPEFENCE_TOTAL_SHARDS=N (the job's \
             completions)"
        )),
        (None, Some(_)) if total_flag.is_some() => Err(format!(
            "--total-shards {} needs JOB_COMPLETION_INDEX (a Kubernetes indexed job's index); \
             elsewhere give --shard INDEX/TOTAL",
            total_flag.unwrap_or_default()
        )),
        // PIPEFENCE_TOTAL_SHARDS alone: nothing asks for a shard (a default for the pods of an
        // indexed job); said, as a job whose pods get no index runs the whole check in each.
        (None, Some((what, _))) => {
            eprintln!(
                "pipefence: {} is set but JOB_COMPLETION_INDEX is not: running the whole check \
                 (not a shard)",
                what.trim_end_matches(':')
            );
            Ok(None)
        }
        (None, None) => Ok(None),
    }
}

/// `Failed` for `failed`: the spelling of `check`'s summary.
fn status_word(status: &str) -> String {
    let mut c = status.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// Gives the merged problems their reports back, for the same diagnostics as the unsharded
/// check's: reads the scenario file the shards name, checks that it is the file they ran (its
/// hash), and re-runs each problem's first seed with the check's options (a deterministic
/// schedule: the same outcome). Returns the file's text. When the file cannot be read, has
/// changed or does not parse, says so on stderr and returns nothing: the problems are then
/// printed by their words, without source snippets.
fn problem_reports(m: &mut MergedCheck) -> String {
    if m.problems.is_empty() {
        return String::new();
    }
    let name = m.scenario.name.clone();
    let without = "problems are shown without their source lines";
    let bytes = match std::fs::read(&name) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("merge: cannot read the scenario file {name} ({e}): {without}");
            return String::new();
        }
    };
    if ScenarioId::new(&name, &bytes).hash != m.scenario.hash {
        eprintln!("merge: {name} is not the file the shards checked (its hash differs): {without}");
        return String::new();
    }
    let Ok(source) = String::from_utf8(bytes) else {
        eprintln!("merge: {name} is not UTF-8 text: {without}");
        return String::new();
    };
    let Ok(scenario) = pipefence_scenario::parse(&name, &source) else {
        eprintln!("merge: {name} does not parse: {without}");
        return String::new();
    };
    for p in &mut m.problems {
        let Some(&seed) = p.seeds.first() else {
            continue;
        };
        let opts = RunOptions {
            driver: DriverKind::Deterministic,
            seed,
            strict: m.options.strict,
            validate: m.options.validate,
            trace: false,
            schedule: None,
        };
        let outcome = run(&scenario, &opts);
        if let Some((_, detail)) = problem_details(&outcome)
            .into_iter()
            .find(|(key, _)| *key == p.key)
        {
            p.detail = detail;
        }
    }
    source
}

/// `pipefence merge FILE...`.
pub(crate) fn merge_command(files: &[PathBuf], json: bool, color: ColorChoice) -> ExitCode {
    let mut inputs = Vec::new();
    for file in files {
        let name = file.display().to_string();
        let text = match std::fs::read(file) {
            Ok(b) => match String::from_utf8(b) {
                Ok(t) => t,
                Err(_) => return usage_error(&format!("{name}: not UTF-8 text (not a report)")),
            },
            Err(e) => return usage_error(&format!("{name}: cannot read: {e}")),
        };
        inputs.push(Input { name, text });
    }
    let mut merged = match merge(&inputs) {
        Ok(m) => m,
        Err(e) => return usage_error(&e),
    };
    let source = match &mut merged {
        Merged::Sampled(m) => problem_reports(m),
        Merged::Exhaustive(_) => String::new(),
    };
    let (summary, text, code) = match &merged {
        Merged::Sampled(m) => {
            let view = CheckView {
                title: &m.scenario.name,
                name: &m.scenario.name,
                seed: m.options.seed,
                asked: m.options.schedules,
                strict: m.options.strict,
                validate: m.options.validate,
                fail_fast: m.options.fail_fast,
                schedules: m.schedules,
                outcomes: m.outcomes,
                failing: m.failing,
                interrupted: m.interrupted,
                elapsed_ns: m.elapsed_ns,
                failures: m
                    .failures
                    .iter()
                    .map(|f| FailureView {
                        seed: f.seed,
                        count: f.count,
                        seeds: &f.seeds,
                        problems: &f.problems,
                    })
                    .collect(),
                other_failing: m.other_failing,
                other_seeds: &m.other_seeds,
            };
            (
                check_summary(
                    &view,
                    &SourceFile::new(&m.scenario.name, &source),
                    &m.problems,
                    color.style(json),
                ),
                serde_json::to_string_pretty(m),
                m.exit_code(),
            )
        }
        Merged::Exhaustive(m) => {
            let name = m
                .scenario
                .as_ref()
                .map_or("merged shards", |s| s.name.as_str());
            let view = ExhaustiveView {
                name,
                strict: m.strict,
                complete: m.complete,
                bound: m.bound.as_deref(),
                schedules: m.schedules,
                outcomes: m.outcomes,
                failing: m.failing,
                elapsed_ns: m.elapsed_ns,
                shrink_ns: None,
                failures: m
                    .failures
                    .iter()
                    .map(|f| ExhaustiveFailureView {
                        status: status_word(&f.status),
                        exit: f.exit,
                        count: f.count,
                        replay: &f.replay,
                        what: &f.what,
                        shrunk: f
                            .shrunk
                            .as_ref()
                            .and_then(|r| serde_json::from_str(r.get()).ok())
                            .and_then(|v| ExhaustiveShrunkView::from_json(&v)),
                    })
                    .collect(),
                other_failing: m.other_failing,
                stopped_runs: m.repeated_runs + m.sleep_blocked,
                shard: false,
            };
            let mut summary = super::exhaustive::summary(&view);
            summary.insert_str(
                summary.find('\n').map_or(summary.len(), |i| i + 1),
                &super::exhaustive::shard_bound_note(m.bound.as_deref()),
            );
            (summary, serde_json::to_string_pretty(m), m.exit_code())
        }
    };
    if json {
        eprint!("{summary}");
        match text {
            Ok(s) => println!("{s}"),
            Err(e) => return usage_error(&format!("cannot serialize the merged report: {e}")),
        }
    } else {
        print!("{summary}");
    }
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
