//! The reports of a run with scenario positions: the device's removal report with the line of
//! every command and host write it names, its words and its `--json` shape; and the hazard
//! reports (strict mode and validation), each access labelled with its queue, list, command or
//! host thread and line.

use super::{lock, Ctx, HazardAccessReport, HazardReport};
use pipefence::diagnose::{QueueReport, SiteReport, WriterReport};
use pipefence::{Classification, RemovalReason, RemovalReport};
use serde::{Serialize, Serializer};
use std::collections::HashMap;

/// The scenario line of a site: its command's, for a command of a list; else the line of the
/// queue action that submitted it.
fn site_line(ctx: &Ctx, list_index: &HashMap<u32, usize>, s: &SiteReport) -> Option<u32> {
    let line = match (s.list_id, s.command) {
        (Some(id), Some(c)) => {
            let li = *list_index.get(&id)?;
            ctx.sc.lists[li]
                .commands
                .get(c as usize)
                .map(|c| c.pos.line)
        }
        _ => {
            let qi = ctx.sc.queues.iter().position(|q| q.name == s.queue)?;
            lock(&ctx.submissions).get(&(qi, s.submission)).copied()
        }
    }?;
    u32::try_from(line).ok()
}

/// The scenario line of the host action that last wrote what queue `q` waits on (a CPU signal
/// of its fence, or a `cpu-write` of its word).
fn host_writer_line(ctx: &Ctx, q: &QueueReport) -> Option<u32> {
    let sc = &*ctx.sc;
    let line = if let Some(f) = &q.fence {
        sc.fences
            .iter()
            .position(|x| &x.name == f)
            .and_then(|fi| lock(&ctx.host_signals).get(&fi).map(|x| x.1))
    } else {
        let bi = q
            .buffer
            .as_ref()
            .and_then(|b| sc.buffers.iter().position(|x| &x.name == b));
        bi.and_then(|bi| {
            lock(&ctx.host_writes)
                .get(&(bi, q.offset.unwrap_or(0) & !7))
                .map(|x| x.1)
        })
    }?;
    u32::try_from(line).ok()
}

/// Fills in the scenario lines of a removal report: of every site it names, and of each host
/// writer.
pub(super) fn locate(ctx: &Ctx, li: &HashMap<u32, usize>, r: &mut RemovalReport) {
    for q in &mut r.queues {
        let host_line = host_writer_line(ctx, q);
        match &mut q.last_writer {
            Some(WriterReport::Host { line, .. }) => *line = host_line,
            Some(WriterReport::Queue { site, .. }) => site.line = site_line(ctx, li, site),
            Some(WriterReport::Never) | None => {}
            // A kind of writer added to the library later has no scenario line to fill in.
            Some(_) => {}
        }
        let sites =
            q.at.iter_mut()
                .chain(q.last_completed.iter_mut())
                .chain(q.satisfiers.iter_mut());
        for s in sites {
            s.line = site_line(ctx, li, s);
        }
    }
    if let Some(f) = &mut r.fault {
        f.at.line = site_line(ctx, li, &f.at);
    }
}

/// A site in words, with its scenario line when known: `queue q, list l, command 2 (dispatch),
/// line 14` for a command of a list, else `queue q, signal, line 20`.
pub fn site_text(s: &SiteReport) -> String {
    let line = s.line.map(|l| format!(", line {l}")).unwrap_or_default();
    match (&s.list, s.command) {
        (Some(l), Some(c)) => format!("queue {}, list {l}, command {c} ({}){line}", s.queue, s.op),
        _ => format!("queue {}, {}{line}", s.queue, s.op),
    }
}

/// A writer in words, with its scenario line when known: `never written`, `host main, line 9`,
/// or the queue's site ([`site_text`]).
pub fn writer_text(w: &WriterReport) -> String {
    match w {
        WriterReport::Never => "never written".to_string(),
        WriterReport::Host {
            host,
            line: Some(l),
            ..
        } => format!("host {host}, line {l}"),
        WriterReport::Host { host, .. } => format!("host {host}"),
        WriterReport::Queue { site, .. } => site_text(site),
        // A kind of writer added to the library later: the library's own words.
        other => other.to_string(),
    }
}

/// Serializes [`Outcome::removed`] in the shape of `removed` in `docs/run.schema.json`: the
/// report's own values, with each queue's site flattened into the queue (`list`, `command`,
/// `op`, `line`), the fault's into the fault, and writers and completed commands in words
/// ([`writer_text`], [`site_text`]); ids, timestamps and the wait-for details the text already
/// says are left out.
pub(super) fn removed_json<S: Serializer>(
    r: &Option<RemovalReport>,
    s: S,
) -> Result<S::Ok, S::Error> {
    r.as_ref().map(RemovedJson::new).serialize(s)
}

/// The `removed` object of the JSON, borrowed from the report ([`removed_json`]).
#[derive(Serialize)]
struct RemovedJson<'a> {
    reason: RemovalReason,
    hresult: &'a str,
    classification: Option<Classification>,
    cycle: &'a [String],
    queues: Vec<RemovedQueueJson<'a>>,
    fault: Option<RemovedFaultJson<'a>>,
}

/// A stuck queue in the JSON.
#[derive(Serialize)]
struct RemovedQueueJson<'a> {
    queue: &'a str,
    list: Option<&'a str>,
    command: Option<u32>,
    op: Option<&'a str>,
    line: Option<u32>,
    waiting_for: Option<&'a str>,
    current: Option<u64>,
    last_writer: Option<String>,
    last_completed: Option<String>,
    events: &'a [String],
    class: Classification,
    stage: Option<&'a str>,
    waits_on: &'a [String],
}

