//! Fences (F1-F11 of `docs/semantics.md`): `ID3D12Fence` with CPU signals, events, blocking
//! and async waits, and the release of waiters when the application drops its last handle.

use super::device::WeakDevice;
use crate::driver::Cond;
use crate::error::{Error, Result, Waited};
use crate::runtime::DeviceShared;
use crate::sync::{Event, FenceCore, FenceWaitFuture, WaitOutcome, Writer};
use crate::trace::SliceKind;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How to create a fence ([`Device::create_fence`](crate::Device::create_fence)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FenceDesc {
    /// The value it starts at (F1; `InitialValue`). Default 0.
    pub initial: u64,
    /// A name for errors and reports (`fence#N` if empty; `SetName`).
    pub name: String,
}

impl FenceDesc {
    /// A fence starting at `initial`.
    pub fn new(initial: u64) -> Self {
        FenceDesc {
            initial,
            name: String::new(),
        }
    }

    /// The same, named.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }
}

#[derive(Debug)]
struct FenceInner {
    core: Arc<FenceCore>,
    device: Arc<DeviceShared>,
    /// The device handle [`Fence::device`] returns; it does not keep the device running.
    owner: WeakDevice,
    name: String,
    id: u32,
}

impl Drop for FenceInner {
    /// The application's last handle is gone (F11): every waiter still registered is released
    /// as if the fence reached `u64::MAX`; queue signals still pending to it are discarded.
    fn drop(&mut self) {
        self.core.release();
        // Engines whose queue wait this satisfied were woken by their tickets.
    }
}

/// A 64-bit GPU/CPU synchronization value (`ID3D12Fence`). Cloning gives another handle to
/// the same fence.
///
/// Last write wins (F2): a signal sets the value and may lower it. Waits are satisfied when the
/// value is `>=` their target (F5); events fire on crossing (F6).
///
/// **Handles and release (F11).** Every `Fence` value is a handle, clones included, wherever it
/// lives (another host thread's clone counts). When the application drops the last one, every
/// waiter still registered on the fence is released as if it reached `u64::MAX`: events fire,
/// [`wait_async`](Self::wait_async) futures return `Ok`, and queue waits on it are satisfied;
/// queue signals still pending to it are discarded when they retire; the device is not
/// removed. What is not a handle: the references that submitted work holds (a queue's pending
/// `wait` or `signal`), futures from `wait_async`, and event registrations. A blocking
/// [`wait`](Self::wait) borrows a handle, so it never sees its own fence released.
///
/// ```
/// use pipefence::{Device, DeviceDesc, FenceDesc};
/// use std::time::Duration;
/// let device = Device::new(DeviceDesc::default())?;
/// let fence = device.create_fence(&FenceDesc::new(0))?;
/// let f2 = fence.clone();
/// let t = std::thread::spawn(move || f2.signal(1));
/// fence.wait(1, Duration::from_secs(10))?;
/// t.join().unwrap()?;
/// # Ok::<(), pipefence::Error>(())
/// ```
#[doc(alias = "ID3D12Fence")]
#[derive(Debug, Clone)]
pub struct Fence {
    inner: Arc<FenceInner>,
}

impl Fence {
    pub(crate) fn new(core: Arc<FenceCore>, owner: WeakDevice, name: String, id: u32) -> Self {
        Fence {
            inner: Arc::new(FenceInner {
                core,
                device: owner.shared().clone(),
                owner,
                name,
                id,
            }),
        }
    }

    pub(crate) fn core(&self) -> Arc<FenceCore> {
        self.inner.core.clone()
    }

    pub(crate) fn device_shared(&self) -> Arc<DeviceShared> {
        self.inner.device.clone()
    }

    /// The fence's name (`fence#N` unless created with a [`FenceDesc`] name).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A small id, unique per device, in creation order.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The device that created the fence (`ID3D12DeviceChild::GetDevice`), or `None` once the
    /// application has dropped every [`Device`](crate::Device) handle (the queues' included). A
    /// fence does not keep its device running: as before, dropping the last device handle
    /// shuts the device down (Q8) whatever fences are still held.
    #[doc(alias = "GetDevice")]
    pub fn device(&self) -> Option<crate::Device> {
        self.inner.owner.upgrade()
    }

    /// The value the last signal wrote (F4); `u64::MAX` once the device is removed.
    #[doc(alias = "GetCompletedValue")]
    #[inline]
    pub fn completed_value(&self) -> u64 {
        // F10: once the device is removed every fence reads u64::MAX, also while removal is
        // still forcing the fences one by one (a waiter released by the first one may read
        // another before its turn). The flag is set before the first fence is forced.
        if self.inner.device.is_removed() {
            return u64::MAX;
        }
        self.inner.core.completed_value()
    }

    /// Sets the value from the CPU (F2: last write wins, may lower it) and releases the waiters
    /// it satisfies. Errors: DeviceRemoved after removal.
    #[doc(alias = "Signal")]
    pub fn signal(&self, value: u64) -> Result<()> {
        self.inner.device.yield_point();
        let now = self.inner.device.now_ns();
        let writer = Writer::Host {
            host: crate::host_names::current_id(),
        };
        let mut release = None;
        self.inner.device.with_model(|m| {
            release = Some(m.host_signal(&self.inner.core));
        });
        if self.inner.core.signal_with(value, writer, now, release) {
            Ok(())
        } else {
            Err(self
                .inner
                .device
                .removed_error(format!("fence `{}`: signal({value})", self.inner.name)))
        }
    }

    /// Sets `event` when the value reaches `value` (F6: once, on crossing; at once if already
    /// reached or the device is removed). With `None`, blocks the caller until then (D3D12's
    /// NULL event, F7); returns Ok after removal (F10).
    #[doc(alias = "SetEventOnCompletion")]
    pub fn set_event_on_completion(&self, value: u64, event: Option<&Event>) -> Result<()> {
        match event {
            Some(e) => {
                // A call, so a scheduling point before its registration takes effect (D4).
                self.inner.device.yield_point();
                // F6: the same event registered twice for one value is set once.
                let _ = self.inner.core.register_once(value, e.notifier());
            }
            None => {
                let blocked = self.inner.core.completed_value() < value;
                let o = self
                    .inner
                    .device
                    .block(Cond::Fence(self.inner.core.clone(), value), None);
                self.acquire();
                if o == WaitOutcome::Reached {
                    self.trace_sync(blocked);
                }
            }
        }
        Ok(())
    }

    /// The timed form of [`set_event_on_completion(value, None)`](Self::set_event_on_completion)
    /// (D3D12's NULL event, F7): blocks until the value is `>= value`, for at most `timeout` (a
    /// zero timeout polls). It differs from [`wait`](Self::wait) only in removal: after
    /// removal (before the call or during it) it returns `Ok(())`, as the NULL-event call does
    /// in D3D12 (F10), where `wait` returns `Err(DeviceRemoved)`. Errors: Timeout, as `wait`'s
    /// (on the deterministic driver only when nothing can run and nothing else will signal the
    /// fence, D6).
    ///
    /// ```
    /// use pipefence::{Device, DeviceDesc, FenceDesc};
    /// use std::time::Duration;
    /// let device = Device::new(DeviceDesc::default())?;
    /// let fence = device.create_fence(&FenceDesc::new(0))?;
    /// assert!(fence.block_on_completion(1, Duration::ZERO).unwrap_err().is_timeout());
    /// device.remove();
    /// fence.block_on_completion(1, Duration::from_secs(10))?; // Ok after removal
    /// assert!(fence.wait(1, Duration::from_secs(10)).is_err()); // unlike `wait`
    /// # Ok::<(), pipefence::Error>(())
    /// ```
    #[doc(alias = "SetEventOnCompletion")]
    pub fn block_on_completion(&self, value: u64, timeout: Duration) -> Result<()> {
        let dev = &self.inner.device;
        let t0 = dev.trace_sink().map(|_| dev.now_ns());
        // Only a traced wait draws its edge (solid when it blocked).
        let blocked = t0.is_some() && self.inner.core.completed_value() < value;
        let o = dev.block(Cond::Fence(self.inner.core.clone(), value), Some(timeout));
        if o == WaitOutcome::Reached {
            self.trace_sync(blocked);
        }
        let r = match o {
            WaitOutcome::Reached | WaitOutcome::Removed => {
                self.acquire();
                Ok(())
            }
            WaitOutcome::TimedOut => self.outcome(value, o, Some(timeout)),
        };
        self.trace_wait(t0, value);
        r
    }

    /// Blocks until the value is `>= value`, for at most `timeout` (F7). A zero timeout polls.
    /// Errors: Timeout (naming the fence, the target and the value reached), DeviceRemoved
    /// (also at once when the device is already removed, F10).
    pub fn wait(&self, value: u64, timeout: Duration) -> Result<()> {
        let t0 = self
            .inner
            .device
            .trace_sink()
            .map(|_| self.inner.device.now_ns());
        let blocked = t0.is_some() && self.inner.core.completed_value() < value;
        let r = self.wait_inner(value, timeout);
        if r.is_ok() {
            self.trace_sync(blocked);
        }
        self.trace_wait(t0, value);
        r
    }

    /// The host slice of a wait that started at `t0` (tracing only: `t0` is `None` when no
    /// sink was attached then, and the wait reads no clock and formats no name).
    fn trace_wait(&self, t0: Option<u64>, value: u64) {
        if let Some(t0) = t0 {
            self.inner.device.trace_host(
                || format!("wait fence {} >= {value}", self.inner.name),
                SliceKind::Blocked,
                t0,
            );
        }
    }

    fn wait_inner(&self, value: u64, timeout: Duration) -> Result<()> {
        let o = self
            .inner
            .device
            .block(Cond::Fence(self.inner.core.clone(), value), Some(timeout));
        self.outcome(value, o, Some(timeout))
    }

    /// Blocks until the value is `>= value` with no timeout. Errors: DeviceRemoved.
    pub fn wait_forever(&self, value: u64) -> Result<()> {
        let o = self
            .inner
            .device
            .block(Cond::Fence(self.inner.core.clone(), value), None);
        self.outcome(value, o, None)
    }

    /// A future that completes when the value is `>= value` (F7). It is woken by the signalling
    /// thread (no polling thread) and yields `Err(DeviceRemoved)` if the device is removed.
    pub fn wait_async(&self, value: u64) -> FenceWait {
        FenceWait {
            core: self.inner.core.clone(),
            device: self.inner.device.clone(),
            name: self.inner.name.clone(),
            value,
            fut: FenceWaitFuture::new(self.inner.core.clone(), value),
        }
    }

    /// The calling host thread acquires the fence's last release (hazard analysis, D5).
    fn acquire(&self) {
        acquire(&self.inner.device, &self.inner.core);
    }

    /// Traced runs: the edge from the signal that wrote the fence's value to this host wait,
    /// which it satisfied (`blocked`: the value was below the target when the wait began).
    fn trace_sync(&self, blocked: bool) {
        let dev = &self.inner.device;
        dev.trace_host_sync(
            dev.trace_fence_releaser(&self.inner.core),
            crate::trace::SyncKind::HostWait,
            blocked,
        );
    }

    fn outcome(&self, value: u64, o: WaitOutcome, timeout: Option<Duration>) -> Result<()> {
        let i = &self.inner;
        fence_outcome(&i.device, &i.core, &i.name, value, o, timeout)
    }
}

/// A fence is a reference to itself, so the multi-fence calls
/// ([`Device::wait_multiple`](crate::Device::wait_multiple) and the others) take `&[Fence]`
/// and `&[&Fence]` alike.
impl AsRef<Fence> for Fence {
    fn as_ref(&self) -> &Fence {
        self
    }
}

/// The future of [`Fence::wait_async`]. It is not a handle of the fence (F11): if the
/// application drops the fence's last handle first, it completes with `Ok`.
#[must_use = "futures do nothing unless awaited"]
pub struct FenceWait {
    core: Arc<FenceCore>,
    device: Arc<DeviceShared>,
    name: String,
    value: u64,
    fut: FenceWaitFuture,
}

impl std::fmt::Debug for FenceWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FenceWait")
            .field("fence", &self.name)
            .field("value", &self.value)
            .finish()
    }
}

