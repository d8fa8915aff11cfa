//! Minimal counterexamples: a failing schedule shrunk to the fewest preemptions that still fail
//! the same way (`docs/exploration.md`, "Shrinking").
//!
//! Three phases, within one budget of runs:
//!
//! 1. **Iterated preemption bound.** The search bounded to 0 preemptions, then 1, 2, ...
//!    (each bound explores every schedule with at most that many, CHESS-style, up to the order
//!    of independent actions of one actor of the plain listing, which keeps a schedule's
//!    preemptions, going no further from a state explored before:
//!    [`super::exhaustive::enumerate_bounded_states`]). The first schedule of a bound that
//!    fails the same way has the fewest preemptions possible once every smaller bound was
//!    explored to its end. A bound whose search the budget cuts (its runs stopped asleep or as
//!    repeats count) ends this phase.
//! 2. **Sampling**, for the failures the first phase did not settle: random schedules with
//!    fewer preemptions than the best found so far (each choice random, a preemption only at
//!    a few scheduling points drawn at random, [`Script::sampling`]), for a bound whose
//!    schedules outnumber the budget, where the depth-first search's first runs all share a
//!    prefix that does not fail. A schedule found this way has the fewest preemptions when
//!    every smaller bound was explored (or it has none).
//! 3. **Greedy removal**, for the failures the first two phases did not settle: from the schedule
//!    found so far, replace a preemption by continuing the actor it preempted (and choose
//!    canonically after it, which preempts nothing), first preemption first; keep the change
//!    when the failure stays the same, and start again from the new schedule.
//!
//! Between them, **reordering** ([`reorder`]): the steps of a failure's best schedule so far,
//! run again in an order of fewer preemptions that keeps every two conflicting steps in
//! their order (the same run up to the order of independent actions, so the same outcome),
//! for each failure's own schedule first, for those the first two phases did not settle,
//! and after phase 3. It reaches what removing one preemption at a time cannot (two
//! preemptions that only together keep the outcome, where one elsewhere would do).
//!
//! Between phases 1 and 2, the **bounded search with partial-order reduction**
//! ([`find_reduced`]): the reduced search bounded to few preemptions, which explores far fewer
//! schedules per bound where several actors can each run next, for the failures phase 1 did
//! not settle. It is not shown to reach every outcome within its bound, so what it finds is
//! settled only as phase 1's bounds settle it.
//!
//! "The same way" is the caller's: a key of each run's outcome (the scenario layer's failure
//! signature).

use super::exhaustive::{search_plain_in, Bound, ExhaustiveOptions, Run, Sleep};
use crate::choice::{ChoicePoint, Guide, GuideStep, Narrated, Script};
use std::sync::Arc;

/// Runs a shrink takes at most by default ([`shrink`]'s `max_runs`).
pub const DEFAULT_SHRINK_RUNS: u64 = 30_000;

/// A failing schedule shrunk ([`shrink`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrunk {
    /// The schedule string of the shrunk schedule (it fails the same way).
    pub replay: String,
    /// Its preemptions.
    pub preemptions: u32,
    /// The preemptions of the schedule it was shrunk from.
    pub original_preemptions: u32,
    /// No schedule with fewer preemptions fails the same way: every schedule with fewer was
    /// explored (in the plain listing). `false`: the budget ran out first.
    pub fewest: bool,
    /// Its decisive steps: each preemption, in order (who ran, where, and whom it preempted).
    pub steps: Vec<Narrated>,
}

#[derive(Clone)]
struct Best {
    tries: Vec<u32>,
    /// Listed as a reducing exploration lists (a `v2:` schedule).
    reducing: bool,
    replay: String,
    points: Vec<ChoicePoint>,
    preemptions: u32,
}

impl Best {
    fn of(script: &Script) -> Self {
        let points = script.points();
        Best {
            tries: script.tries(),
            reducing: script.is_reducing(),
            replay: script.schedule_string(),
            preemptions: ChoicePoint::preemptions(&points),
            points,
        }
    }
}

