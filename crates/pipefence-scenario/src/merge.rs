//! `pipefence merge`: the JSON reports of a check's shards (`pipefence check FILE --shard I/N
//! --json`) combined into the report the unsharded check gives (`docs/exploration.md`).
//!
//! A shard's report is a [`CheckReport`] plus `shard` (`{"index": I, "total": N}`) and
//! `merge` ([`MergeSection`]: the scenario file's name and hash, the options of the whole
//! check, and [`ShardData`]). Shards are contiguous blocks of seeds ([`Shard`]), so the
//! shards in index order are the seeds in order, and the merged report is exactly the
//! unsharded one but for `elapsed_ns` (here the sum of the shards'): the same counts, the same
//! failing outcomes with the same first seeds, in the order of their first seed. Each kept
//! failing outcome's `outcome` is copied from the shard of its first seed byte for byte.
//!
//! The reports of exhaustive checks (`mode: exhaustive`) with a `shard` field merge too:
//! complete when every shard is; `bound` the first shard's that has one; `schedules`,
//! `repeated_runs`, `failing` and `other_failing` summed; failing outcomes merged by their
//! outcome (the `outcome` object without timing), keeping the `replay` of the lowest shard.
//!
//! Problems (`problems`, and each failure's `problems` as indices into them) merge by their
//! key ([`MergeSection::problems`]: the hash of what tells a problem apart, one per entry of
//! the shard's `problems`): counts summed; seeds, and each failed expectation's results
//! (`variants`, merged by their words, counts summed), kept in seed order up to the same caps
//! as a check's; each problem's words and line as in its first seed's shard; the first
//! [`MAX_PROBLEMS`] in the order first seen, then in the order a check shows them. That is
//! exactly the unsharded check's whenever every shard kept all its problems and results (at
//! most [`MAX_PROBLEMS`] distinct problems, and [`MAX_VARIANTS`] results per expectation, in
//! each shard). Past those caps a shard only counts the problems and results it kept, so a
//! problem another shard kept may miss some of its schedules there: its counts are then lower
//! bounds and a failure may lack its index. Merged problems have no
//! [`crate::check::Problem::detail`] (reports do not carry it): `pipefence merge` re-runs each
//! problem's first seed to render it.
//!
//! Inputs are checked: every shard of one total present once, the same scenario file and the
//! same options; errors name the file. Nothing here panics on any input.

use crate::check::{
    order_problem_sets, CheckOptions, CheckReport, FailingOutcome, Problem, ProblemDetail, Shard,
    ShardData, Variant, MAX_DISTINCT_OUTCOMES, MAX_FAILURE_GROUPS, MAX_PROBLEMS,
    MAX_SEEDS_PER_FAILURE, MAX_VARIANTS,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::{BTreeSet, HashMap};

/// The scenario file a check ran: its name as given and the FNV-1a hash of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioId {
    /// The file name, as given on the command line.
    pub name: String,
    /// `fnv1a64:` and 16 hex digits ([`crate::check::fnv1a64`] of the file's bytes).
    pub hash: String,
}

impl ScenarioId {
    /// The id of the file `name` with contents `bytes`.
    pub fn new(name: &str, bytes: &[u8]) -> Self {
        ScenarioId {
            name: name.to_string(),
            hash: format!("fnv1a64:{:016x}", crate::check::fnv1a64(bytes)),
        }
    }
}

/// The options of the whole (unsharded) check, as every shard records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledOptions {
    /// `--seed`.
    pub seed: u64,
    /// `--schedules`.
    pub schedules: u64,
    /// `--strict`.
    pub strict: bool,
    /// `--validate`.
    pub validate: bool,
    /// `--fail-fast`.
    pub fail_fast: bool,
}

impl SampledOptions {
    /// The options as flags (`--seed 0 --schedules 100 --strict`).
    pub fn flags(&self) -> String {
        let mut s = format!("--seed {} --schedules {}", self.seed, self.schedules);
        for (on, flag) in [
            (self.strict, " --strict"),
            (self.validate, " --validate"),
            (self.fail_fast, " --fail-fast"),
        ] {
            if on {
                s += flag;
            }
        }
        s
    }

    /// The check's [`CheckOptions`].
    pub fn check_options(&self) -> CheckOptions {
        CheckOptions {
            schedules: self.schedules,
            seed: self.seed,
            strict: self.strict,
        }
    }
}

