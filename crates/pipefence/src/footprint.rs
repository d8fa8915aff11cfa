//! Footprints: which objects an action of the deterministic driver touched, and how, for the
//! partial-order reduction of exhaustive exploration (`docs/exploration.md`, "The dependence
//! relation").
//!
//! While a reducing exploration runs an action, the memory, fence, queue and clock code record
//! their accesses here (`record`); the scheduler takes them (`take_raw`) and makes the
//! action's footprint of them ([`Footprint::new`]). Two actions are dependent when their
//! footprints conflict ([`Footprint::conflicts`]): they touch a common object and at least one of the two accesses
//! neither reads nor commutes with the other. The
//! recorder is per OS thread (the deterministic driver runs one action at a time, each on the
//! thread that performs it) and costs one relaxed load per access when no exploration records.
//!
//! It calls nothing else in the crate.

use std::cell::{Cell, RefCell};

/// An object an action touches. Every key is deterministic for a given program and schedule
/// prefix (addresses, queue ids, fence ids, host slots), so footprints of different runs
/// compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Obj {
    /// Memory bytes `[start, end)` by GPU virtual address.
    Mem(u64, u64),
    /// The records of who last wrote the words of `[start, end)`, 8-byte aligned (a removal report
    /// names the newest writer of the word a queue waits on): a CP or host write of a word and
    /// the launch of a dispatch or copy over a range write them, in the order they happen.
    Writers(u64, u64),
    /// A fence (by its id on the device): its value, waiters and events.
    Fence(u64),
    /// The hazard model's release clock of a queue's ME (what a value write on the queue
    /// passes on): a retirement updates it (a top-of-pipe write releases the CP writes that
    /// have landed, and what a write-back made releasable), and so do the ME's steps and a
    /// Q7 boundary (every change of it is a join: they commute); an ME step that passes it on
    /// (a top-of-pipe write, the push of a bottom-of-pipe write without a write-back) reads
    /// it. Recorded only when the device tracks hazards.
    Released(u32),
    /// A queue's submission, by sequence number: the host's submit and the PFP's take of it
    /// write it.
    Sub(u32, u64),
    /// A slot of a queue's FIFO (packet index modulo the FIFO's depth): the PFP's push of a
    /// packet and the ME's pop of it write it (a push into a full FIFO waits for the pop of the
    /// packet `depth` before it, which wrote the same slot).
    Fifo(u32, u64),
    /// Whether a queue's PFP is held by a `flush-pipeline` (C8): the PFP's parse of the flush
    /// and the ME's completion of it write it; every PFP step that runs reads it.
    FlushHold(u32),
    /// Whether a queue's work has drained (Q7): every ME step, retirement and dispatch group of
    /// the queue updates it; the PFP's take of an `execute` reads it.
    Busy(u32),
    /// A slot of a queue's retire queue, by the index of what was pushed: the ME's push and
    /// the retirement of it write it.
    RetireSlot(u32, u64),
    /// One dispatch (queue, index): its launch writes it; each of its groups updates it (the
    /// count of groups left; groups commute).
    Dispatch(u32, u64),
    /// Dispatches `[lo, hi)` of a queue: whether all of them finished (an ME flush, a
    /// retirement, read). Overlaps each [`Obj::Dispatch`] in the range.
    Dispatches(u32, u64, u64),
    /// A queue's count of submissions completed: the retirement of a submission's end updates
    /// it; `Queue::is_idle` reads it, and a host's wait for every queue to be idle that passes
    /// awaits it (it could not pass before that retirement).
    Idle(u32),
    /// A queue's submissions (their order and count): every submission to the queue writes it,
    /// so two host threads' submissions to one queue race (the order decides what the queue
    /// runs); `Queue::is_idle` and a host's wait for every queue to be idle that passes read it
    /// (such a wait could have passed before a submission that, in the run, came first and made
    /// it wait: a race, unlike the retirement it awaits).
    Submit(u32),
    /// A ticket's latch (a queue wait's, by queue and submission; a host wait's, by host and
    /// wait): its registration and the signal that crosses its value update it; the PFP or the
    /// host that tests it reads it.
    Ticket(u32, u64),
    /// The targets `[lo, hi]` of a fence that a signal took back below (it lowered the value
    /// from `hi` to `lo - 1`): a latch registered for such a target reads it (`lo == hi`), as
    /// whether the value had reached its target when it registered depends on the order.
    FenceDown(u64, u64, u64),
    /// The targets `[lo, hi]` of a fence that were reached before a signal (or the fence's
    /// release) and still are after it: it rewrote what a latch registered for such a target
    /// reads when it finds the target reached (the crossing: the last signal's writer, time,
    /// value and release), so the two orders tell the latch of different signals. A signal
    /// that *crosses* a target writes [`Obj::FenceCross`] instead.
    FenceHeld(u64, u64, u64),
    /// The targets `[lo, hi]` of a fence that a signal (or the fence's release) crossed: the
    /// value was below them before it and reaches them after it. A latch registered for such
    /// a target after it fires at once, told of it, and awaits it ([`Kind::Await`]): one
    /// registered before it is set by it, told of the same signal, so the two orders are one
    /// schedule, yet the latch (and whoever tests it) still comes after the signal.
    FenceCross(u64, u64, u64),
    /// One line of a queue's strict-mode cache (by the line's address): its dirty words (task
    /// and CP writes, atomics and write-backs write it; the CP's reads read it).
    Line(u32, u64),
    /// What a queue's tasks read of one line (by its address): the read cache's snapshot of
    /// the line, over its dirty words, over memory. A task's read reads it; the queue's task
    /// and CP writes and atomics write it; a write-back of the line leaves it as it is (the
    /// words it writes to memory are the ones the queue already sees), so a task's read and
    /// the write-back of its line commute. Overlaps no other object: what an invalidation
    /// changes of it is [`Obj::Loaded`].
    View(u32, u64),
    /// Whether a queue's strict-mode read cache holds a snapshot of one line (by its address),
    /// and which: a task's read of the line reads it (a miss loads it: two reads with nothing
    /// between load the same snapshot in either order). A task's write or atomic updates a
    /// snapshot that is there and loads none, so it leaves the same state before or after an
    /// invalidation and does not touch it. Overlaps [`Obj::Cache`] of the queue.
    Loaded(u32, u64),
    /// A queue's strict-mode read cache as a whole (an invalidation): it overlaps every
    /// [`Obj::Loaded`] of the queue. Its dirty words ([`Obj::Line`]) and what its tasks read
    /// through it ([`Obj::View`]) it leaves alone: a write-back, a task's write or atomic,
    /// a CP write and an invalidation leave the same state in either order.
    Cache(u32),
    /// The tasks whose words a write-back of one of a queue's strict-mode lines wrote: (queue,
    /// 1 + the last dispatch, 1 + the last copy). Only read, and overlapping nothing else: no
    /// dependence, only what the exploration's window of an early write-back looks at
    /// (`explore/dpor.rs`: a later release of the queue that covers these tasks would have
    /// written the same words back).
    Pending(u32, u32, u32),
    /// What a release of a queue's strict-mode dirty words writes back: (queue, dispatches
    /// below, copies below). Only read, like [`Obj::Pending`].
    Release(u32, u32, u32),
    /// A queue's strict-mode dirty words as a whole (a release's write-back of its tasks'
    /// words, making them visible to its own CP): it overlaps every [`Obj::Line`] of the
    /// queue, not its read cache ([`Obj::Cache`]).
    Dirty(u32),
    /// The end of the run, reached: every host but the last is done and every queue is idle
    /// or the device removed. Only the last host's wait for it, passing or released by the
    /// removal, reads it (nothing writes it): it marks an action that could not run before any
    /// retirement or dispatch group of the run.
    Settled,
    /// A quiescence of the run, by its number: nothing could run, so every host's device wait
    /// timed out. Only the wakes of the waits it released read it (nothing writes it): it
    /// marks an action that could not run before any action that ran before the quiescence.
    Quiet(u32),
    /// The virtual clock.
    Clock,
    /// A host thread (its state: running, finished).
    Host(u32),
    /// The device's removal.
    Device,
    /// Everything (an action whose footprint is not known precisely).
    All,
}

