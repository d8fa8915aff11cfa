//! Devices: creation, the objects they create, removal and its report, hazards.

use crate::buffer::BufferObj;
use crate::handle::*;
use crate::list::ListObj;
use crate::queue::{EventObj, FenceObj, QueueObj, Registration};
use crate::types::*;
use pipefence::{
    BufferDesc, CommandListDesc, Device, DeviceDesc, Driver, FenceDesc, Heap, MemoryModel,
    MultipleFenceWaitFlags, QueueDesc, QueueKind, RemovalReason,
};
use std::ffi::c_char;
use std::time::Duration;

pub(crate) struct DeviceObj(pub(crate) Device);

impl Object for DeviceObj {
    const KIND: Kind = Kind::Device;
}

/// The device behind `handle`, involved in the call (a panic removes it).
pub(crate) fn device(ctx: &mut Ctx, handle: *const PipefenceDevice, what: &str) -> Res<Device> {
    let d = get::<DeviceObj, _>(handle, what)?.0.clone();
    ctx.involve(&d);
    Ok(d)
}

/// A millisecond timeout; `INFINITE` is a very long one.
pub(crate) fn timeout(ms: u32) -> Duration {
    if ms == PIPEFENCE_INFINITE {
        Duration::from_secs(1 << 32)
    } else {
        Duration::from_millis(u64::from(ms))
    }
}

/// The Rust description for `d`.
pub(crate) fn device_desc(d: &PIPEFENCE_DEVICE_DESC) -> Res<DeviceDesc> {
    let mut desc = DeviceDesc::default();
    if d.WatchdogTimeoutMs != 0 {
        desc.watchdog_timeout = Duration::from_millis(u64::from(d.WatchdogTimeoutMs));
    }
    desc.driver = match d.Driver {
        PIPEFENCE_DRIVER_THREADED => Driver::Threaded,
        PIPEFENCE_DRIVER_DETERMINISTIC => {
            pipefence::explore::deterministic_desc(&DeviceDesc::default(), d.Seed).driver
        }
        other => {
            return Err(Fail::arg(format!(
                "PIPEFENCE_DEVICE_DESC: Driver {other} is not PIPEFENCE_DRIVER_THREADED (0) or \
                 PIPEFENCE_DRIVER_DETERMINISTIC (1)"
            )))
        }
    };
    desc.memory_model = match d.MemoryModel {
        PIPEFENCE_MEMORY_MODEL_PLAIN => MemoryModel::Plain,
        PIPEFENCE_MEMORY_MODEL_VALIDATE => MemoryModel::Validate,
        PIPEFENCE_MEMORY_MODEL_STRICT => MemoryModel::Strict,
        other => {
            return Err(Fail::arg(format!(
                "PIPEFENCE_DEVICE_DESC: MemoryModel {other} is not PLAIN (0), VALIDATE (1) or \
                 STRICT (2)"
            )))
        }
    };
    desc.workers = d.Workers as usize;
    if d.FenceWaitTimeoutMs != 0 {
        desc.fence_wait_timeout = Some(Duration::from_millis(u64::from(d.FenceWaitTimeoutMs)));
    }
    if d.FifoDepth != 0 {
        desc.fifo_depth = d.FifoDepth as usize;
    }
    Ok(desc)
}

/// The queue kind for a `D3D12_COMMAND_LIST_TYPE`.
pub(crate) fn queue_kind(ty: u32, what: &str) -> Res<QueueKind> {
    match ty {
        PIPEFENCE_COMMAND_LIST_TYPE_DIRECT => Ok(QueueKind::Direct),
        PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE => Ok(QueueKind::Compute),
        PIPEFENCE_COMMAND_LIST_TYPE_COPY => Ok(QueueKind::Copy),
        other => Err(Fail::arg(format!(
            "{what}: command list type {other} is not DIRECT (0), COMPUTE (2) or COPY (3)"
        ))),
    }
}

/// Sets `*out` to null (`E_POINTER` if `out` is null), before a call that creates an object.
///
/// # Safety
/// `out` is null or valid for a write.
pub(crate) unsafe fn clear_out<T>(out: *mut *mut T, what: &str) -> Res {
    // SAFETY: forwarded from the caller.
    unsafe { write_out(out, std::ptr::null_mut(), what) }
}

