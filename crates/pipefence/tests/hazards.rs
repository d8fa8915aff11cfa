//! Strict mode and hazard detection through the Rust API (D5, `docs/memory-model.md`): user
//! kernels racing across queues are reported, strict mode needs the deterministic driver, the
//! plain model tracks nothing, strict values (a flag without l2-writeback can overtake its data;
//! with it, never), and the strict statistics.

mod common;

use common::{buffer, list, queue};
use pipefence::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn desc(model: MemoryModel, seed: u64) -> DeviceDesc {
    DeviceDesc {
        memory_model: model,
        driver: Driver::Deterministic {
            seed,
            strategy: Strategy::Random,
        },
        ..DeviceDesc::default()
    }
}

fn strict(seed: u64) -> Device {
    Device::new(desc(MemoryModel::Strict, seed)).unwrap()
}

/// The queue name, stage and kernel of an access.
fn who(a: &HazardAccess) -> (String, &'static str, Option<String>) {
    match &a.agent {
        HazardAgent::Queue { queue, stage, .. } => (queue.clone(), *stage, a.kernel.clone()),
        HazardAgent::Host { host, .. } => (host.clone(), "host", None),
        other => panic!("an agent these tests do not know: {other:?}"),
    }
}

/// Words of `data` a user kernel writes and another reads.
const WORDS: u64 = 16;

/// Two queues, nothing between them: `producer` (user kernel) writes `data`, `consumer` (user
/// kernel) reads it and writes the sum to `out`. Returns the buffers: a report names a buffer
/// only while it is alive.
fn user_kernel_race(d: &Device) -> (Buffer, Buffer) {
    let data = buffer(d, "data", 256, Heap::DeviceLocal);
    let out = buffer(d, "out", 64, Heap::Readback);
    let gfx = queue(d, QueueKind::Direct, "gfx");
    let asy = queue(d, QueueKind::Compute, "async");
    let base = data.gpu_address();
    let producer = Kernel::User(UserKernel::new("producer", move |ctx| {
        for i in 0..WORDS {
            ctx.write_u32(base + 4 * i, 7);
        }
    }));
    let dst = out.gpu_address();
    let consumer = Kernel::User(UserKernel::new("consumer", move |ctx| {
        let mut s = 0;
        for i in 0..WORDS {
            s += ctx.read_u32(base + 4 * i);
        }
        ctx.write_u32(dst, s);
    }));
    let p = list(d, QueueKind::Direct, "produce", |l| {
        l.dispatch(&producer, 1);
    });
    let c = list(d, QueueKind::Compute, "consume", |l| {
        l.dispatch(&consumer, 1);
    });
    gfx.execute_command_lists(&[&p]).unwrap();
    asy.execute_command_lists(&[&c]).unwrap();
    d.wait_idle(T).unwrap();
    (data, out)
}

/// The race is one unreleased-read between the two user kernels: the producer's write and the
/// consumer's read of `data`, nothing ordering them.
#[track_caller]
fn assert_user_kernel_race(d: &Device, what: &str) {
    let hazards = d.hazards();
    let race: Vec<&Hazard> = hazards
        .iter()
        .filter(|h| h.buffer.as_ref().is_some_and(|(b, _)| b == "data"))
        .collect();
    assert_eq!(race.len(), 1, "{what}: {hazards:#?}");
    let h = race[0];
    assert_eq!(h.kind, HazardKind::UnreleasedRead, "{what}");
    assert_eq!(h.missing, Missing::Nothing, "{what}");
    assert_eq!(h.buffer, Some(("data".to_string(), 0)), "{what}");
    assert_eq!(h.bytes, 4 * WORDS, "{what}");
    // Reported as (write, read) whichever came first (5.3).
    assert_eq!(
        who(&h.first),
        ("gfx".into(), "task", Some("producer".into())),
        "{what}"
    );
    assert_eq!(h.first.kind, AccessKind::Write, "{what}");
    assert_eq!(h.first.op, "dispatch");
    assert_eq!(
        who(&h.second),
        ("async".into(), "task", Some("consumer".into())),
        "{what}"
    );
    assert_eq!(h.second.kind, AccessKind::Read, "{what}");
    let text = h.to_string();
    assert!(
        text.starts_with("hazard unreleased-read: data..+0x40"),
        "{text}"
    );
    assert!(text.contains("nothing orders them"), "{text}");
    assert_eq!(d.hazards_dropped(), 0);
}

