//! Scripted choices: the deterministic driver's nondeterminism as a sequence of choice points.
//!
//! Every place a seeded schedule draws from its generator (which enabled action runs next, which
//! groups of a dispatch complete, and in strict mode which dirty line an early write-back takes
//! and whether a cached line is read stale) is a choice point: a number of alternatives and the
//! index taken. A [`Script`] takes those indices from a given prefix of *tries* (one per
//! proposal made to the driver), then makes a fixed canonical choice; it records every try and,
//! per choice point, the alternatives, the index taken and the alternatives found disabled.
//! `docs/exploration.md` describes the choices and the schedule string
//! ([`Script::schedule_string`]).
//!
//! A scheduling choice may pick an engine stage that turns out blocked: that try changes
//! nothing, so the same choice point stays open and the script proposes again (the next index
//! of its prefix, or the canonical choice among the alternatives not found disabled). When
//! every alternative is disabled the choice point ends without one taken.
//!
//! It names only `footprint` (what an action touched) and `types` (where a command is).

use crate::footprint::{Footprint, Kind, Obj};
use crate::types::Site;
use std::sync::{Mutex, MutexGuard};

/// Who performs an alternative of a scheduling choice: the same actor has the same key in every
/// run of the same program (a reducing exploration compares them across runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActorKey {
    /// A host thread, by slot (0 is `main`).
    Host(u32),
    /// A queue's pre-fetch parser.
    Pfp(u32),
    /// A queue's micro engine.
    Me(u32),
    /// A queue's retirement of bottom-of-pipe writes and signals.
    Retire(u32),
    /// Strict mode: an early write-back of one of a queue's dirty lines: the queue, and the
    /// line's address in a reducing exploration (`u64::MAX`: whichever line it chooses).
    Writeback(u32, u64),
    /// One group of a dispatch: queue, dispatch index on the queue, group.
    Group(u32, u64, u32),
    /// Some groups of a dispatch (too many groups to list one by one), or in a reducing
    /// exploration every group left of a dispatch that runs alone, in one step.
    Dispatch(u32, u64),
    /// A reducing exploration: every group left of a dispatch in one step, at a point that
    /// also lists them one by one beside other actors. The run takes it only where every
    /// other actor listed there is asleep and touches nothing the groups touch
    /// (`driver/deterministic/scripted.rs`, `beside_sleepers`); no reversal starts with it.
    Groups(u32, u64),
    /// An endless kernel's removal, by launch serial.
    Endless(u64),
}

impl ActorKey {
    /// Whether it performs groups of a dispatch: one ([`ActorKey::Group`]), some or all of
    /// those left ([`ActorKey::Dispatch`], [`ActorKey::Groups`]).
    pub fn of_dispatch(self) -> bool {
        matches!(
            self,
            ActorKey::Group(..) | ActorKey::Dispatch(..) | ActorKey::Groups(..)
        )
    }

    /// Whether two keys name the same actor of the plain (unreduced) listing: the groups of
    /// one dispatch are one actor there, and so are one queue's write-backs of any line.
    pub fn same_plain_actor(self, other: ActorKey) -> bool {
        use ActorKey::{Dispatch, Group, Groups, Writeback};
        match (self, other) {
            (
                Group(q, d, _) | Dispatch(q, d) | Groups(q, d),
                Group(r, e, _) | Dispatch(r, e) | Groups(r, e),
            ) => (q, d) == (r, e),
            (Writeback(q, _), Writeback(r, _)) => q == r,
            (a, b) => a == b,
        }
    }
}

/// Where an actor's step is in the program: a command (an engine stage's, a retirement's, a
/// dispatch's), or a host thread's own position (`host::set_current_position`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// A command or queue submission.
    Command(Site),
    /// A host thread's position.
    Host(u32),
}

/// One scheduling step of a narrated run ([`Script::narrating`]): who ran, where in the
/// program, and, when the step was a preemption, who it switched away from and where that
/// actor was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrated {
    /// The index of its scheduling point in [`Script::points`].
    pub point: usize,
    /// Who ran.
    pub actor: ActorKey,
    /// Where its step was in the program, when it maps to a place.
    pub site: Option<Where>,
    /// The step preempted this actor (enabled, and the one that ran last), which was here.
    pub preempted: Option<(ActorKey, Option<Where>)>,
}

/// One action of a recorded run: who performed it, at which choice point, and what it touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Who performed it.
    pub actor: ActorKey,
    /// The index (in [`Script::points`]) of the scheduling point that chose it.
    pub point: usize,
    /// What it touched.
    pub footprint: Footprint,
    /// Choices within the action with more than one alternative were made (its footprint
    /// depends on them), or it is a host action whose host has not reached its next
    /// scheduling point (its footprint is not complete): a sleep set must not keep it.
    pub chose_within: bool,
    /// For a dispatch's groups completed in one step ([`ActorKey::Dispatch`] of a dispatch
    /// that ran alone, [`ActorKey::Groups`]): which groups, and where each one's bytes lie
    /// (boxed: few events have it, and every event is moved as the run and the search keep
    /// it).
    pub whole: Option<Box<WholeGroups>>,
    /// A host's action that began with the pass of a wait on memory (a `cpu-poll`): the
    /// bytes it waited on, `[start, end)` (the search's rule on a release's early write-backs,
    /// `explore/dpor.rs`, `polled_after_step`).
    pub polled: Option<(u64, u64)>,
}

/// The groups of a dispatch that one step completed (they ran alone,
/// `driver/deterministic/scripted.rs`), and where each one's bytes lie: group `g` reads or
/// writes `[base + g * stride, base + (g + 1) * stride)` for each of `bases`, and every group
/// touches `shared` (a `sum`'s destination). A race of the step is with the group whose bytes
/// meet what the other action touched ([`WholeGroups::group_meeting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WholeGroups {
    /// The groups, half open.
    pub groups: (u32, u32),
    /// Bytes per group.
    pub stride: u64,
    /// Where group 0's bytes would start, per range the groups read or write.
    pub bases: [Option<u64>; 2],
    /// Bytes every group touches.
    pub shared: Option<(u64, u64)>,
}

impl WholeGroups {
    /// The first of the groups whose bytes meet `[start, end)`.
    pub fn group_meeting(&self, start: u64, end: u64) -> Option<u32> {
        let (first, last) = self.groups;
        if self.shared.is_some_and(|(s, e)| start < e && s < end) {
            return Some(first);
        }
        self.bases
            .iter()
            .flatten()
            .filter_map(|&base| {
                let lo = base.checked_add(u64::from(first) * self.stride)?;
                let hi = base.checked_add(u64::from(last) * self.stride)?;
                (start < hi && lo < end)
                    .then(|| ((start.max(lo) - base) / self.stride.max(1)) as u32)
            })
            .min()
    }

    /// The bytes group `g` touches: its own stride of each range, and `shared`.
    pub fn bytes_of(&self, g: u32) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.bases
            .iter()
            .flatten()
            .filter_map(move |&base| {
                let s = base.checked_add(u64::from(g) * self.stride)?;
                Some((s, s.checked_add(self.stride)?))
            })
            .chain(self.shared)
    }
}

/// Who performs each alternative of a reducing exploration's scheduling point, by index.
///
/// A point lists each group of a dispatch left (up to 4,096) and, in strict mode, each line a
/// queue holds dirty, so a run of a dispatch of thousands of groups has thousands of points of
/// thousands of alternatives. Long listings keep their runs of one dispatch's consecutive
/// groups and of one queue's write-backs of lines a fixed stride apart as one entry each: the
/// points then take memory in their runs, not their alternatives (a 1,024-group fill in
/// strict mode kept 62 MB of listings in one run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Actors(ActorList);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ActorList {
    Keys(Vec<ActorKey>),
    /// Runs in order: the index of a run's first alternative, its first actor, its length and
    /// the step from one actor to the next (a group's index, a line's address); and the
    /// number of alternatives. Boxed: a point's listing is as large as a plain list's.
    Runs(Box<(Vec<ActorRun>, u32)>),
}

