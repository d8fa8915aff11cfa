//! The pre-fetch parser (D1): takes submissions in order, fetches and decodes packets from the
//! lists' streams in device memory (through a prefetch cache), performs queue waits and PFP
//! memory-value waits, reads `dispatch_indirect` arguments (C7), and pushes packets into the
//! FIFO.

use super::*;
use crate::command::decode::decode_common;

impl Engine {
    pub(super) fn pfp_step(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if self.fifo.len() >= self.fifo_depth {
            return Step::Blocked(WaitCondition::FifoFull);
        }
        if self.flush_hold {
            return Step::Blocked(WaitCondition::FlushHold);
        }
        self.note(Obj::FlushHold(self.queue_id), Kind::Read);
        if self.cursor.is_none() {
            return self.pfp_next_submission(ctx);
        }
        self.pfp_fetch(ctx)
    }

    /// The threaded driver's batch fetch: pushes the value waits on the ME and the value
    /// writes at the cursor straight from the prefetch cache into the FIFO while it has room,
    /// doing for each exactly what [`pfp_step`](Self::pfp_step) does for it (they need nothing
    /// of the PFP but their push). It stops, for `pfp_step` to go on, at anything else: a
    /// flush hold, the end of the cached words or of the list, a PFP wait, any other command
    /// or a malformed packet. Returns whether it pushed any. One test per batch instead of a
    /// step per packet, and the packet built in place (moving the decoded command between
    /// steps cost more than decoding it).
    pub(super) fn pfp_fetch_common(&mut self) -> bool {
        if self.flush_hold || crate::footprint::recording() {
            return false;
        }
        let Some(cur) = self.cursor.as_mut() else {
            return false;
        };
        let Some(list) = cur.lists.get(cur.list) else {
            return false;
        };
        let (words, id) = (list.words, list.id);
        let room = self.fifo_depth.saturating_sub(self.fifo.len());
        let mut pushed = 0;
        while pushed < room && cur.word < words {
            let Some(rest) = cur
                .word
                .checked_sub(cur.cache_start)
                .and_then(|o| cur.cache.get(o..))
            else {
                break;
            };
            let Some((cmd, len)) = decode_common(rest) else {
                break;
            };
            if matches!(
                cmd,
                Command::WaitValue {
                    engine: WaitEngine::Pfp,
                    ..
                }
            ) {
                break;
            }
            let site = Site {
                submission: cur.submission,
                list: Some(id),
                command: Some(cur.command),
            };
            cur.word += len;
            cur.command += 1;
            self.fifo.push_back(Packet {
                site,
                op: PacketOp::Command {
                    cmd,
                    indirect_groups: None,
                    list: None,
                },
            });
            pushed += 1;
        }
        if pushed == 0 {
            return false;
        }
        self.pushed += pushed as u64;
        self.pfp_blocked = None;
        true
    }

    /// Whether [`pfp_step`](Self::pfp_step) would progress (or fault) now, without doing it:
    /// `false` exactly when it would return `Blocked` or `Idle`. It may refill the prefetch
    /// cache and move the cursor past finished lists (as the step would), nothing else.
    pub(super) fn pfp_can_progress(&mut self, ctx: &EngineCtx<'_>) -> bool {
        if self.fifo.len() >= self.fifo_depth || self.flush_hold {
            return false;
        }
        let Some(cur) = self.cursor.as_mut() else {
            return match self.ring.front() {
                None => false,
                Some((_, Submission::Wait { ticket, .. })) => ticket.is_satisfied(),
                Some((_, Submission::Signal { .. })) => true,
                Some((_, Submission::Execute(_))) => self.drained(),
            };
        };
        while cur.list < cur.lists.len() && cur.word >= cur.lists[cur.list].words {
            cur.list += 1;
            cur.word = 0;
            cur.command = 0;
            cur.cache.clear();
            cur.cache_start = 0;
        }
        if cur.list >= cur.lists.len() {
            return true;
        }
        let li = cur.list;
        let site = Site {
            submission: cur.submission,
            list: Some(cur.lists[li].id),
            command: Some(cur.command),
        };
        match fetch_decode(cur, li) {
            Ok((
                cmd @ Command::WaitValue {
                    address,
                    cond: vc,
                    engine: WaitEngine::Pfp,
                },
                _,
            )) => {
                if vc.never_satisfiable() {
                    return true;
                }
                let cond = WaitCondition::Memory { address, cond: vc };
                // A fault (an unmapped address) is progress: the step faults.
                !matches!(self.check_wait(ctx, &site, cmd.name(), &cond), Ok(false))
            }
            // Any other command, or a malformed packet (a fault), progresses.
            _ => true,
        }
    }

