//! Choosing the next action: listing the enabled actors, picking one by the strategy, and
//! completing dispatch groups.

use super::*;
use crate::choice::ActorKey;
use crate::footprint::{self, Kind, Obj};

/// `spin` in virtual time: its cost is the group's ready time (D4), so running it does nothing.
pub(super) struct VirtualTime;

impl SpinTime for VirtualTime {
    fn spin(&self, _: &crate::core::DeviceCore, _: u64, _: u32) {}
}

/// One enabled small actor of a [`Listing`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Listed {
    pub(super) actor: Actor,
    /// When it is ready; `None`: now (the clock when it is picked).
    pub(super) ready: Option<u64>,
    pub(super) wake: Wake,
    /// An engine action's queue, by index in the listing's queues.
    pub(super) queue: usize,
}

/// The enabled small actors in the scheduler's order: hosts, then per queue its PFP, ME and
/// retirement, then (strict) the write-backs. Kept across failed tries (`listing.rs`).
#[derive(Debug)]
pub(super) struct Listing {
    pub(super) entries: Vec<Listed>,
    /// The live queues when it was made, in id order.
    pub(super) queues: Vec<Arc<QueueShared>>,
    /// Some queue had work.
    pub(super) any_work: bool,
    /// The device was removed when it was made.
    pub(super) removed: bool,
    /// The entries still enabled, once one was taken out (all of them until then).
    pub(super) left: Option<Left>,
}

impl Listing {
    /// Entries still enabled.
    pub(super) fn len(&self) -> usize {
        self.left.as_ref().map_or(self.entries.len(), Left::len)
    }

    /// The position of the `k`-th entry still enabled (`k < len()`).
    pub(super) fn nth(&self, k: usize) -> usize {
        self.left.as_ref().map_or(k, |l| l.nth(k))
    }

    /// The position of the first entry still enabled.
    pub(super) fn first(&mut self) -> Option<usize> {
        match self.left.as_mut() {
            Some(l) => l.first(),
            None => (!self.entries.is_empty()).then_some(0),
        }
    }

    /// Takes the entry at `pos` out (its try failed). `priority` gives the PCT priorities
    /// given so far, for PCT only (`pct`).
    pub(super) fn take(&mut self, pos: usize, priority: impl Fn(Actor) -> Option<u64>, pct: bool) {
        let entries = &self.entries;
        let is_pfp = |i: usize| matches!(entries[i].actor, Actor::Pfp(_));
        let left = self.left.get_or_insert_with(|| {
            Left::new(entries.len(), is_pfp, |i| priority(entries[i].actor), pct)
        });
        left.take(pos, is_pfp(pos));
    }

    /// The queue with id `id` (the queues are in id order: an id is the queue's creation index).
    pub(super) fn queue(&self, id: u32) -> Option<&Arc<QueueShared>> {
        self.queues
            .binary_search_by_key(&id, |q| q.id)
            .ok()
            .map(|i| &self.queues[i])
    }
}

impl Scheduler {
    /// Lists the enabled small actors: the hosts (testing only the candidates), every queue's
    /// stages and retirement, the write-backs (O(candidates + queues), one engine lock per
    /// queue).
    pub(super) fn list(&self, dev: &DeviceShared, st: &mut State) -> Listing {
        st.listings += 1;
        let queues = dev.live_queues();
        let removed = dev.is_removed();
        let mut stages = Vec::new();
        let mut any_work = false;
        // A scripted run lists only the stages that can run: a blocked stage is never a choice
        // (its try is made here, which changes nothing but what a report of a hang shows).
        let scripted = st.script.is_some();
        let strict = dev.strict();
        if !removed {
            for (i, q) in queues.iter().enumerate() {
                let mut e = lock(&q.engine);
                if e.is_idle() {
                    continue;
                }
                any_work = true;
                let id = q.id;
                let entry = |actor, ready| Listed {
                    actor,
                    ready,
                    wake: Wake::Ok,
                    queue: i,
                };
                // A strict scripted run has run its PFP steps before listing (`eager_pfps`).
                if q.kind.has_pfp()
                    && !st.disabled.contains(&Actor::Pfp(id))
                    && !(scripted && strict)
                    && (!scripted || runnable(dev, &mut e, Stage::Pfp, &mut st.trace))
                {
                    stages.push(entry(Actor::Pfp(id), None));
                }
                if !st.disabled.contains(&Actor::Me(id))
                    && (!scripted || runnable(dev, &mut e, Stage::Me, &mut st.trace))
                {
                    let ready = if e.copy_pending().is_some() {
                        st.copy_ready.get(&id).copied()
                    } else {
                        None
                    };
                    stages.push(entry(Actor::Me(id), ready));
                }
                if e.retire_ready() {
                    stages.push(entry(Actor::Retire(id), None));
                }
            }
            if dev.strict() {
                if let Some(vis) = dev.model().as_ref().and_then(|m| m.vis.as_ref()) {
                    for (i, q) in queues.iter().enumerate() {
                        if vis.has_dirty(q.id) {
                            stages.push(Listed {
                                actor: Actor::Writeback(q.id),
                                ready: None,
                                wake: Wake::Ok,
                                queue: i,
                            });
                        }
                    }
                }
            }
        }
        // The enabled hosts are among the candidates: testing those in index order lists what
        // testing every host would.
        for h in lock(&self.woken).drain(..) {
            st.candidates.insert(h);
        }
        if removed && !st.removal_seen {
            st.removal_seen = true;
            st.candidates.extend(0..st.hosts.len());
        }
        let mut entries = Vec::with_capacity(st.candidates.len() + stages.len());
        let mut gone = Vec::new();
        for &h in &st.candidates {
            match self.host_enabled(dev, st, h, !any_work) {
                Some((ready, wake)) => entries.push(Listed {
                    actor: Actor::Host(h),
                    ready,
                    wake,
                    queue: usize::MAX,
                }),
                // Its tickets will say when to look again.
                None if matches!(
                    st.hosts[h].state,
                    HostState::Running
                        | HostState::Done
                        | HostState::Blocked(HostWait::Tickets(..))
                ) =>
                {
                    gone.push(h)
                }
                None => {}
            }
        }
        st.blocked_host_tests += (st.candidates.len() - entries.len()) as u64;
        for h in gone {
            st.candidates.remove(&h);
        }
        entries.extend(stages);
        Listing {
            entries,
            queues,
            any_work,
            removed,
            left: None,
        }
    }

