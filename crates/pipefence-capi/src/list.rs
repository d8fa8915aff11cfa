//! Command lists: recording (never fails, as in D3D12: an invalid argument is reported by
//! `Close`), closing, resetting.

use crate::buffer::BufferObj;
use crate::handle::*;
use crate::types::*;
use pipefence::{
    CommandList, Comparison, Device, Flush, ImmediateMode, ImmediateWrite, Kernel, KernelContext,
    UserKernel, WaitEngine, WriteSource,
};
use std::ffi::c_char;
use std::sync::{PoisonError, RwLock};

pub(crate) struct ListState {
    pub(crate) list: CommandList,
    /// The first argument that could not be recorded (reported by `Close`).
    invalid: Option<String>,
    /// Commands not recorded because of an invalid argument (for command indices).
    skipped: usize,
    /// The kernel `Dispatch(x, y, z)` launches (`pipefence_list_set_kernel`).
    kernel: Option<Kernel>,
}

pub(crate) struct ListObj {
    device: Device,
    /// Recording takes it for writing, submission for reading.
    pub(crate) state: RwLock<ListState>,
}

impl ListObj {
    pub(crate) fn new(device: Device, list: CommandList) -> Self {
        ListObj {
            device,
            state: RwLock::new(ListState {
                list,
                invalid: None,
                skipped: 0,
                kernel: None,
            }),
        }
    }
}

impl Object for ListObj {
    const KIND: Kind = Kind::CommandList;
}

/// The kernel of a `Dispatch` with no kernel set: an empty shader named `dispatch`.
fn empty_kernel() -> Kernel {
    static EMPTY: std::sync::OnceLock<UserKernel> = std::sync::OnceLock::new();
    Kernel::User(
        EMPTY
            .get_or_init(|| UserKernel::new("dispatch", |_| {}))
            .clone(),
    )
}

/// Records through `f`; an `Err` from it is kept for `Close` (D3D12's deferred validation).
fn record(
    list: *mut PipefenceCommandList,
    what: &str,
    f: impl FnOnce(&mut ListState) -> Result<(), String>,
) -> PIPEFENCE_HRESULT {
    call(what, |ctx| {
        let l = get::<ListObj, _>(list, what)?;
        ctx.involve(&l.device);
        let mut s = l.state.write().unwrap_or_else(PoisonError::into_inner);
        if let Err(msg) = f(&mut s) {
            let index = s.list.commands().len() + s.skipped;
            s.skipped += 1;
            if s.invalid.is_none() {
                s.invalid = Some(format!("command {index} ({what}): {msg}"));
            }
        }
        Ok(PIPEFENCE_S_OK)
    })
}

fn comparison(v: u32) -> Result<Comparison, String> {
    Comparison::from_d3d12_value(v)
        .ok_or_else(|| format!("D3D12_COMPARISON_FUNC {v} is not one of 0..=8"))
}

fn wait_engine(flags: u32) -> Result<WaitEngine, String> {
    match flags {
        PIPEFENCE_WAIT_FLAG_NONE => Ok(WaitEngine::Me),
        PIPEFENCE_WAIT_FLAG_SELECT_ENGINE_PFP => Ok(WaitEngine::Pfp),
        other => Err(format!(
            "D3D12XBOX_WAIT_FLAGS {other:#x} is not NONE (0) or SELECT_ENGINE_PFP (1)"
        )),
    }
}

fn write_source(flags: u32) -> Result<WriteSource, String> {
    match flags {
        PIPEFENCE_WRITE_VALUE_FLAG_NONE => Ok(WriteSource::Value),
        PIPEFENCE_WRITE_VALUE_FLAG_GPU_TIMESTAMP => Ok(WriteSource::GpuTimestamp),
        PIPEFENCE_WRITE_VALUE_FLAG_SYSTEM_TIMESTAMP => Ok(WriteSource::SystemTimestamp),
        other => Err(format!(
            "write-value flags {other:#x} are not NONE (0), GPU_TIMESTAMP (1) or \
             SYSTEM_TIMESTAMP (2)"
        )),
    }
}

