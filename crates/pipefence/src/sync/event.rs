//! Auto-reset events (the Win32 event that `SetEventOnCompletion` signals, F6).

use super::notify::Notify;
use super::shim::{condvar_wait_until, lock, Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct EventCore {
    /// `set`: `true` while set (set by a fence crossing, reset by the wait that consumes it);
    /// `waiters`: threads blocked in `wait` (the setter skips the notify when there are none).
    state: Mutex<EventState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct EventState {
    set: bool,
    waiters: usize,
}

impl Notify for EventCore {
    fn notify(&self) {
        let wake = {
            let mut s = lock(&self.state);
            s.set = true;
            s.waiters > 0
        };
        if wake {
            self.cv.notify_one();
        }
    }
}

/// An auto-reset event, the target of [`Fence::set_event_on_completion`](crate::Fence::set_event_on_completion).
///
/// Setting it releases one waiter, which resets it (auto-reset, like a Win32 event created with
/// `bManualReset = FALSE`). Setting an event that is already set leaves it set. Cloning gives
/// another handle to the same event.
#[doc(alias = "HANDLE")]
#[doc(alias = "CreateEvent")]
#[derive(Debug, Clone, Default)]
pub struct Event {
    core: Arc<EventCore>,
}

impl Event {
    /// A new event, not set.
    #[doc(alias = "CreateEvent")]
    pub fn new() -> Event {
        Event::default()
    }

    /// Sets the event, releasing one waiter.
    #[doc(alias = "SetEvent")]
    pub fn set(&self) {
        self.core.notify();
    }

    /// Clears the event.
    #[doc(alias = "ResetEvent")]
    pub fn reset(&self) {
        lock(&self.core.state).set = false;
    }

    /// Whether the event is set, without consuming it.
    pub fn is_set(&self) -> bool {
        lock(&self.core.state).set
    }

    /// Consumes the event if it is set (a zero-timeout wait). Returns whether it was set.
    pub fn try_wait(&self) -> bool {
        let mut s = lock(&self.core.state);
        std::mem::replace(&mut s.set, false)
    }

    /// Blocks until the event is set or `timeout` passes; consumes it (auto-reset). Returns
    /// whether it was set. A zero timeout polls.
    #[doc(alias = "WaitForSingleObject")]
    pub fn wait(&self, timeout: Duration) -> bool {
        self.wait_until(Instant::now().checked_add(timeout))
    }

    /// Blocks until the event is set, with no timeout; consumes it.
    pub fn wait_forever(&self) {
        self.wait_until(None);
    }

    fn wait_until(&self, deadline: Option<Instant>) -> bool {
        let mut s = lock(&self.core.state);
        loop {
            if s.set {
                s.set = false;
                return true;
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return false;
                }
            }
            s.waiters += 1;
            s = condvar_wait_until(&self.core.cv, s, deadline);
            s.waiters -= 1;
        }
    }

    pub(crate) fn notifier(&self) -> Arc<dyn Notify> {
        self.core.clone()
    }
}
