//! Retirement (C3, Q4): bottom-of-pipe writes and queue signals land in order once every
//! earlier dispatch has finished.

use super::*;

impl Engine {
    /// Whether the head of the retire queue can land now.
    pub(crate) fn retire_ready(&self) -> bool {
        match self.retire.front() {
            None => false,
            Some(r) => self
                .inflight
                .first_key_value()
                .is_none_or(|(k, _)| *k >= r.after),
        }
    }

    /// Lands the head of the retire queue if every earlier dispatch finished (C3, Q4).
    pub(crate) fn retire(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if !self.retire_ready() {
            return if self.retire.is_empty() {
                Step::Idle
            } else {
                Step::Blocked(WaitCondition::Dispatches)
            };
        }
        let Some(r) = self.retire.pop_front() else {
            return Step::Idle;
        };
        // Every dispatch launched before it finished (`retire_ready`).
        self.note(Obj::Dispatches(self.queue_id, 0, r.after), Kind::Read);
        self.note(
            Obj::RetireSlot(self.queue_id, self.retire_popped),
            Kind::Write,
        );
        self.retire_popped += 1;
        match r.op {
            RetireOp::Write {
                address,
                width,
                value,
                source,
                op,
                flush,
            } => {
                hook!(self, ctx, |m| {
                    m.bop_write(self.queue_id, r.site, op, address, width, flush);
                });
                let v = Self::source_value(ctx, value, source, width);
                if let Err(f) = self.write(ctx, address, width, v, &r.site, op) {
                    // The report names this write: the labels open at it, and what completed
                    // before it, not where the ME is by now (D7).
                    self.fault_at = Some(FaultAt {
                        site: r.site,
                        ord: r.ord,
                        last_completed: self.completed.before(r.ord, r.me_before),
                        labels: r.labels,
                    });
                    return Step::Faulted(f);
                }
                self.completed.retired((r.ord, r.site, op));
            }
            RetireOp::Signal { fence, value } => {
                let mut release = None;
                hook!(self, ctx, |m| {
                    release = Some(m.signal(self.queue_id, &fence));
                });
                let w = r.site.writer(self.queue_id);
                let now = ctx.now_ns();
                if let Some(t) = self.trace.as_mut() {
                    t.now = now;
                    t.signalled(fence.name(), value);
                }
                // A signal to a fence the application released is discarded (F11).
                fence.signal_with(value, w, now, release);
                self.completed.retired((r.ord, r.site, "signal"));
                self.finish_submission(r.site.submission);
            }
            RetireOp::SubmissionEnd => self.finish_submission(r.site.submission),
        }
        Step::Progressed
    }

    fn finish_submission(&mut self, seq: u64) {
        self.note(Obj::Idle(self.queue_id), Kind::Update);
        self.completed_submissions = seq + 1;
        if let Some(p) = &self.progress {
            p.signal(self.completed_submissions, Writer::Never, 0);
        }
    }
}

#[derive(Debug)]
pub(super) enum RetireOp {
    Write {
        address: u64,
        width: Width,
        value: u64,
        source: WriteSource,
        op: &'static str,
        flush: Flush,
    },
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
    },
    SubmissionEnd,
}

#[derive(Debug)]
pub(super) struct Retire {
    /// Dispatches with an index below this must finish first.
    pub(super) after: u64,
    pub(super) site: Site,
    pub(super) op: RetireOp,
    /// The command's ordinal, the labels open at it, and the ME's last completion when it
    /// handed it on (D7).
    pub(super) ord: u64,
    pub(super) labels: Labels,
    pub(super) me_before: Option<completed::Entry>,
}
