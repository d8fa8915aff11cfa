//! Memory rules M1, M2, M4, host helpers H3/H4, and the error rules E1-E3 for CPU access.

mod common;

use common::{list, queue, shared, status_kib};
use pipefence::{
    Buffer, BufferDesc, CommandListDesc, Comparison, Device, DeviceDesc, Error, Flush, Heap,
    Kernel, Misuse, Object, QueueDesc, QueueKind, UserKernel, WaitEngine, WriteSource,
};
use std::thread;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn device() -> Device {
    Device::new(DeviceDesc::default()).unwrap()
}

fn buf(d: &Device, size: u64, heap: Heap) -> Buffer {
    d.create_buffer(&BufferDesc::new(size, heap)).unwrap()
}

#[test]
fn m1_base_addresses_nonzero_aligned_disjoint_with_gaps() {
    let d = device();
    let bufs: Vec<Buffer> = [4u64, 256, 1000, 4096, 8, 65536]
        .iter()
        .map(|s| buf(&d, *s, Heap::Shared))
        .collect();
    for b in &bufs {
        assert_ne!(b.gpu_address(), 0);
        assert_eq!(b.gpu_address() % 256, 0, "{:#x}", b.gpu_address());
    }
    for w in bufs.windows(2) {
        let end = w[0].gpu_address() + w[0].size();
        assert!(w[1].gpu_address() > end, "no gap after {}", w[0].name());
    }
}

#[test]
fn m1_cpu_access_follows_heap_rules() {
    let d = device();
    let local = buf(&d, 64, Heap::DeviceLocal);
    let upload = buf(&d, 64, Heap::Upload);
    let readback = buf(&d, 64, Heap::Readback);
    let shared = buf(&d, 64, Heap::Shared);
    let e = local.read_u32(0).unwrap_err();
    assert!(matches!(e, Error::InvalidCall(_)), "{e}");
    assert!(e.to_string().contains("device-local"), "{e}");
    assert!(matches!(local.write_u32(0, 1), Err(Error::InvalidCall(_))));
    upload.write_u32(0, 5).unwrap();
    assert_eq!(upload.read_u32(0).unwrap(), 5);
    assert!(matches!(
        readback.write_u64(0, 1),
        Err(Error::InvalidCall(_))
    ));
    assert_eq!(readback.read_u64(0).unwrap(), 0);
    shared.write_u64(8, 0x1234_5678_9abc_def0).unwrap();
    assert_eq!(shared.read_u64(8).unwrap(), 0x1234_5678_9abc_def0);
    assert_eq!(
        shared.read_u32(8).unwrap(),
        0x9abc_def0,
        "little-endian low half"
    );
    assert_eq!(shared.read_u32(12).unwrap(), 0x1234_5678);
    assert!(!Heap::Upload.gpu_writable());
    assert!(
        Heap::Readback.gpu_writable()
            && Heap::Shared.gpu_writable()
            && Heap::DeviceLocal.gpu_writable()
    );
}

#[test]
fn m2_misaligned_and_out_of_range_accesses_are_invalid_arg() {
    let d = device();
    let b = d
        .create_buffer(&BufferDesc::new(64, Heap::Shared).named("flags"))
        .unwrap();
    let e = b.write_u32(2, 1).unwrap_err();
    assert!(matches!(e, Error::InvalidArg(_)));
    assert!(
        e.to_string().contains("flags") && e.to_string().contains("0x2"),
        "{e}"
    );
    assert!(matches!(b.read_u64(4), Err(Error::InvalidArg(_))));
    let e = b.read_u32(64).unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    assert!(matches!(b.read_u64(60), Err(Error::InvalidArg(_))));
    assert!(matches!(
        b.read_u64(u64::MAX - 7),
        Err(Error::InvalidArg(_))
    ));
}

#[test]
fn m1_buffer_size_must_be_positive_multiple_of_four() {
    let d = device();
    for size in [0u64, 3, 6] {
        let e = d
            .create_buffer(&BufferDesc::new(size, Heap::Shared))
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArg(_)) && e.to_string().contains(&size.to_string()),
            "{e}"
        );
    }
    let e = d
        .create_buffer(&BufferDesc::new(1 << 40, Heap::Shared))
        .unwrap_err();
    assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
    assert_eq!(e.hresult(), 0x8007_000E);
}

