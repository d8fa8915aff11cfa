//! `pipefence check`: one scenario under many deterministic schedules (D4), optionally in
//! strict mode (D5). Every schedule is reproducible with
//! `pipefence run FILE --driver deterministic --seed K` (plus `--strict`).

use crate::plan::Scenario;
use crate::run::{
    run, DriverKind, ExpectationResult, HazardReport, HostError, Outcome, RunOptions, Status,
};
use pipefence::RemovalReport;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How far past the lowest seed not handed on yet a thread of [`CheckMode::jobs`] may start
/// one, per thread.
const AHEAD_PER_JOB: u64 = 64;

/// Seeds a thread takes at once: it sends their outcomes together, so the thread folding the
/// report is woken once per batch, not once per schedule (a schedule of a small scenario takes
/// tens of microseconds).
const SEEDS_PER_BATCH: u64 = 8;

/// Distinct failing outcomes a report keeps in full ([`CheckReport::failures`]); failing
/// schedules with another outcome are only counted ([`CheckReport::other_failing`]).
pub const MAX_FAILURE_GROUPS: usize = 32;

/// Seeds listed per distinct failing outcome ([`Failure::seeds`]).
pub const MAX_SEEDS_PER_FAILURE: usize = 8;

/// Distinct outcomes told apart for [`CheckReport::outcomes`] (8 bytes each); past it the count
/// is a lower bound.
pub const MAX_DISTINCT_OUTCOMES: usize = 1 << 20;

/// Distinct problems a report keeps ([`CheckReport::problems`]); past it, problems are only
/// counted in their schedules' outcomes.
pub const MAX_PROBLEMS: usize = 32;

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Number of schedules.
    pub schedules: u64,
    /// First seed.
    pub seed: u64,
    /// Strict mode.
    pub strict: bool,
}

/// What [`check_with`] adds to [`CheckOptions`] (`pipefence check --validate`, `--fail-fast`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckMode {
    /// Hazard reports in every schedule without strict mode's weaker GPU (as `run --validate`);
    /// a hazard fails the schedule. Strict mode reports hazards already.
    pub validate: bool,
    /// Stop after the first failing schedule (in seed order, whatever `jobs` is).
    pub fail_fast: bool,
    /// Threads that run schedules at once (0 and 1: the calling thread only; at most
    /// [`pipefence::explore::MAX_JOBS`] run). Each schedule runs
    /// on its own deterministic device, and the outcomes are folded into the report in seed
    /// order, so the report is the same whatever the number (but `elapsed_ns`).
    pub jobs: usize,
    /// Keep what merging this report with other shards' needs ([`CheckReport::shard_data`]).
    pub shard_data: bool,
}

/// One distinct failing outcome, and the schedules that produced it.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The first seed that produced it (replay with `run --seed`).
    pub seed: u64,
    /// How many schedules produced it.
    pub count: u64,
    /// The first seeds that produced it, in order (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub seeds: Vec<u64>,
    /// `failed` or `removed`.
    pub status: Status,
    /// The exit status `run --seed` gives.
    pub exit: i32,
    /// What failed, in words (failed expectations, host errors, the removal).
    pub what: Vec<String>,
    /// Expectations of the first seed's schedule that passed: counted here, left out of
    /// `outcome` (a file with thousands of expectations would otherwise repeat them in every
    /// kept failure); `run --seed` prints them.
    pub passed_expectations: u64,
    /// Its problems: indices into [`CheckReport::problems`].
    pub problems: Vec<usize>,
    /// The outcome of the first seed's schedule, with only its expectations that did not pass
    /// (failed, or not reached).
    pub outcome: Outcome,
}