    /// Collects the enabled actions, picks one, performs engine actions; returns what happened.
    pub(super) fn pick(&self, dev: &DeviceShared, st: &mut MutexGuard<'_, State>) -> Pick {
        loop {
            let reaped = dev.reap_unmaps();
            if !dev.is_removed()
                && dev
                    .desc
                    .interrupt
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                dev.remove(RemovalReason::Requested);
            }
            // A scripted run that only repeats one already explored stops.
            if !dev.is_removed() && st.script.as_ref().is_some_and(|s| s.aborted()) {
                dev.remove(RemovalReason::Requested);
            }
            if st.script.is_some() && dev.strict() && !dev.is_removed() {
                self.eager_pfps(dev, st);
            }
            // A failed try changed nothing but the disabled stages: the listing it left is the
            // one listing again would give. When it has nothing left, list again (a hang is
            // decided on a new listing).
            let mut listing = match st.listing.take() {
                Some(l) if !reaped && l.removed == dev.is_removed() && l.len() > 0 => l,
                _ => {
                    // A scripted point left open by a failed try ends with the listing.
                    if let Some(s) = st.script.as_ref() {
                        s.close();
                    }
                    self.list(dev, st)
                }
            };
            // After the small actors come the dispatches in flight (counted, not listed: one
            // action each, in launch order), then the endless kernels.
            let (n_groups, tail) = if dev.is_removed() {
                (0, Vec::new())
            } else {
                let tail: Vec<(Actor, u64, Wake)> = st
                    .endless
                    .iter()
                    .map(|x| (Actor::Endless(x.serial), x.ready, Wake::Ok))
                    .collect();
                (st.groups.len(), tail)
            };
            st.max_listed = st.max_listed.max((listing.len() + tail.len()) as u64);
            st.max_dispatches_in_flight = st.max_dispatches_in_flight.max(n_groups as u64);
            if listing.len() == 0 && n_groups == 0 && tail.is_empty() {
                if listing.any_work && !dev.is_removed() && !st.draining {
                    // D6: nothing can run while an engine has work: a hang, at once.
                    dev.remove(RemovalReason::Hung);
                    continue;
                }
                let mut released = false;
                for h in 0..st.hosts.len() {
                    // Device waits fail as timed out; a wait for other host threads goes on
                    // (they are released too and will end).
                    if matches!(&st.hosts[h].state, HostState::Blocked(c) if !c.is_host_wait()) {
                        st.set_host_state(h, HostState::Ready);
                        st.hosts[h].wake = if dev.is_removed() {
                            Wake::Removed
                        } else {
                            Wake::TimedOut
                        };
                        released = true;
                    }
                }
                if released {
                    if !dev.is_removed() {
                        st.quiescences += 1;
                    }
                    continue;
                }
                return Pick::Nothing;
            }
            let reducing = st.script.as_ref().is_some_and(|s| s.is_reducing());
            let choice = if let Some(script) = st.script.clone() {
                self.choose_scripted(dev, st, &script, &listing, n_groups, &tail)
            } else {
                self.choose_seeded(dev, st, &mut listing, n_groups, &tail)
            };
            let (pos, actor, ready, wake) = match choice {
                Choice::Listed(i) | Choice::WritebackLine(i, _) => {
                    let e = listing.entries[i];
                    let ready = e.ready.unwrap_or_else(|| self.clock.now_ns());
                    (i, e.actor, ready, e.wake)
                }
                Choice::Tail(i) => (usize::MAX, tail[i].0, tail[i].1, tail[i].2),
                Choice::Group(slot)
                | Choice::GroupOne(slot, _)
                | Choice::GroupAll(slot)
                | Choice::GroupsBeside(slot) => {
                    self.script_tried(st, true);
                    st.steps += 1;
                    let ready = st.groups.get(slot).map_or(0, |g| g.ready);
                    let key = reducing.then(|| match (choice, st.groups.get(slot)) {
                        (Choice::GroupOne(_, g), Some(d)) => ActorKey::Group(d.queue, d.index, g),
                        (Choice::GroupsBeside(_), Some(d)) => ActorKey::Groups(d.queue, d.index),
                        (_, d) => {
                            ActorKey::Dispatch(d.map_or(0, |d| d.queue), d.map_or(0, |d| d.index))
                        }
                    });
                    if reducing {
                        footprint::start();
                        footprint::record(Obj::Clock, Kind::Update);
                    }
                    self.clock.advance_to(ready);
                    let take = match choice {
                        Choice::GroupOne(_, g) => Take::One(g),
                        Choice::GroupAll(_) | Choice::GroupsBeside(_) => Take::All,
                        _ => Take::Some,
                    };
                    // Which groups one step completes, and where their bytes lie.
                    let whole = match (take, st.groups.get(slot)) {
                        (Take::All, Some(d)) => st.groups.one_range_left(slot).map(|groups| {
                            let (bases, shared) = d.kernel.group_bases();
                            crate::choice::WholeGroups {
                                groups,
                                stride: crate::engine::kernels::GROUP_BYTES,
                                bases,
                                shared,
                            }
                        }),
                        _ => None,
                    };
                    let p = self.complete_groups(dev, st, &listing, slot, take);
                    if let Some(key) = key {
                        self.reduced_event_of(st, key, &[], whole);
                    }
                    if let Some(p) = p {
                        return p;
                    }
                    continue;
                }
            };
            if !matches!(actor, Actor::Pfp(_) | Actor::Me(_)) {
                self.script_tried(st, true);
            }
            st.steps += 1;
            if reducing {
                footprint::start();
                let later = match choice {
                    Choice::Listed(i) => listing.entries[i].ready.is_some(),
                    Choice::WritebackLine(..) => false,
                    _ => true,
                };
                if later {
                    footprint::record(Obj::Clock, Kind::Update);
                }
            }
            self.clock.advance_to(ready);
            match actor {
                Actor::Host(h) => {
                    st.hosts[h].wake = wake;
                    st.disabled.clear();
                    if reducing {
                        let mut extra: smallvec::SmallVec<[crate::footprint::Access; 4]> =
                            smallvec::smallvec![(Obj::Host(h as u32), Kind::Write)];
                        // A poll that passes: the bytes it waited on (`Event::polled`).
                        let mut polled = None;
                        match &st.hosts[h].state {
                            HostState::Blocked(HostWait::Tickets(ts, any)) => {
                                // A wait for any of them read the tickets that were set. One
                                // not set yet is read before the signal that sets it, not
                                // after as the plumbing's forced order has it: with hazard
                                // tracking the pass reads that fence instead, which races
                                // with the signal (acquired before it, not after). When more
                                // than one was set, none of them was needed: the pass could
                                // have come before the signal of each (after another's), so
                                // it reads their fences, which race with those signals,
                                // instead of the latches, whose forced order would pin the
                                // pass after every one of them (and the host's next read of
                                // such a fence with it). And it read that the others were
                                // not set: a signal of one of their fences after the pass
                                // could have come before it and released the wait then
                                // (before the signal that did), so it reads their fences,
                                // which race with those signals.
                                let set = ts.iter().filter(|t| t.is_satisfied_unrecorded()).count();
                                for t in ts {
                                    if !*any {
                                        t.is_satisfied();
                                    } else if t.is_satisfied_unrecorded() {
                                        if set > 1 {
                                            t.note_fence_read();
                                        } else {
                                            t.is_satisfied();
                                        }
                                    } else {
                                        t.note_fence_read();
                                    }
                                }
                            }
                            HostState::Blocked(HostWait::Memory {
                                buffer,
                                offset,
                                cond,
                            }) => {
                                let _ = buffer.load(*offset, cond.width);
                                let at = buffer.base.saturating_add(*offset);
                                polled = Some((at, at.saturating_add(cond.width.bytes())));
                            }
                            HostState::Blocked(HostWait::HostDone(j)) => {
                                extra.push((Obj::Host(*j as u32), Kind::Await));
                            }
                            // Every queue is idle: each one's last retirement came first.
                            // Released by the removal instead (a hang: nothing could run), it
                            // observes that some queue is not idle, what its pass would have
                            // read: a submission that kept a queue busy races with it, so a
                            // schedule where the pass comes first (the submission after it)
                            // is explored. Reading everything instead made the host's other
                            // writes order it, and no reversal of those could put it before
                            // them (it comes only after a hang).
                            HostState::Blocked(HostWait::Idle)
                                if matches!(wake, Wake::Ok | Wake::Removed) =>
                            {
                                for q in &listing.queues {
                                    extra.push((Obj::Idle(q.id), Kind::Await));
                                    extra.push((Obj::Submit(q.id), Kind::Read));
                                }
                            }
                            // The end of the run: every other host is done and every queue
                            // idle, or the device removed (no engine acts after a removal).
                            // It reads everything (the outcome), and says that it could not
                            // come before any retirement or group of the run.
                            HostState::Blocked(HostWait::Settled)
                                if matches!(wake, Wake::Ok | Wake::Removed) =>
                            {
                                extra.push((Obj::All, Kind::Read));
                                extra.push((Obj::Settled, Kind::Read));
                            }
                            HostState::Blocked(_) => extra.push((Obj::All, Kind::Read)),
                            _ => {}
                        }
                        // Timed out: nothing could run. It reads everything, and which
                        // quiescence released it: it comes after every action before that
                        // quiescence in every schedule (explore/dpor.rs).
                        if wake == Wake::TimedOut {
                            extra.push((Obj::All, Kind::Read));
                            extra.push((Obj::Quiet(st.quiescences), Kind::Read));
                        }
                        self.reduced_host_event(st, h as u32, &extra, polled);
                    }
                    return Pick::Host(h);
                }
                Actor::Pfp(id) | Actor::Me(id) => {
                    let stage = if matches!(actor, Actor::Pfp(_)) {
                        Stage::Pfp
                    } else {
                        Stage::Me
                    };
                    let q = listing.queues[listing.entries[pos].queue].clone();
                    let ctx = EngineCtx::new(dev);
                    let (step, launches, copy, moved) = {
                        let mut e = lock(&q.engine);
                        let before = e.packets_moved();
                        let step = e.step(stage, &ctx);
                        if let Some(t) = e.trace.as_mut() {
                            st.trace.extend(t.drain());
                        }
                        let moved = e.packets_moved() != before;
                        (step, e.take_launches(), e.copy_pending(), moved)
                    };
                    // A PFP step that brings the PFP to a memory-value wait that does not hold
                    // reads the word on arrival: a write before it would have let the PFP pass
                    // (or, when the PFP is already past, could not stop it), so the writes
                    // race with that read. It is recorded with this step (the try at the wait
                    // that follows is not an action; strict mode's eager PFP steps record it
                    // the same way).
                    // So does an ME step that lets a PFP held at such a wait test it: the
                    // completion of a `flush-pipeline` that held it, the pop of a packet from a
                    // FIFO it found full. A PFP already found blocked on the wait read it on
                    // arriving.
                    let mut arrival: Vec<crate::footprint::Access> = Vec::new();
                    if reducing && matches!(step, Step::Progressed) && q.kind.has_pfp() {
                        let mut e = lock(&q.engine);
                        let arrived = stage == Stage::Pfp
                            || stage == Stage::Me
                                && !matches!(
                                    e.pfp_blocked_on(),
                                    Some(crate::engine::WaitCondition::Memory { .. })
                                );
                        if arrived && !e.is_idle() {
                            arrival = footprint::take_raw();
                            if let Err(read) = try_pfp(dev, &mut e, &mut st.trace, true) {
                                arrival.extend(read);
                            }
                            footprint::start();
                        }
                        drop(e);
                    }
                    // The try only looked: the listing less this stage is the next one.
                    let mut keep = false;
                    match step {
                        Step::Progressed => {
                            self.script_tried(st, true);
                            st.disabled.clear();
                            if stage == Stage::Me {
                                match copy {
                                    Some(bytes) if !st.copy_ready.contains_key(&id) => {
                                        let cost =
                                            bytes.div_ceil(1024).saturating_mul(COPY_NS_PER_KIB);
                                        st.copy_ready.insert(id, self.clock.ready_after(cost));
                                    }
                                    Some(_) => {}
                                    None => {
                                        st.copy_ready.remove(&id);
                                    }
                                }
                            }
                        }
                        Step::Blocked(_) | Step::Idle => {
                            // A scripted run lists only stages that can run (`runnable`), but a
                            // listing kept from a try can be older than the last PFP steps
                            // (strict mode) or an interrupt: the try changes nothing, as in a
                            // seeded run.
                            st.disabled.insert(actor);
                            st.failed_tries += 1;
                            keep = !moved && launches.is_empty();
                            self.script_tried(st, !keep);
                        }
                        Step::Faulted(f) => {
                            self.script_tried(st, true);
                            let reason = f.removal_reason();
                            dev.remove_with_fault(reason, Some((id, f)));
                        }
                    }
                    let watchdog = duration_ns(dev.desc.watchdog_timeout);
                    let launched: Vec<(u64, u32)> =
                        launches.iter().map(|l| (l.index, l.groups)).collect();
                    for l in launches {
                        if l.groups == 0 {
                            continue;
                        }
                        let cost = l.kernel.group_cost_ns();
                        let serial = st.next_serial;
                        st.next_serial += 1;
                        if cost > watchdog {
                            // D6: an endless kernel; its removal is ready at launch + timeout.
                            st.endless.push(Endless {
                                serial,
                                queue: id,
                                ready: self.clock.ready_after(watchdog),
                                fault: Fault::EndlessKernel {
                                    site: l.site,
                                    op: l.op,
                                    kernel: l.kernel.name().to_string(),
                                    group: 0,
                                },
                            });
                            continue;
                        }
                        st.groups.push(Group::new(
                            id,
                            l.index,
                            l.kernel.clone(),
                            l.groups,
                            self.clock.ready_after(cost),
                            l.site,
                            l.op,
                        ));
                    }
                    if reducing {
                        if keep {
                            footprint::take_raw();
                        } else {
                            // What the stage touched of its queue's state the engine (and
                            // a hazard model) recorded (`footprint.rs`); an ME step changes
                            // what the queue has left to do.
                            let mut extra: smallvec::SmallVec<[crate::footprint::Access; 4]> =
                                smallvec::SmallVec::new();
                            if stage == Stage::Me {
                                extra.push((Obj::Busy(id), Kind::Update));
                            }
                            for (index, _) in &launched {
                                extra.push((Obj::Dispatch(id, *index), Kind::Write));
                            }
                            extra.extend_from_slice(&arrival);
                            let key = scripted::actor_key(actor);
                            self.reduced_event(st, key, &extra);
                        }
                    }
                    if keep {
                        let pct = matches!(st.strategy, Strategy::Pct { .. });
                        let priorities = &st.priorities;
                        listing.take(pos, |a| priorities.get(&a).copied(), pct);
                        st.listing = Some(listing);
                    }
                    return Pick::Progressed;
                }
                Actor::Retire(id) => {
                    if let Some(q) = listing.queue(id) {
                        let ctx = EngineCtx::new(dev);
                        let step = {
                            let mut e = lock(&q.engine);
                            let step = e.retire(&ctx);
                            if let Some(t) = e.trace.as_mut() {
                                st.trace.extend(t.drain());
                            }
                            step
                        };
                        if let Step::Faulted(f) = step {
                            let reason = f.removal_reason();
                            dev.remove_with_fault(reason, Some((id, f)));
                        }
                        st.disabled.clear();
                    }
                    if reducing {
                        let extra = [(Obj::Busy(id), Kind::Update)];
                        self.reduced_event(st, ActorKey::Retire(id), &extra);
                    }
                    return Pick::Progressed;
                }
                Actor::Writeback(id) => {
                    let line = match choice {
                        Choice::WritebackLine(_, line) => Some(line),
                        _ => None,
                    };
                    if let Some(vis) = dev.model().as_mut().and_then(|m| m.vis.as_mut()) {
                        match line {
                            Some(line) => vis.write_back_line(id, line),
                            None => vis.write_back_random_line(id),
                        }
                    }
                    st.disabled.clear();
                    if reducing {
                        let key = ActorKey::Writeback(id, line.unwrap_or(u64::MAX));
                        self.reduced_event(st, key, &[]);
                    }
                    return Pick::Progressed;
                }
                Actor::Endless(serial) => {
                    if let Some(pos) = st.endless.iter().position(|x| x.serial == serial) {
                        let x = st.endless.remove(pos);
                        dev.remove_with_fault(RemovalReason::Hung, Some((x.queue, x.fault)));
                    }
                    st.disabled.clear();
                    if reducing {
                        let extra = [(Obj::All, Kind::Write)];
                        self.reduced_event(st, ActorKey::Endless(serial), &extra);
                    }
                    return Pick::Progressed;
                }
            }
        }
    }

    /// Strict mode, scripted: D5's maximal run-ahead right after the action before. Every PFP
    /// step that can run, runs now, queue by queue in id order, until none can: a PFP step
    /// goes first whenever one can run, so each follows at once the action that let it run
    /// (the seeded strategies choose among the PFP steps that can run; their order does not
    /// change what they read, since only PFP steps run meanwhile). A reducing exploration
    /// records each as an action of the PFP at the scheduling point of the action before
    /// (what it depends on orders it; a reversal goes before that action).
    fn eager_pfps(&self, dev: &DeviceShared, st: &mut State) {
        let reducing = st.script.as_ref().is_some_and(|s| s.is_reducing());
        for q in dev.live_queues() {
            if !q.kind.has_pfp() {
                continue;
            }
            loop {
                if dev.is_removed() {
                    break;
                }
                let ctx = EngineCtx::new(dev);
                let mut e = lock(&q.engine);
                if e.is_idle() {
                    break;
                }
                // Held by a full FIFO or a flush, it has not tested the wait it sits at.
                let waiting = matches!(
                    e.pfp_blocked_on(),
                    Some(crate::engine::WaitCondition::Memory { .. })
                );
                if let Err(read) = try_pfp(dev, &mut e, &mut st.trace, reducing) {
                    // It has just come to a memory-value wait that does not hold: that read is
                    // an action of the PFP, recorded with the action that brought the PFP
                    // there. A later try of the same wait reads again, but it only passes as
                    // an action of its own.
                    if !waiting && !read.is_empty() {
                        drop(e);
                        self.reduced_event(st, ActorKey::Pfp(q.id), &read);
                    }
                    break;
                }
                if reducing {
                    footprint::start();
                }
                let step = e.step(Stage::Pfp, &ctx);
                if let Some(t) = e.trace.as_mut() {
                    st.trace.extend(t.drain());
                }
                drop(e);
                st.steps += 1;
                match step {
                    Step::Progressed => st.disabled.clear(),
                    Step::Faulted(f) => {
                        let reason = f.removal_reason();
                        dev.remove_with_fault(reason, Some((q.id, f)));
                    }
                    Step::Blocked(_) | Step::Idle => {
                        debug_assert!(false, "a PFP step found able to run did nothing");
                    }
                }
                if reducing {
                    self.reduced_event(st, ActorKey::Pfp(q.id), &[]);
                }
            }
        }
    }

    /// The seeded strategy's pick: in strict mode an enabled PFP step first (D5's maximal
    /// run-ahead), else [`Scheduler::choose`].
    fn choose_seeded(
        &self,
        dev: &DeviceShared,
        st: &mut MutexGuard<'_, State>,
        listing: &mut Listing,
        n_groups: usize,
        tail: &[(Actor, u64, Wake)],
    ) -> Choice {
        // Strict mode: maximal PFP run-ahead (D5) - an enabled PFP step goes first.
        let pfp = if !dev.strict() {
            None
        } else if let Some(left) = listing.left.as_ref() {
            let n = left.pfps() as u64;
            (n > 0).then(|| Choice::Listed(left.nth_pfp(st.rng.below(n) as usize)))
        } else {
            let pfps: Vec<usize> = (0..listing.entries.len())
                .filter(|i| matches!(listing.entries[*i].actor, Actor::Pfp(_)))
                .collect();
            (!pfps.is_empty())
                .then(|| Choice::Listed(pfps[st.rng.below(pfps.len() as u64) as usize]))
        };
        match pfp {
            Some(c) => c,
            None => self.choose(st, listing, n_groups, tail),
        }
    }

    /// Completes some groups of the dispatch in flight at `slot` (one action, D4); `None` when
    /// there is nothing left to complete there.
    pub(super) fn complete_groups(
        &self,
        dev: &DeviceShared,
        st: &mut MutexGuard<'_, State>,
        listing: &Listing,
        slot: Slot,
        take: Take,
    ) -> Option<Pick> {
        let g = st.groups.get(slot)?;
        let (kernel, queue, index, site, op) = (g.kernel.clone(), g.queue, g.index, g.site, g.op);
        let state = &mut **st;
        let (first, last) = match (take, state.script.clone()) {
            (Take::One(g), _) => state.groups.take_group(slot, g)?,
            (Take::All, _) => state.groups.take_all(slot)?,
            (Take::Some, Some(s)) => state.groups.take(slot, &mut |n| s.choose(n))?,
            (Take::Some, None) => {
                let rng = &mut state.rng;
                state.groups.take(slot, &mut |n| rng.below(n))?
            }
        };
        // Groups count their dispatch down (they commute) and change what their queue has left
        // to do; the launch wrote the dispatch, so they follow it.
        footprint::record(Obj::Dispatch(queue, index), Kind::Update);
        footprint::record(Obj::Busy(queue), Kind::Update);
        let g = GroupRun {
            kernel,
            queue,
            index,
            groups: first..last,
            site,
            op,
        };
        if dev.trace_sink().is_some() {
            let now = self.clock.now_ns();
            st.trace.push(crate::trace::TraceEvent::Slice {
                track: crate::trace::Track::Worker { index: 0 },
                name: if g.groups.len() == 1 {
                    format!("{} group {}", g.kernel.name(), g.groups.start)
                } else {
                    format!(
                        "{} groups {}..{}",
                        g.kernel.name(),
                        g.groups.start,
                        g.groups.end
                    )
                },
                kind: crate::trace::SliceKind::Kernel,
                start_ns: now.saturating_sub(g.kernel.group_cost_ns()),
                end_ns: now,
                site: None,
            });
        }
        let result = if matches!(g.kernel, Kernel::Spin { .. }) {
            // No memory accesses, and its cost is virtual time here: nothing to
            // run for any number of groups.
            Ok(())
        } else if let Some(mut mem) = StrictMemory::new(dev, g.queue, g.index) {
            run_groups(&g.kernel, &mut mem, &VirtualTime, g.groups.clone())
        } else {
            let mut mem = PlainMemory::new(dev, (g.queue, g.index));
            run_groups(&g.kernel, &mut mem, &VirtualTime, g.groups.clone())
        };
        match result {
            Ok(()) => {
                match g.kernel.write_range(g.groups.clone()) {
                    Some((s, e)) => dev.watches.notify_range(s, e),
                    None => dev.watches.notify_all(),
                }
                if let Some(q) = listing.queue(g.queue) {
                    let n = g.groups.end - g.groups.start;
                    q.groups_completed
                        .fetch_add(u64::from(n), Ordering::Relaxed);
                    // Whether the dispatch finished is read through its `Dispatch` object
                    // by those who wait for it (an ME flush, a retirement).
                    lock(&q.engine).groups_done(g.index, n);
                }
            }
            Err(failure) => {
                let f = failure.into_fault(g.site, g.op, &g.kernel);
                let reason = f.removal_reason();
                dev.remove_with_fault(reason, Some((g.queue, f)));
            }
        }
        st.disabled.clear();
        Some(Pick::Progressed)
    }

    /// Picks one of the enabled actions: the listed ones still enabled (`listing`), then the
    /// `n_groups` dispatches in flight in launch order, then `tail`, as if they were one list.
    pub(super) fn choose(
        &self,
        st: &mut MutexGuard<'_, State>,
        listing: &mut Listing,
        n_groups: usize,
        tail: &[(Actor, u64, Wake)],
    ) -> Choice {
        match st.strategy {
            Strategy::Random => {
                let listed = listing.len();
                let total = listed + n_groups + tail.len();
                let k = st.rng.below(total as u64) as usize;
                if k < listed {
                    Choice::Listed(listing.nth(k))
                } else if k < listed + n_groups {
                    Choice::Group(st.groups.nth(k - listed))
                } else {
                    Choice::Tail(k - listed - n_groups)
                }
            }
            Strategy::Pct { .. } => {
                let state = &mut **st;
                let mut priority = |rng: &mut Rng, a: Actor| match state.priorities.get(&a) {
                    Some(p) => *p,
                    None => {
                        let p = (1 << 21) + rng.below(1 << 40);
                        state.priorities.insert(a, p);
                        p
                    }
                };
                let mut best = None;
                let mut best_p = 0;
                match listing.left.as_mut() {
                    None => {
                        for (i, e) in listing.entries.iter().enumerate() {
                            let p = priority(&mut state.rng, e.actor);
                            if p > best_p {
                                best_p = p;
                                best = Some(Choice::Listed(i));
                            }
                        }
                    }
                    Some(left) => {
                        // New actors get their priorities in listing order, as in the scan.
                        for i in left.take_unprioritized() {
                            let p = priority(&mut state.rng, listing.entries[i].actor);
                            left.set_priority(i, p);
                        }
                        if let Some((i, p)) = left.best() {
                            best_p = p;
                            best = Some(Choice::Listed(i));
                        }
                    }
                }
                if n_groups > 0 {
                    let rng = &mut state.rng;
                    if let Some((slot, p)) = state.groups.best(|| (1 << 21) + rng.below(1 << 40)) {
                        if p > best_p {
                            best_p = p;
                            best = Some(Choice::Group(slot));
                        }
                    }
                }
                for (i, (a, _, _)) in tail.iter().enumerate() {
                    let p = priority(&mut state.rng, *a);
                    if p > best_p {
                        best_p = p;
                        best = Some(Choice::Tail(i));
                    }
                }
                // No priority above zero: the first action, as a scan would keep it.
                let best = best.unwrap_or_else(|| {
                    if let Some(i) = listing.first() {
                        Choice::Listed(i)
                    } else if n_groups > 0 {
                        Choice::Group(state.groups.nth(0))
                    } else {
                        Choice::Tail(0)
                    }
                });
                if state.change_points.contains(&state.steps) {
                    let low = state.next_low;
                    state.next_low = state.next_low.saturating_sub(1);
                    match best {
                        Choice::Listed(i) => {
                            state.priorities.insert(listing.entries[i].actor, low);
                            if let Some(left) = listing.left.as_mut() {
                                left.set_priority(i, low);
                            }
                        }
                        Choice::Tail(i) => {
                            state.priorities.insert(tail[i].0, low);
                        }
                        Choice::Group(slot)
                        | Choice::GroupOne(slot, _)
                        | Choice::GroupAll(slot)
                        | Choice::GroupsBeside(slot) => state.groups.set_priority(slot, low),
                        Choice::WritebackLine(..) => {}
                    }
                }
                best
            }
        }
    }
}

