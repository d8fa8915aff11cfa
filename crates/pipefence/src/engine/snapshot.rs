//! What diagnosis needs from one engine (D7): where each stage is, what it waits for, the
//! labels open, and the writes and signals it has not performed yet.

use super::*;

impl Engine {
    /// A snapshot for diagnosis (D7).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut pending = Vec::new();
        for r in &self.retire {
            match &r.op {
                RetireOp::Write {
                    address,
                    width,
                    value,
                    source,
                    op,
                    ..
                } => pending.push(Pending::Write {
                    address: *address,
                    width: *width,
                    value: (*source == WriteSource::Value).then_some(*value),
                    site: r.site,
                    op,
                }),
                RetireOp::Signal { fence, value } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: r.site,
                }),
                RetireOp::SubmissionEnd => {}
            }
        }
        if let Some(MeOp::Copy {
            site, dst, bytes, ..
        }) = &self.me_op
        {
            pending.push(Pending::Range {
                start: *dst,
                end: dst.saturating_add(*bytes),
                value: None,
                site: *site,
                op: "copy",
            });
        }
        for p in &self.fifo {
            match &p.op {
                PacketOp::Command { cmd, .. } => pending_of(cmd, p.site, &mut pending),
                PacketOp::Signal { fence, value } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: p.site,
                }),
                PacketOp::SubmissionEnd => {}
            }
        }
        if let Some(cur) = &self.cursor {
            for (li, list) in cur.lists.iter().enumerate().skip(cur.list) {
                let (word, first) = if li == cur.list {
                    (cur.word, cur.command)
                } else {
                    (0, 0)
                };
                scan_list(list, word, first, cur.submission, &mut pending);
            }
        }
        for (seq, sub) in &self.ring {
            match sub {
                Submission::Execute(lists) => {
                    for l in lists {
                        scan_list(l, 0, 0, *seq, &mut pending);
                    }
                }
                Submission::Signal { fence, value, .. } => pending.push(Pending::Signal {
                    fence: fence.clone(),
                    value: *value,
                    site: Site {
                        submission: *seq,
                        list: None,
                        command: None,
                    },
                }),
                Submission::Wait { .. } => {}
            }
        }
        let blocked = self
            .blocked_on()
            .map(|(stage, site, op, cond)| (stage, site, op, cond.clone()));
        // The ordinal of the wait a stage is blocked in: the ME's packet, or the item the PFP
        // has not taken yet.
        let blocked_last = blocked.as_ref().and_then(|(stage, ..)| match stage {
            Stage::Me => self.completed.before(self.me_ord(), None),
            Stage::Pfp => self.completed.before(self.pfp_ord(), None),
        });
        Snapshot {
            idle: self.is_idle(),
            blocked,
            blocked_last,
            me_at: self.me_site,
            me_at_last: self
                .me_site
                .and_then(|_| self.completed.before(self.me_ord(), None)),
            labels: self.labels.clone(),
            pfp_labels: self.pfp_labels(),
            dispatches: self
                .inflight_sites
                .values()
                .map(|d| InFlight {
                    site: d.site,
                    op: d.op,
                    labels: d.labels.clone(),
                    last_completed: self.completed.before(d.ord, d.me_before),
                })
                .collect(),
            last_completed: self.completed.last(),
            fault_at: self.fault_at.clone(),
            pending,
            dispatches_in_flight: self.inflight.len() + self.launches.len(),
        }
    }
}

/// A write or signal an engine has not performed yet (for the wait-for graph, D7).
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// A queue signal.
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
        site: Site,
    },
    /// A command-processor value write; `value` is `None` for timestamps.
    Write {
        address: u64,
        width: Width,
        value: Option<u64>,
        site: Site,
        op: &'static str,
    },
    /// Writes by a dispatch or copy to `[start, end)`; `value` is the u32 stored by `fill`.
    Range {
        start: u64,
        end: u64,
        value: Option<u32>,
        site: Site,
        op: &'static str,
    },
}

impl Pending {
    /// Where the write or signal is, and its operation's name.
    pub(crate) fn site_op(&self) -> (Site, &'static str) {
        match self {
            Pending::Signal { site, .. } => (*site, "signal"),
            Pending::Write { site, op, .. } | Pending::Range { site, op, .. } => (*site, op),
        }
    }
}

/// A dispatch in flight, for diagnosis.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    pub(crate) site: Site,
    pub(crate) op: &'static str,
    /// The labels open at it.
    pub(crate) labels: Labels,
    /// The last command completed before it in queue order.
    pub(crate) last_completed: Option<(Site, &'static str)>,
}