/// One distinct problem (a hazard, a failed expectation, a host error or a removal) across
/// every failing schedule: failing outcomes that differ only in other problems share it. A
/// hazard is the same problem whatever value its stale read returned in each schedule.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `hazard`, `expectation`, `host-error` or `removed`.
    pub kind: String,
    /// The scenario line (of the later access, for hazards), when there is one.
    pub line: Option<usize>,
    /// The problem in words, as in its first schedule.
    pub what: String,
    /// Failing schedules that had it.
    pub count: u64,
    /// The first seeds that had it, in order (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub seeds: Vec<u64>,
    /// For a failed expectation, each distinct result it had (`... == 320, got 192`), with its
    /// count and first seed, in the order first seen (at most [`MAX_VARIANTS`]; empty for other
    /// kinds).
    pub variants: Vec<Variant>,
    /// The full report of its first schedule, for rendering.
    #[serde(skip)]
    pub detail: ProblemDetail,
    /// The [`problem_hash`] of what tells it apart from other problems (a shard's report lists
    /// them under `merge.problems`, so that `pipefence merge` can tell problems apart across
    /// shards).
    #[serde(skip)]
    pub key: String,
}

/// Distinct results kept per failed expectation ([`Problem::variants`]).
pub const MAX_VARIANTS: usize = 8;

/// One result of a failed expectation ([`Problem::variants`]).
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// What was checked and found.
    pub what: String,
    /// Failing schedules with this result.
    pub count: u64,
    /// The first of them.
    pub seed: u64,
    /// Only in a merged report: `count` is a lower bound (a shard that had this problem kept
    /// [`MAX_VARIANTS`] other results and counted this one's schedules, if it had any, among
    /// its other results).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
}

/// The report behind a [`Problem`], from its first schedule.
#[derive(Debug, Clone, Default)]
pub enum ProblemDetail {
    /// A hazard.
    Hazard(Box<HazardReport>),
    /// A failed expectation.
    Expectation(ExpectationResult),
    /// A failed host action.
    HostError(HostError),
    /// The removal.
    Removed(Box<RemovalReport>),
    /// Nothing kept.
    #[default]
    None,
}

/// The problems of a failing outcome, each with the key that tells it apart (an expectation is
/// one problem whatever it found: what it found is its variant).
fn problems_of(o: &Outcome) -> Vec<(String, Problem)> {
    let mut out = Vec::new();
    let problem = |kind: &str, line, what: String, detail| Problem {
        kind: kind.to_string(),
        line,
        what,
        count: 0,
        seeds: Vec::new(),
        variants: Vec::new(),
        detail,
        key: String::new(),
    };
    for e in &o.expectations {
        if e.passed == Some(false) {
            let mut p = problem(
                "expectation",
                Some(e.line),
                format!("line {}: expectation failed: {}", e.line, e.detail),
                ProblemDetail::Expectation(e.clone()),
            );
            p.variants.push(Variant {
                at_least: false,
                what: e.detail.clone(),
                count: 0,
                seed: 0,
            });
            out.push((format!("expectation\n{}", e.line), p));
        }
    }
    for e in &o.host_errors {
        out.push((
            format!("host\n{}\n{}\n{}", e.line, e.host, e.message),
            problem(
                "host-error",
                Some(e.line),
                format!("line {}: host {}: {}", e.line, e.host, e.message),
                ProblemDetail::HostError(e.clone()),
            ),
        ));
    }
    for h in &o.hazards {
        // Not `missing`: a stale read says which value this schedule returned. Two unordered
        // writes are one problem in either order (the order is the schedule's).
        let via = h.via.as_ref().map(|v| v.text.as_str()).unwrap_or("");
        let (a, b, fix) = match (h.kind.as_str(), &h.first.text, &h.second.text) {
            ("write-write", a, b) if a > b => (b, a, ""),
            ("write-write", a, b) => (a, b, ""),
            (_, a, b) => (a, b, h.fix.as_str()),
        };
        out.push((
            format!("hazard\n{}\n{}\n{a}\n{b}\n{via}\n{fix}", h.kind, h.range),
            problem(
                "hazard",
                h.second.line,
                h.message.clone(),
                ProblemDetail::Hazard(Box::new(h.clone())),
            ),
        ));
    }
    if let Some(r) = &o.removed {
        let what = describe_removal(r);
        let line = r
            .fault
            .as_ref()
            .and_then(|f| f.at.line)
            .or_else(|| r.queues.iter().find_map(|q| q.at.as_ref()?.line))
            .map(|l| l as usize);
        out.push((
            format!("removed\n{what}"),
            problem(
                "removed",
                line,
                what,
                ProblemDetail::Removed(Box::new(r.clone())),
            ),
        ));
    }
    out
}