/// Whether `stage` of engine `e` can run now ([`crate::engine::Engine::can_progress`]). When it
/// cannot, its step is tried (it changes nothing but the stage's own blocked state, which
/// reports and traces show, as a failed try does), and that it changed nothing is checked.
fn runnable(
    dev: &DeviceShared,
    e: &mut crate::engine::Engine,
    stage: Stage,
    trace: &mut Vec<crate::trace::TraceEvent>,
) -> bool {
    let ctx = EngineCtx::new(dev);
    if e.can_progress(stage, &ctx) {
        return true;
    }
    let before = e.packets_moved();
    let step = e.step(stage, &ctx);
    if let Some(t) = e.trace.as_mut() {
        trace.extend(t.drain());
    }
    assert!(
        matches!(step, Step::Blocked(_) | Step::Idle)
            && e.packets_moved() == before
            && !e.has_launches(),
        "deterministic driver: the {stage:?} of queue {} was found unable to run, but its step \
         did something ({step:?})",
        e.queue_id
    );
    false
}

/// Whether the PFP of `e` can run, tried as a listing tries it (a PFP that cannot run gets its
/// blocked state): `Ok` when it can; else, when `record`, what the try read if the PFP is at
/// a memory-value wait that does not hold (its read on arriving there: a write before it would
/// have let the PFP pass at once, so writes race with it), and nothing otherwise. Recording
/// starts afresh (what was recorded before is dropped) and is off afterwards.
fn try_pfp(
    dev: &DeviceShared,
    e: &mut crate::engine::Engine,
    trace: &mut Vec<crate::trace::TraceEvent>,
    record: bool,
) -> Result<(), Vec<crate::footprint::Access>> {
    if record {
        footprint::start();
    }
    let ok = runnable(dev, e, Stage::Pfp, trace);
    let read = if record {
        footprint::take_raw()
    } else {
        Vec::new()
    };
    if ok {
        return Ok(());
    }
    let at_wait = matches!(
        e.pfp_blocked_on(),
        Some(crate::engine::WaitCondition::Memory { .. })
    );
    Err(if at_wait { read } else { Vec::new() })
}

