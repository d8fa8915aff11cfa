//! Trace events (what ran where and when, who waited on what and who released it, every
//! release-to-acquire edge, `begin_event` regions) and the sinks that receive them.
//!
//! Engines and drivers record events into buffers they own while they hold their locks, and
//! hand them to the [`TraceSink`] after releasing them (house style 4): a sink is never called
//! with a pipefence lock held. With no sink installed nothing is recorded (one branch per
//! command). Times are the device clock's nanoseconds: real time on the threaded driver, virtual
//! time on the deterministic driver (where a trace is a pure function of the seed).

pub mod chrome;
pub mod svg;

use crate::sync::shim::{lock, Mutex};
use serde::Serialize;

/// A timeline lane.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Track {
    /// A queue's pre-fetch parser.
    Pfp {
        /// Queue name.
        queue: String,
    },
    /// A queue's micro engine (and its retirements).
    Me {
        /// Queue name.
        queue: String,
    },
    /// A shader worker (threaded driver) or the shader array (deterministic driver: worker 0).
    Worker {
        /// Worker index.
        index: u32,
    },
    /// A host thread.
    Host {
        /// Its name.
        name: String,
    },
}

/// What a slice was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SliceKind {
    /// Executing commands.
    Busy,
    /// Stuck in a wait (fence, memory value, FIFO, flush).
    Blocked,
    /// Running dispatch groups.
    Kernel,
    /// A host action.
    Host,
}

/// Which kind of wait a [`TraceEvent::Sync`] edge ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncKind {
    /// A queue wait (`Queue::wait`, performed by the PFP, or the ME of a copy queue).
    QueueWait,
    /// A host fence wait (`Fence::wait`, `set_event_on_completion(None)`, `wait_multiple`).
    HostWait,
    /// A memory-value wait on the micro engine.
    MeWait,
    /// A memory-value wait on the pre-fetch parser.
    PfpWait,
    /// A host memory poll (`Buffer::wait_u32`, `wait_u64`).
    HostPoll,
}

/// One trace record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum TraceEvent {
    /// Something that took time on a track, `[start_ns, end_ns]`.
    Slice {
        /// The lane.
        track: Track,
        /// What (a command name, `wait fence a >= 1`, `fill x64`...).
        name: String,
        /// Busy, blocked, kernel or host.
        kind: SliceKind,
        /// Start.
        start_ns: u64,
        /// End (>= start).
        end_ns: u64,
        /// Where in the program (`list produce, command 3`), if it maps to a command.
        site: Option<String>,
    },
    /// An arrow from a signal or write to a wait that blocked until it (the Chrome trace's flow
    /// arrows; every satisfied wait, blocked or not, also gets a [`TraceEvent::Sync`]).
    Flow {
        /// The writer's lane.
        from: Track,
        /// When the write landed.
        from_ns: u64,
        /// The waiter's lane.
        to: Track,
        /// When the wait was seen satisfied.
        to_ns: u64,
        /// What (`fence a = 1`, `flags+8 = 1`).
        label: String,
    },
    /// A release-to-acquire edge: the fence signal or memory write that satisfied a wait, for
    /// every satisfied wait (queue, host, ME and PFP waits), whether it blocked or not. The SVG
    /// timeline draws these; the Chrome trace leaves them out (its arrows are the [`Flow`]s,
    /// recorded only for waits that blocked, which also get a `Sync` with `blocked: true`).
    ///
    /// [`Flow`]: TraceEvent::Flow
    Sync {
        /// The releaser's lane (the signalling queue's ME, or a host).
        from: Track,
        /// When the signal or write landed.
        from_ns: u64,
        /// The waiter's lane.
        to: Track,
        /// When the wait was seen satisfied.
        to_ns: u64,
        /// What released it (`fence a = 1`, `write-value32-bop flags = 1`).
        label: String,
        /// What waited.
        wait: SyncKind,
        /// Whether the wait blocked before it was satisfied.
        blocked: bool,
    },
    /// A `begin_event` ... `end_event` region of a queue's ME (C10), `depth` 0 for the
    /// outermost (a frame, say). The SVG timeline groups the queue's lanes under a band of
    /// these; the Chrome trace leaves them out. A region still open at removal ends there.
    Region {
        /// The ME's lane.
        track: Track,
        /// The label.
        name: String,
        /// How many regions enclose it.
        depth: u32,
        /// When the ME reached `begin_event`.
        start_ns: u64,
        /// When it reached `end_event` (or the device was removed).
        end_ns: u64,
    },
    /// A moment: the removal point, a hazard.
    Instant {
        /// The lane.
        track: Track,
        /// When.
        ts_ns: u64,
        /// What.
        name: String,
        /// Whether it is an error (removal, fault, hazard).
        error: bool,
    },
}

impl TraceEvent {
    /// The event's time (a slice's start).
    pub fn ts_ns(&self) -> u64 {
        match self {
            TraceEvent::Slice { start_ns, .. } | TraceEvent::Region { start_ns, .. } => *start_ns,
            TraceEvent::Flow { from_ns, .. } | TraceEvent::Sync { from_ns, .. } => *from_ns,
            TraceEvent::Instant { ts_ns, .. } => *ts_ns,
        }
    }
}

/// Receives trace events. Called without pipefence locks held, from engine, worker and host
/// threads; implementations must be thread-safe and should be quick.
pub trait TraceSink: Send + Sync + std::fmt::Debug {
    /// Receives a batch of events.
    fn record(&self, events: &[TraceEvent]);
}

/// A ready sink that keeps every event in memory.
#[derive(Debug, Default)]
pub struct TraceRecorder {
    events: Mutex<Vec<TraceEvent>>,
}

impl TraceRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        TraceRecorder::default()
    }

    /// Every event so far, in a stable order (by time, then as recorded).
    pub fn events(&self) -> Vec<TraceEvent> {
        let mut v = lock(&self.events).clone();
        v.sort_by_key(TraceEvent::ts_ns);
        v
    }
}

impl TraceSink for TraceRecorder {
    fn record(&self, events: &[TraceEvent]) {
        lock(&self.events).extend_from_slice(events);
    }
}