#[test]
fn d5_user_kernel_race_across_queues_is_reported_in_strict_mode() {
    for seed in 0..20 {
        let d = strict(seed);
        let _buffers = user_kernel_race(&d);
        assert_user_kernel_race(&d, &format!("strict seed {seed}"));
    }
}

#[test]
fn d5_user_kernel_race_across_queues_is_reported_by_validate() {
    // The validation layer works on both drivers.
    for seed in 0..5 {
        let d = Device::new(desc(MemoryModel::Validate, seed)).unwrap();
        let _buffers = user_kernel_race(&d);
        assert_user_kernel_race(&d, &format!("validate deterministic seed {seed}"));
        assert_eq!(
            d.tools().strict_stats(),
            (0, 0),
            "no strict values under Validate"
        );
    }
    for i in 0..3 {
        let d = Device::new(DeviceDesc {
            memory_model: MemoryModel::Validate,
            ..DeviceDesc::default()
        })
        .unwrap();
        let _buffers = user_kernel_race(&d);
        assert_user_kernel_race(&d, &format!("validate threaded run {i}"));
    }
}

#[test]
fn d5_user_kernels_ordered_by_a_fence_are_clean() {
    for seed in 0..20 {
        let d = strict(seed);
        let data = buffer(&d, "data", 256, Heap::DeviceLocal);
        let out = buffer(&d, "out", 64, Heap::Readback);
        let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
        let produced = d
            .create_fence(&FenceDesc::new(0).named("produced"))
            .unwrap();
        let gfx = queue(&d, QueueKind::Direct, "gfx");
        let asy = queue(&d, QueueKind::Compute, "async");
        let base = data.gpu_address();
        let dst = out.gpu_address();
        let producer = Kernel::User(UserKernel::new("producer", move |ctx| {
            for i in 0..WORDS {
                ctx.write_u32(base + 4 * i, 7);
            }
        }));
        let consumer = Kernel::User(UserKernel::new("consumer", move |ctx| {
            let mut s = 0;
            for i in 0..WORDS {
                s += ctx.read_u32(base + 4 * i);
            }
            ctx.write_u32(dst, s);
        }));
        let p = list(&d, QueueKind::Direct, "produce", |l| {
            l.dispatch(&producer, 1);
        });
        let c = list(&d, QueueKind::Compute, "consume", |l| {
            l.dispatch(&consumer, 1);
        });
        gfx.execute_command_lists(&[&p]).unwrap();
        gfx.signal(&produced, 1).unwrap();
        asy.wait(&produced, 1).unwrap();
        asy.execute_command_lists(&[&c]).unwrap();
        asy.signal(&done, 1).unwrap();
        done.wait(1, T).unwrap();
        assert_eq!(out.read_u32(0).unwrap(), 7 * WORDS as u32, "seed {seed}");
        assert!(d.hazards().is_empty(), "seed {seed}: {:#?}", d.hazards());
    }
}

#[test]
fn d5_strict_needs_the_deterministic_driver() {
    let err = Device::new(DeviceDesc {
        memory_model: MemoryModel::Strict,
        driver: Driver::Threaded,
        ..DeviceDesc::default()
    })
    .unwrap_err();
    match &err {
        Error::InvalidArg(m) => {
            let msg = m.message();
            assert!(msg.contains("Strict"), "{msg}");
            assert!(msg.contains("deterministic"), "{msg}");
            assert!(
                msg.contains("Validate"),
                "the message names the alternative: {msg}"
            );
        }
        other => panic!("expected InvalidArg, got {other:?}"),
    }
    // The same description with the deterministic driver is fine, and so is Validate on the
    // threaded driver.
    assert!(Device::new(desc(MemoryModel::Strict, 0)).is_ok());
    assert!(Device::new(DeviceDesc {
        memory_model: MemoryModel::Validate,
        ..DeviceDesc::default()
    })
    .is_ok());
}

#[test]
fn d5_plain_model_tracks_no_hazards() {
    assert_eq!(DeviceDesc::default().memory_model, MemoryModel::Plain);
    assert!(!MemoryModel::Plain.tracks_hazards());
    assert!(MemoryModel::Validate.tracks_hazards());
    assert!(MemoryModel::Strict.tracks_hazards());
    for seed in 0..5 {
        let d = Device::new(desc(MemoryModel::Plain, seed)).unwrap();
        let _buffers = user_kernel_race(&d);
        assert!(d.hazards().is_empty(), "seed {seed}");
        assert_eq!(d.hazards_dropped(), 0);
        assert_eq!(d.tools().strict_stats(), (0, 0));
    }
    let d = Device::new(DeviceDesc::default()).unwrap();
    let _buffers = user_kernel_race(&d);
    assert!(d.hazards().is_empty());
    assert_eq!(d.tools().strict_stats(), (0, 0));
}