fn kernel(k: &PIPEFENCE_KERNEL) -> Result<Kernel, String> {
    match k.Type {
        PIPEFENCE_KERNEL_FILL => Ok(Kernel::fill(k.Dst, k.Value)),
        PIPEFENCE_KERNEL_ADD => Ok(Kernel::add(k.Dst, k.Src, k.Value)),
        PIPEFENCE_KERNEL_SUM => Ok(Kernel::sum(k.Dst, k.Src)),
        PIPEFENCE_KERNEL_SPIN => Ok(Kernel::spin(k.Ns)),
        PIPEFENCE_KERNEL_CALLBACK => {
            let f = k
                .Callback
                .ok_or("a PIPEFENCE_KERNEL_CALLBACK kernel with a null Callback")?;
            let context = KernelData(k.Context);
            let user = UserKernel::new("callback", move |ctx: &mut KernelContext<'_>| {
                let group = (ctx as *mut KernelContext<'_>).cast::<PipefenceKernelContext>();
                // SAFETY: the recorder promised the callback and its context may be called
                // from the shader workers while the list may execute; `group` is valid for
                // the call, as the kernel functions require.
                unsafe { f(group, context.get()) }
            });
            Ok(Kernel::User(if k.Ns == 0 {
                user
            } else {
                user.with_cost_ns(k.Ns)
            }))
        }
        other => Err(format!(
            "kernel type {other} is not FILL (1), ADD (2), SUM (3), SPIN (4) or CALLBACK (5)"
        )),
    }
}

/// A callback kernel's context, shared by the groups that run it.
struct KernelData(*mut std::ffi::c_void);

// SAFETY: PIPEFENCE_KERNEL documents that a callback kernel's context must be safe to use
// from several threads at once; pipefence only passes it on.
unsafe impl Send for KernelData {}
// SAFETY: as above.
unsafe impl Sync for KernelData {}

impl KernelData {
    fn get(&self) -> *mut std::ffi::c_void {
        self.0
    }
}

/// The group behind `ctx`, or `None` for null.
///
/// # Safety
/// `ctx` is null or the context a callback kernel was given, during that call.
unsafe fn group<'a>(ctx: *mut PipefenceKernelContext) -> Option<&'a mut KernelContext<'a>> {
    // SAFETY: by the caller's promise, a non-null ctx is the KernelContext of the running
    // group, borrowed by nothing else during the callback.
    unsafe { ctx.cast::<KernelContext<'a>>().as_mut() }
}

/// The group id of a callback kernel's call (`0..groups`; 0 for null).
///
/// # Safety
/// `ctx` is null or the context the callback was given, during that call.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_group(ctx: *mut PipefenceKernelContext) -> u32 {
    // SAFETY: the caller's promise.
    unsafe { group(ctx) }.map_or(0, |g| g.group())
}

/// Reads the u32 at `address` (4-byte aligned). An invalid access is a page fault (reported
/// when the group returns) and reads 0.
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_read_u32(
    ctx: *mut PipefenceKernelContext,
    address: u64,
) -> u32 {
    // SAFETY: the caller's promise.
    unsafe { group(ctx) }.map_or(0, |g| g.read_u32(address))
}

/// Reads the u64 at `address` (8-byte aligned).
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_read_u64(
    ctx: *mut PipefenceKernelContext,
    address: u64,
) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { group(ctx) }.map_or(0, |g| g.read_u64(address))
}

/// Writes the u32 at `address` (an invalid access is a page fault and writes nothing).
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_write_u32(
    ctx: *mut PipefenceKernelContext,
    address: u64,
    value: u32,
) {
    // SAFETY: the caller's promise.
    if let Some(g) = unsafe { group(ctx) } {
        g.write_u32(address, value);
    }
}

/// Writes the u64 at `address`.
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_write_u64(
    ctx: *mut PipefenceKernelContext,
    address: u64,
    value: u64,
) {
    // SAFETY: the caller's promise.
    if let Some(g) = unsafe { group(ctx) } {
        g.write_u64(address, value);
    }
}

/// Atomically adds `value` to the u32 at `address`; returns the old value.
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_atomic_add_u32(
    ctx: *mut PipefenceKernelContext,
    address: u64,
    value: u32,
) -> u32 {
    // SAFETY: the caller's promise.
    unsafe { group(ctx) }.map_or(0, |g| g.atomic_add_u32(address, value))
}

/// Atomically adds `value` to the u64 at `address`; returns the old value.
///
/// # Safety
/// As `pipefence_kernel_group`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_kernel_atomic_add_u64(
    ctx: *mut PipefenceKernelContext,
    address: u64,
    value: u64,
) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { group(ctx) }.map_or(0, |g| g.atomic_add_u64(address, value))
}