/// Registers `obj` and stores its handle in `*out` (checked non-null by [`clear_out`]).
///
/// # Safety
/// `out` is valid for a write.
pub(crate) unsafe fn hand_out<O: Object, T>(
    obj: O,
    out: *mut *mut T,
    what: &str,
) -> Res<PIPEFENCE_HRESULT> {
    let h = register(obj).cast::<T>();
    // SAFETY: forwarded from the caller.
    unsafe { write_out(out, h, what)? };
    Ok(PIPEFENCE_S_OK)
}

/// Creates a device (`D3D12CreateDevice`). `desc` may be null (every default: the threaded
/// driver, a 2 s watchdog). On success `*device` holds one reference: release it with
/// `pipefence_device_release`. Its queues, fences and command lists keep it alive (as
/// D3D12's device children do), so releasing the device first is allowed: its threads stop
/// when the last reference to it or to one of those is gone.
///
/// # Safety
/// `desc` is null or points to a `PIPEFENCE_DEVICE_DESC`; `device` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_create(
    desc: *const PIPEFENCE_DEVICE_DESC,
    device: *mut *mut PipefenceDevice,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_create";
    call(what, |_| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(device, what)? };
        let d = if desc.is_null() {
            PIPEFENCE_DEVICE_DESC::default()
        } else {
            // SAFETY: non-null, and the caller promises it points to a description.
            unsafe { desc.read() }
        };
        let dev = Device::new(device_desc(&d)?)?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(DeviceObj(dev), device, what) }
    })
}

/// Adds a reference to a device; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_device_add_ref(device: *mut PipefenceDevice) -> u32 {
    add_ref::<DeviceObj, _>(device)
}

/// Drops a reference to a device; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_device_release(device: *mut PipefenceDevice) -> u32 {
    release::<DeviceObj, _>(device)
}

/// Creates a command queue (`CreateCommandQueue`) of `type` (`PIPEFENCE_COMMAND_LIST_TYPE_*`)
/// named `name` (may be null: `queue#N`) in reports. `*queue` holds one reference.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `queue` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_create_queue(
    device: *mut PipefenceDevice,
    r#type: u32,
    name: *const c_char,
    queue: *mut *mut PipefenceQueue,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_create_queue";
    call(what, |ctx| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(queue, what)? };
        let d = self::device(ctx, device, what)?;
        let kind = queue_kind(r#type, what)?;
        // SAFETY: the caller's promise.
        let name = unsafe { c_str(name) }.unwrap_or_default();
        let q = d.create_queue(&QueueDesc::new(kind, &name))?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(QueueObj(q), queue, what) }
    })
}

/// Creates a fence (`CreateFence`) at `initial_value`. `flags`: `PIPEFENCE_FENCE_FLAG_NONE`
/// (D3D12's sharing flags 1, 2, 4 are accepted and have no effect). `name` may be null.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `fence` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_create_fence(
    device: *mut PipefenceDevice,
    initial_value: u64,
    flags: u32,
    name: *const c_char,
    fence: *mut *mut PipefenceFence,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_create_fence";
    call(what, |ctx| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(fence, what)? };
        let d = self::device(ctx, device, what)?;
        if flags & !7 != 0 {
            return Err(Fail::arg(format!(
                "{what}: unknown D3D12_FENCE_FLAGS {flags:#x}"
            )));
        }
        // SAFETY: the caller's promise.
        let name = unsafe { c_str(name) }.unwrap_or_default();
        let f = d.create_fence(&FenceDesc::new(initial_value).named(&name))?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(FenceObj(f, d), fence, what) }
    })
}

/// The heap for a `D3D12_HEAP_TYPE` (or pipefence's shared heap).
pub(crate) fn heap(ty: u32, what: &str) -> Res<Heap> {
    match ty {
        PIPEFENCE_HEAP_TYPE_DEFAULT => Ok(Heap::DeviceLocal),
        PIPEFENCE_HEAP_TYPE_UPLOAD => Ok(Heap::Upload),
        PIPEFENCE_HEAP_TYPE_READBACK => Ok(Heap::Readback),
        PIPEFENCE_HEAP_TYPE_CUSTOM
        | PIPEFENCE_HEAP_TYPE_GPU_UPLOAD
        | PIPEFENCE_HEAP_TYPE_SHARED => Ok(Heap::Shared),
        other => Err(Fail::arg(format!(
            "{what}: heap type {other} is not DEFAULT (1), UPLOAD (2), READBACK (3), CUSTOM (4), \
             GPU_UPLOAD (5) or PIPEFENCE_HEAP_TYPE_SHARED ({PIPEFENCE_HEAP_TYPE_SHARED:#x})"
        ))),
    }
}