/// How an object is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Reads only: commutes with other reads.
    Read,
    /// A commutative update whose result nobody reads in the action (an atomic add without its
    /// result, a group's completion count, the clock moving to a later time): commutes with
    /// other updates of its kind, not with reads or writes.
    Update,
    /// Any other access.
    Write,
    /// A read by an action that could not run before the writes and updates it conflicts with
    /// (a wait that passes only once they happened: a host's wait for every queue to be idle,
    /// a join). It conflicts as a read does, but a race it is the later side of is never
    /// reversed ([`Footprint::races`]).
    Await,
}

/// One access.
pub type Access = (Obj, Kind);

/// An action's accesses, sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Footprint {
    accesses: Vec<Access>,
    /// [`object_bits`] of each access, in the same order: a pair of accesses whose bits do
    /// not meet does not overlap, tested before the objects themselves.
    bits: smallvec::SmallVec<[u64; 6]>,
    /// The union of `bits` of the reads (awaits included), the updates and the writes: an
    /// access whose bits do not meet those of another footprint's accesses of a kind that
    /// conflicts with its own ([`Footprint::against`]) conflicts with none of them.
    kinds: [u64; 3],
    /// `kinds` of the accesses of [`forced`] objects alone, and the union of the bits of the
    /// awaits: a footprint pair whose forced kinds cannot conflict and whose awaits meet no
    /// update or write of the other has no conflict that orders it ([`Footprint::races`]).
    forced_kinds: [u64; 3],
    awaits: u64,
    /// Whether it has `(Device, Write)`: the device's removal ([`Footprint::races`]).
    removal: bool,
}

impl Footprint {
    /// A footprint of these accesses.
    pub fn new(mut accesses: Vec<Access>) -> Self {
        // By kind, then object (compared in place: a key would copy both each time).
        accesses.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        // Drop duplicates and merge adjacent or overlapping memory ranges of the same kind (a
        // loop over words records one range per word), in place.
        let mut n = 0;
        for i in 0..accesses.len() {
            let a = accesses[i];
            if n > 0 && (accesses[n - 1] == a || join_ranges(&mut accesses[n - 1], a)) {
                continue;
            }
            accesses[n] = a;
            n += 1;
        }
        accesses.truncate(n);
        let bits = accesses.iter().map(|&(o, _)| object_bits(o)).collect();
        let mut f = Footprint {
            accesses,
            bits,
            kinds: [0; 3],
            forced_kinds: [0; 3],
            awaits: 0,
            removal: false,
        };
        f.summarize();
        f
    }

    /// Whether it is the device's removal: it has `(Device, Write)`.
    pub fn is_removal(&self) -> bool {
        self.removal
    }

    /// The quiescence whose timeout released the host that acted ([`Obj::Quiet`]), if any.
    pub fn quiescence(&self) -> Option<u32> {
        if self.kinds[0] != object_bits(Obj::All) {
            return None;
        }
        self.accesses
            .iter()
            .take_while(|&&(_, k)| k == Kind::Read)
            .find_map(|&(o, _)| match o {
                Obj::Quiet(n) => Some(n),
                _ => None,
            })
    }

    /// Whether it has `(All, Read)` (a host released by a timeout or a removal reads
    /// everything): a read of every bit first, then the search.
    pub fn reads_all(&self) -> bool {
        self.kinds[0] == object_bits(Obj::All) && self.has((Obj::All, Kind::Read))
    }

    /// Whether it has `(Device, Write)`, looked for only when a write's bits hold the
    /// device's (what [`Footprint::removal`] keeps).
    fn finds_removal(&self) -> bool {
        self.kinds[2] & object_bits(Obj::Device) != 0 && self.has((Obj::Device, Kind::Write))
    }

    /// Whether it has an access of the device or of everything ([`Obj::Device`],
    /// [`Obj::All`]) other than a read: their bit first (a long dispatch step's footprint
    /// holds thousands of accesses), then the search.
    pub fn changes_device(&self) -> bool {
        let bit = object_bits(Obj::Device);
        (self.kinds[1] | self.kinds[2] | self.awaits) & bit != 0
            && self
                .accesses
                .iter()
                .any(|&(o, k)| k != Kind::Read && matches!(o, Obj::Device | Obj::All))
    }

    /// Whether this footprint has access `a` (the accesses are sorted by kind, then object:
    /// a binary search).
    pub fn has(&self, a: Access) -> bool {
        let key = (a.1, a.0);
        self.accesses
            .binary_search_by(|&(o, k)| (k, o).cmp(&key))
            .is_ok()
    }

    /// The bits of the reads (awaits included), the updates and the writes.
    pub fn kind_bits(&self) -> [u64; 3] {
        self.kinds
    }

    /// [`Footprint::kind_bits`] with `object_bits_again`'s bits: of two footprints that may
    /// conflict, both these and those meet ([`kinds_may_conflict`]). Worked out each time.
    pub fn kind_bits_again(&self) -> [u64; 3] {
        let mut kinds = [0; 3];
        for &(o, k) in &self.accesses {
            kinds[kind_index(k)] |= object_bits_again(o);
        }
        kinds
    }

    /// The bits of this footprint's accesses of the kinds that conflict with `k`.
    fn against(&self, k: Kind) -> u64 {
        against(self.kinds, k)
    }

    /// The accesses.
    pub fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    /// Drops the accesses of `o` (the rest stay sorted; nothing is recomputed).
    pub fn remove_object(&mut self, o: Obj) {
        // An access of `o` has its bits: none of any kind, none of `o`.
        if (self.kinds[0] | self.kinds[1] | self.kinds[2]) & object_bits(o) == 0 {
            return;
        }
        let mut n = 0;
        for i in 0..self.accesses.len() {
            if self.accesses[i].0 != o {
                self.accesses[n] = self.accesses[i];
                self.bits[n] = self.bits[i];
                n += 1;
            }
        }
        if n == self.accesses.len() {
            return;
        }
        self.accesses.truncate(n);
        self.bits.truncate(n);
        self.summarize();
    }

    /// Computes what is derived from the accesses and their bits, in one pass: `kinds`,
    /// `forced_kinds`, `awaits` and `removal`.
    fn summarize(&mut self) {
        let (mut kinds, mut forced_kinds, mut awaits) = ([0u64; 3], [0u64; 3], 0u64);
        for (&(o, k), &b) in self.accesses.iter().zip(&self.bits) {
            let x = kind_index(k);
            kinds[x] |= b;
            if forced(o) {
                forced_kinds[x] |= b;
            }
            if k == Kind::Await {
                awaits |= b;
            }
        }
        self.kinds = kinds;
        self.forced_kinds = forced_kinds;
        self.awaits = awaits;
        self.removal = self.finds_removal();
    }