/// What [`Scheduler::choose`] picked.
#[derive(Debug, Clone, Copy)]
pub(super) enum Choice {
    /// The action at this index of the listed actions.
    Listed(usize),
    /// Completing groups of the dispatch in flight at this slot.
    Group(Slot),
    /// The action at this index of the actions after the dispatches.
    Tail(usize),
    /// A reducing exploration: completing this one group of the dispatch at this slot.
    GroupOne(Slot, u32),
    /// A reducing exploration: the listed write-back at this index, of this line.
    WritebackLine(usize, u64),
    /// A reducing exploration: completing every group left of the dispatch at this slot, when
    /// nothing else can run and they commute (`scripted.rs`).
    GroupAll(Slot),
    /// A reducing exploration: the same beside the groups listed one by one and other actors
    /// ([`crate::choice::ActorKey::Groups`], `scripted.rs`).
    GroupsBeside(Slot),
}

/// Which groups of a dispatch an action completes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Take {
    /// This one.
    One(u32),
    /// Every one left ([`Choice::GroupAll`]).
    All,
    /// Some, chosen within the action (by the script or the generator).
    Some,
}

impl Scheduler {
    /// A reducing exploration: the action just performed by `actor` ends; its footprint is
    /// what it recorded since it began, plus `extra` and the device's state, which every action
    /// reads.
    pub(super) fn reduced_event(
        &self,
        st: &mut State,
        actor: ActorKey,
        extra: &[crate::footprint::Access],
    ) {
        self.reduced_event_of(st, actor, extra, None);
    }

