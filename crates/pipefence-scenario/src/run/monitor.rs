//! The hang monitor of the threaded driver (`docs/semantics.md` D6/H1) and the Ctrl-C
//! interruption. Each host thread's state (running, blocked on the device, done) is kept in
//! [`Ctx`]'s `states`; the monitor declares a hang when some engine has work left, every host
//! thread has ended or is blocked, and no engine has progressed for the watchdog timeout (a
//! dispatch in flight whose groups are bound to complete counts as progressing, as for the
//! engines' own watchdog).

use super::Ctx;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// A host thread runs actions.
pub(super) const RUNNING: u8 = 0;

/// A host thread is blocked on the device, or the main program waits for the end of the run.
pub(super) const BLOCKED: u8 = 1;

/// A host thread has ended.
pub(super) const DONE: u8 = 2;

/// Set by [`interrupt`] (the binary's Ctrl-C handler); shared with every deterministic device
/// as its `DeviceDesc::interrupt` flag.
pub(super) fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone()
}

/// Asks the runs in progress to stop (Ctrl-C): a threaded run removes its device at once
/// (reason `requested`), whose report shows what every queue was waiting on then; a
/// deterministic run's driver does the same at its next step (`DeviceDesc::interrupt`); `check`
/// starts no further schedule. Safe to call from a signal handler's thread.
pub fn interrupt() {
    interrupt_flag().store(true, Ordering::SeqCst);
}

/// Whether [`interrupt`] was called.
pub fn interrupted() -> bool {
    interrupt_flag().load(Ordering::SeqCst)
}

/// Declares a hang when every host thread has ended or is blocked on the device, some engine
/// has work left, and nothing progressed for the watchdog timeout (D6). On [`interrupt`] it
/// removes the device (the report is the snapshot of what waits on what).
pub(super) fn monitor(ctx: &Ctx, finished: &AtomicBool) {
    let tdr = Duration::from_millis(ctx.sc.device.tdr_ms.max(1));
    let mut last = (ctx.device.tools().progress(), Instant::now());
    while !finished.load(Ordering::SeqCst) && !ctx.device.is_removed() {
        thread::park_timeout(
            Duration::from_millis(10)
                .min(tdr / 4)
                .max(Duration::from_millis(1)),
        );
        if interrupted() {
            ctx.device.remove();
            return;
        }
        let all_stuck = ctx
            .states
            .iter()
            .all(|s| s.load(Ordering::SeqCst) != RUNNING);
        let p = ctx.device.tools().progress();
        if p != last.0
            || !all_stuck
            || !ctx.device.tools().has_work()
            || ctx.device.tools().finite_work_in_flight()
        {
            last = (p, Instant::now());
            continue;
        }
        if last.1.elapsed() >= tdr {
            ctx.device.tools().declare_hung();
            return;
        }
    }
}