/// The missing-writeback pattern through the API: `fill` 16 groups of 3s, a flag raised with a
/// bottom-of-pipe write with `flush`, another queue waiting for it on the ME and summing the
/// data into `total`. Returns the total the host reads after the consumer's signal.
fn flag_program(d: &Device, flush: Flush) -> u64 {
    let data = buffer(d, "data", 4096, Heap::DeviceLocal);
    let flag = buffer(d, "flag", 64, Heap::Shared);
    let total = buffer(d, "total", 64, Heap::Readback);
    let done = d.create_fence(&FenceDesc::new(0).named("done")).unwrap();
    let producer = queue(d, QueueKind::Direct, "producer");
    let consumer = queue(d, QueueKind::Compute, "consumer");
    let p = list(d, QueueKind::Direct, "produce", |l| {
        l.dispatch(&Kernel::fill(data.gpu_address(), 3), 16)
            .write_value32_bottom_of_pipe(flag.gpu_address(), 1, flush, WriteSource::Value);
    });
    let c = list(d, QueueKind::Compute, "consume", |l| {
        l.wait_value32(
            flag.gpu_address(),
            Comparison::Equal,
            1,
            u32::MAX,
            WaitEngine::Me,
        )
        .dispatch(&Kernel::sum(total.gpu_address(), data.gpu_address()), 16);
    });
    consumer.execute_command_lists(&[&c]).unwrap();
    producer.execute_command_lists(&[&p]).unwrap();
    consumer.signal(&done, 1).unwrap();
    done.wait(1, T).unwrap();
    total.read_u64(0).unwrap()
}

const SEEDS: u64 = 64;
const RIGHT: u64 = 16 * 64 * 3;

/// Schedule `seed` of `pipefence check --strict` (the PCT/random mix of `explore`).
fn strict_mix(seed: u64) -> Device {
    let base = DeviceDesc {
        memory_model: MemoryModel::Strict,
        ..DeviceDesc::default()
    };
    Device::new(pipefence::explore::deterministic_desc(&base, seed)).unwrap()
}

/// Runs the flag program without a write-back: checks the hazard and returns the total.
fn stale_flag_total(d: &Device, seed: u64) -> u64 {
    let t = flag_program(d, Flush::NONE);
    // Each word summed is 3 (written back) or 0 (still dirty in the producer's engine).
    assert!(t <= RIGHT && t.is_multiple_of(3), "seed {seed}: {t}");
    // Whatever this schedule summed, the hazard is there, naming the flag.
    let h = d.hazards();
    assert_eq!(h.len(), 1, "seed {seed}: {h:#?}");
    assert_eq!(h[0].kind, HazardKind::UnreleasedRead);
    match &h[0].missing {
        Missing::NoWriteback { release, volatile } => {
            assert!(!volatile);
            assert_eq!(release.op, "write-value32-bop");
            assert_eq!(release.kind, AccessKind::Release);
        }
        other => panic!("seed {seed}: {other:?}"),
    }
    t
}

#[test]
fn d5_strict_flag_without_writeback_can_overtake_its_data() {
    // Uniform random schedules: some sum stale zeros for part of the data.
    let totals: Vec<u64> = (0..SEEDS)
        .map(|s| stale_flag_total(&strict(s), s))
        .collect();
    assert!(
        totals.iter().any(|&t| t < RIGHT),
        "no schedule read stale zeros: {totals:?}"
    );
    assert!(
        totals.contains(&RIGHT),
        "no schedule summed 3072: {totals:?}"
    );
    // The schedules `check --strict` runs: in some, the flag overtakes all of the data and the
    // consumer sums nothing but zeros.
    let mix: Vec<u64> = (0..200)
        .map(|s| stale_flag_total(&strict_mix(s), s))
        .collect();
    assert!(mix.contains(&0), "no schedule summed only zeros: {mix:?}");
}

