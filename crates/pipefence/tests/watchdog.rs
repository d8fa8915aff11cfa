//! The threaded driver's watchdog (`docs/semantics.md` D6) and the classification of what it
//! removes (D7): long but finite kernels are progress, never a hang; only a group that can run
//! longer than the timeout is timed; a wait is removed only when the device stops progressing;
//! durations saturate instead of wrapping.
//!
//! None of these tests depends on the machine's speed: the removals they expect come from a
//! wait nothing satisfies or a group that never ends, and the runs they expect to pass rest on
//! rules (a group's declared cost, a dispatch in flight), not on how fast the workers run.

use pipefence::explore::explore;
use pipefence::*;
use std::time::Duration;

/// D6, D4: a watchdog of `u64::MAX` ms saturates to `u64::MAX` ns instead of wrapping, so a
/// group costing `u64::MAX` ns is within it and completes (it was removed as an endless kernel
/// "longer than the watchdog timeout (18446744073709551.615s)"); the virtual clock saturates.
#[test]
fn d6_a_watchdog_of_u64_max_ms_is_not_exceeded_by_any_group() {
    let desc = DeviceDesc {
        watchdog_timeout: Duration::from_millis(u64::MAX),
        ..DeviceDesc::default()
    };
    let runs = explore(&desc, 0..4, |d| -> Result<u64> {
        let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
        let f = d.create_fence(&FenceDesc::new(0).named("f"))?;
        let mut l = d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))?;
        l.dispatch(&Kernel::spin(u64::MAX), 1);
        l.close()?;
        q.execute_command_lists(&[&l])?;
        q.signal(&f, 1)?;
        f.wait(1, Duration::MAX)?;
        Ok(f.completed_value())
    })
    .unwrap();
    for r in runs {
        assert!(r.removal.is_none(), "{}", r.removal.unwrap());
        assert_eq!(r.value.unwrap(), 1);
        assert_eq!(r.virtual_ns, u64::MAX, "the virtual clock saturated");
    }
}
