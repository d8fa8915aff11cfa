//! The C types and constants of `pipefence.h`.
//!
//! Values that D3D12's public headers define (HRESULTs, `D3D12_COMPARISON_FUNC`,
//! `D3D12_COMMAND_LIST_TYPE`, `D3D12_HEAP_TYPE`, `D3D12_MULTIPLE_FENCE_WAIT_FLAGS`,
//! `D3D12_WRITEBUFFERIMMEDIATE_MODE`) have d3d12.h's values. The Xbox flags (`D3D12XBOX_*`)
//! are not public: their values here are pipefence's own.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::c_void;

/// A Win32 `HRESULT` (32 bits, negative on failure).
pub type PIPEFENCE_HRESULT = i32;

/// Success.
pub const PIPEFENCE_S_OK: PIPEFENCE_HRESULT = 0;
/// Success, with nothing to report (a removal report of a device that works).
pub const PIPEFENCE_S_FALSE: PIPEFENCE_HRESULT = 1;
/// `E_INVALIDARG`: a bad argument, a handle that is not a live pipefence handle of the right
/// kind, an object of another device.
///
/// Value 0x80070057.
pub const PIPEFENCE_E_INVALIDARG: PIPEFENCE_HRESULT = -2147024809;
/// `E_OUTOFMEMORY`.
///
/// Value 0x8007000E.
pub const PIPEFENCE_E_OUTOFMEMORY: PIPEFENCE_HRESULT = -2147024882;
/// `E_NOTIMPL`.
///
/// Value 0x80004001.
pub const PIPEFENCE_E_NOTIMPL: PIPEFENCE_HRESULT = -2147467263;
/// `E_POINTER`: a null pointer where one is required.
///
/// Value 0x80004003.
pub const PIPEFENCE_E_POINTER: PIPEFENCE_HRESULT = -2147467261;
/// `E_FAIL`: an internal error (a panic inside pipefence, caught at the boundary).
///
/// Value 0x80004005.
pub const PIPEFENCE_E_FAIL: PIPEFENCE_HRESULT = -2147467259;
/// `HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER)`: a text did not fit (see `needed`).
///
/// Value 0x8007007A.
pub const PIPEFENCE_E_NOT_SUFFICIENT_BUFFER: PIPEFENCE_HRESULT = -2147024774;
/// `DXGI_ERROR_INVALID_CALL`: not valid in the object's state (executing an open list,
/// closing a closed one, CPU access a heap forbids).
///
/// Value 0x887A0001.
pub const PIPEFENCE_DXGI_ERROR_INVALID_CALL: PIPEFENCE_HRESULT = -2005270527;
/// `DXGI_ERROR_DEVICE_REMOVED`: the device was removed; the call did nothing. Also the
/// removal reason of a requested removal.
///
/// Value 0x887A0005.
pub const PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED: PIPEFENCE_HRESULT = -2005270523;
/// `DXGI_ERROR_DEVICE_HUNG`: the removal reason of a hang or a page fault.
///
/// Value 0x887A0006.
pub const PIPEFENCE_DXGI_ERROR_DEVICE_HUNG: PIPEFENCE_HRESULT = -2005270522;
/// `WAIT_TIMEOUT` as pipefence's waits return it (a success code, as in Win32: compare
/// with it, `FAILED` is false).
pub const PIPEFENCE_WAIT_TIMEOUT_HRESULT: PIPEFENCE_HRESULT = 0x102;

/// `WAIT_OBJECT_0`: `pipefence_event_wait` found the event set.
pub const PIPEFENCE_WAIT_OBJECT_0: u32 = 0;
/// `WAIT_TIMEOUT`: the event was not set in time.
pub const PIPEFENCE_WAIT_TIMEOUT: u32 = 0x102;
/// `WAIT_FAILED`: a bad event handle.
pub const PIPEFENCE_WAIT_FAILED: u32 = 0xFFFF_FFFF;
/// `INFINITE`: no timeout.
pub const PIPEFENCE_INFINITE: u32 = 0xFFFF_FFFF;

/// `D3D12_COMMAND_LIST_TYPE_DIRECT`: a graphics queue.
pub const PIPEFENCE_COMMAND_LIST_TYPE_DIRECT: u32 = 0;
/// `D3D12_COMMAND_LIST_TYPE_COMPUTE`: an async compute queue.
pub const PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE: u32 = 2;
/// `D3D12_COMMAND_LIST_TYPE_COPY`: a DMA queue.
pub const PIPEFENCE_COMMAND_LIST_TYPE_COPY: u32 = 3;