impl Default for ActorList {
    fn default() -> Self {
        ActorList::Keys(Vec::new())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ActorRun {
    start: u32,
    first: ActorKey,
    len: u32,
    step: u64,
}

/// Listings shorter than this stay a plain list (the search looks alternatives up by index in
/// its hottest loops, where a plain list is the quickest; the listings of a few hundred
/// alternatives of the examples' dispatches cost little memory).
const RUNS_FROM: usize = 512;

impl ActorRun {
    /// The `k`-th actor of the run (`k < len`).
    fn nth(&self, k: u32) -> ActorKey {
        let k64 = u64::from(k);
        match self.first {
            ActorKey::Group(q, d, g) => ActorKey::Group(q, d, g.wrapping_add(k)),
            ActorKey::Writeback(q, line) => {
                ActorKey::Writeback(q, line.wrapping_add(k64.wrapping_mul(self.step)))
            }
            a => a,
        }
    }

    /// Where `a` is in the run.
    fn index_of(&self, a: ActorKey) -> Option<u32> {
        let k = match (self.first, a) {
            (ActorKey::Group(q, d, g), ActorKey::Group(r, e, h)) if (q, d) == (r, e) => {
                u64::from(h.checked_sub(g)?)
            }
            (ActorKey::Writeback(q, l), ActorKey::Writeback(r, m)) if q == r && self.len > 1 => {
                let off = m.checked_sub(l)?;
                if off % self.step != 0 {
                    return None;
                }
                off / self.step
            }
            (f, a) => return (f == a).then_some(0),
        };
        (k < u64::from(self.len)).then_some(k as u32)
    }

    /// Whether `a` comes next after the run, and the step it makes it.
    fn extends(&self, a: ActorKey) -> Option<u64> {
        let last = self.nth(self.len - 1);
        match (last, a) {
            (ActorKey::Group(q, d, g), ActorKey::Group(r, e, h))
                if (q, d) == (r, e) && g.checked_add(1) == Some(h) =>
            {
                Some(1)
            }
            (ActorKey::Writeback(q, l), ActorKey::Writeback(r, m)) if q == r && m > l => {
                let step = m - l;
                (self.len == 1 || step == self.step).then_some(step)
            }
            _ => None,
        }
    }
}

impl Actors {
    /// No alternative.
    pub const fn empty() -> Self {
        Actors(ActorList::Keys(Vec::new()))
    }

    /// The actor of alternative `alt`.
    #[inline]
    pub fn get(&self, alt: usize) -> Option<ActorKey> {
        match &self.0 {
            ActorList::Keys(k) => k.get(alt).copied(),
            ActorList::Runs(r) => Self::get_in_runs(r, alt),
        }
    }

    #[inline(never)]
    fn get_in_runs((runs, len): &(Vec<ActorRun>, u32), alt: usize) -> Option<ActorKey> {
        let alt = u32::try_from(alt).ok().filter(|&a| a < *len)?;
        let r = &runs[runs.partition_point(|r| r.start <= alt) - 1];
        Some(r.nth(alt - r.start))
    }

    /// The number of alternatives listed.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            ActorList::Keys(k) => k.len(),
            ActorList::Runs(r) => r.1 as usize,
        }
    }

    /// Whether no alternative is listed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first alternative that `a` performs.
    pub fn position(&self, a: ActorKey) -> Option<usize> {
        match &self.0 {
            ActorList::Keys(k) => k.iter().position(|&x| x == a),
            ActorList::Runs(r) => {
                r.0.iter()
                    .find_map(|r| r.index_of(a).map(|k| (r.start + k) as usize))
            }
        }
    }

    /// Whether some alternative is performed by `a`.
    #[inline]
    pub fn contains(&self, a: &ActorKey) -> bool {
        match &self.0 {
            ActorList::Keys(k) => k.contains(a),
            ActorList::Runs(..) => self.position(*a).is_some(),
        }
    }

    /// Whether the listing keeps runs ([`Actors::entries`] of more than one alternative).
    pub(crate) fn in_runs(&self) -> bool {
        matches!(self.0, ActorList::Runs(_))
    }

    /// The listing's entries in order: the first alternative of each, its actor and how many
    /// alternatives it stands for (more than one only in a long listing's run of one
    /// dispatch's groups or one queue's write-backs, [`ActorKey::Group`] and
    /// [`ActorKey::Writeback`]; the run's actors follow from the first).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, ActorKey, usize)> + '_ {
        let (keys, runs): (&[ActorKey], &[ActorRun]) = match &self.0 {
            ActorList::Keys(k) => (k, &[]),
            ActorList::Runs(r) => (&[], &r.0),
        };
        keys.iter().enumerate().map(|(i, &k)| (i, k, 1)).chain(
            runs.iter()
                .map(|r| (r.start as usize, r.first, r.len as usize)),
        )
    }

    /// The actors of the alternatives in order.
    pub fn iter(&self) -> ActorsIter<'_> {
        match &self.0 {
            ActorList::Keys(k) => ActorsIter::Keys(k.iter()),
            ActorList::Runs(r) => ActorsIter::Runs(self, 0..r.1 as usize),
        }
    }

    /// A long listing: as runs where they make it at least four times smaller.
    #[cold]
    fn of_long(keys: Vec<ActorKey>) -> Self {
        let mut runs: Vec<ActorRun> = Vec::new();
        for (i, &a) in keys.iter().enumerate() {
            if let Some(r) = runs.last_mut() {
                if let Some(step) = r.extends(a) {
                    r.step = step;
                    r.len += 1;
                    continue;
                }
            }
            runs.push(ActorRun {
                start: i as u32,
                first: a,
                len: 1,
                step: 1,
            });
        }
        if runs.len() * 4 > keys.len() {
            return Actors(ActorList::Keys(keys));
        }
        runs.shrink_to_fit();
        Actors(ActorList::Runs(Box::new((runs, keys.len() as u32))))
    }
}

/// The actors of a point's alternatives in order ([`Actors::iter`]).
#[derive(Debug, Clone)]
pub enum ActorsIter<'a> {
    /// Of a plain list.
    Keys(std::slice::Iter<'a, ActorKey>),
    /// Of a listing kept as runs, by index.
    Runs(&'a Actors, std::ops::Range<usize>),
}

impl Iterator for ActorsIter<'_> {
    type Item = ActorKey;

    fn next(&mut self) -> Option<ActorKey> {
        match self {
            ActorsIter::Keys(k) => k.next().copied(),
            ActorsIter::Runs(a, r) => r.next().and_then(|i| a.get(i)),
        }
    }
}

impl From<Vec<ActorKey>> for Actors {
    #[inline]
    fn from(keys: Vec<ActorKey>) -> Self {
        if keys.len() < RUNS_FROM {
            Actors(ActorList::Keys(keys))
        } else {
            Actors::of_long(keys)
        }
    }
}

/// One choice point of a scripted run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChoicePoint {
    /// The number of alternatives.
    pub alternatives: u32,
    /// A scheduling choice (which action runs); `false`: a choice within an action (which
    /// groups complete, which line is written back, whether a read is stale).
    pub scheduling: bool,
    /// The alternative that continues the actor that ran last (a scheduling choice only); any
    /// other taken while this one is enabled is a preemption.
    pub continuing: Option<u32>,
    /// The index taken; `None` when every alternative was found disabled.
    pub taken: Option<u32>,
    /// Alternatives tried and found disabled (a blocked engine stage), in the order tried.
    pub disabled: Vec<u32>,
    /// The index in [`Script::tries`] of this point's first try.
    pub first_try: usize,
    /// A reducing exploration's scheduling point: who performs each alternative.
    pub actors: Actors,
    /// A reducing exploration's scheduling point: the sleep set when it opened (actors whose
    /// next action need not be explored here, with that action's footprint). Shared by the
    /// points of a run until an action wakes one of them.
    pub sleep: std::sync::Arc<Vec<(ActorKey, Footprint)>>,
}

impl ChoicePoint {
    /// Whether taking `alt` here is a preemption: a scheduling choice that switches away from
    /// the actor that ran last while it was still enabled.
    /// Alternatives performed by the same actor of the plain listing (two groups of one
    /// dispatch in a reducing exploration's listing) are not preemptions of each other.
    pub fn preempts(&self, alt: u32) -> bool {
        self.scheduling
            && self.continuing.is_some_and(|c| {
                c != alt
                    && !self.disabled.contains(&c)
                    && !matches!(
                        (self.actors.get(c as usize), self.actors.get(alt as usize)),
                        (Some(a), Some(b)) if a.same_plain_actor(b)
                    )
            })
    }

    /// Whether no search's branch starts with alternative `alt` here: it is the step of every
    /// group left of a dispatch beside them listed one by one ([`ActorKey::Groups`]), which
    /// only a reducing run takes (`Script::begin_beside`), or, where the run took that
    /// step, one of those groups (every schedule from here that starts with one of them is
    /// that step's trace: the run took it where every other actor listed was asleep).
    pub fn beside_step(&self, alt: u32) -> bool {
        if !self.scheduling {
            return false;
        }
        match self.actors.get(alt as usize) {
            Some(ActorKey::Groups(..)) => true,
            Some(a @ ActorKey::Group(..)) => self
                .taken
                .and_then(|t| self.actors.get(t as usize))
                .is_some_and(|t| matches!(t, ActorKey::Groups(..)) && t.same_plain_actor(a)),
            _ => false,
        }
    }

    /// Preemptions of a run's choice points ([`ChoicePoint::preempts`] of each one taken).
    pub fn preemptions(points: &[ChoicePoint]) -> u32 {
        points
            .iter()
            .filter(|p| p.taken.is_some_and(|t| p.preempts(t)))
            .count() as u32
    }
}