/// Shrinks each of `targets` (a failure's key and the schedule string of a schedule that
/// fails that way) to the fewest preemptions that still give the same key, within `max_runs`
/// runs of `body` in all. `key` gives a run's failure key, `None` when it passed. A target
/// whose schedule string does not parse, or does not fail with its key when replayed, is
/// returned as it is (not `fewest`, no steps). The result is the same for the same program
/// and targets: the search is deterministic. Each shrunk schedule comes with the value of its
/// last run, a narrating replay ([`Script::narrating`]); `None` for a target returned as it is.
pub fn shrink<T, K: PartialEq>(
    targets: &[(K, String)],
    max_runs: u64,
    mut body: impl FnMut(&Arc<Script>) -> T,
    mut key: impl FnMut(T) -> Option<K>,
) -> Vec<(Shrunk, Option<T>)> {
    let mut runs = 0u64;
    let mut best: Vec<Option<Best>> = Vec::with_capacity(targets.len());
    for (k, s) in targets {
        let Ok(script) = Script::from_schedule_string(s) else {
            best.push(None);
            continue;
        };
        let script = Arc::new(script);
        runs += 1;
        let v = body(&script);
        let same = key(v).is_some_and(|got| got == *k);
        best.push(same.then(|| Best::of(&script)));
    }
    let original: Vec<Option<u32>> = best
        .iter()
        .map(|b| b.as_ref().map(|b| b.preemptions))
        .collect();
    // The failing runs' steps again in an order of fewer preemptions, where they have one.
    improve_by_reordering(
        targets,
        &mut best,
        |_| true,
        (&mut runs, max_runs),
        &mut body,
        &mut key,
    );
    // Every schedule with at most `complete_through` preemptions was explored.
    let mut complete_through: Option<u32> = None;
    let settled = |b: &Option<Best>, through: Option<u32>| match b {
        None => true,
        Some(b) => b.preemptions == 0 || through.is_some_and(|t| t + 1 >= b.preemptions),
    };
    // A tenth of the budget first for random schedules with fewer preemptions (phase 2's
    // sampling): where the bounded searches below cannot finish a bound, the failing
    // schedules may all lie past the first runs of its depth-first order, while one in a few
    // random ones fails; a failure found without preemptions needs no bounded search.
    let mut draw = 0u64;
    let before = runs;
    sample(
        targets,
        &mut best,
        None,
        (&mut runs, max_runs / 10),
        &mut draw,
        &mut body,
        &mut key,
    );
    // Phase 1: the iterated preemption bound, three quarters of the budget (beside what the
    // sampling just took; the rest is the sampling's again and the greedy phase's).
    let phase1_runs = (max_runs - max_runs / 4)
        .saturating_add(runs - before)
        .min(max_runs);
    for bound in 0u32.. {
        let pending: Vec<usize> = (0..targets.len())
            .filter(|&i| !settled(&best[i], complete_through))
            .collect();
        if pending.is_empty() || runs >= phase1_runs {
            break;
        }
        let opts = ExhaustiveOptions {
            max_schedules: phase1_runs - runs,
            preemption_bound: Some(bound),
            reduction: false,
        };
        let mut found = vec![false; targets.len()];
        // Sleep sets across one actor's independent actions: the orders of a dispatch's
        // groups that nothing else sees are explored once (each keeps the preemptions). And a
        // run that reaches a state explored before goes no further (`explore/visited.rs`):
        // the orders of several queues' turns mostly reach the same few states.
        let mut visited = super::visited::Visited::default();
        let e = search_plain_in(
            &opts,
            None,
            Sleep::Plain,
            Some(&mut visited),
            &mut body,
            |r| {
                let Run::Schedule(v, script) = r else {
                    // A run stopped asleep or as a repeat costs a run too; one that did not follow
                    // its prefix goes on to the search's check, as `enumerate` lets it.
                    if matches!(r, Run::Diverged) {
                        return true;
                    }
                    runs += 1;
                    return runs < phase1_runs;
                };
                runs += 1;
                if let Some(got) = key(v) {
                    note_found(
                        targets,
                        &pending,
                        (&mut found, &mut best),
                        &got,
                        script,
                        bound,
                    );
                }
                pending.iter().any(|&i| !found[i])
            },
        );
        // A target found at this bound has exactly `bound` preemptions (no smaller bound,
        // each explored to its end, found it): it is settled. A bound stopped early (every
        // pending target found, or the budget spent) ends the phase.
        if e.complete || e.bound == Some(Bound::PreemptionBound(bound)) {
            complete_through = Some(bound);
        } else {
            break;
        }
        if e.complete {
            // No schedule has more preemptions: a larger bound explores nothing new.
            break;
        }
    }
    // Bounded partial-order reduction for the failures the bounded searches did not settle,
    // within half of what is left of the budget: it finds schedules of few preemptions
    // where many actors can each run next, but does not prove a count the fewest.
    let until = runs + (max_runs.saturating_sub(runs)) / 2;
    find_reduced(
        targets,
        &mut best,
        complete_through,
        (&mut runs, until),
        &mut body,
        &mut key,
    );
    // Phase 2: random schedules with fewer preemptions for the failures the bounded
    // searches did not settle, within half of what is left of the budget.
    let until = runs + (max_runs.saturating_sub(runs)) / 2;
    sample(
        targets,
        &mut best,
        complete_through,
        (&mut runs, until),
        &mut draw,
        &mut body,
        &mut key,
    );
    // The steps of what the searches found, reordered (each target not settled).
    improve_by_reordering(
        targets,
        &mut best,
        |b| !settled(b, complete_through),
        (&mut runs, max_runs),
        &mut body,
        &mut key,
    );
    // Phase 3: greedy removal for the rest.
    for i in 0..targets.len() {
        if settled(&best[i], complete_through) {
            continue;
        }
        let Some(mut cur) = best[i].take() else {
            continue;
        };
        'improve: while runs < max_runs {
            let preempting: Vec<&ChoicePoint> = cur
                .points
                .iter()
                .filter(|p| p.taken.is_some_and(|t| p.preempts(t)))
                .collect();
            for p in preempting {
                if runs >= max_runs {
                    break 'improve;
                }
                let Some(c) = p.continuing else { continue };
                let mut prefix = cur.tries[..p.first_try].to_vec();
                prefix.push(c);
                let script = Arc::new(if cur.reducing {
                    Script::reducing(prefix, None, Vec::new())
                } else {
                    Script::new(prefix)
                });
                runs += 1;
                let v = body(&script);
                if key(v).is_some_and(|got| got == targets[i].0) {
                    let b = Best::of(&script);
                    if b.preemptions < cur.preemptions {
                        cur = b;
                        continue 'improve;
                    }
                }
            }
            break;
        }
        // And its steps reordered, once more.
        if let Some(b) = (runs < max_runs)
            .then(|| reorder(&targets[i].0, &cur, &mut runs, &mut body, &mut key))
            .flatten()
        {
            cur = b;
        }
        best[i] = Some(cur);
    }
    let fewest: Vec<bool> = best
        .iter()
        .map(|b| b.is_some() && settled(b, complete_through))
        .collect();
    let mut out = Vec::with_capacity(targets.len());
    for (i, (_, s)) in targets.iter().enumerate() {
        let replayed = best[i].as_ref().and_then(|b| {
            let script = Arc::new(Script::from_schedule_string(&b.replay).ok()?.narrating());
            let v = body(&script);
            let steps = script
                .narration()
                .into_iter()
                .filter(|n| n.preempted.is_some())
                .collect();
            Some((b, steps, v))
        });
        out.push(match replayed {
            None => (
                Shrunk {
                    replay: s.clone(),
                    preemptions: 0,
                    original_preemptions: 0,
                    fewest: false,
                    steps: Vec::new(),
                },
                None,
            ),
            Some((b, steps, v)) => (
                Shrunk {
                    replay: b.replay.clone(),
                    preemptions: b.preemptions,
                    original_preemptions: original[i].unwrap_or(b.preemptions),
                    fewest: fewest[i],
                    steps,
                },
                Some(v),
            ),
        });
    }
    out
}

