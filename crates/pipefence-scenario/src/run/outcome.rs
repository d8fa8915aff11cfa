//! The result of a run, [`Outcome`], and what it is made of: the status, the expectations, the
//! host errors, the final fence values, the per-queue summary, the hazards and the removal
//! report; and building it at the end of the run.

use super::expect;
use super::report::{hazard_reports, locate};
use super::{lock, Ctx};
use crate::plan::{Pos, Scenario};
use pipefence::RemovalReport;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// The run's status (`status` in `docs/run.schema.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Everything held (exit 0).
    Passed,
    /// An expectation failed, a host wait timed out, a hazard was reported under strict or
    /// validate, or an `expect-removed` was not met (exit 1).
    Failed,
    /// The device was removed and the scenario did not expect it, or expected another reason
    /// (exit 3).
    Removed,
}

impl Status {
    /// The process exit status.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Passed => 0,
            Status::Failed => 1,
            Status::Removed => 3,
        }
    }
}

/// One `expect`, `expect-fence` or `expect-removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpectationResult {
    /// Its line.
    pub line: usize,
    /// `true`/`false`, or `None` if never reached.
    pub passed: Option<bool>,
    /// What was checked (and what was found, on failure).
    pub detail: String,
}

/// A host action that failed (a wait that timed out, an API error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostError {
    /// The host thread.
    pub host: String,
    /// The action's line.
    pub line: usize,
    /// What happened.
    pub message: String,
}

/// Per-queue summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSummary {
    /// Name.
    pub queue: String,
    /// Kind.
    pub kind: String,
    /// Commands completed.
    pub commands: u64,
    /// Nanoseconds with work it could run.
    pub busy_ns: u64,
    /// Nanoseconds stuck in a wait.
    pub blocked_ns: u64,
}

/// One access of a hazard report.
#[derive(Debug, Clone, Serialize)]
pub struct HazardAccessReport {
    /// The queue, for commands (`null` for host accesses).
    pub queue: Option<String>,
    /// `task` (a dispatch or copy), `me`, `pfp`, or `host` (`other` for a kind of agent this
    /// runner does not know).
    pub agent: String,
    /// The host thread, for host accesses.
    pub host: Option<String>,
    /// The command list, for commands of a list.
    pub list: Option<String>,
    /// The command index in the list.
    pub command: Option<u32>,
    /// The command or host action (`dispatch`, `write-value32-bop`, `cpu-write`, ...).
    pub op: String,
    /// The kernel, for dispatches.
    pub kernel: Option<String>,
    /// `read`, `write`, `value write`, `atomic`, `wait` or `release`.
    pub access: String,
    /// The scenario line.
    pub line: Option<usize>,
    /// The whole label, as in the message.
    pub text: String,
}

/// A synchronization hazard (strict mode and `--validate`; `docs/memory-model.md` 5.3).
#[derive(Debug, Clone, Serialize)]
pub struct HazardReport {
    /// `unreleased-read`, `pfp-read-before-wait`, `stale-cache` or `write-write`.
    pub kind: String,
    /// The affected range, e.g. `data+0x0..+0x1000`.
    pub range: String,
    /// The first address (hexadecimal).
    pub address: String,
    /// The range's length in bytes.
    pub bytes: u64,
    /// The earlier access (the write, or the read a later write landed on).
    pub first: HazardAccessReport,
    /// The later access.
    pub second: HazardAccessReport,
    /// The synchronization named as missing (a release or a wait), if one is.
    pub via: Option<HazardAccessReport>,
    /// What is missing, in words.
    pub missing: String,
    /// What would fix it.
    pub fix: String,
    /// The whole report, as printed.
    pub message: String,
}

