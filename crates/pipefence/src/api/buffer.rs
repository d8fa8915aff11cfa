//! Buffers (M1, M2, M4, H3): CPU access by heap rules, atomic views and host memory-value
//! waits. Access whatever the heap, for tools (H4), is in [`tools`](super::tools).

use crate::command::{Comparison, Width};
use crate::driver::Cond;
use crate::error::{Error, Object, Result, Waited};
use crate::memory::{BufferCore, Heap};
use crate::runtime::DeviceShared;
use crate::sync::shim::{AtomicU64, Ordering};
use crate::sync::WaitOutcome;
use crate::types::ValueCondition;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

/// How to create a [`Buffer`].
#[derive(Debug, Clone, Default)]
pub struct BufferDesc {
    /// Size in bytes: a positive multiple of 4.
    pub size: u64,
    /// The heap (M1). Default: DeviceLocal.
    pub heap: Heap,
    /// The u32 stored in every element at creation. Default 0.
    pub init: u32,
    /// A name for errors and reports (`buffer#N` if empty).
    pub name: String,
}

impl BufferDesc {
    /// A buffer of `size` bytes in `heap`.
    pub fn new(size: u64, heap: Heap) -> Self {
        BufferDesc {
            size,
            heap,
            ..BufferDesc::default()
        }
    }

    /// The same, named.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// The same, with every u32 element initialised to `init`.
    pub fn with_init(mut self, init: u32) -> Self {
        self.init = init;
        self
    }
}

#[derive(Debug)]
struct BufferHandle {
    core: Arc<BufferCore>,
    device: Arc<DeviceShared>,
}

impl Drop for BufferHandle {
    fn drop(&mut self) {
        self.device.release_buffer(self.core.base);
    }
}

/// A buffer of device memory (`ID3D12Resource`). Cloning gives another handle; when the last
/// handle is dropped the buffer is unmapped once the work submitted before that has completed
/// (Q8: submitted work keeps the buffers it uses alive); later GPU accesses to it fault (M3).
#[doc(alias = "ID3D12Resource")]
#[derive(Debug, Clone)]
pub struct Buffer {
    inner: Arc<BufferHandle>,
}

/// The kind of CPU access, for errors.
#[derive(Clone, Copy)]
enum Access {
    Read,
    Write,
}

impl Buffer {
    pub(crate) fn new(core: Arc<BufferCore>, device: Arc<DeviceShared>) -> Self {
        Buffer {
            inner: Arc::new(BufferHandle { core, device }),
        }
    }

    /// The GPU virtual address of byte 0 (never 0, 256-byte aligned, M1).
    #[doc(alias = "GetGPUVirtualAddress")]
    pub fn gpu_address(&self) -> u64 {
        self.inner.core.base
    }

    /// The GPU virtual address of byte `offset` (not checked against the size).
    pub fn address(&self, offset: u64) -> u64 {
        self.inner.core.base.wrapping_add(offset)
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.inner.core.size
    }

    /// The heap.
    pub fn heap(&self) -> Heap {
        self.inner.core.heap
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.inner.core.name
    }

    fn check(&self, what: &str, offset: u64, width: Width, access: Access) -> Result<()> {
        self.check_heap(what, offset, access)?;
        self.check_range(what, offset, width)
    }

    /// Checks that the heap allows the CPU `access`.
    fn check_heap(&self, what: &str, offset: u64, access: Access) -> Result<()> {
        let core = &self.inner.core;
        let allowed = match access {
            Access::Read => core.heap.cpu_readable(),
            Access::Write => core.heap.cpu_writable(),
        };
        if !allowed {
            return Err(Error::invalid_call(
                Object::Buffer(core.name.to_string()),
                Some(offset),
                format!(
                    "buffer `{}`: {what} at offset {offset:#x}: the CPU may not {} {} memory",
                    core.name,
                    match access {
                        Access::Read => "read",
                        Access::Write => "write",
                    },
                    core.heap
                ),
            ));
        }
        Ok(())
    }

    /// The buffer's memory, for [`BufferTools`](super::tools::BufferTools).
    pub(super) fn core(&self) -> &Arc<BufferCore> {
        &self.inner.core
    }

    /// The device the buffer belongs to.
    pub(super) fn device_shared(&self) -> &Arc<DeviceShared> {
        &self.inner.device
    }