    /// A quick over-approximation of each access's object as 64 bits, in the order of
    /// [`Footprint::accesses`]: two objects that overlap share a bit.
    pub fn bits(&self) -> &[u64] {
        &self.bits
    }

    /// The addresses its objects of memory and of strict-mode caches take, as one inclusive
    /// range `(lo, hi)` over them all (`lo > hi`: none): a memory range's bytes (an empty
    /// range its start), a line's object its address (such objects overlap only their own
    /// kind with the same address), and every address for a cache as a whole, the dirty
    /// words as a whole and [`Obj::All`]. Two footprints whose ranges do not meet conflict
    /// only through their other objects, which take the bits `BEYOND_MEMORY` and no other
    /// (`object_bits`): an over-approximation that tells apart the disjoint memory of a
    /// large dispatch's groups, which the bits cannot.
    pub fn address_span(&self) -> (u64, u64) {
        let mut span = (u64::MAX, 0);
        for &(o, _) in &self.accesses {
            let (lo, hi) = match o {
                Obj::Mem(s, e) | Obj::Writers(s, e) => (s, e.saturating_sub(1).max(s)),
                Obj::Line(_, l) | Obj::View(_, l) | Obj::Loaded(_, l) => (l, l),
                Obj::Cache(_) | Obj::Dirty(_) | Obj::All => return (0, u64::MAX),
                _ => continue,
            };
            span = (span.0.min(lo), span.1.max(hi));
        }
        span
    }

    /// Whether an access of kind `k` to memory meets the bytes `[start, end)` (as
    /// [`Obj::overlaps`] has it): a binary search, as [`Footprint::new`] keeps each kind's
    /// memory ranges sorted, apart and first among its objects.
    pub fn meets_memory(&self, k: Kind, start: u64, end: u64) -> bool {
        let from = self
            .accesses
            .partition_point(|&(o, kind)| (kind, o) < (k, Obj::Mem(0, 0)));
        let block = &self.accesses[from..];
        // The ranges of kind `k` that start before `end`: the last of them ends last.
        let n =
            block.partition_point(|&(o, kind)| kind == k && matches!(o, Obj::Mem(s, _) if s < end));
        n > 0 && matches!(block[n - 1], (Obj::Mem(_, e), _) if start < e)
    }

    /// Whether two actions with these footprints are dependent (they may not commute).
    pub fn conflicts(&self, other: &Footprint) -> bool {
        for (&(o1, k1), &b1) in self.accesses.iter().zip(&self.bits) {
            if b1 & other.against(k1) == 0 {
                continue;
            }
            for (&(o2, k2), &b2) in other.accesses.iter().zip(&other.bits) {
                if b1 & b2 != 0 && kinds_conflict(k1, k2) && objects_overlap(o1, o2) {
                    return true;
                }
            }
        }
        false
    }

    /// Whether an action with this footprint and a later one with `later`'s could run in the
    /// other order from the state before the first: they conflict, and no conflict between
    /// them orders them in every schedule (both on a [`forced`] object, or a read of the later
    /// one that waits for the first, [`Kind::Await`]; neither when one is a removal). A
    /// conflict that is not such a race is still a dependence (it orders the two), but no
    /// schedule reverses it.
    pub fn races(&self, later: &Footprint) -> bool {
        // A removal waits for nothing and nothing waits for it: what it reads of the plumbing
        // (the tickets a report names) orders nothing.
        let orders = !self.removal && !later.removal;
        // No pair of conflicting accesses can order them (none of forced objects on both
        // sides, no await of the later's meets an update or write of the earlier's): they
        // race exactly when they conflict.
        if !orders
            || (!kinds_may_conflict(self.forced_kinds, later.forced_kinds)
                && later.awaits & (self.kinds[1] | self.kinds[2]) == 0)
        {
            return self.conflicts(later);
        }
        let mut race = false;
        for (&(o1, k1), &b1) in self.accesses.iter().zip(&self.bits) {
            if b1 & later.against(k1) == 0 {
                continue;
            }
            for (&(o2, k2), &b2) in later.accesses.iter().zip(&later.bits) {
                if b1 & b2 != 0 && kinds_conflict(k1, k2) && objects_overlap(o1, o2) {
                    // One conflict that orders them in every schedule orders them: both touch
                    // the queue's plumbing, or the later awaits the earlier. Not an await of
                    // `All`, which stands for what the earlier touched, not for what the later
                    // waited for (a strict-mode wait for idle that passes writes every line
                    // back: another host's wait for idle released by the same retirement
                    // could have passed first).
                    if orders && ((forced(o1) && forced(o2)) || k2 == Kind::Await && o1 != Obj::All)
                    {
                        return false;
                    }
                    race = true;
                }
            }
        }
        race
    }
}

/// Of the bits of reads, updates and writes `kinds` ([`Footprint::kind_bits`]), those of the
/// kinds that conflict with `k`.
fn against(kinds: [u64; 3], k: Kind) -> u64 {
    let [r, u, w] = kinds;
    match k {
        Kind::Read | Kind::Await => u | w,
        Kind::Update => r | w,
        Kind::Write => r | u | w,
    }
}

/// Whether footprints with these [`Footprint::kind_bits`] may conflict (`false`: they
/// cannot): some kind's bits of one meet the other's bits of a kind that conflicts with it.
pub fn kinds_may_conflict(a: [u64; 3], b: [u64; 3]) -> bool {
    let [r, u, w] = a;
    (r & against(b, Kind::Read)) | (u & against(b, Kind::Update)) | (w & against(b, Kind::Write))
        != 0
}

/// The union of the bits of the reads (awaits included), the updates and the writes (what
/// [`Footprint::kind_bits`] keeps, worked out again for the tests).
#[cfg(test)]
fn kind_bits(accesses: &[Access], bits: &[u64]) -> [u64; 3] {
    let mut m = [0u64; 3];
    for (&(_, k), &b) in accesses.iter().zip(bits) {
        m[kind_index(k)] |= b;
    }
    m
}

/// A kind's index in [`Footprint::kind_bits`]: reads (awaits included), updates, writes.
fn kind_index(k: Kind) -> usize {
    match k {
        Kind::Read | Kind::Await => 0,
        Kind::Update => 1,
        Kind::Write => 2,
    }
}

pub(crate) fn kinds_conflict(a: Kind, b: Kind) -> bool {
    use Kind::{Await, Read, Update};
    !matches!((a, b), (Read | Await, Read | Await) | (Update, Update))
}

/// Whether every two conflicting accesses to `o` by different actors happen in one order in
/// every schedule, the later waiting for the earlier (the queue's own plumbing: a submission
/// is taken after it was made, a packet popped after it was pushed and its FIFO slot pushed
/// again after it was popped, a retirement after its push, groups after their launch, a flush
/// or a retirement after the dispatches it waits for, the PFP after a flush it is held by, an
/// `execute` taken after the work before it drained, a ticket read after it was set).
pub fn forced(o: Obj) -> bool {
    matches!(
        o,
        Obj::Sub(..)
            | Obj::Fifo(..)
            | Obj::FlushHold(_)
            | Obj::Busy(_)
            | Obj::RetireSlot(..)
            | Obj::Dispatch(..)
            | Obj::Dispatches(..)
            | Obj::Ticket(..)
    )
}