/// The result of a run: serializes to the `--json` object of `docs/run.schema.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Always 1.
    pub version: u32,
    /// `passed`, `failed`, `removed`.
    pub status: Status,
    /// Every expectation, in line order.
    pub expectations: Vec<ExpectationResult>,
    /// Final fence values.
    pub fences: BTreeMap<String, u64>,
    /// Hazards (strict mode and validation; empty without `--strict` or `--validate`).
    pub hazards: Vec<HazardReport>,
    /// The removal report, if the device was removed, with the scenario line of every command
    /// it names ([`SiteReport::line`](pipefence::diagnose::SiteReport::line)) and of each host
    /// writer. In the JSON it has the shape of `removed` in `docs/run.schema.json`: each site
    /// flattened into its queue or fault, writers and completed commands in words
    /// ([`site_text`](super::site_text), [`writer_text`](super::writer_text)).
    #[serde(serialize_with = "super::report::removed_json")]
    pub removed: Option<RemovalReport>,
    /// Wall-clock nanoseconds of the run.
    pub elapsed_ns: u64,
    /// Host actions that failed (timed-out waits, API errors).
    pub host_errors: Vec<HostError>,
    /// Per-queue summary.
    pub queues: Vec<QueueSummary>,
    /// The trace, when [`RunOptions::trace`](super::RunOptions::trace) asked for one (not part of the JSON).
    #[serde(skip)]
    pub trace: Vec<pipefence::trace::TraceEvent>,
    /// The decisive steps of a narrated schedule (a shrunk counterexample's preemptions; see
    /// [`super::narrate`]): empty unless the run replayed a narrating script (not part of the
    /// JSON).
    #[serde(skip)]
    pub steps: Vec<super::narrate::DecisiveStep>,
}

impl Outcome {
    /// The process exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }
}

/// The outcome at the end of the run: the expectations (and `expect-removed`), the host errors,
/// the hazards, the removal report with its lines, the status, the final fence values and the
/// per-queue summary. `li` maps a command list's id to its index in the scenario.
pub(super) fn finish(ctx: &Ctx, li: &HashMap<u32, usize>, elapsed_ns: u64) -> Outcome {
    let sc = &*ctx.sc;
    let removed = ctx.device.removal_report().map(|r| {
        let mut r = RemovalReport::clone(&r);
        locate(ctx, li, &mut r);
        r
    });
    let reason = ctx.device.removed_reason();
    let mut expectations = std::mem::take(&mut *lock(&ctx.expectations));
    let removal_ok = expect::removal_as_expected(sc, reason, &mut expectations);
    let errors = std::mem::take(&mut *lock(&ctx.errors));
    let hazards = hazard_reports(ctx, li);
    let failed = expectations.values().any(|e| e.passed == Some(false))
        || !errors.is_empty()
        || !hazards.is_empty();
    let status = if !removal_ok {
        Status::Removed
    } else if failed {
        Status::Failed
    } else {
        Status::Passed
    };
    let fences = sc
        .fences
        .iter()
        .zip(&ctx.fences)
        .map(|(d, f)| (d.name.clone(), f.completed_value()))
        .collect();
    let queues = sc
        .queues
        .iter()
        .zip(&ctx.queues)
        .map(|(d, q)| {
            let st = q.stats();
            QueueSummary {
                queue: d.name.clone(),
                kind: d.kind.name().to_string(),
                commands: st.commands,
                busy_ns: st.busy_ns,
                blocked_ns: st.blocked_ns,
            }
        })
        .collect();
    Outcome {
        version: 1,
        status,
        expectations: expectations.into_values().collect(),
        fences,
        hazards,
        removed,
        elapsed_ns,
        host_errors: errors,
        queues,
        trace: Vec::new(),
        steps: Vec::new(),
    }
}

/// The outcome of a run that could not set up its device (a failed creation, at `pos`).
pub(super) fn early_failure(sc: &Scenario, start: Instant, pos: Pos, message: String) -> Outcome {
    Outcome {
        version: 1,
        status: Status::Failed,
        expectations: expect::collect_expectations(sc).into_values().collect(),
        fences: BTreeMap::new(),
        hazards: Vec::new(),
        removed: None,
        elapsed_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
        host_errors: vec![HostError {
            host: "main".into(),
            line: pos.line,
            message,
        }],
        queues: Vec::new(),
        trace: Vec::new(),
        steps: Vec::new(),
    }
}