#[derive(Debug, Default)]
struct ScriptState {
    prefix: Vec<u32>,
    tries: Vec<u32>,
    points: Vec<ChoicePoint>,
    /// How many points a search moved out after the run ([`Script::take_record`]).
    points_moved: usize,
    /// The open scheduling point (it stays open while its tries find blocked stages; choices
    /// within the action it runs may follow before it is closed), and the index of its last
    /// try.
    sched: Option<usize>,
    sched_try: usize,
    /// Stop the run when the try at this index finds its alternative disabled.
    abort_at: Option<usize>,
    aborted: bool,
    /// Record actors, events and sleep sets (a reducing exploration).
    reducing: bool,
    events: Vec<Event>,
    /// Events of the points before this one are not kept: the search has them from an
    /// earlier run that followed the same prefix ([`Script::keep_events_from`]).
    events_from: usize,
    /// The sleep set from the point whose first try is at `sleep_at` on.
    sleep_at: Option<usize>,
    sleep_init: Vec<(ActorKey, Footprint)>,
    sleep: std::sync::Arc<Vec<(ActorKey, Footprint)>>,
    sleeping: bool,
    /// A preemption-bounded search's sleep sets ([`Script::bounded`]): an actor stays asleep
    /// only across actions of the same actor of the plain listing.
    plain_sleep: bool,
    /// A preemption-bounded reducing search's run ([`Script::keeping_preemptions`]): where
    /// the actor that ran last is asleep while it could go on, the run stops asleep rather
    /// than preempt it.
    keep_preemptions: bool,
    /// Every enabled alternative was asleep: the run explores nothing new.
    sleep_blocked: bool,
    /// The index of the first point where that happened.
    sleep_blocked_at: Option<usize>,
    /// And the index in `tries` of the try made there.
    sleep_blocked_try: Option<usize>,
    /// The event of a host action, completed when the host reaches its next scheduling point.
    host_pending: Option<usize>,
    /// What that action touched up to its pick, of which its footprint is made then
    /// ([`Script::host_event`]).
    host_accesses: Option<Vec<crate::footprint::Access>>,
    /// Record who performs each scheduling alternative and where it is in the program
    /// ([`Script::narration`]).
    narrating: bool,
    /// The first try of the prefix that named no alternative of its point: (its index, the
    /// alternative it named, the point's alternatives). The canonical choice was made
    /// instead ([`Script::replay_mismatch`]).
    misfit: Option<(usize, u32, u32)>,
    /// Per scheduling point (by index in `points`), where each alternative's actor is.
    sites: Vec<(usize, Vec<Option<Where>>)>,
    /// Scheduling points opened so far.
    sched_count: usize,
    /// The alternative of [`ActorKey::Groups`] at the open scheduling point, if it lists one
    /// (`Script::begin_beside`), and whether the run takes it there ([`Beside`]).
    beside: Option<(u32, Beside)>,
    /// Past the prefix, choose at random ([`Script::sampling`]).
    sampling: Option<Sampling>,
    /// Past the prefix, follow another run's steps in an order of few preemptions
    /// ([`Script::guided`]).
    guiding: Option<Guiding>,
}

/// The steps of a run for a [`Script::guided`] run to take again, in another order: each
/// step's actor, the steps before it that it depends on, and the choices made within it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guide {
    pub(crate) steps: Vec<GuideStep>,
    /// The order to take the steps in, by step (empty: continue the actor that ran last
    /// where it can, else the earliest step ready).
    pub(crate) rank: Vec<u32>,
}

/// One step of a [`Guide`].
#[derive(Debug, Clone)]
pub(crate) struct GuideStep {
    /// Who performed it.
    pub(crate) actor: ActorKey,
    /// The earlier steps of other actors it must come after (their actions conflict).
    pub(crate) after: Vec<usize>,
    /// The choices within it, in order (the alternatives taken).
    pub(crate) within: Vec<u32>,
}

/// A [`Script::guided`] run's progress through its guide.
#[derive(Debug)]
struct Guiding {
    guide: std::sync::Arc<Guide>,
    done: Vec<bool>,
    /// Per actor, its steps not taken yet, in order.
    next: Vec<(ActorKey, std::collections::VecDeque<usize>)>,
    /// The choices within the step proposed last, left to make.
    within: std::collections::VecDeque<u32>,
}

impl Guiding {
    fn new(guide: std::sync::Arc<Guide>) -> Self {
        let mut next: Vec<(ActorKey, std::collections::VecDeque<usize>)> = Vec::new();
        for (i, s) in guide.steps.iter().enumerate() {
            match next.iter_mut().find(|(a, _)| *a == s.actor) {
                Some((_, q)) => q.push_back(i),
                None => next.push((s.actor, std::collections::VecDeque::from([i]))),
            }
        }
        Guiding {
            done: vec![false; guide.steps.len()],
            guide,
            next,
            within: std::collections::VecDeque::new(),
        }
    }

    /// The next step of `actor` if every step it must come after was taken.
    fn ready(&self, actor: ActorKey) -> Option<usize> {
        let (_, q) = self.next.iter().find(|(a, _)| *a == actor)?;
        let &i = q.front()?;
        self.guide.steps[i]
            .after
            .iter()
            .all(|&j| self.done[j])
            .then_some(i)
    }

    /// `actor` took a step: its next one is done (or, for every group left of a dispatch
    /// in one step, each of those groups' steps).
    fn took(&mut self, actor: ActorKey) {
        let mut mark = |q: &mut std::collections::VecDeque<usize>, all: bool| {
            while let Some(i) = q.pop_front() {
                self.done[i] = true;
                if !all {
                    break;
                }
            }
        };
        if let Some((_, q)) = self.next.iter_mut().find(|(a, _)| *a == actor) {
            mark(q, false);
        } else if matches!(actor, ActorKey::Groups(..) | ActorKey::Dispatch(..)) {
            for (a, q) in &mut self.next {
                if a.same_plain_actor(actor) {
                    mark(q, true);
                }
            }
        }
    }
}

/// What a reducing run does at a point that lists a dispatch's groups one by one and the
/// step of them all ([`ActorKey::Groups`]), past its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Beside {
    /// Chooses as elsewhere, never the step of them all.
    No,
    /// Takes the step of them all: every other actor listed is asleep, none of the
    /// dispatch's groups is, and no actor asleep touches what they touch.
    Take,
    /// Stops asleep: so, but the step of them all is asleep itself (it was explored from
    /// a sibling, with only independent actions since).
    Asleep,
}

/// The random choices of a [`Script::sampling`] run.
#[derive(Debug, Clone)]
struct Sampling {
    rng: crate::rng::Rng,
    /// The scheduling points (by number among the run's, from 0) where it preempts.
    preempt_at: Vec<usize>,
    /// Choose among the actors by a priority each draws from this seed (the highest that can
    /// run, as PCT does), not uniformly: an actor left to the last in most points is then
    /// as likely as any other order.
    priorities: Option<u64>,
}

/// A source of choices for the deterministic driver that follows a prefix of tries, then
/// chooses canonically, recording every choice point ([`crate::DeviceDesc::script`]).
#[derive(Debug, Default)]
pub struct Script {
    st: Mutex<ScriptState>,
}

impl Script {
    /// A script following `prefix` (the tries of [`Script::tries`] or a decoded schedule
    /// string), then choosing canonically: the alternative continuing the last actor when
    /// there is one, else the first alternative not found disabled.
    pub fn new(prefix: Vec<u32>) -> Self {
        Script {
            st: Mutex::new(ScriptState {
                prefix,
                ..ScriptState::default()
            }),
        }
    }

    /// A script that also asks the driver to stop the run (removing the device, reason
    /// `Requested`) when the try at index `at` finds its alternative disabled: the run is then
    /// the same as one already explored.
    pub fn exploring(prefix: Vec<u32>, at: usize) -> Self {
        let s = Script::new(prefix);
        s.lock().abort_at = Some(at);
        s
    }

    /// A script for a reducing exploration: it follows `prefix`, stops as
    /// [`Script::exploring`] does (when `at` is given), records who performs each scheduling
    /// alternative and what each action touched ([`Script::events`]), and from the point whose
    /// first try is `at` on keeps the sleep set `sleep`: it does not choose an actor asleep,
    /// and stops the run when every enabled alternative is ([`Script::sleep_blocked`]).
    pub fn reducing(
        prefix: Vec<u32>,
        at: Option<usize>,
        sleep: Vec<(ActorKey, Footprint)>,
    ) -> Self {
        // A run has at least as many points as its prefix: room for them and some more, in
        // one allocation each rather than a growth per doubling.
        let room = prefix.len() + 32;
        let s = Script::new(prefix);
        {
            let mut st = s.lock();
            st.tries.reserve(room);
            st.points.reserve(room);
            st.events.reserve(room);
            st.abort_at = at;
            st.reducing = true;
            st.sleep_at = at;
            st.sleep_init = sleep;
            if at.is_none() {
                st.sleeping = true;
            }
        }
        s
    }

    /// A script for a preemption-bounded search with sleep sets (a shrink's search for the
    /// fewest preemptions, `explore/exhaustive.rs` `search_plain`): as [`Script::reducing`],
    /// but an actor stays asleep only while the actions that run are of the same actor of the
    /// plain listing as it ([`ActorKey::same_plain_actor`]: two groups of one dispatch, two
    /// write-backs of one queue) and independent of its own. Swapping two such adjacent
    /// actions keeps the run's preemptions (the plain listing's actor runs on through both),
    /// so the sleep sets prune only schedules equivalent to one explored with as many
    /// preemptions. Where the actor that ran last is asleep, the canonical choice continues
    /// it by another of its alternatives (another group of the dispatch), not a preemption.
    pub(crate) fn bounded(
        prefix: Vec<u32>,
        at: Option<usize>,
        sleep: Vec<(ActorKey, Footprint)>,
    ) -> Self {
        let s = Script::reducing(prefix, at, sleep);
        s.lock().plain_sleep = true;
        s
    }

    /// A script for a preemption-bounded search with partial-order reduction
    /// (`explore/dpor.rs`): as [`Script::reducing`], but where every alternative of the actor
    /// that ran last (of the plain listing) is asleep while it could go on, the run stops
    /// asleep instead of taking another actor: past its prefix a run makes no preemption, so
    /// a branch has the preemptions its prefix has.
    pub(crate) fn keeping_preemptions(
        prefix: Vec<u32>,
        at: Option<usize>,
        sleep: Vec<(ActorKey, Footprint)>,
    ) -> Self {
        let s = Script::reducing(prefix, at, sleep);
        s.lock().keep_preemptions = true;
        s
    }

