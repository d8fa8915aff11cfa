//! Access records: who made an access (a queue's PFP, ME or tasks at a site, or a host thread
//! at a source line), the operation, kernel and kind, interned once into an `AccId` that the
//! shadow state and the reports refer to.
//!
//! Calls nothing (it uses the engine's `Site` and the public `AccessKind` as data); the model
//! calls nothing above it.

use super::{AccessKind, Model};
use crate::types::Site;
use std::sync::Arc;

/// Who performs an access, internally.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum AgentRec {
    Task { queue: u32, site: Site },
    Me { queue: u32, site: Site },
    Pfp { queue: u32, site: Site },
    Host { id: u64, line: Option<u32> },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct AccRec {
    pub(super) agent: AgentRec,
    pub(super) op: &'static str,
    pub(super) kernel: Option<Arc<str>>,
    pub(super) kind: AccessKind,
}

impl PartialOrd for AccRec {
    fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
        None
    }
}

pub(super) type AccId = u32;

/// The site an access is recorded under: every execution of a list command is one access
/// (submission 0), so a program that runs a list many times keeps one record per command.
pub(super) fn one_site(site: Site) -> Site {
    if site.list.is_some() {
        Site {
            submission: 0,
            ..site
        }
    } else {
        site
    }
}

impl Model {
    pub(super) fn acc(&mut self, r: AccRec) -> AccId {
        if let Some(id) = self.acc_index.get(&r) {
            return *id;
        }
        let id = self.accs.len() as AccId;
        self.accs.push(r.clone());
        self.acc_index.insert(r, id);
        id
    }

    pub(super) fn queue_acc(
        &mut self,
        queue: u32,
        stage: u8,
        site: Site,
        op: &'static str,
        kind: AccessKind,
    ) -> AccId {
        let agent = match stage {
            0 => AgentRec::Pfp {
                queue,
                site: one_site(site),
            },
            1 => AgentRec::Me {
                queue,
                site: one_site(site),
            },
            _ => AgentRec::Task {
                queue,
                site: one_site(site),
            },
        };
        self.acc(AccRec {
            agent,
            op,
            kernel: None,
            kind,
        })
    }
}
