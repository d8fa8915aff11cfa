//! The hazards found: each report recorded once by its identity (kind, both accesses, what is
//! missing), its range widened by later finds and capped at `MAX_HAZARDS`, and handed out as the
//! public [`Hazard`]s with every access resolved to queue, list and host names.
//!
//! Calls `access` (the records it resolves) and `shadow` (types only); reads names from
//! `DeviceCore` and `crate::host`; the model calls nothing above it.

use super::access::{AccId, AgentRec};
use super::shadow::Span;
use super::{Hazard, HazardAccess, HazardAgent, HazardKind, Missing, Model};
use crate::core::DeviceCore;
use std::sync::Arc;

/// Reports kept per device (more are counted, not kept).
const MAX_HAZARDS: usize = 256;

/// What a strict schedule's stale-cache read returned: `None` the current value, else (old,
/// current, address) of the first stale word. (`None` outside strict mode.)
pub(super) type Observed = Option<(u32, u32, u64)>;

/// A report's identity: kind, first and second access, what is missing.
pub(super) type HazardKey = (HazardKind, AccId, AccId, MissingRec);

/// [`Missing`] with access ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum MissingRec {
    NoWriteback { release: AccId, volatile: bool },
    TopOfPipe { release: AccId },
    NoFlush,
    PfpBeforeWait { wait: AccId },
    NoInvalidate,
    Nothing,
}

impl Model {
    pub(super) fn report(
        &mut self,
        kind: HazardKind,
        first: AccId,
        second: AccId,
        m: MissingRec,
        r: Span,
    ) {
        self.report_obs(kind, first, second, m, r, None);
    }

    pub(super) fn report_obs(
        &mut self,
        kind: HazardKind,
        first: AccId,
        second: AccId,
        m: MissingRec,
        (lo, hi): Span,
        observed: Option<Observed>,
    ) {
        // Two unordered writes are one report whichever landed first.
        let (first, second) = if kind == HazardKind::WriteWrite && first > second {
            (second, first)
        } else {
            (first, second)
        };
        let key = (kind, first, second, m);
        if let Some((l, h, o)) = self.hazards.get_mut(&key) {
            *l = (*l).min(lo);
            *h = (*h).max(hi);
            // A stale value seen in any part of the range is worth saying.
            if matches!(o, Some(None)) && matches!(observed, Some(Some(_))) {
                *o = observed;
            }
            return;
        }
        if self.hazards.len() >= MAX_HAZARDS {
            self.dropped += 1;
            return;
        }
        self.hazards.insert(key, (lo, hi, observed));
    }

    fn access(&self, dev: &DeviceCore, id: AccId) -> HazardAccess {
        let r = &self.accs[id as usize];
        let agent = match &r.agent {
            AgentRec::Task { queue, site }
            | AgentRec::Me { queue, site }
            | AgentRec::Pfp { queue, site } => HazardAgent::Queue {
                queue: dev.queue_name(*queue),
                stage: match r.agent {
                    AgentRec::Task { .. } => "task",
                    AgentRec::Me { .. } => "me",
                    _ => "pfp",
                },
                site: *site,
                list: site.list.map(|l| dev.list_name(l)),
            },
            AgentRec::Host { id, line } => HazardAgent::Host {
                host: crate::host_names::name_of(*id),
                line: *line,
            },
        };
        HazardAccess {
            agent,
            op: r.op,
            kernel: r.kernel.as_ref().map(|k| k.to_string()),
            kind: r.kind,
        }
    }

    /// The hazards found so far, in a stable order.
    pub(crate) fn hazards(&self, dev: &DeviceCore) -> Vec<Hazard> {
        self.hazards
            .iter()
            .map(|(key, (lo, hi, observed))| (key, self.unmapped.get(key), lo, hi, observed))
            .map(
                |((kind, first, second, m), gone, lo, hi, observed)| Hazard {
                    kind: *kind,
                    address: *lo,
                    bytes: hi - lo,
                    buffer: match gone {
                        Some((name, base, _)) => Some((name.to_string(), lo - base)),
                        None => dev
                            .memory
                            .resolve(*lo, 4)
                            .map(|(b, off)| (b.name.to_string(), off)),
                    },
                    first: self.access(dev, *first),
                    second: self.access(dev, *second),
                    missing: match m {
                        MissingRec::NoWriteback { release, volatile } => Missing::NoWriteback {
                            release: self.access(dev, *release),
                            volatile: *volatile,
                        },
                        MissingRec::TopOfPipe { release } => Missing::TopOfPipe {
                            release: self.access(dev, *release),
                        },
                        MissingRec::NoFlush => Missing::NoFlush,
                        MissingRec::PfpBeforeWait { wait } => Missing::PfpBeforeWait {
                            wait: self.access(dev, *wait),
                        },
                        MissingRec::NoInvalidate => Missing::NoInvalidate,
                        MissingRec::Nothing => Missing::Nothing,
                    },
                    observed: observed.map(|o| match o {
                        Some((old, cur, a)) => {
                            let at = match (gone, dev.memory.resolve(a, 4)) {
                                (Some((name, base, size)), _)
                                    if (*base..base + size).contains(&a) =>
                                {
                                    format!("{name}+{:#x}", a - base)
                                }
                                (_, Some((b, off))) => format!("{}+{off:#x}", b.name),
                                _ => format!("{a:#x}"),
                            };
                            format!("old value {old} at {at}, current {cur}")
                        }
                        None => "the current value".to_string(),
                    }),
                },
            )
            .collect()
    }

    /// The buffer at `base` of `size` bytes named `name` is being unmapped: the hazards whose
    /// range starts in it keep its name.
    pub(crate) fn buffer_unmapped(&mut self, base: u64, size: u64, name: &Arc<str>) {
        let end = base.saturating_add(size);
        for (key, (lo, _, _)) in &self.hazards {
            if (base..end).contains(lo) {
                self.unmapped
                    .entry(*key)
                    .or_insert_with(|| (name.clone(), base, size));
            }
        }
    }

    /// Reports not kept because of the cap.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}