    fn pfp_next_submission(&mut self, ctx: &EngineCtx<'_>) -> Step {
        let Some((seq, sub)) = self.ring.front() else {
            return Step::Idle;
        };
        let seq = *seq;
        let site = Site {
            submission: seq,
            list: None,
            command: None,
        };
        match sub {
            Submission::Wait {
                fence,
                fence_id,
                value,
                ticket,
            } => {
                let cond = WaitCondition::Fence {
                    fence: fence.clone(),
                    fence_id: *fence_id,
                    value: *value,
                };
                // F5, Q3: the ticket, not the current value (it may have been lowered since
                // the signal that satisfied the wait).
                if !ticket.is_satisfied() {
                    if let Some(t) = self.trace.as_mut() {
                        t.blocked(true);
                    }
                    self.pfp_blocked = Some((site, "wait", cond.clone()));
                    return Step::Blocked(cond);
                }
                let by = ticket.satisfied_by();
                if let Some(t) = self.trace.as_mut() {
                    t.unblocked_by(ctx.device, true, &cond, by.as_ref());
                }
                hook!(self, ctx, |m| {
                    m.submission_start(self.queue_id, seq, self.pushed);
                    let release = by.as_ref().and_then(|c| c.release.as_ref());
                    m.queue_wait_acquire(self.queue_id, release, self.pushed);
                });
                self.pfp_blocked = None;
                self.note(Obj::Sub(self.queue_id, seq), Kind::Write);
                self.ring.pop_front();
                // The wait completes its submission once everything before it has.
                self.push_packet(site, PacketOp::SubmissionEnd);
                Step::Progressed
            }
            Submission::Signal { .. } => {
                let Some((_, Submission::Signal { fence, value, .. })) = self.ring.pop_front()
                else {
                    return Step::Idle;
                };
                self.note(Obj::Sub(self.queue_id, seq), Kind::Write);
                hook!(self, ctx, |m| {
                    m.submission_start(self.queue_id, seq, self.pushed);
                });
                self.push_packet(site, PacketOp::Signal { fence, value });
                Step::Progressed
            }
            Submission::Execute(_) => {
                if !self.drained() {
                    // Q7: the previous call's work completes first.
                    return Step::Blocked(WaitCondition::Drain);
                }
                let Some((_, Submission::Execute(lists))) = self.ring.pop_front() else {
                    return Step::Idle;
                };
                self.note(Obj::Busy(self.queue_id), Kind::Read);
                self.note(Obj::Sub(self.queue_id, seq), Kind::Write);
                if self.tracked {
                    // The Q7 boundary joins the finished tasks into the ME's clocks.
                    self.note(Obj::Released(self.queue_id), Kind::Update);
                }
                hook!(self, ctx, |m| {
                    // Q7: the previous call's work is complete and visible to this queue.
                    m.q7_boundary(self.queue_id);
                    m.submission_start(self.queue_id, seq, self.pushed);
                });
                self.cursor = Some(Cursor {
                    submission: seq,
                    lists,
                    list: 0,
                    word: 0,
                    command: 0,
                    cache: Vec::new(),
                    cache_start: 0,
                });
                Step::Progressed
            }
        }
    }