#[test]
fn m2_32_and_64_bit_accesses_never_tear() {
    let d = device();
    let b = buf(&d, 16, Heap::Shared);
    let mut ts = Vec::new();
    // Two threads write the two halves of one word with 32-bit stores; a third writes the
    // whole word with 64-bit patterns; readers must only ever see combinations of whole values.
    for half in 0..2u64 {
        let b = b.clone();
        ts.push(thread::spawn(move || {
            for i in 0..20_000u32 {
                let v = if i % 2 == 0 { 0 } else { u32::MAX };
                b.write_u32(half * 4, v).unwrap();
            }
        }));
    }
    let b2 = b.clone();
    ts.push(thread::spawn(move || {
        for i in 0..20_000u64 {
            let v = if i % 2 == 0 { 0 } else { u64::MAX };
            b2.write_u64(8, v).unwrap();
        }
    }));
    for _ in 0..20_000 {
        let lo = b.read_u32(0).unwrap();
        assert!(lo == 0 || lo == u32::MAX);
        let w = b.read_u64(8).unwrap();
        assert!(w == 0 || w == u64::MAX, "torn 64-bit read {w:#x}");
    }
    for t in ts {
        t.join().unwrap();
    }
}

#[test]
fn m2_32_bit_store_preserves_other_half() {
    let d = device();
    let b = buf(&d, 8, Heap::Shared);
    b.write_u64(0, 0xAAAA_AAAA_BBBB_BBBB).unwrap();
    b.write_u32(0, 1).unwrap();
    assert_eq!(b.read_u64(0).unwrap(), 0xAAAA_AAAA_0000_0001);
    b.write_u32(4, 2).unwrap();
    assert_eq!(b.read_u64(0).unwrap(), 0x0000_0002_0000_0001);
}

#[test]
fn m4_cpu_write_wakes_host_waiter_at_once() {
    let d = device();
    let b = buf(&d, 64, Heap::Shared);
    let b2 = b.clone();
    let t = thread::spawn(move || b2.wait_u32(16, Comparison::GreaterEqual, 3, u32::MAX, T));
    thread::sleep(Duration::from_millis(20));
    b.write_u32(16, 2).unwrap();
    b.write_u32(16, 3).unwrap();
    t.join().unwrap().unwrap();
}

#[test]
fn m4_writes_through_atomic_view_are_found_by_polling() {
    let d = device();
    let b = buf(&d, 64, Heap::Shared);
    let view = b.atomic_u64(8).unwrap();
    let b2 = b.clone();
    let t = thread::spawn(move || b2.wait_u64(8, Comparison::Equal, 7, u64::MAX, T));
    thread::sleep(Duration::from_millis(20));
    view.store(7, std::sync::atomic::Ordering::SeqCst);
    t.join().unwrap().unwrap();
    assert!(matches!(b.atomic_u64(4), Err(Error::InvalidArg(_))));
    let local = buf(&d, 64, Heap::DeviceLocal);
    assert!(matches!(local.atomic_u64(0), Err(Error::InvalidCall(_))));
}

#[test]
fn m4_cpu_reads_keep_working_after_removal() {
    let d = device();
    let b = buf(&d, 64, Heap::Shared);
    b.write_u32(0, 42).unwrap();
    d.remove();
    assert_eq!(b.read_u32(0).unwrap(), 42);
    assert_eq!(b.tools().debug_read_u32(0).unwrap(), 42);
}

#[test]
fn h3_host_wait_comparisons_masks_and_timeout() {
    let d = device();
    let b = buf(&d, 64, Heap::Shared);
    b.write_u32(0, 0xF0).unwrap();
    b.wait_u32(0, Comparison::Equal, 0x10, 0x1F, Duration::ZERO)
        .unwrap();
    b.wait_u32(0, Comparison::Less, 1, 0x0F, Duration::ZERO)
        .unwrap();
    let e = b
        .wait_u32(
            0,
            Comparison::Greater,
            0xF0,
            u32::MAX,
            Duration::from_millis(20),
        )
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(e.to_string().contains("> 240"), "{e}");
    assert!(matches!(
        b.wait_u32(0, Comparison::None, 0, 0, Duration::ZERO),
        Err(Error::InvalidArg(_))
    ));
}