/// The hash of a problem's key ([`Problem::key`]; [`fnv1a64`], 16 hex digits).
pub fn problem_hash(key: &str) -> String {
    outcome_hash(key)
}

/// Each problem of an outcome, as its [`Problem::key`] and its report: what `pipefence merge`
/// takes from re-running a merged problem's first seed (shards' reports do not carry
/// [`Problem::detail`]).
pub fn problem_details(o: &Outcome) -> Vec<(String, ProblemDetail)> {
    problems_of(o)
        .into_iter()
        .map(|(key, p)| (problem_hash(&key), p.detail))
        .collect()
}

/// Adds a failing schedule's problems to the distinct ones kept; returns their indices (those
/// past [`MAX_PROBLEMS`] are not kept and have none).
fn count_problems(kept: &mut Vec<(String, Problem)>, o: &Outcome, seed: u64) -> Vec<usize> {
    count_problems_n(kept, o, Some(seed), 1)
}

/// [`count_problems`] for an outcome that `n` schedules had (`seed`: the first of them, when
/// schedules are seeds).
fn count_problems_n(
    kept: &mut Vec<(String, Problem)>,
    o: &Outcome,
    seed: Option<u64>,
    n: u64,
) -> Vec<usize> {
    let mut indices = Vec::new();
    for (key, mut p) in problems_of(o) {
        let variant = p.variants.pop().map(|v| v.what);
        let i = match kept.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None if kept.len() < MAX_PROBLEMS => {
                p.key = problem_hash(&key);
                kept.push((key, p));
                kept.len() - 1
            }
            None => continue,
        };
        if indices.contains(&i) {
            continue;
        }
        indices.push(i);
        let p = &mut kept[i].1;
        p.count += n;
        if let Some(seed) = seed.filter(|_| p.seeds.len() < MAX_SEEDS_PER_FAILURE) {
            p.seeds.push(seed);
        }
        if let Some(what) = variant {
            if let Some(v) = p.variants.iter_mut().find(|v| v.what == what) {
                v.count += n;
            } else if p.variants.len() < MAX_VARIANTS {
                p.variants.push(Variant {
                    at_least: false,
                    what,
                    count: n,
                    seed: seed.unwrap_or(0),
                });
            }
        }
    }
    indices
}

/// The problems in the order a report shows them: causes first (hazards, removals, host
/// errors), then the expectations they broke, each kind in the order first seen; and each
/// failure's problem indices renumbered to match, in that order too.
fn order_problems(problems: Vec<(String, Problem)>, failures: &mut [Failure]) -> Vec<Problem> {
    let mut sets: Vec<&mut Vec<usize>> = failures.iter_mut().map(|f| &mut f.problems).collect();
    order_problem_sets(problems, &mut sets)
}

/// The distinct problems of failing outcomes, each given with the number of schedules that had
/// it (`check --exhaustive`, whose schedules are not seeds: `seeds` stay empty), in the order
/// a report shows them, and each outcome's problems as indices into them.
pub fn problems_of_outcomes<'a>(
    outcomes: impl IntoIterator<Item = (&'a Outcome, u64)>,
) -> (Vec<Problem>, Vec<Vec<usize>>) {
    let mut kept = Vec::new();
    let mut sets: Vec<Vec<usize>> = outcomes
        .into_iter()
        .map(|(o, n)| count_problems_n(&mut kept, o, None, n))
        .collect();
    let mut refs: Vec<&mut Vec<usize>> = sets.iter_mut().collect();
    let problems = order_problem_sets(kept, &mut refs);
    (problems, sets)
}

