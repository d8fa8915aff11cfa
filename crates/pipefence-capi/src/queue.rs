//! Queues, fences and events.

use crate::device::timeout;
use crate::handle::*;
use crate::list::ListObj;
use crate::types::*;
use pipefence::{Device, Driver, Event, Fence, MultipleFenceWaitFlags, Queue};
use std::sync::{Arc, Mutex, PoisonError};

pub(crate) struct QueueObj(pub(crate) Queue);

impl Object for QueueObj {
    const KIND: Kind = Kind::Queue;
}

/// A fence and the device it was created on: like a D3D12 device child it keeps the device
/// alive, and once the device is removed it reads `UINT64_MAX` through this API even while
/// the removal is still marking the device's fences one by one.
pub(crate) struct FenceObj(pub(crate) Fence, pub(crate) pipefence::Device);

impl Object for FenceObj {
    const KIND: Kind = Kind::Fence;
}

pub(crate) struct EventObj {
    pub(crate) event: Event,
    manual_reset: bool,
    /// What was registered to set it on deterministic devices: there the engines run only
    /// at host scheduling points, so `pipefence_event_wait` waits for these through the
    /// scheduler instead of sleeping on the event.
    scheduled: Mutex<Vec<Registration>>,
}

/// A registration of an event on a deterministic device.
pub(crate) enum Registration {
    /// `SetEventOnCompletion(value, event)`.
    Fence(Fence, u64),
    /// `SetEventOnMultipleFenceCompletion`.
    Fences {
        device: Device,
        fences: Vec<Fence>,
        values: Vec<u64>,
        any: bool,
    },
}

impl Registration {
    fn satisfied(&self) -> bool {
        match self {
            Registration::Fence(f, v) => f.completed_value() >= *v,
            Registration::Fences {
                device,
                fences,
                values,
                any,
            } => {
                let mut reached = fences
                    .iter()
                    .zip(values)
                    .map(|(f, v)| f.completed_value() >= *v);
                device.is_removed()
                    || if *any {
                        reached.any(|r| r)
                    } else {
                        reached.all(|r| r)
                    }
            }
        }
    }

    /// Waits through the scheduler (until it holds, or nothing can run).
    fn wait(&self, timeout: std::time::Duration) {
        match self {
            Registration::Fence(f, v) => {
                let _ = f.wait(*v, timeout);
            }
            Registration::Fences {
                device,
                fences,
                values,
                any,
            } => {
                let refs: Vec<&Fence> = fences.iter().collect();
                let flags = if *any {
                    MultipleFenceWaitFlags::ANY
                } else {
                    MultipleFenceWaitFlags::ALL
                };
                let _ = device.wait_multiple(&refs, values, flags, timeout);
            }
        }
    }
}

impl EventObj {
    /// Remembers `r` if `device` is deterministic.
    pub(crate) fn scheduled_on(&self, device: &Device, r: impl FnOnce() -> Registration) {
        if matches!(device.desc().driver, Driver::Deterministic { .. }) {
            let mut s = self
                .scheduled
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            s.retain(|r| !r.satisfied());
            s.push(r());
        }
    }
}

impl Object for EventObj {
    const KIND: Kind = Kind::Event;
}

fn queue(ctx: &mut Ctx, handle: *const PipefenceQueue, what: &str) -> Res<Arc<QueueObj>> {
    let q = get::<QueueObj, _>(handle, what)?;
    ctx.involve(q.0.device());
    Ok(q)
}

/// Adds a reference to a queue; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_queue_add_ref(queue: *mut PipefenceQueue) -> u32 {
    add_ref::<QueueObj, _>(queue)
}

/// Drops a reference to a queue. Work already submitted still runs (a queue's work keeps
/// what it uses alive).
#[no_mangle]
pub extern "C" fn pipefence_queue_release(queue: *mut PipefenceQueue) -> u32 {
    release::<QueueObj, _>(queue)
}