/// The fault in the JSON.
#[derive(Serialize)]
struct RemovedFaultJson<'a> {
    kind: Classification,
    address: Option<&'a str>,
    access: Option<&'a str>,
    op: &'a str,
    buffer: Option<&'a str>,
    queue: &'a str,
    list: Option<&'a str>,
    command: Option<u32>,
    line: Option<u32>,
    message: &'a str,
}

impl<'a> RemovedJson<'a> {
    fn new(r: &'a RemovalReport) -> Self {
        let queues = r
            .queues
            .iter()
            .map(|q| RemovedQueueJson {
                queue: &q.queue,
                list: q.at.as_ref().and_then(|s| s.list.as_deref()),
                command: q.at.as_ref().and_then(|s| s.command),
                op: q.at.as_ref().map(|s| s.op.as_str()),
                line: q.at.as_ref().and_then(|s| s.line),
                waiting_for: q.waiting_for.as_deref(),
                current: q.current,
                last_writer: q.last_writer.as_ref().map(writer_text),
                last_completed: q.last_completed.as_ref().map(site_text),
                events: &q.events,
                class: q.class,
                stage: q.stage.as_deref(),
                waits_on: &q.waits_on,
            })
            .collect();
        RemovedJson {
            reason: r.reason,
            hresult: &r.hresult,
            classification: r.classification,
            cycle: &r.cycle,
            queues,
            fault: r.fault.as_ref().map(|f| RemovedFaultJson {
                kind: f.kind,
                address: f.address.as_deref(),
                access: f.access.as_deref(),
                op: &f.at.op,
                buffer: f.buffer.as_deref(),
                queue: &f.at.queue,
                list: f.at.list.as_deref(),
                command: f.at.command,
                line: f.at.line,
                message: &f.message,
            }),
        }
    }
}

/// The scenario's name for a host API call in a hazard report.
fn host_op_name(op: &str) -> &str {
    match op {
        "write_u32" | "write_u64" => "cpu-write",
        "wait_u32" | "wait_u64" => "cpu-poll",
        "read_u32" | "read_u64" => "cpu-read",
        other => other,
    }
}

fn access_report(
    ctx: &Ctx,
    li: &HashMap<u32, usize>,
    a: &pipefence::HazardAccess,
) -> HazardAccessReport {
    match &a.agent {
        pipefence::HazardAgent::Queue {
            queue,
            stage,
            site,
            list,
        } => {
            let sr = SiteReport {
                queue: queue.clone(),
                queue_id: 0,
                submission: site.submission,
                list: list.clone(),
                list_id: site.list,
                command: site.command,
                op: a.op.to_string(),
                line: None,
            };
            let line = site_line(ctx, li, &sr).map(|l| l as usize);
            let what = a.what();
            let pfp = if *stage == "pfp" { "the PFP of " } else { "" };
            let at = match (list, site.command) {
                (Some(l), Some(c)) => format!("{pfp}{queue}/{l}:{c}"),
                _ => format!("{pfp}{queue}"),
            };
            let text = match line {
                Some(l) => format!("{at} ({what}, line {l})"),
                None => format!("{at} ({what})"),
            };
            HazardAccessReport {
                queue: Some(queue.clone()),
                agent: stage.to_string(),
                host: None,
                list: list.clone(),
                command: site.command,
                op: a.op.to_string(),
                kernel: a.kernel.clone(),
                access: a.kind.name().to_string(),
                line,
                text,
            }
        }
        pipefence::HazardAgent::Host { host, line } => {
            let op = host_op_name(a.op).to_string();
            let line = line.map(|l| l as usize);
            let text = match line {
                Some(l) => format!("host {host} ({op}, line {l})"),
                None => format!("host {host} ({op})"),
            };
            HazardAccessReport {
                queue: None,
                agent: "host".into(),
                host: Some(host.clone()),
                list: None,
                command: None,
                op,
                kernel: None,
                access: a.kind.name().to_string(),
                line,
                text,
            }
        }
        // A kind of agent added to the library later: no scenario line, the library's own
        // label.
        _ => HazardAccessReport {
            queue: None,
            agent: "other".into(),
            host: None,
            list: None,
            command: None,
            op: a.op.to_string(),
            kernel: a.kernel.clone(),
            access: a.kind.name().to_string(),
            line: None,
            text: a.to_string(),
        },
    }
}

pub(super) fn hazard_reports(ctx: &Ctx, li: &HashMap<u32, usize>) -> Vec<HazardReport> {
    let label = |a: &pipefence::HazardAccess| access_report(ctx, li, a).text;
    ctx.device
        .hazards()
        .iter()
        .map(|h| {
            let via = match &h.missing {
                pipefence::Missing::NoWriteback { release, .. }
                | pipefence::Missing::TopOfPipe { release } => Some(release),
                pipefence::Missing::PfpBeforeWait { wait } => Some(wait),
                _ => None,
            };
            let message = h.message(&label);
            let range = h.range_text();
            HazardReport {
                kind: h.kind.name().to_string(),
                range,
                address: format!("{:#x}", h.address),
                bytes: h.bytes,
                first: access_report(ctx, li, &h.first),
                second: access_report(ctx, li, &h.second),
                via: via.map(|v| access_report(ctx, li, v)),
                missing: h.missing_text(&label),
                fix: h.fix_text(&label),
                message,
            }
        })
        .collect()
}