/// The kernel at `k` (`Err` for null).
///
/// # Safety
/// `k` is null or points to a `PIPEFENCE_KERNEL`.
unsafe fn kernel_at(k: *const PIPEFENCE_KERNEL) -> Result<Kernel, String> {
    if k.is_null() {
        return Err("the kernel pointer is null".to_string());
    }
    // SAFETY: non-null and, by the caller's promise, a kernel description.
    kernel(unsafe { &*k })
}

/// Adds a reference to a command list; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_list_add_ref(list: *mut PipefenceCommandList) -> u32 {
    add_ref::<ListObj, _>(list)
}

/// Drops a reference to a command list. Executions in flight keep their own copy.
#[no_mangle]
pub extern "C" fn pipefence_list_release(list: *mut PipefenceCommandList) -> u32 {
    release::<ListObj, _>(list)
}

/// `Wait32BitValueX`: the engine (`flags`: ME, or PFP with `SELECT_ENGINE_PFP`) stalls until
/// `(u32 at address & mask) comparison reference` holds. `address` 4-byte aligned; a PFP
/// wait takes only `GREATER_EQUAL` (checked by `Close`).
#[no_mangle]
pub extern "C" fn pipefence_list_wait_value32(
    list: *mut PipefenceCommandList,
    address: u64,
    comparison: u32,
    reference: u32,
    mask: u32,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Wait32BitValueX", |s| {
        let cmp = self::comparison(comparison)?;
        let engine = wait_engine(flags)?;
        s.list.wait_value32(address, cmp, reference, mask, engine);
        Ok(())
    })
}

/// `Wait64BitValueX`: the 64-bit form (`address` 8-byte aligned).
#[no_mangle]
pub extern "C" fn pipefence_list_wait_value64(
    list: *mut PipefenceCommandList,
    address: u64,
    comparison: u32,
    reference: u64,
    mask: u64,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Wait64BitValueX", |s| {
        let cmp = self::comparison(comparison)?;
        let engine = wait_engine(flags)?;
        s.list.wait_value64(address, cmp, reference, mask, engine);
        Ok(())
    })
}

/// `Write32BitValueBottomOfPipeX`: writes `value` once every earlier dispatch finished, with
/// the cache actions of `flush` (`PIPEFENCE_FLUSH_*`; L2_WRITEBACK makes earlier writes
/// visible first). `flags`: the value, or a timestamp (then `value` must be 0).
#[no_mangle]
pub extern "C" fn pipefence_list_write_value32_bottom_of_pipe(
    list: *mut PipefenceCommandList,
    address: u64,
    value: u32,
    flush: u32,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Write32BitValueBottomOfPipeX", |s| {
        let source = write_source(flags)?;
        s.list
            .write_value32_bottom_of_pipe(address, value, Flush(flush), source);
        Ok(())
    })
}

/// `Write64BitValueBottomOfPipeX` (`address` 8-byte aligned).
#[no_mangle]
pub extern "C" fn pipefence_list_write_value64_bottom_of_pipe(
    list: *mut PipefenceCommandList,
    address: u64,
    value: u64,
    flush: u32,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Write64BitValueBottomOfPipeX", |s| {
        let source = write_source(flags)?;
        s.list
            .write_value64_bottom_of_pipe(address, value, Flush(flush), source);
        Ok(())
    })
}

/// `Write32BitValueTopOfPipeX`: writes when the micro engine reaches it.
#[no_mangle]
pub extern "C" fn pipefence_list_write_value32_top_of_pipe(
    list: *mut PipefenceCommandList,
    address: u64,
    value: u32,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Write32BitValueTopOfPipeX", |s| {
        let source = write_source(flags)?;
        s.list.write_value32_top_of_pipe(address, value, source);
        Ok(())
    })
}

/// `Write64BitValueTopOfPipeX`.
#[no_mangle]
pub extern "C" fn pipefence_list_write_value64_top_of_pipe(
    list: *mut PipefenceCommandList,
    address: u64,
    value: u64,
    flags: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Write64BitValueTopOfPipeX", |s| {
        let source = write_source(flags)?;
        s.list.write_value64_top_of_pipe(address, value, source);
        Ok(())
    })
}

