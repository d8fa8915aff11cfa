//! Exhaustive exploration with partial-order reduction: source-DPOR with sleep sets (Abdulla,
//! Aronis, Jonsson, Sagonas, POPL 2014), stateless, over the dependence relation of
//! `footprint.rs` (`docs/exploration.md`, "The dependence relation").
//!
//! Each run records its actions (who performed each, at which scheduling point, and what it
//! touched). Two actions are dependent when their footprints conflict; happens-before is the
//! transitive closure of each actor's own order and the order of dependent actions. For every
//! race of a run (two dependent actions of different actors, not ordered by anything between
//! them) the search makes sure that some schedule reverses it: at the scheduling point before
//! the first action it adds, unless one is there already, an *initial* of what follows (an
//! actor whose next action there does not depend on the first one's or anything after it).
//! Sleep sets keep a sibling already explored from being explored again after actions
//! independent of it; a run whose every enabled actor is asleep stops (it is equivalent to one
//! already explored). Choices within an action (which line is written back, whether a read is
//! stale, which groups of a very large dispatch complete) are all explored.
//!
//! Virtual time: an action that moves the clock commutes with others that move it (the clock
//! becomes the later time either way) and conflicts with reading it. The clock is read by
//! every action that asks for the time, but only timestamps make the time part of an outcome:
//! until a run writes one, reads of the clock are left out of the relation; once one does, the
//! search starts again with them in.

use super::exhaustive::{
    assert_replayed, branch_prefix, replayed, Bound, Enumeration, ExhaustiveOptions, Root, Run,
};
use crate::choice::{sleep_footprint, ActorKey, Actors, ChoicePoint, Event, Script};
use crate::footprint::{Footprint, Kind, Obj};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;

/// A sequence of steps that reverses a race: each step's actor, with what the step touched in
/// the run it was found in ([`Reversal`]).
type Steps = Arc<[(ActorKey, Footprint)]>;

/// Sequences of steps kept for a branch, in the order they came, each once.
#[derive(Debug, Default)]
pub(super) struct Sequences {
    list: Vec<Steps>,
    hashes: HashSet<u64>,
}

impl Sequences {
    fn add(&mut self, seq: Vec<(ActorKey, Footprint)>) {
        let h = std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(&seq);
        if self.hashes.insert(h) || !self.list.iter().any(|x| **x == *seq) {
            self.list.push(seq.into());
        }
    }
}

/// A node's set of alternatives, in ascending order (a sorted list: a node has few, kept
/// inline up to six).
#[derive(Debug, Clone, Default)]
struct Alts(smallvec::SmallVec<[u32; 6]>);

impl Alts {
    fn insert(&mut self, a: u32) -> bool {
        match self.0.binary_search(&a) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, a);
                true
            }
        }
    }

    fn contains(&self, a: &u32) -> bool {
        self.0.binary_search(a).is_ok()
    }

    fn iter(&self) -> std::slice::Iter<'_, u32> {
        self.0.iter()
    }
}

impl FromIterator<u32> for Alts {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut v: smallvec::SmallVec<[u32; 6]> = iter.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        Alts(v)
    }
}

impl Extend<u32> for Alts {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, iter: I) {
        for a in iter {
            self.insert(a);
        }
    }
}

#[derive(Debug)]
struct Node {
    point: ChoicePoint,
    /// Alternatives to explore here (at a choice within an action, every one: not listed,
    /// [`Node::next`]).
    backtrack: Alts,
    /// Alternatives explored here, or found disabled.
    done: Alts,
    /// The explored alternatives' actors with the footprint of their action here: asleep in
    /// the siblings explored after them.
    slept: Vec<(ActorKey, Footprint)>,
    /// For alternatives not explored yet that stand for races found after they were added
    /// (source-DPOR adds one initial per race, and none when one is there): per race, the
    /// rest of its reversing sequence after the alternative's step ([`Reversal`]). The
    /// branch's first run plants each where it leaves it ([`plant`]).
    wakeup: HashMap<u32, Sequences>,
    /// What a preemption-bounded search keeps of it (`None` in any other search: a node of
    /// the reduced search stays as small as it was).
    bounded: Option<Box<BoundedNode>>,
}

/// What a preemption-bounded search ([`search`] with `opts.preemption_bound`) keeps of a node.
#[derive(Debug, Default)]
struct BoundedNode {
    /// Preemptions of the path before this point.
    before: u32,
    /// Explored actors that sleep only in the siblings of the same actor of the plain
    /// listing ([`sleeps_within_bound`]).
    slept_alike: Vec<(ActorKey, Footprint)>,
    /// Alternatives added where an actor started its run of actions ([`conservative`]):
    /// explored even when their actor sleeps here, and their actor put to sleep in no
    /// sibling.
    forced: Alts,
}

impl Node {
    fn new(point: ChoicePoint) -> Self {
        let mut done: Alts = point.disabled.iter().copied().collect();
        done.extend(point.taken);
        // A choice within an action explores every alternative: they are not listed (a
        // dispatch of billions of groups chooses among billions), `Node::next` finds them.
        let backtrack = point.taken.into_iter().collect();
        Node {
            point,
            backtrack,
            done,
            slept: Vec::new(),
            wakeup: HashMap::new(),
            bounded: None,
        }
    }

    /// Preemptions of the path before this point (a preemption-bounded search's; 0 in
    /// another).
    fn before(&self) -> u32 {
        self.bounded.as_ref().map_or(0, |b| b.before)
    }

    /// Preemptions of the path up to and including this point's taken alternative.
    fn through(&self) -> u32 {
        self.before() + u32::from(self.point.taken.is_some_and(|t| self.point.preempts(t)))
    }

    /// Whether a preemption-bounded search forced alternative `alt` here ([`conservative`]).
    fn forced(&self, alt: u32) -> bool {
        self.bounded
            .as_ref()
            .is_some_and(|b| b.forced.contains(&alt))
    }

    fn actor_of(&self, alt: u32) -> Option<ActorKey> {
        self.point.actors.get(alt as usize)
    }

    fn asleep(&self, actor: ActorKey) -> bool {
        self.point.sleep.iter().any(|(k, _)| *k == actor)
    }

    /// The actor of the alternative taken here.
    fn taken_actor(&self) -> Option<ActorKey> {
        self.point.taken.and_then(|t| self.actor_of(t))
    }

    /// The alternative of actor `a` here, unless found disabled.
    fn enabled(&self, a: ActorKey) -> Option<u32> {
        (0..self.point.actors.len() as u32)
            .find(|&alt| self.actor_of(alt) == Some(a) && !self.point.disabled.contains(&alt))
    }

    /// `a`, or for a dispatch whose groups are alternatives here one by one (it ran alone in
    /// one step in the run whose race names it, `driver/deterministic/scripted.rs`), its first
    /// group here not found disabled: its groups commute, and any of them starts what that one
    /// step did. For a group of a dispatch listed here as one actor (more than 4,096 groups
    /// left: which groups complete is a choice within its action, every alternative of which
    /// is explored, `MAX_LISTED_GROUPS`), that dispatch. For the step of a dispatch's groups
    /// beside actors asleep ([`ActorKey::Groups`]), as for its step alone: no reversal
    /// starts with that step (the run takes it only where everything else listed sleeps).
    fn stand_in(&self, a: ActorKey) -> ActorKey {
        let own = matches!(a, ActorKey::Groups(..));
        if !a.of_dispatch() || (!own && self.point.actors.contains(&a)) {
            return a;
        }
        (0..self.point.actors.len() as u32)
            .filter(|alt| !self.point.disabled.contains(alt))
            .filter_map(|alt| self.actor_of(alt))
            .find(|&g| stands_for(g, a))
            .unwrap_or(a)
    }

    /// The next alternative to explore here: the first of the backtrack set still pending
    /// at a scheduling point; at a choice within an action, the least not explored.
    fn next(&self) -> Option<u32> {
        if self.point.scheduling {
            return self
                .backtrack
                .iter()
                .copied()
                .find(|&alt| self.pending(alt));
        }
        // `done` is sorted: the first gap in it.
        let mut next = 0u32;
        for &d in self.done.iter() {
            if d != next {
                break;
            }
            next += 1;
        }
        (next < self.point.alternatives).then_some(next)
    }

    /// Adds `rest` to the sequences of alternative `alt` (not explored yet) to plant.
    fn wake(&mut self, alt: u32, rest: Vec<(ActorKey, Footprint)>) {
        if rest.is_empty() {
            return;
        }
        self.wakeup.entry(alt).or_default().add(rest);
    }

    /// The spec of the branch to alternative `alt` here, from the run whose tries are
    /// `tries` ([`branch_spec`]).
    fn branch(&self, tries: &[u32], alt: u32) -> Spec {
        let wakeup = self.wakeup.get(&alt);
        let alike;
        let alike_slept = self.bounded.as_ref().map(|b| &b.slept_alike);
        let slept = if alike_slept.is_none_or(|a| a.is_empty()) {
            &self.slept
        } else {
            let a = self.actor_of(alt);
            alike = self
                .slept
                .iter()
                .chain(
                    alike_slept
                        .into_iter()
                        .flatten()
                        .filter(|(k, _)| a.is_some_and(|a| a.same_plain_actor(*k))),
                )
                .cloned()
                .collect::<Vec<_>>();
            &alike
        };
        branch_spec(tries, &self.point, &self.point.sleep, slept, alt, wakeup)
    }

    /// Whether alternative `alt` is still to explore here: not explored, and not of an actor
    /// asleep here.
    fn pending(&self, alt: u32) -> bool {
        let asleep = self.point.scheduling
            && self.actor_of(alt).is_some_and(|a| self.asleep(a))
            && !self.forced(alt);
        !self.done.contains(&alt) && !asleep
    }
}

/// A change to a node of the search, made by the processing of a run. A search that explores
/// a subtree ahead of time (`explore/speculate.rs`) keeps the changes to the nodes above its
/// subtree for the search that owns them, which makes them when it takes the subtree: they
/// read only the owner's state of those nodes, and the subtree reads nothing the changes write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Op {
    /// The first run of alternative `alt` at node `d`: its choice point there, or `None` when
    /// it found `alt` disabled (a repeat).
    Enter {
        d: usize,
        alt: u32,
        point: Option<Box<ChoicePoint>>,
    },
    /// A race to reverse at node `at`, started by one of `initials` (source-DPOR's rule);
    /// `sequence`: the steps that reverse it, where a branch can lose the race (else empty;
    /// [`Reversal`]).
    Race {
        at: usize,
        initials: Arc<[ActorKey]>,
        sequence: Steps,
    },
    /// An actor to run at `at` before what disabled it ([`add_disabled`]).
    Disabled {
        at: usize,
        alt: u32,
        actor: ActorKey,
    },
    /// A line's early write-back to explore at `at` ([`split_writeback`]).
    Split { at: usize, actor: ActorKey },
    /// The rest of a race's reversing sequence, from node `at` on, where the first run of
    /// the branch that stood for it left it ([`plant`]): its first actor is explored there,
    /// and the branch's first run plants the rest (a new branch of a wakeup tree, as optimal
    /// DPOR grows them).
    Plant { at: usize, sequence: Steps },
}

impl Op {
    fn at(&self) -> usize {
        match self {
            Op::Enter { d, .. } => *d,
            Op::Race { at, .. }
            | Op::Disabled { at, .. }
            | Op::Split { at, .. }
            | Op::Plant { at, .. } => *at,
        }
    }

    fn apply(self, path: &mut [Node]) {
        match self {
            Op::Enter { d, alt, point } => {
                let n = &mut path[d];
                n.done.insert(alt);
                match point {
                    None => n.point.disabled.push(alt),
                    Some(p) => {
                        let sleep = std::mem::take(&mut n.point.sleep);
                        n.point = *p;
                        n.point.sleep = sleep;
                        n.backtrack.insert(alt);
                    }
                }
            }
            Op::Race {
                at,
                initials,
                sequence,
            } => {
                let node = &mut path[at];
                let initials: std::borrow::Cow<'_, [ActorKey]> =
                    if initials.iter().any(|a| a.of_dispatch()) {
                        initials.iter().map(|&a| node.stand_in(a)).collect()
                    } else {
                        (&*initials).into()
                    };
                let present = |node: &Node, a: ActorKey| {
                    node.backtrack
                        .iter()
                        .chain(node.done.iter())
                        .copied()
                        .find(|&alt| node.actor_of(alt) == Some(a))
                };
                if let Some((a, alt)) = initials
                    .iter()
                    .find_map(|&a| present(node, a).map(|alt| (a, alt)))
                {
                    // An initial is there already. Not explored yet: its first run plants
                    // the rest of this race's sequence where it leaves it.
                    if !node.done.contains(&alt) {
                        node.wake(alt, rest_of(&sequence, a));
                    }
                    return;
                }
                // A line's write-back or a dispatch group asleep here that could start the
                // reversal: every schedule from here that it starts was explored from the
                // sibling that put it to sleep (what a sleep set stands for), the reversal
                // among them, so the race is left alone (optimal DPOR's test of a reversing
                // sequence against the sleep set). Another initial's branch mostly ended
                // asleep once only the asleep actors were left: `missing-writeback.kdl
                // --strict` stopped 22,400 runs asleep beside its first 20,000 schedules, now
                // none. Only for those two, whose actions touch what the action fixes (the
                // line, the group's ranges): a host's, a retirement's, a PFP's or an ME's
                // action takes its shape from the state it meets (a CPU signal that lowers
                // the fence or leaves it as it is, a signal that crosses a target or keeps it
                // reached, a run-ahead's extent), and where such actions are about, the
                // argument is not shown to hold: with hosts' asleep initials too, the search
                // lost outcomes (`d4_regression_strict_an_asleep_initial_does_not_cover_a_race`).
                if initials.iter().any(|&a| {
                    node.asleep(a) && matches!(a, ActorKey::Writeback(..) | ActorKey::Group(..))
                }) {
                    return;
                }
                // A race with a reversing sequence starts with the sequence's first actor
                // where it can, and its branch's first run plants the rest where it leaves
                // it ([`plant`]).
                let leader = sequence
                    .first()
                    .map(|&(a, _)| a)
                    .filter(|&a| initials.contains(&a) && !node.asleep(a));
                if let Some((a, alt)) = leader.and_then(|a| Some((a, node.enabled(a)?))) {
                    node.backtrack.insert(alt);
                    node.wake(alt, rest_of(&sequence, a));
                    return;
                }
                if let Some(alt) = initials
                    .iter()
                    .filter(|&&a| !node.asleep(a))
                    .find_map(|&a| node.enabled(a))
                {
                    node.backtrack.insert(alt);
                } else if !initials.iter().any(|&a| node.asleep(a)) {
                    // No initial can run here: explore everything here (each group of a
                    // dispatch, not also the step of them all, nor its groups where that
                    // step ran: `ChoicePoint::beside_step`).
                    for alt in 0..node.point.alternatives {
                        if !node.point.beside_step(alt) {
                            node.backtrack.insert(alt);
                        }
                    }
                }
            }
            Op::Disabled { at, alt, actor } => {
                let n = &mut path[at];
                if !n.asleep(actor) && !n.done.contains(&alt) {
                    n.backtrack.insert(alt);
                }
            }
            Op::Plant { at, sequence } => {
                let node = &mut path[at];
                let Some(&(a, _)) = sequence.first() else {
                    return;
                };
                let a = node.stand_in(a);
                // An actor asleep here was explored in a sibling (with what follows), and one
                // that cannot run here leaves the sequence unfollowable.
                let Some(alt) = node.enabled(a).filter(|_| !node.asleep(a)) else {
                    return;
                };
                if node.done.contains(&alt) {
                    return;
                }
                node.backtrack.insert(alt);
                node.wake(alt, sequence[1..].to_vec());
            }
            Op::Split { at, actor } => {
                let node = &mut path[at];
                if node.asleep(actor) {
                    return;
                }
                let Some(alt) = node.enabled(actor) else {
                    return;
                };
                if node.done.contains(&alt) || node.backtrack.contains(&alt) {
                    return;
                }
                node.backtrack.insert(alt);
            }
        }
    }
}

/// Where a search's changes to its nodes go: made at once, or, for the nodes at or above
/// `boundary` (the point a subtree explored ahead branches at), kept for the owner.
#[derive(Debug, Default)]
struct Sink {
    boundary: Option<usize>,
    kept: Vec<Op>,
    /// The kept races, disabled actors and write-backs by hash (indices into `kept`): every
    /// run of a subtree finds the same ones above it again, and a change made twice is made
    /// once (the nodes above only gain alternatives while the subtree runs, so the second
    /// finds the first done).
    seen: HashMap<u64, Vec<usize>>,
    hasher: std::hash::RandomState,
    lists: HashSet<Arc<[ActorKey]>>,
    /// How much the kept changes hold (one per change and per initial of a race).
    weight: std::rc::Rc<std::cell::Cell<usize>>,
    /// A preemption-bounded search: each alternative added at a point is added at the start
    /// of the actor's run of actions there too ([`conservative`]).
    conservative: bool,
}