    /// A script that chooses at random (from `seed`) past `prefix`, preempting at most at the
    /// scheduling points numbered in `preempt_at` (from 0, in the order the run opens them):
    /// there it takes another alternative than the one continuing the last actor, at random;
    /// at every other scheduling point it continues the last actor when it can, else takes an
    /// alternative at random; a choice within an action is random too. With `priorities`,
    /// "at random" at a scheduling point is the alternative whose actor has the highest
    /// priority, each actor's drawn from the seed. So a run has at most `preempt_at.len()`
    /// preemptions, and its schedule string replays it (a shrink's search for a schedule
    /// with fewer preemptions, `explore/shrink.rs`).
    pub(crate) fn sampling(
        prefix: Vec<u32>,
        seed: u64,
        preempt_at: Vec<usize>,
        priorities: bool,
    ) -> Self {
        let s = Script::new(prefix);
        let mut rng = crate::rng::Rng::new(seed);
        let priorities = priorities.then(|| rng.next_u64());
        s.lock().sampling = Some(Sampling {
            rng,
            preempt_at,
            priorities,
        });
        s
    }

    /// A script that runs the steps of `guide` (another run's, in the reducing listing) in
    /// an order of few preemptions. A step is ready when every step it must come after was
    /// taken. At each scheduling point it takes, among the alternatives listed there whose
    /// actor's next step is ready, the one whose step comes first in the guide's order
    /// ([`Guide::rank`]); without an order, it continues the actor that ran last (or another
    /// alternative of the same actor of the plain listing) when that step is ready, else
    /// takes the earliest ready step. Each step's choices within it are the guide's. Where no
    /// alternative has a ready step, it chooses canonically. Every order of a run's
    /// steps that keeps each dependent pair's order gives the same outcome, so the run ends
    /// as the guide's did, with as few preemptions as keeping to that order allows at each
    /// point (a shrink, `explore/shrink.rs`). Its schedule string replays it as a reducing
    /// exploration's does.
    pub(crate) fn guided(guide: std::sync::Arc<Guide>) -> Self {
        let s = Script::reducing(Vec::new(), None, Vec::new());
        s.lock().guiding = Some(Guiding::new(guide));
        s
    }

    /// Whether this script chooses at random ([`Script::sampling`]): its scheduling points
    /// need their actors.
    pub(crate) fn is_sampling(&self) -> bool {
        self.lock().sampling.is_some()
    }

    /// Whether this script records for a reducing exploration.
    pub(crate) fn is_reducing(&self) -> bool {
        self.lock().reducing
    }

    /// The same script, also recording who performs each scheduling alternative and where
    /// in the program it is, for [`Script::narration`] (a shrunk counterexample's decisive
    /// steps). It chooses as it would without.
    pub fn narrating(self) -> Self {
        self.lock().narrating = true;
        self
    }

    /// Whether this script narrates ([`Script::narrating`]).
    pub(crate) fn is_narrating(&self) -> bool {
        self.lock().narrating
    }

    /// Where each alternative of the scheduling point just opened is in the program.
    pub(crate) fn note_sites(&self, sites: Vec<Option<Where>>) {
        let mut st = self.lock();
        if let Some(idx) = st.points.iter().rposition(|p| p.scheduling) {
            st.sites.push((idx, sites));
        }
    }

    /// Every scheduling step of a narrated run ([`Script::narrating`]), in order: who ran,
    /// where, and whom it preempted. Empty for a script that does not narrate.
    pub fn narration(&self) -> Vec<Narrated> {
        let st = self.lock();
        let mut out = Vec::new();
        for (idx, sites) in &st.sites {
            let p = &st.points[*idx];
            let Some(t) = p.taken else { continue };
            let Some(actor) = p.actors.get(t as usize) else {
                continue;
            };
            let site = |a: u32| sites.get(a as usize).copied().flatten();
            let preempted = p
                .continuing
                .filter(|_| p.preempts(t))
                .and_then(|c| p.actors.get(c as usize).map(|k| (k, site(c))));
            out.push(Narrated {
                point: *idx,
                actor,
                site: site(t),
                preempted,
            });
        }
        out
    }

    /// The actions of the run so far ([`Script::reducing`] only; a reduced search moves them
    /// out of a run's script before it hands the script to its visitor, as a schedule taken
    /// from another thread has none).
    pub fn events(&self) -> Vec<Event> {
        let mut st = self.lock();
        host_footprint(&mut st);
        st.events.clone()
    }

    /// The choice points and events recorded, moved out (the script keeps none of them, and
    /// still counts the points: [`Script::point_count`]).
    pub(crate) fn take_record(&self) -> (Vec<ChoicePoint>, Vec<Event>) {
        let mut st = self.lock();
        host_footprint(&mut st);
        let points = std::mem::take(&mut st.points);
        st.points_moved = points.len();
        (points, std::mem::take(&mut st.events))
    }

    /// Gives back the points [`Script::take_record`] took (a preemption-bounded search's
    /// visitor counts a run's preemptions on them).
    pub(crate) fn give_back_points(&self, points: Vec<ChoicePoint>) {
        self.lock().points = points;
    }

    /// `f` of the events recorded so far, without copying them.
    pub(crate) fn with_events<R>(&self, f: impl FnOnce(&[Event]) -> R) -> R {
        let mut st = self.lock();
        host_footprint(&mut st);
        f(&st.events)
    }

    /// Every enabled alternative at some point was asleep, so the run stopped there.
    pub fn sleep_blocked(&self) -> bool {
        self.lock().sleep_blocked
    }

    /// The index (in [`Script::points`]) of the point where the run was first sleep-blocked:
    /// the points and events after it belong to the stop, not to a schedule of the program.
    pub fn sleep_blocked_point(&self) -> Option<usize> {
        self.lock().sleep_blocked_at
    }

    /// The index in [`Script::tries`] of the try made where the run was first sleep-blocked
    /// (the driver performs it before it stops the run).
    pub(crate) fn sleep_blocked_try(&self) -> Option<usize> {
        self.lock().sleep_blocked_try
    }

    /// Records an action that ran: `actor` (one of the open scheduling point's) touched
    /// `footprint` (a host's action: [`Script::host_event`]).
    pub(crate) fn event(&self, actor: ActorKey, footprint: Footprint) {
        self.event_with(actor, || footprint, None);
    }

    /// A reducing run whose events before scheduling point `point` (by index in
    /// [`Script::points`]) its search already has: it records no event of those points.
    /// The events of a run that follows a prefix up to `point` are those of the earlier run
    /// that made the prefix (the driver is deterministic; the search checks that the run
    /// followed its prefix), so working out their footprints again would only cost time.
    pub(crate) fn keep_events_from(&self, point: usize) {
        self.lock().events_from = point;
    }

    /// The point from which this run keeps events ([`Script::keep_events_from`]).
    pub(crate) fn events_from(&self) -> usize {
        self.lock().events_from
    }

    /// [`Script::event`], with the footprint made only if the event is kept, and for a
    /// dispatch's groups completed in one step, which (`whole`).
    pub(crate) fn event_with(
        &self,
        actor: ActorKey,
        footprint: impl FnOnce() -> Footprint,
        whole: Option<WholeGroups>,
    ) {
        let mut st = self.lock();
        let Some(point) = kept_point(&st) else {
            return;
        };
        debug_assert!(
            !matches!(actor, ActorKey::Host(_)),
            "a host's action is recorded by Script::host_event"
        );
        let footprint = footprint();
        // The run took it where nothing asleep touches what it does (`beside_choice`).
        debug_assert!(
            !matches!(actor, ActorKey::Groups(..))
                || st
                    .sleep
                    .iter()
                    .all(|(k, f)| k.same_plain_actor(actor) || !f.conflicts(&footprint)),
            "the groups' step beside actors asleep touched what {:?} touches",
            st.sleep
        );
        let chose_within = chose_within_after(&st.points, point);
        st.events.push(Event {
            actor,
            point,
            footprint,
            chose_within,
            whole: whole.map(Box::new),
            polled: None,
        });
        let e = st.events.len() - 1;
        wake_sleepers(&mut st, e);
    }

    /// [`Script::event`] of host `host`'s action, picked now: it touched `accesses` so far.
    /// Its footprint is made once, when the host reaches its next scheduling point
    /// ([`Script::host_reached`]), or of these alone if it does not.
    pub(crate) fn host_event(
        &self,
        host: u32,
        accesses: impl FnOnce() -> Vec<crate::footprint::Access>,
        polled: Option<(u64, u64)>,
    ) {
        let mut st = self.lock();
        let Some(point) = kept_point(&st) else {
            return;
        };
        host_footprint(&mut st);
        // Its footprint is known only then: until then it must not be kept in a sleep set.
        st.events.push(Event {
            actor: ActorKey::Host(host),
            point,
            footprint: Footprint::default(),
            chose_within: true,
            whole: None,
            polled,
        });
        st.host_pending = Some(st.events.len() - 1);
        st.host_accesses = Some(accesses());
    }