    /// Checks that `offset` is aligned for `width` and inside the buffer (what every access,
    /// heap-checked or not, needs).
    pub(super) fn check_range(&self, what: &str, offset: u64, width: Width) -> Result<()> {
        let core = &self.inner.core;
        if !offset.is_multiple_of(width.bytes()) {
            return Err(Error::invalid_arg(
                Object::Buffer(core.name.to_string()),
                Some(offset),
                format!(
                    "buffer `{}`: {what}: offset {offset:#x} is not {}-byte aligned",
                    core.name,
                    width.bytes()
                ),
            ));
        }
        if !core.contains(offset, width.bytes()) {
            return Err(Error::invalid_arg(
                Object::Buffer(core.name.to_string()),
                Some(offset),
                format!(
                "buffer `{}`: {what}: offset {offset:#x} + {} bytes is outside the buffer ({} bytes)",
                core.name,
                width.bytes(),
                core.size
            )));
        }
        Ok(())
    }

    /// Records a host write of `value` at `offset` for reports and traces; called before the
    /// store, so a waiter the write releases always finds its writer.
    fn record_host_write(&self, offset: u64, width: Width, value: u64) {
        let dev = &self.inner.device;
        let address = self.inner.core.base + offset;
        dev.record_host_write(address, width.bytes());
        if dev.trace_sink().is_some() {
            let now = dev.now_ns();
            dev.record_trace_write(
                address,
                crate::sync::Writer::Host {
                    host: crate::host_names::current_id(),
                },
                now,
                "cpu-write",
                value,
            );
            dev.trace_host(
                || format!("cpu-write {}+{offset}", self.inner.core.name),
                crate::trace::SliceKind::Host,
                now,
            );
        }
    }

    /// Wakes the GPU and host waiters on the word just written (M4).
    fn notify_host_write(&self, offset: u64) {
        self.inner
            .device
            .watches
            .notify_word(self.inner.core.base + offset);
    }

    /// Reads the u32 at `offset` (4-byte aligned). Errors: InvalidCall on DeviceLocal memory,
    /// InvalidArg for a misaligned or out-of-range offset. Works after removal (M4).
    pub fn read_u32(&self, offset: u64) -> Result<u32> {
        self.check("read_u32", offset, Width::W32, Access::Read)?;
        self.inner.device.yield_point();
        self.model_read("read_u32", offset, Width::W32);
        Ok(self.inner.core.load32(offset).unwrap_or(0))
    }

    /// Reads the u64 at `offset` (8-byte aligned). Errors as [`read_u32`](Self::read_u32).
    pub fn read_u64(&self, offset: u64) -> Result<u64> {
        self.check("read_u64", offset, Width::W64, Access::Read)?;
        self.inner.device.yield_point();
        self.model_read("read_u64", offset, Width::W64);
        Ok(self.inner.core.load64(offset).unwrap_or(0))
    }

    /// Writes the u32 at `offset` and wakes GPU and host waiters on it (M4). Errors: InvalidCall
    /// on DeviceLocal or Readback memory, InvalidArg for a misaligned or out-of-range offset.
    pub fn write_u32(&self, offset: u64, value: u32) -> Result<()> {
        self.check("write_u32", offset, Width::W32, Access::Write)?;
        self.inner.device.yield_point();
        self.record_host_write(offset, Width::W32, u64::from(value));
        self.inner.device.with_model(|m| {
            m.host_write("write_u32", self.inner.core.base + offset, Width::W32);
        });
        self.inner.core.store32(offset, value);
        self.notify_host_write(offset);
        Ok(())
    }

    /// Writes the u64 at `offset` (8-byte aligned) and wakes waiters on it (M4).
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<()> {
        self.check("write_u64", offset, Width::W64, Access::Write)?;
        self.inner.device.yield_point();
        self.record_host_write(offset, Width::W64, value);
        self.inner.device.with_model(|m| {
            m.host_write("write_u64", self.inner.core.base + offset, Width::W64);
        });
        self.inner.core.store64(offset, value);
        self.notify_host_write(offset);
        Ok(())
    }

    /// Writes `values` to the consecutive u32 elements from `offset` (4-byte aligned) and wakes
    /// the GPU and host waiters on every word written (M4): the same as a `write_u32` of each
    /// element in order, but one call, with the heap, alignment and range checked once before
    /// anything is written (an error writes nothing), one scheduling point on the deterministic
    /// driver, and one host value write of the whole range for the hazard analysis (D5). An
    /// empty slice writes nothing. Errors: those of [`write_u32`](Self::write_u32), the range
    /// being `offset + 4 * values.len()` bytes.
    ///
    /// ```
    /// use pipefence::{BufferDesc, Device, DeviceDesc, Heap};
    /// let device = Device::new(DeviceDesc::default())?;
    /// let b = device.create_buffer(&BufferDesc::new(64, Heap::Shared))?;
    /// b.write_slice(8, &[1, 2, 3])?;
    /// let mut out = [0u32; 4];
    /// b.read_slice(4, &mut out)?;
    /// assert_eq!(out, [0, 1, 2, 3]);
    /// # Ok::<(), pipefence::Error>(())
    /// ```
    #[doc(alias = "WriteToSubresource")]
    pub fn write_slice(&self, offset: u64, values: &[u32]) -> Result<()> {
        let len = self.check_slice("write_slice", offset, values.len(), Access::Write)?;
        self.inner.device.yield_point();
        if values.is_empty() {
            return Ok(());
        }
        let core = &self.inner.core;
        for (i, v) in values.iter().enumerate() {
            self.record_host_write(offset + 4 * i as u64, Width::W32, u64::from(*v));
        }
        self.inner.device.with_model(|m| {
            m.host_write_span("write_slice", core.base + offset, core.base + offset + len);
        });
        for (i, v) in values.iter().enumerate() {
            core.store32(offset + 4 * i as u64, *v);
        }
        self.inner
            .device
            .watches
            .notify_range(core.base + offset, core.base + offset + len);
        Ok(())
    }

