//! Access for tools, not programs: [`DeviceTools`] ([`Device::tools`]) and [`BufferTools`]
//! ([`Buffer::tools`]).
//!
//! A real GPU gives a program none of these. They are for tools that drive or inspect the
//! software GPU from outside the program it runs: test runners, the scenario runner, benchmarks
//! and fuzzers. They watch the device's progress, run the deterministic schedule to its end,
//! declare a hang the device cannot see, read strict mode's statistics, hand buffered trace
//! events to the sink, and read and write buffers whatever their heap (H1, H2, H4). A program
//! written against pipefence should not need them; everything it can do on D3D12 is on
//! [`Device`], [`Queue`](crate::Queue), [`Fence`](crate::Fence), [`Buffer`] and
//! [`CommandList`](crate::CommandList).

use super::buffer::Buffer;
use super::device::Device;
use crate::command::Width;
use crate::diagnose::RemovalReport;
use crate::driver::{Cond, ScheduleStats};
use crate::error::Result;
use crate::sync::shim::{lock, Ordering};
use std::sync::Arc;
use std::time::Duration;

impl Device {
    /// What tools (test runners, the scenario runner) use beyond the D3D12-shaped API: see
    /// [`DeviceTools`]. Not for programs.
    pub fn tools(&self) -> DeviceTools<'_> {
        DeviceTools { device: self }
    }
}

impl Buffer {
    /// What tools use beyond the D3D12-shaped API: heap-agnostic reads and writes
    /// ([`BufferTools`]). Not for programs.
    pub fn tools(&self) -> BufferTools<'_> {
        BufferTools { buffer: self }
    }
}

/// A device's methods for tools, not programs ([`Device::tools`]).
///
/// A real GPU gives a program none of these: they are for test runners, the scenario runner,
/// benchmarks and fuzzers, which drive the software GPU from outside the program it runs. They
/// watch the device's progress, run the deterministic schedule to its end, declare a hang the
/// device cannot see (H1), read strict mode's statistics and hand buffered trace events to the
/// sink. Everything a program can do on D3D12 is on [`Device`] and the other handles.
///
/// ```
/// use pipefence::{Device, DeviceDesc, FenceDesc, QueueDesc, QueueKind};
/// use std::time::Duration;
///
/// let device = Device::new(DeviceDesc::default())?;
/// let queue = device.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
/// let fence = device.create_fence(&FenceDesc::new(0))?;
/// queue.signal(&fence, 1)?;
/// assert!(device.tools().settle(Duration::from_secs(10)));
/// assert!(!device.tools().has_work());
/// assert!(device.tools().progress() > 0);
/// # Ok::<(), pipefence::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DeviceTools<'a> {
    device: &'a Device,
}