    /// Host `host` reached its next scheduling point: its action touched `accesses` too (as
    /// recorded since its pick; the event's footprint is made of both).
    pub(crate) fn host_reached(&self, host: u32, mut accesses: Vec<crate::footprint::Access>) {
        let mut st = self.lock();
        let Some(e) = st.host_pending.take() else {
            return;
        };
        if st.events[e].actor != ActorKey::Host(host) {
            st.host_pending = Some(e);
            return;
        }
        match st.host_accesses.take() {
            Some(before) => accesses.extend_from_slice(&before),
            None => accesses.extend_from_slice(st.events[e].footprint.accesses()),
        }
        let from = st.events[e].point;
        let chose_within = chose_within_after(&st.points, from);
        st.events[e].footprint = Footprint::new(accesses);
        st.events[e].chose_within = chose_within;
        wake_sleepers(&mut st, e);
    }

    /// Parses a schedule string ([`Script::schedule_string`]) into a script replaying it.
    pub fn from_schedule_string(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix(REDUCED_VERSION) {
            // A reducing exploration's schedule: its alternatives are listed as it lists them.
            return decode(rest).map(|t| Script::reducing(t, None, Vec::new()));
        }
        if let Some(rest) = s.strip_prefix(PLAIN_VERSION) {
            return decode(rest).map(Script::new);
        }
        for old in ["v1:", "v2:", "v3:", "v4:", "v5:"] {
            if s.starts_with(old) {
                return Err(format!(
                    "schedule string `{s}` is of an earlier pipefence (`{old}`): its choice points \
                     are not this build's (`{PLAIN_VERSION}` and `{REDUCED_VERSION}`); run `check \
                     --exhaustive` again for a current one"
                ));
            }
        }
        Err(format!(
            "schedule string `{s}`: expected it to start with `{PLAIN_VERSION}` or \
             `{REDUCED_VERSION}`"
        ))
    }

    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        match self.st.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Every try so far (the index proposed at each).
    pub fn tries(&self) -> Vec<u32> {
        self.lock().tries.clone()
    }

    /// The last proposal at the open scheduling point.
    pub(crate) fn current(&self) -> Option<u32> {
        let st = self.lock();
        st.sched.and_then(|_| st.tries.get(st.sched_try).copied())
    }

    /// The number of choice points so far.
    pub(crate) fn point_count(&self) -> usize {
        let st = self.lock();
        st.points.len().max(st.points_moved)
    }

    /// Every choice point so far.
    pub fn points(&self) -> Vec<ChoicePoint> {
        self.lock().points.clone()
    }

    /// The tries so far as a schedule string (`v1:` and base64url of their run-length
    /// varints); [`Script::from_schedule_string`] replays it.
    pub fn schedule_string(&self) -> String {
        let st = self.lock();
        let version = if st.reducing {
            REDUCED_VERSION
        } else {
            PLAIN_VERSION
        };
        format!("{version}{}", encode(&st.tries))
    }

    /// The run asked to stop ([`Script::exploring`]).
    pub fn aborted(&self) -> bool {
        self.lock().aborted
    }

    /// After a run that replayed a schedule string ([`Script::from_schedule_string`]): why
    /// the string is not a schedule of that run's program, if it is not. A try named an
    /// alternative the point did not have (the canonical choice was made there instead), or
    /// the run ended before the string's last try. A schedule string replays the scenario,
    /// mode and build it was printed for; any other program may fit it by chance, or not.
    pub fn replay_mismatch(&self) -> Option<String> {
        let st = self.lock();
        if let Some((at, k, n)) = st.misfit {
            return Some(format!(
                "its choice {} is alternative {} (counting from 1), where this run had {n}",
                at + 1,
                u64::from(k) + 1
            ));
        }
        let used = st.tries.len().min(st.prefix.len());
        (used < st.prefix.len()).then(|| {
            format!(
                "it has {} choices, and this run ended after the first {used}",
                st.prefix.len()
            )
        })
    }

    /// Opens a choice point of `n` alternatives; returns the first proposal. A scheduling
    /// point stays open until [`Script::taken`] or [`Script::close`].
    pub(crate) fn begin(&self, n: u32, scheduling: bool, continuing: Option<u32>) -> u32 {
        self.begin_with(n, scheduling, continuing, Vec::new())
    }

    /// [`Script::begin`] of a scheduling point whose alternatives are performed by `actors`.
    pub(crate) fn begin_with(
        &self,
        n: u32,
        scheduling: bool,
        continuing: Option<u32>,
        actors: Vec<ActorKey>,
    ) -> u32 {
        self.begin_beside(n, scheduling, continuing, actors, None)
    }

    /// [`Script::begin_with`], where alternative `beside.0` (of [`ActorKey::Groups`]) completes
    /// every group left of a dispatch whose groups are also listed one by one, touching what
    /// `beside.1` makes (asked only where every other actor listed is asleep). A reducing
    /// run past its prefix takes it where every other actor listed is asleep, none of the
    /// dispatch's groups is, and no actor asleep touches what they touch: every schedule
    /// from here then starts with those groups, in any order (they commute, and nothing
    /// else can run until the last: `driver/deterministic/scripted.rs`, `beside_sleepers`),
    /// one trace, which the one step stands for. Otherwise it never chooses it (a bounded
    /// search's run, a sampled run, a replay past its prefix choose as if it were not there).
    pub(crate) fn begin_beside(
        &self,
        n: u32,
        scheduling: bool,
        continuing: Option<u32>,
        actors: Vec<ActorKey>,
        beside: Option<(u32, &dyn Fn() -> Option<Footprint>)>,
    ) -> u32 {
        let mut st = self.lock();
        let first_try = st.tries.len();
        if scheduling && st.plain_sleep && st.sleeping && st.sleep_at != Some(first_try) {
            keep_plain_sleepers(&mut st);
        }
        if scheduling && st.sleep_at == Some(first_try) {
            st.sleep = std::sync::Arc::new(std::mem::take(&mut st.sleep_init));
            st.sleeping = true;
        }
        if scheduling {
            st.sched_count += 1;
        }
        let sleep = if scheduling && st.sleeping {
            st.sleep.clone()
        } else {
            std::sync::Arc::default()
        };
        st.points.push(ChoicePoint {
            alternatives: n,
            scheduling,
            continuing,
            taken: None,
            disabled: Vec::new(),
            first_try,
            actors: actors.into(),
            sleep,
        });
        let idx = st.points.len() - 1;
        st.beside = beside.map(|(alt, footprint)| (alt, beside_choice(&st, idx, alt, footprint)));
        let k = propose(&mut st, idx);
        if scheduling {
            st.sched = Some(idx);
            st.sched_try = st.tries.len() - 1;
        } else {
            st.points[idx].taken = Some(k);
        }
        k
    }

    /// The open scheduling point's last proposal was found disabled (a blocked engine stage:
    /// nothing changed). The point stays open for [`Script::again`] unless every alternative
    /// is now disabled.
    pub(crate) fn fail(&self) {
        let mut st = self.lock();
        let Some(idx) = st.sched else {
            return;
        };
        let at = st.sched_try;
        let last = st.tries[at];
        if st.abort_at == Some(at) {
            st.aborted = true;
        }
        let p = &mut st.points[idx];
        if !p.disabled.contains(&last) {
            p.disabled.push(last);
        }
        if p.disabled.len() as u32 >= p.alternatives {
            st.sched = None;
        }
    }

    /// The next proposal at the open scheduling point (after [`Script::fail`]).
    pub(crate) fn again(&self) -> u32 {
        let mut st = self.lock();
        let Some(idx) = st.sched else {
            return 0;
        };
        let k = propose(&mut st, idx);
        st.sched_try = st.tries.len() - 1;
        k
    }

    /// The open scheduling point's last proposal ran: the point is closed with it taken.
    pub(crate) fn taken(&self) {
        let mut st = self.lock();
        st.beside = None;
        if let Some(idx) = st.sched.take() {
            let k = st.tries[st.sched_try];
            st.points[idx].taken = Some(k);
            if st.guiding.is_some() {
                if let Some(actor) = st.points[idx].actors.get(k as usize) {
                    if let Some(g) = st.guiding.as_mut() {
                        g.took(actor);
                    }
                }
            }
        }
    }

    /// The open scheduling point (if any) ends without an alternative taken (the listing
    /// changed).
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.sched = None;
        st.beside = None;
    }

    /// Whether a scheduling point is open (its last try failed).
    pub(crate) fn is_open(&self) -> bool {
        self.lock().sched.is_some()
    }

    /// A choice within an action among `n` alternatives (none recorded when `n <= 1`).
    pub(crate) fn choose(&self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        u64::from(self.begin(n, false, None))
    }
}

/// A bounded search's sleep set at a scheduling point ([`Script::bounded`]): the actors asleep
/// stay so only when the action before (the last scheduling point's) was of the same actor of
/// the plain listing as each of them; the others wake.
fn keep_plain_sleepers(st: &mut ScriptState) {
    if st.sleep.is_empty() {
        return;
    }
    let last = st
        .points
        .iter()
        .rev()
        .filter(|p| p.scheduling)
        .find_map(|p| p.taken.map(|t| p.actors.get(t as usize)));
    let stays = |(k, _): &(ActorKey, Footprint)| matches!(last, Some(Some(l)) if *k != l && k.same_plain_actor(l));
    if !st.sleep.iter().all(stays) {
        let kept: Vec<_> = st.sleep.iter().filter(|s| stays(s)).cloned().collect();
        st.sleep = std::sync::Arc::new(kept);
    }
}

