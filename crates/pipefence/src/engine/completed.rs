//! The commands an engine completed, in queue order (D7's `last_completed`).
//!
//! Every item the PFP takes (a command of a list, a queue signal or wait, the end of a
//! submission) has an ordinal, its place in the queue's order (the engine derives it from its
//! FIFO counts). Commands complete out of that order (the PFP's own waits ahead of the ME,
//! dispatches and bottom-of-pipe writes after the ME has moved on), so "the last command
//! completed before the one a report names" is the completed command with the greatest ordinal
//! below that command's: the same on every driver for the same program state, and never a
//! command ordered after it.
//!
//! Completions come from four sources. The ME completes its own commands in order, and
//! retirement lands in order after every earlier dispatch, so one entry each is enough: the
//! last. A command the ME hands on (a dispatch, a bottom-of-pipe write or signal) keeps the
//! ME's last completion as it was then, which is the ME's last completion before it whatever
//! the ME does next. The PFP's own waits and dispatches are kept in a log each, of which only
//! what a question can still need stays: every item ordered before the oldest pending one has
//! completed, so of those only the last is kept (the floor). Pruning runs when a log has
//! doubled since the last one, so it costs O(1) per completion.

use super::Site;
use std::collections::VecDeque;

/// A completed command: its ordinal, where it is, and its operation.
pub(crate) type Entry = (u64, Site, &'static str);

/// Fewest entries a log holds before it is pruned.
const PRUNE_MIN: usize = 64;

/// The later of two entries, in queue order.
fn later(a: Option<Entry>, b: Option<Entry>) -> Option<Entry> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The completions of one source that finish out of queue order.
#[derive(Debug)]
struct Log {
    /// The latest entry of those ordered before every pending item and every entry of `log`.
    floor: Option<Entry>,
    /// Later completions, ascending.
    log: VecDeque<Entry>,
    prune_at: usize,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            floor: None,
            log: VecDeque::new(),
            prune_at: PRUNE_MIN,
        }
    }
}

impl Log {
    /// Records `e`; `settled`: every item ordered before it has completed. Returns whether
    /// the log has grown enough to be pruned.
    fn note(&mut self, e: Entry, settled: bool) -> bool {
        if settled {
            // Only the entries after it stay.
            self.drop_below(e.0);
            self.floor = later(self.floor, Some(e));
            return false;
        }
        match self.log.back() {
            None => self.log.push_back(e),
            Some(b) if b.0 < e.0 => self.log.push_back(e),
            Some(_) => {
                let i = self.log.partition_point(|x| x.0 < e.0);
                match self.log.get_mut(i) {
                    Some(x) if x.0 == e.0 => *x = e,
                    _ => self.log.insert(i, e),
                }
            }
        }
        self.log.len() >= self.prune_at
    }

    /// Drops the entries below `ord`, keeping the last of them as the floor if it is later.
    fn drop_below(&mut self, ord: u64) {
        while let Some(e) = self.log.front().copied() {
            if e.0 >= ord {
                break;
            }
            self.log.pop_front();
            self.floor = later(self.floor, Some(e));
        }
    }

    fn prune(&mut self, oldest_pending: u64) {
        self.drop_below(oldest_pending);
        self.prune_at = (self.log.len() * 2).max(PRUNE_MIN);
    }

    /// The latest entry before `ord`.
    fn before(&self, ord: u64) -> Option<Entry> {
        let i = self.log.partition_point(|e| e.0 < ord);
        match i.checked_sub(1).and_then(|i| self.log.get(i)) {
            Some(e) => Some(*e),
            None => self.floor.filter(|f| f.0 < ord),
        }
    }
}

/// Completed commands (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Completed {
    /// The ME's last completion.
    me: Option<Entry>,
    /// The last retirement.
    retired: Option<Entry>,
    pfp: Log,
    dispatches: Log,
}

impl Completed {
    /// The ME completed a command (in order).
    #[inline]
    pub(crate) fn me_done(&mut self, e: Entry) {
        self.me = Some(e);
    }

    /// The ME's last completion: what a command it hands on keeps (see the module docs).
    #[inline]
    pub(crate) fn me(&self) -> Option<Entry> {
        self.me
    }

    /// A bottom-of-pipe write or signal retired (in order).
    #[inline]
    pub(crate) fn retired(&mut self, e: Entry) {
        self.retired = Some(e);
    }

