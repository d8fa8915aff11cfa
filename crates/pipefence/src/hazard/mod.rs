//! Strict mode and hazard detection (D5; the model is `docs/memory-model.md`).
//!
//! `Model` holds the happens-before analysis (vector clocks in the style of FastTrack) and, in
//! strict mode, the visibility model (`strict::Visibility`). The engine, the drivers and the
//! host API call its hooks when the device has one; it never blocks and never reads time.
//!
//! Clock components: each queue has six, its PFP, its ME, and its dispatches' reads, dispatches'
//! writes, copies' reads and copies' writes. A task component counts a *prefix*:
//! `C[dispatch writes(q)] = n` means "the writes of the first `n` dispatches of `q` happen
//! before", which is exact here because every edge that orders tasks (a flush, a Q7 boundary, a
//! bottom-of-pipe write, a signal) covers all earlier tasks of its queue. Reads and writes are
//! apart because a bottom-of-pipe write without `L2_WRITEBACK` releases the tasks' reads but not
//! their writes. Each host thread has one component.
//!
//! Shadow state (the last write and the unordered reads of each word) is kept in address
//! segments (`ShadowMap`), so a kernel group's range costs one entry, not one per word.
//!
//! ## Files
//!
//! Each adds to `Model` what its job needs; a file calls only those listed before it (and
//! `strict`), and the model calls nothing above it.
//!
//! - `access`: access records (who, what operation, which kernel, which kind), interned.
//! - `clock`: vector clocks, epochs, clock components, the actor an access is checked as.
//! - `shadow`: per-word shadow state (last write, unordered reads) in address segments.
//! - `queue`: per-queue clocks, live tasks, pending releases and PFP races.
//! - `findings`: hazards recorded once each, capped, and turned into public reports.
//! - `rules`: which pairs of accesses are a hazard, and what synchronization is missing.
//! - `engine_hooks`, `host_hooks`: what the engine and kernels, and the host API, call.
//! - `strict`: strict mode's values (dirty words, stale read caches); `report`: the public
//!   report types.

mod access;
mod clock;
mod engine_hooks;
mod findings;
mod host_hooks;
mod queue;
mod report;
mod rules;
mod shadow;
pub(crate) mod strict;

pub use host_hooks::set_source_line;
pub use report::{
    AccessKind, Hazard, HazardAccess, HazardAgent, HazardKind, MemoryModel, Missing, Vocabulary,
};

use access::AccRec;
use clock::{Comp, Vc};
use findings::{HazardKey, Observed};
use queue::QState;
use rustc_hash::FxHashMap;
use shadow::ShadowMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The hazard analysis and, in strict mode, the visibility model of one device.
#[derive(Debug)]
pub(crate) struct Model {
    comps: FxHashMap<Comp, u32>,
    accs: Vec<AccRec>,
    acc_index: access::AccIndex,
    words: ShadowMap,
    queues: FxHashMap<u32, QState>,
    hosts: FxHashMap<u64, Vc>,
    fences: FxHashMap<usize, Arc<Vc>>,
    seq: u64,
    hazards: BTreeMap<HazardKey, (u64, u64, Option<Observed>)>,
    dropped: u64,
    /// The buffer each hazard's range lay in when that buffer was unmapped: its name, base and
    /// size (a live buffer is resolved when the report is read).
    unmapped: FxHashMap<HazardKey, (Arc<str>, u64, u64)>,
    pub(crate) vis: Option<strict::Visibility>,
}

impl Model {
    pub(crate) fn new(mode: MemoryModel, seed: u64) -> Self {
        Model {
            comps: FxHashMap::default(),
            accs: Vec::new(),
            acc_index: access::AccIndex::default(),
            words: ShadowMap::default(),
            queues: FxHashMap::default(),
            hosts: FxHashMap::default(),
            fences: FxHashMap::default(),
            seq: 0,
            hazards: BTreeMap::new(),
            dropped: 0,
            unmapped: FxHashMap::default(),
            vis: (mode == MemoryModel::Strict).then(|| strict::Visibility::new(seed)),
        }
    }
}