/// Where an engine faulted (in an engine step or a retirement), as it was at the fault.
#[derive(Debug, Clone)]
pub(crate) struct FaultAt {
    /// The faulting command.
    pub(crate) site: Site,
    /// Its ordinal.
    pub(crate) ord: u64,
    /// The labels open at it (C10).
    pub(crate) labels: Labels,
    /// The last command completed before it in queue order (D7).
    pub(crate) last_completed: Option<(Site, &'static str)>,
}

/// What diagnosis needs from one engine. Each `last_completed` is the completed command latest
/// in queue order before the position it belongs to (never one ordered after it).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) idle: bool,
    pub(crate) blocked: Option<(Stage, Site, &'static str, WaitCondition)>,
    /// The last command completed before the blocked wait.
    pub(crate) blocked_last: Option<(Site, &'static str)>,
    pub(crate) me_at: Option<(Site, &'static str)>,
    /// The last command completed before the ME's command.
    pub(crate) me_at_last: Option<(Site, &'static str)>,
    /// The labels open at the ME (at the command it executes or is blocked in).
    pub(crate) labels: Vec<Arc<str>>,
    /// The labels open at the PFP's position (the ME's, plus the label commands it parsed
    /// and the ME has not executed yet).
    pub(crate) pfp_labels: Vec<Arc<str>>,
    /// Each dispatch in flight, oldest first.
    pub(crate) dispatches: Vec<InFlight>,
    /// The completed command latest in queue order.
    pub(crate) last_completed: Option<(Site, &'static str)>,
    /// Where the engine faulted, if it did.
    pub(crate) fault_at: Option<FaultAt>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) dispatches_in_flight: usize,
}

fn pending_of(cmd: &Command, site: Site, out: &mut Vec<Pending>) {
    let op = cmd.name();
    match cmd {
        Command::WriteValueTopOfPipe {
            address,
            width,
            value,
            source,
        }
        | Command::WriteValueBottomOfPipe {
            address,
            width,
            value,
            source,
            ..
        } => out.push(Pending::Write {
            address: *address,
            width: *width,
            value: (*source == WriteSource::Value).then_some(*value),
            site,
            op,
        }),
        Command::WriteImmediate { writes } => {
            for w in writes {
                out.push(Pending::Write {
                    address: w.address,
                    width: Width::W32,
                    value: Some(u64::from(w.value)),
                    site,
                    op,
                });
            }
        }
        Command::Dispatch { kernel, groups } => {
            let range = |dst: u64| {
                (
                    dst,
                    dst.saturating_add(u64::from(*groups) * kernels::GROUP_BYTES),
                )
            };
            let (start, end, value) = match kernel {
                KernelArgs::Fill { dst, value } => (range(*dst).0, range(*dst).1, Some(*value)),
                KernelArgs::Add { dst, .. } => (range(*dst).0, range(*dst).1, None),
                KernelArgs::Sum { dst, .. } => (*dst, dst.saturating_add(8), None),
                KernelArgs::Spin { .. } => return,
                // A user kernel may write anywhere.
                KernelArgs::User { .. } => (0, u64::MAX, None),
            };
            out.push(Pending::Range {
                start,
                end,
                value,
                site,
                op,
            });
        }
        Command::DispatchIndirect { kernel, .. } => {
            let start = match kernel {
                KernelArgs::Fill { dst, .. }
                | KernelArgs::Add { dst, .. }
                | KernelArgs::Sum { dst, .. } => *dst,
                KernelArgs::Spin { .. } => return,
                KernelArgs::User { .. } => 0,
            };
            out.push(Pending::Range {
                start,
                end: u64::MAX,
                value: None,
                site,
                op,
            });
        }
        Command::Copy { dst, bytes, .. } => out.push(Pending::Range {
            start: *dst,
            end: dst.saturating_add(*bytes),
            value: None,
            site,
            op,
        }),
        _ => {}
    }
}

/// Decodes a list from `word` on and collects its pending writes.
fn scan_list(list: &ClosedList, word: usize, first: u32, submission: u64, out: &mut Vec<Pending>) {
    let words: Vec<u32> = (word..list.words)
        .map(|w| list.stream.load32(w as u64 * 4).unwrap_or(0))
        .collect();
    let mut off = 0;
    let mut index = first;
    while off < words.len() {
        let Ok((cmd, len)) = decode(&words, off) else {
            break;
        };
        let site = Site {
            submission,
            list: Some(list.id),
            command: Some(index),
        };
        pending_of(&cmd, site, out);
        off += len;
        index += 1;
    }
}

impl Engine {
    /// Where a stage's next step is in the program (a narrated exploration's decisive steps):
    /// the ME's packet (the one it executes or is blocked in, else the FIFO's front; on a
    /// queue without a PFP, the item it parses next, as a PFP's), the PFP's next item (the
    /// wait it is blocked in, the command at its cursor, else the next submission's first).
    pub(crate) fn next_site(&self, stage: Stage) -> Option<Site> {
        match stage {
            Stage::Me => match &self.me_op {
                Some(_) => self.me_site.map(|(s, _)| s),
                None => match self.fifo.front() {
                    Some(p) => Some(p.site),
                    // A queue without a PFP (a copy queue): its ME parses the next item itself.
                    None if !self.kind.has_pfp() => self.next_site(Stage::Pfp),
                    None => None,
                },
            },
            Stage::Pfp => {
                if let Some((site, ..)) = &self.pfp_blocked {
                    return Some(*site);
                }
                if let Some(cur) = self.cursor.as_ref().filter(|c| c.list < c.lists.len()) {
                    return Some(Site {
                        submission: cur.submission,
                        list: Some(cur.lists[cur.list].id),
                        command: Some(cur.command),
                    });
                }
                self.ring.front().map(|(seq, sub)| match sub {
                    Submission::Execute(lists) => Site {
                        submission: *seq,
                        list: lists.first().map(|l| l.id),
                        command: lists.first().map(|_| 0),
                    },
                    Submission::Signal { .. } | Submission::Wait { .. } => Site {
                        submission: *seq,
                        list: None,
                        command: None,
                    },
                })
            }
        }
    }

    /// The bottom-of-pipe write or signal retirement performs next.
    pub(crate) fn retire_site(&self) -> Option<Site> {
        self.retire.front().map(|r| r.site)
    }

    /// Where dispatch `index` (in flight) is.
    pub(crate) fn dispatch_site(&self, index: u64) -> Option<Site> {
        self.inflight_sites.get(&index).map(|d| d.site)
    }
}