impl Sink {
    fn put(&mut self, op: Op, path: &mut [Node]) {
        if self.boundary.is_none_or(|b| op.at() > b) {
            // A preemption-bounded search adds the op's actors where the run's actor there
            // started its run of actions too.
            let also = self.conservative.then(|| {
                let actors: Vec<ActorKey> = match &op {
                    Op::Enter { .. } => Vec::new(),
                    Op::Race { initials, .. } => initials.to_vec(),
                    Op::Disabled { actor, .. } | Op::Split { actor, .. } => vec![*actor],
                    Op::Plant { sequence, .. } => {
                        sequence.first().map(|&(a, _)| a).into_iter().collect()
                    }
                };
                (op.at(), actors)
            });
            op.apply(path);
            if let Some((at, actors)) = also.filter(|(_, a)| !a.is_empty()) {
                conservative(path, at, &actors);
            }
            return;
        }
        let mut op = op;
        if let Op::Race { initials, .. } = &mut op {
            // Kept races share their lists of initials (a subtree's runs find the same few
            // lists again and again).
            match self.lists.get(&**initials) {
                Some(l) => *initials = l.clone(),
                None => {
                    self.lists.insert(initials.clone());
                }
            }
        }
        if let Op::Race { at, initials, .. } = &op {
            // The actor that took the node's branch is explored there in the owner's state
            // too (the subtree lies below that branch): the race needs nothing there.
            let n = &path[*at];
            if n.taken_actor().is_some_and(|a| initials.contains(&a)) {
                return;
            }
        }
        if !matches!(op, Op::Enter { .. }) {
            let same = self.seen.entry(self.hasher.hash_one(&op)).or_default();
            if same.iter().any(|&k| self.kept[k] == op) {
                return;
            }
            same.push(self.kept.len());
        }
        let w = match &op {
            Op::Race {
                initials, sequence, ..
            } => 1 + initials.len() + sequence.len(),
            Op::Plant { sequence, .. } => 1 + sequence.len(),
            _ => 1,
        };
        self.weight.set(self.weight.get() + w);
        self.kept.push(op);
    }
}

/// Bounded partial-order reduction (Coons, Musuvathi, McKinley, OOPSLA 2013): an alternative
/// added at point `at` for actors `actors` is added at the point where the run's actor of
/// `at` started its run of actions too (the last switch between actors of the plain listing
/// at or before `at`). Taking another actor at `at` preempts the actor that runs there, and
/// the bound may leave it; taking it where that actor started costs no more than what the
/// run took there (every alternative there but the actor that ran before costs as much), so
/// the bound leaves none there. The alternative there: an actor of `actors` that can run
/// there, else every alternative. (For classic DPOR this keeps every state the bound lets a
/// schedule reach; this search's rules are not classic DPOR's, and it is not shown to:
/// [`super::exhaustive::enumerate_bounded_reduced`].)
fn conservative(path: &mut [Node], at: usize, actors: &[ActorKey]) {
    let c = block_start(path, at);
    if c == at {
        return;
    }
    let node = &mut path[c];
    if !node.point.scheduling {
        return;
    }
    let actors: Vec<ActorKey> = actors.iter().map(|&a| node.stand_in(a)).collect();
    let explored = |node: &Node, alt: u32| {
        node.done.contains(&alt) && !node.point.disabled.contains(&alt) || node.forced(alt)
    };
    if (0..node.point.alternatives)
        .any(|alt| explored(node, alt) && node.actor_of(alt).is_some_and(|a| actors.contains(&a)))
    {
        return;
    }
    let alts: Vec<u32> = match actors.iter().find_map(|&a| node.enabled(a)) {
        Some(alt) => vec![alt],
        None => (0..node.point.alternatives)
            .filter(|&alt| !node.point.beside_step(alt) && !node.point.disabled.contains(&alt))
            .collect(),
    };
    for alt in alts {
        if !node.done.contains(&alt) {
            node.backtrack.insert(alt);
            node.bounded.get_or_insert_default().forced.insert(alt);
        }
    }
}

/// The scheduling point where the actor taken at point `p` (of the plain listing) started
/// the run of its actions that `p` is in: `p`, or an earlier point with only that actor's
/// actions between.
fn block_start(path: &[Node], p: usize) -> usize {
    let Some(t) = path
        .get(p)
        .filter(|n| n.point.scheduling)
        .and_then(Node::taken_actor)
    else {
        return p;
    };
    let mut c = p;
    for k in (0..p).rev() {
        let n = &path[k];
        if !n.point.scheduling {
            continue;
        }
        match n.taken_actor() {
            Some(a) if a.same_plain_actor(t) => c = k,
            _ => break,
        }
    }
    c
}

/// A set of event indices (inline up to 128 events: a run's happens-before sets allocate
/// nothing in small scenarios).
#[derive(Debug, Clone, Default)]
struct Bits(smallvec::SmallVec<[u64; 2]>);

impl Bits {
    fn insert(&mut self, i: usize) {
        let w = i / 64;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }

    fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Whether the two sets have the same indices.
    fn same(&self, o: &Bits) -> bool {
        let n = self.0.len().max(o.0.len());
        (0..n).all(|w| self.0.get(w).unwrap_or(&0) == o.0.get(w).unwrap_or(&0))
    }

    /// Whether the two sets have an index in common.
    fn meets(&self, o: &Bits) -> bool {
        self.0.iter().zip(&o.0).any(|(a, b)| a & b != 0)
    }

    /// Whether the set has an index in `first..=last` (only those words read: a step's set
    /// met with a late event's happens-before was a pass over all of it).
    fn any_in(&self, first: usize, last: usize) -> bool {
        let end = self.0.len().min(last / 64 + 1);
        (first / 64..end).any(|w| {
            let lo = if w == first / 64 { first % 64 } else { 0 };
            let hi = if w == last / 64 { last % 64 } else { 63 };
            self.0[w] & (u64::MAX >> (63 - hi)) & (u64::MAX << lo) != 0
        })
    }

    /// The indices in the set from `lo` up to (not including) `hi`, in order.
    fn ones(&self, lo: usize, hi: usize) -> impl Iterator<Item = usize> + '_ {
        let end = self.0.len().min(hi.div_ceil(64));
        (lo / 64..end).flat_map(move |w| {
            let mut m = self.0[w];
            if w == lo / 64 {
                m &= u64::MAX << (lo % 64);
            }
            if w == hi / 64 {
                m &= (1u64 << (hi % 64)) - 1;
            }
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let b = m.trailing_zeros() as usize;
                    m &= m - 1;
                    w * 64 + b
                })
            })
        })
    }

    fn union(&mut self, o: &Bits) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
}

/// A quick over-approximation of which objects a footprint reads, updates and writes
/// ([`Footprint::kind_bits`]): two footprints conflict only where their masks meet in
/// conflicting kinds ([`Masks::may_conflict`]). The kinds are kept apart because nearly every
/// action reads the device's state and the groups of a dispatch all update its completion
/// count (and often one word, with atomics).
fn mask(f: &Footprint) -> Masks {
    Masks(f.kind_bits())
}

/// A footprint's [`mask`]s.
#[derive(Debug, Clone, Copy)]
struct Masks([u64; 3]);

impl Masks {
    /// Whether footprints with these masks may conflict (`false`: they cannot).
    fn may_conflict(self, o: Masks) -> bool {
        crate::footprint::kinds_may_conflict(self.0, o.0)
    }
}

/// The number of events from which a run's pairs of events get a second quick test
/// ([`Footprint::kind_bits_again`]) before their footprints are compared: the pairs grow as
/// the square of the events, the cost of the second test's bits as the events.
const AGAIN_FROM: usize = 64;

/// The number of events from which a run's events keep their [`Footprint::address_span`]
/// and the previous event of their actor ([`History::spans`], [`History::prev`]): worth
/// their upkeep in long runs only (a large dispatch's groups in strict mode, each a step of
/// its own, where the bits tell few of them apart and scanning back for each is the square
/// of the events).
const SPANS_FROM: usize = 512;

/// The happens-before of a run's events, kept along the search: the events before the point
/// where a run diverges are the previous run's, so only the new ones are computed.
#[derive(Debug, Default, Clone)]
pub(super) struct History {
    events: Vec<Event>,
    masks: Vec<Masks>,
    /// Per event: its footprint's [`Footprint::kind_bits_again`], the second quick test
    /// ([`History::may_conflict`]); empty (no second test) while the run has fewer than
    /// [`AGAIN_FROM`] events.
    again: Vec<[u64; 3]>,
    /// Per event: its footprint's [`Footprint::address_span`], the third quick test
    /// ([`History::may_conflict`]); empty while the run has fewer than [`SPANS_FROM`]
    /// events.
    spans: Vec<(u64, u64)>,
    /// Per event: the previous event of its actor (`u32::MAX`: none), kept as `spans` is
    /// ([`History::prev_same`] scans back otherwise: a long run's groups each have an actor
    /// of their own, and scanning back to the start for each is the square of the events).
    prev: Vec<u32>,
    /// Per event: the events that happen before it.
    preds: Vec<Bits>,
    /// Per event: the events that happen before it without the dependences of a task's read
    /// and an invalidation of its queue's cache ([`load_pair`]), where that differs from
    /// `preds` (`None`: the same). The search never reverses such a pair whose order nobody
    /// sees ([`unread_load`]), so the order it keeps in one run is no reason for an event
    /// after the pair to come after an event before it: the races and reversals are worked
    /// out with this relation ([`History::rel`]). Whether anybody sees a pair's order depends
    /// on the events after it, so every pair is left out here, and a pair somebody sees is
    /// a race of its own.
    relaxed: Vec<Option<Bits>>,
    /// How many of `relaxed` are `Some`.
    relaxed_count: usize,
    /// Per event: its [`window`] (for a write-back), once worked out (each race of the
    /// write-back asks for it): it reads the events after it up to the one that decides it,
    /// or to the end of the run, so [`History::update`] keeps it only where that event stays.
    windows: Vec<std::sync::OnceLock<(bool, Option<usize>)>>,
    /// The events by the strict-mode lines their [`History::spans`] meet, for the windows of
    /// early write-backs: the update's own index ([`Near`]), or made once the first window
    /// asks for it after an update that made none.
    by_line: std::sync::OnceLock<LineIndex>,
}

/// The events of a run of [`SPANS_FROM`] events or more by the lines their address spans
/// meet: an early write-back's window looks only at these ([`window_of`]: an event whose
/// span misses the line does not touch it).
#[derive(Debug, Default, Clone)]
struct LineIndex {
    /// Per line address: the events, in order, whose spans meet the line and at most
    /// [`LINES_INDEXED`] lines in all.
    lines: rustc_hash::FxHashMap<u64, Vec<u32>>,
    /// The events, in order, whose spans meet more lines than that (or every address).
    wide: Vec<u32>,
}

/// The most lines an event's span meets for [`LineIndex`] to list it under each of them.
const LINES_INDEXED: u64 = 64;

impl LineIndex {
    fn new(spans: &[(u64, u64)]) -> Self {
        let mut index = LineIndex::default();
        for (k, &span) in spans.iter().enumerate() {
            index.add(k, span);
        }
        index
    }

    /// Lists event `k` (after every event listed so far) by its span `(lo, hi)`.
    fn add(&mut self, k: usize, (lo, hi): (u64, u64)) {
        if lo > hi {
            return;
        }
        let line = crate::hazard::strict::LINE;
        let (first, last) = (lo / line, hi / line);
        if last - first >= LINES_INDEXED {
            self.wide.push(k as u32);
            return;
        }
        for l in first..=last {
            self.lines.entry(l * line).or_default().push(k as u32);
        }
    }

    /// The events after `w` whose spans may meet line `line`, in order.
    fn after(&self, w: usize, line: u64) -> impl Iterator<Item = usize> + '_ {
        fn of(v: &[u32], w: usize) -> std::iter::Peekable<std::slice::Iter<'_, u32>> {
            v[v.partition_point(|&k| k as usize <= w)..]
                .iter()
                .peekable()
        }
        let (mut a, mut b) = (
            of(self.lines.get(&line).map_or(&[][..], Vec::as_slice), w),
            of(&self.wide, w),
        );
        std::iter::from_fn(move || {
            let next = match (a.peek(), b.peek()) {
                (Some(&x), Some(&y)) if x <= y => a.next(),
                (Some(_), None) => a.next(),
                (_, Some(_)) => b.next(),
                (None, None) => None,
            };
            next.map(|&k| k as usize)
        })
    }
}

