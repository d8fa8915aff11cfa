//! The host threads of the deterministic schedule: their states, their registration per OS
//! thread, and what a blocked host waits for.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum HostState {
    Running,
    Ready,
    Blocked(HostWait),
    Sleeping(u64),
    Done,
}

#[derive(Debug)]
pub(super) struct Host {
    pub(super) name: String,
    pub(super) state: HostState,
    pub(super) wake: Wake,
    /// Its OS thread waits here for its turn (a hand-off wakes only the host picked).
    pub(super) cv: Arc<Condvar>,
    /// Where it is in its own program, as it said at its last scheduling point
    /// (`host::set_current_position`).
    pub(super) position: Option<u32>,
    /// Blocking waits it made so far (its tickets' names in footprints).
    pub(super) waits: u64,
}

impl Host {
    pub(super) fn new(name: &str, state: HostState) -> Self {
        Host {
            name: name.to_string(),
            state,
            wake: Wake::Ok,
            cv: Arc::new(Condvar::new()),
            position: None,
            waits: 0,
        }
    }
}

thread_local! {
    /// The (device id, host index) pairs this OS thread is registered as.
    static REGISTERED: std::cell::RefCell<Vec<(u64, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub(super) fn registered_host(device_id: u64) -> Option<usize> {
    REGISTERED.with(|r| {
        r.borrow()
            .iter()
            .find(|(d, _)| *d == device_id)
            .map(|(_, h)| *h)
    })
}

pub(super) fn register_current(device_id: u64, host: usize) {
    REGISTERED.with(|r| {
        let mut r = r.borrow_mut();
        r.retain(|(d, _)| *d != device_id);
        r.push((device_id, host));
    });
}

/// Forgets the registration of this thread for `device_id` (the device is gone).
pub(crate) fn unregister_current(device_id: u64) {
    REGISTERED.with(|r| r.borrow_mut().retain(|(d, _)| *d != device_id));
}

/// Notes that a ticket of a blocked host's wait was satisfied, so that the next listing looks
/// at the host again (it reads the tickets then). Called where the signal happens, maybe under
/// the scheduler's lock: it takes only the list's own.
pub(super) struct HostWaker {
    pub(super) host: usize,
    pub(super) woken: Arc<Mutex<Vec<usize>>>,
}

impl Notify for HostWaker {
    fn notify(&self) {
        lock(&self.woken).push(self.host);
    }
}

/// What a blocked host of the schedule waits for: a [`Cond`] with its fence waits latched as
/// tickets, issued by the blocking action itself, so every crossing after the wait began
/// satisfies it even if the value is lowered before the host is picked again (F5, F6).
#[derive(Debug, Clone)]
pub(super) enum HostWait {
    /// One ticket per fence; `true` for ANY.
    Tickets(Vec<Arc<Ticket>>, bool),
    Memory {
        buffer: Arc<crate::memory::BufferCore>,
        offset: u64,
        cond: crate::types::ValueCondition,
    },
    Idle,
    HostDone(usize),
    Settled,
}

impl HostWait {
    /// The wait for `cond`, its fence conditions latched as tickets now (`waker` is told when
    /// one is satisfied). The tickets are named by host `host` and its wait number `wait`
    /// (`footprint.rs`).
    pub(super) fn latch(cond: Cond, waker: Arc<dyn Notify>, host: usize, wait: u64) -> HostWait {
        let key = |i: usize| Some((HOST_TICKET | host as u32, (wait << 20) | i as u64));
        let issue =
            |f: Arc<FenceCore>, v: u64, i: usize| Ticket::issue(f, v, waker.clone(), key(i));
        match cond {
            Cond::Fence(f, v) => HostWait::Tickets(vec![issue(f, v, 0)], false),
            Cond::Multi(fs, any) => HostWait::Tickets(
                fs.into_iter()
                    .enumerate()
                    .map(|(i, (f, v))| issue(f, v, i))
                    .collect(),
                any,
            ),
            Cond::Memory {
                buffer,
                offset,
                cond,
            } => HostWait::Memory {
                buffer,
                offset,
                cond,
            },
            Cond::Idle => HostWait::Idle,
            Cond::HostDone(h) => HostWait::HostDone(h),
            Cond::Settled => HostWait::Settled,
        }
    }

    /// Whether this waits for other host threads (a join, or the end of the run), not for the
    /// device.
    pub(super) fn is_host_wait(&self) -> bool {
        matches!(self, HostWait::HostDone(_) | HostWait::Settled)
    }
}

/// The first half of a host ticket's name: this bit and the host (queue waits' tickets have
/// the queue's id there).
const HOST_TICKET: u32 = 1 << 31;

impl State {
    /// Sets host `h`'s state, keeping the count of finished hosts and the candidates.
    pub(super) fn set_host_state(&mut self, h: usize, state: HostState) {
        let was_done = matches!(self.hosts[h].state, HostState::Done);
        match state {
            HostState::Done if !was_done => self.hosts_done += 1,
            HostState::Done => {}
            _ if was_done => self.hosts_done -= 1,
            _ => {}
        }
        match state {
            HostState::Running | HostState::Done => self.candidates.remove(&h),
            _ => self.candidates.insert(h),
        };
        self.hosts[h].state = state;
    }
}

impl Scheduler {
    /// Whether host `h` can run, with its ready time (`None`: now) and how it wakes. `all_idle`:
    /// every queue is idle (read only while the device is not removed).
    pub(super) fn host_enabled(
        &self,
        dev: &DeviceShared,
        st: &State,
        h: usize,
        all_idle: bool,
    ) -> Option<(Option<u64>, Wake)> {
        match &st.hosts[h].state {
            HostState::Ready => Some((None, st.hosts[h].wake)),
            HostState::Sleeping(until) => Some((Some(*until), Wake::Ok)),
            HostState::Blocked(c) => {
                // Removal releases device waits, never a wait for another host thread: that
                // thread is still in the schedule and must get its turns to end (a join that
                // returned early would block its OS thread while holding the turn).
                if dev.is_removed() && !c.is_host_wait() {
                    return Some((None, Wake::Removed));
                }
                let holds = match c {
                    HostWait::Tickets(ts, true) => ts.iter().any(|t| t.is_satisfied()),
                    HostWait::Tickets(ts, false) => ts.iter().all(|t| t.is_satisfied()),
                    HostWait::Memory {
                        buffer,
                        offset,
                        cond,
                    } => cond.holds(buffer.load(*offset, cond.width).unwrap_or(0)),
                    HostWait::Idle => all_idle,
                    HostWait::HostDone(o) => matches!(
                        st.hosts.get(*o).map(|x| &x.state),
                        Some(HostState::Done) | None
                    ),
                    // Every other host is done (`h` is blocked, so not among them).
                    HostWait::Settled => {
                        st.hosts_done + 1 == st.hosts.len() && (dev.is_removed() || all_idle)
                    }
                };
                let wake = if dev.is_removed() {
                    Wake::Removed
                } else {
                    Wake::Ok
                };
                holds.then_some((None, wake))
            }
            HostState::Running | HostState::Done => None,
        }
    }
}
