//! Host threads as pipefence sees them: each OS thread that calls into pipefence gets a host
//! id, and may be given a name (the scenario runner names its `host` blocks), so that reports
//! can say which host thread last wrote a fence or an address. [`spawn`] and [`sleep`] put
//! host threads in the driver's schedule (D4).

pub use crate::host_names::{
    current_id, current_position, name_of, set_current_name, set_current_position,
};

/// A host thread spawned with [`spawn`].
#[derive(Debug)]
pub struct HostHandle<T> {
    thread: std::thread::JoinHandle<T>,
    /// When the driver schedules host threads: the device and the host's slot.
    slot: Option<(std::sync::Arc<crate::runtime::DeviceShared>, usize)>,
}

impl<T> HostHandle<T> {
    /// Waits for the host thread to finish (a scheduling point on the deterministic driver) and
    /// returns its result (`Err` with the panic payload if it panicked).
    pub fn join(self) -> std::thread::Result<T> {
        if let Some((dev, slot)) = &self.slot {
            let _ = dev.block(crate::driver::Cond::HostDone(*slot), None);
        }
        self.thread.join()
    }
}

/// Tells the driver a scheduled host thread ended, even by a panic, so the others go on.
struct DoneGuard {
    dev: std::sync::Arc<crate::runtime::DeviceShared>,
    slot: usize,
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.dev.driver.host_done(&self.dev, self.slot);
    }
}

/// Spawns a host thread named `name` that runs `f`.
///
/// On the threaded driver this is `std::thread::spawn` with a name. On the deterministic driver
/// (D4) the thread joins the schedule: it starts when the scheduler picks it, runs only while it
/// holds the turn, and every pipefence call it makes is a scheduling point. Threads started any
/// other way are outside the model.
///
/// ```
/// use pipefence::{Device, DeviceDesc, FenceDesc};
/// use std::time::Duration;
/// let device = Device::new(DeviceDesc::default())?;
/// let fence = device.create_fence(&FenceDesc::new(0))?;
/// let f = fence.clone();
/// let h = pipefence::host::spawn(&device, "producer", move || f.signal(1)).unwrap();
/// fence.wait(1, Duration::from_secs(10))?;
/// h.join().unwrap()?;
/// # Ok::<(), pipefence::Error>(())
/// ```
pub fn spawn<F, T>(device: &crate::Device, name: &str, f: F) -> std::io::Result<HostHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let shared = device.shared.clone();
    let thread_name = format!("host {name}");
    let name = name.to_string();
    match shared.driver.add_host(&name) {
        None => {
            let thread = std::thread::Builder::new()
                .name(thread_name)
                .spawn(move || {
                    set_current_name(&name);
                    f()
                })?;
            Ok(HostHandle { thread, slot: None })
        }
        Some(slot) => {
            let dev = shared.clone();
            let thread = std::thread::Builder::new()
                .name(thread_name)
                .spawn(move || {
                    dev.driver.enter_host(&dev, slot);
                    let _done = DoneGuard {
                        dev: dev.clone(),
                        slot,
                    };
                    f()
                })?;
            Ok(HostHandle {
                thread,
                slot: Some((shared, slot)),
            })
        }
    }
}

/// Sleeps for `duration`: real time on the threaded driver; virtual time, as a scheduling point,
/// on the deterministic driver (the scenario's `sleep`).
pub fn sleep(device: &crate::Device, duration: std::time::Duration) {
    device.shared.driver.sleep(&device.shared, duration);
}