    /// Reads the consecutive u32 elements from `offset` (4-byte aligned) into `out`, by the
    /// heap rules of [`read_u32`](Self::read_u32): the range (`offset + 4 * out.len()` bytes)
    /// and heap checked once before anything is read (an error leaves `out` unchanged), one
    /// scheduling point, one host read of the whole range for the hazard analysis. Each element
    /// is one atomic read (M2); the slice as a whole is not one snapshot while the GPU writes.
    /// Works after removal (M4). Errors: those of `read_u32`.
    #[doc(alias = "ReadFromSubresource")]
    pub fn read_slice(&self, offset: u64, out: &mut [u32]) -> Result<()> {
        let len = self.check_slice("read_slice", offset, out.len(), Access::Read)?;
        self.inner.device.yield_point();
        if out.is_empty() {
            return Ok(());
        }
        let core = &self.inner.core;
        self.inner.device.with_model(|m| {
            m.host_read_span("read_slice", core.base + offset, core.base + offset + len);
        });
        for (i, x) in out.iter_mut().enumerate() {
            *x = core.load32(offset + 4 * i as u64).unwrap_or(0);
        }
        Ok(())
    }

    /// The checks of a slice access of `count` u32 elements at `offset`: heap, alignment and
    /// range. Returns the length in bytes.
    fn check_slice(&self, what: &str, offset: u64, count: usize, access: Access) -> Result<u64> {
        self.check_heap(what, offset, access)?;
        if count > 0 {
            self.check_range(what, offset, Width::W32)?;
        } else if !offset.is_multiple_of(4) || offset > self.size() {
            // An empty slice may start at the end of the buffer, not past it.
            return self.check_range(what, offset, Width::W32).map(|_| 0);
        }
        let core = &self.inner.core;
        let len = (count as u64)
            .checked_mul(4)
            .filter(|l| core.contains(offset, *l));
        len.ok_or_else(|| {
            Error::invalid_arg(
                Object::Buffer(core.name.to_string()),
                Some(offset),
                format!(
                    "buffer `{}`: {what}: offset {offset:#x} + {} bytes ({count} u32 elements) is \
                     outside the buffer ({} bytes)",
                    core.name,
                    (count as u64).saturating_mul(4),
                    core.size
                ),
            )
        })
    }

    /// An atomic view of the device word at `offset` (8-byte aligned): the device's own
    /// `AtomicU64`, for CPU code that spins or uses read-modify-writes. The device cannot see
    /// writes through a view, so while any view exists blocked engines poll with a backoff
    /// (D8). Needs a heap the CPU may write (Upload or Shared).
    pub fn atomic_u64(&self, offset: u64) -> Result<AtomicWordView> {
        self.check("atomic_u64", offset, Width::W64, Access::Write)?;
        self.inner.device.views.fetch_add(1, Ordering::SeqCst);
        Ok(AtomicWordView {
            buffer: self.clone(),
            offset,
        })
    }

    /// Blocks until `(u32 at offset & mask) cmp reference` holds, for at most `timeout` (H3):
    /// woken by the writes that may satisfy it. Errors: those of [`read_u32`](Self::read_u32),
    /// InvalidArg for `Comparison::None`, Timeout, DeviceRemoved.
    #[doc(alias = "cpu-poll")]
    pub fn wait_u32(
        &self,
        offset: u64,
        cmp: Comparison,
        reference: u32,
        mask: u32,
        timeout: Duration,
    ) -> Result<()> {
        self.check("wait_u32", offset, Width::W32, Access::Read)?;
        self.wait_value(
            offset,
            Width::W32,
            cmp,
            u64::from(reference),
            u64::from(mask),
            timeout,
        )
    }