#[test]
fn h3_host_wait_released_by_removal() {
    let d = device();
    let b = buf(&d, 64, Heap::Shared);
    let b2 = b.clone();
    let t = thread::spawn(move || b2.wait_u32(0, Comparison::Equal, 1, u32::MAX, T));
    thread::sleep(Duration::from_millis(20));
    d.remove();
    assert!(t.join().unwrap().unwrap_err().is_device_removed());
}

#[test]
fn h4_debug_access_ignores_heap_rules() {
    let d = device();
    let b = d
        .create_buffer(&BufferDesc::new(64, Heap::DeviceLocal).with_init(9))
        .unwrap();
    assert_eq!(b.tools().debug_read_u32(60).unwrap(), 9);
    b.tools().debug_fill(3).unwrap();
    assert_eq!(b.tools().debug_read_u64(8).unwrap(), 0x3_0000_0003);
    b.tools().debug_write_u32(4, 5).unwrap();
    assert_eq!(b.tools().debug_read_u32(4).unwrap(), 5);
    assert!(matches!(
        b.tools().debug_read_u32(64),
        Err(Error::InvalidArg(_))
    ));
}

#[test]
fn e1_every_error_maps_to_its_hresult() {
    let misuse = || Box::new(Misuse::new(Object::Device, None, ""));
    assert_eq!(Error::InvalidArg(misuse()).hresult(), 0x8007_0057);
    assert_eq!(Error::InvalidCall(misuse()).hresult(), 0x887A_0001);
    assert_eq!(Error::OutOfMemory(misuse()).hresult(), 0x8007_000E);
    assert_eq!(Error::NotImplemented(String::new()).hresult(), 0x8000_4001);
    assert_eq!(Error::Fail(String::new()).hresult(), 0x8000_4005);
    let d = Device::new(DeviceDesc::default()).unwrap();
    let f = d.create_fence(&pipefence::FenceDesc::new(0)).unwrap();
    let timeout = f.wait(1, Duration::from_millis(1)).unwrap_err();
    assert_eq!(timeout.hresult(), 0x0000_0102);
    let removed = Error::DeviceRemoved {
        what: String::new(),
        reason: pipefence::RemovalReason::Hung,
    };
    assert_eq!(removed.hresult(), 0x887A_0005);
}

#[test]
fn e2_messages_name_object_and_value() {
    let d = device();
    let b = d
        .create_buffer(&BufferDesc::new(16, Heap::Upload).named("up"))
        .unwrap();
    let msg = b.write_u64(12, 0).unwrap_err().to_string();
    assert!(msg.contains("up") && msg.contains("0xc"), "{msg}");
    let msg = Device::new(DeviceDesc {
        fifo_depth: 0,
        ..DeviceDesc::default()
    })
    .unwrap_err()
    .to_string();
    assert!(msg.contains("fifo_depth 0"), "{msg}");
}

/// E2: a misuse error carries its object and the offending value as data, not only in its
/// message, for each kind of object (and `Error::misuse` reads them).
#[test]
fn e2_misuse_errors_carry_the_object_and_the_value() {
    let d = device();
    let object_value = |e: &Error| {
        let m = e.misuse().unwrap_or_else(|| panic!("not a misuse: {e}"));
        assert!(e.to_string().ends_with(m.message()), "{e}");
        (m.object.clone(), m.value)
    };
    let up = d
        .create_buffer(&BufferDesc::new(16, Heap::Upload).named("up"))
        .unwrap();
    assert_eq!(
        object_value(&up.write_u64(12, 0).unwrap_err()),
        (Object::Buffer("up".into()), Some(12))
    );
    assert_eq!(
        object_value(&up.read_u32(40).unwrap_err()),
        (Object::Buffer("up".into()), Some(40))
    );
    let e = Device::new(DeviceDesc {
        fifo_depth: 0,
        ..DeviceDesc::default()
    })
    .unwrap_err();
    assert_eq!(object_value(&e), (Object::Device, Some(0)));
    let e = d
        .create_buffer(&BufferDesc::new(6, Heap::Shared).named("odd"))
        .unwrap_err();
    assert_eq!(object_value(&e), (Object::Buffer("odd".into()), Some(6)));
    let q = d
        .create_queue(&pipefence::QueueDesc::new(
            pipefence::QueueKind::Compute,
            "cq",
        ))
        .unwrap();
    let open = d
        .create_command_list(&pipefence::CommandListDesc::new(
            pipefence::QueueKind::Compute,
            "open",
        ))
        .unwrap();
    let e = q.execute_command_lists(&[&open]).unwrap_err();
    assert!(matches!(e, Error::InvalidCall(_)), "{e}");
    assert_eq!(
        object_value(&e),
        (Object::CommandList("open".into()), Some(0))
    );
    let e = q.execute_command_lists(&[]).unwrap_err();
    assert_eq!(object_value(&e), (Object::Queue("cq".into()), Some(0)));
    let mut bad = d
        .create_command_list(&pipefence::CommandListDesc::new(
            pipefence::QueueKind::Compute,
            "bad",
        ))
        .unwrap();
    bad.flush_pipeline(pipefence::Flush::NONE);
    bad.end_event();
    let e = bad.close().unwrap_err();
    assert_eq!(
        object_value(&e),
        (Object::CommandList("bad".into()), Some(1))
    );
    let f = d
        .create_fence(&pipefence::FenceDesc::new(0).named("f"))
        .unwrap();
    let e = d
        .wait_multiple(&[&f], &[], pipefence::MultipleFenceWaitFlags::ALL, T)
        .unwrap_err();
    assert_eq!(object_value(&e), (Object::Device, Some(0)));
    assert!(f
        .wait(1, Duration::from_millis(1))
        .unwrap_err()
        .misuse()
        .is_none());
}

