//! Trace renderers: the Chrome/Perfetto JSON (`trace::chrome::chrome_json`) and the SVG timeline
//! (`trace::svg::svg_timeline`), on hand-built event lists.

use std::collections::BTreeMap;

use pipefence::trace::chrome::chrome_json;
use pipefence::trace::svg::svg_timeline;
use pipefence::trace::{SliceKind, SyncKind, TraceEvent, Track};
use proptest::prelude::*;
use serde_json::Value;

/// The deterministic driver's clock origin.
const T0: u64 = 1_000_000_000;

fn pfp(q: &str) -> Track {
    Track::Pfp {
        queue: q.to_string(),
    }
}

fn me(q: &str) -> Track {
    Track::Me {
        queue: q.to_string(),
    }
}

fn worker(index: u32) -> Track {
    Track::Worker { index }
}

fn host(name: &str) -> Track {
    Track::Host {
        name: name.to_string(),
    }
}

fn slice(track: Track, name: &str, kind: SliceKind, start: u64, end: u64) -> TraceEvent {
    TraceEvent::Slice {
        track,
        name: name.to_string(),
        kind,
        start_ns: start,
        end_ns: end,
        site: None,
    }
}

fn flow(from: Track, from_ns: u64, to: Track, to_ns: u64, label: &str) -> TraceEvent {
    TraceEvent::Flow {
        from,
        from_ns,
        to,
        to_ns,
        label: label.to_string(),
    }
}

fn sync(
    from: Track,
    from_ns: u64,
    to: Track,
    to_ns: u64,
    label: &str,
    wait: SyncKind,
    blocked: bool,
) -> TraceEvent {
    TraceEvent::Sync {
        from,
        from_ns,
        to,
        to_ns,
        label: label.to_string(),
        wait,
        blocked,
    }
}

fn instant(track: Track, ts: u64, name: &str, error: bool) -> TraceEvent {
    TraceEvent::Instant {
        track,
        ts_ns: ts,
        name: name.to_string(),
        error,
    }
}

/// Two queues (compute first, so it leads the lane order), two workers (1 seen before 0), two
/// hosts, a blocked wait on compute's ME released by a signal on gfx's ME, a removal.
fn small() -> Vec<TraceEvent> {
    vec![
        slice(
            me("compute"),
            "wait fence frame >= 1",
            SliceKind::Blocked,
            T0 + 1_000,
            T0 + 9_000,
        ),
        slice(host("main"), "submit", SliceKind::Host, T0, T0 + 800),
        TraceEvent::Slice {
            track: pfp("gfx"),
            name: "wait memory flags >= 1".to_string(),
            kind: SliceKind::Busy,
            start_ns: T0 + 500,
            end_ns: T0 + 2_000,
            site: Some("list produce, command 0".to_string()),
        },
        slice(
            me("gfx"),
            "draw +3 commands",
            SliceKind::Busy,
            T0 + 2_000,
            T0 + 8_500,
        ),
        instant(me("gfx"), T0 + 8_500, "signal frame = 1", false),
        flow(
            me("gfx"),
            T0 + 8_500,
            me("compute"),
            T0 + 9_000,
            "fence frame = 1",
        ),
        slice(
            worker(1),
            "fill x64",
            SliceKind::Kernel,
            T0 + 3_000,
            T0 + 7_000,
        ),
        slice(
            worker(0),
            "fill x64",
            SliceKind::Kernel,
            T0 + 3_000,
            T0 + 6_500,
        ),
        slice(
            pfp("compute"),
            "dispatch",
            SliceKind::Busy,
            T0 + 9_000,
            T0 + 9_500,
        ),
        slice(
            host("io"),
            "map buffer",
            SliceKind::Host,
            T0 + 4_000,
            T0 + 4_300,
        ),
        slice(
            me("compute"),
            "wait fence done >= 7",
            SliceKind::Blocked,
            T0 + 9_500,
            T0 + 20_000,
        ),
        instant(
            me("compute"),
            T0 + 20_000,
            "device removed: hang (compute ME waits fence done >= 7)",
            true,
        ),
    ]
}