    /// The 64-bit form of [`wait_u32`](Self::wait_u32) (`offset` 8-byte aligned).
    pub fn wait_u64(
        &self,
        offset: u64,
        cmp: Comparison,
        reference: u64,
        mask: u64,
        timeout: Duration,
    ) -> Result<()> {
        self.check("wait_u64", offset, Width::W64, Access::Read)?;
        self.wait_value(offset, Width::W64, cmp, reference, mask, timeout)
    }

    fn model_read(&self, op: &'static str, offset: u64, width: Width) {
        self.inner.device.with_model(|m| {
            m.host_read(op, self.inner.core.base + offset, width);
        });
    }

    fn load(&self, offset: u64, width: Width) -> u64 {
        self.inner.core.load(offset, width).unwrap_or(0)
    }

    #[allow(clippy::too_many_arguments)]
    fn wait_value(
        &self,
        offset: u64,
        width: Width,
        cmp: Comparison,
        reference: u64,
        mask: u64,
        timeout: Duration,
    ) -> Result<()> {
        let t0 = self.inner.device.now_ns();
        let cond = ValueCondition {
            width,
            cmp,
            reference,
            mask,
        };
        let traced = self.inner.device.trace_sink().is_some();
        let blocked = traced && !cond.holds(self.load(offset, width));
        let r = self.wait_value_inner(offset, width, cmp, reference, mask, timeout);
        if traced && r.is_ok() {
            let dev = &self.inner.device;
            dev.trace_host_sync(
                dev.trace_releaser(self.inner.core.base + offset, &cond),
                crate::trace::SyncKind::HostPoll,
                blocked,
            );
        }
        if r.is_ok() {
            self.inner.device.with_model(|m| {
                let op = match width {
                    Width::W32 => "wait_u32",
                    Width::W64 => "wait_u64",
                };
                m.host_wait(op, self.inner.core.base + offset, width);
            });
        }
        self.inner.device.trace_host(
            || {
                format!(
                    "poll {}+{offset} ({}) {} {reference}",
                    self.inner.core.name,
                    width.type_name(),
                    cmp.symbol()
                )
            },
            crate::trace::SliceKind::Blocked,
            t0,
        );
        r
    }

    fn wait_value_inner(
        &self,
        offset: u64,
        width: Width,
        cmp: Comparison,
        reference: u64,
        mask: u64,
        timeout: Duration,
    ) -> Result<()> {
        let core = &self.inner.core;
        let dev = &self.inner.device;
        let what = || {
            format!(
                "buffer `{}`+{offset:#x} ({}) & {mask:#x} {} {reference}",
                core.name,
                width.type_name(),
                cmp.symbol()
            )
        };
        if cmp == Comparison::None {
            return Err(Error::invalid_arg(
                Object::Buffer(core.name.to_string()),
                None,
                format!("wait_{}: comparison none is invalid", width.type_name()),
            ));
        }
        let o = dev.block(
            Cond::Memory {
                buffer: core.clone(),
                offset,
                cond: ValueCondition {
                    width,
                    cmp,
                    reference,
                    mask,
                },
            },
            Some(timeout),
        );
        match o {
            WaitOutcome::Reached => Ok(()),
            WaitOutcome::Removed => Err(dev.removed_error(format!("wait for {}", what()))),
            WaitOutcome::TimedOut => {
                let value = self.load(offset, width);
                let virtual_time = dev.virtual_time();
                let message = if virtual_time {
                    format!(
                        "wait for {}: nothing can run and nothing else will write it (value \
                         {value:#x})",
                        what()
                    )
                } else {
                    format!("wait for {} after {timeout:?} (value {value:#x})", what())
                };
                Err(Error::timeout(
                    Waited::Memory {
                        buffer: core.name.to_string(),
                        offset,
                        condition: ValueCondition {
                            width,
                            cmp,
                            reference,
                            mask,
                        },
                        value,
                    },
                    (!virtual_time).then_some(timeout),
                    message,
                ))
            }
        }
    }
}

/// An atomic view of one device word ([`Buffer::atomic_u64`]). Dereferences to the device's
/// own `AtomicU64`. While it exists, blocked engines poll for changes (D8).
#[derive(Debug)]
pub struct AtomicWordView {
    buffer: Buffer,
    offset: u64,
}

impl Deref for AtomicWordView {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        match self.buffer.inner.core.word_at(self.offset) {
            Some(w) => w,
            // Checked at creation; the buffer cannot shrink.
            None => unreachable!("atomic view offset checked at creation"),
        }
    }
}

impl Drop for AtomicWordView {
    fn drop(&mut self) {
        self.buffer
            .inner
            .device
            .views
            .fetch_sub(1, Ordering::SeqCst);
    }
}
