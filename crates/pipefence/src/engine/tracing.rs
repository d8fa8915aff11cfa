//! What an engine records for traces (only when a sink is installed): merged busy slices of the
//! ME, blocked slices of ME and PFP waits with an arrow from the write or signal that released
//! them, a release-to-acquire edge for every satisfied wait (blocked or not), `begin_event`
//! regions of the ME, and retirements of queue signals. Events are buffered in the engine (under its lock)
//! and drained by the driver, which hands them to the sink after releasing the lock.

use crate::core::DeviceCore;
use crate::engine::WaitCondition;
use crate::sync::Writer;
use crate::trace::{SliceKind, SyncKind, TraceEvent, Track};

/// An engine's trace buffer.
#[derive(Debug)]
pub(crate) struct EngineTrace {
    queue: String,
    /// Copy engines have no PFP: their queue waits show on the ME lane (D1).
    has_pfp: bool,
    /// The clock reading of the current step.
    pub(crate) now: u64,
    events: Vec<TraceEvent>,
    /// The ME's open busy slice: start, end, first command, count.
    me_open: Option<(u64, u64, &'static str, u32)>,
    /// When the ME's current wait started blocking.
    me_block: Option<u64>,
    /// When the PFP's current wait started blocking.
    pfp_block: Option<u64>,
    /// The ME's open `begin_event` regions, outermost first: label and start.
    regions: Vec<(String, u64)>,
}

impl EngineTrace {
    pub(crate) fn new(queue: &str, has_pfp: bool) -> Self {
        EngineTrace {
            queue: queue.to_string(),
            has_pfp,
            now: 0,
            events: Vec::new(),
            me_open: None,
            me_block: None,
            pfp_block: None,
            regions: Vec::new(),
        }
    }

    /// The ME reached `begin_event(label)`.
    pub(crate) fn begin_event(&mut self, label: &str) {
        self.regions.push((label.to_string(), self.now));
    }

    /// The ME reached `end_event`: the innermost open region ends.
    pub(crate) fn end_event(&mut self) {
        if let Some((name, start)) = self.regions.pop() {
            self.push_region(name, start);
        }
    }

    fn push_region(&mut self, name: String, start: u64) {
        self.events.push(TraceEvent::Region {
            track: self.me(),
            name,
            depth: self.regions.len() as u32,
            start_ns: start,
            end_ns: self.now.max(start),
        });
    }

    fn me(&self) -> Track {
        Track::Me {
            queue: self.queue.clone(),
        }
    }

    fn pfp(&self) -> Track {
        if !self.has_pfp {
            return self.me();
        }
        Track::Pfp {
            queue: self.queue.clone(),
        }
    }

    /// The ME completed a command: back-to-back commands share one slice.
    pub(crate) fn me_done(&mut self, op: &'static str) {
        let now = self.now;
        match &mut self.me_open {
            Some((_, end, _, count)) => {
                *end = now;
                *count += 1;
            }
            None => self.me_open = Some((now, now, op, 1)),
        }
    }

    fn close_me(&mut self) {
        if let Some((start, end, op, count)) = self.me_open.take() {
            let name = if count == 1 {
                op.to_string()
            } else {
                format!("{op} +{} commands", count - 1)
            };
            self.events.push(TraceEvent::Slice {
                track: self.me(),
                name,
                kind: SliceKind::Busy,
                start_ns: start,
                end_ns: end.max(start),
                site: None,
            });
        }
    }

    /// A stage's wait is blocked (the first time only opens the blocked slice).
    pub(crate) fn blocked(&mut self, pfp: bool) {
        if pfp && self.has_pfp {
            self.pfp_block.get_or_insert(self.now);
        } else {
            self.close_me();
            self.me_block.get_or_insert(self.now);
        }
    }

    /// A stage's wait was satisfied: a blocked slice, and an arrow from what released it.
    pub(crate) fn unblocked(&mut self, dev: &DeviceCore, pfp: bool, cond: &WaitCondition) {
        self.unblocked_by(dev, pfp, cond, None);
    }