/// What a run does at point `idx` past its prefix, where alternative `alt` is the step of
/// every group left of a dispatch listed one by one there too (`Script::begin_beside`).
fn beside_choice(
    st: &ScriptState,
    idx: usize,
    alt: u32,
    footprint: &dyn Fn() -> Option<Footprint>,
) -> Beside {
    let p = &st.points[idx];
    // (Where the prefix names this point's try, it decides.)
    if !st.reducing
        || st.plain_sleep
        || st.keep_preemptions
        || st.sampling.is_some()
        || p.sleep.is_empty()
        || st.prefix.len() > p.first_try
    {
        return Beside::No;
    }
    let Some(all @ ActorKey::Groups(q, d)) = p.actors.get(alt as usize) else {
        return Beside::No;
    };
    let asleep = |k: ActorKey| p.sleep.iter().any(|(s, _)| *s == k);
    let mut a_group = false;
    for (a, k) in p.actors.iter().enumerate() {
        match k {
            ActorKey::Group(r, e, _) if (r, e) == (q, d) => {
                if asleep(k) {
                    return Beside::No;
                }
                a_group |= !p.disabled.contains(&(a as u32));
            }
            _ if a as u32 == alt => {}
            k if asleep(k) => {}
            _ => return Beside::No,
        }
    }
    if !a_group {
        return Beside::No;
    }
    let Some(f) = footprint() else {
        return Beside::No;
    };
    let own = |k: &ActorKey| k.same_plain_actor(all);
    if p.sleep.iter().any(|(k, g)| !own(k) && g.conflicts(&f)) {
        return Beside::No;
    }
    if asleep(all) {
        Beside::Asleep
    } else {
        Beside::Take
    }
}

/// The next proposal at point `idx`: the prefix's next try, else the canonical choice (not
/// an actor asleep; when every alternative left is, the run is sleep-blocked and stops).
fn propose(st: &mut ScriptState, idx: usize) -> u32 {
    let from_prefix = st.prefix.get(st.tries.len()).copied();
    let n = st.points[idx].alternatives;
    if let Some(k) = from_prefix.filter(|&k| k >= n) {
        // A try of a prefix names no alternative here: the prefix is another run's.
        let at = st.tries.len();
        st.misfit.get_or_insert((at, k, n));
    }
    // The step of every group left of a dispatch listed beside them, chosen only here.
    let all = match st.beside {
        Some((all, b)) if from_prefix.is_none() && b != Beside::No => {
            let p = &st.points[idx];
            let k = if b == Beside::Take {
                all
            } else {
                let k = (0..p.alternatives)
                    .find(|a| *a != all && !p.disabled.contains(a))
                    .unwrap_or(0);
                block(st, idx);
                k
            };
            st.tries.push(k);
            return k;
        }
        Some((all, _)) => all,
        None => u32::MAX,
    };
    let k = match from_prefix {
        Some(k) if k < st.points[idx].alternatives => k,
        _ if st.sampling.is_some() => sample(st, idx),
        _ => match guide(st, idx, all) {
            Some(k) => k,
            None => canonical(st, idx, all),
        },
    };
    st.tries.push(k);
    k
}

/// The canonical choice at point `idx` past the prefix ([`Script::new`]): the alternative
/// continuing the last actor when there is one, else the first not found disabled; a
/// reducing run never takes an actor asleep. `all` is the step of every group left of a
/// dispatch listed beside them (`u32::MAX`: none), not chosen here.
fn canonical(st: &mut ScriptState, idx: usize, all: u32) -> u32 {
    let plain_sleep = st.plain_sleep || st.keep_preemptions;
    let p = &st.points[idx];
    let asleep = |a: u32| {
        p.scheduling
            && p.actors
                .get(a as usize)
                .is_some_and(|k| p.sleep.iter().any(|(s, _)| *s == k))
    };
    let open = |a: &u32| *a != all && !p.disabled.contains(a) && !asleep(*a);
    // A bounded search's run whose last actor is asleep goes on with that actor of the
    // plain listing by another of its alternatives, which preempts nothing.
    let alike = || {
        let c = p
            .continuing
            .filter(|c| plain_sleep && !p.disabled.contains(c))?;
        let ck = p.actors.get(c as usize)?;
        (0..p.alternatives).filter(open).find(|&a| {
            p.actors
                .get(a as usize)
                .is_some_and(|k| k.same_plain_actor(ck))
        })
    };
    match p.continuing.filter(open).or_else(alike) {
        Some(c) => c,
        // Every alternative of the actor that ran last is asleep while it could go on:
        // taking another would be a preemption the search makes as a branch of its own
        // (within its bound), so the run stops here asleep.
        None if plain_sleep && p.continuing.is_some_and(|c| !p.disabled.contains(&c)) => {
            let c = p.continuing.unwrap_or(0);
            block(st, idx);
            c
        }
        None => match (0..p.alternatives).find(open) {
            Some(a) => a,
            None => {
                let k = (0..p.alternatives)
                    .find(|a| !p.disabled.contains(a))
                    .unwrap_or(0);
                if st.reducing && p.scheduling && p.alternatives > 0 {
                    block(st, idx);
                }
                k
            }
        },
    }
}

/// A [`Script::guided`] run's choice at point `idx` past the prefix (`None`: not guided, or
/// no alternative has a step of the guide ready; the canonical choice then). `all` as in
/// [`canonical`].
fn guide(st: &mut ScriptState, idx: usize, all: u32) -> Option<u32> {
    let p = &st.points[idx];
    let g = st.guiding.as_mut()?;
    if !p.scheduling {
        // A choice within the step proposed last: the guide's, while it has one that fits.
        let k = g.within.pop_front()?;
        return (k < p.alternatives && !p.disabled.contains(&k)).then_some(k);
    }
    let open = |a: u32| a != all && !p.disabled.contains(&a);
    let ready = |a: u32| {
        if !open(a) {
            return None;
        }
        g.ready(p.actors.get(a as usize)?)
    };
    let continuing = || p.continuing.and_then(|c| ready(c).map(|s| (c, s)));
    let alike = || {
        let ck = p.actors.get(p.continuing? as usize)?;
        (0..p.alternatives)
            .filter(|&a| {
                p.actors
                    .get(a as usize)
                    .is_some_and(|k| k.same_plain_actor(ck))
            })
            .find_map(|a| ready(a).map(|s| (a, s)))
    };
    let rank = |s: usize| g.guide.rank.get(s).map_or(s, |&r| r as usize);
    let earliest = || {
        (0..p.alternatives)
            .filter_map(|a| ready(a).map(|s| (a, s)))
            .min_by_key(|&(_, s)| rank(s))
    };
    let (k, step) = if g.guide.rank.is_empty() {
        continuing().or_else(alike).or_else(earliest)?
    } else {
        earliest()?
    };
    g.within = g.guide.steps[step].within.iter().copied().collect();
    Some(k)
}

/// The run is sleep-blocked at point `idx`, by the try about to be made there: it stops.
fn block(st: &mut ScriptState, idx: usize) {
    st.sleep_blocked = true;
    st.sleep_blocked_at.get_or_insert(idx);
    let at = st.tries.len();
    st.sleep_blocked_try.get_or_insert(at);
    st.aborted = true;
}

/// A [`Script::sampling`] run's choice at point `idx`, past its prefix.
fn sample(st: &mut ScriptState, idx: usize) -> u32 {
    let p = &st.points[idx];
    if !p.scheduling && p.disabled.is_empty() {
        // A choice within an action (which group of a dispatch of billions completes) is
        // drawn as below, without listing its alternatives.
        let n = u64::from(p.alternatives);
        return st.sampling.as_mut().map_or(0, |s| s.rng.below(n) as u32);
    }
    let open: Vec<u32> = (0..p.alternatives)
        .filter(|a| !p.disabled.contains(a))
        .collect();
    let continuing = p
        .continuing
        .filter(|c| p.scheduling && !p.disabled.contains(c));
    let number = st.sched_count.saturating_sub(1);
    let actors = if p.scheduling {
        p.actors.clone()
    } else {
        Actors::default()
    };
    let Some(s) = st.sampling.as_mut() else {
        return 0;
    };
    let pick = |s: &mut Sampling, from: &[u32]| -> u32 {
        let by_priority = s
            .priorities
            .filter(|_| from.len() > 1 && !actors.is_empty())
            .and_then(|seed| {
                from.iter().copied().max_by_key(|&a| {
                    actors.get(a as usize).map(|k| {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::hash::DefaultHasher::new();
                        (seed, k).hash(&mut h);
                        h.finish()
                    })
                })
            });
        match by_priority {
            Some(a) => a,
            None if from.is_empty() => 0,
            None => from[s.rng.below(from.len() as u64) as usize],
        }
    };
    match continuing {
        Some(c) if !s.preempt_at.contains(&number) => c,
        Some(c) => {
            let others: Vec<u32> = open.iter().copied().filter(|&a| a != c).collect();
            if others.is_empty() {
                c
            } else {
                pick(s, &others)
            }
        }
        None => pick(s, &open),
    }
}

