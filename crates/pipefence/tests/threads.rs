//! D7: no engine or worker thread survives a removed (or dropped) device. A test binary of its
//! own, so that other tests' devices do not disturb the count of `/proc/self/task`.

use pipefence::*;
use std::thread;
use std::time::{Duration, Instant};

/// Threads of this process named like a device's engine (`pfN-qM`) or worker (`pfN-wM`).
fn device_threads() -> Vec<String> {
    let mut names = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return names;
    };
    for e in dir.flatten() {
        if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
            let comm = comm.trim().to_string();
            if comm.starts_with("pf") && (comm.contains("-q") || comm.contains("-w")) {
                names.push(comm);
            }
        }
    }
    names.sort();
    names
}

fn wait_for_count(n: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let t = device_threads();
        if t.len() == n || start.elapsed() > Duration::from_secs(10) {
            return t;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn d7_no_thread_survives_removal_or_drop() {
    if !std::path::Path::new("/proc/self/task").exists() {
        eprintln!("skipped: no /proc/self/task on this platform");
        return;
    }
    // Removal by a hang.
    let d = Device::new(DeviceDesc {
        workers: 3,
        watchdog_timeout: Duration::from_millis(100),
        ..DeviceDesc::default()
    })
    .unwrap();
    let m = d.create_buffer(&BufferDesc::new(64, Heap::Shared)).unwrap();
    let q1 = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "a"))
        .unwrap();
    let _q2 = d
        .create_queue(&QueueDesc::new(QueueKind::Copy, "b"))
        .unwrap();
    assert_eq!(wait_for_count(5).len(), 5, "{:?}", device_threads());
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.dispatch(&Kernel::spin(20_000_000_000), 1).wait_value32(
        m.address(0),
        Comparison::Equal,
        1,
        u32::MAX,
        WaitEngine::Me,
    );
    l.close().unwrap();
    q1.execute_command_lists(&[&l]).unwrap();
    let start = Instant::now();
    while !d.is_removed() && start.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(d.is_removed());
    // The handles are still alive: the threads must exit because of the removal alone.
    let left = wait_for_count(0);
    assert!(left.is_empty(), "threads survived removal: {left:?}");

    // Dropping every handle of a working device also stops its threads.
    let d2 = Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap();
    let q = d2
        .create_queue(&QueueDesc::new(QueueKind::Direct, "g"))
        .unwrap();
    assert_eq!(wait_for_count(3).len(), 3);
    drop(q);
    drop(d2);
    let left = wait_for_count(0);
    assert!(left.is_empty(), "threads survived drop: {left:?}");
    drop(l);
}