/// What a shard's report carries for `merge` (its `merge` field).
#[derive(Debug, Clone, Serialize)]
pub struct MergeSection<'a> {
    /// The scenario file.
    pub scenario: &'a ScenarioId,
    /// The options of the whole check.
    pub options: SampledOptions,
    /// Every distinct outcome's hash ([`ShardData::outcomes`]).
    pub outcomes: &'a [String],
    /// Every distinct failing outcome ([`ShardData::failing`]).
    pub failing: &'a [FailingOutcome],
    /// The key of each of the report's `problems`, in their order ([`Problem::key`]).
    pub problems: Vec<&'a str>,
}

/// A shard's report as `pipefence check --shard I/N --json` prints it.
#[derive(Debug, Serialize)]
pub struct ShardedReport<'a> {
    /// The report of the shard's seeds.
    #[serde(flatten)]
    pub report: &'a CheckReport,
    /// Which shard.
    pub shard: Shard,
    /// What merging needs.
    pub merge: MergeSection<'a>,
}

impl<'a> ShardedReport<'a> {
    /// The sharded form of `report` (which must have been run with
    /// [`crate::check::CheckMode::shard_data`]; without it the lists are empty).
    pub fn new(
        report: &'a CheckReport,
        shard: Shard,
        scenario: &'a ScenarioId,
        options: SampledOptions,
    ) -> Self {
        let (outcomes, failing): (&[String], &[FailingOutcome]) = match &report.shard_data {
            Some(ShardData { outcomes, failing }) => (outcomes, failing),
            None => (&[], &[]),
        };
        ShardedReport {
            report,
            shard,
            merge: MergeSection {
                scenario,
                options,
                outcomes,
                failing,
                problems: report.problems.iter().map(|p| p.key.as_str()).collect(),
            },
        }
    }
}

/// The options of the whole exhaustive check, as every shard records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExhaustiveShardOptions {
    /// `--strict`.
    pub strict: bool,
    /// `--max-schedules` (or its default).
    pub max_schedules: u64,
    /// `--preemption-bound`.
    pub preemption_bound: Option<u32>,
    /// Partial-order reduction (off with `--no-reduction`).
    pub reduction: bool,
    /// The shrink budget (`None` with `--no-shrink`).
    pub shrink: Option<u64>,
    /// `--fail-fast` (each shard stops at its own first failure).
    pub fail_fast: bool,
}

/// What an exhaustive shard's report carries for `merge` (its `merge` field).
#[derive(Debug, Clone, Serialize)]
pub struct ExhaustiveMergeSection<'a> {
    /// The scenario file.
    pub scenario: &'a ScenarioId,
    /// The options of the whole check.
    pub options: ExhaustiveShardOptions,
    /// Every distinct outcome's hash.
    pub outcomes: &'a [String],
}

/// An exhaustive shard's report as `pipefence check --exhaustive --shard I/N --json` prints
/// it.
#[derive(Debug, Serialize)]
pub struct ShardedExhaustiveReport<'a> {
    /// The report of the shard's units.
    #[serde(flatten)]
    pub report: &'a crate::exhaustive::ExhaustiveReport,
    /// Which shard.
    pub shard: Shard,
    /// What merging needs.
    pub merge: ExhaustiveMergeSection<'a>,
}

impl<'a> ShardedExhaustiveReport<'a> {
    /// The sharded form of `report`.
    pub fn new(
        report: &'a crate::exhaustive::ExhaustiveReport,
        shard: Shard,
        scenario: &'a ScenarioId,
        options: ExhaustiveShardOptions,
    ) -> Self {
        ShardedExhaustiveReport {
            report,
            shard,
            merge: ExhaustiveMergeSection {
                scenario,
                options,
                outcomes: &report.outcome_hashes,
            },
        }
    }
}

// ---- inputs ----

#[derive(Debug, Deserialize)]
struct InShard {
    index: u64,
    total: u64,
}

#[derive(Debug, Deserialize)]
struct InFailing {
    outcome: String,
    count: u64,
    seeds: Vec<u64>,
}