/// The search bounded to few preemptions with partial-order reduction
/// ([`super::exhaustive::enumerate_bounded_reduced`]), at each bound from the lowest not
/// explored to its end (`complete_through`) up, for the targets whose best schedule has more
/// preemptions than the bound, until `until` runs: a schedule it finds that fails the same
/// way with fewer preemptions than the best so far is the new best. It explores far fewer
/// schedules per bound than the searches of phase 1 where several actors can each run next,
/// but it is not shown to reach every outcome within its bound, so what it finds is settled
/// only as phase 1's bounds settle it.
fn find_reduced<T, K: PartialEq>(
    targets: &[(K, String)],
    best: &mut [Option<Best>],
    complete_through: Option<u32>,
    (runs, until): (&mut u64, u64),
    body: &mut impl FnMut(&Arc<Script>) -> T,
    key: &mut impl FnMut(T) -> Option<K>,
) {
    for bound in complete_through.map_or(0, |t| t + 1).. {
        let pending: Vec<usize> = (0..targets.len())
            .filter(|&i| best[i].as_ref().is_some_and(|b| b.preemptions > bound))
            .collect();
        if pending.is_empty() || *runs >= until {
            return;
        }
        let opts = ExhaustiveOptions {
            max_schedules: until - *runs,
            preemption_bound: Some(bound),
            reduction: true,
        };
        let mut found = vec![false; targets.len()];
        let e = super::dpor::enumerate_reduced(&opts, &mut *body, |r| {
            let Run::Schedule(v, script) = r else {
                if matches!(r, Run::Diverged) {
                    return true;
                }
                *runs += 1;
                return *runs < until;
            };
            *runs += 1;
            if let Some(got) = key(v) {
                note_found(targets, &pending, (&mut found, best), &got, script, bound);
            }
            *runs < until && pending.iter().any(|&i| !found[i])
        });
        if e.complete {
            // No schedule has more preemptions than this bound allows.
            return;
        }
    }
}