    /// The PFP passed a wait of its own; returns whether to prune (see [`Log::note`]).
    pub(crate) fn pfp_done(&mut self, e: Entry, settled: bool) -> bool {
        self.pfp.note(e, settled)
    }

    /// A dispatch finished; returns whether to prune (see [`Log::note`]).
    pub(crate) fn dispatch_done(&mut self, e: Entry, settled: bool) -> bool {
        self.dispatches.note(e, settled)
    }

    /// Forgets what no question can need once every item ordered before `oldest_pending` has
    /// completed.
    pub(crate) fn prune(&mut self, oldest_pending: u64) {
        self.pfp.prune(oldest_pending);
        self.dispatches.prune(oldest_pending);
    }

    /// The completed command latest in queue order before ordinal `ord`. `me_before`: for a
    /// command the ME handed on, the ME's last completion then (the ME may have completed
    /// later ones since); `None` for the ME's own command or the PFP's position.
    pub(crate) fn before(
        &self,
        ord: u64,
        me_before: Option<Entry>,
    ) -> Option<(Site, &'static str)> {
        let me = self
            .me
            .filter(|e| e.0 < ord)
            .or(me_before.filter(|e| e.0 < ord));
        let e = later(
            later(me, self.retired.filter(|e| e.0 < ord)),
            later(self.pfp.before(ord), self.dispatches.before(ord)),
        );
        e.map(|e| (e.1, e.2))
    }

    /// The completed command latest in queue order.
    pub(crate) fn last(&self) -> Option<(Site, &'static str)> {
        self.before(u64::MAX, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(ord: u64, op: &'static str) -> Entry {
        (
            ord,
            Site {
                submission: 0,
                list: Some(1),
                command: Some(ord as u32),
            },
            op,
        )
    }

    fn op(x: Option<(Site, &'static str)>) -> Option<(u32, &'static str)> {
        x.map(|(s, op)| (s.command.unwrap_or(0), op))
    }

    #[test]
    fn before_is_the_latest_completed_in_queue_order_below_the_ordinal() {
        let mut c = Completed::default();
        c.me_done(e(1, "marker"));
        // The ME hands on a dispatch (3), then completes an end-event (5).
        let at_dispatch = c.me();
        c.me_done(e(5, "end-event"));
        assert_eq!(op(c.before(3, at_dispatch)), Some((1, "marker")));
        assert_eq!(op(c.before(7, None)), Some((5, "end-event")));
        // The dispatch finishes after the end-event.
        c.dispatch_done(e(3, "dispatch"), false);
        assert_eq!(op(c.before(5, at_dispatch)), Some((3, "dispatch")));
        assert_eq!(op(c.last()), Some((5, "end-event")));
        // A PFP wait ahead of the ME is not before the ME's command.
        c.pfp_done(e(10, "wait-value32"), false);
        assert_eq!(op(c.before(9, None)), Some((5, "end-event")));
        assert_eq!(op(c.last()), Some((10, "wait-value32")));
        // A retirement.
        c.retired(e(7, "write-value32-bop"));
        assert_eq!(op(c.before(9, None)), Some((7, "write-value32-bop")));
        assert_eq!(c.before(1, None), None);
    }

    #[test]
    fn pruning_keeps_the_answers_for_pending_ordinals_and_stays_bounded() {
        let mut c = Completed::default();
        // Dispatch 10 stays pending while later ones finish.
        for ord in (0..10).chain(11..10_000) {
            if c.dispatch_done(e(ord, "dispatch"), false) {
                c.prune(10);
            }
        }
        assert!(c.dispatches.log.len() < 20_000);
        assert_eq!(op(c.before(10, None)), Some((9, "dispatch")));
        assert_eq!(op(c.before(500, None)), Some((499, "dispatch")));
        // Once it finishes, the log shrinks back to the floor.
        c.dispatch_done(e(10, "dispatch"), false);
        c.prune(10_000);
        assert!(c.dispatches.log.is_empty());
        assert_eq!(op(c.before(10_000, None)), Some((9_999, "dispatch")));
        // A settled completion leaves the entries after it.
        c.dispatch_done(e(10_004, "dispatch"), false);
        c.dispatch_done(e(10_002, "dispatch"), true);
        assert_eq!(c.dispatches.log.len(), 1);
        assert_eq!(op(c.before(10_003, None)), Some((10_002, "dispatch")));
        assert_eq!(op(c.before(10_005, None)), Some((10_004, "dispatch")));
    }
}
