//! Hang detection and removal reports: D6, D7, H1, E4 (`docs/semantics.md`).

mod common;

use common::{list, queue, shared, wait_removed};
use pipefence::diagnose::{Classification, WriterReport};
use pipefence::*;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

fn device_tdr(ms: u64) -> Device {
    Device::new(DeviceDesc {
        workers: 2,
        watchdog_timeout: Duration::from_millis(ms),
        ..DeviceDesc::default()
    })
    .unwrap()
}

/// Waits until every queue has reached the condition it blocks on (nothing progresses).
fn settle() {
    thread::sleep(Duration::from_millis(50));
}

#[test]
fn d7_fence_deadlock_declared_hung_reports_cycle_and_fields() {
    let d = device_tdr(2000);
    let a = d.create_fence(&FenceDesc::new(0).named("a")).unwrap();
    let b = d.create_fence(&FenceDesc::new(0).named("b")).unwrap();
    let q1 = queue(&d, QueueKind::Compute, "q1");
    let q2 = queue(&d, QueueKind::Compute, "q2");
    q1.wait(&b, 1).unwrap();
    q1.signal(&a, 1).unwrap();
    q2.wait(&a, 1).unwrap();
    q2.signal(&b, 1).unwrap();
    settle();
    assert!(!d.is_removed(), "a fence wait is not a GPU hang by default");
    let r = d.tools().declare_hung();
    assert_eq!(d.removed_reason(), Some(RemovalReason::Hung));
    assert_eq!(r.hresult, "0x887A0006");
    assert_eq!(r.classification, Some(Classification::Deadlock));
    assert_eq!(r.cycle, vec!["q1", "q2"]);
    assert_eq!(r.queues.len(), 2);
    let (r1, r2) = (&r.queues[0], &r.queues[1]);
    assert_eq!(r1.queue, "q1");
    assert_eq!(r1.class, Classification::Deadlock);
    assert_eq!(r1.waiting_for.as_deref(), Some("fence b >= 1"));
    assert_eq!(r1.current, Some(0));
    assert_eq!(r1.last_writer, Some(WriterReport::Never));
    assert_eq!(
        r1.at
            .as_ref()
            .map(|s| (s.op.as_str(), s.submission, s.list.clone())),
        Some(("wait", 0, None))
    );
    assert_eq!(r1.waits_on, vec!["q2"]);
    assert_eq!(r2.waiting_for.as_deref(), Some("fence a >= 1"));
    assert_eq!(r2.at.as_ref().map(|s| s.submission), Some(0));
    // Report values were taken before the fences were forced to u64::MAX.
    assert_eq!(a.completed_value(), u64::MAX);
    let json = serde_json::to_value(&*r).unwrap();
    assert_eq!(json["classification"], "deadlock");
    assert_eq!(json["reason"], "hung");
    assert_eq!(json["cycle"][1], "q2");
    // No source lines from the Rust API: the key is left out.
    assert_eq!(json["queues"][0]["at"]["op"], "wait");
    assert!(json["queues"][0]["at"].get("line").is_none());
}

#[test]
fn d6_fence_wait_timeout_is_opt_in() {
    let d = Device::new(DeviceDesc {
        workers: 1,
        watchdog_timeout: Duration::from_millis(100),
        fence_wait_timeout: Some(Duration::from_millis(100)),
        ..DeviceDesc::default()
    })
    .unwrap();
    let f = d.create_fence(&FenceDesc::new(0).named("never")).unwrap();
    let q = queue(&d, QueueKind::Direct, "gfx");
    q.wait(&f, 1).unwrap();
    let r = wait_removed(&d, T);
    assert_eq!(r.classification, Some(Classification::WaitingOnHost));
    assert_eq!(r.queues[0].waiting_for.as_deref(), Some("fence never >= 1"));
}