#[test]
fn e3_bad_device_descs_are_errors_not_panics() {
    let bad = [
        DeviceDesc {
            watchdog_timeout: Duration::ZERO,
            ..DeviceDesc::default()
        },
        DeviceDesc {
            fence_wait_timeout: Some(Duration::ZERO),
            ..DeviceDesc::default()
        },
        DeviceDesc {
            fifo_depth: 1 << 20,
            ..DeviceDesc::default()
        },
        DeviceDesc {
            workers: 100_000,
            ..DeviceDesc::default()
        },
        DeviceDesc {
            timestamp_frequency: 0,
            ..DeviceDesc::default()
        },
    ];
    for desc in bad {
        assert!(matches!(Device::new(desc), Err(Error::InvalidArg(_))));
    }
}

#[test]
fn e3_random_cpu_accesses_never_panic() {
    use proptest::prelude::*;
    let d = device();
    let b = buf(&d, 128, Heap::Shared);
    proptest!(ProptestConfig::with_cases(2000), |(off in any::<u64>(), small in 0u64..200, v in any::<u64>())| {
        for o in [off, small] {
            let _ = b.read_u32(o);
            let _ = b.read_u64(o);
            let _ = b.write_u32(o, v as u32);
            let _ = b.write_u64(o, v);
            let _ = b.tools().debug_read_u32(o);
            let _ = b.atomic_u64(o);
        }
    });
}

/// Whether a 64 GiB buffer (the maximum) cannot be backed here: the machine has less memory and
/// swap than that, and the kernel refuses what it cannot back (overcommit modes 0 and 2).
fn cannot_back_64_gib() -> bool {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let kib = |key: &str| -> Option<u64> {
            m.lines()
                .find(|l| l.starts_with(key))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        Some(kib("MemTotal:")? + kib("SwapTotal:")?)
    });
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").ok();
    total_kib.is_some_and(|t| t < 60 << 20) && overcommit.is_some_and(|o| o.trim() != "1")
}

/// M1: a zero-initialized buffer is backed lazily (zero pages from the OS): creating 4 GiB
/// adds next to nothing to the resident set until it is touched, and it reads as zeros; one
/// the machine cannot back at all (the 64 GiB maximum, on a machine with less memory and swap
/// than that) fails as OutOfMemory (0x8007000E) instead of being filled and killed.
#[test]
fn m1_large_zero_buffers_are_backed_lazily_and_unbackable_ones_fail() {
    let d = device();
    let before = status_kib("VmRSS:");
    let b = d
        .create_buffer(&BufferDesc::new(4 << 30, Heap::Shared))
        .unwrap();
    if let (Some(before), Some(after)) = (before, status_kib("VmRSS:")) {
        assert!(
            after.saturating_sub(before) < 256 << 10,
            "creating 4 GiB grew the resident set by {} KiB",
            after - before
        );
    }
    assert_eq!(b.read_u64((4 << 30) - 8).unwrap(), 0);
    b.write_u32(1 << 31, 7).unwrap();
    assert_eq!(b.read_u32(1 << 31).unwrap(), 7);
    drop(b);
    if cannot_back_64_gib() {
        let e = d
            .create_buffer(&BufferDesc::new(64 << 30, Heap::Shared).named("huge"))
            .unwrap_err();
        assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
        assert!(e.to_string().contains("huge"), "{e}");
        assert_eq!(e.hresult(), 0x8007_000E);
    }
}