impl DeviceTools<'_> {
    /// A number that grows whenever any engine completes a command, a submission or a dispatch
    /// group (for tools that watch for progress, like the scenario runner's hang detection, H1:
    /// a long but finite dispatch progresses with each group).
    pub fn progress(&self) -> u64 {
        self.device
            .shared
            .live_queues()
            .iter()
            .map(|q| {
                let groups = q.groups_completed.load(Ordering::Relaxed);
                let e = lock(&q.engine);
                e.commands_completed + e.completed_submissions + groups
            })
            .sum()
    }

    /// Whether the device is progressing through work that has not completed yet: a dispatch
    /// whose groups are each bound to complete within the watchdog timeout (built-in kernels
    /// whose cost, D4, is within it) is in flight. The threaded driver's watchdog treats that as
    /// progress (D6), and so should a hang monitor: however long the OS keeps the workers off
    /// the CPU, such a group is not a hang. Always `false` on the deterministic driver (where a
    /// dispatch in flight is always enabled, so it never hangs).
    pub fn finite_work_in_flight(&self) -> bool {
        self.device
            .shared
            .pool
            .get()
            .is_some_and(|p| p.bounded_in_flight())
    }

    /// Whether any queue has work left (submitted and not completed).
    pub fn has_work(&self) -> bool {
        self.device
            .shared
            .live_queues()
            .iter()
            .any(|q| !lock(&q.engine).is_idle())
    }

    /// Hands every trace event recorded so far to the sink (engines buffer them briefly); call
    /// before reading a [`TraceRecorder`](crate::trace::TraceRecorder) while the device may
    /// still be running. [`Device::wait_idle`] and [`settle`](Self::settle) do it themselves.
    pub fn flush_trace(&self) {
        self.device.shared.flush_trace();
    }

    /// Runs until every other host thread has finished and every queue is idle, or the device
    /// is removed (on the deterministic driver a hang is then detected at once, D6). Returns
    /// whether it settled without removal. On the threaded driver: [`Device::wait_idle`] with
    /// `timeout`.
    pub fn settle(&self, timeout: Duration) -> bool {
        let sh = &self.device.shared;
        if sh.driver.schedules_caller(sh) {
            let _ = sh.block(Cond::Settled, None);
            sh.with_model(|m| {
                m.host_wait_idle();
            });
        } else {
            let _ = self.device.wait_idle(timeout);
        }
        sh.flush_trace();
        !self.device.is_removed()
    }

    /// The device clock in nanoseconds, as [`Device::clock_ns`] reads it, for a tool's
    /// bookkeeping (how long a run took): unlike a program's reading, it is not part of what
    /// the program computes, so a reducing exploration does not note it as an access of the
    /// clock (`docs/exploration.md`, "The clock"). A tool that reads it at the end of every
    /// run would otherwise put the clock into the dependence relation of every search.
    pub fn clock_ns(&self) -> u64 {
        self.device.shared.now_ns()
    }

    /// The deterministic schedule's figures so far (steps, dispatches in flight); `None` on the
    /// threaded driver.
    pub fn schedule_stats(&self) -> Option<ScheduleStats> {
        self.device.shared.driver.schedule_stats()
    }

    /// Strict mode's statistics: (lines written back early, stale reads returned).
    pub fn strict_stats(&self) -> (u64, u64) {
        self.device
            .shared
            .model()
            .and_then(|m| m.vis.as_ref().map(|v| (v.early_writebacks, v.stale_reads)))
            .unwrap_or((0, 0))
    }

    /// Diagnoses the device now and removes it with reason Hung and the D7 report (H1): for
    /// tools that know more than the device, such as a runner that knows every host thread is
    /// blocked. Returns the report (the first one, if the device was already removed).
    pub fn declare_hung(&self) -> Arc<RemovalReport> {
        self.device.shared.remove_hung();
        match self.device.shared.removal_report() {
            Some(r) => r,
            None => unreachable!("removal always stores a report"),
        }
    }
}

/// A buffer's methods for tools, not programs ([`Buffer::tools`]): reads and writes whatever
/// the heap (H4).
///
/// A real GPU gives a program none of these: they bypass the heap rules it enforces (they still
/// check alignment and range) and the hazard analysis does not see them. They are for tools
/// such as the scenario runner's `init` and `expect`; a program uses [`Buffer::read_u32`] and
/// the other CPU accesses.
///
/// ```
/// use pipefence::{BufferDesc, Device, DeviceDesc, Heap};
///
/// let device = Device::new(DeviceDesc::default())?;
/// let buffer = device.create_buffer(&BufferDesc::new(64, Heap::DeviceLocal))?;
/// assert!(buffer.read_u32(0).is_err()); // the CPU may not read device-local memory
/// buffer.tools().debug_fill(7)?;
/// assert_eq!(buffer.tools().debug_read_u32(60)?, 7);
/// # Ok::<(), pipefence::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BufferTools<'a> {
    buffer: &'a Buffer,
}