/// [`order_problems`] for any sets of problem indices.
pub(crate) fn order_problem_sets(
    problems: Vec<(String, Problem)>,
    sets: &mut [&mut Vec<usize>],
) -> Vec<Problem> {
    let rank = |p: &Problem| match p.kind.as_str() {
        "hazard" => 0,
        "removed" => 1,
        "host-error" => 2,
        _ => 3,
    };
    let mut order: Vec<usize> = (0..problems.len()).collect();
    order.sort_by_key(|&i| rank(&problems[i].1));
    let mut new_index = vec![0; problems.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for set in sets.iter_mut() {
        for i in set.iter_mut() {
            *i = new_index[*i];
        }
        set.sort_unstable();
    }
    let mut slots: Vec<Option<Problem>> = problems.into_iter().map(|(_, p)| Some(p)).collect();
    order.iter().filter_map(|&i| slots[i].take()).collect()
}

/// Progress of a long check.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Schedules done.
    pub done: u64,
    /// Of.
    pub total: u64,
    /// Failures so far.
    pub failures: u64,
    /// Schedules per second so far.
    pub per_second: f64,
}

/// The result of a check (the `--json` shape, `docs/check.schema.json`). Its size is bounded
/// whatever the number of schedules: failing schedules are grouped by outcome, with counts and
/// the first seeds of each.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Always 1.
    pub version: u32,
    /// Schedules run.
    pub schedules: u64,
    /// Distinct outcomes seen (status, expectations, fences, removal, host errors); a lower
    /// bound past [`MAX_DISTINCT_OUTCOMES`].
    pub outcomes: usize,
    /// Failing schedules.
    pub failing: u64,
    /// The distinct failing outcomes, in the order of their first seed (at most
    /// [`MAX_FAILURE_GROUPS`]; the first is the lowest failing seed's).
    pub failures: Vec<Failure>,
    /// Failing schedules whose outcome is none of `failures` (more distinct failing outcomes
    /// than are kept).
    pub other_failing: u64,
    /// The first seeds of those (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub other_seeds: Vec<u64>,
    /// The distinct problems of all failing schedules (hazards, failed expectations, host
    /// errors, removals), in the order they were first seen, each with its count and first
    /// seeds (at most [`MAX_PROBLEMS`]): a check where 100 schedules fail in 3 ways has 3.
    pub problems: Vec<Problem>,
    /// The check was interrupted ([`crate::run::interrupt`], Ctrl-C): `schedules` ran.
    pub interrupted: bool,
    /// Wall-clock nanoseconds of the whole check.
    pub elapsed_ns: u64,
    /// With [`CheckMode::shard_data`]: what merging this report with other shards' needs. Not
    /// part of the report's own JSON (`pipefence check --shard` prints it under `merge`).
    #[serde(skip)]
    pub shard_data: Option<ShardData>,
}

/// What merging shards needs beyond their reports: every distinct outcome and every distinct
/// failing outcome with its count, not only the first [`MAX_FAILURE_GROUPS`] (a failing outcome
/// one shard counts among `other_failing` may be among the first of the merged report).
#[derive(Debug, Clone, Serialize)]
pub struct ShardData {
    /// The hash of every distinct outcome seen ([`outcome_hash`], 16 hex digits), sorted; at
    /// most [`MAX_DISTINCT_OUTCOMES`].
    pub outcomes: Vec<String>,
    /// Every distinct failing outcome, in the order of its first seed (at most
    /// [`MAX_DISTINCT_OUTCOMES`]): the first `failures.len()` are the report's `failures`.
    pub failing: Vec<FailingOutcome>,
}

/// One distinct failing outcome of [`ShardData`].
#[derive(Debug, Clone, Serialize)]
pub struct FailingOutcome {
    /// Its [`outcome_hash`] (16 hex digits).
    pub outcome: String,
    /// How many schedules produced it.
    pub count: u64,
    /// The first seeds that produced it, in order (at most [`MAX_SEEDS_PER_FAILURE`]).
    pub seeds: Vec<u64>,
}

