//! A shrunk counterexample's decisive steps in the scenario's terms: each preemption of a
//! narrated schedule (`pipefence::explore::Script::narrating`) as "`q2`'s ME ran
//! `wait-value32` (line 14) before `q1`'s PFP parsed `flush-pipeline` (line 9)".

use super::{lock, Ctx};
use crate::plan::{KernelDecl, ListCommand};
use pipefence::explore::{ActorKey, Script, Where};
use serde::Serialize;
use std::collections::HashMap;

/// One side of a decisive step: an actor and where it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepActor {
    /// Who: `q2's ME`, `q1's PFP`, `q1's retirement`, `group 3 of a dispatch on q1`,
    /// `host thread main`, ...
    pub actor: String,
    /// The scenario command it ran or was about to run (`wait-value32`), when it is one.
    pub command: Option<String>,
    /// Its scenario line.
    pub line: Option<u32>,
    /// In words: "`q2`'s ME ran `wait-value32` (line 14)".
    pub text: String,
}

/// A preemption of a shrunk counterexample: `ran` ran while `preempted`, the actor that ran
/// last, could still go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisiveStep {
    /// Who ran, and what.
    pub ran: StepActor,
    /// Who it ran before, and what that one was about to run.
    pub preempted: StepActor,
    /// In words.
    pub text: String,
}

/// A list command's node name.
pub fn command_keyword(c: &ListCommand) -> &'static str {
    use pipefence::Width::{W32, W64};
    match c {
        ListCommand::WaitValue { cond, .. } => match cond.width {
            W32 => "wait-value32",
            W64 => "wait-value64",
        },
        ListCommand::WriteBottomOfPipe { width: W32, .. } => "write-value32-bop",
        ListCommand::WriteBottomOfPipe { width: W64, .. } => "write-value64-bop",
        ListCommand::WriteTopOfPipe { width: W32, .. } => "write-value32-top",
        ListCommand::WriteTopOfPipe { width: W64, .. } => "write-value64-top",
        ListCommand::WriteImmediate { .. } => "write-immediate",
        ListCommand::FlushPipeline { .. } => "flush-pipeline",
        ListCommand::Dispatch { kernel, .. } => match kernel {
            KernelDecl::Fill { .. } => "dispatch fill",
            KernelDecl::Add { .. } => "dispatch add",
            KernelDecl::Sum { .. } => "dispatch sum",
            KernelDecl::Spin { .. } => "dispatch spin",
        },
        ListCommand::DispatchIndirect { .. } => "dispatch-indirect",
        ListCommand::Copy { .. } => "copy",
        ListCommand::Marker(_) => "marker",
        ListCommand::BeginEvent(_) => "begin-event",
        ListCommand::EndEvent => "end-event",
    }
}

/// The decisive steps of the run `script` replayed (empty unless it narrates).
pub(super) fn decisive_steps(
    ctx: &Ctx,
    list_index: &HashMap<u32, usize>,
    script: &Script,
) -> Vec<DecisiveStep> {
    let mut out = Vec::new();
    for n in script.narration() {
        let Some((pk, psite)) = n.preempted else {
            continue;
        };
        let ran = step_actor(ctx, list_index, n.actor, n.site);
        let preempted = step_actor(ctx, list_index, pk, psite);
        let text = format!("{} before {}", ran.text, preempted.text);
        out.push(DecisiveStep {
            ran,
            preempted,
            text,
        });
    }
    out
}

fn queue_name(ctx: &Ctx, id: u32) -> String {
    ctx.queues.iter().position(|q| q.id() == id).map_or_else(
        || format!("queue {id}"),
        |i| format!("`{}`", ctx.sc.queues[i].name),
    )
}