/// `D3D12_HEAP_TYPE_DEFAULT`: GPU memory, no CPU access.
pub const PIPEFENCE_HEAP_TYPE_DEFAULT: u32 = 1;
/// `D3D12_HEAP_TYPE_UPLOAD`: the CPU writes, the GPU reads (a GPU write faults).
pub const PIPEFENCE_HEAP_TYPE_UPLOAD: u32 = 2;
/// `D3D12_HEAP_TYPE_READBACK`: the GPU writes, the CPU reads.
pub const PIPEFENCE_HEAP_TYPE_READBACK: u32 = 3;
/// `D3D12_HEAP_TYPE_CUSTOM`: taken as pipefence's shared heap.
pub const PIPEFENCE_HEAP_TYPE_CUSTOM: u32 = 4;
/// `D3D12_HEAP_TYPE_GPU_UPLOAD`: taken as pipefence's shared heap.
pub const PIPEFENCE_HEAP_TYPE_GPU_UPLOAD: u32 = 5;
/// pipefence's shared heap (a pipefence value): CPU and GPU both read and write (unified
/// memory, for flags the CPU and the GPU both touch).
pub const PIPEFENCE_HEAP_TYPE_SHARED: u32 = 0x100;

/// `D3D12_FENCE_FLAG_NONE`. (The sharing flags, 1, 2 and 4, are accepted and ignored.)
pub const PIPEFENCE_FENCE_FLAG_NONE: u32 = 0;

/// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_NONE` (= ALL).
pub const PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_NONE: u32 = 0;
/// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_ANY`: the first fence to reach its value.
pub const PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_ANY: u32 = 1;
/// `D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL`: every fence reaches its value.
pub const PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_ALL: u32 = 0;

/// `D3D12XBOX_WAIT_FLAG_NONE` (pipefence value): the wait runs on the micro engine (ME).
pub const PIPEFENCE_WAIT_FLAG_NONE: u32 = 0;
/// `D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP` (pipefence value): the wait runs on the
/// pre-fetch parser (GREATER_EQUAL only).
pub const PIPEFENCE_WAIT_FLAG_SELECT_ENGINE_PFP: u32 = 1;

/// `D3D12XBOX_FLUSH_NONE` (pipefence value).
pub const PIPEFENCE_FLUSH_NONE: u32 = 0;
/// `D3D12XBOX_FLUSH_BOP_TEXTURE_L1_INVALIDATE` (pipefence value).
pub const PIPEFENCE_FLUSH_BOP_TEXTURE_L1_INVALIDATE: u32 = 0x1;
/// `D3D12XBOX_FLUSH_BOP_TEXTURE_L1_VOLATILE` (pipefence value).
pub const PIPEFENCE_FLUSH_BOP_TEXTURE_L1_VOLATILE: u32 = 0x2;
/// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_INVALIDATE` (pipefence value).
pub const PIPEFENCE_FLUSH_BOP_TEXTURE_L2_INVALIDATE: u32 = 0x4;
/// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_VOLATILE` (pipefence value).
pub const PIPEFENCE_FLUSH_BOP_TEXTURE_L2_VOLATILE: u32 = 0x8;
/// `D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK` (pipefence value): earlier work's writes are
/// visible to other engines and the CPU before the value.
pub const PIPEFENCE_FLUSH_BOP_TEXTURE_L2_WRITEBACK: u32 = 0x10;

/// `D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE` (pipefence value): write the given value.
pub const PIPEFENCE_WRITE_VALUE_FLAG_NONE: u32 = 0;
/// `D3D12XBOX_WRITE_VALUE_BOP_FLAG_GPU_TIMESTAMP` (pipefence value): write the GPU clock
/// (the value must be 0).
pub const PIPEFENCE_WRITE_VALUE_FLAG_GPU_TIMESTAMP: u32 = 1;
/// `D3D12XBOX_WRITE_VALUE_BOP_FLAG_SYSTEM_TIMESTAMP` (pipefence value): write the system
/// clock (the value must be 0).
pub const PIPEFENCE_WRITE_VALUE_FLAG_SYSTEM_TIMESTAMP: u32 = 2;

/// `D3D12_WRITEBUFFERIMMEDIATE_MODE_DEFAULT`.
pub const PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_DEFAULT: u32 = 0;
/// `D3D12_WRITEBUFFERIMMEDIATE_MODE_MARKER_IN`.
pub const PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_IN: u32 = 1;
/// `D3D12_WRITEBUFFERIMMEDIATE_MODE_MARKER_OUT`.
pub const PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_OUT: u32 = 2;

/// One thread per engine and a shader worker pool, in real time (the default).
pub const PIPEFENCE_DRIVER_THREADED: u32 = 0;
/// One thread at a time, in virtual time, the schedule chosen by `Seed`: same seed, same run.
/// Host code runs on the thread that created the device or on threads from
/// `pipefence_host_spawn`.
pub const PIPEFENCE_DRIVER_DETERMINISTIC: u32 = 1;

