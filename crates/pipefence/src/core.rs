//! The device core: what every layer from the hazard model and the kernels up to the engine
//! needs of a device, and nothing about queues, drivers or removal reports. Its memory (the
//! address space and the buffers), the address watches, the clock, the names of lists and
//! queues, the removal flag, the trace sink with the last-writer records for flow arrows, the
//! last host write of each word (reports), and the hazard model's handle (D5).
//!
//! Layer contract: names only the bottom modules (`types`, `sync`, `memory`, `command`,
//! `clock`, `trace` events) and the hazard model it carries.

use crate::clock::Clock;
use crate::command::Width;
use crate::hazard::Model;
use crate::memory::{AddressSpace, BufferCore};
use crate::sync::shim::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::sync::{AddressWatches, Writer};
use crate::trace::{SliceKind, TraceEvent, TraceSink, Track};
use std::collections::HashMap;
use std::sync::Arc;

/// The last traced write of a word: who, when, what (labels are built only for arrows).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceWrite {
    writer: Writer,
    ns: u64,
    op: &'static str,
    address: u64,
    value: u64,
}

/// How many writes of one address [`DeviceCore::trace_releaser`] looks back through.
const TRACE_HISTORY: usize = 8;

/// Traced runs' records of writes, under one lock (a traced write updates both, and a traced
/// wait reads both): keyed by address, with a fast hash (they are only looked up, never
/// iterated, so their order shows nowhere).
#[derive(Debug, Default)]
struct TraceWrites {
    /// The last write of each 8-byte word (lane, time, what), for flow arrows.
    last: rustc_hash::FxHashMap<u64, TraceWrite>,
    /// The last [`TRACE_HISTORY`] writes of each address, newest last, for the
    /// release-to-acquire edges (which write released a memory-value wait).
    history: rustc_hash::FxHashMap<u64, std::collections::VecDeque<TraceWrite>>,
}

/// The last host write of an address (for reports).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostWrite {
    pub(crate) writer: Writer,
    pub(crate) seq: u64,
    pub(crate) ns: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DeviceCore {
    /// A process-unique device number (thread names: `pf{id}-q{n}`, `pf{id}-w{n}`).
    pub(crate) id: u64,
    /// GPU timestamp frequency in Hz (C12).
    pub(crate) timestamp_frequency: u64,
    /// Strict mode's visibility model is on (D5).
    strict: bool,
    /// Where trace events go.
    trace: Option<Arc<dyn TraceSink>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) memory: AddressSpace,
    pub(crate) watches: AddressWatches,
    /// Outstanding atomic views: while any exists, blocked engines poll (D8).
    pub(crate) views: AtomicUsize,
    /// Set once, when the device is removed (the removal record is the runtime's).
    pub(crate) removed: AtomicBool,
    write_seq: AtomicU64,
    /// Last host write per 4-byte word.
    pub(crate) host_writes: Mutex<HashMap<u64, HostWrite>>,
    /// Command list names by id.
    pub(crate) list_names: Mutex<HashMap<u32, Arc<str>>>,
    /// Queue names by id.
    pub(crate) queue_names: Mutex<Vec<Arc<str>>>,
    /// Traced runs: the writes that flow arrows and release-to-acquire edges start from.
    trace_writes: Mutex<TraceWrites>,
    /// Hazard analysis and strict-mode visibility (`None` with the plain memory model).
    pub(crate) model: Option<Mutex<Model>>,
}

impl DeviceCore {
    /// A core with no buffers, names or writes yet.
    pub(crate) fn new(
        id: u64,
        clock: Arc<dyn Clock>,
        timestamp_frequency: u64,
        strict: bool,
        trace: Option<Arc<dyn TraceSink>>,
        model: Option<Model>,
    ) -> Self {
        DeviceCore {
            id,
            timestamp_frequency,
            strict,
            trace,
            clock,
            memory: AddressSpace::new(),
            watches: AddressWatches::default(),
            views: AtomicUsize::new(0),
            removed: AtomicBool::new(false),
            write_seq: AtomicU64::new(0),
            host_writes: Mutex::new(HashMap::new()),
            list_names: Mutex::new(HashMap::new()),
            queue_names: Mutex::new(Vec::new()),
            trace_writes: Mutex::new(TraceWrites::default()),
            model: model.map(Mutex::new),
        }
    }