/// M1: a buffer with a non-zero `init` is backed lazily too: creating 1 GiB with `init` 7 adds
/// next to nothing to the resident set, reading it touches nothing, and every path to its words
/// (CPU reads and 32/64-bit writes across a 64 KiB boundary, an atomic view, the built-in
/// kernels, a user kernel's atomics, a copy, a PFP and an ME wait) sees 7 wherever nothing wrote;
/// one the machine cannot back fails as OutOfMemory at creation.
#[test]
fn m1_large_init_buffers_are_backed_lazily_and_read_as_their_init() {
    use std::sync::atomic::Ordering::SeqCst;
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    const INIT: u64 = 0x7_0000_0007;
    let d = Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap();
    let grown_kib = {
        let before = status_kib("VmRSS:");
        move || Some(status_kib("VmRSS:")?.saturating_sub(before?))
    };
    let b = d
        .create_buffer(&BufferDesc::new(GIB, Heap::Shared).named("big").with_init(7))
        .unwrap();
    if let Some(kib) = grown_kib() {
        assert!(
            kib < 256 << 10,
            "creating 1 GiB grew the resident set by {kib} KiB"
        );
    }
    for o in [0, 4, GIB / 2, GIB / 2 + 4, GIB - 8, GIB - 4] {
        assert_eq!(b.read_u32(o).unwrap(), 7, "offset {o:#x}");
    }
    for o in [0, GIB / 2, GIB - 8] {
        assert_eq!(b.read_u64(o).unwrap(), INIT, "offset {o:#x}");
    }
    assert_eq!(b.tools().debug_read_u32(GIB / 4).unwrap(), 7);

    // Writes across the boundary of two 64 KiB chunks, 32-bit halves and whole words.
    let k = 64 << 10;
    b.write_u32(k - 4, 1).unwrap();
    assert_eq!(b.read_u64(k - 8).unwrap(), 0x1_0000_0007);
    b.write_u32(k, 2).unwrap();
    assert_eq!(b.read_u64(k).unwrap(), 0x7_0000_0002);
    b.write_u64(k + 8, 3).unwrap();
    assert_eq!(b.read_u64(k + 8).unwrap(), 3);
    assert_eq!(b.read_u64(k - 16).unwrap(), INIT);
    assert_eq!(b.read_u64(k + 16).unwrap(), INIT);
    assert_eq!(b.read_u64(2 * k - 8).unwrap(), INIT);
    b.tools().debug_write_u32(3 * k + 4, 4).unwrap();
    assert_eq!(b.read_u64(3 * k).unwrap(), 0x4_0000_0007);

    // An atomic view of a word nothing touched yet.
    let view = b.atomic_u64(5 * k + 8).unwrap();
    assert_eq!(view.load(SeqCst), INIT);
    assert_eq!(view.fetch_add(1, SeqCst), INIT);
    drop(view);
    assert_eq!(b.read_u64(5 * k + 8).unwrap(), INIT + 1);
    assert_eq!(b.read_u64(5 * k).unwrap(), INIT);

    // Kernels on parts of it: `fill` 1 KiB at 1 MiB (plus a group on a chunk boundary), `add`
    // from a chunk nothing touched to 2 MiB, `sum` of another such chunk into a third, a user
    // kernel's 32-bit atomics on a fourth, and a copy out of a fifth.
    let groups = 4u32;
    let bytes = u64::from(groups) * 256;
    let user = Kernel::User(UserKernel::new("bump", {
        let at = b.address(8 * MIB + 4);
        move |ctx| {
            ctx.atomic_add_u32(at, 1);
        }
    }));
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Direct, "q"))
        .unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Direct, "l"))
        .unwrap();
    l.wait_value32(
        b.address(6 * MIB),
        Comparison::GreaterEqual,
        7,
        u32::MAX,
        WaitEngine::Pfp,
    )
    .wait_value64(
        b.address(7 * MIB),
        Comparison::Equal,
        INIT,
        u64::MAX,
        WaitEngine::Me,
    )
    .dispatch(&Kernel::fill(b.address(MIB), 9), groups)
    .dispatch(&Kernel::fill(b.address(4 * k - 128), 10), 1)
    .dispatch(
        &Kernel::add(b.address(2 * MIB), b.address(3 * MIB), 1),
        groups,
    )
    .dispatch(&Kernel::sum(b.address(4 * MIB), b.address(5 * MIB)), groups)
    .dispatch(&user, 16)
    .copy_buffer_region(b.address(9 * MIB), b.address(10 * MIB), 64)
    .write_value32_bottom_of_pipe(b.address(11 * MIB), 1, Flush::NONE, WriteSource::Value);
    l.close().unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    b.wait_u32(11 * MIB, Comparison::Equal, 1, u32::MAX, T)
        .unwrap();
    d.wait_idle(T).unwrap();
    for o in (0..bytes).step_by(4) {
        assert_eq!(b.read_u32(MIB + o).unwrap(), 9, "fill at +{o:#x}");
        assert_eq!(b.read_u32(2 * MIB + o).unwrap(), 8, "add at +{o:#x}");
    }
    assert_eq!(b.read_u32(MIB + bytes).unwrap(), 7);
    assert_eq!(b.read_u32(MIB - 4).unwrap(), 7);
    for o in (4 * k - 128..4 * k + 128).step_by(4) {
        assert_eq!(b.read_u32(o).unwrap(), 10, "fill at {o:#x}");
    }
    assert_eq!(b.read_u32(4 * k + 128).unwrap(), 7);
    assert_eq!(
        b.read_u64(4 * MIB).unwrap(),
        INIT + 7 * 64 * u64::from(groups)
    );
    assert_eq!(b.read_u64(4 * MIB + 8).unwrap(), INIT);
    assert_eq!(b.read_u64(8 * MIB).unwrap(), (7 + 16) << 32 | 7);
    for o in (0..64).step_by(8) {
        assert_eq!(b.read_u64(9 * MIB + o).unwrap(), INIT);
    }
    assert_eq!(b.read_u64(11 * MIB).unwrap(), 0x7_0000_0001);
    assert_eq!(b.read_u64(GIB - 8).unwrap(), INIT);
    if let Some(kib) = grown_kib() {
        assert!(
            kib < 256 << 10,
            "using 1 GiB in places grew the resident set by {kib} KiB"
        );
    }
    drop(b);
    if cannot_back_64_gib() {
        let e = d
            .create_buffer(
                &BufferDesc::new(64 << 30, Heap::Shared)
                    .named("huge")
                    .with_init(1),
            )
            .unwrap_err();
        assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
        assert!(e.to_string().contains("huge"), "{e}");
    }
}