/// A quick over-approximation of an object as a set of 64 bits: two objects that overlap
/// ([`objects_overlap`]) always share a bit, so objects whose bits do not meet do not overlap.
/// Memory takes the low [`MEM_BITS`] bits, a 64-byte line's bit by its number modulo that (the
/// disjoint ranges of a dispatch's groups, side by side, share bits only that many lines
/// apart). Each of the first [`CACHE_QUEUES`] queues has [`CACHE_BITS_PER_QUEUE`] bits for its
/// strict-mode cache, a line's object one of them by the line's number (its cache and its
/// dirty words as a whole take them all), a bit for its dispatches and one for its busy state
/// (every group and every step of the queue touches them); the device (read by every action)
/// and the clock a bit each; every other object one of the bits left, by a hash.
pub(crate) fn object_bits(o: Obj) -> u64 {
    const MEM: u64 = (1 << MEM_BITS) - 1;
    const DISPATCH: u64 = MEM_BITS + CACHE_QUEUES * CACHE_BITS_PER_QUEUE;
    const BUSY: u64 = DISPATCH + CACHE_QUEUES;
    const HASHED: u64 = BUSY + CACHE_QUEUES;
    const OTHER: u64 = 62 - HASHED;
    let bit = |h: u64| {
        let x = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        1u64 << (HASHED + ((x * OTHER) >> 32))
    };
    let cache = |q: u32| MEM_BITS + u64::from(q) % CACHE_QUEUES * CACHE_BITS_PER_QUEUE;
    // Lines side by side, and a line's three objects, take different bits.
    let cached = |q: u32, line: u64, object: u64| {
        1u64 << (cache(q) + (line / 64 + object) % CACHE_BITS_PER_QUEUE)
    };
    match o {
        Obj::All => u64::MAX,
        Obj::Mem(s, e) | Obj::Writers(s, e) => {
            // An empty range overlaps nothing but `All`: one bit.
            let (a, b) = (s / 64, e.saturating_sub(1) / 64);
            let line = |l: u64| 1u64 << (l % MEM_BITS);
            if s >= e {
                line(a)
            } else if b - a >= MEM_BITS - 1 {
                MEM
            } else {
                (a..=b).fold(0, |m, l| m | line(l))
            }
        }
        Obj::Line(q, l) => cached(q, l, 0),
        Obj::View(q, l) => cached(q, l, 1),
        Obj::Loaded(q, l) => cached(q, l, 2),
        Obj::Cache(q) | Obj::Dirty(q) => ((1u64 << CACHE_BITS_PER_QUEUE) - 1) << cache(q),
        Obj::Fence(id) => bit(0x2000_0000_0000 ^ id),
        Obj::Pending(q, d, c) => {
            bit(0x2800_0000_0000 ^ (u64::from(q) << 32) ^ u64::from(d) ^ (u64::from(c) << 16))
        }
        Obj::Release(q, d, c) => {
            bit(0x2900_0000_0000 ^ (u64::from(q) << 32) ^ u64::from(d) ^ (u64::from(c) << 16))
        }
        Obj::Released(q) => bit(0x3000_0000_0000 | u64::from(q)),
        Obj::Sub(q, n) => bit(0x3100_0000_0000 ^ (u64::from(q) << 32) ^ n),
        Obj::Fifo(q, n) => bit(0x3200_0000_0000 ^ (u64::from(q) << 32) ^ n),
        Obj::FlushHold(q) => bit(0x3300_0000_0000 | u64::from(q)),
        Obj::Busy(q) => 1u64 << (BUSY + u64::from(q) % CACHE_QUEUES),
        Obj::RetireSlot(q, n) => bit(0x3500_0000_0000 ^ (u64::from(q) << 32) ^ n),
        Obj::Idle(q) => bit(0x3600_0000_0000 | u64::from(q)),
        Obj::Submit(q) => bit(0x3a00_0000_0000 | u64::from(q)),
        Obj::Settled => bit(0x3b00_0000_0000),
        Obj::Quiet(n) => bit(0x3e00_0000_0000 | u64::from(n)),
        Obj::Ticket(o, n) => bit(0x3700_0000_0000 ^ (u64::from(o) << 32) ^ n),
        Obj::FenceDown(f, _, _) => bit(0x3900_0000_0000 ^ f),
        Obj::FenceHeld(f, _, _) => bit(0x3c00_0000_0000 ^ f),
        Obj::FenceCross(f, _, _) => bit(0x3d00_0000_0000 ^ f),
        // One bit per queue for a dispatch and a range of them (they overlap).
        Obj::Dispatch(q, _) | Obj::Dispatches(q, _, _) => {
            1u64 << (DISPATCH + u64::from(q) % CACHE_QUEUES)
        }
        Obj::Clock => 1 << 62,
        Obj::Host(h) => bit(0x6000_0000_0000 | u64::from(h)),
        Obj::Device => 1 << 63,
    }
}

/// A second over-approximation of an object as 64 bits, drawn apart from [`object_bits`]'s:
/// two objects that overlap share a bit here too, and two that do not overlap seldom share
/// one in both. Memory's lines by their number divided by [`MEM_BITS`] (eight bits: with
/// [`object_bits`], lines less than 192 apart are told apart); a queue's cache lines by their
/// number divided by four (its cache and dirty words take all four bits); dispatches by
/// their number and busy states by their queue divided by [`CACHE_QUEUES`] (two bits each);
/// the clock and the device a bit each; four bits each, by the host's or queue's number, for
/// the objects every action of a host or a queue's submissions and retirements touch (a
/// host's own object, a queue's submission count, flush hold and idle state); and every other
/// object one of the 30 bits left, by another hash of what [`object_bits`] hashes.
pub(crate) fn object_bits_again(o: Obj) -> u64 {
    const MEM: u64 = 0;
    const CACHE: u64 = 8;
    const DISPATCH: u64 = 12;
    const BUSY: u64 = 14;
    const CLOCK: u64 = 16;
    const DEVICE: u64 = 17;
    const HOST: u64 = 18;
    const SUBMIT: u64 = 22;
    const FLUSH_HOLD: u64 = 26;
    const IDLE: u64 = 30;
    const HASHED: u64 = 34;
    // Blocks `lo..=hi` over `n` bits from `at`: all of them when the range spans `n`.
    let blocks = |at: u64, n: u64, lo: u64, hi: u64| {
        if hi - lo >= n - 1 {
            ((1u64 << n) - 1) << at
        } else {
            (lo..=hi).fold(0, |m, x| m | 1u64 << (at + x % n))
        }
    };
    let per = |at: u64, q: u32| 1u64 << (at + u64::from(q) % 4);
    match o {
        Obj::All => u64::MAX,
        Obj::Mem(s, e) | Obj::Writers(s, e) => {
            let (a, b) = (s / 64, e.saturating_sub(1) / 64);
            if s >= e {
                blocks(MEM, 8, a / MEM_BITS, a / MEM_BITS)
            } else {
                blocks(MEM, 8, a / MEM_BITS, b / MEM_BITS)
            }
        }
        Obj::Line(_, l) | Obj::View(_, l) | Obj::Loaded(_, l) => {
            blocks(CACHE, 4, l / 64 / 4, l / 64 / 4)
        }
        Obj::Cache(_) | Obj::Dirty(_) => 0xf << CACHE,
        Obj::Dispatch(_, d) => blocks(DISPATCH, 2, d, d),
        // An empty range overlaps no dispatch: any one bit.
        Obj::Dispatches(_, lo, hi) if lo >= hi => 1 << DISPATCH,
        Obj::Dispatches(_, lo, hi) => blocks(DISPATCH, 2, lo, hi - 1),
        Obj::Busy(q) => 1 << (BUSY + u64::from(q) / CACHE_QUEUES % 2),
        Obj::Clock => 1 << CLOCK,
        Obj::Device => 1 << DEVICE,
        Obj::Host(h) => per(HOST, h),
        Obj::Submit(q) => per(SUBMIT, q),
        Obj::FlushHold(q) => per(FLUSH_HOLD, q),
        Obj::Idle(q) => per(IDLE, q),
        _ => {
            // The finalizer of splitmix64: its bits do not follow those of `object_bits`'s
            // product (objects that share a bit there share one here by chance only).
            let mut z = hashed_key(o);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            1u64 << (HASHED + (((z >> 32) * (64 - HASHED)) >> 32))
        }
    }
}