/// Whether a long run's events are looked up by [`Near`] (the default) or every event before
/// a new one is looked at, for tests and benchmarks: the analysis is the same either way,
/// only its speed changes.
static NEAR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Sets whether the analysis of a run of 512 events or more finds each event's dependences
/// among the events near it (by address and by the objects beyond memory that they touch,
/// the default) or looks at every event before it, for tests and benchmarks: the search
/// explores the same schedules with the same results either way.
#[doc(hidden)]
pub fn set_long_run_index(on: bool) {
    NEAR.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A long run's events by what could make a later event conflict with them, for
/// [`History::update`]: two events may conflict ([`History::may_conflict`]) only where their
/// address spans meet or their bits beyond memory do ([`crate::footprint::spans_may_conflict`]),
/// so an event's dependences are among the events listed under the lines its span meets, the
/// events whose spans are too wide to list by line, and those listed under its bits beyond
/// memory in a kind that conflicts with its own. A large dispatch's groups (strict mode, each
/// a step of its own) then look at the few events near them instead of every event before
/// them.
struct Near {
    /// The events by the lines their spans meet (after the update, the windows of early
    /// write-backs look them up: [`History::by_line`]).
    lines: LineIndex,
    /// Per bit of [`crate::footprint::BEYOND_MEMORY`] (by its number) and kind (reads,
    /// updates, writes, as [`Masks`] has them): the events with that bit in that kind.
    beyond: Vec<[Vec<u32>; 3]>,
}

impl Near {
    fn new() -> Self {
        Near {
            lines: LineIndex::default(),
            beyond: (0..64).map(|_| Default::default()).collect(),
        }
    }

    /// Lists event `k` (after every event listed so far).
    fn add(&mut self, k: usize, masks: Masks, span: (u64, u64)) {
        for (x, m) in masks.0.iter().enumerate() {
            let mut m = m & crate::footprint::BEYOND_MEMORY;
            while m != 0 {
                self.beyond[m.trailing_zeros() as usize][x].push(k as u32);
                m &= m - 1;
            }
        }
        self.lines.add(k, span);
    }

    /// Into `out`, the events listed that may conflict with an event of these masks and span
    /// (a superset of those [`History::may_conflict`] lets through), the last first, each
    /// once; `false` (and `out` left as it is) when the span meets too many lines to look
    /// them up.
    fn candidates(&self, masks: Masks, (lo, hi): (u64, u64), out: &mut Vec<u32>) -> bool {
        let line = crate::hazard::strict::LINE;
        if lo <= hi && hi / line - lo / line >= LINES_INDEXED {
            return false;
        }
        out.clear();
        let [r, u, w] = masks.0.map(|m| m & crate::footprint::BEYOND_MEMORY);
        // Each kind's bits against the kinds that conflict with it: a read against updates
        // and writes, an update against reads and writes, a write against all three.
        for (mut m, against) in [(r, &[1, 2][..]), (u, &[0, 2][..]), (w, &[0, 1, 2][..])] {
            while m != 0 {
                let lists = &self.beyond[m.trailing_zeros() as usize];
                m &= m - 1;
                for &x in against {
                    out.extend_from_slice(&lists[x]);
                }
            }
        }
        if lo <= hi {
            out.extend_from_slice(&self.lines.wide);
            for l in lo / line..=hi / line {
                if let Some(v) = self.lines.lines.get(&(l * line)) {
                    out.extend_from_slice(v);
                }
            }
        }
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.dedup();
        true
    }
}

impl History {
    fn dependent(&self, i: usize, j: usize) -> bool {
        self.may_conflict(i, j)
            && self.events[i]
                .footprint
                .conflicts(&self.events[j].footprint)
    }

    /// Whether the actions of events `i` and `j` may conflict (`false`: they cannot): their
    /// [`mask`]s meet in conflicting kinds, and so do their [`Footprint::kind_bits_again`];
    /// and their [`Footprint::address_span`]s meet or their masks beyond memory do.
    #[inline]
    fn may_conflict(&self, i: usize, j: usize) -> bool {
        self.masks[i].may_conflict(self.masks[j])
            && (self.again.is_empty() || self.may_conflict_again(i, j))
    }

    /// The second and third tests of [`History::may_conflict`] (a long run's).
    #[inline]
    fn may_conflict_again(&self, i: usize, j: usize) -> bool {
        crate::footprint::kinds_may_conflict(self.again[i], self.again[j])
            && (self.spans.is_empty() || self.spans_may_conflict(i, j))
    }

    /// The third test of [`History::may_conflict`] (a run of [`SPANS_FROM`] events or more).
    #[inline(never)]
    fn spans_may_conflict(&self, i: usize, j: usize) -> bool {
        crate::footprint::spans_may_conflict(
            (self.masks[i].0, self.spans[i]),
            (self.masks[j].0, self.spans[j]),
        )
    }

    /// Whether `i`'s action and the later `j`'s race ([`Footprint::races`]).
    fn races(&self, i: usize, j: usize) -> bool {
        self.may_conflict(i, j) && self.events[i].footprint.races(&self.events[j].footprint)
    }

    /// Replaces the events from the first at a point `>= from` on with `new`'s (the run's, or
    /// when `tail`, only its events from point `from` on); returns the index of the first new
    /// event.
    fn update(&mut self, mut new: Vec<Event>, from: usize, tail: bool) -> usize {
        let before = self
            .events
            .iter()
            .position(|e| e.point >= from)
            .unwrap_or(self.events.len());
        debug_assert!(!tail || new.iter().all(|e| e.point >= from));
        let keep = if tail { before } else { before.min(new.len()) };
        self.events.truncate(keep);
        self.masks.truncate(keep);
        self.again.truncate(keep);
        self.spans.truncate(keep);
        self.prev.truncate(keep);
        self.preds.truncate(keep);
        for r in self.relaxed.drain(keep..) {
            self.relaxed_count -= usize::from(r.is_some());
        }
        let more = if tail { new.len() } else { new.len() - keep };
        self.masks.reserve(more);
        self.preds.reserve(more);
        self.relaxed.reserve(more);
        // The new events, each moved once (a run from the start: the vector itself); what is
        // worked out for an event reads only it and those before it.
        if tail {
            self.events.append(&mut new);
        } else if keep == 0 {
            self.events = new;
        } else {
            self.events.extend(new.drain(keep..));
        }
        if self.events.len() >= AGAIN_FROM {
            let from = self.again.len();
            self.again.extend(
                self.events[from..]
                    .iter()
                    .map(|e| e.footprint.kind_bits_again()),
            );
        } else {
            self.again.clear();
        }
        if self.events.len() >= SPANS_FROM {
            let from = self.spans.len();
            self.spans.extend(
                self.events[from..]
                    .iter()
                    .map(|e| e.footprint.address_span()),
            );
            let from = self.prev.len();
            let mut last: rustc_hash::FxHashMap<ActorKey, u32> = Default::default();
            for (i, e) in self.events.iter().enumerate() {
                let before = last.insert(e.actor, i as u32);
                if i >= from {
                    self.prev.push(before.unwrap_or(u32::MAX));
                }
            }
        } else {
            self.spans.clear();
            self.prev.clear();
        }
        // A long run's events by what could make them conflict: each new event looks only at
        // those that may conflict with it.
        let near_on = NEAR.load(std::sync::atomic::Ordering::Relaxed);
        let mut near = (near_on && !self.spans.is_empty()).then(|| {
            let mut near = Near::new();
            for k in 0..keep {
                near.add(k, self.masks[k], self.spans[k]);
            }
            near
        });
        let mut found = Vec::new();
        for j in keep..self.events.len() {
            self.masks.push(mask(&self.events[j].footprint));
            let cands = near
                .as_ref()
                .is_some_and(|n| n.candidates(self.masks[j], self.spans[j], &mut found))
                .then_some(&found[..]);
            let p = self.before(j, |i| self.dependent(i, j), cands);
            // Only once some dependence is a load pair (strict mode's caches).
            let r = if self.relaxed_count > 0
                || (touches_cache(&self.events[j].footprint)
                    && p.ones(0, j).any(|i| load_pair(self, i, j).is_some()))
            {
                let r = self.relaxed_before(
                    j,
                    |i| self.dependent(i, j) && load_pair(self, i, j).is_none(),
                    cands,
                );
                (!r.same(&p)).then_some(r)
            } else {
                None
            };
            self.relaxed_count += usize::from(r.is_some());
            self.relaxed.push(r);
            self.preds.push(p);
            if let Some(n) = &mut near {
                n.add(j, self.masks[j], self.spans[j]);
            }
        }
        // The index of lines just made serves the windows (else it is made when one asks).
        self.by_line = near.map_or_else(std::sync::OnceLock::new, |n| n.lines.into());
        // A kept event's window stays when the event that decided it was kept too (it read
        // only the events up to that one); any other is worked out again.
        self.windows.truncate(keep);
        for c in &mut self.windows {
            if !matches!(c.get(), Some((_, Some(k))) if *k < keep) {
                *c = std::sync::OnceLock::new();
            }
        }
        self.windows
            .resize_with(self.events.len(), std::sync::OnceLock::new);
        keep
    }

    /// The events before `j` in the relaxed happens-before ([`History::relaxed`]).
    fn rel(&self, j: usize) -> &Bits {
        self.relaxed[j].as_ref().unwrap_or(&self.preds[j])
    }

    /// [`History::before`] through the relaxed happens-before of the events before `j`.
    fn relaxed_before(
        &self,
        j: usize,
        direct: impl Fn(usize) -> bool,
        cands: Option<&[u32]>,
    ) -> Bits {
        self.before_in(j, direct, |i| self.rel(i), cands)
    }

    /// The events before `j` through its actor's previous event and the earlier events
    /// `direct` accepts (each with its own happens-before): happens-before itself when
    /// `direct` is dependence. Needs the happens-before of every event before `j`. `cands`:
    /// the events before `j` that `direct` may accept, the last first (every event `i` with
    /// [`History::may_conflict`]`(i, j)`; `direct` accepts only such events), or `None` to look
    /// at every event before `j`.
    fn before(&self, j: usize, direct: impl Fn(usize) -> bool, cands: Option<&[u32]>) -> Bits {
        self.before_in(j, direct, |i| &self.preds[i], cands)
    }

    /// [`History::before`] with each earlier event's own set from `of`.
    fn before_in<'a>(
        &'a self,
        j: usize,
        direct: impl Fn(usize) -> bool,
        of: impl Fn(usize) -> &'a Bits,
        cands: Option<&[u32]>,
    ) -> Bits {
        let Some(cands) = cands else {
            return self.before_scan(j, direct, of);
        };
        let p = self.before_near(j, &direct, &of, cands);
        debug_assert!(
            p.same(&self.before_scan(j, &direct, &of)),
            "the events near event {j} miss one it depends on"
        );
        p
    }

    /// [`History::before_in`] looking only at `cands` and at the earlier events of `j`'s actor
    /// (through [`History::prev`]): the same set as [`History::before_scan`], as an event
    /// not among `cands` is accepted only as its actor's, and an event of `j`'s actor already
    /// in the set has the earlier ones in it too (each event's set holds its actor's earlier
    /// events, and a set taken in whole holds the sets of its events).
    fn before_near<'a>(
        &'a self,
        j: usize,
        direct: impl Fn(usize) -> bool,
        of: impl Fn(usize) -> &'a Bits,
        cands: &[u32],
    ) -> Bits {
        let mut p = Bits::default();
        let mut same_actor_seen = false;
        // The next earlier event of j's actor not looked at yet, while none was taken.
        let mut chain = self.prev_same(j);
        let mut cands = cands.iter().map(|&i| i as usize).peekable();
        loop {
            let i = match (chain, cands.peek().copied()) {
                (None, None) => break,
                (Some(s), Some(c)) if c > s => {
                    cands.next();
                    c
                }
                (Some(s), c) => {
                    if c == Some(s) {
                        cands.next();
                    }
                    chain = self.prev_same(s);
                    s
                }
                (None, Some(c)) => {
                    cands.next();
                    c
                }
            };
            if !self.take_into(&mut p, &mut same_actor_seen, (i, j), &direct, &of)
                && self.events[i].actor == self.events[j].actor
            {
                // In the set already: its actor's earlier events are in it with it.
                chain = None;
            }
            if same_actor_seen {
                chain = None;
            }
        }
        p
    }

    /// [`History::before_in`] looking at every event before `j`.
    fn before_scan<'a>(
        &'a self,
        j: usize,
        direct: impl Fn(usize) -> bool,
        of: impl Fn(usize) -> &'a Bits,
    ) -> Bits {
        let mut p = Bits::default();
        let mut same_actor_seen = false;
        for i in (0..j).rev() {
            self.take_into(&mut p, &mut same_actor_seen, (i, j), &direct, &of);
        }
        p
    }

    /// Looks at earlier event `i` for [`History::before_in`]'s set `p` of the events before
    /// `j`: takes it, with its own set from `of`, when it is the latest event of `j`'s actor
    /// not in `p` (`same_actor_seen` says whether one was taken) or `direct` accepts it.
    /// `false` when `i` was in `p` already.
    #[inline(always)]
    fn take_into<'a>(
        &'a self,
        p: &mut Bits,
        same_actor_seen: &mut bool,
        (i, j): (usize, usize),
        direct: &impl Fn(usize) -> bool,
        of: &impl Fn(usize) -> &'a Bits,
    ) -> bool {
        if p.contains(i) {
            return false;
        }
        let same = self.events[i].actor == self.events[j].actor;
        if (same && !*same_actor_seen) || direct(i) {
            *same_actor_seen |= same;
            p.union(of(i));
            p.insert(i);
        }
        true
    }

    /// The previous event of `j`'s actor.
    fn prev_same(&self, j: usize) -> Option<usize> {
        match self.prev.get(j) {
            Some(&p) => (p != u32::MAX).then_some(p as usize),
            None => (0..j)
                .rev()
                .find(|&i| self.events[i].actor == self.events[j].actor),
        }
    }
}

/// A run wrote a timestamp while the search left the clock out of the relation: it must
/// start again with the clock in.
#[derive(Debug)]
pub(super) struct ClockMatters;

/// Whether an action of `events` writes the clock (a timestamp).
pub(super) fn writes_clock(events: &[Event]) -> bool {
    events
        .iter()
        .any(|e| e.footprint.has((Obj::Clock, Kind::Write)))
}

/// A reducing run's choice points and actions as the search keeps them: a sleep-blocked run
/// stops at its blocked point (the device is removed as requested); the points and actions
/// after it are the stop winding down, not a schedule of the program: keeping them would make
/// the search backtrack into choices no run that follows the same prefix without that sleep
/// set has. Reads of the clock are left out of the footprints unless `clock_matters`.
/// `Err` when the run wrote the clock and `clock_matters` is false.
pub(super) fn run_record(
    script: &Script,
    clock_matters: bool,
) -> Result<(Vec<ChoicePoint>, Vec<Event>), ClockMatters> {
    record_of(script.points(), script.events(), script, clock_matters)
}

/// [`run_record`], moving the points and events out of `script` (a search's run, recorded
/// once).
fn take_record(
    script: &Script,
    clock_matters: bool,
) -> Result<(Vec<ChoicePoint>, Vec<Event>), ClockMatters> {
    let (points, events) = script.take_record();
    record_of(points, events, script, clock_matters)
}

fn record_of(
    mut points: Vec<ChoicePoint>,
    mut events: Vec<Event>,
    script: &Script,
    clock_matters: bool,
) -> Result<(Vec<ChoicePoint>, Vec<Event>), ClockMatters> {
    if let Some(b) = script.sleep_blocked_point() {
        points.truncate(b + 1);
        events.retain(|e| e.point < b);
    }
    if !clock_matters {
        if writes_clock(&events) {
            return Err(ClockMatters);
        }
        for e in &mut events {
            e.footprint.remove_object(Obj::Clock);
        }
    }
    Ok((points, events))
}

/// What a reducing run's script is made of: the prefix of tries it follows, the try from
/// which it keeps `sleep` (and stops if that try finds its alternative disabled), and that
/// sleep set. Two runs of equal specs are the same run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Spec {
    prefix: Vec<u32>,
    at: Option<usize>,
    sleep: Vec<(ActorKey, Footprint)>,
    /// Sequences of steps the run is to plant where it leaves them ([`plant`]).
    also: Vec<Steps>,
    /// A preemption-bounded search's run ([`Script::keeping_preemptions`]).
    keep_preemptions: bool,
}

impl Spec {
    /// The first run of a search: canonical choices from the start, nothing asleep.
    pub(super) fn first() -> Self {
        Spec {
            prefix: Vec::new(),
            at: None,
            sleep: Vec::new(),
            also: Vec::new(),
            keep_preemptions: false,
        }
    }

    /// The script to run, keeping the events from point `known` on
    /// ([`Script::keep_events_from`]; 0: every event).
    pub(super) fn script(&self, known: usize) -> Script {
        let s = if self.keep_preemptions {
            Script::keeping_preemptions(self.prefix.clone(), self.at, self.sleep.clone())
        } else {
            Script::reducing(self.prefix.clone(), self.at, self.sleep.clone())
        };
        if known > 0 {
            s.keep_events_from(known);
        }
        s
    }
}

/// Where a reduced search gets its runs: it runs them, or takes runs and whole subtrees
/// explored ahead of time (`explore/speculate.rs`). Either way a spec's run, and the subtree
/// below it, are the same.
pub(super) trait Runs<T> {
    /// The run of `spec`'s script: the script after the run, and the body's value. The
    /// search has the events of the run's points before `known` (the run follows the prefix
    /// of its last run up to there; 0: none): the script leaves them out
    /// ([`Script::keep_events_from`]).
    fn run(&mut self, spec: Spec, known: usize) -> (Arc<Script>, T);

    /// The subtree of `spec` (the branch at point `d` the search takes next) explored ahead
    /// of time, if there is one (the search then takes it instead of running `spec`); `None`:
    /// the search explores it itself.
    fn explored(&mut self, _spec: &Spec, _d: usize) -> Option<Sub<T>> {
        None
    }

    /// The branch the search takes next (`specs[0]`), then the branches it will take after
    /// that subtree as far as known now, the likeliest first (it may take others, or not
    /// these); each with the index of the point it branches at.
    /// `hist`: the search's history now, for the runs below those branches to start from
    /// (their events before the branch point are the same).
    fn ahead(&mut self, _specs: Vec<(usize, Spec)>, _hist: &History) {}

    /// Whether [`Runs::ahead`] is of any use (the search skips working the specs out).
    fn wants_ahead(&self) -> bool {
        false
    }
}

/// What a run of a subtree explored ahead hands the search that takes it.
pub(super) enum Rec<T> {
    /// A schedule: the body's value, its schedule string, and its number of choice points.
    Schedule(T, String, usize),
    Repeated,
    /// A run stopped asleep, and its number of choice points.
    SleepBlocked(usize),
}

/// How the exploration of a subtree ahead ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Every run of the subtree was made.
    Complete,
    /// It made as many runs as the search's bound allows in all: the search taking it stops
    /// within it.
    Bounded,
    /// A run wrote the clock while the search left it out of the relation.
    ClockMatters,
    /// A run did not follow its prefix (the last of `runs`).
    Diverged,
    /// Cancelled: nobody will take it.
    Cancelled,
    /// Handed over part way, at a branch: the search that takes it goes on from there.
    Handed,
}

/// A subtree explored ahead of time ([`explore_subtree`]): its runs in the order the search
/// would have made them, the changes to the nodes above it, and the search's state after its
/// last run (`None`: its only run was a repeat, which changes nothing). A subtree handed
/// over part way also has the nodes below its branch point and the branch it takes next.
pub(super) struct Sub<T> {
    pub(super) runs: Vec<Rec<T>>,
    ops: Vec<Op>,
    state: Option<(History, Vec<u32>)>,
    resume: Option<(Vec<Node>, (usize, u32))>,
    pub(super) end: End,
}

/// Runs each spec on the calling thread with `body`.
pub(super) struct Direct<B>(pub(super) B);

impl<T, B: FnMut(&Arc<Script>) -> T> Runs<T> for Direct<B> {
    fn run(&mut self, spec: Spec, known: usize) -> (Arc<Script>, T) {
        let script = Arc::new(spec.script(known));
        let value = (self.0)(&script);
        (script, value)
    }
}

/// The spec that branches a reducing run (`tries`) at its choice point `point` (index `d`)
/// to alternative `alt`, with the sleep set of that sibling: the point's own, and the actors
/// of the alternatives explored there before (`slept`). Choices within an action start with
/// no sleep set. `wakeup`: the sequences the branch's run is to plant ([`Node::wakeup`]).
pub(super) fn branch_spec(
    tries: &[u32],
    point: &ChoicePoint,
    sleep_here: &[(ActorKey, Footprint)],
    slept: &[(ActorKey, Footprint)],
    alt: u32,
    wakeup: Option<&Sequences>,
) -> Spec {
    let start = point.first_try;
    let prefix = branch_prefix(tries, start, alt);
    let sleep = if point.scheduling {
        let mut s = sleep_here.to_vec();
        s.extend(slept.iter().cloned());
        s
    } else {
        Vec::new()
    };
    Spec {
        prefix,
        at: Some(start),
        sleep,
        also: wakeup.map_or_else(Vec::new, |g| g.list.clone()),
        keep_preemptions: false,
    }
}

/// Adds to `slept` the actor that took alternative `taken` at scheduling point `point`
/// (index `d`), with the footprint of its action there (from `events`): it sleeps in the
/// siblings explored after it. An action that chose within itself is not put to sleep.
pub(super) fn note_slept(
    slept: &mut Vec<(ActorKey, Footprint)>,
    point: &ChoicePoint,
    d: usize,
    events: &[Event],
) {
    if !point.scheduling {
        return;
    }
    let Some(taken) = point.taken else { return };
    let Some(actor) = point.actors.get(taken as usize) else {
        return;
    };
    // The action, and the PFP steps that followed it at once in strict mode (recorded at its
    // point): asleep, the actor stands for all of them.
    let Some(ev) = events.iter().find(|e| e.point == d && e.actor == actor) else {
        return;
    };
    if !ev.chose_within && !slept.iter().any(|(k, _)| *k == actor) {
        // Strict mode's caches are in the run: its PFP steps run with the actions that let
        // them run.
        let eager_pfp = events.iter().any(|e| {
            e.footprint.accesses().iter().any(|&(o, _)| {
                matches!(
                    o,
                    Obj::Cache(_) | Obj::Dirty(_) | Obj::Line(..) | Obj::View(..) | Obj::Loaded(..)
                )
            })
        });
        let fp = sleep_footprint(actor, &step_footprint(events, d), eager_pfp);
        slept.push((actor, fp));
    }
}