/// A host action's event still waiting for its host to reach its next scheduling point gets
/// the footprint of what it touched up to its pick ([`Script::host_event`]); it stays pending
/// (a later [`Script::host_reached`] makes it again of both).
fn host_footprint(st: &mut ScriptState) {
    if let (Some(e), Some(before)) = (st.host_pending, st.host_accesses.take()) {
        st.events[e].footprint = Footprint::new(before);
    }
}

/// The point of an action that runs now (the last scheduling point), if its event is kept:
/// a reducing run, at a point from [`Script::keep_events_from`]'s on.
fn kept_point(st: &ScriptState) -> Option<usize> {
    let point = st.points.iter().rposition(|p| p.scheduling).unwrap_or(0);
    (st.reducing && point >= st.events_from).then_some(point)
}

/// Whether a choice within an action with more than one alternative was made after the
/// scheduling point `point` (the action it chose depends on it).
fn chose_within_after(points: &[ChoicePoint], point: usize) -> bool {
    points[point + 1..]
        .iter()
        .any(|p| !p.scheduling && p.alternatives > 1)
}

/// Event `e` ran: actors asleep whose next action conflicts with it wake up (and its own actor
/// leaves the sleep set).
fn wake_sleepers(st: &mut ScriptState, e: usize) {
    if !st.sleeping || st.sleep.is_empty() {
        return;
    }
    let ev = &st.events[e];
    let (actor, fp) = (ev.actor, &ev.footprint);
    let wakes = |(k, f): &(ActorKey, Footprint)| *k == actor || f.conflicts(fp);
    if st.sleep.iter().any(wakes) {
        // The points before keep the set they opened with.
        let kept: Vec<_> = st.sleep.iter().filter(|s| !wakes(s)).cloned().collect();
        st.sleep = std::sync::Arc::new(kept);
    }
}

/// The footprint a sleep set keeps for an actor's next action: what it touched when it ran
/// (a dispatch group's is the same whether or not it is the group that finishes its
/// dispatch: `footprint.rs`), and for a host's submission in a run whose PFP steps run with
/// the action that lets them, what its PFP's take would test.
pub fn sleep_footprint(actor: ActorKey, fp: &Footprint, eager_pfp: bool) -> Footprint {
    // A host's submission whose step holds no take of it by the queue's PFP (the queue was
    // busy, so the PFP's take of an `execute` waited, Q7): once the queue drains, the same
    // submission's step also holds the PFP's run-ahead into it (strict mode), which reads
    // what the submitted commands wait on. It sleeps reading the queue's busy state, so that
    // the queue's draining wakes it (generated seed 502). Only where PFP steps run eagerly
    // with the action that lets them (`eager_pfp`: strict mode's caches); elsewhere they are
    // actions of their own.
    if !eager_pfp {
        return fp.clone();
    }
    if !matches!(actor, ActorKey::Host(_)) {
        // The other way round: an action that may drain a queue (an ME step, a retirement, a
        // group: they update its busy state) lets the queue's PFP take a submission waiting
        // there (Q7), and its step then holds the PFP's run-ahead into it, which reads what
        // the submitted commands read (a `dispatch-indirect`'s arguments). A step recorded
        // when nothing waited holds none of that, so the action sleeps reading the queue's
        // submissions too: a submission to the queue wakes it (a retirement asleep across a
        // host's submission and another queue's write of the arguments stopped its run
        // asleep instead of reading the new arguments:
        // `d4_regression_strict_an_action_that_may_drain_a_queue_wakes_at_a_submission_to_it`).
        let drains = fp.accesses().iter().filter_map(|&(o, k)| match (o, k) {
            (Obj::Busy(q), Kind::Update) => Some(q),
            _ => None,
        });
        return reading_also(fp, drains.collect(), Obj::Submit);
    }
    let refused = fp.accesses().iter().filter_map(|&(o, k)| match (o, k) {
        (Obj::Sub(q, _), Kind::Write) if !fp.has((Obj::Busy(q), Kind::Read)) => Some(q),
        _ => None,
    });
    reading_also(fp, refused.collect(), Obj::Busy)
}

/// `fp` with a read of `obj(q)` for each queue `q` of `queues` added (`fp` itself when none).
fn reading_also(fp: &Footprint, queues: Vec<u32>, obj: fn(u32) -> Obj) -> Footprint {
    if queues.is_empty() {
        return fp.clone();
    }
    let mut all = fp.accesses().to_vec();
    all.extend(queues.into_iter().map(|q| (obj(q), Kind::Read)));
    Footprint::new(all)
}

/// The prefix of a schedule string of the plain listing. It changes when the choice points do
/// (`v1:` listed engine stages that turned out blocked as alternatives; `v3:` had no
/// scheduling point between a host's call and its wait's registration on fences).
pub const PLAIN_VERSION: &str = "v6:";

/// The prefix of a schedule string of a reducing exploration's listing (each dispatch group and
/// each dirty line its own alternative, but the groups of a dispatch that runs alone in one;
/// `v2:` listed blocked engine stages, `v4:` listed the groups of a dispatch that runs alone one
/// by one; `v5:` had no scheduling point between a host's call and its wait's registration on
/// fences).
pub const REDUCED_VERSION: &str = "v7:";

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Base64url (no padding) of varints: a try `k` is `k + 1`; a run of `n` zero tries is `0, n`
/// (a schedule string is this after its version prefix).
pub(crate) fn encode(tries: &[u32]) -> String {
    let mut bytes = Vec::new();
    let mut i = 0;
    while i < tries.len() {
        if tries[i] == 0 {
            let run = tries[i..].iter().take_while(|&&t| t == 0).count();
            varint(&mut bytes, 0);
            varint(&mut bytes, run as u64);
            i += run;
        } else {
            varint(&mut bytes, u64::from(tries[i]) + 1);
            i += 1;
        }
    }
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let w = chunk
            .iter()
            .enumerate()
            .fold(0u32, |w, (j, &b)| w | (u32::from(b) << (16 - 8 * j)));
        for j in 0..=n {
            s.push(B64[((w >> (18 - 6 * j)) & 63) as usize] as char);
        }
    }
    s
}

/// The most tries a schedule string holds: more than any run makes (a run of the
/// deterministic driver with this many choice points would take hours), few enough that
/// decoding one allocates at most 64 MiB.
const MAX_TRIES: usize = 1 << 24;