/// A bounded search's run (schedule `script`, within `bound`) that failed with key `got`:
/// each target of `pending` that fails so is found, and the run is its best schedule when it
/// has fewer preemptions than the best so far.
fn note_found<K: PartialEq>(
    targets: &[(K, String)],
    pending: &[usize],
    (found, best): (&mut [bool], &mut [Option<Best>]),
    got: &K,
    script: &Script,
    bound: u32,
) {
    for &i in pending {
        if !found[i] && targets[i].0 == *got {
            let b = Best::of(script);
            debug_assert!(b.preemptions <= bound, "a run past its bound");
            if best[i]
                .as_ref()
                .is_some_and(|o| b.preemptions < o.preemptions)
            {
                best[i] = Some(b);
            }
            found[i] = true;
        }
    }
}

/// How many draws in a row that repeat a schedule drawn before end [`sample`]: the schedules
/// it can draw were most likely all drawn.
const SAMPLE_REPEATS: u32 = 64;

/// Runs random schedules ([`Script::sampling`]) with fewer preemptions than the best found so
/// far for each target not settled (`complete_through`: every schedule with at most that many
/// preemptions was explored), until `runs` reaches `until`, keeping a schedule that fails as
/// a target does with fewer preemptions than its best. The bounds drawn go round from the
/// lowest not explored to below the most preemptions of a pending target's best; the
/// preemptions are put at scheduling points drawn among as many as the longest such best
/// opened. `draw` numbers the schedules drawn (each seeded by it): the result is the same
/// for the same program. It stops early after [`SAMPLE_REPEATS`] draws in a row of
/// schedules it drew before.
fn sample<T, K: PartialEq>(
    targets: &[(K, String)],
    best: &mut [Option<Best>],
    complete_through: Option<u32>,
    (runs, until): (&mut u64, u64),
    draw: &mut u64,
    body: &mut impl FnMut(&Arc<Script>) -> T,
    key: &mut impl FnMut(T) -> Option<K>,
) {
    let lowest = complete_through.map_or(0, |t| t + 1);
    // The schedules drawn so far, and how many draws in a row repeated one: where the
    // schedules with so few preemptions are few (a small scenario), they are soon all drawn,
    // and drawing on to the budget would only run them again.
    let mut drawn: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut repeats = 0u32;
    while *runs < until {
        let pending: Vec<usize> = (0..targets.len())
            .filter(|&i| best[i].as_ref().is_some_and(|b| b.preemptions > lowest))
            .collect();
        let Some(most) = pending
            .iter()
            .filter_map(|&i| best[i].as_ref().map(|b| b.preemptions))
            .max()
        else {
            return;
        };
        // Each bound twice in a row: once drawn uniformly, once by priorities (below).
        let bound = lowest + ((*draw / 2) % u64::from(most - lowest)) as u32;
        let length = pending
            .iter()
            .filter_map(|&i| best[i].as_ref())
            .map(|b| b.points.iter().filter(|p| p.scheduling).count())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut rng = crate::rng::Rng::new(*draw ^ 0x5348_5249_4e4b_0001);
        let mut at: Vec<usize> = (0..bound)
            .map(|_| rng.below(length as u64) as usize)
            .collect();
        at.sort_unstable();
        at.dedup();
        // Every other draw chooses by priorities (PCT-like), the rest uniformly.
        let script = Arc::new(Script::sampling(
            Vec::new(),
            rng.next_u64(),
            at,
            *draw % 2 == 1,
        ));
        *draw += 1;
        *runs += 1;
        let v = body(&script);
        if drawn.insert(script.schedule_string()) {
            repeats = 0;
        } else {
            // The same schedule fails the same way, or not, as before.
            repeats += 1;
            if repeats >= SAMPLE_REPEATS {
                return;
            }
            continue;
        }
        let Some(got) = key(v) else { continue };
        // Worked out once, for the first target that fails this way.
        let mut found: Option<Best> = None;
        for &i in &pending {
            if targets[i].0 != got {
                continue;
            }
            let b = found.get_or_insert_with(|| Best::of(&script));
            if best[i]
                .as_ref()
                .is_some_and(|o| b.preemptions < o.preemptions)
            {
                best[i] = Some(b.clone());
            }
        }
    }
}