/// One share of a check's seeds (`pipefence check --shard INDEX/TOTAL`): shard `index` of
/// `total` runs the contiguous block of seeds from `seed + floor(index * schedules / total)` up
/// to (not including) `seed + floor((index + 1) * schedules / total)`, so the `total` shards
/// together run every seed of the unsharded check exactly once, and in seed order shard by
/// shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// From 0.
    pub index: u64,
    /// At least 1, more than `index`.
    pub total: u64,
}

impl Shard {
    /// A shard, or an error that says why not (`total` 0, `index` not below `total`).
    pub fn new(index: u64, total: u64) -> Result<Shard, String> {
        if total == 0 {
            return Err(format!(
                "shard {index}/0: the total number of shards must be at least 1"
            ));
        }
        if index >= total {
            let which = if total == 1 {
                "the one shard is 0/1".to_string()
            } else {
                format!("{total} shards are 0/{total} to {}/{total}", total - 1)
            };
            return Err(format!(
                "shard {index}/{total}: the index counts from 0 and must be below the total \
                 ({which})"
            ));
        }
        Ok(Shard { index, total })
    }

    /// Parses `INDEX/TOTAL` (`0/4`), with an error that names the text.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = |why: &str| format!("shard `{text}`: {why} (expected INDEX/TOTAL, as 0/4)");
        let Some((i, n)) = text.split_once('/') else {
            return Err(bad("no `/`"));
        };
        let index = parse_count(i).map_err(|e| bad(&format!("the index {e}")))?;
        let total = parse_count(n).map_err(|e| bad(&format!("the total {e}")))?;
        Shard::new(index, total)
    }

    /// The options of this shard's share of `opts`' seeds (maybe none: more shards than
    /// schedules).
    pub fn options(&self, opts: &CheckOptions) -> CheckOptions {
        let n = u128::from(schedules_in_range(opts));
        let at = |i: u64| (u128::from(i) * n / u128::from(self.total)) as u64;
        let (lo, hi) = (at(self.index), at(self.index + 1));
        CheckOptions {
            schedules: hi - lo,
            // An empty block past the last seed (u64::MAX) starts at it.
            seed: opts.seed.saturating_add(lo),
            strict: opts.strict,
        }
    }
}

/// A decimal count, or what is wrong with it.
pub fn parse_count(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("is missing".to_string());
    }
    text.trim().parse::<u64>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => format!("`{text}` is larger than {}", u64::MAX),
        _ => format!("`{text}` is not a whole number"),
    })
}

/// The schedules of `opts` that fit before the last seed (`u64::MAX`).
fn schedules_in_range(opts: &CheckOptions) -> u64 {
    let room = u128::from(u64::MAX - opts.seed) + 1;
    u128::from(opts.schedules).min(room) as u64
}

/// FNV-1a (64 bits) of `bytes`: a hash that is the same on every build and platform, for
/// outcome signatures and scenario files compared across processes (`pipefence merge`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hash of an outcome's [`signature`], as [`ShardData`] writes it.
pub fn outcome_hash(signature: &str) -> String {
    format!("{:016x}", fnv1a64(signature.as_bytes()))
}

