//! Scripted choices (`choice.rs`): the scheduling choice points of a run whose choices come
//! from a [`Script`] instead of the seeded strategy.
//!
//! A scheduling point's alternatives are the actions [`Scheduler::choose`] picks among, in the
//! same order (the listed actions still enabled, the dispatches in flight in launch order, the
//! endless kernels), or in strict mode, while a PFP step is enabled, the enabled PFP steps (D5's
//! maximal run-ahead). A try that finds its engine stage blocked changes nothing: the point
//! stays open and the script proposes again among the same alternatives.

use super::pick::{Choice, Listing};
use super::*;
use crate::choice::{ActorKey, Where};
use crate::engine::kernels::GroupSpans;
use crate::footprint::{Footprint, Kind, Obj};

/// Who performs an alternative: an actor, or the dispatch in flight at a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    Actor(Actor),
    Group(Slot),
}

/// A reducing exploration lists a dispatch's groups one by one up to this many left (each is
/// its own actor); past it the dispatch is one actor that chooses which groups complete.
pub(super) const MAX_LISTED_GROUPS: u64 = 4096;

/// The key of an actor across runs.
pub(super) fn actor_key(a: Actor) -> ActorKey {
    match a {
        Actor::Host(h) => ActorKey::Host(h as u32),
        Actor::Pfp(q) => ActorKey::Pfp(q),
        Actor::Me(q) => ActorKey::Me(q),
        Actor::Retire(q) => ActorKey::Retire(q),
        Actor::Endless(s) => ActorKey::Endless(s),
        Actor::Writeback(q) => ActorKey::Writeback(q, u64::MAX),
    }
}

/// Where actor `a`'s next step is in the program (a narrated run, `Script::narrating`).
fn site_of(listing: &Listing, st: &State, a: ActorKey) -> Option<Where> {
    let engine = |q: u32| listing.queue(q).map(|q| lock(&q.engine));
    let site = match a {
        ActorKey::Pfp(q) => engine(q)?.next_site(Stage::Pfp),
        ActorKey::Me(q) => engine(q)?.next_site(Stage::Me),
        ActorKey::Retire(q) => engine(q)?.retire_site(),
        ActorKey::Group(q, d, _) | ActorKey::Dispatch(q, d) | ActorKey::Groups(q, d) => {
            engine(q)?.dispatch_site(d)
        }
        ActorKey::Host(h) => return st.hosts.get(h as usize)?.position.map(Where::Host),
        ActorKey::Writeback(..) | ActorKey::Endless(_) => None,
    };
    site.map(Where::Command)
}

/// In a reducing run, the dispatch whose groups left complete in one step ([`Choice::GroupAll`])
/// rather than one group per step: when they are the only actions that can run (no other
/// dispatch in flight, no listed actor, no endless kernel), they are one range of built-in
/// groups that run in any order to the same memory without a fault
/// ([`Kernel::commuting_groups`]), and no engine stage or host thread waits on a value in what
/// they write (plain memory, no hazard model). Then nothing else can run before the last of
/// them: a group's completion lets nothing else run but a wait on what it wrote, and the
/// dispatch's end lets the rest run (a retirement, a flush, a wait for idle). Every schedule
/// from here starts with these groups in some order, all of them equivalent; the one step
/// stands for them all (`docs/exploration.md`, "Dispatches that run alone").
fn lone_dispatch(
    dev: &DeviceShared,
    st: &State,
    listing: &Listing,
    n_groups: usize,
    no_tail: bool,
) -> Option<Slot> {
    if listing.len() != 0 || n_groups != 1 || !no_tail || dev.model().is_some() {
        return None;
    }
    let slot = st.groups.nth(0);
    commuting_left(dev, st, listing, slot).map(|_| slot)
}