/// [`reorder`] for each target with a best schedule in `best` that `which` accepts, within
/// the budget.
fn improve_by_reordering<T, K: PartialEq>(
    targets: &[(K, String)],
    best: &mut [Option<Best>],
    which: impl Fn(&Option<Best>) -> bool,
    (runs, max_runs): (&mut u64, u64),
    body: &mut impl FnMut(&Arc<Script>) -> T,
    key: &mut impl FnMut(T) -> Option<K>,
) {
    for (i, (k, _)) in targets.iter().enumerate() {
        if *runs >= max_runs {
            return;
        }
        let Some(b) = best[i].as_ref().filter(|_| which(&best[i])) else {
            continue;
        };
        if let Some(r) = reorder(k, b, runs, body, key) {
            best[i] = Some(r);
        }
    }
}

/// Most steps of a run that [`reorder`] takes on: it compares every pair of them.
const REORDER_STEPS: usize = 4_000;

/// The steps of `best`'s run in an order of few preemptions ([`Script::guided`]): its replay
/// records what each step touched, and a run takes them again keeping the order of every
/// two that conflict, in the order [`fewest_order`] gives, and another in the greedy order
/// (continuing an actor wherever the dependences let it). `Some`: the run of fewer
/// preemptions than `best` that fails with `target`'s key. Three runs; none when `best` has
/// no preemption or is not listed as a reducing exploration lists (its steps have no
/// actors).
fn reorder<T, K: PartialEq>(
    target: &K,
    best: &Best,
    runs: &mut u64,
    body: &mut impl FnMut(&Arc<Script>) -> T,
    key: &mut impl FnMut(T) -> Option<K>,
) -> Option<Best> {
    if !best.reducing || best.preemptions == 0 {
        return None;
    }
    let replay = Arc::new(Script::from_schedule_string(&best.replay).ok()?);
    *runs += 1;
    body(&replay);
    // The clock's reads left out unless a timestamp is written, as the reduced search does.
    let (points, events) = match super::dpor::run_record(&replay, false) {
        Ok(record) => record,
        Err(super::dpor::ClockMatters) => super::dpor::run_record(&replay, true).ok()?,
    };
    let mut guide = guide_of(&points, &events)?;
    // Two orders: the one of the fewest preemptions the steps' dependences and where each
    // actor was blocked suggest, and (without an order) the greedy one.
    let mut found: Option<Best> = None;
    let ordered = fewest_order(&guide, &points).map(|rank| {
        let mut g = guide.clone();
        g.rank = rank;
        g
    });
    guide.rank.clear();
    for g in ordered.into_iter().chain([guide]) {
        let script = Arc::new(Script::guided(Arc::new(g)));
        *runs += 1;
        let v = body(&script);
        let b = Best::of(&script);
        let fewer = b.preemptions < found.as_ref().map_or(best.preemptions, |f| f.preemptions);
        if fewer && key(v).is_some_and(|got| got == *target) {
            found = Some(b);
        }
    }
    found
}

/// Most states [`fewest_order`] visits.
const ORDER_STATES: usize = 50_000;

