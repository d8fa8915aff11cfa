//! Auto-reset events (the Win32 event that `SetEventOnCompletion` signals, F6).

use super::notify::Notify;
use super::shim::{condvar_wait_until, lock, Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct EventCore {
    /// `true` while set. Set by a fence crossing; reset by the wait that consumes it.
    set: Mutex<bool>,
    cv: Condvar,
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
        *lock(&self.core.set) = true;
        self.core.cv.notify_one();
    }

    /// Clears the event.
    #[doc(alias = "ResetEvent")]
    pub fn reset(&self) {
        *lock(&self.core.set) = false;
    }

    /// Whether the event is set, without consuming it.
    pub fn is_set(&self) -> bool {
        *lock(&self.core.set)
    }

    /// Consumes the event if it is set (a zero-timeout wait). Returns whether it was set.
    pub fn try_wait(&self) -> bool {
        let mut s = lock(&self.core.set);
        std::mem::replace(&mut *s, false)
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
        let mut s = lock(&self.core.set);
        loop {
            if *s {
                *s = false;
                return true;
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return false;
                }
            }
            s = condvar_wait_until(&self.core.cv, s, deadline);
        }
    }

    pub(crate) fn notifier(&self) -> Arc<dyn Notify> {
        Arc::new(self.clone())
    }
}

impl Notify for Event {
    fn notify(&self) {
        self.set();
    }
}
