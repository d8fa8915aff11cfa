//! The states a preemption-bounded search has explored, for a shrink's bounded searches
//! (`explore/shrink.rs`, phase 1): a run that reaches a state the search explored before,
//! with the same actor able to go on, where that visit had spent no more preemptions and had
//! no actor asleep that is not asleep now, explores nothing new from there, so it goes no
//! further (stateful search with state caching; `docs/exploration.md`, "Shrinking").
//!
//! A state is known by the trace that led to it: the steps taken, each by who took it, its
//! how-manieth step that was, what it touched and what it chose within itself, and for each
//! step the earlier steps it conflicts with (the dependence relation of the reduced search,
//! [`Footprint::conflicts`]). Two runs with the same steps that order every conflicting pair
//! alike differ only in the order of independent steps, which commute: they reach the same
//! state (the same argument the reduced search's soundness rests on). Each step is hashed into
//! 128 bits with those it conflicts with, and a trace's fingerprint is the sum of its steps':
//! two different traces share one with a chance of about 2^-128 per pair, as a model
//! checker's state fingerprints do.

use crate::choice::{ActorKey, ChoicePoint, Event};
use crate::footprint::Footprint;
use std::hash::{Hash, Hasher};

/// 128 bits of hash of `value`: two 64-bit hashes by the standard library's hasher (with its
/// fixed keys), the second of a tag and `value`.
fn hash128(value: &impl Hash) -> u128 {
    let mut lo = std::collections::hash_map::DefaultHasher::new();
    let mut hi = std::collections::hash_map::DefaultHasher::new();
    0x5eed_u16.hash(&mut hi);
    value.hash(&mut lo);
    value.hash(&mut hi);
    u128::from(lo.finish()) | (u128::from(hi.finish()) << 64)
}

/// The states a bounded search explored, each with the preemptions spent before it and the
/// sleep sets it was explored with.
#[derive(Default)]
pub(super) struct Visited {
    seen: rustc_hash::FxHashMap<u128, Vec<(u32, Vec<u128>)>>,
    /// The steps of the run last keyed, in order, up to its point `keyed_to`: a later run
    /// that branches from its path at or before that point has the same steps before its
    /// branch.
    steps: Vec<Step>,
    keyed_to: usize,
    /// How many of `steps` each actor took.
    counts: rustc_hash::FxHashMap<ActorKey, u32>,
}

struct Step {
    /// The scheduling point that took it, and who took it.
    point: usize,
    actor: ActorKey,
    id: u128,
    footprint: Footprint,
    /// The fingerprint of the trace up to and including it.
    trace: u128,
}

/// What a state's key is made of: its trace and its listing, with the alternative that
/// continues the actor that ran last where it could go on (taking another is a preemption).
#[derive(Hash)]
struct Key<'a> {
    trace: u128,
    actors: &'a crate::choice::Actors,
    continuing: Option<u32>,
}

/// Whether sorted `a` is a subset of sorted `b`.
fn subset(a: &[u128], b: &[u128]) -> bool {
    let mut b = b.iter();
    a.iter().all(|x| b.by_ref().any(|y| y == x))
}

impl Visited {
    /// Keys the states at the scheduling points of a run (`points`, its `events`, and
    /// `before(d)`, the preemptions spent before point `d`) from point `from` on, and returns
    /// the first whose key was seen before; the others up to it are seen from now on. `None`
    /// where every state from `from` on is new, or the run cannot be keyed (a point without
    /// its listing of actors: not a reducing run).
    pub(super) fn first_seen(
        &mut self,
        points: &[ChoicePoint],
        events: &[Event],
        from: usize,
        before: impl Fn(usize) -> u32,
    ) -> Option<usize> {
        // The run replayed the last one up to its branch, the scheduling point before `from`.
        let branch = points[..from]
            .iter()
            .rposition(|p| p.scheduling)
            .unwrap_or(0);
        let keep = if branch > self.keyed_to {
            0
        } else {
            self.steps.partition_point(|s| s.point < branch)
        };
        for s in self.steps.drain(keep..) {
            if let Some(k) = self.counts.get_mut(&s.actor) {
                *k -= 1;
            }
        }
        let mut trace = self.steps.last().map_or(0, |s| s.trace);
        let start = self.steps.last().map_or(0, |s| s.point + 1);
        self.keyed_to = start;
        for (d, p) in points.iter().enumerate().skip(start) {
            self.keyed_to = d;
            if !p.scheduling {
                continue;
            }
            if d >= from {
                let key = hash128(&Key {
                    trace,
                    actors: &p.actors,
                    continuing: p.continuing,
                });
                let mut sleep: Vec<u128> = p.sleep.iter().map(hash128).collect();
                sleep.sort_unstable();
                sleep.dedup();
                let spent = before(d);
                let known = self.seen.entry(key).or_default();
                // Explored before with no more preemptions spent and no more asleep: every
                // schedule from here is one from there, or one that a sleeping actor's
                // exploration covers.
                if known.iter().any(|(b, s)| *b <= spent && subset(s, &sleep)) {
                    return Some(d);
                }
                known.push((spent, sleep));
            }
            let Some(actor) = p.taken.and_then(|t| p.actors.get(t as usize)) else {
                // Nothing taken (the run ended), or no listing to know who took it.
                if p.taken.is_some() {
                    return None;
                }
                continue;
            };
            // The choices within the step: its points up to the next scheduling one.
            let within: Vec<Option<u32>> = points[d + 1..]
                .iter()
                .take_while(|q| !q.scheduling)
                .map(|q| q.taken)
                .collect();
            let footprint = super::dpor::step_footprint(events, d);
            let k = self.counts.entry(actor).or_default();
            let id = hash128(&(actor, *k));
            *k += 1;
            let mut conflicts = 0u128;
            for s in &self.steps {
                if s.footprint.conflicts(&footprint) {
                    conflicts = conflicts.wrapping_add(s.id);
                }
            }
            trace = trace.wrapping_add(hash128(&(id, &footprint, &within, conflicts)));
            self.steps.push(Step {
                point: d,
                actor,
                id,
                footprint,
                trace,
            });
        }
        self.keyed_to = points.len();
        None
    }
}