/// What tells an object apart from the others, for the objects that [`object_bits_again`]
/// gives a bit by a hash: its variant and fields (a fence's value ranges overlap: the fence
/// alone). The same keys as [`object_bits`]'s arms; that function keeps its own copy
/// because calling this one from its match (a second match on the object) cost about 0.8%
/// of a proof's instructions (host-write-race, 188.1 k -> 189.6 k per schedule).
#[inline(always)]
fn hashed_key(o: Obj) -> u64 {
    match o {
        Obj::Fence(id) => 0x2000_0000_0000 ^ id,
        Obj::Pending(q, d, c) => {
            0x2800_0000_0000 ^ (u64::from(q) << 32) ^ u64::from(d) ^ (u64::from(c) << 16)
        }
        Obj::Release(q, d, c) => {
            0x2900_0000_0000 ^ (u64::from(q) << 32) ^ u64::from(d) ^ (u64::from(c) << 16)
        }
        Obj::Released(q) => 0x3000_0000_0000 | u64::from(q),
        Obj::Sub(q, n) => 0x3100_0000_0000 ^ (u64::from(q) << 32) ^ n,
        Obj::Fifo(q, n) => 0x3200_0000_0000 ^ (u64::from(q) << 32) ^ n,
        Obj::FlushHold(q) => 0x3300_0000_0000 | u64::from(q),
        Obj::RetireSlot(q, n) => 0x3500_0000_0000 ^ (u64::from(q) << 32) ^ n,
        Obj::Idle(q) => 0x3600_0000_0000 | u64::from(q),
        Obj::Submit(q) => 0x3a00_0000_0000 | u64::from(q),
        Obj::Settled => 0x3b00_0000_0000,
        Obj::Quiet(n) => 0x3e00_0000_0000 | u64::from(n),
        Obj::Ticket(o, n) => 0x3700_0000_0000 ^ (u64::from(o) << 32) ^ n,
        Obj::FenceDown(f, _, _) => 0x3900_0000_0000 ^ f,
        Obj::FenceHeld(f, _, _) => 0x3c00_0000_0000 ^ f,
        Obj::FenceCross(f, _, _) => 0x3d00_0000_0000 ^ f,
        Obj::Host(h) => 0x6000_0000_0000 | u64::from(h),
        _ => unreachable!("{o:?} has bits of its own"),
    }
}

/// Joins memory range `a` into `last` when they are of the same kind and meet (touch or
/// overlap); returns whether it did. [`Footprint::new`] joins the ranges of a sorted list so,
/// and [`record`] the ranges of a word loop as they come: the same joins, so the same
/// footprint.
fn join_ranges(last: &mut Access, a: Access) -> bool {
    match (last, a) {
        ((Obj::Mem(s0, e0), k0), (Obj::Mem(s1, e1), k1)) if *k0 == k1 && s1 <= *e0 && *s0 <= e1 => {
            *s0 = (*s0).min(s1);
            *e0 = (*e0).max(e1);
            true
        }
        _ => false,
    }
}

/// The bits of [`object_bits`] that memory takes.
const MEM_BITS: u64 = 24;

/// The bits of [`object_bits`] that objects other than memory and strict-mode caches take
/// (and [`Obj::All`], which takes every bit): those objects take no other bit, memory and the
/// caches none of these ([`Footprint::address_span`]).
pub(crate) const BEYOND_MEMORY: u64 =
    !((1 << (MEM_BITS + CACHE_QUEUES * CACHE_BITS_PER_QUEUE)) - 1);

/// Whether footprints with these [`Footprint::kind_bits`] and [`Footprint::address_span`]s
/// may conflict (`false`: they cannot): their spans meet, or their bits beyond memory may.
pub(crate) fn spans_may_conflict(a: ([u64; 3], (u64, u64)), b: ([u64; 3], (u64, u64))) -> bool {
    let ((ka, (lo_a, hi_a)), (kb, (lo_b, hi_b))) = (a, b);
    (lo_a <= hi_b && lo_b <= hi_a)
        || kinds_may_conflict(ka.map(|m| m & BEYOND_MEMORY), kb.map(|m| m & BEYOND_MEMORY))
}

/// The queues whose cache lines, dispatches and busy state have bits of their own in
/// [`object_bits`] (a queue past them shares those of its number modulo this).
const CACHE_QUEUES: u64 = 4;

/// The bits of [`object_bits`] a queue's strict-mode cache takes.
const CACHE_BITS_PER_QUEUE: u64 = 4;

impl Obj {
    /// Whether the two objects overlap (share memory, a cache line, or are the same).
    pub fn overlaps(self, other: Obj) -> bool {
        objects_overlap(self, other)
    }
}

fn objects_overlap(a: Obj, b: Obj) -> bool {
    match (a, b) {
        (Obj::All, _) | (_, Obj::All) => true,
        (Obj::Mem(s1, e1), Obj::Mem(s2, e2)) | (Obj::Writers(s1, e1), Obj::Writers(s2, e2)) => {
            s1 < e2 && s2 < e1
        }
        (Obj::Line(q1, _), Obj::Dirty(q2))
        | (Obj::Dirty(q1), Obj::Line(q2, _))
        | (Obj::Loaded(q1, _), Obj::Cache(q2))
        | (Obj::Cache(q1), Obj::Loaded(q2, _)) => q1 == q2,
        (Obj::Dispatch(q1, d), Obj::Dispatches(q2, lo, hi))
        | (Obj::Dispatches(q2, lo, hi), Obj::Dispatch(q1, d)) => q1 == q2 && lo <= d && d < hi,
        (Obj::Dispatches(q1, lo1, hi1), Obj::Dispatches(q2, lo2, hi2)) => {
            q1 == q2 && lo1 < hi2 && lo2 < hi1
        }
        (Obj::FenceDown(f1, lo1, hi1), Obj::FenceDown(f2, lo2, hi2))
        | (Obj::FenceHeld(f1, lo1, hi1), Obj::FenceHeld(f2, lo2, hi2))
        | (Obj::FenceCross(f1, lo1, hi1), Obj::FenceCross(f2, lo2, hi2)) => {
            f1 == f2 && lo1 <= hi2 && lo2 <= hi1
        }
        _ => a == b,
    }
}

