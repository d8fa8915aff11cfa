//! The micro engine (D1): pops packets and executes them in order (ME waits, top-of-pipe and
//! immediate writes, copies, dispatch launches, flushes, labels) and queues bottom-of-pipe
//! writes and signals for retirement.

use super::*;
use crate::hazard::strict::LINE;

impl Engine {
    pub(super) fn me_step(&mut self, ctx: &EngineCtx<'_>) -> Step {
        if let Some(op) = self.me_op.take() {
            return self.me_resume(ctx, op);
        }
        let Some(packet) = self.fifo.pop_front() else {
            return Step::Idle;
        };
        if crate::footprint::recording() {
            self.note(
                Obj::Fifo(self.queue_id, self.fifo_slot(self.popped)),
                Kind::Write,
            );
        }
        let index = self.popped;
        self.popped += 1;
        hook!(self, ctx, |m| {
            m.me_packet(self.queue_id, index);
        });
        let Packet { site, op } = packet;
        let ord = self.me_ord();
        match op {
            PacketOp::Signal { fence, value } => {
                hook!(self, ctx, |m| {
                    m.retire_pushed(self.queue_id, true);
                });
                self.push_retire(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::Signal { fence, value },
                    ord,
                    labels: self.labels_shared.clone(),
                    me_before: self.completed.me(),
                });
                // It completes when it retires.
                self.complete_later("signal");
                Step::Progressed
            }
            PacketOp::SubmissionEnd => {
                self.push_retire(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::SubmissionEnd,
                    ord,
                    labels: self.labels_shared.clone(),
                    me_before: self.completed.me(),
                });
                Step::Progressed
            }
            PacketOp::Command {
                cmd,
                indirect_groups,
                list,
            } => self.me_command(ctx, site, cmd, indirect_groups, list.as_ref()),
        }
    }

    /// The threaded driver's batch of the common packets: executes the value waits that hold
    /// and the top-of-pipe writes at the front of the FIFO, up to `max`, doing for each
    /// exactly what [`me_step`](Self::me_step) does, but reading the packet where it lies
    /// instead of moving it out first (moving the decoded command cost more than executing
    /// it). It stops, for `me_step` to go on, at anything else: an operation in progress, a
    /// hazard-tracked device or one recording footprints, a wait that does not hold or whose
    /// read faults, any other packet. Returns how many it executed, and the fault that ended
    /// the batch if a write faulted.
    pub(super) fn me_run_common(&mut self, ctx: &EngineCtx<'_>, max: u32) -> (u32, Option<Step>) {
        if self.me_op.is_some() || self.tracked || crate::footprint::recording() {
            return (0, None);
        }
        let mut n = 0;
        while n < max {
            let Some(Packet {
                site,
                op: PacketOp::Command { cmd, .. },
            }) = self.fifo.front()
            else {
                break;
            };
            let site = *site;
            match *cmd {
                Command::WaitValue { address, cond, .. } => {
                    if cond.never_satisfiable() {
                        break;
                    }
                    let op = cmd.name();
                    match self.read(ctx, address, cond.width, &site, op) {
                        Ok(v) if cond.holds(v) => {}
                        _ => break,
                    }
                    self.fifo.pop_front();
                    self.popped += 1;
                    if let Some(t) = self.trace.as_mut() {
                        t.unblocked(ctx.device, false, &WaitCondition::Memory { address, cond });
                    }
                    self.complete(site, op);
                }
                Command::WriteValueTopOfPipe {
                    address,
                    width,
                    value,
                    source,
                } => {
                    let op = cmd.name();
                    self.fifo.pop_front();
                    self.popped += 1;
                    let step = self.write_top_of_pipe(ctx, site, op, address, width, value, source);
                    if matches!(step, Step::Faulted(_)) {
                        return (n, Some(step));
                    }
                }
                _ => break,
            }
            n += 1;
        }
        (n, None)
    }

    /// Whether [`me_step`](Self::me_step) would progress (or fault) now, without doing it:
    /// `false` exactly when it would return `Blocked` or `Idle` (an ME that pops a packet
    /// progresses, even if it then blocks on it).
    pub(super) fn me_can_progress(&mut self, ctx: &EngineCtx<'_>) -> bool {
        match &self.me_op {
            None => !self.fifo.is_empty(),
            Some(MeOp::Copy { .. }) => true,
            Some(MeOp::Flush { .. }) => self.inflight.is_empty() && self.launches.is_empty(),
            Some(MeOp::Wait { site, cond }) => {
                let (site, cond) = (*site, cond.clone());
                let name = self.me_site.as_ref().map_or("wait-value32", |(_, n)| *n);
                // A fault is progress: the step faults.
                !matches!(self.check_wait(ctx, &site, name, &cond), Ok(false))
            }
        }
    }

    /// The ME is done with a command that is complete now.
    fn complete(&mut self, site: Site, op: &'static str) {
        self.complete_later(op);
        self.completed.me_done((self.me_ord(), site, op));
    }

    /// The ME is done with a command that completes later: a dispatch when its last group
    /// finishes, a bottom-of-pipe write or queue signal when it retires (D7's `last_completed`
    /// names only commands that really completed).
    fn complete_later(&mut self, op: &'static str) {
        if let Some(t) = self.trace.as_mut() {
            t.me_done(op);
        }
        self.me_site = None;
        self.commands_completed += 1;
    }

    fn me_resume(&mut self, ctx: &EngineCtx<'_>, op: MeOp) -> Step {
        match op {
            MeOp::Wait {
                site,
                cond: WaitCondition::Memory { address, cond },
            } => {
                let name = self.me_site.as_ref().map_or("wait-value32", |(_, n)| *n);
                self.me_wait(ctx, site, name, address, cond)
            }
            MeOp::Wait { site, cond } => {
                // Only memory waits reach the ME; any other condition holds.
                let name = self.me_site.as_ref().map_or("wait-value32", |(_, n)| *n);
                match self.check_wait(ctx, &site, name, &cond) {
                    Err(f) => self.fault(Stage::Me, f),
                    Ok(true) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.unblocked(ctx.device, false, &cond);
                        }
                        self.complete(site, name);
                        Step::Progressed
                    }
                    Ok(false) => {
                        if let Some(t) = self.trace.as_mut() {
                            t.blocked(false);
                        }
                        let c = cond.clone();
                        self.me_op = Some(MeOp::Wait { site, cond });
                        Step::Blocked(c)
                    }
                }
            }
            MeOp::Flush { site, flush } => {
                if !self.inflight.is_empty() || !self.launches.is_empty() {
                    self.me_op = Some(MeOp::Flush { site, flush });
                    return Step::Blocked(WaitCondition::Dispatches);
                }
                hook!(self, ctx, |m| {
                    m.flush_done(self.queue_id, flush);
                });
                // Every dispatch launched so far finished; the PFP goes on.
                self.note(
                    Obj::Dispatches(self.queue_id, 0, self.next_dispatch),
                    Kind::Read,
                );
                self.note(Obj::FlushHold(self.queue_id), Kind::Write);
                self.flush_hold = false;
                self.complete(site, "flush-pipeline");
                Step::Progressed
            }
            MeOp::Copy {
                site,
                dst,
                src,
                bytes,
            } => match self.copy(ctx, &site, dst, src, bytes) {
                Ok(()) => {
                    self.complete(site, "copy");
                    Step::Progressed
                }
                Err(f) => self.fault(Stage::Me, f),
            },
        }
    }

    /// An ME memory-value wait (C1) at `site`, named `name`: completes it when the value
    /// satisfies `cond`, else blocks on it (the ME's position stays at the wait).
    fn me_wait(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        name: &'static str,
        address: u64,
        cond: ValueCondition,
    ) -> Step {
        match self.read(ctx, address, cond.width, &site, name) {
            Err(f) => {
                self.me_site = Some((site, name));
                self.fault(Stage::Me, f)
            }
            Ok(v) if cond.holds(v) => {
                if let Some(t) = self.trace.as_mut() {
                    t.unblocked(ctx.device, false, &WaitCondition::Memory { address, cond });
                }
                hook!(self, ctx, |m| {
                    m.wait_acquire(
                        self.queue_id,
                        false,
                        site,
                        name,
                        address,
                        cond.width,
                        self.pushed,
                    )
                });
                self.complete(site, name);
                Step::Progressed
            }
            Ok(_) => {
                self.me_site = Some((site, name));
                if let Some(t) = self.trace.as_mut() {
                    t.blocked(false);
                }
                let c = WaitCondition::Memory { address, cond };
                self.me_op = Some(MeOp::Wait {
                    site,
                    cond: c.clone(),
                });
                Step::Blocked(c)
            }
        }
    }

    fn copy(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: &Site,
        dst: u64,
        src: u64,
        bytes: u64,
    ) -> Result<(), Fault> {
        if bytes == 0 {
            return Ok(());
        }
        let fault = |address, access, why| Fault::PageFault {
            address,
            access,
            site: *site,
            op: "copy",
            why,
        };
        let (sb, so) = ctx
            .device
            .memory
            .resolve(src, bytes)
            .ok_or_else(|| fault(src, Access::Read, "unmapped"))?;
        let (db, doff) = ctx
            .device
            .memory
            .resolve(dst, bytes)
            .ok_or_else(|| fault(dst, Access::Write, "unmapped"))?;
        if !db.heap.gpu_writable() {
            return Err(fault(dst, Access::Write, "write to upload memory"));
        }
        // A copy moves at most COPY_CHUNK bytes at a time through a buffer of that size, so a
        // copy of gigabytes needs no gigabyte-sized temporary. Overlapping ranges copy as
        // memmove does: back to front when the destination is above the source.
        let backwards = dst > src && dst < src + bytes;
        let strict_copy = match ctx.device.model() {
            Some(mut m) => {
                let index = m.copy(self.queue_id, *site, dst, src, bytes);
                if let Some(vis) = m.vis.as_mut() {
                    // D5: a copy is an engine task; its reads may be stale, its writes dirty.
                    // Chunks end on source cache lines, so the lines read (and the choices
                    // made for them) are those of one whole read; ranges that share lines are
                    // read whole first, as before.
                    let lines_overlap = src / LINE <= (dst + bytes - 1) / LINE
                        && dst / LINE <= (src + bytes - 1) / LINE;
                    let mut vals = Vec::new();
                    if lines_overlap && vals.try_reserve_exact((bytes / 4) as usize).is_ok() {
                        vals.resize((bytes / 4) as usize, 0u32);
                        vis.task_read(ctx.device, self.queue_id, src, &mut vals);
                        vis.task_write(ctx.device, self.queue_id, (true, index), dst, &vals);
                    } else {
                        for (off, len) in copy_chunks(src, bytes, backwards) {
                            vals.resize((len / 4) as usize, 0u32);
                            vis.task_read(ctx.device, self.queue_id, src + off, &mut vals);
                            vis.task_write(
                                ctx.device,
                                self.queue_id,
                                (true, index),
                                dst + off,
                                &vals,
                            );
                        }
                    }
                    true
                } else {
                    false
                }
            }
            None => false,
        };
        if !strict_copy {
            let mut vals: Vec<u32> = Vec::new();
            for (off, len) in copy_chunks(src, bytes, backwards) {
                vals.clear();
                vals.extend((0..len / 4).map(|i| sb.load32(so + off + i * 4).unwrap_or(0)));
                for (i, v) in vals.iter().enumerate() {
                    db.store32(doff + off + i as u64 * 4, *v);
                }
            }
        }
        ctx.device.watches.notify_range(dst, dst + bytes);
        self.record_range(ctx, dst, dst + bytes, site, "copy");
        Ok(())
    }

    fn record_range(
        &mut self,
        ctx: &EngineCtx<'_>,
        start: u64,
        end: u64,
        site: &Site,
        op: &'static str,
    ) {
        crate::footprint::record_writers(start, end);
        if self.ranges.len() >= RANGE_RECORDS {
            self.ranges.pop_front();
        }
        self.ranges.push_back(RangeRecord {
            op,
            start,
            end,
            site: *site,
            seq: ctx.device.next_write_seq(),
            ns: ctx.coarse_ns(),
        });
    }

    fn me_command(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        cmd: Command,
        indirect_groups: Option<u32>,
        list: Option<&Arc<ClosedList>>,
    ) -> Step {
        let op = cmd.name();
        // `me_site` is where the ME is while a command is not done (blocked, faulted or
        // handed on): the commands done within this step leave it `None`, so they set it only
        // on the way out.
        match cmd {
            Command::WaitValue {
                address,
                cond: vc,
                engine: _,
            } => {
                if vc.never_satisfiable() {
                    self.me_site = Some((site, op));
                    let cond = WaitCondition::Memory { address, cond: vc };
                    return self.fault(
                        Stage::Me,
                        Fault::NeverSatisfiable {
                            site,
                            op,
                            stage: Stage::Me,
                            condition: cond,
                        },
                    );
                }
                self.me_wait(ctx, site, op, address, vc)
            }
            Command::WriteValueTopOfPipe {
                address,
                width,
                value,
                source,
            } => self.write_top_of_pipe(ctx, site, op, address, width, value, source),
            other => {
                self.me_site = Some((site, op));
                self.me_other(ctx, site, op, other, indirect_groups, list)
            }
        }
    }

    /// A top-of-pipe write (C4) at `site`: writes the value (or timestamp) now and completes
    /// it, or faults.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_top_of_pipe(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        op: &'static str,
        address: u64,
        width: Width,
        value: u64,
        source: WriteSource,
    ) -> Step {
        let v = Self::source_value(ctx, value, source, width);
        hook!(self, ctx, |m| {
            m.me_value_write(self.queue_id, site, op, address, width);
        });
        if let Err(f) = self.write(ctx, address, width, v, &site, op) {
            self.me_site = Some((site, op));
            return self.fault(Stage::Me, f);
        }
        self.complete(site, op);
        Step::Progressed
    }

    /// The ME's commands other than value waits and top-of-pipe writes (`me_site` is set).
    fn me_other(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        op: &'static str,
        cmd: Command,
        indirect_groups: Option<u32>,
        list: Option<&Arc<ClosedList>>,
    ) -> Step {
        match cmd {
            Command::WaitValue { .. } | Command::WriteValueTopOfPipe { .. } => {
                self.me_command(ctx, site, cmd, indirect_groups, list)
            }
            Command::WriteValueBottomOfPipe {
                address,
                width,
                value,
                source,
                flush,
            } => {
                hook!(self, ctx, |m| {
                    m.retire_pushed(self.queue_id, flush.contains(Flush::L2_WRITEBACK));
                });
                self.push_retire(Retire {
                    after: self.next_dispatch,
                    site,
                    op: RetireOp::Write {
                        address,
                        width,
                        value,
                        source,
                        op,
                        flush,
                    },
                    ord: self.me_ord(),
                    labels: self.labels_shared.clone(),
                    me_before: self.completed.me(),
                });
                self.complete_later(op);
                Step::Progressed
            }
            Command::WriteImmediate { writes } => {
                let later = writes.iter().any(|w| w.mode == ImmediateMode::MarkerOut);
                for w in writes {
                    match w.mode {
                        ImmediateMode::Default | ImmediateMode::MarkerIn => {
                            hook!(self, ctx, |m| {
                                m.me_value_write(self.queue_id, site, op, w.address, Width::W32);
                            });
                            if let Err(f) = self.write(
                                ctx,
                                w.address,
                                Width::W32,
                                u64::from(w.value),
                                &site,
                                op,
                            ) {
                                return self.fault(Stage::Me, f);
                            }
                        }
                        ImmediateMode::MarkerOut => {
                            hook!(self, ctx, |m| {
                                m.retire_pushed(self.queue_id, false);
                            });
                            self.push_retire(Retire {
                                after: self.next_dispatch,
                                site,
                                op: RetireOp::Write {
                                    address: w.address,
                                    width: Width::W32,
                                    value: u64::from(w.value),
                                    source: WriteSource::Value,
                                    op,
                                    flush: Flush::NONE,
                                },
                                ord: self.me_ord(),
                                labels: self.labels_shared.clone(),
                                me_before: self.completed.me(),
                            })
                        }
                    }
                }
                if later {
                    self.complete_later(op);
                } else {
                    self.complete(site, op);
                }
                Step::Progressed
            }
            Command::FlushPipeline { flush } => self.me_resume(ctx, MeOp::Flush { site, flush }),
            Command::Dispatch { kernel, groups } => self.launch(ctx, site, &kernel, groups, list),
            Command::DispatchIndirect { kernel, .. } => {
                let groups = indirect_groups.unwrap_or(0);
                self.launch(ctx, site, &kernel, groups, list)
            }
            Command::Copy { dst, src, bytes } => {
                // The ME does not go on until the copy is done (C9): the copy itself is the
                // next ME step (a separate action for the deterministic driver).
                self.me_op = Some(MeOp::Copy {
                    site,
                    dst,
                    src,
                    bytes,
                });
                Step::Progressed
            }
            Command::SetMarker { .. } => {
                self.complete(site, op);
                Step::Progressed
            }
            Command::BeginEvent { label } => {
                if let Some(t) = self.trace.as_mut() {
                    t.begin_event(&label);
                }
                self.labels.push(label.into());
                self.labels_shared = self.labels.as_slice().into();
                self.complete(site, op);
                Step::Progressed
            }
            Command::EndEvent => {
                if let Some(t) = self.trace.as_mut() {
                    t.end_event();
                }
                self.labels.pop();
                self.labels_shared = self.labels.as_slice().into();
                self.complete(site, op);
                Step::Progressed
            }
        }
    }

    fn launch(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: Site,
        args: &KernelArgs,
        groups: u32,
        list: Option<&Arc<ClosedList>>,
    ) -> Step {
        let table: &[UserKernel] = list.map_or(&[], |l| &l.kernels);
        let Some(kernel) = Kernel::from_args(args, table) else {
            let message = format!(
                "dispatch of user kernel {args:?}: no such kernel in list `{}` ({} kernels)",
                list.map_or("?", |l| &*l.name),
                table.len()
            );
            let f = Fault::MalformedPacket {
                site,
                offset: 0,
                message,
            };
            return self.fault(Stage::Me, f);
        };
        if let Some((start, end)) = kernel.write_range(0..groups) {
            let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
            self.record_range(ctx, start, end, &site, op);
        }
        if groups > 0 {
            let index = self.next_dispatch;
            self.next_dispatch += 1;
            hook!(self, ctx, |m| {
                let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
                m.launch(self.queue_id, index, site, op, &kernel, groups);
            });
            self.inflight.insert(index, groups);
            let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
            self.inflight_sites.insert(
                index,
                InFlightSite {
                    site,
                    op,
                    labels: self.labels_shared.clone(),
                    ord: self.me_ord(),
                    me_before: self.completed.me(),
                },
            );
            self.launches.push(Launch {
                index,
                op: self.me_site.as_ref().map_or("dispatch", |(_, n)| *n),
                kernel,
                groups,
                site,
            });
        }
        let op = self.me_site.as_ref().map_or("dispatch", |(_, n)| *n);
        if groups > 0 {
            self.complete_later(op);
        } else {
            self.complete(site, op);
        }
        Step::Progressed
    }
}