impl CheckReport {
    /// The exit status: that of the lowest failing seed, 0 when every schedule passed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// Drops the expectations that passed from a kept failing outcome (only those that did not pass
/// tell about the failure; the rest would fill the report) and returns how many there were.
pub(crate) fn drop_passed_expectations(o: &mut Outcome) -> u64 {
    let before = o.expectations.len();
    o.expectations.retain(|e| e.passed != Some(true));
    (before - o.expectations.len()) as u64
}

/// What makes two outcomes the same: everything but timing (the elapsed time and the queue
/// summaries are left out while it is serialized, then put back, so nothing is cloned) and
/// the order in which hazards and host errors were reported (two actions that touch nothing
/// in common can report theirs in either order: the same outcome).
pub fn signature(o: &mut Outcome) -> String {
    let elapsed = std::mem::take(&mut o.elapsed_ns);
    let queues = std::mem::take(&mut o.queues);
    let sig = match serde_json::to_value(&*o) {
        Ok(serde_json::Value::Object(mut m)) => {
            unordered(&mut m);
            serde_json::Value::Object(m).to_string()
        }
        _ => String::new(),
    };
    o.elapsed_ns = elapsed;
    o.queues = queues;
    sig
}

/// Sorts the report-order lists of an outcome's JSON object (`hazards`, `host_errors`), for
/// [`signature`] and the merged exhaustive shards' signature.
pub(crate) fn unordered(m: &mut serde_json::Map<String, serde_json::Value>) {
    for key in ["hazards", "host_errors"] {
        if let Some(serde_json::Value::Array(a)) = m.get_mut(key) {
            a.sort_by_cached_key(|v| v.to_string());
        }
    }
}

/// What failed in an outcome, in words (failed expectations, host errors, hazards, the
/// removal).
pub fn describe(o: &Outcome) -> Vec<String> {
    let mut what = Vec::new();
    for e in &o.expectations {
        if e.passed == Some(false) {
            what.push(format!("line {}: expectation failed: {}", e.line, e.detail));
        }
    }
    for e in &o.host_errors {
        what.push(format!("line {}: host {}: {}", e.line, e.host, e.message));
    }
    for h in &o.hazards {
        what.push(h.message.clone());
    }
    if let Some(r) = &o.removed {
        what.push(describe_removal(r));
    }
    what
}

/// A removal in one line: the reason, the classification, the cycle, and what each stuck queue
/// waits for.
fn describe_removal(r: &RemovalReport) -> String {
    let mut s = format!("device removed: {}", r.reason);
    if let Some(c) = r
        .classification
        .filter(|c| c.to_string() != r.reason.to_string())
    {
        s += &format!(", {c}");
    }
    if !r.cycle.is_empty() {
        s += &format!(", cycle {}", r.cycle.join(" -> "));
    }
    for q in &r.queues {
        if let (Some(w), Some(l)) = (&q.waiting_for, q.at.as_ref().and_then(|s| s.line)) {
            s += &format!("; {} at line {l} waits for {w}", q.queue);
        }
    }
    s
}

/// Runs `opts.schedules` seeds from `opts.seed` (never past `u64::MAX`: a range that would
/// overflow stops at the last seed), calling `progress` after each.
pub fn check(sc: &Scenario, opts: &CheckOptions, progress: impl FnMut(Progress)) -> CheckReport {
    check_each(sc, opts, progress, |_, _| {})
}

/// [`check`], also handing every schedule's outcome to `visit` (with its seed) as it ends. The
/// report keeps only what [`CheckReport`] says, so memory stays bounded.
pub fn check_each(
    sc: &Scenario,
    opts: &CheckOptions,
    progress: impl FnMut(Progress),
    visit: impl FnMut(u64, &Outcome),
) -> CheckReport {
    check_with(sc, opts, CheckMode::default(), progress, visit)
}

/// [`check_each`] with validation, a stop at the first failing schedule, or several threads
/// ([`CheckMode`]). `progress` and `visit` are called on the calling thread, in seed order.
pub fn check_with(
    sc: &Scenario,
    opts: &CheckOptions,
    mode: CheckMode,
    mut progress: impl FnMut(Progress),
    mut visit: impl FnMut(u64, &Outcome),
) -> CheckReport {
    let start = Instant::now();
    let mut fold = Fold::new(mode.shard_data);
    let n = schedules_in_range(opts);
    let mut each = |ran: Ran| -> bool {
        visit(ran.seed, &ran.outcome);
        fold.add(ran);
        let secs = start.elapsed().as_secs_f64();
        progress(Progress {
            done: fold.done,
            total: opts.schedules,
            failures: fold.failing,
            per_second: if secs > 0.0 {
                fold.done as f64 / secs
            } else {
                0.0
            },
        });
        !(mode.fail_fast && fold.failing > 0)
    };
    if mode.jobs <= 1 || n <= 1 || !run_parallel(sc, opts, mode, n, &mut each) {
        for i in 0..n {
            let Some(ran) = run_one(sc, opts, mode, opts.seed + i) else {
                break;
            };
            if !each(ran) {
                break;
            }
        }
    }
    fold.report(start)
}

/// One schedule's outcome and what groups it.
struct Ran {
    seed: u64,
    outcome: Outcome,
    signature: String,
}

/// Runs schedule `seed`; `None` when the check is interrupted (before it, or cutting it short:
/// not a schedule that ran).
fn run_one(sc: &Scenario, opts: &CheckOptions, mode: CheckMode, seed: u64) -> Option<Ran> {
    if crate::run::interrupted() {
        return None;
    }
    let mut outcome = run(
        sc,
        &RunOptions {
            driver: DriverKind::Deterministic,
            seed,
            strict: opts.strict,
            validate: mode.validate,
            trace: false,
            schedule: None,
        },
    );
    if crate::run::interrupted() {
        return None;
    }
    let signature = signature(&mut outcome);
    Some(Ran {
        seed,
        outcome,
        signature,
    })
}

/// Runs the `n` schedules of `opts` on `mode.jobs` threads, handing each to `each` in seed
/// order on this thread until it returns `false`. Each thread takes the next seed not taken,
/// runs it on its own device and sends the outcome back; outcomes that arrive ahead of a
/// lower seed wait for it, and a thread does not start a seed more than [`AHEAD_PER_JOB`] times
/// the number of threads past the lowest seed not handed on yet (so the outcomes waiting stay
/// few whatever one slow seed does). Returns `false` when no thread could be started (nothing
/// ran).
fn run_parallel(
    sc: &Scenario,
    opts: &CheckOptions,
    mode: CheckMode,
    n: u64,
    each: &mut dyn FnMut(Ran) -> bool,
) -> bool {
    let mode = CheckMode {
        jobs: mode.jobs.min(pipefence::explore::MAX_JOBS),
        ..mode
    };
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // The lowest seed (index) not handed on yet; threads ahead of it by `window` wait here.
    let handed = Mutex::new(0u64);
    let moved = Condvar::new();
    let window = AHEAD_PER_JOB.saturating_mul(mode.jobs as u64);
    let wait_turn = |i: u64| {
        let mut h = handed.lock().unwrap_or_else(PoisonError::into_inner);
        while i >= h.saturating_add(window) && !stop.load(Ordering::Relaxed) {
            // A timeout as well as the wake-up: a missed one costs a moment, not a hang.
            h = moved
                .wait_timeout(h, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    };
    let set_handed = |to: u64| {
        *handed.lock().unwrap_or_else(PoisonError::into_inner) = to;
        moved.notify_all();
    };
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(u64, Vec<Option<Ran>>)>();
        let mut started = 0;
        for j in 0..mode.jobs.min(usize::try_from(n).unwrap_or(usize::MAX)) {
            let tx = tx.clone();
            let (next, stop, wait_turn) = (&next, &stop, &wait_turn);
            let worker = move || loop {
                let first = next.fetch_add(SEEDS_PER_BATCH, Ordering::Relaxed);
                if first >= n || stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut batch = Vec::new();
                let mut last = false;
                for i in first..n.min(first.saturating_add(SEEDS_PER_BATCH)) {
                    wait_turn(i);
                    if stop.load(Ordering::Relaxed) {
                        last = true;
                        break;
                    }
                    let ran = run_one(sc, opts, mode, opts.seed + i);
                    last = ran.is_none();
                    batch.push(ran);
                    if last {
                        break;
                    }
                }
                if tx.send((first, batch)).is_err() || last {
                    break;
                }
            };
            // The size of the main thread's stack: a schedule runs as it would there.
            let spawned = std::thread::Builder::new()
                .name(format!("check-{j}"))
                .stack_size(8 << 20)
                .spawn_scoped(scope, worker);
            if spawned.is_ok() {
                started += 1;
            }
        }
        drop(tx);
        if started == 0 {
            return false;
        }
        let mut pending: BTreeMap<u64, Option<Ran>> = BTreeMap::new();
        let mut expected = 0u64;
        'folding: for (first, batch) in rx.iter() {
            for (k, ran) in batch.into_iter().enumerate() {
                pending.insert(first + k as u64, ran);
            }
            while let Some(ran) = pending.remove(&expected) {
                let Some(ran) = ran else {
                    break 'folding;
                };
                if !each(ran) {
                    break 'folding;
                }
                expected += 1;
            }
            set_handed(expected);
        }
        // Stop the threads: each ends after the schedule it is running.
        stop.store(true, Ordering::Relaxed);
        set_handed(expected);
        drop(rx);
        true
    })
}