#[test]
fn d6_memory_wait_deadlock_removed_by_watchdog_with_cycle_order() {
    let d = device_tdr(200);
    let m = shared(&d, "m", 64);
    // Created in this order: c, a, b. Edges: c -> b (b writes m+8), b -> a, a -> c; the
    // cycle is listed from c, the earliest-created queue on it.
    let qc = queue(&d, QueueKind::Compute, "c");
    let qa = queue(&d, QueueKind::Compute, "a");
    let qb = queue(&d, QueueKind::Direct, "b");
    let la = list(&d, QueueKind::Compute, "la", |l| {
        l.wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
            .write_value32_top_of_pipe(m.address(4), 1, WriteSource::Value);
    });
    let lb = list(&d, QueueKind::Direct, "lb", |l| {
        l.wait_value32(
            m.address(4),
            Comparison::GreaterEqual,
            1,
            u32::MAX,
            WaitEngine::Pfp,
        )
        .write_value32_bottom_of_pipe(m.address(8), 7, Flush::NONE, WriteSource::Value);
    });
    let lc = list(&d, QueueKind::Compute, "lc", |l| {
        l.wait_value64(m.address(8), Comparison::Equal, 7, 0xff, WaitEngine::Me)
            .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    qa.execute_command_lists(&[&la]).unwrap();
    qb.execute_command_lists(&[&lb]).unwrap();
    qc.execute_command_lists(&[&lc]).unwrap();
    let start = Instant::now();
    let r = wait_removed(&d, T);
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "removed before the watchdog timeout"
    );
    assert_eq!(r.reason, RemovalReason::Hung);
    assert_eq!(r.classification, Some(Classification::Deadlock));
    assert_eq!(r.cycle, vec!["c", "b", "a"]);
    let c = r.queues.iter().find(|q| q.queue == "c").unwrap();
    assert_eq!(c.waiting_for.as_deref(), Some("m+8 (u64) & 0xff == 7"));
    assert_eq!(c.stage.as_deref(), Some("me"));
    let b = r.queues.iter().find(|q| q.queue == "b").unwrap();
    assert_eq!(b.stage.as_deref(), Some("pfp"));
    assert_eq!(b.waiting_for.as_deref(), Some("m+4 (u32) >= 1"));
    let at = b.at.clone().unwrap();
    assert_eq!(
        (at.list.as_deref(), at.command, at.op.as_str()),
        (Some("lb"), Some(0), "wait-value32")
    );
}

#[test]
fn d7_waiting_on_host_names_last_host_writer() {
    let d = device_tdr(150);
    let m = shared(&d, "flags", 64);
    thread::Builder::new()
        .name("poker".into())
        .spawn({
            let m = m.clone();
            move || {
                pipefence::host::set_current_name("poker");
                m.write_u32(16, 5).unwrap();
            }
        })
        .unwrap()
        .join()
        .unwrap();
    let q = queue(&d, QueueKind::Compute, "async");
    let l = list(&d, QueueKind::Compute, "consume", |l| {
        l.begin_event("frame")
            .begin_event("wait-flag")
            .set_marker("x")
            .wait_value32(
                m.address(16),
                Comparison::Equal,
                6,
                u32::MAX,
                WaitEngine::Me,
            )
            .end_event()
            .end_event();
    });
    q.execute_command_lists(&[&l]).unwrap();
    let r = wait_removed(&d, T);
    assert_eq!(r.classification, Some(Classification::WaitingOnHost));
    assert!(r.cycle.is_empty());
    let qr = &r.queues[0];
    assert_eq!(qr.events, vec!["frame", "wait-flag"], "breadcrumbs");
    assert_eq!(
        qr.at.as_ref().and_then(|s| s.command),
        Some(3),
        "the exact command"
    );
    assert_eq!(qr.current, Some(5));
    match &qr.last_writer {
        Some(WriterReport::Host { host, .. }) => assert_eq!(host, "poker"),
        other => panic!("{other:?}"),
    }
    assert_eq!(qr.last_completed.as_ref().and_then(|s| s.command), Some(2));
}

#[test]
fn d7_last_writer_names_queue_list_and_command() {
    let d = device_tdr(150);
    let m = shared(&d, "m", 64);
    let w = queue(&d, QueueKind::Direct, "gfx");
    let lw = list(&d, QueueKind::Direct, "produce", |l| {
        l.set_marker("a")
            .set_marker("b")
            .write_value64_bottom_of_pipe(m.address(8), 2, Flush::L2_WRITEBACK, WriteSource::Value);
    });
    w.execute_command_lists(&[&lw]).unwrap();
    w.wait_idle(T).unwrap();
    let q = queue(&d, QueueKind::Compute, "async");
    let l = list(&d, QueueKind::Compute, "consume", |l| {
        l.wait_value64(
            m.address(8),
            Comparison::GreaterEqual,
            3,
            u64::MAX,
            WaitEngine::Pfp,
        );
    });
    q.execute_command_lists(&[&l]).unwrap();
    let r = wait_removed(&d, T);
    let qr = r.queues.iter().find(|q| q.queue == "async").unwrap();
    match &qr.last_writer {
        Some(WriterReport::Queue { site, .. }) => {
            assert_eq!(site.queue, "gfx");
            assert_eq!(site.list.as_deref(), Some("produce"));
            assert_eq!(site.command, Some(2));
            assert_eq!(site.op, "write-value64-bop");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        qr.last_writer.as_ref().unwrap().to_string(),
        "queue gfx, list produce, command 2 (write-value64-bop)"
    );
}

#[test]
fn d7_last_writer_of_a_32_bit_wait_is_the_writer_of_its_own_word() {
    // The queue writes m+16; the host then writes m+20, the other half of the same 8-byte
    // word. A 32-bit wait on m+16 names the queue's write, a 64-bit wait on m+16 the newer
    // of the two (the host's).
    let d = device_tdr(150);
    let m = shared(&d, "m", 64);
    let w = queue(&d, QueueKind::Direct, "gfx");
    let lw = list(&d, QueueKind::Direct, "produce", |l| {
        l.write_value32_top_of_pipe(m.address(16), 1, WriteSource::Value);
    });
    w.execute_command_lists(&[&lw]).unwrap();
    w.wait_idle(T).unwrap();
    m.write_u32(20, 7).unwrap();
    let q32 = queue(&d, QueueKind::Compute, "wait32");
    let l32 = list(&d, QueueKind::Compute, "c32", |l| {
        l.wait_value32(
            m.address(16),
            Comparison::Equal,
            5,
            u32::MAX,
            WaitEngine::Me,
        );
    });
    let q64 = queue(&d, QueueKind::Compute, "wait64");
    let l64 = list(&d, QueueKind::Compute, "c64", |l| {
        l.wait_value64(
            m.address(16),
            Comparison::Equal,
            5,
            u64::MAX,
            WaitEngine::Me,
        );
    });
    q32.execute_command_lists(&[&l32]).unwrap();
    q64.execute_command_lists(&[&l64]).unwrap();
    let r = wait_removed(&d, T);
    let of = |name: &str| {
        r.queues
            .iter()
            .find(|q| q.queue == name)
            .and_then(|q| q.last_writer.clone())
    };
    match of("wait32") {
        Some(WriterReport::Queue { site, .. }) => {
            assert_eq!(site.queue, "gfx");
            assert_eq!(site.op, "write-value32-top");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(of("wait64"), Some(WriterReport::Host { .. })),
        "{:?}",
        of("wait64")
    );
}

/// Every row of the D6 table, with its boundaries.
#[test]
fn d6_never_satisfiable_table_every_row() {
    use Comparison::*;
    let cases: &[(Comparison, u64, u64, bool)] = &[
        (Never, u64::MAX, 0, true),
        (Less, u64::MAX, 0, true),
        (Less, u64::MAX, 1, false),
        (Equal, 0x0f, 0x10, true),
        (Equal, 0x0f, 0x0f, false),
        (NotEqual, 0, 0, true),
        (NotEqual, 0, 1, false),
        (NotEqual, 1, 0, false),
        (Greater, 0xff, 0xff, true),
        (Greater, 0xff, 0xfe, false),
        (Greater, 0, 0, true),
        (GreaterEqual, 0xff, 0x100, true),
        (GreaterEqual, 0xff, 0xff, false),
        (LessEqual, 0, 0, false),
        (Always, 0, 0, false),
    ];
    for &(cmp, mask, r, ns) in cases {
        assert_eq!(
            cmp.never_satisfiable(mask, r),
            ns,
            "{cmp:?} mask {mask:#x} ref {r:#x}"
        );
    }
}

#[test]
fn d6_never_satisfiable_wait_removes_at_once() {
    // A long watchdog: removal must not wait for it.
    let cases: &[(Comparison, u32, u32)] = &[
        (Comparison::Never, u32::MAX, 0),
        (Comparison::Less, u32::MAX, 0),
        (Comparison::Equal, 0x0f, 0x10),
        (Comparison::NotEqual, 0, 0),
        (Comparison::Greater, 0xff, 0xff),
        (Comparison::GreaterEqual, 0xff, 0x100),
    ];
    for &(cmp, mask, r) in cases {
        let d = device_tdr(60_000);
        let m = shared(&d, "m", 64);
        let q = queue(&d, QueueKind::Compute, "q");
        let l = list(&d, QueueKind::Compute, "l", |l| {
            l.set_marker("a")
                .wait_value32(m.address(0), cmp, r, mask, WaitEngine::Me);
        });
        q.execute_command_lists(&[&l]).unwrap();
        let rep = wait_removed(&d, Duration::from_secs(5));
        assert_eq!(
            rep.classification,
            Some(Classification::NeverSatisfiable),
            "{cmp:?}"
        );
        let f = rep.fault.as_ref().unwrap();
        assert_eq!(f.at.command, Some(1));
        assert!(f.message.contains("can never hold"), "{}", f.message);
    }
    // On the PFP too (64-bit, GreaterEqual above the mask).
    let d = device_tdr(60_000);
    let m = shared(&d, "m", 64);
    let q = queue(&d, QueueKind::Direct, "q");
    let l = list(&d, QueueKind::Direct, "l", |l| {
        l.wait_value64(
            m.address(8),
            Comparison::GreaterEqual,
            0x1_0000,
            0xffff,
            WaitEngine::Pfp,
        );
    });
    q.execute_command_lists(&[&l]).unwrap();
    let rep = wait_removed(&d, Duration::from_secs(5));
    assert_eq!(rep.classification, Some(Classification::NeverSatisfiable));
}

#[test]
fn d7_queue_whose_path_ends_at_never_satisfiable_takes_that_class() {
    let d = device_tdr(60_000);
    let m = shared(&d, "m", 64);
    let f = d.create_fence(&FenceDesc::new(0).named("f")).unwrap();
    let waiter = queue(&d, QueueKind::Compute, "waiter");
    let culprit = queue(&d, QueueKind::Compute, "culprit");
    waiter.wait(&f, 1).unwrap();
    settle();
    let l = list(&d, QueueKind::Compute, "bad", |l| {
        l.wait_value32(m.address(0), Comparison::Less, 0, u32::MAX, WaitEngine::Me);
    });
    let gate = d.create_fence(&FenceDesc::new(0)).unwrap();
    culprit.wait(&gate, 1).unwrap();
    culprit.execute_command_lists(&[&l]).unwrap();
    culprit.signal(&f, 1).unwrap();
    gate.signal(1).unwrap();
    let r = wait_removed(&d, Duration::from_secs(5));
    assert_eq!(r.classification, Some(Classification::NeverSatisfiable));
    let w = r.queues.iter().find(|q| q.queue == "waiter").unwrap();
    assert_eq!(w.class, Classification::NeverSatisfiable);
    assert_eq!(w.waits_on, vec!["culprit"]);
}

#[test]
fn d6_endless_kernel_removed_while_other_work_completes() {
    let d = device_tdr(200);
    let q = queue(&d, QueueKind::Compute, "spinner");
    let other = queue(&d, QueueKind::Direct, "busy");
    let m = shared(&d, "m", 64);
    let l = list(&d, QueueKind::Compute, "endless", |l| {
        l.begin_event("loop")
            .dispatch(&Kernel::spin(30_000_000_000), 1)
            .end_event();
    });
    q.execute_command_lists(&[&l]).unwrap();
    let tick = list(&d, QueueKind::Direct, "tick", |l| {
        l.write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    let start = Instant::now();
    while !d.is_removed() && start.elapsed() < T {
        let _ = other.execute_command_lists(&[&tick]);
        thread::sleep(Duration::from_millis(5));
    }
    let r = wait_removed(&d, T);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(r.classification, Some(Classification::EndlessKernel));
    let f = r.fault.as_ref().unwrap();
    assert_eq!(
        (f.at.queue.as_str(), f.at.command, f.at.op.as_str()),
        ("spinner", Some(1), "dispatch")
    );
    assert!(f.message.contains("spin"), "{}", f.message);
}

#[test]
fn d6_watchdog_never_fires_on_long_progressing_workload() {
    let d = device_tdr(100);
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    // 40 short waits, each satisfied by a write 5 ms later: 200 ms in total > 100 ms.
    let l = list(&d, QueueKind::Compute, "l", |l| {
        for i in 1..=40u32 {
            l.wait_value32(
                m.address(0),
                Comparison::GreaterEqual,
                i,
                u32::MAX,
                WaitEngine::Me,
            )
            .dispatch(&Kernel::spin(1_000_000), 1);
        }
    });
    q.execute_command_lists(&[&l]).unwrap();
    for i in 1..=40u32 {
        thread::sleep(Duration::from_millis(5));
        m.write_u32(0, i).unwrap();
    }
    q.wait_idle(T).unwrap();
    assert!(!d.is_removed(), "{:?}", d.removal_report());
}

#[test]
fn d7_page_fault_report_and_other_queue_running() {
    let d = device_tdr(2000);
    let up = d
        .create_buffer(&BufferDesc::new(64, Heap::Upload).named("up"))
        .unwrap();
    let m = shared(&d, "m", 64);
    let busy = queue(&d, QueueKind::Compute, "busy");
    let spin = list(&d, QueueKind::Compute, "spin", |l| {
        l.dispatch(&Kernel::spin(300_000_000), 1);
    });
    busy.execute_command_lists(&[&spin]).unwrap();
    settle();
    let q = queue(&d, QueueKind::Direct, "gfx");
    let l = list(&d, QueueKind::Direct, "bad", |l| {
        l.write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value)
            .write_value32_bottom_of_pipe(up.address(4), 1, Flush::NONE, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    let r = wait_removed(&d, T);
    assert_eq!(r.reason, RemovalReason::PageFault);
    assert_eq!(r.classification, Some(Classification::PageFault));
    let f = r.fault.as_ref().unwrap();
    assert_eq!(
        f.address.as_deref(),
        Some(format!("{:#x}", up.address(4)).as_str())
    );
    assert_eq!(f.access.as_deref(), Some("write"));
    assert_eq!(f.buffer.as_deref(), Some("up"));
    assert_eq!(
        (f.at.op.as_str(), f.at.command),
        ("write-value32-bop", Some(1))
    );
    let b = r.queues.iter().find(|q| q.queue == "busy").unwrap();
    assert_eq!(b.class, Classification::Running);
    // CPU reads still work after removal.
    assert_eq!(m.read_u32(0).unwrap(), 1);
}

#[test]
fn d7_malformed_packet_reports_offset() {
    let d = device_tdr(2000);
    let q = queue(&d, QueueKind::Compute, "q");
    let victim = list(&d, QueueKind::Compute, "victim", |l| {
        l.set_marker("ok").set_marker("also ok");
    });
    let (addr, _) = victim.stream_address().unwrap();
    // Corrupt the second packet's header: find it by the length of the first.
    let first_len = pipefence::command::encode(&victim.commands()[..1]).len() as u64;
    let target = addr + first_len * 4;
    let vandal = list(&d, QueueKind::Compute, "vandal", |l| {
        l.dispatch(
            &Kernel::User(UserKernel::new("scribble", move |ctx| {
                ctx.write_u32(target, 0x00FF_00FF)
            })),
            1,
        );
    });
    q.execute_command_lists(&[&vandal]).unwrap();
    q.execute_command_lists(&[&victim]).unwrap();
    let r = wait_removed(&d, T);
    assert_eq!(r.reason, RemovalReason::Hung);
    assert_eq!(r.classification, Some(Classification::MalformedPacket));
    let f = r.fault.as_ref().unwrap();
    assert_eq!(f.packet_offset, Some(first_len as usize));
    assert_eq!(f.at.command, Some(1));
    assert_eq!(f.at.list.as_deref(), Some("victim"));
}

#[test]
fn d7_removal_is_idempotent_first_reason_wins() {
    let d = device_tdr(2000);
    let m = shared(&d, "m", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.write_value32_top_of_pipe(m.address(64), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    let r = wait_removed(&d, T);
    d.remove();
    let again = d.tools().declare_hung();
    assert_eq!(d.removed_reason(), Some(RemovalReason::PageFault));
    assert!(Arc::ptr_eq(&r, &again));
}

#[test]
fn d7_hang_in_one_device_leaves_another_working() {
    let bad = device_tdr(100);
    let good = device_tdr(2000);
    let m = shared(&bad, "m", 64);
    let q = queue(&bad, QueueKind::Compute, "q");
    let l = list(&bad, QueueKind::Compute, "l", |l| {
        l.wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.execute_command_lists(&[&l]).unwrap();
    wait_removed(&bad, T);
    let g = good.create_fence(&FenceDesc::new(0)).unwrap();
    let gq = queue(&good, QueueKind::Direct, "gq");
    gq.signal(&g, 3).unwrap();
    g.wait(3, T).unwrap();
    assert!(!good.is_removed());
}

#[test]
fn f10_removal_releases_cpu_waiters_of_a_hung_device() {
    let d = device_tdr(100);
    let m = shared(&d, "m", 64);
    let f = d.create_fence(&FenceDesc::new(0)).unwrap();
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me);
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&f, 1).unwrap();
    let e = f.wait(1, T).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DeviceRemoved {
                reason: RemovalReason::Hung,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(f.completed_value(), u64::MAX);
    let e2 = m
        .wait_u32(0, Comparison::Equal, 1, u32::MAX, T)
        .unwrap_err();
    assert!(e2.is_device_removed());
}

/// D6, H1: a hang declared while a queue only runs a dispatch (no wait stuck) is an endless
/// kernel, never an unclassified report. The dispatch is known to be in flight: the list's
/// top-of-pipe write after it has landed.
#[test]
fn d7_declared_hang_during_a_dispatch_is_classified_endless_kernel() {
    let d = device_tdr(10_000);
    let q = queue(&d, QueueKind::Compute, "q");
    let m = shared(&d, "m", 64);
    let l = list(&d, QueueKind::Compute, "long", |l| {
        l.dispatch(&Kernel::spin(2_000_000_000), 1)
            .write_value32_top_of_pipe(m.address(0), 1, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    m.wait_u32(0, Comparison::Equal, 1, u32::MAX, T).unwrap();
    let r = d.tools().declare_hung();
    assert_eq!(r.classification, Some(Classification::EndlessKernel), "{r}");
    assert_eq!(r.queues[0].class, Classification::EndlessKernel);
}

/// E3, D7: a user kernel that panics is caught at the group on both drivers: the device is
/// removed at once (not after the watchdog), the report names the kernel, the dispatch and the
/// panic's message (class `kernel-panic`), and no caller sees the panic unwind.
#[test]
fn e3_panicking_user_kernel_removes_the_device_with_a_report() {
    fn body(d: &Device) -> Result<Arc<RemovalReport>> {
        let q = d.create_queue(&QueueDesc::new(QueueKind::Compute, "q"))?;
        let done = d.create_fence(&FenceDesc::new(0).named("done"))?;
        let mut l = d.create_command_list(&CommandListDesc::new(QueueKind::Compute, "boom"))?;
        l.set_marker("before").dispatch(
            &Kernel::User(UserKernel::new("explodes", |ctx| {
                if ctx.group() == 2 {
                    panic!("bad index {}", ctx.group());
                }
            })),
            4,
        );
        l.close()?;
        q.execute_command_lists(&[&l])?;
        // The removal may come before either call (deterministic schedules): each fails as
        // removed, none unwinds.
        let signalled = q.signal(&done, 1);
        assert!(signalled.is_ok() || signalled.as_ref().is_err_and(Error::is_device_removed));
        let waited = done.wait(1, T);
        assert!(waited.is_err_and(|e| e.is_device_removed()));
        Ok(d.removal_report().expect("removed"))
    }
    let check = |r: &RemovalReport| {
        assert_eq!(r.reason, RemovalReason::Hung);
        assert_eq!(r.classification, Some(Classification::KernelPanic), "{r}");
        let f = r.fault.as_ref().expect("fault");
        assert_eq!(f.kind, Classification::KernelPanic);
        assert_eq!(
            f.message,
            "group 2 of kernel `explodes` panicked: bad index 2"
        );
        assert_eq!(f.at.op, "dispatch");
        assert_eq!(f.at.command, Some(1));
    };
    // Threaded: a 60 s watchdog, so only the catch can remove it within the test's bound.
    let d = Device::new(DeviceDesc {
        watchdog_timeout: Duration::from_secs(60),
        ..DeviceDesc::default()
    })
    .unwrap();
    let start = Instant::now();
    check(&body(&d).unwrap());
    assert!(start.elapsed() < Duration::from_secs(30));
    let runs = pipefence::explore::explore(&DeviceDesc::default(), 0..10, body).unwrap();
    for r in runs {
        check(&r.value.unwrap());
    }
}

/// D7: a never-satisfiable wait's queue entry says what it waits for, the current value and the
/// last writer, like any stuck wait (they were empty), for an ME and a PFP wait.
#[test]
fn d7_never_satisfiable_queue_entry_has_condition_value_and_writer() {
    for (engine, kind, stage) in [
        (WaitEngine::Me, QueueKind::Compute, "me"),
        (WaitEngine::Pfp, QueueKind::Direct, "pfp"),
    ] {
        let d = device_tdr(60_000);
        let m = shared(&d, "m", 64);
        m.write_u32(0, 5).unwrap();
        let q = queue(&d, kind, "q");
        let l = list(&d, kind, "l", |l| {
            l.wait_value32(m.address(0), Comparison::GreaterEqual, 0x100, 0xff, engine);
        });
        q.execute_command_lists(&[&l]).unwrap();
        let rep = wait_removed(&d, Duration::from_secs(5));
        let e = &rep.queues[0];
        assert_eq!(e.class, Classification::NeverSatisfiable);
        assert_eq!(
            e.waiting_for.as_deref(),
            Some("m (u32) & 0xff >= 256"),
            "{rep}"
        );
        assert_eq!(e.current, Some(5));
        assert!(
            matches!(e.last_writer, Some(WriterReport::Host { .. })),
            "{:?}",
            e.last_writer
        );
        assert_eq!(e.stage.as_deref(), Some(stage));
        assert_eq!(e.buffer.as_deref(), Some("m"));
    }
}

/// D7: a hang declared while a queue's dispatch still runs (the scenario runner's monitor, H1,
/// can win the race with the engine's own watchdog) names that dispatch and the labels open at
/// it, as the endless-kernel fault does, not the ME's position past its `end_event`.
#[test]
fn d7_declared_hang_with_a_running_dispatch_names_it_and_its_labels() {
    let d = device_tdr(60_000);
    let q = queue(&d, QueueKind::Compute, "q");
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.begin_event("long")
            .dispatch(&Kernel::spin(30_000_000_000), 1)
            .end_event();
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    // Wait until the ME has executed the `end_event` after the dispatch it launched.
    let start = Instant::now();
    while q.stats().commands < 2 {
        assert!(start.elapsed() < T, "the ME did not pass the dispatch");
        thread::sleep(Duration::from_millis(1));
    }
    let r = d.tools().declare_hung();
    assert_eq!(r.classification, Some(Classification::EndlessKernel), "{r}");
    let qr = &r.queues[0];
    assert_eq!(qr.events, ["long"], "{r}");
    let at = qr.at.as_ref().expect("at");
    assert_eq!(
        (at.list.as_deref(), at.command),
        (Some("l"), Some(1)),
        "{r}"
    );
}

/// D6, D7: a hang removed without a fault of its own while a dispatch group is an endless
/// kernel (longer than the watchdog timeout, or costing more) reports that kernel as the fault
/// on every driver, and a queue waiting on memory the kernel's queue would write takes its
/// class. On the threaded driver the scenario runner's monitor (`declare_hung`, H1) or another
/// engine's memory-value watchdog may win the race against the kernel's own watchdog; the
/// report said `fault: null` then, and the waiting queue `running`. Whichever side wins, the
/// report is the one the deterministic driver and strict mode give.
#[test]
fn d7_hang_behind_an_endless_kernel_reports_that_fault_on_every_driver() {
    /// `a` runs the kernel under `begin_event("long")`, then writes `m+0`; `b` writes `m+4`,
    /// then waits for `m+0`. The host waits until `b` has run its first write.
    fn submit(d: &Device, spin_ns: u64) -> (Queue, Buffer) {
        let a = queue(d, QueueKind::Compute, "a");
        let b = queue(d, QueueKind::Compute, "b");
        let m = shared(d, "m", 64);
        let long = list(d, QueueKind::Compute, "long", |l| {
            l.begin_event("long")
                .dispatch(&Kernel::spin(spin_ns), 1)
                .end_event()
                .write_value32_bottom_of_pipe(m.address(0), 1, Flush::NONE, WriteSource::Value);
        });
        let waiter = list(d, QueueKind::Compute, "waiter", |l| {
            l.begin_event("w")
                .write_value32_top_of_pipe(m.address(4), 1, WriteSource::Value)
                .wait_value32(m.address(0), Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
                .end_event();
        });
        b.execute_command_lists(&[&waiter]).unwrap();
        m.wait_u32(4, Comparison::Equal, 1, u32::MAX, T).unwrap();
        a.execute_command_lists(&[&long]).unwrap();
        (a, m)
    }
    let check = |how: &str, r: &RemovalReport| {
        assert_eq!(
            r.classification,
            Some(Classification::EndlessKernel),
            "{how}: {r}"
        );
        let f = r.fault.as_ref().expect("an endless-kernel fault");
        assert_eq!(f.kind, Classification::EndlessKernel, "{how}: {r}");
        assert_eq!(
            (f.at.queue.as_str(), f.at.list.as_deref(), f.at.command),
            ("a", Some("long"), Some(1)),
            "{how}: {r}"
        );
        let a = r.queues.iter().find(|q| q.queue == "a").expect("a");
        assert_eq!(a.class, Classification::EndlessKernel, "{how}: {r}");
        assert_eq!(a.events, ["long"], "{how}: {r}");
        let last = a
            .last_completed
            .as_ref()
            .map(|s| (s.op.as_str(), s.command));
        assert_eq!(last, Some(("begin-event", Some(0))), "{how}: {r}");
        // `b` is at its wait, or (deterministic schedules) the kernel's removal came first.
        let b = r.queues.iter().find(|q| q.queue == "b").expect("b");
        if b.stage.is_some() {
            assert_eq!(b.class, Classification::EndlessKernel, "{how}: {r}");
            assert_eq!(b.stage.as_deref(), Some("me"), "{how}: {r}");
            assert_eq!(b.waiting_for.as_deref(), Some("m (u32) == 1"), "{how}: {r}");
            assert_eq!(b.current, Some(0), "{how}: {r}");
            assert_eq!(b.waits_on, ["a"], "{how}: {r}");
            assert_eq!(b.events, ["w"], "{how}: {r}");
        } else {
            assert_eq!(b.class, Classification::Running, "{how}: {r}");
        }
    };
    // Threaded, the hang declared (the scenario runner's monitor): with a 60 s watchdog no
    // engine's own watchdog can fire first; the kernel costs more than the timeout.
    let d = device_tdr(60_000);
    let (a, _m) = submit(&d, 120_000_000_000);
    let start = Instant::now();
    while a.stats().commands < 3 {
        assert!(start.elapsed() < T, "the ME of a did not pass the dispatch");
        thread::sleep(Duration::from_millis(1));
    }
    settle();
    check("threaded, declared", &d.tools().declare_hung());
    // Declared while the kernel has run less than the timeout and costs less: no fault, but the
    // queue running it is still the endless kernel (H1), and the queue waiting on it takes
    // that class too (it was `running`, behind a queue classified `endless-kernel`).
    let d = device_tdr(60_000);
    let (a, _m) = submit(&d, 30_000_000_000);
    let start = Instant::now();
    while a.stats().commands < 3 {
        assert!(start.elapsed() < T, "the ME of a did not pass the dispatch");
        thread::sleep(Duration::from_millis(1));
    }
    settle();
    let r = d.tools().declare_hung();
    assert_eq!(r.classification, Some(Classification::EndlessKernel), "{r}");
    assert!(r.fault.is_none(), "{r}");
    let (qa, qb) = (&r.queues[0], &r.queues[1]);
    assert_eq!(qa.class, Classification::EndlessKernel, "{r}");
    assert_eq!(qa.events, ["long"], "{r}");
    if qb.stage.is_some() {
        assert_eq!(qb.class, Classification::EndlessKernel, "{r}");
        assert_eq!(qb.waiting_for.as_deref(), Some("m (u32) == 1"), "{r}");
    }
    // Threaded, the engines' watchdogs race: the kernel's own, and b's memory-value wait's.
    let d = device_tdr(200);
    let _keep = submit(&d, 10_000_000_000);
    check("threaded, watchdog", &wait_removed(&d, T));
    // Deterministic and strict: the endless kernel's removal is an action of its own (D6).
    for memory_model in [MemoryModel::Plain, MemoryModel::Strict] {
        let base = DeviceDesc {
            watchdog_timeout: Duration::from_secs(60),
            memory_model,
            ..DeviceDesc::default()
        };
        let runs = pipefence::explore::explore(&base, 0..8, |d| {
            let _keep = submit(d, 120_000_000_000);
            let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
            assert!(done.wait(1, T).unwrap_err().is_device_removed());
        })
        .unwrap();
        for run in runs {
            let r = run.removal.expect("removed");
            check(&format!("{memory_model:?} seed {}", run.seed), &r);
        }
    }
}

/// D6, E4: a tool's stop flag (`DeviceDesc::interrupt`, a runner's Ctrl-C) ends a long
/// deterministic schedule at the driver's next step: the device is removed as requested, with
/// the report of what waited on what, instead of running the rest of the schedule first.
#[test]
fn d6_interrupt_flag_removes_a_deterministic_device_at_its_next_step() {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = Device::new(DeviceDesc {
        driver: Driver::Deterministic {
            seed: 3,
            strategy: Strategy::Random,
        },
        memory_model: MemoryModel::Strict,
        interrupt: Some(flag.clone()),
        ..DeviceDesc::default()
    })
    .unwrap();
    let q = queue(&d, QueueKind::Compute, "q");
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let l = list(&d, QueueKind::Compute, "l", |l| {
        for _ in 0..2000 {
            l.dispatch(&Kernel::spin(1), 1);
        }
    });
    q.execute_command_lists(&[&l]).unwrap();
    q.signal(&done, 1).unwrap();
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = done.wait(1, T).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DeviceRemoved {
                reason: RemovalReason::Requested,
                ..
            }
        ),
        "{e}"
    );
    let r = d.removal_report().expect("report");
    assert_eq!(r.reason, RemovalReason::Requested);
    assert!(
        q.stats().commands < 2000,
        "the schedule ran to its end first"
    );
}

/// F10: a CPU waiter that removal releases reads `u64::MAX` from every fence, also from those
/// removal has not forced yet. Removal forces the fences one by one; before, a waiter released
/// by the first could read a later one's old value. Many fences and rounds widen that window.
#[test]
fn f10_a_waiter_released_by_removal_reads_max_from_every_fence() {
    for round in 0..40 {
        let d = device_tdr(10_000);
        let fences: Vec<Fence> = (0..256)
            .map(|i| {
                d.create_fence(&FenceDesc::new(0).named(&format!("f{i}")))
                    .unwrap()
            })
            .collect();
        let waiter = {
            let fences = fences.clone();
            thread::spawn(move || {
                let e = fences[0].wait(1, T).unwrap_err();
                assert!(e.is_device_removed(), "{e}");
                fences
                    .iter()
                    .filter(|f| f.completed_value() != u64::MAX)
                    .map(|f| f.name().to_string())
                    .collect::<Vec<_>>()
            })
        };
        // Removal happens while the waiter is (almost always) blocked; either way it must
        // see every fence at u64::MAX once its wait returns.
        thread::sleep(Duration::from_millis(2));
        d.remove();
        let not_max = waiter.join().unwrap();
        assert!(
            not_max.is_empty(),
            "round {round}: read below u64::MAX after removal: {not_max:?}"
        );
    }
}