/// An order of `guide`'s steps (each step's rank) that keeps every dependence and has the
/// fewest preemptions by an estimate of who can run: a 0-1 breadth-first search over how
/// far each actor got and who ran last, where switching away from an actor of the plain
/// listing costs one when it could go on: its next step is ready, or the step after which
/// the run of `points` (the guide's) listed it again that far (it was not listed, or found
/// blocked) is behind it, or, with no step of it left, that run listed it after its last
/// (a strict queue's write-backs of other dirty lines). The actor that ran last goes on
/// where it has a step ready, and each branch takes one alternative per actor of the plain
/// listing (the one whose step comes first). `None` past [`ORDER_STATES`] states.
fn fewest_order(guide: &Guide, points: &[ChoicePoint]) -> Option<Vec<u32>> {
    use std::collections::{HashMap, VecDeque};
    let steps = &guide.steps;
    let mut actors: Vec<crate::choice::ActorKey> = Vec::new();
    let mut of = Vec::with_capacity(steps.len());
    let mut seqs: Vec<Vec<usize>> = Vec::new();
    for (i, st) in steps.iter().enumerate() {
        let a = match actors.iter().position(|&x| x == st.actor) {
            Some(a) => a,
            None => {
                actors.push(st.actor);
                seqs.push(Vec::new());
                actors.len() - 1
            }
        };
        of.push((a, seqs[a].len()));
        seqs[a].push(i);
    }
    if actors.len() > usize::from(u16::MAX) {
        return None;
    }
    let class: Vec<usize> = actors
        .iter()
        .map(|&k| {
            actors
                .iter()
                .position(|&x| x.same_plain_actor(k))
                .unwrap_or(0)
        })
        .collect();
    // unblocked[a][k]: the step the guide's run took where it last had actor `a`, with `k`
    // steps taken, not listed (or found blocked): what let it go on, as far as the run
    // shows (`None`: it was listed from its `k`th step on).
    let mut unblocked: Vec<Vec<Option<usize>>> =
        seqs.iter().map(|q| vec![None; q.len() + 1]).collect();
    let mut step = 0usize;
    let mut done = vec![0usize; actors.len()];
    // After: per class, whether the guide's run listed another alternative of it (one with no
    // step in the run: a strict queue's write-back of another dirty line) at its first
    // scheduling point after the class's last step.
    let mut after_last: Vec<Option<bool>> = vec![None; actors.len()];
    let mut class_left = vec![0usize; actors.len()];
    for (a, q) in seqs.iter().enumerate() {
        class_left[class[a]] += q.len();
    }
    for p in points.iter().filter(|p| p.scheduling) {
        let taken = p.taken.and_then(|t| p.actors.get(t as usize));
        for c in 0..actors.len() {
            if class[c] != c || class_left[c] > 0 || after_last[c].is_some() {
                continue;
            }
            after_last[c] = Some(p.actors.iter().enumerate().any(|(alt, k)| {
                k.same_plain_actor(actors[c]) && !p.disabled.contains(&(alt as u32))
            }));
        }
        for (a, &k) in actors.iter().enumerate() {
            if done[a] >= seqs[a].len() {
                continue;
            }
            let listed = p
                .actors
                .position(k)
                .is_some_and(|alt| !p.disabled.contains(&(alt as u32)));
            if !listed {
                unblocked[a][done[a]] = Some(step);
            }
        }
        if let Some(k) = taken {
            step += 1;
            if let Some(a) = actors.iter().position(|&x| x == k) {
                done[a] += 1;
                class_left[class[a]] -= 1;
            }
        }
    }
    let ready = |d: &[u16], a: usize| {
        seqs[a].get(usize::from(d[a])).is_some_and(|&s| {
            steps[s].after.iter().all(|&j| {
                let (b, pos) = of[j];
                usize::from(d[b]) > pos
            })
        })
    };
    let could_go_on = |d: &[u16], c: usize| {
        let members = || (0..actors.len()).filter(|&b| class[b] == c);
        if members().all(|b| usize::from(d[b]) == seqs[b].len()) {
            return after_last[c] == Some(true);
        }
        members().any(|b| {
            let k = usize::from(d[b]);
            k < seqs[b].len()
                && (ready(d, b)
                    || unblocked[b][k]
                        .is_none_or(|s| of.get(s).is_some_and(|&(x, pos)| usize::from(d[x]) > pos)))
        })
    };
    const NONE: u16 = u16::MAX;
    let start = (vec![0u16; actors.len()], NONE);
    let mut index: HashMap<(Vec<u16>, u16), usize> = HashMap::new();
    let mut states: Vec<(Vec<u16>, u16)> = vec![start.clone()];
    let mut dist: Vec<u32> = vec![0];
    let mut parent: Vec<Option<(usize, usize)>> = vec![None];
    index.insert(start, 0);
    let mut queue = VecDeque::from([0usize]);
    let mut seen = vec![false];
    let goal = loop {
        let u = queue.pop_front()?;
        if seen[u] {
            continue;
        }
        seen[u] = true;
        let (d, last) = states[u].clone();
        if (0..actors.len()).all(|a| usize::from(d[a]) == seqs[a].len()) {
            break u;
        }
        // The actors in the order of their next steps: ties go to the guide's order.
        let mut next: Vec<usize> = (0..actors.len()).filter(|&a| ready(&d, a)).collect();
        next.sort_by_key(|&a| seqs[a][usize::from(d[a])]);
        let last_class = (last != NONE).then(|| class[usize::from(last)]);
        // Where the actor that ran last (of the plain listing) has a step ready, it goes on:
        // taking that step now rather than later keeps every dependence (its own are
        // behind it) and switches nothing now.
        if next.iter().any(|&a| Some(class[a]) == last_class) {
            next.retain(|&a| Some(class[a]) == last_class);
        }
        // One actor per class: the one whose step comes first in the guide (the actors of
        // one actor of the plain listing, a dispatch's groups or a queue's lines, switch
        // between them freely, so their orders cost the same).
        let mut classes_seen = Vec::with_capacity(next.len());
        next.retain(|&a| {
            let fresh = !classes_seen.contains(&class[a]);
            classes_seen.push(class[a]);
            fresh
        });
        let last_can = last_class.is_some_and(|c| could_go_on(&d, c));
        for a in next {
            let switch = last_can && last_class != Some(class[a]);
            let cost = dist[u] + u32::from(switch);
            let mut nd = d.clone();
            nd[a] += 1;
            let key = (nd, a as u16);
            let v = match index.get(&key) {
                Some(&v) => v,
                None => {
                    if states.len() >= ORDER_STATES {
                        return None;
                    }
                    states.push(key.clone());
                    dist.push(u32::MAX);
                    parent.push(None);
                    seen.push(false);
                    index.insert(key, states.len() - 1);
                    states.len() - 1
                }
            };
            if cost < dist[v] {
                dist[v] = cost;
                parent[v] = Some((u, seqs[a][usize::from(d[a])]));
                if switch {
                    queue.push_back(v);
                } else {
                    queue.push_front(v);
                }
            }
        }
    };
    let mut order = Vec::with_capacity(steps.len());
    let mut at = goal;
    while let Some((u, s)) = parent[at] {
        order.push(s);
        at = u;
    }
    order.reverse();
    let mut rank = vec![0u32; steps.len()];
    for (r, s) in order.into_iter().enumerate() {
        rank[s] = r as u32;
    }
    Some(rank)
}