/// The cache line at GPU address `line` in the scenario's terms (`` `slots+256` ``), or the
/// address when no buffer holds it.
fn line_name(ctx: &Ctx, line: u64) -> String {
    ctx.buffers
        .iter()
        .zip(&ctx.sc.buffers)
        .find_map(|(b, decl)| {
            let offset = line.checked_sub(b.gpu_address())?;
            (offset < b.size()).then(|| match offset {
                0 => format!("`{}`", decl.name),
                o => format!("`{}+{o}`", decl.name),
            })
        })
        .unwrap_or_else(|| format!("{line:#x}"))
}

fn step_actor(
    ctx: &Ctx,
    list_index: &HashMap<u32, usize>,
    a: ActorKey,
    site: Option<Where>,
) -> StepActor {
    let actor = match a {
        ActorKey::Host(0) => "host thread `main`".to_string(),
        ActorKey::Host(h) => match lock(&ctx.started).get(h as usize - 1) {
            Some(name) => format!("host thread `{name}`"),
            None => format!("host thread {h}"),
        },
        ActorKey::Pfp(q) => format!("{}'s PFP", queue_name(ctx, q)),
        ActorKey::Me(q) => format!("{}'s ME", queue_name(ctx, q)),
        ActorKey::Retire(q) => format!("{}'s retirement", queue_name(ctx, q)),
        ActorKey::Writeback(q, u64::MAX) => {
            format!("an early write-back of a line {} wrote", queue_name(ctx, q))
        }
        ActorKey::Writeback(q, line) => format!(
            "an early write-back of the line at {} ({} wrote it)",
            line_name(ctx, line),
            queue_name(ctx, q)
        ),
        ActorKey::Group(q, _, g) => format!("group {g} of a dispatch of {}", queue_name(ctx, q)),
        ActorKey::Dispatch(q, _) | ActorKey::Groups(q, _) => {
            format!("groups of a dispatch of {}", queue_name(ctx, q))
        }
        ActorKey::Endless(_) => "the watchdog, removing an endless kernel".to_string(),
    };
    let (mut command, mut line) = (None, None);
    if let Some(Where::Host(l)) = site {
        line = Some(l);
    }
    if let Some(Where::Command(s)) = site {
        match (s.list, s.command) {
            (Some(id), Some(c)) => {
                if let Some(cd) = list_index
                    .get(&id)
                    .and_then(|&li| ctx.sc.lists[li].commands.get(c as usize))
                {
                    command = Some(command_keyword(&cd.cmd).to_string());
                    line = u32::try_from(cd.pos.line).ok();
                }
            }
            _ => {
                let qi = match a {
                    ActorKey::Pfp(q) | ActorKey::Me(q) | ActorKey::Retire(q) => {
                        ctx.queues.iter().position(|x| x.id() == q)
                    }
                    _ => None,
                };
                if let Some(qi) = qi {
                    line = lock(&ctx.submissions)
                        .get(&(qi, s.submission))
                        .and_then(|&l| u32::try_from(l).ok());
                }
            }
        }
    }
    let what = match (&command, line) {
        (Some(c), Some(l)) => format!("`{c}` (line {l})"),
        (Some(c), None) => format!("`{c}`"),
        (None, Some(l)) => format!("the submission at line {l}"),
        (None, None) => String::new(),
    };
    let text = match (a, line) {
        (ActorKey::Host(_), Some(l)) => format!("{actor} went on from line {l}"),
        _ if what.is_empty() => format!("{actor} ran"),
        (ActorKey::Group(q, _, g), _) => {
            format!("group {g} of {what} on {} ran", queue_name(ctx, q))
        }
        (ActorKey::Dispatch(q, _) | ActorKey::Groups(q, _), _) => {
            format!("groups of {what} on {} ran", queue_name(ctx, q))
        }
        (ActorKey::Pfp(_), _) => format!("{actor} parsed {what}"),
        (ActorKey::Retire(_), _) => format!("{actor} performed {what}"),
        _ => format!("{actor} ran {what}"),
    };
    StepActor {
        actor,
        command,
        line,
        text,
    }
}
