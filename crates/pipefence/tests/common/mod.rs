//! Helpers shared by the integration tests: object creation that unwraps, and the process's
//! memory figures. Each test binary uses some of them.
#![allow(dead_code)]

use pipefence::*;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A queue of `kind` named `name`.
pub fn queue(d: &Device, kind: QueueKind, name: &str) -> Queue {
    d.create_queue(&QueueDesc::new(kind, name)).unwrap()
}

/// A closed command list of `kind` named `name`, recorded by `f`.
pub fn list(
    d: &Device,
    kind: QueueKind,
    name: &str,
    f: impl FnOnce(&mut CommandList),
) -> CommandList {
    let mut l = d
        .create_command_list(&CommandListDesc::new(kind, name))
        .unwrap();
    f(&mut l);
    l.close().unwrap();
    l
}

/// A buffer of `size` bytes on `heap` named `name`.
pub fn buffer(d: &Device, name: &str, size: u64, heap: Heap) -> Buffer {
    d.create_buffer(&BufferDesc::new(size, heap).named(name))
        .unwrap()
}

/// A buffer of `size` bytes on the shared heap named `name`.
pub fn shared(d: &Device, name: &str, size: u64) -> Buffer {
    buffer(d, name, size, Heap::Shared)
}

/// A fence starting at `initial` named `name`.
pub fn fence(d: &Device, name: &str, initial: u64) -> Fence {
    d.create_fence(&FenceDesc::new(initial).named(name))
        .unwrap()
}

/// The removal report of `d`, once it is removed; fails the test if that takes longer than
/// `within`.
pub fn wait_removed(d: &Device, within: Duration) -> Arc<RemovalReport> {
    let start = Instant::now();
    while !d.is_removed() {
        assert!(
            start.elapsed() < within,
            "device not removed within {within:?}"
        );
        thread::sleep(Duration::from_millis(2));
    }
    d.removal_report().expect("report")
}

/// A figure of this process from `/proc/self/status` in KiB (`VmRSS`: resident set, `VmHWM`:
/// its peak); `None` where there is no such file (not Linux).
pub fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