/// Explores every schedule of `body` up to equivalence (see the module comment); `visit` as in
/// [`super::exhaustive::enumerate`], also told of the runs stopped early.
pub(super) fn enumerate_reduced<T>(
    opts: &ExhaustiveOptions,
    body: impl FnMut(&Arc<Script>) -> T,
    mut visit: impl FnMut(Run<'_, T>) -> bool,
) -> Enumeration {
    let mut runs = Direct(body);
    let (root, mut clock_matters) = first_run(|s| (runs.0)(s));
    let mut root = Some(root);
    loop {
        match search_reduced(opts, root.take(), clock_matters, &mut runs, &mut visit) {
            Ok(e) => return e,
            Err(ClockMatters) => clock_matters = true,
        }
    }
}

/// The first run of a search from the start, as the root of that search, and whether the
/// clock is in the dependence relation from the start: a first run that wrote the clock puts
/// it in at once (else its search would stop at once and start again with the clock in, and
/// make the same first run again).
pub(super) fn first_run<T>(body: impl FnOnce(&Arc<Script>) -> T) -> (Root<T>, bool) {
    let script = Arc::new(Spec::first().script(0));
    let value = body(&script);
    // A first run has no sleep set, so it is never stopped asleep: its record has every
    // event ([`run_record`]).
    let clock_matters = script.with_events(writes_clock);
    let root = Root {
        script,
        value,
        frozen: 0,
    };
    (root, clock_matters)
}

/// The search's state between runs.
#[derive(Default)]
struct State {
    path: Vec<Node>,
    tries: Vec<u32>,
    hist: History,
    /// The branch a subtree explored ahead was handed over at.
    resume: Option<(usize, u32)>,
    /// A preemption-bounded search left an alternative past its bound.
    cut: bool,
}

/// The reduced search from `root` on (or from the start): source-DPOR over the choice
/// points from `root.frozen` on. `Err` when a run wrote the clock and `clock_matters` is
/// false.
pub(super) fn search_reduced<T>(
    opts: &ExhaustiveOptions,
    root: Option<Root<T>>,
    clock_matters: bool,
    runs: &mut impl Runs<T>,
    visit: impl FnMut(Run<'_, T>) -> bool,
) -> Result<Enumeration, ClockMatters> {
    let mut st = State::default();
    let mut sink = Sink {
        conservative: opts.preemption_bound.is_some(),
        ..Sink::default()
    };
    search(
        opts,
        root,
        None,
        clock_matters,
        runs,
        &mut st,
        &mut sink,
        &|| false,
        visit,
    )
}

/// The subtree of the branch `spec` at point `d` explored on its own, as the search would
/// explore it after taking that branch, for a search to take later ([`Runs::explored`]):
/// the same runs in the same order, and the same changes to the nodes above it. `pace`,
/// told how many runs it has kept and how much its kept changes hold, after each run (where
/// it may stop it) and at each branch (where it may also hand it over, or wait).
pub(super) fn explore_subtree<T>(
    opts: &ExhaustiveOptions,
    clock_matters: bool,
    spec: Spec,
    d: usize,
    hint: Option<Arc<History>>,
    runs: &mut impl Runs<T>,
    pace: impl Fn(usize, usize, bool) -> Pace,
) -> Sub<T> {
    let mut st = State::default();
    let mut sink = Sink {
        boundary: Some(d),
        ..Sink::default()
    };
    let weight = sink.weight.clone();
    let kept = std::cell::Cell::new(0usize);
    let hand = || pace(kept.get(), weight.get(), true) == Pace::Hand;
    let mut out: Vec<Rec<T>> = Vec::new();
    let mut diverged = false;
    let found = search(
        opts,
        None,
        Some((spec, d, hint)),
        clock_matters,
        runs,
        &mut st,
        &mut sink,
        &hand,
        |r| {
            match r {
                Run::Schedule(v, script) => out.push(Rec::Schedule(
                    v,
                    script.schedule_string(),
                    script.point_count(),
                )),
                Run::Ahead(v, s, depth) => out.push(Rec::Schedule(v, s.to_string(), depth)),
                Run::Repeated => out.push(Rec::Repeated),
                Run::SleepBlocked(depth) => out.push(Rec::SleepBlocked(depth)),
                Run::Diverged => {
                    diverged = true;
                    return false;
                }
            }
            kept.set(out.len());
            pace(out.len(), weight.get(), false) != Pace::Stop
        },
    );
    let resume = st.resume.take();
    let end = match found {
        Err(ClockMatters) => End::ClockMatters,
        Ok(_) if diverged => End::Diverged,
        Ok(_) if resume.is_some() => End::Handed,
        Ok(e) if e.complete => End::Complete,
        Ok(e) if matches!(e.bound, Some(Bound::MaxSchedules(_))) => End::Bounded,
        Ok(_) => End::Cancelled,
    };
    let repeat_only = matches!(out.as_slice(), [Rec::Repeated]);
    let resume = resume.map(|next| (st.path.split_off(d + 1), next));
    Sub {
        runs: out,
        ops: sink.kept,
        state: (!repeat_only).then_some((st.hist, st.tries)),
        resume,
        end,
    }
}

/// Whether a subtree explored ahead goes on ([`explore_subtree`]'s `pace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    Go,
    /// Stop: nobody will take it.
    Stop,
    /// Hand it over at this branch to the search that waits for it.
    Hand,
}

/// What taking a subtree explored ahead left the search to do.
enum Taken {
    /// Go on: choose the next branch.
    Go,
    /// Go on with this branch (a subtree handed over part way).
    Resume((usize, u32)),
    /// Return the result as it is (stopped or bounded).
    Stop,
    /// A run of the subtree wrote the clock.
    ClockMatters,
}

/// Takes the subtree `sub` of the branch at point `d`: makes its changes to the nodes (or
/// keeps those above the sink's boundary), hands its runs to `visit` with the bound checked
/// after each as the search does, and takes the state after its last run.
fn take_subtree<T>(
    opts: &ExhaustiveOptions,
    sub: Sub<T>,
    d: usize,
    st: &mut State,
    sink: &mut Sink,
    result: &mut Enumeration,
    visit: &mut impl FnMut(Run<'_, T>) -> bool,
) -> Taken {
    for op in sub.ops {
        sink.put(op, &mut st.path);
    }
    st.path.truncate(d + 1);
    let n = sub.runs.len();
    for (k, rec) in sub.runs.into_iter().enumerate() {
        let go = match rec {
            Rec::Schedule(v, schedule, depth) => {
                result.max_depth = result.max_depth.max(depth);
                result.schedules += 1;
                visit(Run::Ahead(v, &schedule, depth))
            }
            Rec::Repeated => {
                result.repeated_runs += 1;
                visit(Run::Repeated)
            }
            Rec::SleepBlocked(depth) => {
                result.max_depth = result.max_depth.max(depth);
                result.sleep_blocked += 1;
                visit(Run::SleepBlocked(depth))
            }
        };
        if !go {
            result.bound = Some(Bound::Stopped);
            return Taken::Stop;
        }
        // After each run but the subtree's last the search chose a branch within it, then
        // checked its bound.
        if (k + 1 < n || sub.end != End::Complete) && bounded(opts, result) {
            return Taken::Stop;
        }
    }
    match sub.end {
        End::Complete | End::Handed => {
            if let Some((hist, tries)) = sub.state {
                st.hist = hist;
                st.tries = tries;
            }
            match sub.resume {
                // The search chose its next branch within the subtree, then checked its
                // bound (above, after the last run).
                Some((nodes, next)) => {
                    st.path.extend(nodes);
                    Taken::Resume(next)
                }
                None => Taken::Go,
            }
        }
        End::ClockMatters => Taken::ClockMatters,
        End::Diverged => {
            if !visit(Run::Diverged) {
                result.bound = Some(Bound::Stopped);
                return Taken::Stop;
            }
            assert_replayed(&[], 0, 0);
            Taken::Stop
        }
        // The subtree ran to the bound: the search reached it within the subtree.
        End::Bounded | End::Cancelled => {
            debug_assert!(false, "a subtree explored ahead ended {:?}", sub.end);
            result.bound = Some(Bound::MaxSchedules(opts.max_schedules));
            Taken::Stop
        }
    }
}

/// Whether the search has reached its bound (and records it): runs stopped as repeats or
/// asleep count against the bound too, so that a search whose runs mostly end asleep still
/// ends.
fn bounded(opts: &ExhaustiveOptions, result: &mut Enumeration) -> bool {
    let runs = result.schedules + result.repeated_runs + result.sleep_blocked;
    if result.schedules >= opts.max_schedules || runs >= opts.max_schedules.saturating_mul(4) {
        result.bound = Some(Bound::MaxSchedules(opts.max_schedules));
        return true;
    }
    false
}

/// The search: from the start (or `root`), or, with `start`, the subtree of one branch (the
/// spec and the point it branches at) and nothing above it (the sink keeps the changes to the
/// nodes above).
#[allow(clippy::too_many_arguments)]
fn search<T>(
    opts: &ExhaustiveOptions,
    root: Option<Root<T>>,
    start: Option<(Spec, usize, Option<Arc<History>>)>,
    clock_matters: bool,
    runs: &mut impl Runs<T>,
    st: &mut State,
    sink: &mut Sink,
    hand: &dyn Fn() -> bool,
    mut visit: impl FnMut(Run<'_, T>) -> bool,
) -> Result<Enumeration, ClockMatters> {
    let frozen = root.as_ref().map_or(0, |r| r.frozen);
    // The shallowest point this search branches at.
    let lo = start.as_ref().map_or(frozen, |(_, d, _)| d + 1);
    let mut hint: Option<Arc<History>> = None;
    let mut root = root;
    let mut start = start;
    let mut next: Option<(usize, u32)> = None;
    let mut result = Enumeration::empty(true);
    // The sequences the branch's run is to plant where it leaves them (`Spec::also`).
    let mut planting: Vec<Steps> = Vec::new();
    loop {
        let (script, value, first_try) = match (root.take(), start.take(), next) {
            (Some(r), _, _) => (r.script, r.value, 0),
            (None, Some((spec, d, h)), _) => {
                hint = h;
                let first_try = spec.at.unwrap_or(0);
                next = spec.prefix.last().map(|&alt| (d, alt));
                planting.clone_from(&spec.also);
                let (script, value) = runs.run(spec, 0);
                (script, value, first_try)
            }
            (None, None, None) => {
                let (script, value) = runs.run(Spec::first(), 0);
                (script, value, 0)
            }
            (None, None, Some((d, alt))) => {
                let n = &st.path[d];
                let mut spec = n.branch(&st.tries, alt);
                spec.keep_preemptions = opts.preemption_bound.is_some();
                let first_try = n.point.first_try;
                if let Some(sub) = runs.explored(&spec, d) {
                    let n = match take_subtree(opts, sub, d, st, sink, &mut result, &mut visit) {
                        Taken::Go => choose(opts, st, lo, runs, &mut result),
                        Taken::Resume(n) => Some(n),
                        Taken::Stop => return Ok(result),
                        Taken::ClockMatters => return Err(ClockMatters),
                    };
                    match n {
                        Some(n) if hand() => {
                            st.resume = Some(n);
                            result.bound = Some(Bound::Stopped);
                            return Ok(result);
                        }
                        Some(n) => {
                            next = Some(n);
                            continue;
                        }
                        None => return Ok(result),
                    }
                }
                planting.clone_from(&spec.also);
                // The events before the branch's action are the last run's, which the
                // history has.
                let (script, value) = runs.run(spec, action_point(&st.path, d));
                (script, value, first_try)
            }
        };
        let (points, events) = take_record(&script, clock_matters)?;
        if opts.preemption_bound.is_some() {
            script.give_back_points(points.clone());
        }
        let from = match next {
            None => 0,
            Some((d, alt)) => {
                if !replayed(&points, d, first_try) && !visit(Run::Diverged) {
                    result.bound = Some(Bound::Stopped);
                    return Ok(result);
                }
                assert_replayed(&points, d, first_try);
                st.path.truncate(d + 1);
                let repeat = points[d].disabled.contains(&alt);
                let point = (!repeat).then(|| Box::new(points[d].clone()));
                sink.put(Op::Enter { d, alt, point }, &mut st.path);
                if repeat {
                    result.repeated_runs += 1;
                    if !visit(Run::Repeated) {
                        result.bound = Some(Bound::Stopped);
                        return Ok(result);
                    }
                    usize::MAX
                } else {
                    d + 1
                }
            }
        };
        let planted = std::mem::take(&mut planting);
        if from != usize::MAX {
            // A subtree's search starts with no nodes: its first run makes those above it
            // too (read-only: their changes are kept for the owner).
            let have = st.path.len();
            let n_points = points.len();
            st.path.extend(points.into_iter().skip(have).map(Node::new));
            if opts.preemption_bound.is_some() {
                for d in have..st.path.len() {
                    let before = d.checked_sub(1).map_or(0, |c| st.path[c].through());
                    st.path[d].bounded.get_or_insert_default().before = before;
                }
            }
            st.tries = script.tries();
            result.max_depth = result.max_depth.max(n_points);
            let first_new = if have < from {
                // A subtree's first run: its events before the branch point are those of
                // the search that wants it (`hint`), whose happens-before it keeps, or it
                // works them out.
                let d = action_point(&st.path, from - 1);
                let same = |h: &History| {
                    let k = h.events.iter().position(|e| e.point >= d);
                    let k = k.unwrap_or(h.events.len());
                    events.len() >= k && h.events[..k] == events[..k]
                };
                match hint.take().filter(|h| same(h)) {
                    Some(h) => st.hist = Arc::unwrap_or_clone(h),
                    None => st.hist = History::default(),
                }
                st.hist.update(events, d, false);
                let h = &st.hist;
                h.events
                    .iter()
                    .position(|e| e.point >= d)
                    .unwrap_or(h.events.len())
            } else {
                // A run that kept only the events from the branch's action on hands the
                // history those.
                let tail = script.events_from() > 0;
                let d = from.checked_sub(1).map_or(0, |d| action_point(&st.path, d));
                st.hist.update(events, d, tail)
            };
            for seq in &planted {
                plant(seq, from, &st.hist.events, &mut st.path, sink);
            }
            add_backtracks(&st.hist, first_new, frozen, &mut st.path, sink);
            add_disabled(
                &st.hist,
                frozen,
                !script.sleep_blocked(),
                &mut st.path,
                sink,
            );
            let run = if script.sleep_blocked() {
                result.sleep_blocked += 1;
                Run::SleepBlocked(n_points)
            } else {
                result.schedules += 1;
                Run::Schedule(value, &script)
            };
            if !visit(run) {
                result.bound = Some(Bound::Stopped);
                return Ok(result);
            }
        }
        match choose(opts, st, lo, runs, &mut result) {
            Some(n) if hand() => {
                st.resume = Some(n);
                result.bound = Some(Bound::Stopped);
                return Ok(result);
            }
            Some(n) => next = Some(n),
            None => return Ok(result),
        }
    }
}

/// The scheduling point of the action that a branch at point `d` changes: `d`, or for a
/// choice within an action (which groups complete, a stale or fresh read), the scheduling
/// point of that action, whose event the choice can change (it is recorded at that point).
fn action_point(path: &[Node], d: usize) -> usize {
    (0..=d)
        .rev()
        .find(|&k| path.get(k).is_none_or(|n| n.point.scheduling))
        .unwrap_or(0)
}

/// Chooses the search's next branch: the deepest point from `lo` on with an alternative left
/// (`None` when there is none: the search is complete, or when the bound is reached). The
/// alternative explored there until now sleeps in its siblings.
fn choose<T>(
    opts: &ExhaustiveOptions,
    st: &mut State,
    lo: usize,
    runs: &mut impl Runs<T>,
    result: &mut Enumeration,
) -> Option<(usize, u32)> {
    let mut next = None;
    'nodes: for d in (lo..st.path.len()).rev() {
        while let Some(alt) = st.path[d].next() {
            // A preemption-bounded search leaves the alternatives past its bound (each once:
            // the node's preemptions before it stay as long as it is on the path).
            if let Some(k) = opts.preemption_bound {
                let n = &mut st.path[d];
                if n.before() + u32::from(n.point.preempts(alt)) > k {
                    n.done.insert(alt);
                    st.cut = true;
                    continue;
                }
            }
            next = Some((d, alt));
            break 'nodes;
        }
    }
    let Some((d, alt)) = next else {
        match opts.preemption_bound.filter(|_| st.cut) {
            Some(k) => result.bound = Some(Bound::PreemptionBound(k)),
            None => result.complete = true,
        }
        return None;
    };
    match opts
        .preemption_bound
        .map(|_| sleeps_within_bound(&st.path, d))
    {
        None | Some(Sleeps::InEvery) => {
            let n = &mut st.path[d];
            note_slept(&mut n.slept, &n.point, d, &st.hist.events);
        }
        Some(Sleeps::InAlike) => {
            let n = &mut st.path[d];
            let b = n.bounded.get_or_insert_default();
            note_slept(&mut b.slept_alike, &n.point, d, &st.hist.events);
        }
        Some(Sleeps::Never) => {}
    }
    if runs.wants_ahead() {
        let mut specs = vec![(d, st.path[d].branch(&st.tries, alt))];
        specs.extend(ahead_specs(&st.path, &st.tries, &st.hist.events, lo, d));
        runs.ahead(specs, &st.hist);
    }
    if bounded(opts, result) {
        return None;
    }
    next
}

/// Where, in a preemption-bounded search, the actor that took point `d`'s alternative in
/// the run on the path sleeps in the siblings explored after it. Sleep sets prune a schedule
/// that runs the actor's action later when the one that runs it at `d` (before the sibling)
/// is the same up to the order of independent actions; with a bound, that one should have no
/// more preemptions. It has none more in every sibling when taking the actor at `d` costs no
/// more than any sibling left (it preempts nothing there, or the actor that could go on there
/// was explored already) and its action leaves it unable to go on (the next scheduling point
/// lists nothing of it, of the plain listing): the sibling's actions follow with no
/// preemption, and the later point where the other schedule ran the action loses a switch.
/// Otherwise only in the siblings of the same actor of the plain listing ([`Sleeps`]). An
/// alternative forced there ([`conservative`]) puts nothing to sleep.
fn sleeps_within_bound(path: &[Node], d: usize) -> Sleeps {
    let n = &path[d];
    let Some(t) = n.point.taken else {
        return Sleeps::Never;
    };
    if n.forced(t) {
        return Sleeps::Never;
    }
    let Some(actor) = n.actor_of(t) else {
        return Sleeps::Never;
    };
    let cheapest = !n.point.preempts(t)
        || n.point
            .continuing
            .is_some_and(|c| n.done.contains(&c) && !n.point.disabled.contains(&c));
    let ends = path[d + 1..]
        .iter()
        .find(|p| p.point.scheduling)
        .is_none_or(|next| {
            !(0..next.point.alternatives).any(|alt| {
                !next.point.disabled.contains(&alt)
                    && next
                        .actor_of(alt)
                        .is_some_and(|k| k.same_plain_actor(actor))
            })
        });
    if cheapest && ends {
        Sleeps::InEvery
    } else {
        Sleeps::InAlike
    }
}

/// Where an explored actor sleeps in a preemption-bounded search ([`sleeps_within_bound`]).
enum Sleeps {
    /// In every sibling explored after it.
    InEvery,
    /// In the siblings of the same actor of the plain listing only (the groups of one
    /// dispatch, the write-backs of one queue's lines): taking it first there costs what the
    /// sibling costs, and the sibling's actor goes on after it with no preemption.
    InAlike,
    /// In none.
    Never,
}

/// Makes sure some schedule runs, before the action that disabled it, each actor that could
/// run at a scheduling point, could not at the next, and did not run again in the run: a race
/// needs both actions in one run, and an action that never runs again races with nothing
/// there. What disables an actor: a removal of the device (a fault, an endless kernel, a
/// requested removal) disables every engine stage, group and write-back; a write can disable
/// a wait that could pass (an ME's or PFP's memory-value wait, a host's poll). Nothing else
/// does: tickets latch, dispatches only finish, a FIFO only fills by its own PFP, and an
/// action that makes a dirty line clean (a release, an atomic, a CP write) does it as that
/// line's write-back (strict mode records it as an action of the line's write-back actor,
/// `hazard/strict.rs`). `ended`: the run went to its end (the actors that could run at its
/// last point and did not were disabled by its last action).
fn add_disabled(h: &History, frozen: usize, ended: bool, path: &mut [Node], sink: &mut Sink) {
    // Each event as (actor, point, whether it is a host's release from a wait), by actor and
    // then point. A host released from a wait that timed out or that a removal ended (it
    // reads everything) did not run the action it could run before: a poll that could pass,
    // disabled by a write, then timed out, must still be run before that write. Nor did it by
    // what it does after the release (its program goes on: an `expect`, a wait for idle, its
    // end): only its first event after a point tells whether it ran the action it could run
    // there.
    let mut runs: Vec<(ActorKey, usize, bool)> = h
        .events
        .iter()
        .map(|e| {
            let released = matches!(e.actor, ActorKey::Host(_)) && e.footprint.reads_all();
            (e.actor, e.point, released)
        })
        .collect();
    runs.sort_by_key(|&(a, pt, _)| (a, pt));
    let removal: Vec<usize> = h
        .events
        .iter()
        .filter(|e| e.footprint.is_removal())
        .map(|e| e.point)
        .collect();
    // Whether `p` ran, after point `k`, the action it could run at `k`: its first event at a
    // later point exists and is not a release.
    let ran_after = |p: ActorKey, k: usize| {
        let i = runs.partition_point(|&(a, pt, _)| (a, pt) <= (p, k));
        runs.get(i)
            .is_some_and(|&(a, _, released)| a == p && !released)
    };
    let sched: Vec<usize> = (frozen..path.len())
        .filter(|&k| path[k].point.scheduling)
        .collect();
    // The changes are made after the pass: they add alternatives to explore, and the pass
    // reads only the points' listings.
    let mut ops = Vec::new();
    for (i, &k) in sched.iter().enumerate() {
        let later: &Actors = match sched.get(i + 1) {
            Some(&k2) => &path[k2].point.actors,
            None if ended => &NO_ACTORS,
            None => continue,
        };
        let Some(taken) = path[k].point.taken else {
            continue;
        };
        let ran = path[k].actor_of(taken);
        let removed = removal.contains(&k);
        if !removed && path[k].point.actors.in_runs() {
            // Only a removal needs a group's or a write-back's alternative: a long listing's
            // runs of them (a large dispatch lists thousands at every point) are passed over
            // whole, and each other alternative is looked at as below.
            let singles: Vec<u32> = path[k]
                .point
                .actors
                .entries()
                .filter(|&(_, _, len)| len == 1)
                .map(|(alt, _, _)| alt as u32)
                .filter(|&alt| alt < path[k].point.alternatives)
                .collect();
            for alt in singles {
                let Some(p) = path[k].actor_of(alt) else {
                    continue;
                };
                let needed = matches!(p, ActorKey::Me(_) | ActorKey::Pfp(_) | ActorKey::Host(_));
                if !needed || Some(p) == ran || later.contains(&p) || ran_after(p, k) {
                    continue;
                }
                ops.push(Op::Disabled {
                    at: k,
                    alt,
                    actor: p,
                });
            }
            continue;
        }
        for alt in 0..path[k].point.alternatives {
            let Some(p) = path[k].actor_of(alt) else {
                continue;
            };
            let needed = match p {
                ActorKey::Me(_) | ActorKey::Pfp(_) | ActorKey::Host(_) => true,
                // Its groups one by one stand for it.
                ActorKey::Groups(..) => false,
                _ => removed,
            };
            if !needed || Some(p) == ran || later.contains(&p) || ran_after(p, k) {
                continue;
            }
            ops.push(Op::Disabled {
                at: k,
                alt,
                actor: p,
            });
        }
    }
    for op in ops {
        sink.put(op, path);
    }
}

/// The runs the search will ask for after the subtree of its next branch (at point `next`),
/// as far as they are known now: at each shallower point that has an alternative left, the
/// first of them, deepest first. Each is the run the search will make when it gets there,
/// unless the subtree adds an alternative before it at that point.
fn ahead_specs(
    path: &[Node],
    tries: &[u32],
    events: &[Event],
    frozen: usize,
    next: usize,
) -> Vec<(usize, Spec)> {
    let mut out = Vec::new();
    for d in (frozen..next).rev() {
        let n = &path[d];
        let Some(alt) = n.next() else {
            continue;
        };
        let mut slept = n.slept.clone();
        note_slept(&mut slept, &n.point, d, events);
        let wakeup = n.wakeup.get(&alt);
        out.push((
            d,
            branch_spec(tries, &n.point, &n.point.sleep, &slept, alt, wakeup),
        ));
    }
    out
}

/// For each race whose later event is new (index `>= first_new`), makes sure some schedule
/// reverses it (source-DPOR's backtrack rule).
/// Races whose first event is at a point before `frozen` are left to the caller (a parallel
/// exploration's units explore every alternative there).
fn add_backtracks(
    h: &History,
    first_new: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let n = h.events.len();
    let mut racing: Vec<usize> = Vec::new();
    let mut starts: Vec<Option<Reversal>> = Vec::new();
    for j in first_new..n {
        // The events that happen before j but not before (or at) the previous event of j's
        // actor, in order, that another actor made and that j depends on.
        let prev = h.prev_same(j);
        racing.clear();
        let mut pins = StepPins::default();
        for (w, &word) in h.preds[j].0.iter().enumerate() {
            let mut m = word;
            if let Some(p) = prev {
                m &= !h.rel(p).0.get(w).copied().unwrap_or(0);
                if p / 64 == w {
                    m &= !(1u64 << (p % 64));
                }
            }
            // Only the dependences some schedule reverses: not the queue's plumbing or a wait
            // (`Footprint::races`: one conflict that orders the two in every schedule orders
            // them), nor two parts of one step (an action and the PFP steps or write-backs it
            // brought about), nor a race whose later event another part of the first one's
            // step orders in every schedule.
            while m != 0 {
                let i = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                if reversible_in(h, i, j, &mut pins)
                    && !unobserved_writeback(h, i, j)
                    && !unread_load(h, i, j)
                {
                    racing.push(i);
                }
            }
        }
        // Who could start the reversal of each race not implied by another (None: no
        // schedule reverses it, or another race implies it). Only the races not implied by
        // another: i happens before no other racing event that some schedule reverses (the
        // reversal of that one's race comes first; a dependence that no schedule reverses
        // implies nothing, or a chain through it would hide i's race for good: a host's read
        // before a submission that the queue's later write follows in this run but need
        // not). Not for a host's wait for idle (passing, or released by a hang): every
        // submission before it keeps it waiting, so reversing the race of a later one does
        // not make the race of an earlier one direct (the wait still cannot pass before the
        // later one while the earlier one keeps a queue busy), and each is reversed on its
        // own. Worked out from the latest race back, so that an implied race's start is never
        // looked for: a race that an implied one would imply is implied by what implies that
        // one (happens-before is transitive), so its own start does not matter.
        let waits_idle = awaits_idle(&h.events[j].footprint);
        starts.clear();
        starts.resize_with(racing.len(), || None);
        let needs = NeedsOf::new(h, j);
        for x in (0..racing.len()).rev() {
            let i = racing[x];
            let implied = !waits_idle
                && (x + 1..racing.len())
                    .any(|y| starts[y].is_some() && h.rel(racing[y]).contains(i));
            if !implied {
                starts[x] = start_of(h, i, &needs, path);
            }
        }
        for &i in &racing {
            split_writeback(h, i, j, frozen, path, sink);
        }
        for (x, r) in starts.iter_mut().enumerate() {
            if let Some(r) = r.take() {
                put_start(h, racing[x], r, frozen, path, sink);
            }
        }
        step_before_submission(h, j, frozen, path, sink);
    }
    late_observers(h, first_new, frozen, path, sink);
    late_load_readers(h, first_new, frozen, path, sink);
    shared_line_writebacks(h, first_new, frozen, path, sink);
}

/// A step that writes back every engine's dirty lines (a wait for idle that passes, the end
/// of the run) writes a line that several queues hold dirty once per queue, in a fixed order:
/// memory keeps the last one's words. The two write-backs are parts of one step, so no race
/// of the run reverses them; another queue's words are kept when the last one's line was
/// written back on its own before the step. So the last one's write-back actor, enabled at
/// the step's point (its line is dirty there), starts a branch there; that run's step keeps
/// the next one's words, and so on (generated seed 1117: a copy and a dispatch of another
/// queue writing one line, with a signal of a third queue beside them).
fn shared_line_writebacks(
    h: &History,
    first_new: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let n = h.events.len();
    let mut k = first_new;
    while k < n {
        let p = h.events[k].point;
        let mut end = k;
        while end < n && h.events[end].point == p {
            end += 1;
        }
        // The step's write-backs, in the order made; for each line written back from more
        // than one queue, the last of them.
        let first = k;
        k = end;
        let wbs: Vec<(u32, u64)> = (first..end)
            .filter_map(|x| match h.events[x].actor {
                ActorKey::Writeback(q, line) => Some((q, line)),
                _ => None,
            })
            .collect();
        if wbs.len() < 2 {
            continue;
        }
        let Some(node) = path.get(p) else {
            continue;
        };
        if p < frozen || !node.point.scheduling {
            continue;
        }
        // Per line: a queue that writes it back in the step, whether another one does too,
        // and the last of its write-backs (the end of a run with a large dispatch's lines
        // dirty writes back thousands: comparing each with every other was the square).
        let mut lines: rustc_hash::FxHashMap<u64, (u32, bool, usize)> = Default::default();
        for (x, &(q, line)) in wbs.iter().enumerate() {
            let e = lines.entry(line).or_insert((q, false, x));
            e.1 |= e.0 != q;
            e.2 = x;
        }
        let mut starts = Vec::new();
        for (x, &(q, line)) in wbs.iter().enumerate() {
            let (_, shared, last) = lines[&line];
            let later = last != x;
            let aj = ActorKey::Writeback(q, line);
            if later || !shared || !node.point.actors.contains(&aj) || node.asleep(aj) {
                continue;
            }
            starts.push(aj);
        }
        for aj in starts {
            let r = Reversal {
                initials: vec![aj],
                sequence: Vec::new(),
            };
            put_start(h, first, r, frozen, path, sink);
        }
    }
}

/// Whether `i`'s race with the later `j` is one some schedule could reverse: two actors, not
/// two parts of one step (an action and the PFP steps or write-backs it brought about), a
/// conflict that does not order them in every schedule (`Footprint::races`), and no other
/// part of `i`'s step ordering `j` in every schedule.
fn reversible(h: &History, i: usize, j: usize) -> bool {
    reversible_in(h, i, j, &mut StepPins::default())
}

/// [`reversible`], with what [`StepPins::pinned`] found of `i`'s step kept in `pins` for the
/// next `i` of the same step and the same `j` (the end of a run writes back thousands of
/// lines in one step: looking at all of them for each race was the square).
fn reversible_in(h: &History, i: usize, j: usize, pins: &mut StepPins) -> bool {
    h.events[i].actor != h.events[j].actor
        && h.events[i].point != h.events[j].point
        && h.races(i, j)
        && !pins.pinned(h, i, j)
        && !after_quiescence(h, i, j)
}

/// The events of one step that order a later `j` in every schedule, for one `j`: at most two
/// (one other than any `i` is all a race asks for). [`StepPins::pinned`] is whether another
/// part of `i`'s step (the events recorded at its point: an action with the PFP steps and
/// write-backs it brought about) orders `j` in every schedule (a conflict that no schedule
/// reverses, as a host's read after waiting for the step's signal): `j` cannot come before
/// the step, so its race with `i` reverses in no schedule.
#[derive(Default)]
struct StepPins {
    /// The step's first event, `j`, and its pinning events.
    step: Option<(usize, usize, smallvec::SmallVec<[usize; 2]>)>,
}

impl StepPins {
    /// Whether another part of `i`'s step orders `j` in every schedule.
    fn pinned(&mut self, h: &History, i: usize, j: usize) -> bool {
        let (first, last) = step_of(h, i, j);
        let pins =
            |s: usize| h.dependent(s, j) && !h.events[s].footprint.races(&h.events[j].footprint);
        if last - first < SMALL_STEP {
            return (first..=last).any(|s| s != i && pins(s));
        }
        let known = matches!(&self.step, Some((f, jj, _)) if *f == first && *jj == j);
        if !known {
            let mut found = smallvec::SmallVec::new();
            for s in first..=last {
                if pins(s) {
                    found.push(s);
                    if found.len() == 2 {
                        break;
                    }
                }
            }
            self.step = Some((first, j, found));
        }
        self.step
            .as_ref()
            .is_some_and(|(_, _, found)| found.iter().any(|&s| s != i))
    }
}

/// Whether `j` is the wake of a host wait that timed out at a quiescence of the run (nothing
/// could run, [`Obj::Quiet`]) that came after `i`: `j` could not run before `i` in any
/// schedule. Before `i` the actor of `i` could run (or what let it run had not run), so there
/// was no quiescence; a schedule where one comes sooner, before `i`, differs in something
/// else first: an action that disabled `i`'s actor (a write that makes a wait fail again:
/// [`add_disabled`] explores the disabled action before it) or that kept it from being
/// enabled (its own race). The wakes of one quiescence are ordered only by what they touch,
/// as are the actions of a released host after its wake and the wakes it runs beside.
fn after_quiescence(h: &History, i: usize, j: usize) -> bool {
    let Some(n) = h.events[j].footprint.quiescence() else {
        return false;
    };
    // The quiescence came just before the first wake it released (nothing else could run):
    // after `i` when no event up to `i` is one of its wakes.
    !(0..=i).any(|x| h.events[x].footprint.quiescence() == Some(n))
}

/// Who could start the reversal of `i`'s race with `j` ([`reversal_starts`], else the line's
/// [`early_writeback`]).
fn start_of(h: &History, i: usize, needs: &NeedsOf, path: &[Node]) -> Option<Reversal> {
    let j = needs.j;
    reversal_starts(h, i, needs, path).or_else(|| early_writeback(h, i, j, path))
}

/// Adds reversal `r` of a race of `i` at `i`'s point, unless that point is frozen (the
/// caller explores every alternative there) or not a scheduling point.
fn put_start(
    h: &History,
    i: usize,
    r: Reversal,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let pi = h.events[i].point;
    if pi >= frozen && path.get(pi).is_some_and(|n| n.point.scheduling) {
        sink.put(r.op(pi), path);
    }
}

/// Follows `seq` (the rest of a race's reversing sequence, [`Reversal`]) down the nodes of
/// the run just made (`events`), from node `from` on, as optimal DPOR inserts a sequence
/// into a wakeup tree: a step of the sequence's next actor, or of an actor whose step
/// conflicts with none of the sequence's steps before that actor's (with none at all when
/// the actor is not in it), leaves the sequence to follow after it (that actor's step taken
/// out of it). At the first step that does not, the run left the sequence. If the race is
/// still in the run ([`race_stays`]), the run's own races reverse it (source-DPOR);
/// otherwise the rest is explored there ([`Op::Plant`]).
fn plant(
    seq: &[(ActorKey, Footprint)],
    from: usize,
    events: &[Event],
    path: &mut [Node],
    sink: &mut Sink,
) {
    let mut rest: Vec<(ActorKey, Footprint)> = seq.to_vec();
    for d in from..path.len() {
        if rest.is_empty() {
            return;
        }
        let n = &path[d];
        if !n.point.scheduling {
            continue;
        }
        let Some(t) = n.taken_actor() else {
            return;
        };
        let x = rest.iter().position(|(a, _)| *a == t);
        let before = &rest[..x.unwrap_or(rest.len())];
        let fp = step_footprint(events, d);
        if before.iter().any(|(_, f)| f.conflicts(&fp)) {
            if race_stays(&rest, d, events, path) {
                return;
            }
            let sequence = rest.into();
            sink.put(Op::Plant { at: d, sequence }, path);
            return;
        }
        if let Some(x) = x {
            rest.remove(x);
        }
    }
}

/// Whether the race that `rest` reverses (its last step's with the one before) is still in
/// the run from node `d` on: the last step's actor's next step there conflicts with the
/// step before it in `rest`. Then the run's own races reverse it; otherwise the step
/// took another shape in this run (a submission's run-ahead that the queue stops short of
/// the memory it raced on), and only the sequence brings it back.
fn race_stays(rest: &[(ActorKey, Footprint)], d: usize, events: &[Event], path: &[Node]) -> bool {
    let [.., (_, fj), (ai, _)] = rest else {
        return true;
    };
    (d..path.len())
        .find(|&k| {
            let n = &path[k];
            n.point.scheduling && n.taken_actor() == Some(*ai)
        })
        .is_some_and(|k| step_footprint(events, k).conflicts(fj))
}

/// The union of the footprints of the events at point `p` (a step: the chosen action and
/// what it brought about).
pub(super) fn step_footprint(events: &[Event], p: usize) -> Footprint {
    let first = events.partition_point(|e| e.point < p);
    let mut all = Vec::new();
    for e in events[first..].iter().take_while(|e| e.point == p) {
        all.extend_from_slice(e.footprint.accesses());
    }
    Footprint::new(all)
}

/// `j` is a PFP step that another actor's step brought about (strict mode's eager run-ahead
/// after the action chosen at its point), and it takes a submission (or anything else it
/// needs in every schedule, a forced dependence) that an earlier action `i` made: the step's
/// chosen action, independent of `i`, could also run before `i`, and then the PFP's run-ahead
/// after it stops short of what `i` submits. No race reverses into that schedule (the forced
/// dependence is not one), so the search also runs the chosen action before `i` (a queue's
/// retirement before the host's next submission: the ME then executes the earlier work before
/// the PFP takes the later, and a host read after that submission can see it).
fn step_before_submission(
    h: &History,
    j: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let ej = &h.events[j];
    let pj = ej.point;
    let Some(node) = path.get(pj) else {
        return;
    };
    let ActorKey::Pfp(q) = ej.actor else {
        return;
    };
    if !node.point.scheduling {
        return;
    }
    let Some(chosen_actor) = node.taken_actor() else {
        return;
    };
    if chosen_actor == ej.actor {
        return;
    }
    // The chosen action's event: the first of the step's.
    let Some(c) = (0..j)
        .rev()
        .take_while(|&x| h.events[x].point == pj)
        .filter(|&x| h.events[x].actor == chosen_actor)
        .last()
    else {
        return;
    };
    for i in 0..c {
        let ei = &h.events[i];
        if ei.actor == ej.actor
            || ei.actor == chosen_actor
            || ei.point >= pj
            || ei.point < frozen
            || !h.preds[j].contains(i)
            || h.preds[c].contains(i)
            || !h.dependent(i, j)
            || ei.footprint.races(&ej.footprint)
            || !path.get(ei.point).is_some_and(|n| n.point.scheduling)
        {
            continue;
        }
        // The chosen action alone before the submission lets an action that needs it run
        // before the run-ahead that takes the submission, which is otherwise glued to it in
        // one step. That matters only for an action after the chosen one (not a part of its
        // step: its write-backs, other PFPs' run-ahead) that races with the run-ahead's own
        // events of the step (a host's write after a fence the chosen action signalled, read
        // by the PFP's arrival at a wait); a race with a later event the search reverses as
        // any other, the run-ahead glued to the chosen action. Not the end of the run (it
        // comes after all work in every schedule), nor a host's wait for every queue to be
        // idle that passes ([`needs_idle`]: it follows the run-ahead's take of a submission
        // made before it in every schedule), nor the wake of a host wait that a
        // quiescence after the step timed out ([`after_quiescence`]: no schedule puts it
        // before the run-ahead either), nor an early write-back that the step
        // meets only in the queue's dirty words or read cache (a Q7 boundary making the words
        // visible to the CP, an invalidation: the write-back leaves the same words and values
        // either way), not in memory.
        let moves = (c + 1..h.events.len()).any(|x| {
            let ex = &h.events[x];
            ex.point != pj
                && h.preds[x].contains(c)
                && ex.actor != ej.actor
                && !ex.footprint.has((Obj::Settled, Kind::Read))
                && !needs_idle(h, x, q)
                && !after_quiescence(h, c, x)
                && (j..h.events.len())
                    .take_while(|&k| h.events[k].point == pj)
                    .any(|k| {
                        h.events[k].actor == ej.actor
                            && h.races(k, x)
                            && (!matches!(ex.actor, ActorKey::Writeback(..))
                                || meets_memory(&h.events[k].footprint, &ex.footprint))
                            && !unread_load(h, k, x)
                            && !pinned_after(h, k, x)
                    })
        });
        if !moves {
            continue;
        }
        if let Some(r) = reversal_starts(h, i, &NeedsOf::new(h, c), path) {
            sink.put(r.op(ei.point), path);
        }
    }
}

/// Whether `x` follows `k` in every schedule through a chain of orders that no schedule
/// reverses: each event of the chain after an earlier one of its actor (program order) or
/// after one it conflicts with in an order every schedule keeps ([`Footprint::races`] false:
/// the queue's plumbing, an await). A PFP's pass of a queue wait and a group of a dispatch
/// behind that wait: the PFP parses the dispatch after the wait, the ME launches it after the
/// PFP pushed it, the group runs after the launch.
fn pinned_after(h: &History, k: usize, x: usize) -> bool {
    // (Happens-before holds only earlier events: `x` after `k`.)
    if !h.preds[x].contains(k) {
        return false;
    }
    let mut chain = Bits::default();
    chain.insert(k);
    for e in k + 1..=x {
        // A link of the chain comes after `k` and, but for `x` itself, before `x`.
        if !h.preds[e].contains(k) || (e != x && !h.preds[x].contains(e)) {
            continue;
        }
        let fe = &h.events[e];
        let on = chain.ones(k, e).any(|p| {
            h.events[p].actor == fe.actor
                || h.dependent(p, e) && !h.events[p].footprint.races(&fe.footprint)
        });
        if on {
            chain.insert(e);
        }
    }
    chain.contains(x)
}

/// Whether two footprints touch common memory bytes.
fn meets_memory(a: &Footprint, b: &Footprint) -> bool {
    a.accesses().iter().any(|&(oa, _)| {
        matches!(oa, Obj::Mem(..))
            && b.accesses()
                .iter()
                .any(|&(ob, _)| matches!(ob, Obj::Mem(..)) && oa.overlaps(ob))
    })
}

/// Whether an action with this footprint is a host's wait for every queue to be idle that
/// passes or that a hang releases (it awaits the queues' completions).
fn awaits_idle(f: &Footprint) -> bool {
    f.accesses()
        .iter()
        .any(|&(o, k)| matches!(o, Obj::Idle(_)) && k == Kind::Await)
}

/// Whether event `j` comes after every retirement and dispatch group of queue `q` submitted
/// before it, and reverses no race with them: a host's wait for idle that passes or that a
/// hang releases ([`awaits_idle`]), or the wait for the end of the run ([`Obj::Settled`],
/// passing or released by a removal) when it wrote nothing back. An end of the run that wrote dirty lines
/// back keeps those races: the host's reads before it race with those write-backs, but its
/// own next action, which no schedule puts first, orders the write-backs after them
/// ([`reversal_starts`]: that race is left to a race there is not), and the early
/// write-backs before the reads are what the reversals of those races with the groups and
/// retirements explore
/// (`d4_regression_strict_the_end_of_the_run_that_writes_back_keeps_its_races`).
fn needs_idle(h: &History, j: usize, q: u32) -> bool {
    let f = &h.events[j].footprint;
    if f.has((Obj::Idle(q), Kind::Await)) {
        return true;
    }
    let p = h.events[j].point;
    let alone = |k: Option<&Event>| k.is_none_or(|e| e.point != p);
    f.has((Obj::Settled, Kind::Read))
        && alone(j.checked_sub(1).map(|k| &h.events[k]))
        && alone(h.events.get(j + 1))
}

/// A race of `i`, a write-back that another actor's step did (a release, an atomic or a CP
/// write that cleans a dirty line records it as an action of the line's write-back actor, at
/// the step's point): reversing the race puts the later event before the whole step, but the
/// line can also be written back on its own, early, at that point, so that the later event
/// comes after this line's write-back and before the others'. No race of the run reverses
/// into that schedule, so the line's early write-back is explored at the step's point (unless
/// it sleeps there: then a sibling explored it). Only when the step orders `j` directly: when
/// `j` follows the step through another event, it cannot come before the step's other parts
/// (a run that reverses that chain first finds the race direct). `i`'s race with `j` is one
/// of `add_backtracks`' (no other part of the step orders `j` in every schedule).
fn split_writeback(
    h: &History,
    i: usize,
    j: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let e = &h.events[i];
    if !matches!(e.actor, ActorKey::Writeback(..)) || e.point < frozen {
        return;
    }
    let (first, last) = step_of(h, i, j);
    let through = (last + 1..j)
        .any(|k| h.preds[j].contains(k) && (first..=last).any(|s| h.preds[k].contains(s)));
    if through {
        return;
    }
    let Some(node) = path.get(e.point) else {
        return;
    };
    if !node.point.scheduling {
        return;
    }
    let Some(taken) = node.point.taken else {
        return;
    };
    if node.actor_of(taken) == Some(e.actor) || polled_after_step(h, node, first, last, j) {
        return;
    }
    let op = Op::Split {
        at: e.point,
        actor: e.actor,
    };
    sink.put(op, path);
}

/// Whether `j` is a host's action that began with the pass of a poll that only the step
/// `first..=last` (at `node`'s point) let pass: the host's action before `j` came before the
/// step, so at the step's point it waited in that poll, and it was not listed there (the
/// poll's condition did not hold); the polled bytes lie in no line the step writes back, and
/// a part of the step other than its write-backs wrote them (a bottom-of-pipe write of the
/// flag with `l2-writeback`). An early write-back of one of those lines writes only that
/// line's memory, so the poll still does not pass after it: `j` cannot come between it and
/// the rest of the step, and the split would only add classes with the same outcome (three
/// queues chained by memory words, the consumer's 16 lines released with the flag the host
/// polls: 65,538 strict schedules without this, 2^16 + 2). A host whose poll passes on bytes
/// that something before the step wrote is listed at the step's point and keeps the split
/// (a host's queue wait, whose registration reads the release's fence but does not wait,
/// keeps it too: generated seed 2584).
fn polled_after_step(h: &History, node: &Node, first: usize, last: usize, j: usize) -> bool {
    let ej = &h.events[j];
    let (Some((start, end)), ActorKey::Host(_)) = (ej.polled, ej.actor) else {
        return false;
    };
    if h.prev_same(j).is_some_and(|p| p >= first) || node.point.actors.contains(&ej.actor) {
        return false;
    }
    let polled = Obj::Mem(start, end);
    let steps = &h.events[first..=last];
    let in_line = steps.iter().any(|s| {
        matches!(s.actor, ActorKey::Writeback(_, line)
            if line_memory(line).overlaps(polled))
    });
    !in_line
        && steps.iter().any(|s| {
            !matches!(s.actor, ActorKey::Writeback(..))
                && s.footprint
                    .accesses()
                    .iter()
                    .any(|&(o, k)| k == Kind::Write && o.overlaps(polled))
        })
}

/// A race of `i` with `j`, a line's write-back that another actor's step did (a release or
/// the end of the run writes the dirty lines back) and that no schedule puts before `i` as it
/// is (`i`'s actor orders that step after `i`: [`reversal_starts`] found none): the line
/// could also have been written back on its own, early, before `i`, where its write-back
/// actor is already enabled (the queue wrote the line before `i`). No race of the run
/// reverses into that schedule (a host's read of the line between a queue's write of it and
/// the end of the run sees the write only then), so the write-back actor starts one at `i`'s
/// point (generated seed 455).
fn early_writeback(h: &History, i: usize, j: usize, path: &[Node]) -> Option<Reversal> {
    let aj = h.events[j].actor;
    if !matches!(aj, ActorKey::Writeback(..)) {
        return None;
    }
    let taken_at = |p: usize| path.get(p).and_then(|n| n.taken_actor());
    if taken_at(h.events[j].point) == Some(aj) {
        return None;
    }
    // Only an access of the line's memory from outside the cache that holds it sees whether
    // the line was written back before it: a host's read or write, another queue's. A write
    // of the line through that cache (its queue's task or CP) leaves the order of the
    // write-backs to the rules on write-backs nobody reads ([`unobserved_writeback`]).
    let ActorKey::Writeback(q, line) = aj else {
        return None;
    };
    let fi = &h.events[i].footprint;
    if !sees(fi, q, line) || fi.has((Obj::Line(q, line), Kind::Write)) {
        return None;
    }
    let node = path.get(h.events[i].point)?;
    if !node.point.actors.contains(&aj) || node.asleep(aj) {
        return None;
    }
    Some(Reversal {
        initials: vec![aj],
        sequence: Vec::new(),
    })
}

/// Whether the race of `i` and `j` is between a strict-mode line's write-back (an event of
/// actor `Writeback(q, line)`) and an action that only writes that line through the same
/// queue's cache (a task's or the CP's write: it writes the line and touches no memory of it
/// otherwise) or only changes what that queue's CP sees of its dirty words or its read cache,
/// that nobody can see: no event after the write-back touches the line's memory (other than
/// such writes) before the line is next written back whole (the actor's own next step, a
/// wait for idle that passes, the end of the run). Either order of the two leaves the same
/// memory at that next write-back, so the reversal would only move an early write-back that
/// nobody reads (docs/exploration.md, "Write-backs nobody reads"). The same holds for a
/// write-back and a later wait for idle that writes every line back first. A reader in
/// between (another queue, a host, the line's own queue reading it back) keeps the race; one
/// that a later run puts there reverses it then ([`late_observers`]). The dependence stays
/// in happens-before.
fn unobserved_writeback(h: &History, i: usize, j: usize) -> bool {
    let Some((w, t)) = writeback_pair(h, i, j) else {
        return false;
    };
    if w < t && writes_back_first(&h.events[t].footprint) {
        // The line's write-back before a wait for idle that writes every dirty line back
        // first, or after it (none: it found the line clean), leaves the same memory to
        // whatever reads after it; a read between the two races with the write-back itself.
        return true;
    }
    through_cache(h, w, t) && window(h, w).0
}

/// Whether a footprint touches a queue's strict-mode read cache (drops it, or reads lines it
/// may load): only such an event can be one of a [`load_pair`].
fn touches_cache(f: &Footprint) -> bool {
    f.accesses()
        .iter()
        .any(|&(o, _)| matches!(o, Obj::Cache(_) | Obj::Loaded(..)))
}

/// `(r, c, q)` when `i` and `j` conflict only in queue `q`'s strict-mode read cache: one
/// (`r`, a task's read) reads lines it may load ([`Obj::Loaded`]) and the other (`c`) drops
/// the cache ([`Obj::Cache`]).
fn load_pair(h: &History, i: usize, j: usize) -> Option<(usize, usize, u32)> {
    let cache_of = |e: usize| {
        h.events[e]
            .footprint
            .accesses()
            .iter()
            .find_map(|&(o, k)| match o {
                Obj::Cache(q) if k == Kind::Write => Some(q),
                _ => None,
            })
    };
    let (r, c, q) = match (cache_of(i), cache_of(j)) {
        (Some(q), None) => (j, i, q),
        (None, Some(q)) => (i, j, q),
        _ => return None,
    };
    let (fr, fc) = (&h.events[r].footprint, &h.events[c].footprint);
    if fr.is_removal() || fc.is_removal() {
        return None;
    }
    let only_cache = fr.accesses().iter().all(|&(o1, k1)| {
        matches!(o1, Obj::Loaded(q1, _) if q1 == q)
            || !fc
                .accesses()
                .iter()
                .any(|&(o2, k2)| crate::footprint::kinds_conflict(k1, k2) && o1.overlaps(o2))
    });
    only_cache.then_some((r, c, q))
}

/// Whether the race of `i` and `j` is a task's read of lines of queue `q` (`r`) and an
/// invalidation of `q`'s read cache (`c`) whose order nobody sees: for every line the read
/// loads, the cache held no snapshot of it before the two ([`load_window`]), so the read
/// returns memory either way, and no read of the line by `q` comes after them before the
/// cache is dropped again: the snapshot the read leaves when it comes second is never read.
/// Either order then leaves the same memory, values and snapshots that anybody reads
/// (docs/exploration.md, "Loads nobody reads"). A reader that a later run puts in the
/// window reverses the race then ([`late_load_readers`]).
fn unread_load(h: &History, i: usize, j: usize) -> bool {
    let Some((r, c, q)) = load_pair(h, i, j) else {
        return false;
    };
    loaded_lines(h, r, q).all(|line| load_window(h, r, c, q, line).0)
}

/// The lines of queue `q` whose snapshot event `r` reads.
fn loaded_lines(h: &History, r: usize, q: u32) -> impl Iterator<Item = u64> + '_ {
    h.events[r]
        .footprint
        .accesses()
        .iter()
        .filter_map(move |&(o, k)| match o {
            Obj::Loaded(p, line) if p == q && k == Kind::Read => Some(line),
            _ => None,
        })
}

/// Whether nobody sees the order of read `r` and invalidation `c` in queue `q`'s snapshot
/// of `line`, and the index of the event that decided it (none: the run's start or end).
/// Before the two, back to the queue's last invalidation, no read of the line (the cache
/// held no snapshot of it: a task's write or atomic updates one and loads none); between
/// them, none (the read first leaves its snapshot there, the invalidation first none); after
/// them, none before the next invalidation (the read second leaves its snapshot there, and
/// the hazard model's record of the read's invalidation generation, which a later read of
/// the word in that generation compares for `stale-cache`).
fn load_window(h: &History, r: usize, c: usize, q: u32, line: u64) -> (bool, Option<usize>) {
    let (lo, hi) = (r.min(c), r.max(c));
    let bits = crate::footprint::object_bits(Obj::Cache(q));
    let reads = (Obj::Loaded(q, line), Kind::Read);
    let drops = (Obj::Cache(q), Kind::Write);
    for k in (0..lo).rev() {
        let m = h.masks[k].0;
        if (m[0] | m[1] | m[2]) & bits == 0 {
            continue;
        }
        let f = &h.events[k].footprint;
        if f.has(drops) {
            break;
        }
        if f.has(reads) {
            return (false, Some(k));
        }
    }
    for k in lo + 1..h.events.len() {
        let m = h.masks[k].0;
        if k == hi || (m[0] | m[1] | m[2]) & bits == 0 {
            continue;
        }
        let f = &h.events[k].footprint;
        if f.has(reads) || f.is_removal() {
            return (false, Some(k));
        }
        if k > hi && f.has(drops) {
            return (true, Some(k));
        }
    }
    (true, None)
}

/// The races of a task's read and an invalidation that an earlier run found unread
/// ([`unread_load`]) and that an event new in this run reads (the run shares the two with
/// the earlier one and puts a read of the line before the next invalidation): they are
/// reversed now.
fn late_load_readers(
    h: &History,
    first_new: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    let has = |e: usize, f: fn(Obj, Kind) -> bool| {
        h.events[e]
            .footprint
            .accesses()
            .iter()
            .any(|&(o, k)| f(o, k))
    };
    let loads = |e: usize| has(e, |o, k| matches!(o, Obj::Loaded(..)) && k == Kind::Read);
    if !(first_new..h.events.len()).any(loads) {
        return;
    }
    let reads: Vec<usize> = (0..first_new).filter(|&e| loads(e)).collect();
    let drops =
        (0..first_new).filter(|&e| has(e, |o, k| matches!(o, Obj::Cache(_)) && k == Kind::Write));
    for c in drops {
        let mut seen_late = false;
        for &x in &reads {
            let (i, j) = (c.min(x), c.max(x));
            // The read's order with invalidation `c` was unseen, and a new event reads what
            // it left.
            let late = x != c
                && load_pair(h, i, j).is_some_and(|(r, c2, q)| {
                    c2 == c
                        && loaded_lines(h, r, q).any(|line| {
                            matches!(load_window(h, r, c, q, line), (false, Some(k)) if k >= first_new)
                        })
                });
            if !late {
                continue;
            }
            seen_late = true;
            if direct_race(h, i, j) {
                if let Some(rev) = start_of(h, i, &NeedsOf::new(h, j), path) {
                    put_start(h, i, rev, frozen, path, sink);
                }
            }
        }
        // An invalidation by a PFP's run-ahead whose race with a read nobody saw kept the
        // search from running the step alone before that run-ahead
        // ([`step_before_submission`]): a new reader in the window makes it run it now.
        if seen_late {
            step_before_submission(h, c, frozen, path, sink);
        }
    }
}

/// Whether `i` races directly with the later `j`: `i` happens before `j` but not before (or
/// at) the previous event of `j`'s actor, and some schedule could reverse the two
/// ([`reversible`]). The races that [`add_backtracks`] finds among the new events, for a
/// pair of older events that a new one made worth reversing.
fn direct_race(h: &History, i: usize, j: usize) -> bool {
    h.preds[j].contains(i)
        && !h
            .prev_same(j)
            .is_some_and(|p| p == i || h.rel(p).contains(i))
        && reversible(h, i, j)
}

/// `(w, t)` when one of `i` and `j` is a line's write-back (`w`) and the other (`t`) is not.
fn writeback_pair(h: &History, i: usize, j: usize) -> Option<(usize, usize)> {
    match (h.events[i].actor, h.events[j].actor) {
        (ActorKey::Writeback(..), ActorKey::Writeback(..)) => None,
        (ActorKey::Writeback(..), _) => Some((i, j)),
        (_, ActorKey::Writeback(..)) => Some((j, i)),
        _ => None,
    }
}

/// The memory of the strict-mode cache line that starts at `line`.
fn line_memory(line: u64) -> Obj {
    Obj::Mem(line, line + crate::hazard::strict::LINE)
}

/// Whether an action touches the memory of line `line` of queue `q` other than as a write
/// through that queue's cache (which comes with a write of the line: its memory write stands
/// for the bytes it will write back; or a release's write-back of the queue's dirty words,
/// which comes with a write of them as a whole) or as a read by that queue's task (which
/// comes with a read of the queue's view of the line, and no read of the line as the CP
/// reads it: it returns the queue's own dirty words, or the same values from memory once
/// they were written back, so it sees nothing of when that was).
fn sees(f: &Footprint, q: u32, line: u64) -> bool {
    let (start, end) = (line, line + crate::hazard::strict::LINE);
    let kinds = f.kind_bits();
    // Most footprints touch nothing of the line: their bits tell, before the searches below.
    if (kinds[0] | kinds[1] | kinds[2]) & crate::footprint::object_bits(Obj::Mem(start, end)) == 0 {
        return false;
    }
    // Everything: any kind's bits all set, then the search.
    let all = crate::footprint::object_bits(Obj::All);
    if kinds.contains(&all)
        && [Kind::Read, Kind::Update, Kind::Write, Kind::Await]
            .into_iter()
            .any(|k| f.has((Obj::All, k)))
    {
        return true;
    }
    // The line's memory, by kind (a binary search each: a long dispatch step's footprint
    // holds thousands of ranges): a read other than a task's through its view, a write other
    // than through the cache.
    let through_view =
        || f.has((Obj::View(q, line), Kind::Read)) && !f.has((Obj::Line(q, line), Kind::Read));
    (f.meets_memory(Kind::Read, start, end) && !through_view())
        || f.meets_memory(Kind::Await, start, end)
        || f.meets_memory(Kind::Update, start, end)
        || (f.meets_memory(Kind::Write, start, end)
            && !(f.has((Obj::Line(q, line), Kind::Write)) || f.has((Obj::Dirty(q), Kind::Write))))
}

/// Whether `t` only writes `w`'s line through the queue's cache or changes the queue's own
/// view of its dirty words or its read cache: no access of it but those meets `w`'s.
fn through_cache(h: &History, w: usize, t: usize) -> bool {
    let ActorKey::Writeback(q, line) = h.events[w].actor else {
        return false;
    };
    let ft = &h.events[t].footprint;
    !ft.is_removal() && !sees(ft, q, line) && !ft.changes_device()
}

/// Whether nobody sees write-back `w`'s line between it and the line's next whole
/// write-back, and the index of the event that decided it (none: the run's end).
fn window(h: &History, w: usize) -> (bool, Option<usize>) {
    match h.windows.get(w) {
        Some(c) => *c.get_or_init(|| window_of(h, w)),
        None => window_of(h, w),
    }
}

/// [`window`], worked out.
fn window_of(h: &History, w: usize) -> (bool, Option<usize>) {
    let actor = h.events[w].actor;
    let ActorKey::Writeback(q, line) = actor else {
        return (false, None);
    };
    // The line's memory as bits: an event whose accesses meet none of them does not touch it.
    let bits = crate::footprint::object_bits(line_memory(line));
    // The tasks whose words an early write-back wrote (none for another action's clean).
    let pending = h.events[w]
        .footprint
        .accesses()
        .iter()
        .find_map(|&(o, _)| match o {
            Obj::Pending(p, d, c) if p == q => Some((d, c)),
            _ => None,
        });
    // The writes that can matter besides: of the line itself (a write through the cache, for
    // `rewritten`) and of the queue's dirty words as a whole (a release, which records its
    // `Release` with that write; their bits hold the line's).
    let line_bits = crate::footprint::object_bits(Obj::Line(q, line));
    // The same with the second bits ([`History::again`], kept from [`AGAIN_FROM`] events).
    let bits_again = crate::footprint::object_bits_again(line_memory(line));
    let line_again = crate::footprint::object_bits_again(Obj::Line(q, line));
    let untouched = |m: [u64; 3], bits: u64, written: u64| {
        (m[0] | m[1] | m[2]) & bits == 0 && m[2] & written == 0
    };
    // The line's addresses ([`History::spans`]): the span of an event that touches the line's
    // memory, writes the line or the dirty words as a whole, or touches everything, meets
    // them.
    let line_end = line.saturating_add(crate::hazard::strict::LINE - 1);
    // Whether the queue wrote the line again since `w`.
    let mut rewritten = false;
    // The events after `w`: in a long run only those whose spans may meet the line (the
    // line's own write-backs among them: they write the line), the rest being passed over
    // below anyway.
    let indexed = (!h.spans.is_empty()).then(|| {
        h.by_line
            .get_or_init(|| LineIndex::new(&h.spans))
            .after(w, line)
    });
    let every = indexed.is_none().then(|| w + 1..h.events.len());
    for k in indexed
        .into_iter()
        .flatten()
        .chain(every.into_iter().flatten())
    {
        let e = &h.events[k];
        if e.actor != actor
            && (untouched(h.masks[k].0, bits, line_bits)
                || h.again
                    .get(k)
                    .is_some_and(|&a| untouched(a, bits_again, line_again))
                || h.spans
                    .get(k)
                    .is_some_and(|&(lo, hi)| hi < line || line_end < lo))
        {
            continue;
        }
        if e.actor == actor {
            // The line's next whole write-back: the actor's own step, or another action's
            // clean of the line (a release, a wait for idle, a CP write, an atomic), which
            // leaves no word of it dirty. Either order of `w` and a write through the cache
            // between them leaves the same memory after it: the words dirty at `w`, with
            // the later writes' over them (a CP write or an atomic that cleaned a word puts
            // its value over both).
            return (true, Some(k));
        }
        let fe = &e.footprint;
        if let Some((d, c)) = pending {
            if !rewritten
                && fe.accesses().iter().any(
                    |&(o, _)| matches!(o, Obj::Release(r, rd, rc) if r == q && d <= rd && c <= rc),
                )
            {
                // A release of the queue that covers every task whose words `w` wrote, with
                // no write of the line since: without `w` it would have written the same
                // words back, so it ends the window as the line's next whole write-back.
                return (true, Some(k));
            }
        }
        if !sees(fe, q, line) {
            rewritten |= fe.has((Obj::Line(q, line), Kind::Write));
            continue;
        }
        // The next whole write-back: a wait for idle that passes (or the end of the run)
        // starts by writing back every engine's dirty words; what it reads comes after.
        // Anything else that touches the line's memory sees it.
        return (writes_back_first(fe), Some(k));
    }
    // Nothing read the line after the write-back to the end of the run. A run stopped
    // asleep ends early, but any way it could go on is equivalent to a run explored in
    // another branch, with the same write-back and the same readers after it in the same
    // order (each reader conflicts with the write-back): that run's analysis sees them.
    (true, None)
}

/// The races of write-backs with writes through the cache that an earlier run found
/// unobserved ([`unobserved_writeback`]) and that an event new in this run observes (the
/// run shares the two with the earlier one, and puts a reader between the write-back and
/// the line's next whole write-back): they are reversed now.
fn late_observers(
    h: &History,
    first_new: usize,
    frozen: usize,
    path: &mut [Node],
    sink: &mut Sink,
) {
    // What the new events touch, as bits: a write-back whose writes meet none of them has no
    // new reader (the quick test before the window).
    let touched = h.masks[first_new.min(h.masks.len())..]
        .iter()
        .fold(0, |a, m| a | m.0[0] | m.0[1] | m.0[2]);
    for w in 0..first_new {
        if !matches!(h.events[w].actor, ActorKey::Writeback(..)) || h.masks[w].0[2] & touched == 0 {
            continue;
        }
        let (unobserved, at) = window(h, w);
        if unobserved || at.is_none_or(|k| k < first_new) {
            continue;
        }
        for t in 0..first_new {
            let (i, j) = if t < w { (t, w) } else { (w, t) };
            if t == w || !direct_race(h, i, j) || !through_cache(h, w, t) {
                continue;
            }
            split_writeback(h, i, j, frozen, path, sink);
            if let Some(r) = start_of(h, i, &NeedsOf::new(h, j), path) {
                put_start(h, i, r, frozen, path, sink);
            }
        }
    }
}

/// Whether an action starts by writing back every engine's dirty words, before anything it
/// reads: a host's wait for every queue to be idle that passes (its pass is a scheduling
/// point of its own, and it writes back first: `host_wait_idle`), or the end of the run.
fn writes_back_first(f: &Footprint) -> bool {
    !f.is_removal()
        && (f.has((Obj::Settled, Kind::Read)) || f.has((Obj::All, Kind::Write)) && awaits_idle(f))
}

/// The first and last events of `i`'s step (the events recorded at its point, which are
/// consecutive), before `j`.
fn step_of(h: &History, i: usize, j: usize) -> (usize, usize) {
    // The events are in the order of their points: a few looked at, then a binary search
    // (the end of a run writes back thousands of lines in one step, and each of their races
    // asks for it).
    let p = h.events[i].point;
    let near = i.saturating_sub(SMALL_STEP);
    let first = match (near..i).rev().find(|&x| h.events[x].point != p) {
        Some(x) => x + 1,
        None => h.events[..=near].partition_point(|e| e.point < p),
    };
    let hi = j.max(i + 1);
    let near = (i + SMALL_STEP).min(hi);
    let end = match (i..near).find(|&x| h.events[x].point != p) {
        Some(x) => x,
        None => near + h.events[near..hi].partition_point(|e| e.point <= p),
    };
    debug_assert!((first..end).all(|x| h.events[x].point == p));
    debug_assert!(first == 0 || h.events[first - 1].point != p);
    debug_assert!(end == hi || h.events[end].point != p);
    (first, end - 1)
}

/// The events of a step looked at one by one before a binary search ([`step_of`]), or each
/// time instead of keeping what was found ([`StepPins`]).
const SMALL_STEP: usize = 8;

/// The actors that can start the reversal of the race of `i` with the later `j` (one that no
/// other part of `i`'s step pins, [`StepPins::pinned`]) from the state before `i`'s step
/// (with the actors that could run there, when `path` has its point), or `None` when no
/// schedule reverses it. `i`'s step is the events recorded at its point (an action with the
/// PFP steps and write-backs it brought about); it runs whole, so reversing the race puts `j`
/// before the whole step. `v` is the events after the step that happen after none of its
/// events; the initials are the first actions of `v`, then `j` (source-DPOR's). No schedule
/// reverses the race when `j` follows the step anyway: `j` is an action of an actor of the
/// step (its next action from that state is the step itself: the ME's next packet after the
/// pop whose eager PFP step is `i`), `j` follows an action chosen after the step that a part of
/// the step conflicts with (that race comes first), or `j` needs nothing of `v` and could not run
/// there (the listing has only the actors that can run, and nothing between them that `j`
/// depends on enabled it, so the step did). An actor of the step is never an initial (a
/// host's next command after the submission whose PFP step is `i` comes after that step).
fn reversal_starts(h: &History, i: usize, needs: &NeedsOf, path: &[Node]) -> Option<Reversal> {
    let j = needs.j;
    let actors = path.get(h.events[i].point).map(|n| &n.point.actors);
    let (first, last) = step_of(h, i, j);
    // For j the groups of a dispatch completed in one step, the race is with the group whose
    // bytes meet what the step touched: its reversal puts that group before the step, and
    // needs what that group needs ([`narrowed`]).
    let narrow = narrowed(h, j, first..=last);
    let aj = narrow.as_ref().map_or(h.events[j].actor, |(g, _)| *g);
    if (first..=last).any(|x| h.events[x].actor == h.events[j].actor) {
        return None;
    }
    // j waits for the queue of i's step (a retirement, or the completion of a dispatch's
    // group or groups) to be idle, or is the end of the run and wrote nothing back
    // ([`needs_idle`]): what the step does was submitted before it, and the queue is idle
    // only when all of that has completed, so j cannot come before the step. (A removal that
    // releases j instead disables the step: that race is the removal's.)
    let step_actor = path
        .get(h.events[i].point)
        .and_then(|n| n.taken_actor())
        .unwrap_or(h.events[first].actor);
    if let ActorKey::Group(q, ..)
    | ActorKey::Dispatch(q, _)
    | ActorKey::Groups(q, _)
    | ActorKey::Retire(q)
    | ActorKey::Pfp(q)
    | ActorKey::Me(q) = step_actor
    {
        if needs_idle(h, j, q) {
            return None;
        }
    }
    // Whether event k is the action chosen at its point (not a PFP step or write-back that
    // it brought about).
    let chosen = |k: usize| {
        let e = &h.events[k];
        path.get(e.point)
            .is_none_or(|n| n.taken_actor() == Some(e.actor))
    };
    // j follows an action chosen after i's step that the step (i or another part of it)
    // conflicts with: that race (or the order that action always keeps with the step) comes
    // first, as the step runs whole (a retirement's write-back of a line that another queue
    // reads once it passed a wait for the retirement's signal), or that the step's own actor
    // chose (its actions run in order, so that one comes after the step in every schedule:
    // the producer ME's signal after its copy into a ring's slot, which the consumer's group
    // reading the slot follows through the consumer's wait; without it, source-DPOR took the
    // copy and the read for a race, and the run that tried to reverse it ended asleep, 5 such
    // runs beside the one schedule of `ring-buffer.kdl`). Not when j is a host's wait
    // for idle that passes: it follows the retirement of every submission made before it, so
    // the plumbing of i's submission orders it here only because i came first (without i it
    // passes sooner), and the reversal must be looked for here. (The quick tests first: most
    // of the events between are independent of the step, and an event that a part of it is
    // dependent on has that part among the events before it.)
    // What j needs: happens-before without its own dependences whose order nobody sees
    // ([`needs_of`]).
    let group_needs;
    let needs = match &narrow {
        Some((_, fp)) => {
            group_needs = h.relaxed_before(
                j,
                |k| h.preds[j].contains(k) && h.events[k].footprint.conflicts(fp),
                None,
            );
            &group_needs
        }
        None => needs.get(),
    };
    let j_waits_idle = awaits_idle(&h.events[j].footprint);
    // The step's events as a set: an event after a part of the step has one of them in its
    // relaxed happens-before.
    let after_step = |k: usize| h.rel(k).any_in(first, last);
    if !j_waits_idle
        && needs.ones(last + 1, j).any(|k| {
            chosen(k)
                && (h.events[k].actor == step_actor
                    // (an event with none of the step's in its happens-before has none
                    // to look at: the test of `after_step`, not made twice)
                    || h.rel(k)
                        .ones(first, last + 1)
                        .any(|s| h.dependent(s, k)))
                && !unobserved_writeback(h, k, j)
        })
    {
        return None;
    }
    let v: Vec<usize> = (last + 1..j).filter(|&k| !after_step(k)).collect();
    let mut initials: Vec<ActorKey> = Vec::new();
    if !v.iter().any(|&k| needs.contains(k)) {
        if actors.is_some_and(|a| !lists(a, aj)) {
            return None;
        }
        initials.push(aj);
    }
    // The first events of v: those after no earlier event of v (the events of v so far as a
    // set, met with each one's happens-before).
    let mut seen = Bits::default();
    let mut listed: rustc_hash::FxHashSet<ActorKey> = initials.iter().copied().collect();
    for &k in &v {
        let a = h.events[k].actor;
        if !h.rel(k).meets(&seen) && listed.insert(a) {
            initials.push(a);
        }
        seen.insert(k);
    }
    // The sequence, kept only where a branch's first run can lose the race: `i` is a PFP
    // step that another actor's action brought about (a run-ahead, whose extent depends on
    // what the queue holds), or `j` is a host's wait for idle (a branch that starts with
    // another initial can run a submission that keeps the queue busy for good: a thread's
    // `wait` on a fence nobody signals, after which the wait for idle never passes; the
    // branch starts with the sequence's first actor and plants the rest where its first run
    // leaves it). The actors chosen at the points of v's chosen actions that j needs and of
    // j, then at i's.
    if !j_waits_idle && (chosen(i) || !matches!(h.events[i].actor, ActorKey::Pfp(_))) {
        return Some(Reversal {
            initials,
            sequence: Vec::new(),
        });
    }
    let taken_at = |p: usize| path.get(p).and_then(|n| n.taken_actor());
    let pj = h.events[j].point;
    let mut points: Vec<usize> = v
        .iter()
        .filter(|&&k| chosen(k) && needs.contains(k))
        .map(|&k| h.events[k].point)
        .collect();
    points.push(pj);
    points.dedup();
    points.push(h.events[i].point);
    let sequence = points
        .into_iter()
        .filter_map(|p| Some((taken_at(p)?, step_footprint(&h.events, p))))
        .collect();
    Some(Reversal { initials, sequence })
}

/// For `j` the groups of a dispatch completed in one step (they ran alone), the first of them
/// whose bytes meet what the events `steps` touched in memory, as its own action: its actor,
/// and the step's footprint with only that group's bytes of memory. A race of the step with
/// those events is with that group; where the groups are alternatives one by one, its
/// reversal starts with it, and needs only what it needs (another group's bytes ordered after
/// another action do not hold it back). `None` for any other `j`.
fn narrowed(
    h: &History,
    j: usize,
    steps: std::ops::RangeInclusive<usize>,
) -> Option<(ActorKey, Footprint)> {
    let whole = *h.events[j].whole.as_deref()?;
    let (ActorKey::Dispatch(q, d) | ActorKey::Groups(q, d)) = h.events[j].actor else {
        return None;
    };
    let g = steps
        .flat_map(|s| h.events[s].footprint.accesses().iter())
        .filter_map(|&(o, _)| match o {
            Obj::Mem(a, b) => whole.group_meeting(a, b),
            _ => None,
        })
        .min()?;
    let own: Vec<(u64, u64)> = whole.bytes_of(g).collect();
    let mut accesses = Vec::new();
    for &(o, k) in h.events[j].footprint.accesses() {
        match o {
            Obj::Mem(a, b) => {
                for &(s, e) in &own {
                    if a < e && s < b {
                        accesses.push((Obj::Mem(a.max(s), b.min(e)), k));
                    }
                }
            }
            _ => accesses.push((o, k)),
        }
    }
    Some((ActorKey::Group(q, d, g), Footprint::new(accesses)))
}

/// The listing after a run's last point.
static NO_ACTORS: Actors = Actors::empty();

/// Whether `actors` (a point's listing) has actor `a`: for a dispatch whose groups ran in one
/// step where it ran alone ([`ActorKey::Dispatch`]), one of its groups listed one by one does;
/// for a group, its dispatch listed as one actor does ([`Node::stand_in`]).
fn lists(actors: &Actors, a: ActorKey) -> bool {
    actors.contains(&a) || (a.of_dispatch() && actors.iter().any(|x| stands_for(x, a)))
}

/// Whether listed actor `x` stands for `a` of the same dispatch: a group of it listed one by
/// one where `a` is the dispatch's one step, or the dispatch listed as one actor (more groups
/// left than a point lists one by one) where `a` is one of its groups.
fn stands_for(x: ActorKey, a: ActorKey) -> bool {
    matches!(
        (x, a),
        (
            ActorKey::Group(..),
            ActorKey::Dispatch(..) | ActorKey::Groups(..)
        ) | (
            ActorKey::Dispatch(..),
            ActorKey::Group(..) | ActorKey::Groups(..)
        )
    ) && x.same_plain_actor(a)
}

/// The events `j` needs before it in any schedule that reverses one of its races: its
/// happens-before, except through its own dependences whose order nobody sees (a task's
/// read and an invalidation of its queue's cache that leave the same values either way,
/// [`unread_load`]; a write-back and a read or wait for idle that see the same memory either
/// way, [`unobserved_writeback`]). Such a dependence stays in happens-before (it orders the
/// run's events), but j can run before the other action with nothing changed, so what
/// follows that action is not a reason j must wait: through it, a host's write before its
/// signal of the fence that the queue's wait acquired (invalidating the cache) would order
/// the host's write before every task read of the queue's earlier work, and that race would
/// never be reversed (`d4_regression_strict_a_read_before_an_unread_invalidation_races_with_the_host_write_before_its_signal`).
/// Further back, it goes through the relaxed happens-before of the events j depends on
/// ([`History::rel`]), so a read and an invalidation earlier in the chain hold j back no more
/// (`d4_regression_strict_a_race_behind_an_unread_invalidation_is_not_hidden_by_it`).
fn needs_of(h: &History, j: usize) -> Bits {
    h.relaxed_before(
        j,
        |k| {
            h.preds[j].contains(k)
                && h.dependent(k, j)
                && !unread_load(h, k, j)
                && !unobserved_writeback(h, k, j)
        },
        None,
    )
}

/// [`needs_of`] for one later event `j`, computed once, when first asked for, for all the
/// races of `j` (an event races with up to every earlier one: a host's read of a word that
/// each group of a dispatch added to).
struct NeedsOf<'h> {
    h: &'h History,
    j: usize,
    bits: std::cell::OnceCell<Bits>,
}