/// Creates a buffer of `size` bytes (a positive multiple of 4) in `heap_type`, zeroed, at a
/// fresh GPU virtual address (pipefence's short form of `CreateCommittedResource`).
///
/// # Safety
/// `name` is null or a NUL-terminated string; `buffer` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_create_buffer(
    device: *mut PipefenceDevice,
    size: u64,
    heap_type: u32,
    name: *const c_char,
    buffer: *mut *mut PipefenceBuffer,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_create_buffer";
    call(what, |ctx| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(buffer, what)? };
        let d = self::device(ctx, device, what)?;
        let heap = heap(heap_type, what)?;
        // SAFETY: the caller's promise.
        let name = unsafe { c_str(name) }.unwrap_or_default();
        let b = d.create_buffer(&BufferDesc::new(size, heap).named(&name))?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(BufferObj(b), buffer, what) }
    })
}

/// Creates an open command list (`CreateCommandList`) for queues of `type`. `name` may be
/// null. A list is recorded by one thread at a time and must not be recorded while another
/// thread submits it (D3D12's rule; here it is a blocking lock).
///
/// # Safety
/// `name` is null or a NUL-terminated string; `list` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_create_command_list(
    device: *mut PipefenceDevice,
    r#type: u32,
    name: *const c_char,
    list: *mut *mut PipefenceCommandList,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_create_command_list";
    call(what, |ctx| {
        // SAFETY: the caller's promise.
        unsafe { clear_out(list, what)? };
        let d = self::device(ctx, device, what)?;
        let kind = queue_kind(r#type, what)?;
        // SAFETY: the caller's promise.
        let name = unsafe { c_str(name) }.unwrap_or_default();
        let l = d.create_command_list(&CommandListDesc::new(kind, &name))?;
        // SAFETY: checked by clear_out.
        unsafe { hand_out(ListObj::new(d, l), list, what) }
    })
}

/// `SetEventOnMultipleFenceCompletion`: sets `event` when all (`flags` ALL/NONE) or any
/// (ANY) of the `count` fences reach their values; a null `event` blocks until then (and
/// returns `S_OK` after removal, like the single-fence form).
///
/// # Safety
/// `fences` and `values` are valid for reads of `count` elements.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_set_event_on_multiple_fence_completion(
    device: *mut PipefenceDevice,
    fences: *const *mut PipefenceFence,
    values: *const u64,
    count: u32,
    flags: u32,
    event: *mut PipefenceEvent,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_set_event_on_multiple_fence_completion";
    call(what, |ctx| {
        let d = self::device(ctx, device, what)?;
        // SAFETY: the caller's promise.
        let fs = unsafe { slice(fences, count as usize, what)? };
        // SAFETY: the caller's promise.
        let vs = unsafe { slice(values, count as usize, what)? };
        let objs = fs
            .iter()
            .enumerate()
            .map(|(i, f)| get::<FenceObj, _>(*f, &format!("{what}: fence {i}")))
            .collect::<Res<Vec<_>>>()?;
        let refs: Vec<&pipefence::Fence> = objs.iter().map(|o| &o.0).collect();
        let ev = if event.is_null() {
            None
        } else {
            Some(get::<EventObj, _>(event, what)?)
        };
        d.set_event_on_multiple_fence_completion(
            &refs,
            vs,
            MultipleFenceWaitFlags(flags),
            ev.as_ref().map(|e| &e.event),
        )?;
        if let Some(e) = &ev {
            e.scheduled_on(&d, || Registration::Fences {
                device: d.clone(),
                fences: refs.iter().map(|f| (*f).clone()).collect(),
                values: vs.to_vec(),
                any: flags == PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_ANY,
            });
        }
        Ok(PIPEFENCE_S_OK)
    })
}