thread_local! {
    /// Whether this thread records ([`start`] to [`stop`] or [`take_raw`]): a flag of its own,
    /// read first by every [`record`] and by the hot paths that skip what they would record
    /// ([`recording`]). Per thread, not a count in the process: the threads of a search on `-j N`
    /// record at once, and a shared word written at the start and end of every action of each
    /// would pass between their caches all the time.
    static ON: Cell<bool> = const { Cell::new(false) };
}

thread_local! {
    /// What this thread recorded since [`start`] (a buffer kept from one action to the next,
    /// so that recording allocates once per action, in [`take_raw`]).
    static REC: RefCell<Vec<Access>> = const { RefCell::new(Vec::new()) };
}

/// Starts recording on this thread (dropping whatever was recorded).
pub(crate) fn start() {
    ON.with(|on| on.set(true));
    REC.with(|r| r.borrow_mut().clear());
}

/// Whether this thread records footprints now (between a reducing run's actions it does;
/// after a run it must not: `stop`): also the quick test that lets a hot path skip
/// computing what it would record (what a thread that does not record would record goes
/// nowhere).
#[inline]
pub fn recording() -> bool {
    ON.with(Cell::get)
}

/// Stops recording on this thread, dropping what was recorded: a host that leaves a scripted
/// device leaves no recorder on (one left on would send every access the thread makes later,
/// on any device, down the recording path; [`recording`]).
pub(crate) fn stop() {
    ON.with(|on| on.set(false));
    REC.with(|r| r.borrow_mut().clear());
}

/// Stops recording on this thread; returns what was recorded since [`start`] (empty when it
/// was not recording), as a footprint (the tests' view of [`take_raw`]).
#[cfg(test)]
pub(crate) fn take() -> Footprint {
    Footprint::new(take_raw())
}

/// Room left in what [`take_raw`] returns for the accesses its caller adds.
const TAKE_ROOM: usize = 4;

/// Stops recording on this thread; returns what was recorded since [`start`] (empty when it
/// was not recording), in the order made, repeats and all (the caller adds more before it
/// makes a [`Footprint`], which orders and merges them once).
pub(crate) fn take_raw() -> Vec<Access> {
    if !ON.with(|on| on.replace(false)) {
        return Vec::new();
    }
    REC.with(|r| {
        let mut r = r.borrow_mut();
        let mut v = Vec::with_capacity(r.len() + TAKE_ROOM);
        v.extend_from_slice(&r);
        r.clear();
        v
    })
}

/// Records an access, when this thread records. The same access as the last one, or a memory
/// range of the same kind that meets the last one's (a loop over words), extends that one
/// instead: [`Footprint::new`] would merge them into the same footprint.
#[inline]
pub(crate) fn record(obj: Obj, kind: Kind) {
    if !recording() {
        return;
    }
    REC.with(|r| {
        let mut v = r.borrow_mut();
        let a = (obj, kind);
        if !v
            .last_mut()
            .is_some_and(|last| *last == a || join_ranges(last, a))
        {
            v.push(a);
        }
    });
}

/// Records a new last-writer record of the words `[start, end)` cover. The records are kept
/// per 4-byte word; the footprint stays at the 8-byte words that cover them (an
/// over-approximation, as it was when the records were kept per 8-byte word: two writes of
/// the halves of one 8-byte word stay dependent, and the searches that relied on that
/// dependence keep it).
#[inline]
pub(crate) fn record_writers(start: u64, end: u64) {
    if !recording() {
        return;
    }
    let s = start & !7;
    let e = end.max(start.saturating_add(1)).saturating_add(7) & !7;
    record(Obj::Writers(s, e), Kind::Write);
}