/// Queue-side `Signal`: sets `fence` to `value` once everything submitted earlier on the
/// queue has completed. Returns at once.
#[no_mangle]
pub extern "C" fn pipefence_queue_signal(
    queue: *mut PipefenceQueue,
    fence: *mut PipefenceFence,
    value: u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_signal";
    call(what, |ctx| {
        let q = self::queue(ctx, queue, what)?;
        let f = get::<FenceObj, _>(fence, what)?;
        q.0.signal(&f.0, value)?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// Queue-side `Wait`: nothing submitted later on the queue runs until `fence` reaches
/// `value`. The wait is a ticket issued by this call: the first signal from now on that makes
/// the fence `>= value` satisfies it for good, even if the value is lowered again before the
/// queue gets there. Returns at once.
#[no_mangle]
pub extern "C" fn pipefence_queue_wait(
    queue: *mut PipefenceQueue,
    fence: *mut PipefenceFence,
    value: u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_wait";
    call(what, |ctx| {
        let q = self::queue(ctx, queue, what)?;
        let f = get::<FenceObj, _>(fence, what)?;
        q.0.wait(&f.0, value)?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// `ExecuteCommandLists`: queues the `count` closed lists, which run after everything
/// submitted earlier on the queue. `E_INVALIDARG` for no lists, a list of another type or
/// device; `DXGI_ERROR_INVALID_CALL` for an open list.
///
/// # Safety
/// `lists` is valid for reads of `count` handles.
#[no_mangle]
pub unsafe extern "C" fn pipefence_queue_execute_command_lists(
    queue: *mut PipefenceQueue,
    count: u32,
    lists: *const *mut PipefenceCommandList,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_execute_command_lists";
    call(what, |ctx| {
        let q = self::queue(ctx, queue, what)?;
        // SAFETY: the caller's promise.
        let handles = unsafe { slice(lists, count as usize, what)? };
        let objs = handles
            .iter()
            .enumerate()
            .map(|(i, l)| get::<ListObj, _>(*l, &format!("{what}: command list {i}")))
            .collect::<Res<Vec<_>>>()?;
        // Read locks: several threads may submit one closed list at once.
        let guards: Vec<_> = objs
            .iter()
            .map(|o| o.state.read().unwrap_or_else(PoisonError::into_inner))
            .collect();
        let refs: Vec<&pipefence::CommandList> = guards.iter().map(|g| &g.list).collect();
        q.0.execute_command_lists(&refs)?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// Blocks until everything submitted to the queue so far has completed, up to `timeout_ms`.
#[no_mangle]
pub extern "C" fn pipefence_queue_wait_idle(
    queue: *mut PipefenceQueue,
    timeout_ms: u32,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_wait_idle";
    call(what, |ctx| {
        self::queue(ctx, queue, what)?
            .0
            .wait_idle(timeout(timeout_ms))?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// `GetTimestampFrequency`: GPU timestamp ticks per second.
///
/// # Safety
/// `frequency` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_queue_get_timestamp_frequency(
    queue: *mut PipefenceQueue,
    frequency: *mut u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_get_timestamp_frequency";
    call(what, |ctx| {
        let f = self::queue(ctx, queue, what)?.0.timestamp_frequency();
        // SAFETY: the caller's promise.
        unsafe { write_out(frequency, f, what)? };
        Ok(PIPEFENCE_S_OK)
    })
}

/// `GetClockCalibration`: the GPU and system timestamps sampled at once.
///
/// # Safety
/// `gpu` and `cpu` are valid for writes.
#[no_mangle]
pub unsafe extern "C" fn pipefence_queue_get_clock_calibration(
    queue: *mut PipefenceQueue,
    gpu: *mut u64,
    cpu: *mut u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_queue_get_clock_calibration";
    call(what, |ctx| {
        let (g, c) = self::queue(ctx, queue, what)?.0.clock_calibration()?;
        // SAFETY: the caller's promise.
        unsafe {
            write_out(gpu, g, what)?;
            write_out(cpu, c, what)?;
        }
        Ok(PIPEFENCE_S_OK)
    })
}

fn fence(ctx: &mut Ctx, handle: *const PipefenceFence, what: &str) -> Res<Arc<FenceObj>> {
    let f = get::<FenceObj, _>(handle, what)?;
    ctx.involve(&f.1);
    Ok(f)
}

/// Adds a reference to a fence; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_fence_add_ref(fence: *mut PipefenceFence) -> u32 {
    add_ref::<FenceObj, _>(fence)
}

/// Drops a reference to a fence. With the last one, every waiter still registered on it is
/// released as if it reached `UINT64_MAX` (pending queue signals to it are discarded).
#[no_mangle]
pub extern "C" fn pipefence_fence_release(fence: *mut PipefenceFence) -> u32 {
    release::<FenceObj, _>(fence)
}

/// CPU-side `Signal`: sets the value now (last write wins, it may lower it).
#[no_mangle]
pub extern "C" fn pipefence_fence_signal(
    fence: *mut PipefenceFence,
    value: u64,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_fence_signal";
    call(what, |ctx| {
        self::fence(ctx, fence, what)?.0.signal(value)?;
        Ok(PIPEFENCE_S_OK)
    })
}

/// `GetCompletedValue`: the value the last signal wrote; `UINT64_MAX` once the device is
/// removed (and for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_fence_get_completed_value(fence: *mut PipefenceFence) -> u64 {
    let what = "pipefence_fence_get_completed_value";
    call_value(what, u64::MAX, |ctx| {
        let f = self::fence(ctx, fence, what)?;
        Ok(if f.1.is_removed() {
            u64::MAX
        } else {
            f.0.completed_value()
        })
    })
}

/// `SetEventOnCompletion`: sets `event` when the fence reaches `value` (at once if it has, or
/// once the device is removed). A null `event` blocks the caller until then (on the
/// deterministic driver, a scheduling point).
#[no_mangle]
pub extern "C" fn pipefence_fence_set_event_on_completion(
    fence: *mut PipefenceFence,
    value: u64,
    event: *mut PipefenceEvent,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_fence_set_event_on_completion";
    call(what, |ctx| {
        let f = self::fence(ctx, fence, what)?;
        if event.is_null() {
            f.0.set_event_on_completion(value, None)?;
        } else {
            let e = get::<EventObj, _>(event, what)?;
            f.0.set_event_on_completion(value, Some(&e.event))?;
            e.scheduled_on(&f.1, || Registration::Fence(f.0.clone(), value));
        }
        Ok(PIPEFENCE_S_OK)
    })
}

/// Blocks until the fence is `>= value`, up to `timeout_ms` (`INFINITE` allowed; 0 polls).
/// `PIPEFENCE_WAIT_TIMEOUT_HRESULT` on a timeout, `DXGI_ERROR_DEVICE_REMOVED` after
/// removal. A scheduling point on the deterministic driver.
#[no_mangle]
pub extern "C" fn pipefence_fence_wait(
    fence: *mut PipefenceFence,
    value: u64,
    timeout_ms: u32,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_fence_wait";
    call(what, |ctx| {
        let f = self::fence(ctx, fence, what)?;
        if timeout_ms == PIPEFENCE_INFINITE {
            f.0.wait_forever(value)?;
        } else {
            f.0.wait(value, timeout(timeout_ms))?;
        }
        Ok(PIPEFENCE_S_OK)
    })
}

/// `CreateEvent`: an event, auto-reset unless `manual_reset` is non-zero, set at once if
/// `initial_state` is non-zero.
///
/// # Safety
/// `event` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn pipefence_event_create(
    manual_reset: i32,
    initial_state: i32,
    event: *mut *mut PipefenceEvent,
) -> PIPEFENCE_HRESULT {
    let what = "pipefence_event_create";
    call(what, |_| {
        // SAFETY: the caller's promise.
        unsafe { crate::device::clear_out(event, what)? };
        let e = Event::new();
        if initial_state != 0 {
            e.set();
        }
        let obj = EventObj {
            event: e,
            manual_reset: manual_reset != 0,
            scheduled: Mutex::new(Vec::new()),
        };
        // SAFETY: checked by clear_out.
        unsafe { crate::device::hand_out(obj, event, what) }
    })
}

/// Adds a reference to an event; returns the new count (0 for a bad handle).
#[no_mangle]
pub extern "C" fn pipefence_event_add_ref(event: *mut PipefenceEvent) -> u32 {
    add_ref::<EventObj, _>(event)
}

/// Drops a reference to an event (`CloseHandle`). Fence registrations keep what they need.
#[no_mangle]
pub extern "C" fn pipefence_event_release(event: *mut PipefenceEvent) -> u32 {
    release::<EventObj, _>(event)
}

/// `SetEvent`.
#[no_mangle]
pub extern "C" fn pipefence_event_set(event: *mut PipefenceEvent) -> PIPEFENCE_HRESULT {
    let what = "pipefence_event_set";
    call(what, |_| {
        get::<EventObj, _>(event, what)?.event.set();
        Ok(PIPEFENCE_S_OK)
    })
}

/// `ResetEvent`.
#[no_mangle]
pub extern "C" fn pipefence_event_reset(event: *mut PipefenceEvent) -> PIPEFENCE_HRESULT {
    let what = "pipefence_event_reset";
    call(what, |_| {
        get::<EventObj, _>(event, what)?.event.reset();
        Ok(PIPEFENCE_S_OK)
    })
}

/// `WaitForSingleObject`: `PIPEFENCE_WAIT_OBJECT_0` once the event is set (an auto-reset
/// event is reset by it), `PIPEFENCE_WAIT_TIMEOUT` after `timeout_ms` (`INFINITE` allowed),
/// `PIPEFENCE_WAIT_FAILED` for a bad handle. On the deterministic driver, where the engines
/// run only at host scheduling points, it waits through the scheduler for the fences the
/// event was registered on (so it returns `PIPEFENCE_WAIT_TIMEOUT` at once when nothing can
/// run); events set only by `pipefence_event_set` from another thread are real-time waits.
/// (Until such a wait sees them satisfied, or the event is released, those registrations
/// hold the fences they name.)
#[no_mangle]
pub extern "C" fn pipefence_event_wait(event: *mut PipefenceEvent, timeout_ms: u32) -> u32 {
    let what = "pipefence_event_wait";
    call_value(what, PIPEFENCE_WAIT_FAILED, |_| {
        let e = get::<EventObj, _>(event, what)?;
        // On a deterministic device the host must wait through the scheduler for the engines
        // to run: wait for what was registered to set the event, then look at the event.
        let scheduled: Vec<Registration> =
            std::mem::take(&mut *e.scheduled.lock().unwrap_or_else(PoisonError::into_inner));
        if !scheduled.is_empty() && !e.event.is_set() {
            for r in &scheduled {
                if !r.satisfied() {
                    r.wait(timeout(timeout_ms));
                }
                if e.event.is_set() {
                    break;
                }
            }
            let left: Vec<Registration> =
                scheduled.into_iter().filter(|r| !r.satisfied()).collect();
            e.scheduled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(left);
            let set = e.event.try_wait();
            if set && e.manual_reset {
                e.event.set();
            }
            return Ok(if set {
                PIPEFENCE_WAIT_OBJECT_0
            } else {
                PIPEFENCE_WAIT_TIMEOUT
            });
        }
        let set = if timeout_ms == PIPEFENCE_INFINITE {
            e.event.wait_forever();
            true
        } else {
            e.event.wait(timeout(timeout_ms))
        };
        if set && e.manual_reset {
            e.event.set();
        }
        Ok(if set {
            PIPEFENCE_WAIT_OBJECT_0
        } else {
            PIPEFENCE_WAIT_TIMEOUT
        })
    })
}