#[derive(Debug, Deserialize)]
struct InMerge {
    scenario: ScenarioId,
    options: SampledOptions,
    outcomes: Vec<String>,
    failing: Vec<InFailing>,
    #[serde(default)]
    problems: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct InFailure {
    seed: u64,
    status: String,
    exit: i32,
    what: Vec<String>,
    passed_expectations: u64,
    #[serde(default)]
    problems: Vec<usize>,
    outcome: Box<RawValue>,
}

#[derive(Debug, Deserialize)]
struct InVariant {
    what: String,
    count: u64,
    seed: u64,
}

#[derive(Debug, Deserialize)]
struct InProblem {
    kind: String,
    line: Option<usize>,
    what: String,
    count: u64,
    seeds: Vec<u64>,
    #[serde(default)]
    variants: Vec<InVariant>,
}

#[derive(Debug, Deserialize)]
struct InCheck {
    schedules: u64,
    failing: u64,
    failures: Vec<InFailure>,
    #[serde(default)]
    problems: Vec<InProblem>,
    interrupted: bool,
    elapsed_ns: u64,
    merge: InMerge,
}

#[derive(Debug, Deserialize)]
struct InExhaustiveFailure {
    replay: String,
    count: u64,
    status: String,
    exit: i32,
    what: Vec<String>,
    passed_expectations: u64,
    outcome: Box<RawValue>,
    #[serde(default)]
    shrunk: Option<Box<RawValue>>,
}

#[derive(Debug, Default, Deserialize)]
struct InExhaustiveMerge {
    #[serde(default)]
    scenario: Option<ScenarioId>,
    #[serde(default)]
    options: Option<serde_json::Value>,
    #[serde(default)]
    outcomes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct InExhaustive {
    complete: bool,
    bound: Option<String>,
    schedules: u64,
    outcomes: usize,
    failing: u64,
    failures: Vec<InExhaustiveFailure>,
    other_failing: u64,
    repeated_runs: u64,
    #[serde(default)]
    reduced: bool,
    #[serde(default)]
    sleep_blocked: u64,
    max_choice_points: usize,
    interrupted: bool,
    elapsed_ns: u64,
    #[serde(default)]
    merge: InExhaustiveMerge,
}

// ---- outputs ----

/// One distinct failing outcome of a merged sampled check (the shape of
/// [`crate::check::Failure`]).
#[derive(Debug, Serialize)]
pub struct MergedFailure {
    /// The first seed that produced it.
    pub seed: u64,
    /// How many schedules produced it.
    pub count: u64,
    /// The first seeds that produced it, in order.
    pub seeds: Vec<u64>,
    /// `failed` or `removed`.
    pub status: String,
    /// The exit status `run --seed` gives.
    pub exit: i32,
    /// What failed, in words.
    pub what: Vec<String>,
    /// Expectations of the first seed's schedule that passed.
    pub passed_expectations: u64,
    /// Its problems: indices into [`MergedCheck::problems`].
    pub problems: Vec<usize>,
    /// The first seed's outcome, as its shard printed it.
    pub outcome: Box<RawValue>,
}

/// A merged sampled check: the shape of [`CheckReport`]'s JSON.
#[derive(Debug, Serialize)]
pub struct MergedCheck {
    /// Always 1.
    pub version: u32,
    /// Schedules run.
    pub schedules: u64,
    /// Distinct outcomes seen.
    pub outcomes: usize,
    /// Failing schedules.
    pub failing: u64,
    /// The distinct failing outcomes, in the order of their first seed.
    pub failures: Vec<MergedFailure>,
    /// Failing schedules whose outcome is none of `failures`.
    pub other_failing: u64,
    /// The first seeds of those.
    pub other_seeds: Vec<u64>,
    /// The distinct problems of the failing schedules (the module's doc says how they merge);
    /// without [`Problem::detail`].
    pub problems: Vec<Problem>,
    /// Some shard was interrupted.
    pub interrupted: bool,
    /// The sum of the shards' wall-clock nanoseconds.
    pub elapsed_ns: u64,
    /// The scenario file.
    #[serde(skip)]
    pub scenario: ScenarioId,
    /// The options of the whole check.
    #[serde(skip)]
    pub options: SampledOptions,
}

impl MergedCheck {
    /// The exit status, as `check`'s: that of the lowest failing seed, 0 when none failed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// One distinct failing outcome of a merged exhaustive check (the shape of
/// [`crate::exhaustive::ExhaustiveFailure`]).
#[derive(Debug, Serialize)]
pub struct MergedExhaustiveFailure {
    /// The schedule string of the lowest shard's first schedule with this outcome.
    pub replay: String,
    /// How many schedules produced it.
    pub count: u64,
    /// `failed` or `removed`.
    pub status: String,
    /// The exit status `run --schedule` gives.
    pub exit: i32,
    /// What failed, in words.
    pub what: Vec<String>,
    /// Expectations of that schedule that passed.
    pub passed_expectations: u64,
    /// That schedule's outcome, as its shard printed it.
    pub outcome: Box<RawValue>,
    /// The failure shrunk to its fewest preemptions, as that shard shrank it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<Box<RawValue>>,
}

/// A merged exhaustive check: the shape of [`crate::exhaustive::ExhaustiveReport`]'s JSON.
#[derive(Debug, Serialize)]
pub struct MergedExhaustive {
    /// Always 1.
    pub version: u32,
    /// Always `exhaustive`.
    pub mode: &'static str,
    /// Every shard was complete.
    pub complete: bool,
    /// The first shard's bound, in shard order.
    pub bound: Option<String>,
    /// Schedules explored, summed.
    pub schedules: u64,
    /// Distinct outcomes: exact when every shard lists its outcome hashes (`merge.outcomes`),
    /// else the largest shard's count (a lower bound).
    pub outcomes: usize,
    /// Failing schedules, summed.
    pub failing: u64,
    /// The distinct failing outcomes, in shard order then each shard's order (at most 32).
    pub failures: Vec<MergedExhaustiveFailure>,
    /// Failing schedules whose outcome is none of `failures`.
    pub other_failing: u64,
    /// Repeat runs, summed.
    pub repeated_runs: u64,
    /// Every shard reduced by partial order.
    pub reduced: bool,
    /// Runs stopped asleep, summed.
    pub sleep_blocked: u64,
    /// The most choice points of one schedule of any shard.
    pub max_choice_points: usize,
    /// Some shard was interrupted.
    pub interrupted: bool,
    /// The sum of the shards' wall-clock nanoseconds.
    pub elapsed_ns: u64,
    /// The scenario file, when the shards recorded it.
    #[serde(skip)]
    pub scenario: Option<ScenarioId>,
    /// Strict mode, when the shards recorded their options.
    #[serde(skip)]
    pub strict: bool,
}

impl MergedExhaustive {
    /// The exit status: that of the first failing outcome, 0 when none failed.
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |f| f.exit)
    }
}

/// The merged report.
#[derive(Debug)]
pub enum Merged {
    /// Of sampled checks.
    Sampled(MergedCheck),
    /// Of exhaustive checks.
    Exhaustive(MergedExhaustive),
}

/// One input: the file's name (for errors) and its text.
#[derive(Debug, Clone)]
pub struct Input {
    /// The file name, as given.
    pub name: String,
    /// Its contents.
    pub text: String,
}

/// Merges the shards' reports. Errors (naming the file): not JSON, not a sharded check's
/// report, a shard missing or given twice, shards of different totals, files, options or
/// modes.
pub fn merge(inputs: &[Input]) -> Result<Merged, String> {
    if inputs.is_empty() {
        return Err("no shard reports given".to_string());
    }
    let mut heads = Vec::new();
    for input in inputs {
        heads.push(head(input)?);
    }
    let exhaustive = heads[0].exhaustive;
    if let Some((i, _)) = heads
        .iter()
        .enumerate()
        .find(|(_, h)| h.exhaustive != exhaustive)
    {
        let mode = |e: bool| if e { "an exhaustive" } else { "a sampled" };
        return Err(format!(
            "{} is {} check's report and {} is {} check's: shards of one check have one mode",
            inputs[0].name,
            mode(exhaustive),
            inputs[i].name,
            mode(!exhaustive)
        ));
    }
    let order = shard_order(inputs, &heads)?;
    if exhaustive {
        let mut shards = Vec::new();
        for &i in &order {
            let r: InExhaustive = serde_json::from_str(&inputs[i].text)
                .map_err(|e| not_a_report(&inputs[i].name, &e))?;
            shards.push((i, r));
        }
        merge_exhaustive(inputs, shards).map(Merged::Exhaustive)
    } else {
        let mut shards = Vec::new();
        for &i in &order {
            let r: InCheck = serde_json::from_str(&inputs[i].text)
                .map_err(|e| not_a_report(&inputs[i].name, &e))?;
            shards.push((i, r));
        }
        merge_sampled(inputs, shards).map(Merged::Sampled)
    }
}

fn not_a_report(name: &str, e: &serde_json::Error) -> String {
    format!(
        "{name}: not the --json report of `pipefence check --shard I/N` ({e}); the shard's report \
         is its stdout, untouched"
    )
}

/// What every input must have: its mode and shard.
struct Head {
    exhaustive: bool,
    shard: Shard,
}

fn head(input: &Input) -> Result<Head, String> {
    let name = &input.name;
    let v: serde_json::Value = serde_json::from_str(&input.text)
        .map_err(|e| format!("{name}: not JSON ({e}); give the --json output of `pipefence check --shard I/N --json`"))?;
    if v.get("status").and_then(|s| s.as_str()) == Some("invalid") {
        return Err(format!(
            "{name}: the report of an invalid scenario (status `invalid`): nothing to merge"
        ));
    }
    let exhaustive = match v.get("mode") {
        None => false,
        Some(m) if m.as_str() == Some("exhaustive") => true,
        Some(m) => return Err(format!("{name}: unknown check mode {m}")),
    };
    let Some(shard) = v.get("shard").filter(|s| !s.is_null()) else {
        return Err(format!(
            "{name}: not a shard's report (no `shard` field): run `pipefence check FILE --shard \
             I/N --json` for each shard"
        ));
    };
    let s: InShard = serde_json::from_value(shard.clone())
        .map_err(|e| format!("{name}: `shard` is not {{\"index\": I, \"total\": N}} ({e})"))?;
    let shard = Shard::new(s.index, s.total).map_err(|e| format!("{name}: {e}"))?;
    Ok(Head { exhaustive, shard })
}

/// The inputs' indices in shard order, once every shard of one total is there exactly once.
fn shard_order(inputs: &[Input], heads: &[Head]) -> Result<Vec<usize>, String> {
    let total = heads[0].shard.total;
    if let Some((i, h)) = heads
        .iter()
        .enumerate()
        .find(|(_, h)| h.shard.total != total)
    {
        return Err(format!(
            "{} is shard {}/{total} and {} is shard {}/{}: shards of one check have one total",
            inputs[0].name, heads[0].shard.index, inputs[i].name, h.shard.index, h.shard.total
        ));
    }
    let mut by_index: Vec<Option<usize>> = Vec::new();
    let slots = usize::try_from(total).unwrap_or(usize::MAX);
    if slots > inputs.len() {
        // Some are missing: say which (the first few), without a slot per shard of a huge total.
        let have: BTreeSet<u64> = heads.iter().map(|h| h.shard.index).collect();
        let missing: Vec<String> = (0..total)
            .filter(|i| !have.contains(i))
            .take(10)
            .map(|i| format!("{i}/{total}"))
            .collect();
        let count = total - have.len() as u64;
        return Err(format!(
            "{} of {total} shards missing: {}{}; merge needs the report of every shard",
            count,
            missing.join(", "),
            if count > missing.len() as u64 {
                ", ..."
            } else {
                ""
            }
        ));
    }
    by_index.resize(slots, None);
    for (i, h) in heads.iter().enumerate() {
        let slot = &mut by_index[h.shard.index as usize];
        if let Some(j) = *slot {
            return Err(format!(
                "{} and {} are both shard {}/{total}: give each shard once",
                inputs[j].name, inputs[i].name, h.shard.index
            ));
        }
        *slot = Some(i);
    }
    // Every input has a distinct index below `total` and there are at most `total` inputs:
    // when some slot is empty, there were fewer inputs than slots (handled above).
    Ok(by_index.into_iter().flatten().collect())
}

/// One distinct failing outcome while merging: its hash, count and first seeds, and where its
/// first seed's failure is kept (the shard, and the index in that shard's `failures`).
type Group<'a> = (&'a str, u64, Vec<u64>, (usize, usize));