/// Records an access to `len` bytes of memory from `address`.
#[inline]
pub(crate) fn record_mem(address: u64, len: u64, kind: Kind) {
    if !recording() {
        return;
    }
    record(Obj::Mem(address, address.saturating_add(len.max(1))), kind);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(a: &[Access]) -> Footprint {
        Footprint::new(a.to_vec())
    }

    /// [`Footprint::races`] as its documentation defines it: a conflicting pair of accesses,
    /// and, unless one is a removal, no conflicting pair on forced objects on both sides nor
    /// one whose later side awaits (what the quick path of `races` must agree with).
    fn races_by_pairs(a: &Footprint, b: &Footprint) -> bool {
        let orders = !a.is_removal() && !b.is_removal();
        let mut race = false;
        for &(o1, k1) in a.accesses() {
            for &(o2, k2) in b.accesses() {
                if kinds_conflict(k1, k2) && objects_overlap(o1, o2) {
                    if orders && ((forced(o1) && forced(o2)) || k2 == Kind::Await && o1 != Obj::All)
                    {
                        return false;
                    }
                    race = true;
                }
            }
        }
        race
    }

    fn any_access() -> impl proptest::strategy::Strategy<Value = Access> {
        use proptest::prelude::*;
        let obj = prop_oneof![
            (0u64..4, 0u64..3).prop_map(|(s, n)| Obj::Mem(s * 8, s * 8 + n * 8)),
            (0u64..2).prop_map(Obj::Fence),
            (0u32..2).prop_map(Obj::Busy),
            (0u32..2, 0u64..3).prop_map(|(q, n)| Obj::Sub(q, n)),
            (0u32..2, 0u64..3).prop_map(|(q, n)| Obj::Fifo(q, n)),
            (0u32..2, 0u64..3).prop_map(|(q, d)| Obj::Dispatch(q, d)),
            (0u32..2, 0u64..2).prop_map(|(q, lo)| Obj::Dispatches(q, lo, lo + 2)),
            (0u32..2, 0u64..2).prop_map(|(o, n)| Obj::Ticket(o, n)),
            (0u32..2).prop_map(Obj::Idle),
            (0u32..2).prop_map(Obj::Released),
            (0u32..2, 0u64..2).prop_map(|(q, l)| Obj::Line(q, l * 64)),
            (0u32..2, 0u64..2).prop_map(|(q, l)| Obj::View(q, l * 64)),
            (0u32..2, 0u64..2).prop_map(|(q, l)| Obj::Loaded(q, l * 64)),
            (0u32..2).prop_map(Obj::Cache),
            (0u32..2).prop_map(Obj::Dirty),
            (0u64..4, 0u64..3).prop_map(|(s, n)| Obj::Writers(s * 8, s * 8 + n * 8)),
            (0u64..2, 0u64..3).prop_map(|(f, lo)| Obj::FenceHeld(f, lo, lo + 1)),
            (0u64..2, 0u64..3).prop_map(|(f, lo)| Obj::FenceCross(f, lo, lo + 1)),
            Just(Obj::Device),
            Just(Obj::Clock),
            Just(Obj::All),
        ];
        let kind = prop_oneof![
            Just(Kind::Read),
            Just(Kind::Update),
            Just(Kind::Write),
            Just(Kind::Await),
        ];
        (obj, kind)
    }

    proptest::proptest! {
        /// The quick path of `races` (no forced conflict and no await possible by the bits:
        /// a race exactly when they conflict) agrees with the pairwise definition, on
        /// footprints mixing forced objects, awaits, removals and memory ranges.
        #[test]
        fn races_agrees_with_its_pairwise_definition(
            a in proptest::collection::vec(any_access(), 0..7),
            b in proptest::collection::vec(any_access(), 0..7),
        ) {
            let (a, b) = (fp(&a), fp(&b));
            proptest::prop_assert_eq!(a.races(&b), races_by_pairs(&a, &b));
            proptest::prop_assert_eq!(b.races(&a), races_by_pairs(&b, &a));
        }

        /// `meets_memory` (a binary search) finds what a scan of the accesses finds.
        #[test]
        fn meets_memory_agrees_with_a_scan(
            a in proptest::collection::vec(any_access(), 0..9),
            start in 0u64..40,
            len in 0u64..20,
        ) {
            let a = fp(&a);
            let mem = Obj::Mem(start, start + len);
            for k in [Kind::Read, Kind::Update, Kind::Write, Kind::Await] {
                let scan = a.accesses().iter().any(|&(o, kind)| {
                    kind == k && matches!(o, Obj::Mem(..)) && o.overlaps(mem)
                });
                proptest::prop_assert_eq!(a.meets_memory(k, start, start + len), scan, "{:?}", k);
            }
        }

        /// Footprints that conflict have address spans that meet or bits beyond memory that
        /// may conflict (the third quick test of the exploration's history).
        #[test]
        fn footprints_that_conflict_pass_the_span_test(
            a in proptest::collection::vec(any_access(), 0..7),
            b in proptest::collection::vec(any_access(), 0..7),
        ) {
            let (a, b) = (fp(&a), fp(&b));
            let (sa, sb) = ((a.kind_bits(), a.address_span()), (b.kind_bits(), b.address_span()));
            if a.conflicts(&b) {
                proptest::prop_assert!(spans_may_conflict(sa, sb));
                proptest::prop_assert!(spans_may_conflict(sb, sa));
            }
        }
    }

    /// An await of the queue's completions does not order a later action after an earlier
    /// write of `All` (a strict-mode wait for idle's write-back of every line): the two race.
    #[test]
    fn an_await_of_all_orders_nothing() {
        let pass = fp(&[(Obj::All, Kind::Write), (Obj::Idle(0), Kind::Await)]);
        let other = fp(&[(Obj::Idle(0), Kind::Await), (Obj::Host(1), Kind::Write)]);
        assert!(pass.races(&other));
        let retire = fp(&[(Obj::Idle(0), Kind::Update)]);
        assert!(!retire.races(&other));
    }

    /// `has` (a binary search) finds what a scan finds, after duplicates are dropped and
    /// memory ranges merged, and after an object is removed; `kind_bits` follows.
    #[test]
    fn has_finds_every_access_of_the_sorted_footprint_and_no_other() {
        let raw = vec![
            (Obj::Mem(8, 16), Kind::Write),
            (Obj::Device, Kind::Read),
            (Obj::Clock, Kind::Update),
            (Obj::Mem(0, 8), Kind::Write),
            (Obj::Mem(64, 72), Kind::Read),
            (Obj::Idle(1), Kind::Await),
            (Obj::Settled, Kind::Read),
            (Obj::All, Kind::Read),
            (Obj::Device, Kind::Read),
            (Obj::Fence(3), Kind::Write),
            (Obj::Line(0, 64), Kind::Write),
            (Obj::Mem(16, 24), Kind::Write),
        ];
        let mut f = fp(&raw);
        let probes = [
            (Obj::Mem(0, 24), Kind::Write),
            (Obj::Mem(0, 8), Kind::Write),
            (Obj::Mem(64, 72), Kind::Read),
            (Obj::Mem(64, 72), Kind::Write),
            (Obj::Device, Kind::Read),
            (Obj::Device, Kind::Write),
            (Obj::Clock, Kind::Update),
            (Obj::Clock, Kind::Write),
            (Obj::Idle(1), Kind::Await),
            (Obj::Idle(2), Kind::Await),
            (Obj::Settled, Kind::Read),
            (Obj::All, Kind::Read),
            (Obj::All, Kind::Write),
            (Obj::Fence(3), Kind::Write),
            (Obj::Line(0, 64), Kind::Write),
        ];
        for step in 0..2 {
            for p in probes {
                assert_eq!(f.has(p), f.accesses().contains(&p), "{p:?}, step {step}");
            }
            assert!(f.has((Obj::Mem(0, 24), Kind::Write)) || step == 1);
            assert_eq!(f.kind_bits(), kind_bits(f.accesses(), f.bits()));
            f.remove_object(Obj::Clock);
            assert!(!f.has((Obj::Clock, Kind::Update)));
        }
    }

    #[test]
    fn reads_and_updates_commute_among_themselves_only() {
        let r = fp(&[(Obj::Mem(0, 4), Kind::Read)]);
        let u = fp(&[(Obj::Mem(0, 4), Kind::Update)]);
        let w = fp(&[(Obj::Mem(2, 6), Kind::Write)]);
        let far = fp(&[(Obj::Mem(4, 8), Kind::Write)]);
        assert!(!r.conflicts(&r) && !u.conflicts(&u));
        assert!(r.conflicts(&u) && r.conflicts(&w) && u.conflicts(&w));
        assert!(!r.conflicts(&far) && far.conflicts(&w));
        let line = fp(&[(Obj::Line(1, 64), Kind::Write)]);
        assert!(!line.conflicts(&fp(&[(Obj::Cache(1), Kind::Write)])));
        assert!(!line.conflicts(&fp(&[(Obj::Line(1, 128), Kind::Write)])));
        assert!(!line.conflicts(&fp(&[(Obj::Cache(2), Kind::Write)])));
        assert!(line.conflicts(&fp(&[(Obj::Dirty(1), Kind::Write)])));
        assert!(
            !fp(&[(Obj::Dirty(1), Kind::Write)]).conflicts(&fp(&[(Obj::Cache(1), Kind::Write)]))
        );
        assert!(fp(&[(Obj::All, Kind::Read)]).conflicts(&line));
        // A task's view of a line: not the line's dirty state (its write-back), nor the read
        // cache's invalidation, which only what a read loads meets.
        let view = fp(&[(Obj::View(1, 64), Kind::Read)]);
        assert!(!view.conflicts(&line) && !view.conflicts(&fp(&[(Obj::Dirty(1), Kind::Write)])));
        assert!(!view.conflicts(&fp(&[(Obj::Cache(1), Kind::Write)])));
        let loaded = fp(&[(Obj::Loaded(1, 64), Kind::Read)]);
        assert!(loaded.conflicts(&fp(&[(Obj::Cache(1), Kind::Write)])));
        assert!(!loaded.conflicts(&fp(&[(Obj::Cache(2), Kind::Write)])));
        assert!(!loaded.conflicts(&loaded) && !loaded.conflicts(&line));
        assert!(view.conflicts(&fp(&[(Obj::View(1, 64), Kind::Write)])));
        assert!(!view.conflicts(&fp(&[(Obj::View(1, 128), Kind::Write)])));
        // Groups of a dispatch commute; a read of whether dispatches finished conflicts with
        // the groups of those in its range only.
        let group = fp(&[(Obj::Dispatch(1, 3), Kind::Update)]);
        assert!(!group.conflicts(&group));
        assert!(group.conflicts(&fp(&[(Obj::Dispatches(1, 0, 4), Kind::Read)])));
        assert!(!group.conflicts(&fp(&[(Obj::Dispatches(1, 0, 3), Kind::Read)])));
        assert!(!group.conflicts(&fp(&[(Obj::Dispatches(2, 0, 4), Kind::Read)])));
        assert!(group.conflicts(&fp(&[(Obj::Dispatch(1, 3), Kind::Write)])));
        // The queue's plumbing orders its accesses: a conflict, never a race.
        let read = fp(&[(Obj::Dispatches(1, 0, 4), Kind::Read)]);
        assert!(group.conflicts(&read) && !group.races(&read));
        // A wait that passes after a write conflicts with it and does not race it.
        let idle = |k| fp(&[(Obj::Idle(1), k)]);
        assert!(idle(Kind::Update).conflicts(&idle(Kind::Await)));
        assert!(!idle(Kind::Update).races(&idle(Kind::Await)));
        assert!(idle(Kind::Update).races(&idle(Kind::Read)));
        assert!(!idle(Kind::Await).conflicts(&idle(Kind::Read)));
        assert!(w.races(&r) && r.races(&w));
    }

    #[test]
    fn objects_that_overlap_share_a_bit_in_both_layouts_and_removing_one_keeps_the_rest() {
        let mut objs = vec![
            Obj::All,
            Obj::Clock,
            Obj::Device,
            Obj::Host(0),
            Obj::Host(1),
            Obj::Host(5),
            Obj::Settled,
            Obj::Quiet(0),
            Obj::Quiet(3),
        ];
        for (s, e) in [
            (0, 4),
            (4, 8),
            (60, 68),
            (0, 4096),
            (0, 1088),
            (64, 64),
            (128, 192),
            (1536, 1600),
            (1000, 13000),
            (12288, 12289),
        ] {
            objs.extend([Obj::Mem(s, e), Obj::Writers(s, e)]);
        }
        // Queues past `CACHE_QUEUES` share the bits of the first ones.
        for q in [0, 1, 2, 4, 6u32] {
            for line in [0, 64, 128, 192, 256, 1 << 32] {
                objs.extend([Obj::Line(q, line), Obj::View(q, line), Obj::Loaded(q, line)]);
            }
            objs.extend([
                Obj::Pending(q, 1, 0),
                Obj::Release(q, 1, 0),
                Obj::Cache(q),
                Obj::Dirty(q),
                Obj::Dispatch(q, 2),
                Obj::Dispatches(q, 0, 3),
                Obj::Dispatches(q, 3, 5),
                Obj::Dispatches(q, 4, 4),
                Obj::Dispatches(q, 0, 40),
                Obj::Dispatch(q, 9),
                Obj::Busy(q),
                Obj::FlushHold(q),
                Obj::RetireSlot(q, 2),
                Obj::Submit(q),
                Obj::Released(q),
                Obj::Sub(q, 1),
                Obj::Fifo(q, 7),
                Obj::Ticket(q, 1),
                Obj::Idle(q),
            ]);
        }
        objs.extend([
            Obj::Fence(1),
            Obj::FenceDown(1, 2, 4),
            Obj::FenceDown(1, 4, 9),
            Obj::FenceHeld(1, 0, 3),
            Obj::FenceHeld(1, 3, 3),
            Obj::FenceCross(1, 4, 9),
            Obj::FenceCross(1, 2, 2),
        ]);
        let mut overlapping = 0;
        for &a in &objs {
            // Memory and the strict-mode caches take the bits below `BEYOND_MEMORY`, every
            // other object (but `All`) bits of it.
            let memory = fp(&[(a, Kind::Read)]).address_span() != (u64::MAX, 0);
            let beyond = object_bits(a) & BEYOND_MEMORY;
            assert!(
                a == Obj::All || (beyond == 0) == memory && (beyond == object_bits(a)) != memory,
                "{a:?}"
            );
            for &b in &objs {
                if objects_overlap(a, b) {
                    overlapping += 1;
                    assert_ne!(object_bits(a) & object_bits(b), 0, "{a:?} and {b:?}");
                    assert_ne!(
                        object_bits_again(a) & object_bits_again(b),
                        0,
                        "{a:?} and {b:?} (second layout)"
                    );
                }
            }
        }
        assert!(
            overlapping > objs.len(),
            "the cases include overlaps of different objects"
        );
        // What keeps the test quick: a queue's lines side by side, a line's three objects, and
        // a queue's dispatches and busy state, take bits apart.
        let apart = |a: Obj, b: Obj| object_bits(a) & object_bits(b) == 0;
        assert!(apart(Obj::Line(0, 0), Obj::Line(0, 64)));
        assert!(apart(Obj::Line(0, 0), Obj::View(0, 0)));
        assert!(apart(Obj::View(0, 0), Obj::Loaded(0, 0)));
        assert!(apart(Obj::Line(0, 0), Obj::Line(1, 0)));
        assert!(apart(Obj::Dispatch(0, 0), Obj::Busy(0)));
        assert!(apart(Obj::Dispatch(0, 0), Obj::Dispatch(1, 0)));
        assert!(apart(Obj::Mem(0, 64), Obj::Mem(64, 128)));
        // The second layout tells apart what the first cannot: lines `MEM_BITS` apart, queues
        // `CACHE_QUEUES` apart, a queue's dispatches, hosts and queues of the hashed objects
        // that every action of theirs touches.
        let again_apart = |a: Obj, b: Obj| object_bits_again(a) & object_bits_again(b) == 0;
        let far = MEM_BITS * 64;
        assert!(!apart(Obj::Mem(0, 64), Obj::Mem(far, far + 64)));
        assert!(again_apart(Obj::Mem(0, 64), Obj::Mem(far, far + 64)));
        assert!(again_apart(Obj::Busy(0), Obj::Busy(4)));
        assert!(again_apart(Obj::Dispatch(0, 0), Obj::Dispatch(0, 1)));
        assert!(again_apart(Obj::Host(0), Obj::Host(1)));
        assert!(again_apart(Obj::Submit(0), Obj::FlushHold(0)));
        assert!(again_apart(Obj::Idle(0), Obj::Idle(1)));
        let mut f = fp(&[
            (Obj::Clock, Kind::Read),
            (Obj::Mem(0, 4), Kind::Write),
            (Obj::Clock, Kind::Update),
            (Obj::Fence(1), Kind::Read),
        ]);
        f.remove_object(Obj::Clock);
        assert_eq!(
            f,
            fp(&[(Obj::Mem(0, 4), Kind::Write), (Obj::Fence(1), Kind::Read)])
        );
    }

    #[test]
    fn word_ranges_merge() {
        let f = fp(&[
            (Obj::Mem(8, 12), Kind::Write),
            (Obj::Mem(0, 4), Kind::Write),
            (Obj::Mem(4, 8), Kind::Write),
            (Obj::Mem(4, 8), Kind::Read),
        ]);
        assert_eq!(
            f.accesses(),
            &[(Obj::Mem(4, 8), Kind::Read), (Obj::Mem(0, 12), Kind::Write)]
        );
    }

    #[test]
    fn the_recorder_is_per_thread_and_off_by_default() {
        record(Obj::Clock, Kind::Read);
        assert!(take().accesses().is_empty());
        start();
        record(Obj::Clock, Kind::Read);
        std::thread::spawn(|| record(Obj::Device, Kind::Write))
            .join()
            .unwrap();
        assert_eq!(take().accesses(), &[(Obj::Clock, Kind::Read)]);
        assert!(take().accesses().is_empty());
    }
}