impl BufferTools<'_> {
    /// Reads the u32 at `offset` whatever the heap (H4; the scenario's `expect`). Errors:
    /// InvalidArg for a misaligned or out-of-range offset.
    pub fn debug_read_u32(&self, offset: u64) -> Result<u32> {
        self.buffer
            .check_range("debug_read_u32", offset, Width::W32)?;
        Ok(self.buffer.core().load32(offset).unwrap_or(0))
    }

    /// Reads the u64 at `offset` (8-byte aligned) whatever the heap (H4).
    pub fn debug_read_u64(&self, offset: u64) -> Result<u64> {
        self.buffer
            .check_range("debug_read_u64", offset, Width::W64)?;
        Ok(self.buffer.core().load64(offset).unwrap_or(0))
    }

    /// Reads `n` u32 elements from `offset` whatever the heap, appending them to `out`: what
    /// `n` calls of [`debug_read_u32`](Self::debug_read_u32) read, in one pass (the
    /// scenario's `expect count=`). Errors: InvalidArg for a misaligned offset or a range past
    /// the end, reading nothing.
    pub fn debug_read_u32s(&self, offset: u64, n: usize, out: &mut Vec<u32>) -> Result<()> {
        self.check_elements("debug_read_u32s", offset, n, Width::W32)?;
        self.buffer
            .core()
            .read_words32((offset / 4) as usize, n, out);
        Ok(())
    }

    /// Reads `n` u64 elements from `offset` (8-byte aligned) whatever the heap, appending them
    /// to `out`, as [`debug_read_u32s`](Self::debug_read_u32s) does for u32s.
    pub fn debug_read_u64s(&self, offset: u64, n: usize, out: &mut Vec<u64>) -> Result<()> {
        self.check_elements("debug_read_u64s", offset, n, Width::W64)?;
        let mut halves = Vec::with_capacity(n.saturating_mul(2));
        self.buffer
            .core()
            .read_words32((offset / 4) as usize, n * 2, &mut halves);
        out.extend(
            halves
                .chunks_exact(2)
                .map(|p| u64::from(p[0]) | (u64::from(p[1]) << 32)),
        );
        Ok(())
    }

    /// Checks that `n` elements of `width` from `offset` are aligned and inside the buffer.
    fn check_elements(&self, what: &str, offset: u64, n: usize, width: Width) -> Result<()> {
        self.buffer.check_range(what, offset, width)?;
        if n > 1 {
            let last = (n as u64 - 1)
                .checked_mul(width.bytes())
                .and_then(|d| offset.checked_add(d))
                .unwrap_or(!(width.bytes() - 1));
            self.buffer.check_range(what, last, width)?;
        }
        Ok(())
    }

    /// Writes the u32 at `offset` whatever the heap and wakes the waiters on it (H4).
    pub fn debug_write_u32(&self, offset: u64, value: u32) -> Result<()> {
        self.buffer
            .check_range("debug_write_u32", offset, Width::W32)?;
        let core = self.buffer.core();
        core.store32(offset, value);
        self.buffer
            .device_shared()
            .watches
            .notify_word(core.base + offset);
        Ok(())
    }

    /// Stores `value` into every u32 element, whatever the heap (H4; the scenario's `init`),
    /// and wakes the waiters on the buffer.
    pub fn debug_fill(&self, value: u32) -> Result<()> {
        let core = self.buffer.core();
        core.fill32(0, core.size, value);
        self.buffer
            .device_shared()
            .watches
            .notify_range(core.base, core.end());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::footprint::{self, Kind, Obj};
    use crate::{Device, DeviceDesc};

    /// D4 (`docs/exploration.md`, "The clock"): a program's reading of the clock is part of
    /// what it computes and writes the clock in a reducing exploration's footprint; a tool's
    /// reading (the scenario runner's elapsed time at the end of every run) is bookkeeping and
    /// records nothing, or every search would have the clock in its relation.
    #[test]
    fn d4_a_tools_reading_of_the_clock_is_not_a_program_reading() {
        let device = Device::new(DeviceDesc::default()).expect("a device");
        footprint::start();
        let tools = device.tools().clock_ns();
        assert!(footprint::take().accesses().is_empty());
        footprint::start();
        let program = device.clock_ns();
        assert_eq!(footprint::take().accesses(), &[(Obj::Clock, Kind::Write)]);
        assert!(program >= tools);
    }
}