/// The tries of the body of a schedule string ([`encode`]).
pub(crate) fn decode(body: &str) -> Result<Vec<u32>, String> {
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut bytes = Vec::new();
    for (at, c) in body.char_indices() {
        let v = B64
            .iter()
            .position(|&b| u32::from(b) == u32::from(c))
            .ok_or_else(|| {
                format!(
                    "schedule string: `{}` (character {} of the part after the version) is \
                     not base64url (A-Z, a-z, 0-9, `-`, `_`)",
                    c.escape_debug(),
                    body[..at].chars().count() + 1
                )
            })?;
        bits = (bits << 6) | v as u32;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            bytes.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    let mut vals = Vec::new();
    let (mut v, mut shift) = (0u64, 0);
    for b in bytes {
        if shift > 56 {
            return Err("schedule string: a value is too long".into());
        }
        v |= u64::from(b & 0x7F) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            vals.push(v);
            v = 0;
            shift = 0;
        }
    }
    if shift != 0 {
        return Err("schedule string: truncated".into());
    }
    let too_long =
        || format!("schedule string: longer than any run (more than {MAX_TRIES} choices)");
    let mut tries = Vec::new();
    let mut it = vals.into_iter();
    while let Some(v) = it.next() {
        if v == 0 {
            let run = it
                .next()
                .ok_or_else(|| "schedule string: truncated run".to_string())?;
            if run > (MAX_TRIES - tries.len()) as u64 {
                return Err(too_long());
            }
            tries.extend(std::iter::repeat_n(0, run as usize));
        } else {
            if tries.len() >= MAX_TRIES {
                return Err(too_long());
            }
            tries.push(u32::try_from(v - 1).map_err(|_| "schedule string: value too large")?);
        }
    }
    Ok(tries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_strings_round_trip() {
        for tries in [
            vec![],
            vec![0],
            vec![0, 0, 0, 3, 1, 0, 200, 70000, 0, 0],
            (0..1000).map(|i| (i * 7919) % 13).collect::<Vec<u32>>(),
            vec![u32::MAX, 0, u32::MAX],
        ] {
            let s = encode(&tries);
            assert_eq!(decode(&s).unwrap(), tries, "{s}");
            let script = Script::new(tries.clone());
            script.lock().tries = tries.clone();
            let full = script.schedule_string();
            assert!(full.starts_with(PLAIN_VERSION), "{full}");
            assert_eq!(
                Script::from_schedule_string(&full).unwrap().lock().prefix,
                tries
            );
        }
        assert!(decode("!").is_err());
        for old in ["v1:AA", "v2:AA", "v3:AA", "v4:AA", "v5:AA"] {
            let e = Script::from_schedule_string(old).unwrap_err();
            assert!(e.contains("earlier pipefence"), "{e}");
        }
        assert!(Script::from_schedule_string("v9:AA").is_err());
        // A character outside base64url is named as written, with its place.
        let e = decode("AB\u{1F642}").unwrap_err();
        assert!(e.contains("`\u{1F642}` (character 3 "), "{e}");
    }

    #[test]
    fn a_script_follows_its_prefix_then_continues_the_last_actor() {
        let s = Script::new(vec![2, 1]);
        assert_eq!(s.begin(3, true, Some(0)), 2);
        s.taken();
        // The prefix's 1, found disabled: then the continuing alternative, 0.
        assert_eq!(s.begin(3, true, Some(0)), 1);
        s.fail();
        assert!(s.is_open());
        assert_eq!(s.again(), 0);
        s.taken();
        assert_eq!(s.choose(4), 0);
        assert_eq!(s.choose(1), 0);
        let p = s.points();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].taken, Some(0));
        assert_eq!(p[1].disabled, vec![1]);
        assert!(!p[1].preempts(0) && p[1].preempts(2));
        assert_eq!(s.tries(), vec![2, 1, 0, 0]);
    }

    #[test]
    fn a_run_keeps_the_events_of_the_points_from_the_one_its_search_asks() {
        let run = |from: Option<usize>| {
            let s = Script::reducing(vec![1, 0, 1], None, Vec::new());
            if let Some(p) = from {
                s.keep_events_from(p);
            }
            for k in 0..3u32 {
                s.begin_with(2, true, None, vec![ActorKey::Pfp(0), ActorKey::Me(k)]);
                s.event_with(
                    ActorKey::Me(k),
                    || Footprint::new(vec![(Obj::Busy(k), Kind::Update)]),
                    None,
                );
                s.taken();
            }
            (s.points().len(), s.events())
        };
        let (points, all) = run(None);
        assert_eq!((points, all.len()), (3, 3));
        let (points, tail) = run(Some(1));
        // Every point, the events of points 1 and 2, as the whole run has them.
        assert_eq!(points, 3);
        assert_eq!(tail, all[1..]);
    }

    #[test]
    fn a_host_action_footprint_is_what_it_touched_before_and_after_its_pick() {
        let before = vec![(Obj::Fence(1), Kind::Read), (Obj::Device, Kind::Read)];
        let after = vec![(Obj::Mem(0, 8), Kind::Write), (Obj::Fence(1), Kind::Read)];
        let run = |reached: bool| {
            let s = Script::reducing(Vec::new(), None, Vec::new());
            s.begin_with(1, true, None, vec![ActorKey::Host(0)]);
            s.host_event(0, || before.clone(), None);
            s.taken();
            if reached {
                s.host_reached(0, after.clone());
            }
            s.events()
        };
        let both: Vec<_> = after.iter().chain(&before).copied().collect();
        assert_eq!(run(true)[0].footprint, Footprint::new(both));
        // A host that never reaches its next point: what it touched up to its pick.
        assert_eq!(run(false)[0].footprint, Footprint::new(before.clone()));
    }

    #[test]
    fn choices_within_an_action_leave_its_scheduling_point_open() {
        // An ME step that reads (a strict-mode stale-or-fresh choice) before it completes.
        let s = Script::new(Vec::new());
        assert_eq!(s.begin(2, true, None), 0);
        assert_eq!(s.choose(2), 0);
        assert!(s.is_open());
        s.taken();
        let p = s.points();
        assert_eq!((p[0].taken, p[1].taken), (Some(0), Some(0)));
        assert!(p[0].scheduling && !p[1].scheduling);
    }

    #[test]
    fn x1_a_long_listing_keeps_its_runs_and_every_actor_by_index() {
        // Hosts and stages, a dispatch's groups left (one missing), a queue's dirty lines a
        // line apart (one gap), another dispatch's groups.
        let mut keys = vec![ActorKey::Host(0), ActorKey::Pfp(1), ActorKey::Me(1)];
        keys.extend(
            (0..400)
                .filter(|&g| g != 17)
                .map(|g| ActorKey::Group(1, 3, g)),
        );
        keys.extend((0..300u64).map(|l| ActorKey::Writeback(1, 0x1000 + 64 * l)));
        keys.push(ActorKey::Writeback(1, 0x90000));
        keys.push(ActorKey::Writeback(2, 0x1000));
        keys.extend((5..250).map(|g| ActorKey::Group(0, 0, g)));
        keys.push(ActorKey::Dispatch(2, 1));
        let a = Actors::from(keys.clone());
        assert!(matches!(a.0, ActorList::Runs(_)), "{a:?}");
        assert_eq!(a.len(), keys.len());
        assert_eq!(a.iter().collect::<Vec<_>>(), keys);
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(a.get(i), Some(k));
            assert_eq!(a.position(k), Some(i));
        }
        assert_eq!(a.get(keys.len()), None);
        // Its entries cover every alternative once, in order, each run with the first actor
        // of its alternatives; runs only of groups and write-backs.
        let mut next = 0;
        for (start, first, n) in a.entries() {
            assert_eq!((start, Some(first)), (next, a.get(start)));
            assert!(n == 1 || matches!(first, ActorKey::Group(..) | ActorKey::Writeback(..)));
            next = start + n;
        }
        assert_eq!(next, keys.len());
        assert!(a.in_runs() && a.entries().any(|(_, _, n)| n > 1));
        for k in [
            ActorKey::Group(1, 3, 17),
            ActorKey::Group(1, 3, 400),
            ActorKey::Group(0, 0, 4),
            ActorKey::Writeback(1, 0x1000 + 64 * 300),
            ActorKey::Writeback(1, 0x1020),
            ActorKey::Writeback(2, 0x1040),
            ActorKey::Host(1),
        ] {
            assert!(!a.contains(&k), "{k:?}");
        }
        // A short listing, or one without long runs, stays a plain list.
        let few = Actors::from(keys[..100].to_vec());
        assert!(matches!(few.0, ActorList::Keys(_)));
        assert!(!few.in_runs());
        assert!(few.entries().enumerate().all(|(i, e)| e == (i, keys[i], 1)));
        let mixed: Vec<ActorKey> = (0..600).map(|i| ActorKey::Host(i % 3)).collect();
        assert!(matches!(Actors::from(mixed.clone()).0, ActorList::Keys(_)));
        assert_eq!(
            Actors::from(mixed.clone()).iter().collect::<Vec<_>>(),
            mixed
        );
    }

    /// X1: a reducing run takes the step of every group left of a dispatch listed beside them
    /// one by one only where every other actor listed is asleep, none of the dispatch's groups
    /// is, and nothing asleep touches what the groups touch; where the step itself is asleep
    /// the run stops asleep; a bounded search's run never takes it.
    #[test]
    fn x1_the_step_of_a_dispatchs_groups_beside_actors_asleep_is_taken_only_where_it_stands_for_every_schedule(
    ) {
        use crate::footprint::{Kind, Obj};
        let actors = vec![
            ActorKey::Pfp(1),
            ActorKey::Group(0, 0, 0),
            ActorKey::Group(0, 0, 1),
            ActorKey::Groups(0, 0),
        ];
        let groups = || Footprint::new(vec![(Obj::Mem(0, 512), Kind::Write)]);
        let step = || Some(groups());
        let reads = |s: u64| Footprint::new(vec![(Obj::Mem(s, s + 8), Kind::Read)]);
        // (sleep set, bounded search): the alternative proposed, and whether the run stopped.
        type Case = (Vec<(ActorKey, Footprint)>, bool, u32, bool);
        let cases: Vec<Case> = vec![
            (vec![(ActorKey::Pfp(1), reads(1024))], false, 3, false),
            // The PFP reads what a group writes: the groups one by one.
            (vec![(ActorKey::Pfp(1), reads(256))], false, 1, false),
            // The PFP awake.
            (vec![(ActorKey::Me(1), reads(1024))], false, 0, false),
            // The step asleep itself.
            (
                vec![
                    (ActorKey::Pfp(1), reads(1024)),
                    (ActorKey::Groups(0, 0), groups()),
                ],
                false,
                0,
                true,
            ),
            // A group asleep: the others one by one.
            (
                vec![
                    (ActorKey::Pfp(1), reads(1024)),
                    (ActorKey::Group(0, 0, 0), groups()),
                ],
                false,
                2,
                false,
            ),
            (vec![(ActorKey::Pfp(1), reads(1024))], true, 1, false),
        ];
        for (i, (sleep, bounded, want, stops)) in cases.into_iter().enumerate() {
            let s = if bounded {
                Script::bounded(Vec::new(), Some(0), sleep)
            } else {
                Script::reducing(Vec::new(), Some(0), sleep)
            };
            let k = s.begin_beside(4, true, None, actors.clone(), Some((3, &step)));
            assert_eq!((k, s.sleep_blocked()), (want, stops), "case {i}");
        }
        // Without the step listed, never it.
        let s = Script::reducing(Vec::new(), Some(0), vec![(ActorKey::Pfp(1), reads(1024))]);
        assert_eq!(s.begin_with(3, true, None, actors[..3].to_vec()), 1);
        // No branch starts with the step, nor with its groups where it was taken.
        let s = Script::reducing(Vec::new(), Some(0), vec![(ActorKey::Pfp(1), reads(1024))]);
        s.begin_beside(4, true, None, actors.clone(), Some((3, &step)));
        s.taken();
        let took = |p: &ChoicePoint| (0..4).map(|a| p.beside_step(a)).collect::<Vec<_>>();
        assert_eq!(took(&s.points()[0]), [false, true, true, true]);
        let s = Script::reducing(Vec::new(), Some(0), vec![(ActorKey::Pfp(1), reads(256))]);
        s.begin_beside(4, true, None, actors.clone(), Some((3, &step)));
        s.taken();
        assert_eq!(took(&s.points()[0]), [false, false, false, true]);
    }
}