fn merge_sampled(inputs: &[Input], shards: Vec<(usize, InCheck)>) -> Result<MergedCheck, String> {
    let (first, r0) = &shards[0];
    let (scenario, options) = (r0.merge.scenario.clone(), r0.merge.options);
    for (i, r) in &shards[1..] {
        if r.merge.scenario.hash != scenario.hash {
            return Err(format!(
                "{} and {} are shards of checks of different scenario files ({}, {}; {}, {})",
                inputs[*first].name,
                inputs[*i].name,
                scenario.name,
                scenario.hash,
                r.merge.scenario.name,
                r.merge.scenario.hash
            ));
        }
        if r.merge.options != options {
            return Err(format!(
                "{} and {} are shards of checks with different options (`{}` and `{}`)",
                inputs[*first].name,
                inputs[*i].name,
                options.flags(),
                r.merge.options.flags()
            ));
        }
    }
    // With --fail-fast the check stops at its lowest failing seed: the shards after the first
    // that failed do not count.
    let upto = if options.fail_fast {
        shards
            .iter()
            .position(|(_, r)| r.failing > 0)
            .map_or(shards.len(), |p| p + 1)
    } else {
        shards.len()
    };
    let shards = &shards[..upto];
    let mut outcomes: BTreeSet<&str> = BTreeSet::new();
    // Every distinct failing outcome, in the order of its first seed.
    let mut groups: Vec<Group> = Vec::new();
    let mut by_hash: HashMap<&str, usize> = HashMap::new();
    let mut merged = MergedCheck {
        version: 1,
        schedules: 0,
        outcomes: 0,
        failing: 0,
        failures: Vec::new(),
        other_failing: 0,
        other_seeds: Vec::new(),
        problems: Vec::new(),
        interrupted: false,
        elapsed_ns: 0,
        scenario,
        options,
    };
    let mut problems = ProblemMerge::default();
    for (s, (i, r)) in shards.iter().enumerate() {
        let name = &inputs[*i].name;
        merged.schedules = merged.schedules.saturating_add(r.schedules);
        merged.failing = merged.failing.saturating_add(r.failing);
        merged.interrupted |= r.interrupted;
        merged.elapsed_ns = merged.elapsed_ns.saturating_add(r.elapsed_ns);
        outcomes.extend(r.merge.outcomes.iter().map(String::as_str));
        problems.add(name, r)?;
        for (k, f) in r.merge.failing.iter().enumerate() {
            match by_hash.get(f.outcome.as_str()) {
                Some(&g) => {
                    let g = &mut groups[g];
                    g.1 = g.1.saturating_add(f.count);
                    let room = MAX_SEEDS_PER_FAILURE.saturating_sub(g.2.len());
                    g.2.extend(f.seeds.iter().take(room));
                }
                None => {
                    let first_seed = f.seeds.first().copied();
                    if r.failures
                        .get(k)
                        .is_some_and(|kept| Some(kept.seed) != first_seed)
                    {
                        return Err(format!(
                            "{name}: `merge.failing` does not list `failures` first (failing \
                             outcome {k} has seed {} there and {} in `failures`)",
                            first_seed.unwrap_or_default(),
                            r.failures[k].seed
                        ));
                    }
                    by_hash.insert(&f.outcome, groups.len());
                    groups.push((&f.outcome, f.count, f.seeds.clone(), (s, k)));
                }
            }
        }
    }
    merged.outcomes = outcomes.len().min(MAX_DISTINCT_OUTCOMES);
    let problems = problems.first_seen();
    let mut other_seeds = Vec::new();
    for (g, (_, count, seeds, (s, k))) in groups.into_iter().enumerate() {
        if g >= MAX_FAILURE_GROUPS {
            merged.other_failing = merged.other_failing.saturating_add(count);
            other_seeds.extend(seeds);
            continue;
        }
        let (i, r) = &shards[s];
        let Some(f) = r.failures.get(k) else {
            return Err(format!(
                "{}: failing outcome {k} of `merge.failing` is not among its `failures` ({} \
                 kept); this file is not a shard's report as check printed it",
                inputs[*i].name,
                r.failures.len()
            ));
        };
        let InFailure {
            status,
            exit,
            what,
            passed_expectations,
            problems: in_problems,
            outcome,
            ..
        } = f;
        // The shard's indices, through the shard's keys, into the merged problems.
        let keys = &r.merge.problems;
        let in_problems = in_problems
            .iter()
            .filter_map(|&p| {
                let key = keys.get(p)?;
                problems.iter().position(|(k, _)| k == key)
            })
            .collect();
        merged.failures.push(MergedFailure {
            seed: seeds.first().copied().unwrap_or(f.seed),
            count,
            seeds,
            status: status.clone(),
            exit: *exit,
            what: what.clone(),
            passed_expectations: *passed_expectations,
            problems: in_problems,
            outcome: outcome.clone(),
        });
    }
    let mut sets: Vec<&mut Vec<usize>> = merged
        .failures
        .iter_mut()
        .map(|f| &mut f.problems)
        .collect();
    merged.problems = order_problem_sets(problems, &mut sets);
    other_seeds.sort_unstable();
    other_seeds.truncate(MAX_SEEDS_PER_FAILURE);
    merged.other_seeds = other_seeds;
    Ok(merged)
}