    /// [`Scheduler::reduced_event`] of host `host`'s action, whose footprint is made when the
    /// host reaches its next scheduling point ([`crate::choice::Script::host_event`]).
    fn reduced_host_event(
        &self,
        st: &mut State,
        host: u32,
        extra: &[crate::footprint::Access],
        polled: Option<(u64, u64)>,
    ) {
        if let Some(script) = st.script.clone() {
            script.host_event(host, || action_accesses(extra), polled);
        }
        // An event not kept: what the action recorded goes.
        footprint::stop();
    }

    /// [`Scheduler::reduced_event`], with the groups a dispatch's one step completed.
    pub(super) fn reduced_event_of(
        &self,
        st: &mut State,
        actor: ActorKey,
        extra: &[crate::footprint::Access],
        whole: Option<crate::choice::WholeGroups>,
    ) {
        if let Some(script) = st.script.clone() {
            script.event_with(
                actor,
                || crate::footprint::Footprint::new(action_accesses(extra)),
                whole,
            );
        }
        // An event not kept: what the action recorded goes.
        footprint::stop();
    }
}

/// What the action ending now touched: what it recorded since it began, `extra`, and the
/// device's state, which every action reads (recording stops).
fn action_accesses(extra: &[crate::footprint::Access]) -> Vec<crate::footprint::Access> {
    let mut v = footprint::take_raw();
    v.reserve(extra.len() + 1);
    v.extend_from_slice(extra);
    v.push((Obj::Device, Kind::Read));
    v
}

/// The groups of one dispatch the scheduler completes in one action.
pub(super) struct GroupRun {
    pub(super) kernel: Kernel,
    pub(super) queue: u32,
    pub(super) index: u64,
    pub(super) groups: std::ops::Range<u32>,
    pub(super) site: Site,
    pub(super) op: &'static str,
}

#[derive(Debug)]
pub(super) enum Pick {
    Host(usize),
    Progressed,
    Nothing,
}