/// `WriteBufferImmediate`: `count` 32-bit writes; `modes` (may be null: every write
/// `DEFAULT`) holds a `PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_*` per write.
///
/// # Safety
/// `params` is valid for reads of `count` elements, `modes` is null or valid for `count`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_write_buffer_immediate(
    list: *mut PipefenceCommandList,
    count: u32,
    params: *const PIPEFENCE_WRITEBUFFERIMMEDIATE_PARAMETER,
    modes: *const u32,
) -> PIPEFENCE_HRESULT {
    let what = "WriteBufferImmediate";
    let n = count as usize;
    // SAFETY: the caller's promise. A null array is reported by Close.
    let params = unsafe { slice(params, n, what) }.map_err(|f| f.msg);
    let modes = if modes.is_null() {
        None
    } else {
        // SAFETY: the caller's promise.
        Some(unsafe { std::slice::from_raw_parts(modes, n) })
    };
    record(list, what, |s| {
        let params = params?;
        let mut writes = Vec::with_capacity(n);
        for (i, p) in params.iter().enumerate() {
            let mode = match modes.map_or(0, |m| m[i]) {
                PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_DEFAULT => ImmediateMode::Default,
                PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_IN => ImmediateMode::MarkerIn,
                PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_OUT => ImmediateMode::MarkerOut,
                other => {
                    return Err(format!(
                        "write {i}: D3D12_WRITEBUFFERIMMEDIATE_MODE {other} is not 0, 1 or 2"
                    ))
                }
            };
            writes.push(ImmediateWrite {
                address: p.Dest,
                value: p.Value,
                mode,
            });
        }
        s.list.write_buffer_immediate(&writes);
        Ok(())
    })
}

/// `FlushPipelineX`: waits for every earlier dispatch and copy on this engine, then performs
/// the cache actions of `flush`; holds the pre-fetch parser until done.
#[no_mangle]
pub extern "C" fn pipefence_list_flush_pipeline(
    list: *mut PipefenceCommandList,
    flush: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "FlushPipelineX", |s| {
        s.list.flush_pipeline(Flush(flush));
        Ok(())
    })
}

/// Sets the kernel that `pipefence_list_dispatch` launches (the pipeline state of a
/// D3D12 dispatch); null clears it.
///
/// # Safety
/// `kernel` is null or points to a `PIPEFENCE_KERNEL`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_set_kernel(
    list: *mut PipefenceCommandList,
    kernel: *const PIPEFENCE_KERNEL,
) -> PIPEFENCE_HRESULT {
    let k = if kernel.is_null() {
        Ok(None)
    } else {
        // SAFETY: the caller's promise.
        unsafe { kernel_at(kernel) }.map(Some)
    };
    record(list, "SetKernel", |s| {
        s.kernel = k?;
        Ok(())
    })
}

/// `Dispatch`: launches `x * y * z` groups of the kernel set with
/// `pipefence_list_set_kernel` on the shader workers; the micro engine does not wait for
/// them. With no kernel set, each group is an empty shader (no memory access, the default
/// cost of a group).
#[no_mangle]
pub extern "C" fn pipefence_list_dispatch(
    list: *mut PipefenceCommandList,
    x: u32,
    y: u32,
    z: u32,
) -> PIPEFENCE_HRESULT {
    record(list, "Dispatch", |s| {
        let groups = u64::from(x) * u64::from(y) * u64::from(z);
        let groups = u32::try_from(groups)
            .map_err(|_| format!("{x} x {y} x {z} groups is more than 2^32 - 1"))?;
        let k = s.kernel.clone().unwrap_or_else(empty_kernel);
        s.list.dispatch(&k, groups);
        Ok(())
    })
}

/// Launches `groups` groups of `kernel` (a `Dispatch` with its kernel).
///
/// # Safety
/// `kernel` points to a `PIPEFENCE_KERNEL`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_dispatch_kernel(
    list: *mut PipefenceCommandList,
    kernel: *const PIPEFENCE_KERNEL,
    groups: u32,
) -> PIPEFENCE_HRESULT {
    // SAFETY: the caller's promise.
    let k = unsafe { kernel_at(kernel) };
    record(list, "Dispatch", |s| {
        s.list.dispatch(&k?, groups);
        Ok(())
    })
}