/// The lane labels of `small()` in the documented order.
const SMALL_LANES: [&str; 8] = [
    "compute PFP",
    "compute ME",
    "gfx PFP",
    "gfx ME",
    "worker 0",
    "worker 1",
    "host main",
    "host io",
];

/// A few hundred commands: a setup burst of 150 tiny copies, 85 frames (gfx draws, compute
/// waits for them, dispatches and kernels), host activity, a hazard, and a hang that ends in a
/// removal. Exactly 500 slices.
fn large() -> Vec<TraceEvent> {
    let mut v = Vec::new();
    v.push(slice(
        host("main"),
        "create device, queues, fences",
        SliceKind::Host,
        T0,
        T0 + 40_000,
    ));
    let copy0 = T0 + 40_000;
    for j in 0..150u64 {
        let s = copy0 + j * 150;
        v.push(TraceEvent::Slice {
            track: me("copy"),
            name: format!("copy buffer {j}"),
            kind: SliceKind::Busy,
            start_ns: s,
            end_ns: s + 120,
            site: Some(format!("list upload, command {j}")),
        });
    }
    let copied = copy0 + 150 * 150;
    v.push(instant(me("copy"), copied, "signal uploaded = 1", false));
    v.push(slice(
        pfp("gfx"),
        "wait fence uploaded >= 1",
        SliceKind::Blocked,
        copy0,
        copied + 300,
    ));
    v.push(flow(
        me("copy"),
        copied,
        pfp("gfx"),
        copied + 300,
        "fence uploaded = 1",
    ));
    let frames0 = T0 + 70_000;
    let mut tf = frames0;
    for i in 0..85u64 {
        let d1 = 1_500 + (i * 37 % 5) * 700;
        let n = 2 + i % 4;
        v.push(slice(
            me("gfx"),
            &format!("draw +{n} commands"),
            SliceKind::Busy,
            tf,
            tf + d1,
        ));
        v.push(instant(
            me("gfx"),
            tf + d1,
            &format!("signal frame = {}", i + 1),
            false,
        ));
        v.push(slice(
            pfp("compute"),
            &format!("wait fence frame >= {}", i + 1),
            SliceKind::Blocked,
            tf,
            tf + d1 + 200,
        ));
        v.push(flow(
            me("gfx"),
            tf + d1,
            pfp("compute"),
            tf + d1 + 200,
            &format!("fence frame = {}", i + 1),
        ));
        v.push(slice(
            me("compute"),
            "dispatch +1 commands",
            SliceKind::Busy,
            tf + d1 + 300,
            tf + d1 + 3_300,
        ));
        v.push(slice(
            worker((i % 2) as u32),
            &format!("fill x64 (frame {})", i + 1),
            SliceKind::Kernel,
            tf + d1 + 400,
            tf + d1 + 2_900 + (i % 3) * 1_000,
        ));
        tf += 12_000;
    }
    let frames_end = tf;
    v.push(slice(
        host("main"),
        "wait frame 85 (event)",
        SliceKind::Host,
        frames0 + 5_000,
        frames_end,
    ));
    for k in 0..4u64 {
        let s = frames0 + 100_000 + k * 230_000;
        v.push(slice(
            host("io"),
            &format!("map buffer {k}"),
            SliceKind::Host,
            s,
            s + 30_000,
        ));
    }
    v.push(instant(
        worker(1),
        frames0 + 520_000,
        "hazard: kernel writes buffer x while copy reads it",
        true,
    ));
    v.push(slice(
        me("gfx"),
        "signal done = 1",
        SliceKind::Busy,
        frames_end,
        frames_end + 400,
    ));
    let removal = frames_end + 1_200_000;
    v.push(slice(
        host("main"),
        "wait for idle",
        SliceKind::Host,
        frames_end + 2_000,
        removal,
    ));
    v.push(slice(
        me("compute"),
        "wait fence never >= 101",
        SliceKind::Blocked,
        frames_end,
        removal,
    ));
    v.push(instant(
        me("compute"),
        removal,
        "device removed: hang (compute ME waits fence never >= 101)",
        true,
    ));
    v
}

fn slice_count(events: &[TraceEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Slice { .. }))
        .count()
}

mod chrome;
mod props;
mod svg;