/// Whether the groups left of the dispatch at `slot` are one range of built-in groups that run
/// in any order to the same memory without a fault, and no engine stage or host thread waits
/// on a value in what they write ([`lone_dispatch`]): what they read and write.
fn commuting_left(
    dev: &DeviceShared,
    st: &State,
    listing: &Listing,
    slot: Slot,
) -> Option<GroupSpans> {
    let (first, end) = st.groups.one_range_left(slot)?;
    let spans = st
        .groups
        .get(slot)?
        .kernel
        .commuting_groups(dev, first..end)?;
    let Some((ws, we)) = spans.write else {
        return Some(spans);
    };
    // A wait reads at most 8 bytes.
    let meets = |a: u64| a < we && ws < a.saturating_add(8);
    let engine_waits = listing
        .queues
        .iter()
        .any(|q| lock(&q.engine).memory_waits().any(meets));
    let host_waits = st.hosts.iter().any(|h| {
        matches!(&h.state, HostState::Blocked(HostWait::Memory { buffer, offset, .. })
            if meets(buffer.base.saturating_add(*offset)))
    });
    (!engine_waits && !host_waits).then_some(spans)
}

/// In a reducing run whose point lists a dispatch's groups one by one (`alts`, two or more:
/// one is its own step) beside other actors, the dispatch whose step of every group left
/// ([`Choice::GroupsBeside`], [`ActorKey::Groups`]) is listed after them: the only dispatch in
/// flight, no endless kernel, plain memory. The listing depends on neither the sleep set nor
/// whether the groups commute, so a schedule string replays without them; the run takes the
/// step only where its groups would run alone but for those actors, every other actor listed
/// is asleep and none touches what the groups touch ([`beside_footprint`],
/// [`Script::begin_beside`]): from there every schedule the search explores runs those groups
/// first, one trace, which the one step stands for (`docs/exploration.md`, "Dispatches beside
/// actors asleep").
fn beside_sleepers(
    dev: &DeviceShared,
    st: &State,
    listing: &Listing,
    n_groups: usize,
    no_tail: bool,
    alts: &[(Choice, Who)],
) -> Option<Slot> {
    if listing.len() == 0 || n_groups != 1 || !no_tail || dev.model().is_some() {
        return None;
    }
    let slot = st.groups.nth(0);
    alts.iter()
        .filter(|a| matches!(a.0, Choice::GroupOne(s, _) if s == slot))
        .nth(1)
        .map(|_| slot)
}

/// Where the groups left of the dispatch at `slot` would run alone but for the actors listed
/// beside them ([`commuting_left`]), what their step touches, or more: what a group's
/// completion records (`pick.rs`, `complete_groups`: the clock, the dispatch's count, the
/// queue's busy state, the device) and the bytes they read and write (a `sum`'s adds counted
/// as writes).
fn beside_footprint(
    dev: &DeviceShared,
    st: &State,
    listing: &Listing,
    slot: Slot,
) -> Option<Footprint> {
    let spans = commuting_left(dev, st, listing, slot)?;
    let d = st.groups.get(slot)?;
    let mut accesses = vec![
        (Obj::Clock, Kind::Update),
        (Obj::Device, Kind::Read),
        (Obj::Dispatch(d.queue, d.index), Kind::Update),
        (Obj::Busy(d.queue), Kind::Update),
    ];
    if let Some((s, e)) = spans.read {
        accesses.push((Obj::Mem(s, e), Kind::Read));
    }
    if let Some((s, e)) = spans.write {
        accesses.push((Obj::Mem(s, e), Kind::Write));
    }
    Some(Footprint::new(accesses))
}