/// The problems of the shards, merged by key, in shard order.
#[derive(Default)]
struct ProblemMerge {
    /// Each distinct problem, with the order it was first seen in: its first seed, its kind's
    /// place in the problems of one outcome (expectations, host errors, hazards, the removal),
    /// then its place in the first shard that had it (whose order within a kind is the order
    /// first seen).
    problems: Vec<((u64, u8, usize), Problem)>,
    by_key: HashMap<String, usize>,
    /// Per problem (by its key), the results of each shard that kept [`MAX_VARIANTS`] of them
    /// and had others, counted only among its other results: a result kept that such a shard
    /// did not list has a count that is a lower bound.
    capped: HashMap<String, Vec<Vec<String>>>,
}

impl ProblemMerge {
    fn add(&mut self, name: &str, r: &InCheck) -> Result<(), String> {
        if r.merge.problems.len() != r.problems.len() {
            return Err(format!(
                "{name}: `merge.problems` lists {} keys for {} `problems`; this file is not a \
                 shard's report as check printed it",
                r.merge.problems.len(),
                r.problems.len()
            ));
        }
        for (at, (key, p)) in r.merge.problems.iter().zip(&r.problems).enumerate() {
            // A shard left results out only when it kept as many as it may and they do not
            // account for all its schedules of the problem.
            let listed = p
                .variants
                .iter()
                .map(|v| v.count)
                .fold(0u64, u64::saturating_add);
            if p.variants.len() >= MAX_VARIANTS && listed < p.count {
                self.capped
                    .entry(key.clone())
                    .or_default()
                    .push(p.variants.iter().map(|v| v.what.clone()).collect());
            }
            if let Some(&i) = self.by_key.get(key) {
                let kept = &mut self.problems[i].1;
                kept.count = kept.count.saturating_add(p.count);
                let room = MAX_SEEDS_PER_FAILURE.saturating_sub(kept.seeds.len());
                kept.seeds.extend(p.seeds.iter().take(room));
                for v in &p.variants {
                    if let Some(k) = kept.variants.iter_mut().find(|k| k.what == v.what) {
                        k.count = k.count.saturating_add(v.count);
                    } else if kept.variants.len() < MAX_VARIANTS {
                        kept.variants.push(Variant {
                            at_least: false,
                            what: v.what.clone(),
                            count: v.count,
                            seed: v.seed,
                        });
                    }
                }
                continue;
            }
            let kind = match p.kind.as_str() {
                "expectation" => 0,
                "host-error" => 1,
                "hazard" => 2,
                _ => 3,
            };
            let first = p.seeds.first().copied().unwrap_or(u64::MAX);
            self.by_key.insert(key.clone(), self.problems.len());
            self.problems.push((
                (first, kind, at),
                Problem {
                    kind: p.kind.clone(),
                    line: p.line,
                    what: p.what.clone(),
                    count: p.count,
                    seeds: p
                        .seeds
                        .iter()
                        .take(MAX_SEEDS_PER_FAILURE)
                        .copied()
                        .collect(),
                    variants: p
                        .variants
                        .iter()
                        .take(MAX_VARIANTS)
                        .map(|v| Variant {
                            at_least: false,
                            what: v.what.clone(),
                            count: v.count,
                            seed: v.seed,
                        })
                        .collect(),
                    detail: ProblemDetail::None,
                    key: key.clone(),
                },
            ));
        }
        Ok(())
    }