impl Future for FenceWait {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.fut).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(o) => Poll::Ready(fence_outcome(
                &this.device,
                &this.core,
                &this.name,
                this.value,
                o,
                None,
            )),
        }
    }
}

/// The calling host thread acquires the last release of `core` (hazard analysis, D5).
fn acquire(device: &DeviceShared, core: &FenceCore) {
    device.with_model(|m| m.host_acquire_fences(&[core]));
}

/// The result of a CPU wait on `core` for `value` that ended with `o`.
fn fence_outcome(
    device: &DeviceShared,
    core: &Arc<FenceCore>,
    name: &str,
    value: u64,
    o: WaitOutcome,
    timeout: Option<Duration>,
) -> Result<()> {
    match o {
        WaitOutcome::Reached => {
            acquire(device, core);
            Ok(())
        }
        WaitOutcome::Removed => {
            Err(device.removed_error(format!("fence `{name}`: wait for {value}")))
        }
        // On the deterministic driver a wait times out only when nothing can run (D6): no
        // time passed, so the message does not claim the timeout elapsed.
        WaitOutcome::TimedOut => {
            let completed = core.completed_value();
            let virtual_time = device.virtual_time();
            let message = if virtual_time {
                format!(
                    "fence `{name}`: wait for {value}: nothing can run and nothing else will \
                     signal it (completed value {completed})"
                )
            } else {
                format!(
                    "fence `{name}`: wait for {value} after {:?} (completed value {completed})",
                    timeout.unwrap_or_default()
                )
            };
            Err(Error::timeout(
                Waited::Fence {
                    fence: name.to_string(),
                    value,
                    completed,
                },
                if virtual_time { None } else { timeout },
                message,
            ))
        }
    }
}