impl Scheduler {
    /// Picks one of the enabled actions as `script` says (see the module comment).
    pub(super) fn choose_scripted(
        &self,
        dev: &DeviceShared,
        st: &mut State,
        script: &Script,
        listing: &Listing,
        n_groups: usize,
        tail: &[(Actor, u64, Wake)],
    ) -> Choice {
        let listed = || (0..listing.len()).map(|k| listing.nth(k));
        let is_pfp = |i: &usize| matches!(listing.entries[*i].actor, Actor::Pfp(_));
        let pfp_point = dev.strict() && listed().any(|i| is_pfp(&i));
        if script.is_open() && st.script_pfp == pfp_point && !st.script_alts.is_empty() {
            let k = script.again() as usize;
            if let Some(&(c, _)) = st.script_alts.get(k) {
                return c;
            }
        }
        script.close();
        let reducing = script.is_reducing();
        let entry = |i: usize| (Choice::Listed(i), Who::Actor(listing.entries[i].actor));
        // The buffer of the last point's alternatives, reused.
        let mut alts = std::mem::take(&mut st.script_alts);
        alts.clear();
        let mut beside = None;
        if pfp_point {
            alts.extend(listed().filter(is_pfp).map(entry));
        } else if let Some(slot) = reducing
            .then(|| lone_dispatch(dev, st, listing, n_groups, tail.is_empty()))
            .flatten()
        {
            alts.push((Choice::GroupAll(slot), Who::Group(slot)));
        } else {
            for i in listed() {
                match listing.entries[i].actor {
                    Actor::Writeback(q) if reducing => {
                        // One alternative per dirty line: each line is its own actor.
                        let lines = dev
                            .model()
                            .as_ref()
                            .and_then(|m| m.vis.as_ref().map(|v| v.dirty_lines(q)))
                            .unwrap_or_default();
                        for line in lines {
                            alts.push((
                                Choice::WritebackLine(i, line),
                                Who::Actor(Actor::Writeback(q)),
                            ));
                        }
                    }
                    _ => alts.push(entry(i)),
                }
            }
            for r in 0..n_groups {
                let slot = st.groups.nth(r);
                match reducing
                    .then(|| st.groups.groups_left(slot, MAX_LISTED_GROUPS))
                    .flatten()
                {
                    Some(left) => {
                        for g in left {
                            alts.push((Choice::GroupOne(slot, g), Who::Group(slot)));
                        }
                    }
                    None => alts.push((Choice::Group(slot), Who::Group(slot))),
                }
            }
            for (i, (a, _, _)) in tail.iter().enumerate() {
                alts.push((Choice::Tail(i), Who::Actor(*a)));
            }
            beside = reducing
                .then(|| beside_sleepers(dev, st, listing, n_groups, tail.is_empty(), &alts))
                .flatten();
            if let Some(slot) = beside {
                alts.push((Choice::GroupsBeside(slot), Who::Group(slot)));
            }
        }
        let continuing = st
            .last_who
            .and_then(|w| alts.iter().position(|a| a.1 == w))
            .map(|c| c as u32);
        let narrating = script.is_narrating();
        let actors = if reducing || narrating || script.is_sampling() {
            alts.iter()
                .map(|(c, w)| match (*c, *w) {
                    (Choice::WritebackLine(i, line), _) => match listing.entries[i].actor {
                        Actor::Writeback(q) => ActorKey::Writeback(q, line),
                        a => actor_key(a),
                    },
                    (_, Who::Actor(a)) => actor_key(a),
                    (Choice::GroupOne(slot, g), _) => {
                        let d = st.groups.get(slot);
                        ActorKey::Group(d.map_or(0, |d| d.queue), d.map_or(0, |d| d.index), g)
                    }
                    (Choice::GroupsBeside(slot), _) => {
                        let d = st.groups.get(slot);
                        ActorKey::Groups(d.map_or(0, |d| d.queue), d.map_or(0, |d| d.index))
                    }
                    (_, Who::Group(slot)) => {
                        let d = st.groups.get(slot);
                        ActorKey::Dispatch(d.map_or(0, |d| d.queue), d.map_or(0, |d| d.index))
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let sites = narrating.then(|| {
            actors
                .iter()
                .map(|&a| site_of(listing, st, a))
                .collect::<Vec<_>>()
        });
        let state: &State = st;
        let footprint = |slot| move || beside_footprint(dev, state, listing, slot);
        let beside = beside.map(|slot| (alts.len() as u32 - 1, footprint(slot)));
        let k = script.begin_beside(
            alts.len() as u32,
            true,
            continuing,
            actors,
            beside
                .as_ref()
                .map(|(alt, f)| (*alt, f as &dyn Fn() -> Option<Footprint>)),
        ) as usize;
        if let Some(sites) = sites {
            script.note_sites(sites);
        }
        let c = alts[k.min(alts.len() - 1)].0;
        st.script_alts = alts;
        st.script_pfp = pfp_point;
        c
    }

    /// A scripted run's scheduling try ended: it ran (`ran`) or found its stage blocked.
    pub(super) fn script_tried(&self, st: &mut State, ran: bool) {
        let Some(script) = st.script.clone() else {
            return;
        };
        if ran {
            if let Some(k) = script.current() {
                st.last_who = st.script_alts.get(k as usize).map(|a| a.1);
            }
            script.taken();
            st.script_alts.clear();
        } else {
            script.fail();
        }
    }
}