    /// The first [`MAX_PROBLEMS`] problems in the order first seen, with their keys.
    fn first_seen(mut self) -> Vec<(String, Problem)> {
        for (_, p) in &mut self.problems {
            if let Some(shards) = self.capped.get(&p.key) {
                for v in &mut p.variants {
                    v.at_least = shards.iter().any(|listed| !listed.contains(&v.what));
                }
            }
        }
        // Stable: shards are in seed order, so equal first seeds are of one shard.
        self.problems.sort_by_key(|(order, _)| *order);
        self.problems.truncate(MAX_PROBLEMS);
        self.problems
            .into_iter()
            .map(|(_, p)| (p.key.clone(), p))
            .collect()
    }
}

/// What makes two failing outcomes of an exhaustive check the same: the outcome object (as
/// printed, expectations that passed already left out) without its timing, hazards and host
/// errors in any order (as [`crate::check::signature`]).
fn exhaustive_signature(f: &InExhaustiveFailure) -> String {
    match serde_json::from_str::<serde_json::Value>(f.outcome.get()) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.remove("elapsed_ns");
            m.remove("queues");
            crate::check::unordered(&mut m);
            serde_json::Value::Object(m).to_string()
        }
        _ => f.outcome.get().to_string(),
    }
}

/// How two exhaustive shards' recorded options differ, option by option (`strict: false and
/// true`), for the message that refuses to merge them.
fn options_differ(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    let text = |v: Option<&Value>| v.map_or_else(|| "none".to_string(), Value::to_string);
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.iter()
                .filter(|k| x.get(k.as_str()) != y.get(k.as_str()))
                .map(|k| {
                    format!(
                        "{k}: {} and {}",
                        text(x.get(k.as_str())),
                        text(y.get(k.as_str()))
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        }
        _ => format!("{} and {}", text(a), text(b)),
    }
}

fn merge_exhaustive(
    inputs: &[Input],
    shards: Vec<(usize, InExhaustive)>,
) -> Result<MergedExhaustive, String> {
    let (first, r0) = &shards[0];
    for (i, r) in &shards[1..] {
        if r.merge.scenario.as_ref().map(|s| &s.hash) != r0.merge.scenario.as_ref().map(|s| &s.hash)
        {
            let id = |s: &Option<ScenarioId>| {
                s.as_ref().map_or("no scenario recorded".to_string(), |s| {
                    format!("{}, {}", s.name, s.hash)
                })
            };
            return Err(format!(
                "{} and {} are shards of checks of different scenario files ({}; {})",
                inputs[*first].name,
                inputs[*i].name,
                id(&r0.merge.scenario),
                id(&r.merge.scenario)
            ));
        }
        if r.merge.options != r0.merge.options {
            return Err(format!(
                "{} and {} are shards of checks with different options ({})",
                inputs[*first].name,
                inputs[*i].name,
                options_differ(r0.merge.options.as_ref(), r.merge.options.as_ref())
            ));
        }
    }
    let strict = r0
        .merge
        .options
        .as_ref()
        .and_then(|o| o.get("strict"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let exact = shards.iter().all(|(_, r)| r.merge.outcomes.is_some());
    let mut hashes: BTreeSet<&str> = BTreeSet::new();
    let mut merged = MergedExhaustive {
        version: 1,
        mode: "exhaustive",
        complete: true,
        bound: None,
        schedules: 0,
        outcomes: 0,
        failing: 0,
        failures: Vec::new(),
        other_failing: 0,
        repeated_runs: 0,
        reduced: shards.iter().all(|(_, r)| r.reduced),
        sleep_blocked: 0,
        max_choice_points: 0,
        interrupted: false,
        elapsed_ns: 0,
        scenario: r0.merge.scenario.clone(),
        strict,
    };
    let mut by_signature: HashMap<String, usize> = HashMap::new();
    for (_, r) in &shards {
        merged.complete &= r.complete;
        if merged.bound.is_none() {
            merged.bound.clone_from(&r.bound);
        }
        merged.schedules = merged.schedules.saturating_add(r.schedules);
        merged.failing = merged.failing.saturating_add(r.failing);
        merged.other_failing = merged.other_failing.saturating_add(r.other_failing);
        merged.repeated_runs = merged.repeated_runs.saturating_add(r.repeated_runs);
        merged.sleep_blocked = merged.sleep_blocked.saturating_add(r.sleep_blocked);
        merged.max_choice_points = merged.max_choice_points.max(r.max_choice_points);
        merged.interrupted |= r.interrupted;
        merged.elapsed_ns = merged.elapsed_ns.saturating_add(r.elapsed_ns);
        merged.outcomes = merged.outcomes.max(r.outcomes);
        if let Some(h) = &r.merge.outcomes {
            hashes.extend(h.iter().map(String::as_str));
        }
        for f in &r.failures {
            let sig = exhaustive_signature(f);
            if let Some(&g) = by_signature.get(&sig) {
                let g: &mut MergedExhaustiveFailure = &mut merged.failures[g];
                g.count = g.count.saturating_add(f.count);
            } else if merged.failures.len() < MAX_FAILURE_GROUPS {
                by_signature.insert(sig, merged.failures.len());
                merged.failures.push(MergedExhaustiveFailure {
                    replay: f.replay.clone(),
                    count: f.count,
                    status: f.status.clone(),
                    exit: f.exit,
                    what: f.what.clone(),
                    passed_expectations: f.passed_expectations,
                    outcome: f.outcome.clone(),
                    shrunk: f.shrunk.clone(),
                });
            } else {
                merged.other_failing = merged.other_failing.saturating_add(f.count);
            }
        }
    }
    merged.complete &= !merged.interrupted;
    if merged.complete {
        merged.bound = None;
    }
    if exact {
        merged.outcomes = hashes.len().min(MAX_DISTINCT_OUTCOMES);
    }
    Ok(merged)
}