/// A run's steps for [`Script::guided`]: per scheduling point taken, its actor, the earlier
/// steps of other actors whose footprints conflict with its own (all it touched and brought
/// about), and the choices within it. `None` for a run of more than [`REORDER_STEPS`] steps.
fn guide_of(points: &[ChoicePoint], events: &[crate::choice::Event]) -> Option<Guide> {
    let mut steps: Vec<GuideStep> = Vec::new();
    let mut footprints = Vec::new();
    for (d, p) in points.iter().enumerate() {
        if !p.scheduling {
            if let (Some(s), Some(t)) = (steps.last_mut(), p.taken) {
                s.within.push(t);
            }
            continue;
        }
        let Some(actor) = p.taken.and_then(|t| p.actors.get(t as usize)) else {
            continue;
        };
        if steps.len() >= REORDER_STEPS {
            return None;
        }
        let fp = super::dpor::step_footprint(events, d);
        let after = steps
            .iter()
            .zip(&footprints)
            .enumerate()
            .filter(|(_, (s, f))| s.actor != actor && fp.conflicts(f))
            .map(|(i, _)| i)
            .collect();
        footprints.push(fp);
        steps.push(GuideStep {
            actor,
            after,
            within: Vec::new(),
        });
    }
    Some(Guide {
        steps,
        rank: Vec::new(),
    })
}