    /// [`unblocked`](Self::unblocked) for a queue wait whose ticket `by` satisfied (F5): the
    /// arrow starts at that signal, not at whatever signal wrote the fence's current value.
    pub(crate) fn unblocked_by(
        &mut self,
        dev: &DeviceCore,
        pfp: bool,
        cond: &WaitCondition,
        by: Option<&crate::sync::Crossing>,
    ) {
        if pfp && !self.has_pfp {
            self.close_me();
        }
        let start = if pfp && self.has_pfp {
            self.pfp_block.take()
        } else {
            self.me_block.take()
        };
        let track = if pfp { self.pfp() } else { self.me() };
        // Every satisfied wait gets its release-to-acquire edge, blocked or not.
        if let Some((from, from_ns, what)) = sync_releaser(dev, cond, by) {
            let wait = match cond {
                WaitCondition::Fence { .. } => SyncKind::QueueWait,
                _ if pfp => SyncKind::PfpWait,
                _ => SyncKind::MeWait,
            };
            self.events.push(TraceEvent::Sync {
                from,
                from_ns,
                to: track.clone(),
                to_ns: self.now,
                label: what,
                wait,
                blocked: start.is_some(),
            });
        }
        let Some(start) = start else {
            return;
        };
        let label = cond.label(dev);
        let from = match (by, cond) {
            (Some(c), WaitCondition::Fence { fence, .. }) => writer_track(dev, c.writer)
                .map(|t| (t, c.ns, format!("fence {} = {}", fence.name(), c.value))),
            _ => releaser(dev, cond),
        };
        if let Some((from, from_ns, what)) = from {
            self.events.push(TraceEvent::Flow {
                from,
                from_ns,
                to: track.clone(),
                to_ns: self.now,
                label: what,
            });
        }
        self.events.push(TraceEvent::Slice {
            track,
            name: format!("wait {label}"),
            kind: SliceKind::Blocked,
            start_ns: start,
            end_ns: self.now.max(start),
            site: None,
        });
    }

    /// The device is being removed: waits still blocked become blocked slices that end here
    /// (the hang's picture: who was waiting on what, until when).
    pub(crate) fn close_open(
        &mut self,
        dev: &DeviceCore,
        pfp: Option<&WaitCondition>,
        me: Option<&WaitCondition>,
    ) {
        self.close_me();
        while let Some((name, start)) = self.regions.pop() {
            self.push_region(name, start);
        }
        for (is_pfp, cond) in [(true, pfp), (false, me)] {
            let start = if is_pfp && self.has_pfp {
                self.pfp_block.take()
            } else if !is_pfp || !self.has_pfp {
                self.me_block.take()
            } else {
                None
            };
            if let (Some(start), Some(cond)) = (start, cond) {
                let track = if is_pfp { self.pfp() } else { self.me() };
                self.events.push(TraceEvent::Slice {
                    track,
                    name: format!("wait {} (never satisfied)", cond.label(dev)),
                    kind: SliceKind::Blocked,
                    start_ns: start,
                    end_ns: self.now.max(start),
                    site: None,
                });
            }
        }
    }

    /// A queue signal landed.
    pub(crate) fn signalled(&mut self, fence: &str, value: u64) {
        self.events.push(TraceEvent::Instant {
            track: self.me(),
            ts_ns: self.now,
            name: format!("signal {fence} = {value}"),
            error: false,
        });
    }

    /// Takes the buffered events (closing the open busy slice).
    pub(crate) fn drain(&mut self) -> Vec<TraceEvent> {
        self.close_me();
        std::mem::take(&mut self.events)
    }
}

/// The lane and time of the write or signal that satisfied `cond`, and what it wrote.
fn releaser(dev: &DeviceCore, cond: &WaitCondition) -> Option<(Track, u64, String)> {
    match cond {
        WaitCondition::Fence { fence, .. } => {
            let (w, ns) = fence.last_writer();
            let track = writer_track(dev, w)?;
            Some((
                track,
                ns,
                format!("fence {} = {}", fence.name(), fence.value_before_removal()),
            ))
        }
        WaitCondition::Memory { address, .. } => dev.trace_last_write(*address),
        _ => None,
    }
}

/// The lane and time of the signal or write that satisfied `cond` for its release-to-acquire
/// edge: the signal that crossed a queue wait's ticket (`by`), the newest write whose value
/// satisfies a memory wait.
fn sync_releaser(
    dev: &DeviceCore,
    cond: &WaitCondition,
    by: Option<&crate::sync::Crossing>,
) -> Option<(Track, u64, String)> {
    match (by, cond) {
        (Some(c), WaitCondition::Fence { fence, .. }) if !c.fence_released => {
            writer_track(dev, c.writer)
                .map(|t| (t, c.ns, format!("fence {} = {}", fence.name(), c.value)))
        }
        (_, WaitCondition::Memory { address, cond }) => dev.trace_releaser(*address, cond),
        _ => releaser(dev, cond),
    }
}

/// The lane of a writer.
pub(crate) fn writer_track(dev: &DeviceCore, w: Writer) -> Option<Track> {
    match w {
        Writer::Never => None,
        Writer::Host { host } => Some(Track::Host {
            name: crate::host_names::name_of(host),
        }),
        Writer::Engine { queue, .. } => Some(Track::Me {
            queue: dev.queue_name(queue),
        }),
    }
}