/// A hazard's `Display` speaks the Rust API (`Flush::L2_WRITEBACK`, the method's name) and
/// names the buffer; the scenario vocabulary, from the same text, speaks the scenario
/// language.
#[test]
fn d5_hazard_display_says_the_fix_in_rust_terms_and_names_the_buffer() {
    let d = strict(0);
    stale_flag_total(&d, 0);
    let h = &d.hazards()[0];
    let rust = h.to_string();
    assert!(rust.starts_with("hazard unreleased-read: data"), "{rust}");
    assert!(
        rust.contains("fix: add Flush::L2_WRITEBACK to the bottom-of-pipe write at"),
        "{rust}"
    );
    assert!(rust.contains("(write_value32_bottom_of_pipe)"), "{rust}");
    assert!(
        !rust.contains("l2-writeback") && !rust.contains("-bop"),
        "{rust}"
    );
    // The buffer was dropped before the report was read: it is still named.
    assert!(!rust.contains("0x100000"), "a raw address: {rust}");
    let label = |a: &HazardAccess| a.to_string();
    let scenario = h.message_in(pipefence::Vocabulary::Scenario, &label);
    assert!(
        scenario.contains("fix: add flush=l2-writeback to the bottom-of-pipe write at"),
        "{scenario}"
    );
    assert_eq!(scenario, h.message(&label));
    assert_eq!(
        h.fix_text_in(pipefence::Vocabulary::Rust, &HazardAccess::rust_label),
        rust.split("fix: ").nth(1).unwrap_or_default()
    );
}

#[test]
fn d5_strict_flag_with_writeback_always_sees_the_data() {
    for seed in 0..SEEDS {
        for d in [strict(seed), strict_mix(seed)] {
            assert_eq!(flag_program(&d, Flush::L2_WRITEBACK), RIGHT, "seed {seed}");
            assert!(d.hazards().is_empty(), "seed {seed}: {:#?}", d.hazards());
        }
    }
}