/// Everything an engine writes is visible at once; no hazard analysis (the default).
pub const PIPEFENCE_MEMORY_MODEL_PLAIN: u32 = 0;
/// Hazard analysis (the validation layer), values unchanged.
pub const PIPEFENCE_MEMORY_MODEL_VALIDATE: u32 = 1;
/// The weakest legal GPU plus hazard analysis; needs the deterministic driver.
pub const PIPEFENCE_MEMORY_MODEL_STRICT: u32 = 2;

/// A removal report as text.
pub const PIPEFENCE_REPORT_FORMAT_TEXT: u32 = 0;
/// A removal report as JSON (the shape of the scenario runner's report).
pub const PIPEFENCE_REPORT_FORMAT_JSON: u32 = 1;

/// Built-in kernel: `dst[i] = Value` for u32 element `i = group * 64 + lane`.
pub const PIPEFENCE_KERNEL_FILL: u32 = 1;
/// Built-in kernel: `dst[i] = src[i] + Value` (wrapping).
pub const PIPEFENCE_KERNEL_ADD: u32 = 2;
/// Built-in kernel: the u64 at `Dst` += the sum of every u32 `src[i]` (atomic).
pub const PIPEFENCE_KERNEL_SUM: u32 = 3;
/// Built-in kernel: each group is busy for `Ns` nanoseconds.
pub const PIPEFENCE_KERNEL_SPIN: u32 = 4;
/// A kernel of your own: `Callback(context, Context)` runs once per group, on the shader
/// workers (several groups at once), and reaches memory through the `pipefence_kernel_*`
/// functions. `Ns` is its declared cost per group (0: the default).
pub const PIPEFENCE_KERNEL_CALLBACK: u32 = 5;

/// Explore: a schedule fails when the callback fails or the device ends removed.
pub const PIPEFENCE_EXPLORE_FLAG_NONE: u32 = 0;
/// Explore: a removed device alone does not fail a schedule (a test of hang reports).
pub const PIPEFENCE_EXPLORE_FLAG_ALLOW_REMOVAL: u32 = 1;
/// Explore: a schedule with hazard reports fails (needs the validate or strict model).
pub const PIPEFENCE_EXPLORE_FLAG_FAIL_ON_HAZARD: u32 = 2;
/// Explore: stop after the first failing schedule.
pub const PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE: u32 = 4;
/// Explore every schedule instead of seeds (every interleaving; with
/// `PIPEFENCE_EXPLORE_FLAG_REDUCE`, up to the order of independent actions): at most
/// `Schedules` of them (0: 10,000), `FirstSeed` ignored; `pipefence_explore_result_is_complete`
/// says whether every one was explored.
pub const PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE: u32 = 8;
/// With `PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`: partial-order reduction, two schedules that differ
/// only in the order of independent actions counting once (far fewer schedules). Sound only
/// when the program's threads share nothing but pipefence objects (buffers, fences, queues,
/// host threads' joins): C or C++ state that host threads share otherwise (atomics, locks,
/// plain variables) is invisible to it, so leave it off then.
pub const PIPEFENCE_EXPLORE_FLAG_REDUCE: u32 = 16;

/// How to create a device (`pipefence_device_create`).
/// Zero-initialise it and set what you need: every 0 is the default.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PIPEFENCE_DEVICE_DESC {
    /// Watchdog (TDR) in milliseconds: an engine stalled in a memory-value wait while nothing
    /// progresses for this long hangs the device. 0 = the default, 2000.
    pub WatchdogTimeoutMs: u32,
    /// `PIPEFENCE_DRIVER_THREADED` (0) or `PIPEFENCE_DRIVER_DETERMINISTIC`.
    pub Driver: u32,
    /// The deterministic driver's schedule seed (its strategy follows from the seed, as for
    /// `pipefence run --driver deterministic --seed N`).
    pub Seed: u64,
    /// `PIPEFENCE_MEMORY_MODEL_PLAIN` (0), `_VALIDATE` or `_STRICT` (deterministic only).
    pub MemoryModel: u32,
    /// Shader worker threads; 0 = one per core.
    pub Workers: u32,
    /// Opt-in: a queue stalled this long in a fence wait while nothing progresses is a hang
    /// too. 0 = off (a fence wait is not a GPU hang in D3D12).
    pub FenceWaitTimeoutMs: u32,
    /// Packets the pre-fetch parser may run ahead; 0 = the default, 16.
    pub FifoDepth: u32,
}