    /// The hazard model, locked (`None` with the plain memory model).
    #[inline]
    pub(crate) fn model(&self) -> Option<MutexGuard<'_, Model>> {
        self.model.as_ref().map(lock)
    }

    /// Runs `f` on the hazard model, if the device has one. Out of line: on a plain device the
    /// engine's hot paths only test the option.
    #[inline]
    pub(crate) fn with_model(&self, f: impl FnOnce(&mut Model)) {
        if self.model.is_some() {
            self.with_model_slow(f);
        }
    }

    #[cold]
    #[inline(never)]
    fn with_model_slow(&self, f: impl FnOnce(&mut Model)) {
        if let Some(mut m) = self.model() {
            f(&mut m);
        }
    }

    /// Unmaps the application's buffer at `base`; the hazard model keeps its name for the
    /// hazards reported in it (a report read after the buffer is gone still names it).
    pub(crate) fn unmap_buffer(&self, base: u64) {
        if let Some(b) = self.memory.unmap(base) {
            self.with_model(|m| m.buffer_unmapped(b.base, b.size, &b.name));
        }
    }

    /// Whether strict mode's visibility model is on.
    #[inline]
    pub(crate) fn strict(&self) -> bool {
        self.strict
    }

    /// Whether the device was removed.
    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// A clock reading for bookkeeping (last-writer records).
    #[inline]
    pub(crate) fn coarse_now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// A device-wide order of writes (last-writer records).
    #[inline]
    pub(crate) fn next_write_seq(&self) -> u64 {
        self.write_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a host write of `bytes` bytes at `address` (for reports): a record per 4-byte
    /// word it writes.
    pub(crate) fn record_host_write(&self, address: u64, bytes: u64) {
        crate::footprint::record_writers(address, address + bytes);
        let w = HostWrite {
            writer: Writer::Host {
                host: crate::host_names::current_id(),
            },
            seq: self.next_write_seq(),
            ns: self.coarse_now_ns(),
        };
        let mut writes = lock(&self.host_writes);
        for word in words_of(address, bytes) {
            writes.insert(word, w);
        }
    }

    /// The name of command list `id`.
    pub(crate) fn list_name(&self, id: u32) -> String {
        lock(&self.list_names)
            .get(&id)
            .map_or_else(|| format!("list#{id}"), |n| n.to_string())
    }

    /// The trace sink, if tracing.
    #[inline]
    pub(crate) fn trace_sink(&self) -> Option<&Arc<dyn TraceSink>> {
        self.trace.as_ref()
    }

    /// Hands events to the sink (call with no pipefence lock held).
    pub(crate) fn emit(&self, events: &[TraceEvent]) {
        if let (Some(s), false) = (self.trace_sink(), events.is_empty()) {
            s.record(events);
        }
    }

    /// A host-thread event (tracing only; `name` is only built when a sink is attached).
    pub(crate) fn trace_host(&self, name: impl FnOnce() -> String, kind: SliceKind, start_ns: u64) {
        if self.trace_sink().is_some() {
            let name = name();
            let track = Track::Host {
                name: crate::host_names::name_of(crate::host_names::current_id()),
            };
            let end_ns = self.now_ns().max(start_ns);
            self.emit(&[TraceEvent::Slice {
                track,
                name,
                kind,
                start_ns,
                end_ns,
                site: None,
            }]);
        }
    }

    /// A host wait's release-to-acquire edge (tracing only): from the signal or write `from`
    /// (lane, time, what) to the calling host thread, now. `blocked`: the wait's condition did
    /// not hold when it began.
    pub(crate) fn trace_host_sync(
        &self,
        from: Option<(Track, u64, String)>,
        wait: crate::trace::SyncKind,
        blocked: bool,
    ) {
        let (Some(_), Some((from, from_ns, label))) = (self.trace_sink(), from) else {
            return;
        };
        let to = Track::Host {
            name: crate::host_names::name_of(crate::host_names::current_id()),
        };
        self.emit(&[TraceEvent::Sync {
            from,
            from_ns,
            to,
            to_ns: self.now_ns().max(from_ns),
            label,
            wait,
            blocked,
        }]);
    }

    /// The lane, time and label of the signal that wrote `fence`'s current value (tracing
    /// only; `None` when nothing signalled it, or after removal).
    pub(crate) fn trace_fence_releaser(
        &self,
        fence: &crate::sync::FenceCore,
    ) -> Option<(Track, u64, String)> {
        if self.trace_sink().is_none() || fence.is_removed() {
            return None;
        }
        let (w, ns) = fence.last_writer();
        let track = self.writer_track(w)?;
        let label = format!("fence {} = {}", fence.name(), fence.value_before_removal());
        Some((track, ns, label))
    }

    /// Records the last write of `address` for flow arrows (tracing only).
    pub(crate) fn record_trace_write(
        &self,
        address: u64,
        writer: Writer,
        ns: u64,
        op: &'static str,
        value: u64,
    ) {
        let w = TraceWrite {
            writer,
            ns,
            op,
            address,
            value,
        };
        let mut t = lock(&self.trace_writes);
        t.last.insert(address & !7, w);
        let q = t.history.entry(address).or_default();
        if q.len() == TRACE_HISTORY {
            q.pop_front();
        }
        q.push_back(w);
    }

    /// The write that released a memory-value wait on `address` for `cond`: the newest traced
    /// write of that address whose value satisfies the condition (in strict mode a later write
    /// may still sit in a write-back buffer, unseen), else the last traced write of its word.
    pub(crate) fn trace_releaser(
        &self,
        address: u64,
        cond: &crate::command::ValueCondition,
    ) -> Option<(Track, u64, String)> {
        let w = {
            let t = lock(&self.trace_writes);
            t.history
                .get(&address)
                .and_then(|q| q.iter().rev().find(|w| cond.holds(w.value)))
                .or_else(|| t.last.get(&(address & !7)))
                .copied()?
        };
        self.trace_origin(w)
    }

    /// The last traced write of `address`.
    pub(crate) fn trace_last_write(&self, address: u64) -> Option<(Track, u64, String)> {
        let w = *lock(&self.trace_writes).last.get(&(address & !7))?;
        self.trace_origin(w)
    }

    /// Where an arrow from traced write `w` starts: its writer's lane, its time, what it wrote.
    fn trace_origin(&self, w: TraceWrite) -> Option<(Track, u64, String)> {
        let track = self.writer_track(w.writer)?;
        let what = format!("{} {} = {}", w.op, self.address_text(w.address), w.value);
        Some((track, w.ns, what))
    }

    /// The name of queue `id`.
    pub(crate) fn queue_name(&self, id: u32) -> String {
        lock(&self.queue_names)
            .get(id as usize)
            .map_or_else(|| format!("queue#{id}"), |n| n.to_string())
    }

    /// Text for an address: `buffer+offset`, or hex when unmapped.
    pub(crate) fn address_text(&self, address: u64) -> String {
        match self.memory.resolve(address, 1) {
            Some((b, 0)) => b.name.to_string(),
            Some((b, off)) => format!("{}+{off}", b.name),
            None => format!("{address:#x}"),
        }
    }

    /// The trace lane of a writer (`None` for no writer).
    pub(crate) fn writer_track(&self, w: Writer) -> Option<Track> {
        match w {
            Writer::Never => None,
            Writer::Host { host } => Some(Track::Host {
                name: crate::host_names::name_of(host),
            }),
            Writer::Engine { queue, .. } => Some(Track::Me {
                queue: self.queue_name(queue),
            }),
        }
    }
}

impl BufferCore {
    /// Atomic load of the 32- or 64-bit value at `offset` (aligned to its width), zero-extended.
    #[inline]
    pub(crate) fn load(&self, offset: u64, width: Width) -> Option<u64> {
        match width {
            Width::W32 => self.load32(offset).map(u64::from),
            Width::W64 => self.load64(offset),
        }
    }
}

/// The 4-byte words that `bytes` bytes from `address` touch (the keys of last-writer records:
/// a 32-bit wait names the writer of its own word, not of the other half of an 8-byte word).
pub(crate) fn words_of(address: u64, bytes: u64) -> impl Iterator<Item = u64> {
    let first = address & !3;
    let end = address.saturating_add(bytes.max(1));
    (first..end).step_by(4)
}