/// M1, M2: the first accesses to a part of an `init` buffer that nothing touched yet, made at
/// once by several CPU threads and by a kernel's groups on two workers, lose no write: every
/// thread's own word holds what it wrote, concurrent atomic adds all count, and every other word
/// still reads as the `init`.
#[test]
fn m1_concurrent_first_writes_to_an_init_buffer_lose_nothing() {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;
    const THREADS: u64 = 4;
    const INIT: u64 = 0x5_0000_0005;
    let d = Device::new(DeviceDesc {
        workers: 2,
        ..DeviceDesc::default()
    })
    .unwrap();
    const CHUNK: u64 = 64 << 10;
    const CHUNKS: u64 = 16;
    for round in 0..20u64 {
        // 16 chunks of 64 KiB nothing touched; the threads race for each in turn. Each writes
        // its own words at the end of the chunk (the last a fill reaches) and adds to a counter
        // at its start.
        let b = d
            .create_buffer(&BufferDesc::new(CHUNKS * CHUNK, Heap::Shared).with_init(5))
            .unwrap();
        let go = Arc::new(AtomicBool::new(false));
        let ts: Vec<_> = (0..THREADS)
            .map(|t| {
                let (b, go) = (b.clone(), go.clone());
                thread::spawn(move || {
                    while !go.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                    for c in 0..CHUNKS {
                        let o = (c + 1) * CHUNK - 8 * (t + 1);
                        match (c + t) % 3 {
                            0 => b.write_u64(o, o).unwrap(),
                            1 => b.write_u32(o + 4, o as u32).unwrap(),
                            _ => b.tools().debug_write_u32(o + 4, o as u32).unwrap(),
                        }
                        b.atomic_u64(c * CHUNK).unwrap().fetch_add(1, SeqCst);
                        assert_eq!(b.read_u64(c * CHUNK + 8).unwrap(), INIT);
                    }
                })
            })
            .collect();
        go.store(true, SeqCst);
        for t in ts {
            t.join().unwrap();
        }
        for c in 0..CHUNKS {
            let at = c * CHUNK;
            assert_eq!(
                b.read_u64(at).unwrap(),
                INIT + THREADS,
                "round {round} {at:#x}"
            );
            for t in 0..THREADS {
                let o = (c + 1) * CHUNK - 8 * (t + 1);
                let want = if (c + t) % 3 == 0 { o } else { o << 32 | 5 };
                assert_eq!(b.read_u64(o).unwrap(), want, "round {round} offset {o:#x}");
            }
            let o = (c + 1) * CHUNK - 8 * (THREADS + 1);
            assert_eq!(b.read_u64(o).unwrap(), INIT, "round {round} offset {o:#x}");
        }
    }

    // A kernel whose groups (on two workers) all add to and write one chunk nothing touched.
    let b = d
        .create_buffer(&BufferDesc::new(64 << 10, Heap::Shared).with_init(5))
        .unwrap();
    let (sum, base) = (b.address(0), b.address(8));
    let k = Kernel::User(UserKernel::new("first-touch", move |ctx| {
        let g = u64::from(ctx.group());
        ctx.atomic_add_u64(sum, 1);
        ctx.write_u32(base + g * 8, ctx.group());
    }));
    let q = d
        .create_queue(&QueueDesc::new(QueueKind::Compute, "c"))
        .unwrap();
    let mut l = d
        .create_command_list(&CommandListDesc::new(QueueKind::Compute, "l"))
        .unwrap();
    l.dispatch(&k, 1024);
    l.close().unwrap();
    q.execute_command_lists(&[&l]).unwrap();
    q.wait_idle(T).unwrap();
    assert_eq!(b.read_u64(0).unwrap(), INIT + 1024);
    for g in 0..1024u64 {
        assert_eq!(b.read_u64(8 + g * 8).unwrap(), 5 << 32 | g, "group {g}");
    }
    assert_eq!(b.read_u64(8 + 1024 * 8).unwrap(), INIT);
}