impl<'h> NeedsOf<'h> {
    fn new(h: &'h History, j: usize) -> Self {
        NeedsOf {
            h,
            j,
            bits: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> &Bits {
        self.bits.get_or_init(|| needs_of(self.h, self.j))
    }
}

/// `sequence` without the first action of `a` (the initial that starts it).
fn rest_of(sequence: &[(ActorKey, Footprint)], a: ActorKey) -> Vec<(ActorKey, Footprint)> {
    let mut rest = sequence.to_vec();
    if let Some(x) = rest.iter().position(|(s, _)| *s == a) {
        rest.remove(x);
    }
    rest
}

/// How a race reverses ([`reversal_starts`]): the actors that can start it, and the steps,
/// in order, that reverse it: those of `v`'s chosen actions that the later action needs
/// (the events after the first action's step that need nothing of it), the later action's,
/// then the first action's (each step's actor with what it touched in this run).
/// Source-DPOR adds one initial per race, and none when one is there already: the branch of
/// that initial stands for the race. It does when every step is a fixed action of its
/// actor; here a step's extent can depend on the state (a submission's strict-mode PFP
/// run-ahead reads memory, or stops short of it, as the queue lets it), so the branch's
/// first run can take a way in which the race is gone. The race's sequence is then kept
/// with the branch ([`Node::wakeup`]) and planted where its run leaves it ([`plant`]). Only
/// races whose first action is such a step have one (an empty `sequence` otherwise).
struct Reversal {
    initials: Vec<ActorKey>,
    sequence: Vec<(ActorKey, Footprint)>,
}

impl Reversal {
    fn op(self, at: usize) -> Op {
        Op::Race {
            at,
            initials: self.initials.into(),
            sequence: self.sequence.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sees` as a scan of every access (what it was before its binary searches).
    fn sees_by_scan(f: &Footprint, q: u32, line: u64) -> bool {
        let mem = line_memory(line);
        let through_cache =
            f.has((Obj::Line(q, line), Kind::Write)) || f.has((Obj::Dirty(q), Kind::Write));
        let through_view =
            f.has((Obj::View(q, line), Kind::Read)) && !f.has((Obj::Line(q, line), Kind::Read));
        f.accesses().iter().any(|&(o, k)| {
            matches!(o, Obj::All)
                || o.overlaps(mem)
                    && !(k == Kind::Write && through_cache)
                    && !(k == Kind::Read && through_view)
        })
    }

    proptest::proptest! {
        /// Whether an action sees a line's memory: the binary searches find what a scan finds.
        #[test]
        fn sees_agrees_with_a_scan_of_the_accesses(
            raw in proptest::collection::vec((0u8..10, 0u64..6, 0u64..4, 0u8..4), 0..8),
        ) {
            use proptest::prop_assert_eq;
            let kinds = [Kind::Read, Kind::Update, Kind::Write, Kind::Await];
            let accesses: Vec<(Obj, Kind)> = raw
                .iter()
                .map(|&(what, at, len, k)| {
                    let a = 0x1000 + at * 40;
                    let o = match what {
                        0..=3 => Obj::Mem(a, a + len * 24),
                        4 => Obj::Line(0, 0x1000 + at % 3 * 64),
                        5 => Obj::View(0, 0x1000 + at % 3 * 64),
                        6 => Obj::Dirty((at % 2) as u32),
                        7 => Obj::Line(1, 0x1000),
                        8 => Obj::All,
                        _ => Obj::Fence(at),
                    };
                    (o, kinds[k as usize])
                })
                .collect();
            let f = Footprint::new(accesses);
            for line in [0x1000, 0x1040, 0x1080, 0x10c0] {
                prop_assert_eq!(sees(&f, 0, line), sees_by_scan(&f, 0, line), "{:x}", line);
                prop_assert_eq!(sees(&f, 1, line), sees_by_scan(&f, 1, line), "{:x}", line);
            }
        }
    }

    fn node(scheduling: bool) -> Node {
        Node::new(ChoicePoint {
            alternatives: 2,
            scheduling,
            continuing: None,
            taken: Some(0),
            disabled: Vec::new(),
            first_try: 0,
            actors: Actors::default(),
            sleep: Default::default(),
        })
    }

    #[test]
    fn a_span_and_the_ones_in_a_range_are_those_of_the_indices_one_by_one() {
        let sets: Vec<Vec<usize>> = vec![
            vec![],
            vec![0],
            vec![63, 64],
            vec![1, 5, 62, 63, 64, 65, 127, 128, 130, 200],
            (0..190).step_by(3).collect(),
        ];
        for set in &sets {
            let mut b = Bits::default();
            for &i in set {
                b.insert(i);
            }
            for lo in [0, 1, 5, 63, 64, 65, 127, 128, 129, 250] {
                for hi in [0, 1, 6, 63, 64, 65, 128, 131, 201, 300] {
                    let got: Vec<usize> = b.ones(lo, hi).collect();
                    let want: Vec<usize> =
                        set.iter().copied().filter(|&i| lo <= i && i < hi).collect();
                    assert_eq!(got, want, "{set:?} from {lo} to {hi}");
                }
            }
        }
        for (first, last) in [
            (0, 0),
            (0, 63),
            (3, 64),
            (63, 64),
            (64, 127),
            (10, 200),
            (129, 129),
        ] {
            for i in 0..260 {
                let mut one = Bits::default();
                one.insert(i);
                assert_eq!(
                    one.any_in(first, last),
                    first <= i && i <= last,
                    "{first}..={last}: {i}"
                );
                // And with indices on both sides of the span.
                one.insert(300);
                if first > 0 {
                    one.insert(first - 1);
                }
                assert_eq!(
                    one.any_in(first, last),
                    first <= i && i <= last,
                    "{first}..={last}: {i} among others"
                );
            }
            assert!(!Bits::default().any_in(first, last));
        }
    }

    #[test]
    fn a_branch_at_a_choice_within_an_action_changes_that_action() {
        // Points: a scheduling point, two choices within its action, a scheduling point.
        let path = vec![node(true), node(false), node(false), node(true)];
        assert_eq!(action_point(&path, 0), 0);
        assert_eq!(action_point(&path, 1), 0);
        assert_eq!(action_point(&path, 2), 0);
        assert_eq!(action_point(&path, 3), 3);
        // A subtree's nodes above its branch may not be there yet: taken as they are.
        assert_eq!(action_point(&path, 5), 5);
    }
}