#[test]
fn d5_strict_stats_count_early_writebacks_and_stale_reads() {
    // Without the write-back the fill's lines reach memory only by early write-backs, so a
    // schedule that summed anything wrote some back early; over the seeds some do.
    let mut early_total = 0;
    for seed in 0..SEEDS {
        let d = strict(seed);
        let t = flag_program(&d, Flush::NONE);
        let (early, _) = d.tools().strict_stats();
        if t > 0 {
            assert!(
                early > 0,
                "seed {seed}: summed {t} with no early write-back"
            );
        }
        early_total += early;
    }
    assert!(early_total > 0);

    // Stale reads: an engine reads `data`, another queue rewrites it and releases it, the
    // engine waits on the ME (no invalidate) and reads again.
    let mut stale_total = 0;
    for seed in 0..SEEDS {
        let d = strict(seed);
        let data = d
            .create_buffer(
                &BufferDesc::new(256, Heap::DeviceLocal)
                    .named("data")
                    .with_init(1),
            )
            .unwrap();
        let sync = buffer(&d, "sync", 64, Heap::Shared);
        let totals = buffer(&d, "totals", 64, Heap::Readback);
        let prod = queue(&d, QueueKind::Direct, "prod");
        let cons = queue(&d, QueueKind::Compute, "cons");
        let (s0, s1) = (sync.address(0), sync.address(4));
        let c = list(&d, QueueKind::Compute, "consume", |l| {
            l.dispatch(&Kernel::sum(totals.address(0), data.gpu_address()), 1)
                .write_value32_bottom_of_pipe(s0, 1, Flush::L2_WRITEBACK, WriteSource::Value)
                .wait_value32(s1, Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
                .dispatch(&Kernel::sum(totals.address(8), data.gpu_address()), 1);
        });
        let p = list(&d, QueueKind::Direct, "produce", |l| {
            l.wait_value32(s0, Comparison::Equal, 1, u32::MAX, WaitEngine::Me)
                .dispatch(&Kernel::fill(data.gpu_address(), 5), 1)
                .write_value32_bottom_of_pipe(s1, 1, Flush::L2_WRITEBACK, WriteSource::Value);
        });
        cons.execute_command_lists(&[&c]).unwrap();
        prod.execute_command_lists(&[&p]).unwrap();
        d.wait_idle(T).unwrap();
        let second = totals.read_u64(8).unwrap();
        let (_, stale) = d.tools().strict_stats();
        if second != 64 * 5 {
            assert!(
                stale > 0,
                "seed {seed}: summed {second} without a stale read"
            );
        }
        stale_total += stale;
        let h = d.hazards();
        assert!(
            h.iter().any(|h| h.kind == HazardKind::StaleCache),
            "seed {seed}: {h:#?}"
        );
    }
    assert!(stale_total > 0, "no stale read in {SEEDS} schedules");
}

#[test]
fn d5_strict_schedules_replay_identically() {
    for seed in [0, 3, 9] {
        let a = strict(seed);
        let b = strict(seed);
        let ta = flag_program(&a, Flush::NONE);
        let tb = flag_program(&b, Flush::NONE);
        assert_eq!(ta, tb, "seed {seed}");
        assert_eq!(
            a.tools().strict_stats(),
            b.tools().strict_stats(),
            "seed {seed}"
        );
        assert_eq!(a.hazards(), b.hazards(), "seed {seed}");
    }
}

#[test]
fn d5_hazard_reports_are_capped_and_counted() {
    // 300 dispatches of one list fill the same bytes with no flush-pipeline between them: one
    // write-write report per pair of commands, more than the 256 kept.
    let d = strict(0);
    let out = buffer(&d, "out", 256, Heap::Readback);
    let gfx = queue(&d, QueueKind::Direct, "gfx");
    let l = list(&d, QueueKind::Direct, "frame", |l| {
        for i in 0..300 {
            l.dispatch(&Kernel::fill(out.gpu_address(), i), 1);
        }
    });
    gfx.execute_command_lists(&[&l]).unwrap();
    d.wait_idle(T).unwrap();
    let h = d.hazards();
    assert_eq!(h.len(), 256);
    assert!(h.iter().all(|h| h.kind == HazardKind::WriteWrite
        && h.missing == Missing::NoFlush
        && h.buffer == Some(("out".to_string(), 0))));
    assert!(d.hazards_dropped() > 0);
}

/// A user kernel in which every group adds 1 to the u32 at `counter` with a compare-exchange
/// loop, and then tries to claim the u64 at `winner` (0 -> group + 1, `InterlockedCompareStore`
/// style), counting successful claims in the u32 at `claims`.
fn cas_kernel(counter: u64, winner: u64, claims: u64) -> Kernel {
    Kernel::User(UserKernel::new("cas", move |ctx| {
        let mut cur = 0;
        loop {
            match ctx.compare_exchange_u32(counter, cur, cur + 1) {
                Ok(_) => break,
                Err(seen) => cur = seen,
            }
        }
        let g = u64::from(ctx.group());
        if ctx.compare_exchange_u64(winner, 0, g + 1).is_ok() {
            ctx.atomic_add_u32(claims, 1);
        }
    }))
}

/// Runs [`cas_kernel`] for `groups` groups on one queue; returns (counter, winner, claims).
fn run_cas(d: &Device, groups: u32) -> (u32, u64, u32) {
    let b = buffer(d, "cas", 64, Heap::Readback);
    let q = queue(d, QueueKind::Compute, "q");
    let k = cas_kernel(b.address(4), b.address(8), b.address(16));
    let l = list(d, QueueKind::Compute, "l", |l| {
        l.dispatch(&k, groups);
    });
    q.execute_command_lists(&[&l]).unwrap();
    d.wait_idle(T).unwrap();
    (
        b.read_u32(4).unwrap(),
        b.read_u64(8).unwrap(),
        b.read_u32(16).unwrap(),
    )
}

#[test]
fn c6_kernel_compare_exchange_is_atomic_on_plain_and_strict_memory() {
    let check = |d: &Device, what: &str| {
        let (counter, winner, claims) = run_cas(d, 48);
        assert_eq!(counter, 48, "{what}: every group's increment lands once");
        assert!((1..=48).contains(&winner), "{what}: winner {winner}");
        assert_eq!(claims, 1, "{what}: exactly one group claims the word");
        assert!(d.hazards().is_empty(), "{what}: {:#?}", d.hazards());
    };
    for i in 0..3 {
        let d = Device::new(DeviceDesc {
            workers: 4,
            ..DeviceDesc::default()
        })
        .unwrap();
        check(&d, &format!("threaded run {i}"));
    }
    for seed in 0..6 {
        check(&strict(seed), &format!("strict seed {seed}"));
        check(
            &Device::new(desc(MemoryModel::Validate, seed)).unwrap(),
            &format!("validate seed {seed}"),
        );
        check(
            &Device::new(desc(MemoryModel::Plain, seed)).unwrap(),
            &format!("plain deterministic seed {seed}"),
        );
    }
}

#[test]
fn c6_kernel_compare_exchange_fails_without_storing_and_reports_the_value() {
    for d in [Device::new(DeviceDesc::default()).unwrap(), strict(1)] {
        let b = buffer(&d, "b", 64, Heap::Readback);
        let q = queue(&d, QueueKind::Compute, "q");
        let (a32, a64, out) = (b.address(0), b.address(8), b.address(16));
        let k = Kernel::User(UserKernel::new("cas-once", move |ctx| {
            ctx.write_u32(a32, 5);
            ctx.write_u64(a64, u64::MAX - 1);
            let r32 = ctx.compare_exchange_u32(a32, 4, 9);
            let r64 = ctx.compare_exchange_u64(a64, u64::MAX - 1, 3);
            ctx.write_u32(out, u32::from(r32 == Err(5)));
            ctx.write_u32(out + 4, u32::from(r64 == Ok(u64::MAX - 1)));
            // The other half of a word is untouched by a 32-bit exchange.
            ctx.write_u32(out + 8, 0xaaaa);
            let _ = ctx.compare_exchange_u32(out + 12, 0, 0xbbbb);
        }));
        let l = list(&d, QueueKind::Compute, "l", |l| {
            l.dispatch(&k, 1);
        });
        q.execute_command_lists(&[&l]).unwrap();
        d.wait_idle(T).unwrap();
        assert_eq!(b.read_u32(0).unwrap(), 5);
        assert_eq!(b.read_u64(8).unwrap(), 3);
        assert_eq!(b.read_u32(16).unwrap(), 1);
        assert_eq!(b.read_u32(20).unwrap(), 1);
        assert_eq!(b.read_u64(24).unwrap(), 0xaaaa | (0xbbbb << 32));
    }
}

/// Two queues run a compare-exchange kernel on the same words with nothing ordering them:
/// atomic read-modify-writes never form a hazard with each other; a plain read of those words
/// by a third queue does.
fn cas_across_queues(d: &Device, with_reader: bool) -> Buffer {
    let b = buffer(d, "shared", 64, Heap::DeviceLocal);
    let out = buffer(d, "out", 64, Heap::Readback);
    let k = cas_kernel(b.address(4), b.address(8), b.address(16));
    for (i, kind) in [QueueKind::Direct, QueueKind::Compute]
        .into_iter()
        .enumerate()
    {
        let q = queue(d, kind, &format!("q{i}"));
        let l = list(d, kind, &format!("l{i}"), |l| {
            l.dispatch(&k, 2);
        });
        q.execute_command_lists(&[&l]).unwrap();
    }
    if with_reader {
        let (src, dst) = (b.address(4), out.address(0));
        let reader = Kernel::User(UserKernel::new("reader", move |ctx| {
            let v = ctx.read_u32(src);
            ctx.write_u32(dst, v);
        }));
        let q = queue(d, QueueKind::Compute, "reader");
        let l = list(d, QueueKind::Compute, "read", |l| {
            l.dispatch(&reader, 1);
        });
        q.execute_command_lists(&[&l]).unwrap();
    }
    d.wait_idle(T).unwrap();
    b
}

#[test]
fn c6_kernel_compare_exchange_is_an_atomic_access_for_the_hazard_model() {
    for seed in 0..6 {
        for d in [
            strict(seed),
            Device::new(desc(MemoryModel::Validate, seed)).unwrap(),
        ] {
            let _b = cas_across_queues(&d, false);
            assert!(d.hazards().is_empty(), "seed {seed}: {:#?}", d.hazards());
            let d = Device::new(desc(d.desc().memory_model, seed)).unwrap();
            let _b = cas_across_queues(&d, true);
            let hazards = d.hazards();
            let reads: Vec<&Hazard> = hazards
                .iter()
                .filter(|h| h.kind == HazardKind::UnreleasedRead)
                .collect();
            assert!(!reads.is_empty(), "seed {seed}: {hazards:#?}");
            for h in reads {
                let kinds = [h.first.kind, h.second.kind];
                assert!(kinds.contains(&AccessKind::Atomic), "seed {seed}: {h:#?}");
                assert!(kinds.contains(&AccessKind::Read), "seed {seed}: {h:#?}");
            }
            assert!(
                hazards.iter().all(|h| h.kind != HazardKind::WriteWrite),
                "seed {seed}: {hazards:#?}"
            );
        }
    }
}