/// A kernel for a dispatch (`PIPEFENCE_KERNEL_FILL`, ...); fields a kernel does not use are
/// ignored. Zero-initialise it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PIPEFENCE_KERNEL {
    /// `PIPEFENCE_KERNEL_FILL`, `_ADD`, `_SUM` or `_SPIN`.
    pub Type: u32,
    /// The value stored (fill) or added (add).
    pub Value: u32,
    /// Destination GPU address (fill, add: 4-byte aligned; sum: 8-byte aligned).
    pub Dst: u64,
    /// Source GPU address (add, sum; 4-byte aligned).
    pub Src: u64,
    /// Nanoseconds per group (spin), or the declared cost of a group (callback).
    pub Ns: u64,
    /// The function of a `PIPEFENCE_KERNEL_CALLBACK` kernel.
    pub Callback: PIPEFENCE_KERNEL_FN,
    /// Its context: it must stay valid, and be safe to use from several threads at once,
    /// for as long as a list recording it may execute.
    pub Context: *mut c_void,
}

/// One write of `pipefence_list_write_buffer_immediate`
/// (`D3D12_WRITEBUFFERIMMEDIATE_PARAMETER`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PIPEFENCE_WRITEBUFFERIMMEDIATE_PARAMETER {
    /// Destination, 4-byte aligned.
    pub Dest: u64,
    /// The value.
    pub Value: u32,
}

/// How to explore (`pipefence_explore`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PIPEFENCE_EXPLORE_DESC {
    /// The device each schedule runs on (null: defaults); its `Driver` and `Seed` are
    /// replaced by the deterministic driver and each schedule's seed.
    pub Device: *const PIPEFENCE_DEVICE_DESC,
    /// The first seed (ignored with `PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`).
    pub FirstSeed: u64,
    /// How many schedules (seeds `FirstSeed ..`); 0 = 100. With
    /// `PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`: the most schedules to explore; 0 = 10,000.
    pub Schedules: u64,
    /// `PIPEFENCE_EXPLORE_FLAG_*`, or-ed.
    pub Flags: u32,
}

/// A failing schedule (`pipefence_explore_result_failure`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PIPEFENCE_SCHEDULE_FAILURE {
    /// The schedule's seed (with `PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE`: its number in the
    /// exploration, from 0).
    pub Seed: u64,
    /// What the callback returned.
    pub Result: PIPEFENCE_HRESULT,
    /// The device's removal reason at the end (`S_OK` if it was not removed).
    pub RemovedReason: PIPEFENCE_HRESULT,
    /// Hazard reports (validate and strict models).
    pub Hazards: u32,
    /// Virtual nanoseconds the schedule took.
    pub VirtualNs: u64,
}

/// A device (`ID3D12Device`): reference counted, created by
/// `pipefence_device_create`.
#[derive(Debug)]
pub struct PipefenceDevice {
    _opaque: [u8; 0],
}

/// A command queue (`ID3D12CommandQueue`). It keeps its device alive.
#[derive(Debug)]
pub struct PipefenceQueue {
    _opaque: [u8; 0],
}

/// A fence (`ID3D12Fence`).
#[derive(Debug)]
pub struct PipefenceFence {
    _opaque: [u8; 0],
}

/// An event (a Win32 event `HANDLE`).
#[derive(Debug)]
pub struct PipefenceEvent {
    _opaque: [u8; 0],
}

/// A buffer (`ID3D12Resource`).
#[derive(Debug)]
pub struct PipefenceBuffer {
    _opaque: [u8; 0],
}

/// A command list (`ID3D12GraphicsCommandList`).
#[derive(Debug)]
pub struct PipefenceCommandList {
    _opaque: [u8; 0],
}

/// The failing schedules of an exploration.
#[derive(Debug)]
pub struct PipefenceExploreResult {
    _opaque: [u8; 0],
}

/// A host thread spawned into the device's schedule.
#[derive(Debug)]
pub struct PipefenceHost {
    _opaque: [u8; 0],
}

/// The body of one schedule: runs on the exploring thread with a fresh deterministic device
/// (a borrowed handle: `AddRef` it to keep it). Return `S_OK` when the schedule behaved.
/// It must not unwind (a C++ exception must be caught inside).
pub type PIPEFENCE_SCHEDULE_FN = Option<
    unsafe extern "C" fn(device: *mut PipefenceDevice, context: *mut c_void) -> PIPEFENCE_HRESULT,
>;

/// What a callback kernel sees of one group: valid only during the call.
#[derive(Debug)]
pub struct PipefenceKernelContext {
    _opaque: [u8; 0],
}

/// One group of a callback kernel. It must return (a kernel that never returns blocks the
/// deterministic driver) and must not unwind.
pub type PIPEFENCE_KERNEL_FN =
    Option<unsafe extern "C" fn(group: *mut PipefenceKernelContext, context: *mut c_void)>;

/// The body of a host thread. It must not unwind.
pub type PIPEFENCE_HOST_FN =
    Option<unsafe extern "C" fn(context: *mut c_void) -> PIPEFENCE_HRESULT>;