#[test]
fn m4_write_slice_and_read_slice_round_trip_by_heap_rules() {
    let d = device();
    let s = d
        .create_buffer(&BufferDesc::new(64, Heap::Shared).named("s"))
        .unwrap();
    s.write_slice(4, &[1, 2, 3, 4, 5]).unwrap();
    let mut out = [9u32; 7];
    s.read_slice(0, &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 3, 4, 5, 0]);
    assert_eq!(s.read_u64(8).unwrap(), 2 | (3 << 32));
    // To the last byte; empty slices anywhere up to the end.
    s.write_slice(56, &[7, 8]).unwrap();
    assert_eq!(s.read_u32(60).unwrap(), 8);
    s.write_slice(64, &[]).unwrap();
    s.read_slice(64, &mut []).unwrap();
    // Heap rules as write_u32/read_u32.
    let upload = buf(&d, 16, Heap::Upload);
    upload.write_slice(0, &[1, 2]).unwrap();
    let mut two = [0u32; 2];
    upload.read_slice(0, &mut two).unwrap();
    assert_eq!(two, [1, 2]);
    let readback = buf(&d, 16, Heap::Readback);
    assert!(matches!(
        readback.write_slice(0, &[1]),
        Err(Error::InvalidCall(_))
    ));
    readback.read_slice(0, &mut two).unwrap();
    let local = buf(&d, 16, Heap::DeviceLocal);
    let e = local.read_slice(0, &mut two).unwrap_err();
    assert!(matches!(e, Error::InvalidCall(_)), "{e}");
    assert!(e.to_string().contains("read_slice"), "{e}");
    assert!(matches!(
        local.write_slice(0, &[]),
        Err(Error::InvalidCall(_))
    ));
}