#[derive(Debug)]
pub(super) enum MeOp {
    Wait {
        site: Site,
        cond: WaitCondition,
    },
    Flush {
        site: Site,
        flush: Flush,
    },
    Copy {
        site: Site,
        dst: u64,
        src: u64,
        bytes: u64,
    },
}

/// Dispatch destination ranges kept per engine (the oldest are forgotten).
pub(super) const RANGE_RECORDS: usize = 4096;

/// Bytes a copy moves at a time (see [`Engine::copy`]).
const COPY_CHUNK: u64 = 64 << 10;

/// The (offset, length) pieces of a copy of `bytes` from `src`, in the order to move them:
/// about [`COPY_CHUNK`] each, cut where the source address is on a cache line (so strict mode
/// reads the same lines either way), front to back or, when `backwards`, back to front.
fn copy_chunks(src: u64, bytes: u64, backwards: bool) -> Vec<(u64, u64)> {
    let mut cuts = vec![0];
    let mut off = 0;
    while bytes - off > COPY_CHUNK {
        // The next source line boundary at or after off + COPY_CHUNK.
        let next = (src + off + COPY_CHUNK).next_multiple_of(LINE) - src;
        if next >= bytes {
            break;
        }
        cuts.push(next);
        off = next;
    }
    cuts.push(bytes);
    let mut pieces: Vec<(u64, u64)> = cuts.windows(2).map(|w| (w[0], w[1] - w[0])).collect();
    if backwards {
        pieces.reverse();
    }
    pieces
}
