//! The command processor's memory accesses: resolving an address to its buffer (through a
//! one-entry buffer cache), CP reads and writes (strict mode reads through the visibility
//! model), write sources (values, timestamps), and the test of a wait condition.

use super::*;

impl Engine {
    /// Makes the buffer cache hold the buffer of `[address, address + width)` and returns the
    /// offset in it. The cache is valid while the address space's generation (bumped by every
    /// unmap) is unchanged, so a hit costs no lock and no reference count.
    #[inline]
    pub(super) fn resolve(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        access: Access,
        site: &Site,
        op: &'static str,
    ) -> Result<u64, Fault> {
        let generation = ctx.device.memory.generation();
        let hit = matches!(&self.buffer_cache, Some((g, b))
            if *g == generation
                && address >= b.base
                && b.contains(address - b.base, width.bytes()));
        if !hit {
            match ctx.device.memory.resolve(address, width.bytes()) {
                Some((b, _)) => self.buffer_cache = Some((generation, b)),
                None => {
                    return Err(Fault::PageFault {
                        address,
                        access,
                        site: *site,
                        op,
                        why: "unmapped",
                    })
                }
            }
        }
        let Some((_, buf)) = &self.buffer_cache else {
            unreachable!("filled above")
        };
        if access == Access::Write && !buf.heap.gpu_writable() {
            return Err(Fault::PageFault {
                address,
                access,
                site: *site,
                op,
                why: "write to upload memory",
            });
        }
        Ok(address - buf.base)
    }

    /// The cached buffer (after a successful [`resolve`](Self::resolve)).
    #[inline]
    fn cached(&self) -> Option<&BufferCore> {
        self.buffer_cache.as_ref().map(|(_, b)| &**b)
    }

    pub(super) fn read(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        site: &Site,
        op: &'static str,
    ) -> Result<u64, Fault> {
        let off = self.resolve(ctx, address, width, Access::Read, site, op)?;
        let buf = self.cached();
        let v = buf.and_then(|b| b.load(off, width)).unwrap_or(0);
        if self.strict {
            return Ok(Self::strict_cp_read(ctx, self.queue_id, address, width, v));
        }
        Ok(v)
    }

    /// D5: the CP also sees its engine's dirty words once they are CP-visible.
    #[cold]
    #[inline(never)]
    fn strict_cp_read(ctx: &EngineCtx<'_>, queue: u32, address: u64, width: Width, v: u64) -> u64 {
        match ctx.device.model().as_ref().and_then(|m| m.vis.as_ref()) {
            Some(vis) => vis.cp_read(queue, address, width, v),
            None => v,
        }
    }

    pub(super) fn write(
        &mut self,
        ctx: &EngineCtx<'_>,
        address: u64,
        width: Width,
        value: u64,
        site: &Site,
        op: &'static str,
    ) -> Result<(), Fault> {
        let off = self.resolve(ctx, address, width, Access::Write, site, op)?;
        // Traced runs record the write before it becomes visible, so a waiter released by it
        // always finds who released it.
        if let Some(t) = self.trace.as_ref() {
            ctx.device.record_trace_write(
                address,
                Writer::Engine {
                    queue: self.queue_id,
                    site: *site,
                },
                t.now,
                op,
                value,
            );
        }
        if let Some(buf) = self.cached() {
            match width {
                Width::W32 => buf.store32(off, value as u32),
                Width::W64 => buf.store64(off, value),
            };
        }
        ctx.device.watches.notify_word(address);
        let seq = ctx.device.next_write_seq();
        crate::footprint::record_writers(address, address + width.bytes());
        let ns = ctx.coarse_ns();
        for word in crate::core::words_of(address, width.bytes()) {
            self.writes.insert(
                word,
                WriteRecord {
                    site: *site,
                    op,
                    seq,
                    ns,
                },
            );
        }
        Ok(())
    }

    pub(super) fn source_value(
        ctx: &EngineCtx<'_>,
        value: u64,
        source: WriteSource,
        width: Width,
    ) -> u64 {
        let v = match source {
            WriteSource::Value => value,
            WriteSource::GpuTimestamp => {
                // A value that depends on when it is taken (footprint.rs: the clock matters).
                crate::footprint::record(
                    crate::footprint::Obj::Clock,
                    crate::footprint::Kind::Write,
                );
                ticks(ctx.now_ns(), ctx.device.timestamp_frequency)
            }
            WriteSource::SystemTimestamp => {
                crate::footprint::record(
                    crate::footprint::Obj::Clock,
                    crate::footprint::Kind::Write,
                );
                ticks(ctx.now_ns(), SYSTEM_TIMESTAMP_FREQUENCY)
            }
        };
        v & width.mask()
    }

    pub(super) fn check_wait(
        &mut self,
        ctx: &EngineCtx<'_>,
        site: &Site,
        op: &'static str,
        cond: &WaitCondition,
    ) -> Result<bool, Fault> {
        match cond {
            WaitCondition::Memory { address, cond } => {
                let v = self.read(ctx, *address, cond.width, site, op)?;
                Ok(cond.holds(v))
            }
            WaitCondition::Fence { fence, value, .. } => Ok(fence.completed_value() >= *value),
            _ => Ok(true),
        }
    }
}