/// `GetDeviceRemovedReason`: `S_OK` while the device works, `DXGI_ERROR_DEVICE_HUNG` after
/// a hang or a page fault, `DXGI_ERROR_DEVICE_REMOVED` after `pipefence_device_remove`.
#[no_mangle]
pub extern "C" fn pipefence_device_get_removed_reason(
    device: *mut PipefenceDevice,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_get_removed_reason";
    call(what, |ctx| {
        let d = self::device(ctx, device, what)?;
        Ok(match d.removed_reason() {
            None => PIPEFENCE_S_OK,
            Some(RemovalReason::Requested) => PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED,
            Some(r) => r.hresult() as PIPEFENCE_HRESULT,
        })
    })
}

/// Removes the device on purpose (`ID3D12Device5::RemoveDevice`): fences read `UINT64_MAX`,
/// waiters are released, later submissions fail with `DXGI_ERROR_DEVICE_REMOVED`.
#[no_mangle]
pub extern "C" fn pipefence_device_remove(device: *mut PipefenceDevice) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_remove";
    call(what, |ctx| {
        self::device(ctx, device, what)?.remove();
        Ok(PIPEFENCE_S_OK)
    })
}

/// The removal report (why, every stuck queue, the cycle, the fault) as text or JSON
/// (`PIPEFENCE_REPORT_FORMAT_*`), copied into `buf` as `pipefence_last_error_message`
/// does. `S_FALSE` and an empty text while the device works.
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes; `needed` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_get_removal_report(
    device: *mut PipefenceDevice,
    format: u32,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_get_removal_report";
    call(what, |ctx| {
        let d = self::device(ctx, device, what)?;
        let report = d.removal_report();
        let text = match &report {
            None => String::new(),
            Some(r) => report_text(r, format, what)?,
        };
        // SAFETY: the caller's promise.
        let hr = unsafe { copy_text(&text, buf, len, needed)? };
        Ok(if report.is_none() && hr == PIPEFENCE_S_OK {
            PIPEFENCE_S_FALSE
        } else {
            hr
        })
    })
}

/// A removal report in `format`.
pub(crate) fn report_text(r: &pipefence::RemovalReport, format: u32, what: &str) -> Res<String> {
    match format {
        PIPEFENCE_REPORT_FORMAT_TEXT => Ok(r.to_string()),
        PIPEFENCE_REPORT_FORMAT_JSON => serde_json::to_string_pretty(r)
            .map_err(|e| Fail::new(PIPEFENCE_E_FAIL, format!("{what}: {e}"))),
        other => Err(Fail::arg(format!(
            "{what}: format {other} is not TEXT (0) or JSON (1)"
        ))),
    }
}

/// The number of synchronization hazards found so far (validate and strict models; 0 on the
/// plain model or for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_device_get_hazard_count(device: *mut PipefenceDevice) -> u32 {
    let what = "pipefence_device_get_hazard_count";
    call_value(what, 0, |ctx| {
        Ok(u32::try_from(self::device(ctx, device, what)?.hazards().len()).unwrap_or(u32::MAX))
    })
}

/// The hazards found so far, one report per paragraph, copied into `buf`.
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes; `needed` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_device_get_hazards(
    device: *mut PipefenceDevice,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_get_hazards";
    call(what, |ctx| {
        let d = self::device(ctx, device, what)?;
        let text = hazards_text(&d);
        // SAFETY: the caller's promise.
        unsafe { copy_text(&text, buf, len, needed) }
    })
}

pub(crate) fn hazards_text(d: &Device) -> String {
    d.hazards()
        .iter()
        .map(|h| h.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Blocks until every queue of the device is idle, up to `timeout_ms` (`INFINITE` allowed).
/// `PIPEFENCE_WAIT_TIMEOUT_HRESULT` on a timeout, `DXGI_ERROR_DEVICE_REMOVED` after removal.
#[no_mangle]
pub extern "C" fn pipefence_device_wait_idle(
    device: *mut PipefenceDevice,
    timeout_ms: u32,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_device_wait_idle";
    call(what, |ctx| {
        self::device(ctx, device, what)?.wait_idle(timeout(timeout_ms))?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// The message of the last call on this thread that failed, copied into `buf` (`len` bytes,
/// NUL-terminated, truncated if short). Returns the message's length without the NUL.
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pipefence_last_error_message(buf: *mut c_char, len: usize) -> usize {
    let msg = last_error();
    if !buf.is_null() && len > 0 {
        // SAFETY: the caller's promise; copy_text does not fail with a non-null buffer.
        let _ = unsafe { copy_text(&msg, buf, len, std::ptr::null_mut()) };
    }
    msg.len()
}