#[test]
fn m4_slice_range_and_alignment_are_checked_before_anything_is_written() {
    let d = device();
    let s = d
        .create_buffer(&BufferDesc::new(16, Heap::Shared).named("s"))
        .unwrap();
    // Three elements from 8 end 4 bytes past the end: nothing is written.
    let e = s.write_slice(8, &[1, 2, 3]).unwrap_err();
    assert!(matches!(e, Error::InvalidArg(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "invalid argument: buffer `s`: write_slice: offset 0x8 + 12 bytes (3 u32 elements) is \
         outside the buffer \
         (16 bytes)"
    );
    assert_eq!(s.read_u64(8).unwrap(), 0);
    let e = s.write_slice(2, &[1]).unwrap_err();
    assert!(
        e.to_string().contains("offset 0x2 is not 4-byte aligned"),
        "{e}"
    );
    let e = s.write_slice(20, &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidArg(_)), "{e}");
    let mut out = [5u32; 5];
    let e = s.read_slice(0, &mut out).unwrap_err();
    assert!(e.to_string().contains("read_slice"), "{e}");
    assert_eq!(out, [5; 5], "an error leaves the output unchanged");
    assert!(s.read_slice(u64::MAX - 3, &mut out[..1]).is_err());
}

#[test]
fn m4_write_slice_wakes_waiters_on_every_word() {
    // Host waiters on the first, a middle and the last word of the range, in both halves of
    // the 8-byte words; and an engine waiting on the last word.
    let d = device();
    let s = shared(&d, "s", 64);
    let out = shared(&d, "out", 64);
    let q = queue(&d, QueueKind::Compute, "q");
    let l = list(&d, QueueKind::Compute, "l", |l| {
        l.wait_value32(
            s.address(40),
            Comparison::Equal,
            11,
            u32::MAX,
            WaitEngine::Me,
        )
        .write_value32_bottom_of_pipe(out.address(0), 1, Flush::NONE, WriteSource::Value);
    });
    q.execute_command_lists(&[&l]).unwrap();
    let waiters: Vec<_> = [(4u64, 2u32), (16, 5), (40, 11)]
        .into_iter()
        .map(|(off, v)| {
            let s = s.clone();
            thread::spawn(move || s.wait_u32(off, Comparison::Equal, v, u32::MAX, T))
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    s.write_slice(0, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
        .unwrap();
    for w in waiters {
        w.join().unwrap().unwrap();
    }
    out.wait_u32(0, Comparison::Equal, 1, u32::MAX, T).unwrap();
}

#[test]
fn m4_slice_access_keeps_working_after_removal() {
    let d = device();
    let s = buf(&d, 16, Heap::Shared);
    d.remove();
    s.write_slice(0, &[3, 4]).unwrap();
    let mut out = [0u32; 2];
    s.read_slice(0, &mut out).unwrap();
    assert_eq!(out, [3, 4]);
}

#[test]
fn m4_slice_access_on_the_deterministic_driver_is_one_host_access() {
    // A host slice write is a value write (D5): an engine memory-value wait it satisfies
    // acquires it, and then reading data the host wrote before it is ordered.
    for seed in 0..4 {
        let d = Device::new(DeviceDesc {
            driver: pipefence::Driver::Deterministic {
                seed,
                strategy: pipefence::Strategy::Random,
            },
            memory_model: pipefence::MemoryModel::Validate,
            ..DeviceDesc::default()
        })
        .unwrap();
        let s = shared(&d, "s", 64);
        let out = shared(&d, "out", 64);
        let q = queue(&d, QueueKind::Compute, "q");
        let l = list(&d, QueueKind::Compute, "l", |l| {
            l.wait_value32(s.address(8), Comparison::Equal, 3, u32::MAX, WaitEngine::Me)
                .write_value32_bottom_of_pipe(out.address(0), 1, Flush::NONE, WriteSource::Value);
        });
        q.execute_command_lists(&[&l]).unwrap();
        s.write_slice(0, &[1, 2, 3]).unwrap();
        out.wait_u32(0, Comparison::Equal, 1, u32::MAX, T).unwrap();
        let mut v = [0u32; 3];
        s.read_slice(0, &mut v).unwrap();
        assert_eq!(v, [1, 2, 3], "seed {seed}");
        d.wait_idle(T).unwrap();
        assert!(d.hazards().is_empty(), "seed {seed}: {:#?}", d.hazards());
    }
}