/// The report being built, one schedule at a time in seed order.
struct Fold {
    seen: HashSet<u64>,
    groups: Vec<(String, Failure)>,
    failing: u64,
    other_failing: u64,
    other_seeds: Vec<u64>,
    done: u64,
    /// The distinct problems of the failing schedules, with their keys.
    problems: Vec<(String, Problem)>,
    /// With [`CheckMode::shard_data`]: every distinct failing outcome, by hash.
    shard: Option<(HashMap<u64, usize>, Vec<FailingOutcome>)>,
}

impl Fold {
    fn new(shard_data: bool) -> Self {
        Fold {
            seen: HashSet::new(),
            groups: Vec::new(),
            failing: 0,
            other_failing: 0,
            other_seeds: Vec::new(),
            done: 0,
            problems: Vec::new(),
            shard: shard_data.then(|| (HashMap::new(), Vec::new())),
        }
    }

    fn add(&mut self, ran: Ran) {
        let Ran {
            seed,
            outcome: mut o,
            signature: sig,
        } = ran;
        self.done += 1;
        let hash = fnv1a64(sig.as_bytes());
        if self.seen.len() < MAX_DISTINCT_OUTCOMES {
            self.seen.insert(hash);
        }
        if o.status == Status::Passed {
            return;
        }
        self.failing += 1;
        let in_problems = count_problems(&mut self.problems, &o, seed);
        if let Some((index, list)) = &mut self.shard {
            if let Some(&k) = index.get(&hash) {
                let f: &mut FailingOutcome = &mut list[k];
                f.count += 1;
                if f.seeds.len() < MAX_SEEDS_PER_FAILURE {
                    f.seeds.push(seed);
                }
            } else if list.len() < MAX_DISTINCT_OUTCOMES {
                index.insert(hash, list.len());
                list.push(FailingOutcome {
                    outcome: format!("{hash:016x}"),
                    count: 1,
                    seeds: vec![seed],
                });
            }
        }
        if let Some((_, g)) = self.groups.iter_mut().find(|(s, _)| *s == sig) {
            g.count += 1;
            if g.seeds.len() < MAX_SEEDS_PER_FAILURE {
                g.seeds.push(seed);
            }
        } else if self.groups.len() < MAX_FAILURE_GROUPS {
            let passed_expectations = drop_passed_expectations(&mut o);
            self.groups.push((
                sig,
                Failure {
                    seed,
                    count: 1,
                    seeds: vec![seed],
                    status: o.status,
                    exit: o.exit_code(),
                    what: describe(&o),
                    passed_expectations,
                    problems: in_problems,
                    outcome: o,
                },
            ));
        } else {
            self.other_failing += 1;
            if self.other_seeds.len() < MAX_SEEDS_PER_FAILURE {
                self.other_seeds.push(seed);
            }
        }
    }

    fn report(self, start: Instant) -> CheckReport {
        let shard_data = self.shard.map(|(_, failing)| {
            let mut outcomes: Vec<u64> = self.seen.iter().copied().collect();
            outcomes.sort_unstable();
            ShardData {
                outcomes: outcomes.iter().map(|h| format!("{h:016x}")).collect(),
                failing,
            }
        });
        let mut failures: Vec<Failure> = self.groups.into_iter().map(|(_, f)| f).collect();
        let problems = order_problems(self.problems, &mut failures);
        CheckReport {
            version: 1,
            schedules: self.done,
            outcomes: self.seen.len(),
            failing: self.failing,
            failures,
            other_failing: self.other_failing,
            other_seeds: self.other_seeds,
            problems,
            interrupted: crate::run::interrupted(),
            elapsed_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            shard_data,
        }
    }
}