/// `ExecuteIndirect` with a dispatch signature: the group count is the u32 at `arguments`,
/// read when the pre-fetch parser reaches the command.
///
/// # Safety
/// `kernel` points to a `PIPEFENCE_KERNEL`.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_dispatch_indirect(
    list: *mut PipefenceCommandList,
    kernel: *const PIPEFENCE_KERNEL,
    arguments: u64,
) -> PIPEFENCE_HRESULT {
    // SAFETY: the caller's promise.
    let k = unsafe { kernel_at(kernel) };
    record(list, "ExecuteIndirect", |s| {
        s.list.dispatch_indirect(&k?, arguments);
        Ok(())
    })
}

/// `CopyBufferRegion`: copies `bytes` (a multiple of 4) from `src` + `src_offset` to `dst` +
/// `dst_offset`; the micro engine waits for it.
#[no_mangle]
pub extern "C" fn pipefence_list_copy_buffer_region(
    list: *mut PipefenceCommandList,
    dst: *mut PipefenceBuffer,
    dst_offset: u64,
    src: *mut PipefenceBuffer,
    src_offset: u64,
    bytes: u64,
) -> PIPEFENCE_HRESULT {
    let what = "CopyBufferRegion";
    let buffers =
        get::<BufferObj, _>(dst, what).and_then(|d| Ok((d, get::<BufferObj, _>(src, what)?)));
    // A bad buffer handle is reported by Close, like any invalid argument.
    record(list, what, |st| {
        let (d, s) = buffers.map_err(|f| f.msg)?;
        st.list
            .copy_buffer_region(d.0.address(dst_offset), s.0.address(src_offset), bytes);
        Ok(())
    })
}

/// `SetMarker`: a label breadcrumbs and hang reports show (null: empty).
///
/// # Safety
/// `label` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_set_marker(
    list: *mut PipefenceCommandList,
    label: *const c_char,
) -> PIPEFENCE_HRESULT {
    // SAFETY: the caller's promise.
    let label = unsafe { c_str(label) }.unwrap_or_default();
    record(list, "SetMarker", |s| {
        s.list.set_marker(&label);
        Ok(())
    })
}

/// `BeginEvent`: opens a labelled region.
///
/// # Safety
/// `label` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pipefence_list_begin_event(
    list: *mut PipefenceCommandList,
    label: *const c_char,
) -> PIPEFENCE_HRESULT {
    // SAFETY: the caller's promise.
    let label = unsafe { c_str(label) }.unwrap_or_default();
    record(list, "BeginEvent", |s| {
        s.list.begin_event(&label);
        Ok(())
    })
}

/// `EndEvent`.
#[no_mangle]
pub extern "C" fn pipefence_list_end_event(list: *mut PipefenceCommandList) -> PIPEFENCE_HRESULT {
    record(list, "EndEvent", |s| {
        s.list.end_event();
        Ok(())
    })
}

/// `Close`: validates and encodes the list. `E_INVALIDARG` naming the first invalid command
/// (a PFP wait with a comparison other than GREATER_EQUAL, a misaligned address, a
/// timestamp write with a non-zero value, an unknown flag); `DXGI_ERROR_INVALID_CALL` for a
/// closed list. After a failure the list stays open and keeps failing until `Reset`.
#[no_mangle]
pub extern "C" fn pipefence_list_close(list: *mut PipefenceCommandList) -> PIPEFENCE_HRESULT {
    let what = "Close";
    call(what, |ctx| {
        let l = get::<ListObj, _>(list, what)?;
        ctx.involve(&l.device);
        let mut s = l.state.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(msg) = &s.invalid {
            return Err(Fail::arg(format!(
                "command list `{}`: {msg}",
                s.list.name()
            )));
        }
        s.list.close()?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// `Reset`: reopens the list for recording, empty. Executions in flight keep their copy.
#[no_mangle]
pub extern "C" fn pipefence_list_reset(list: *mut PipefenceCommandList) -> PIPEFENCE_HRESULT {
    let what = "Reset";
    call(what, |ctx| {
        let l = get::<ListObj, _>(list, what)?;
        ctx.involve(&l.device);
        let mut s = l.state.write().unwrap_or_else(PoisonError::into_inner);
        s.list.reset();
        s.invalid = None;
        s.skipped = 0;
        s.kernel = None;
        Ok(PIPEFENCE_S_OK)
    })
}