    fn pfp_fetch(&mut self, ctx: &EngineCtx<'_>) -> Step {
        let Some(cur) = self.cursor.as_mut() else {
            return Step::Idle;
        };
        // Next list, or the end of the submission.
        while cur.list < cur.lists.len() && cur.word >= cur.lists[cur.list].words {
            cur.list += 1;
            cur.word = 0;
            cur.command = 0;
            cur.cache.clear();
            cur.cache_start = 0;
        }
        if cur.list >= cur.lists.len() {
            let site = Site {
                submission: cur.submission,
                list: None,
                command: None,
            };
            self.cursor = None;
            self.push_packet(site, PacketOp::SubmissionEnd);
            return Step::Progressed;
        }
        let li = cur.list;
        let site = Site {
            submission: cur.submission,
            list: Some(cur.lists[li].id),
            command: Some(cur.command),
        };
        let (cmd, len) = match fetch_decode(cur, li) {
            Ok(x) => x,
            Err(e) => {
                let f = Fault::MalformedPacket {
                    site,
                    offset: cur.word,
                    message: e.to_string(),
                };
                return self.fault(Stage::Pfp, f);
            }
        };
        let mut indirect_groups = None;
        match &cmd {
            Command::WaitValue {
                address,
                cond: vc,
                engine: WaitEngine::Pfp,
            } => {
                let op = cmd.name();
                let cond = WaitCondition::Memory {
                    address: *address,
                    cond: *vc,
                };
                if vc.never_satisfiable() {
                    return self.fault(
                        Stage::Pfp,
                        Fault::NeverSatisfiable {
                            site,
                            op,
                            stage: Stage::Pfp,
                            condition: cond,
                        },
                    );
                }
                match self.check_wait(ctx, &site, op, &cond) {
                    Err(f) => return self.fault(Stage::Pfp, f),
                    Ok(false) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.blocked(true);
                        }
                        self.pfp_blocked = Some((site, op, cond.clone()));
                        return Step::Blocked(cond);
                    }
                    Ok(true) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.unblocked(ctx.device, true, &cond);
                        }
                        hook!(self, ctx, |m| {
                            m.wait_acquire(
                                self.queue_id,
                                true,
                                site,
                                op,
                                *address,
                                vc.width,
                                self.pushed,
                            );
                        });
                        self.pfp_blocked = None;
                        if let Some(c) = self.cursor.as_mut() {
                            c.word += len;
                            c.command += 1;
                        }
                        // The PFP completes its own wait, before the next packet in queue order;
                        // everything before it has completed once the ME has drained.
                        let settled = self.fifo.is_empty()
                            && self.me_op.is_none()
                            && self.me_site.is_none()
                            && self.inflight_sites.is_empty()
                            && self.retire.is_empty();
                        if self
                            .completed
                            .pfp_done((2 * self.pushed, site, op), settled)
                        {
                            self.prune_completed();
                        }
                        self.commands_completed += 1;
                        return Step::Progressed;
                    }
                }
            }
            Command::DispatchIndirect { args, .. } => {
                let op = cmd.name();
                // C7: the PFP reads the group count when it parses the command.
                hook!(self, ctx, |m| {
                    m.pfp_read(self.queue_id, site, *args, self.pushed);
                });
                match self.read(ctx, *args, Width::W32, &site, op) {
                    Ok(n) => indirect_groups = Some(n as u32),
                    Err(f) => return self.fault(Stage::Pfp, f),
                }
            }
            Command::FlushPipeline { .. } => {
                self.note(Obj::FlushHold(self.queue_id), Kind::Write);
                self.flush_hold = true;
            }
            _ => {}
        }
        self.pfp_blocked = None;
        if let Some(c) = self.cursor.as_mut() {
            c.word += len;
            c.command += 1;
        }
        // Only dispatches need their list (for its user-kernel table).
        let list = match (&cmd, self.cursor.as_ref()) {
            (Command::Dispatch { .. } | Command::DispatchIndirect { .. }, Some(c)) => {
                c.lists.get(li).cloned()
            }
            _ => None,
        };
        self.push_packet(
            site,
            PacketOp::Command {
                cmd,
                indirect_groups,
                list,
            },
        );
        Step::Progressed
    }
}

#[derive(Debug)]
pub(super) enum PacketOp {
    Command {
        cmd: Command,
        indirect_groups: Option<u32>,
        /// The list, for dispatches (its user-kernel table).
        list: Option<Arc<ClosedList>>,
    },
    Signal {
        fence: Arc<FenceCore>,
        value: u64,
    },
    SubmissionEnd,
}

#[derive(Debug)]
pub(super) struct Packet {
    pub(super) site: Site,
    pub(super) op: PacketOp,
}

#[derive(Debug)]
pub(super) struct Cursor {
    pub(super) submission: u64,
    pub(super) lists: Vec<Arc<ClosedList>>,
    pub(super) list: usize,
    pub(super) word: usize,
    pub(super) command: u32,
    /// Prefetched words of the current list: `[cache_start, cache_start + cache.len())`.
    pub(super) cache: Vec<u32>,
    pub(super) cache_start: usize,
}

/// Fetches (through the PFP's prefetch cache) and decodes the packet at the cursor.
fn fetch_decode(cur: &mut Cursor, li: usize) -> Result<(Command, usize), DecodeError> {
    let Cursor {
        lists,
        word,
        cache,
        cache_start,
        ..
    } = cur;
    let list = &lists[li];
    let word = *word;
    loop {
        let in_cache = word >= *cache_start && word < *cache_start + cache.len();
        if !in_cache {
            refill(cache, cache_start, word, list, PREFETCH_WORDS);
        }
        // The common packets first, straight from the cache (the same result as `decode`).
        if let Some(ok) = cache.get(word - *cache_start..).and_then(decode_common) {
            return Ok(ok);
        }
        match decode(cache, word - *cache_start) {
            Ok((cmd, len)) => return Ok((cmd, len)),
            Err(e) => {
                let cached_end = *cache_start + cache.len();
                if cached_end < list.words {
                    // The packet may continue past the prefetched words: fetch again from its
                    // start, twice what was cached of it (so a packet longer than the cache
                    // doubles it, and the next packets go back to the usual prefetch size).
                    let want = ((cached_end - word) * 2).max(PREFETCH_WORDS);
                    refill(cache, cache_start, word, list, want);
                    if *cache_start + cache.len() > cached_end {
                        continue;
                    }
                }
                return Err(DecodeError { offset: word, ..e });
            }
        }
    }
}

/// Reads `words` words of `list`'s stream from device memory, starting at `word`.
fn refill(
    cache: &mut Vec<u32>,
    cache_start: &mut usize,
    word: usize,
    list: &ClosedList,
    words: usize,
) {
    let end = (word + words).min(list.words);
    cache.clear();
    *cache_start = word;
    list.stream
        .read_words32(word, end.saturating_sub(word), cache);
}

/// Words the PFP fetches from a command stream at a time.
pub(super) const PREFETCH_WORDS: usize = 256;
