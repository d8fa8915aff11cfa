//! Trace renderers: the Chrome/Perfetto JSON (`trace::chrome::chrome_json`) and the SVG timeline
//! (`trace::svg::svg_timeline`), on hand-built event lists.

use std::collections::BTreeMap;

use pipefence::trace::chrome::chrome_json;
use pipefence::trace::svg::svg_timeline;
use pipefence::trace::{SliceKind, TraceEvent, Track};
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

// ---------------------------------------------------------------- Chrome JSON

fn parse_json(s: &str) -> Value {
    serde_json::from_str(s).expect("chrome_json output is JSON")
}

fn trace_events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().expect("traceEvents array")
}

/// Every event has the fields its phase documents, with non-negative times.
fn check_chrome_fields(doc: &Value) {
    assert!(doc.is_object());
    assert_eq!(doc["displayTimeUnit"], "ns");
    for e in trace_events(doc) {
        assert!(e["name"].is_string(), "name: {e}");
        let ph = e["ph"].as_str().expect("ph");
        let ts = e["ts"].as_f64().expect("ts");
        assert!(ts >= 0.0, "ts: {e}");
        assert!(e["pid"].is_u64(), "pid: {e}");
        assert!(e["tid"].is_u64(), "tid: {e}");
        match ph {
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_u64()),
            "X" => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "dur: {e}");
                assert!(e["cat"].is_string());
                assert!(e["args"].is_object());
            }
            "s" | "f" => {
                assert!(e["id"].is_u64(), "id: {e}");
                if ph == "f" {
                    assert_eq!(e["bp"], "e");
                }
            }
            "i" => {
                assert_eq!(e["s"], "t");
                assert!(e["args"]["error"].is_boolean());
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
}

fn thread_names(doc: &Value) -> BTreeMap<u64, String> {
    trace_events(doc)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn trace_chrome_json_is_well_formed() {
    for events in [small(), large(), Vec::new()] {
        let doc = parse_json(&chrome_json(&events, "pipefence"));
        check_chrome_fields(&doc);
    }
    let doc = parse_json(&chrome_json(&small(), "pipefence"));
    let n = |ph: &str| trace_events(&doc).iter().filter(|e| e["ph"] == ph).count();
    // 9 slices, plus one tiny slice marking the write each flow starts from.
    assert_eq!(n("X"), 10);
    assert_eq!(n("s"), 1);
    assert_eq!(n("f"), 1);
    assert_eq!(n("i"), 2);
    // process_name + (thread_name, thread_sort_index) per lane.
    assert_eq!(n("M"), 1 + 2 * SMALL_LANES.len());
}

#[test]
fn trace_chrome_json_metadata_names_process_and_orders_threads() {
    let doc = parse_json(&chrome_json(&small(), "scenario \"two queues\""));
    let events = trace_events(&doc);
    let process: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .collect();
    assert_eq!(process.len(), 1);
    assert_eq!(process[0]["pid"], 1);
    assert_eq!(process[0]["args"]["name"], "scenario \"two queues\"");
    assert!(events.iter().all(|e| e["pid"] == 1));

    let names = thread_names(&doc);
    let ordered: Vec<&str> = names.values().map(String::as_str).collect();
    assert_eq!(ordered, SMALL_LANES);
    let sort: BTreeMap<u64, u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_sort_index")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["sort_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sort.len(), SMALL_LANES.len());
    let by_sort: Vec<&str> = {
        let mut v: Vec<(u64, &str)> = sort
            .iter()
            .map(|(tid, idx)| (*idx, names[tid].as_str()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    };
    assert_eq!(by_sort, SMALL_LANES);
    // Every non-metadata event is on a named thread.
    for e in events.iter().filter(|e| e["ph"] != "M") {
        assert!(names.contains_key(&e["tid"].as_u64().unwrap()), "{e}");
    }
}

#[test]
fn trace_chrome_json_slices_are_complete_events_in_microseconds() {
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let pfp = trace_events(&doc)
        .iter()
        .find(|e| e["ph"] == "X" && e["name"] == "wait memory flags >= 1")
        .expect("gfx PFP slice");
    // The earliest event is at T0: the slice starts 0.5 µs after it and lasts 1.5 µs.
    assert_eq!(pfp["ts"].as_f64(), Some(0.5));
    assert_eq!(pfp["dur"].as_f64(), Some(1.5));
    assert_eq!(pfp["cat"], "busy");
    assert_eq!(pfp["args"]["site"], "list produce, command 0");
    assert_eq!(pfp["args"]["start_ns"], T0 + 500);
    assert_eq!(names[&pfp["tid"].as_u64().unwrap()], "gfx PFP");
    let cats: Vec<&str> = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["cat"].as_str().unwrap())
        .collect();
    for kind in ["busy", "blocked", "kernel", "host"] {
        assert!(cats.contains(&kind), "{kind} in {cats:?}");
    }
    let first = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(first, 0.0);
}

#[test]
fn trace_chrome_json_flows_are_paired_from_writer_to_waiter() {
    for events in [small(), large()] {
        let doc = parse_json(&chrome_json(&events, "p"));
        let mut pairs: BTreeMap<u64, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
        for e in trace_events(&doc) {
            match e["ph"].as_str() {
                Some("s") => pairs
                    .entry(e["id"].as_u64().unwrap())
                    .or_default()
                    .0
                    .push(e),
                Some("f") => pairs
                    .entry(e["id"].as_u64().unwrap())
                    .or_default()
                    .1
                    .push(e),
                _ => {}
            }
        }
        let flows = events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Flow { .. }))
            .count();
        assert_eq!(pairs.len(), flows);
        for (id, (s, f)) in &pairs {
            assert_eq!((s.len(), f.len()), (1, 1), "flow {id}");
            assert_eq!(s[0]["name"], f[0]["name"]);
            assert!(s[0]["ts"].as_f64() <= f[0]["ts"].as_f64());
        }
    }
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let s = trace_events(&doc).iter().find(|e| e["ph"] == "s").unwrap();
    let f = trace_events(&doc).iter().find(|e| e["ph"] == "f").unwrap();
    assert_eq!(s["name"], "fence frame = 1");
    assert_eq!(names[&s["tid"].as_u64().unwrap()], "gfx ME");
    assert_eq!(names[&f["tid"].as_u64().unwrap()], "compute ME");
    assert_eq!(f["bp"], "e");
    assert_eq!(s["ts"].as_f64(), Some(8.5));
    assert_eq!(f["ts"].as_f64(), Some(9.0));
}

#[test]
fn trace_chrome_json_instants_are_thread_scoped_with_error_flag() {
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let instants: Vec<&Value> = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "i")
        .collect();
    assert_eq!(instants.len(), 2);
    let removal = instants
        .iter()
        .find(|e| e["args"]["error"] == true)
        .expect("the removal");
    assert!(removal["name"]
        .as_str()
        .unwrap()
        .starts_with("device removed"));
    assert_eq!(removal["s"], "t");
    assert_eq!(names[&removal["tid"].as_u64().unwrap()], "compute ME");
    assert_eq!(removal["ts"].as_f64(), Some(20.0));
    let signal = instants
        .iter()
        .find(|e| e["args"]["error"] == false)
        .unwrap();
    assert_eq!(signal["name"], "signal frame = 1");
}

#[test]
fn trace_chrome_json_is_byte_identical_for_the_same_events() {
    for events in [small(), large(), Vec::new()] {
        let a = chrome_json(&events, "p");
        let b = chrome_json(&events.clone(), "p");
        assert_eq!(a, b);
    }
}

#[test]
fn trace_chrome_json_survives_odd_input() {
    let events = vec![
        // End before start, a zero-length slice, extreme times, odd characters.
        slice(
            me("q\"<&>\u{1}\u{7f}"),
            "inverted",
            SliceKind::Busy,
            5_000,
            10,
        ),
        slice(me("q"), "zero", SliceKind::Blocked, 7, 7),
        instant(host("h\n"), u64::MAX, "late", true),
        flow(worker(u32::MAX), 0, host("h\n"), u64::MAX, "\u{0}wide"),
    ];
    let doc = parse_json(&chrome_json(&events, "\u{1}\"odd\""));
    check_chrome_fields(&doc);
    let inverted = trace_events(&doc)
        .iter()
        .find(|e| e["name"] == "inverted")
        .unwrap();
    assert_eq!(inverted["dur"].as_f64(), Some(0.0));
    let doc = parse_json(&chrome_json(&[], "empty"));
    assert_eq!(trace_events(&doc).len(), 1);
}

// ---------------------------------------------------------------- SVG

fn parse_svg(s: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(s).unwrap_or_else(|e| panic!("svg_timeline output is XML: {e}"))
}

fn has_class(n: &roxmltree::Node, class: &str) -> bool {
    n.attribute("class")
        .is_some_and(|c| c.split_whitespace().any(|x| x == class))
}

fn with_class<'a, 'i>(
    doc: &'a roxmltree::Document<'i>,
    tag: &'a str,
    class: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> + 'a {
    doc.descendants()
        .filter(move |n| n.has_tag_name(tag) && has_class(n, class))
}

fn text_of(n: &roxmltree::Node) -> String {
    n.children()
        .filter(|c| c.is_text())
        .filter_map(|c| c.text())
        .collect()
}

fn tooltip(n: &roxmltree::Node) -> Option<String> {
    n.children()
        .find(|c| c.has_tag_name("title"))
        .map(|t| text_of(&t))
}

#[test]
fn trace_svg_is_well_formed_and_sized() {
    let svg = svg_timeline(&small(), "two queues");
    let doc = parse_svg(&svg);
    let root = doc.root_element();
    assert!(root.has_tag_name(("http://www.w3.org/2000/svg", "svg")));
    let w: f64 = root.attribute("width").unwrap().parse().unwrap();
    let h: f64 = root.attribute("height").unwrap().parse().unwrap();
    assert!((1500.0..=1700.0).contains(&w), "width {w}");
    assert!(h > 200.0 && h < 900.0, "height {h}");
    let title: Vec<String> = with_class(&doc, "text", "title")
        .map(|n| text_of(&n))
        .collect();
    assert_eq!(title, ["two queues"]);
}

#[test]
fn trace_svg_has_one_lane_label_per_track() {
    let svg = svg_timeline(&small(), "t");
    let doc = parse_svg(&svg);
    let labels: Vec<String> = with_class(&doc, "text", "lane-label")
        .map(|n| text_of(&n))
        .collect();
    assert_eq!(labels, SMALL_LANES);
    assert_eq!(with_class(&doc, "rect", "lane").count(), SMALL_LANES.len());
}

#[test]
fn trace_svg_axis_has_5_to_10_ticks_with_a_unit() {
    for (events, unit) in [(small(), "µs"), (large(), "ms")] {
        let svg = svg_timeline(&events, "t");
        let doc = parse_svg(&svg);
        let ticks: Vec<String> = with_class(&doc, "text", "tick-label")
            .map(|n| text_of(&n))
            .collect();
        assert!((5..=10).contains(&ticks.len()), "{ticks:?}");
        let mut last = None;
        for t in &ticks {
            let (v, u) = t.split_once(' ').expect("value and unit");
            let v: f64 = v.parse().expect("numeric tick");
            assert_eq!(u, unit, "{ticks:?}");
            assert!(last.is_none_or(|l| l < v), "{ticks:?}");
            last = Some(v);
        }
        assert_eq!(ticks[0], format!("0 {unit}"));
        assert!(ticks.iter().all(|t| !t.starts_with("1000 ")), "{ticks:?}");
    }
    // Nanosecond and second spans.
    let ns = svg_timeline(&[slice(me("q"), "a", SliceKind::Busy, T0, T0 + 700)], "t");
    let doc = parse_svg(&ns);
    assert!(with_class(&doc, "text", "tick-label").all(|n| text_of(&n).ends_with(" ns")));
    let s = svg_timeline(&[slice(me("q"), "a", SliceKind::Busy, T0, T0 * 8)], "t");
    let doc = parse_svg(&s);
    let ticks: Vec<String> = with_class(&doc, "text", "tick-label")
        .map(|n| text_of(&n))
        .collect();
    assert!((5..=10).contains(&ticks.len()), "{ticks:?}");
    assert!(ticks.iter().all(|t| t.ends_with(" s")), "{ticks:?}");
}

#[test]
fn trace_svg_slices_are_rectangles_by_kind_with_tooltips() {
    let svg = svg_timeline(&small(), "t");
    let doc = parse_svg(&svg);
    let slices: Vec<_> = with_class(&doc, "rect", "slice").collect();
    assert_eq!(slices.len(), 9);
    let mut fills: BTreeMap<&str, &str> = BTreeMap::new();
    for kind in ["busy", "blocked", "kernel", "host"] {
        let of_kind: Vec<_> = slices.iter().filter(|n| has_class(n, kind)).collect();
        assert!(!of_kind.is_empty(), "{kind}");
        let fill = of_kind[0].attribute("fill").unwrap();
        assert!(of_kind.iter().all(|n| n.attribute("fill") == Some(fill)));
        fills.insert(kind, fill);
    }
    let distinct: std::collections::BTreeSet<&str> = fills.values().copied().collect();
    assert_eq!(distinct.len(), 4, "{fills:?}");
    assert_eq!(fills["blocked"], "url(#hatch)");
    assert!(doc
        .descendants()
        .any(|n| n.has_tag_name("pattern") && n.attribute("id") == Some("hatch")));
    for n in &slices {
        let tip = tooltip(n).expect("every slice has a tooltip");
        assert!(!tip.is_empty());
    }
    let pfp = slices
        .iter()
        .find(|n| tooltip(n).unwrap().starts_with("wait memory flags >= 1"))
        .unwrap();
    assert!(tooltip(pfp)
        .unwrap()
        .contains("site: list produce, command 0"));
    // Wide enough slices are named inside.
    let names: Vec<String> = with_class(&doc, "text", "slice-label")
        .map(|n| text_of(&n))
        .collect();
    assert!(names.iter().any(|n| n == "draw +3 commands"), "{names:?}");
}

#[test]
fn trace_svg_flows_are_arrows_from_writer_to_waiter() {
    let svg = svg_timeline(&small(), "t");
    let doc = parse_svg(&svg);
    let marker = doc
        .descendants()
        .find(|n| n.has_tag_name("marker") && n.attribute("id") == Some("arrow"))
        .expect("arrowhead marker");
    assert!(marker.children().any(|c| c.has_tag_name("path")));
    let flows: Vec<_> = with_class(&doc, "g", "flow").collect();
    assert_eq!(flows.len(), 1);
    let line = flows[0]
        .children()
        .find(|c| c.has_tag_name("line"))
        .unwrap();
    assert_eq!(line.attribute("marker-end"), Some("url(#arrow)"));
    let tip = tooltip(&flows[0]).unwrap();
    assert!(
        tip.starts_with("fence frame = 1\ngfx ME to compute ME"),
        "{tip}"
    );
    // The arrow goes right and up, from gfx ME (4th lane) to compute ME (2nd lane).
    let y = |a: &str| line.attribute(a).unwrap().parse::<f64>().unwrap();
    assert!(y("y2") < y("y1"));
    assert!(y("x2") > y("x1"));
}

#[test]
fn trace_svg_error_instant_is_red_and_named() {
    let svg = svg_timeline(&small(), "t");
    let doc = parse_svg(&svg);
    let errors: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && has_class(n, "instant") && has_class(n, "error"))
        .collect();
    assert_eq!(errors.len(), 1);
    let label = errors[0]
        .descendants()
        .find(|n| n.has_tag_name("text"))
        .expect("named");
    assert!(text_of(&label).starts_with("device removed: hang"));
    assert_eq!(label.attribute("fill"), Some("#d00000"));
    let marker = errors[0]
        .children()
        .find(|n| n.has_tag_name("polygon"))
        .unwrap();
    assert_eq!(marker.attribute("fill"), Some("#d00000"));
    // The plain signal is a (non-red) marker.
    let plain: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && has_class(n, "instant") && !has_class(n, "error"))
        .collect();
    assert_eq!(plain.len(), 1);
    assert_ne!(
        plain[0]
            .children()
            .find(|n| n.has_tag_name("polygon"))
            .unwrap()
            .attribute("fill"),
        Some("#d00000")
    );
}

#[test]
fn trace_svg_has_a_legend() {
    let svg = svg_timeline(&small(), "t");
    let doc = parse_svg(&svg);
    let legend = with_class(&doc, "g", "legend").next().expect("legend");
    let texts: Vec<String> = legend
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| text_of(&n))
        .collect();
    for want in [
        "busy", "blocked", "kernel", "host", "merged", "wait", "error",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(want)),
            "{want} in {texts:?}"
        );
    }
    assert!(legend
        .descendants()
        .any(|n| n.attribute("marker-end") == Some("url(#arrow)")));
}

#[test]
fn trace_svg_large_case_merges_narrow_slices() {
    let events = large();
    assert_eq!(slice_count(&events), 500);
    let svg = svg_timeline(&events, "large");
    let doc = parse_svg(&svg);
    let rects: Vec<_> = with_class(&doc, "rect", "slice").collect();
    assert!(rects.len() < 400, "{} rectangles", rects.len());
    let merged: Vec<_> = with_class(&doc, "rect", "aggregate").collect();
    assert!(!merged.is_empty());
    // The 150 copies merge into one labelled rectangle.
    let copies = merged
        .iter()
        .find(|n| tooltip(n).unwrap().starts_with("150 commands merged"))
        .expect("the copy burst merged");
    assert!(has_class(copies, "busy"));
    let counts: Vec<String> = with_class(&doc, "text", "aggregate-label")
        .map(|n| text_of(&n))
        .collect();
    assert!(counts.iter().any(|c| c == "150 commands"), "{counts:?}");
    let notes: Vec<String> = with_class(&doc, "text", "note")
        .map(|n| text_of(&n))
        .collect();
    assert!(notes.iter().any(|n| n.contains("merged into")), "{notes:?}");
    // Every lane and every flow is there; both errors are red and named.
    assert_eq!(with_class(&doc, "text", "lane-label").count(), 9);
    assert_eq!(with_class(&doc, "g", "flow").count(), 86);
    assert_eq!(with_class(&doc, "text", "error").count(), 2);
    assert_eq!(svg, svg_timeline(&events, "large"));
}

#[test]
fn trace_svg_caps_flows_with_a_note() {
    let mut events = Vec::new();
    for i in 0..260u64 {
        let t = T0 + i * 1_000;
        events.push(slice(me("a"), "signal", SliceKind::Busy, t, t + 100));
        events.push(slice(me("b"), "wait", SliceKind::Blocked, t, t + 400));
        events.push(flow(me("a"), t + 100, me("b"), t + 400, "fence f"));
    }
    let svg = svg_timeline(&events, "many flows");
    let doc = parse_svg(&svg);
    assert_eq!(with_class(&doc, "g", "flow").count(), 200);
    let notes: Vec<String> = with_class(&doc, "text", "note")
        .map(|n| text_of(&n))
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("260 flows") && n.contains("200")),
        "{notes:?}"
    );
}

#[test]
fn trace_svg_survives_empty_and_degenerate_input() {
    let empty = svg_timeline(&[], "nothing");
    let doc = parse_svg(&empty);
    assert_eq!(with_class(&doc, "text", "lane-label").count(), 0);
    assert!(with_class(&doc, "text", "summary").any(|n| text_of(&n) == "no events"));

    let degenerate = vec![
        slice(me("q"), "zero", SliceKind::Busy, T0, T0),
        slice(me("q"), "zero again", SliceKind::Busy, T0, T0),
        slice(pfp("q"), "inverted", SliceKind::Blocked, T0 + 10, T0),
        instant(worker(3), T0, "only instant", false),
        flow(host("h"), T0, host("h"), T0, "to itself"),
    ];
    let svg = svg_timeline(&degenerate, "degenerate");
    let doc = parse_svg(&svg);
    assert_eq!(with_class(&doc, "text", "lane-label").count(), 4);
    assert!(with_class(&doc, "rect", "slice").all(|n| {
        let w: f64 = n.attribute("width").unwrap().parse().unwrap();
        w >= 1.0
    }));

    let extremes = vec![
        slice(me("q"), "from zero", SliceKind::Kernel, 0, 10),
        slice(
            me("q"),
            "to the end",
            SliceKind::Host,
            u64::MAX - 5,
            u64::MAX,
        ),
        flow(me("q"), 0, me("q"), u64::MAX, "across"),
        instant(me("q"), u64::MAX, "end", true),
    ];
    parse_svg(&svg_timeline(&extremes, "extremes"));
    parse_svg(&svg_timeline(&[instant(me("q"), 5, "alone", true)], "one"));
}

#[test]
fn trace_svg_escapes_text() {
    let odd = "<b>&\"quoted\" 'single'\u{1}\u{b}\u{fffe} µ</b>";
    let events = vec![
        slice(me(odd), odd, SliceKind::Busy, T0, T0 + 1_000_000),
        instant(host(odd), T0 + 10, odd, true),
        flow(me(odd), T0, host(odd), T0 + 10, odd),
    ];
    let svg = svg_timeline(&events, odd);
    let doc = parse_svg(&svg);
    let clean = "<b>&\"quoted\" 'single' µ</b>";
    let title: Vec<String> = with_class(&doc, "text", "title")
        .map(|n| text_of(&n))
        .collect();
    assert_eq!(title, [clean]);
    let labels: Vec<String> = with_class(&doc, "text", "lane-label")
        .filter_map(|n| tooltip(&n))
        .collect();
    assert_eq!(labels, [format!("{clean} ME"), format!("host {clean}")]);
}

#[test]
fn trace_svg_is_byte_identical_for_the_same_events() {
    for events in [small(), large(), Vec::new()] {
        assert_eq!(
            svg_timeline(&events, "t"),
            svg_timeline(&events.clone(), "t")
        );
    }
}

fn arb_track() -> impl Strategy<Value = Track> {
    prop_oneof![
        "[a-c]{1,2}".prop_map(|queue| Track::Pfp { queue }),
        "[a-c]{1,2}".prop_map(|queue| Track::Me { queue }),
        (0u32..4).prop_map(|index| Track::Worker { index }),
        "\\PC{0,3}".prop_map(|name| Track::Host { name }),
    ]
}

fn arb_kind() -> impl Strategy<Value = SliceKind> {
    prop_oneof![
        Just(SliceKind::Busy),
        Just(SliceKind::Blocked),
        Just(SliceKind::Kernel),
        Just(SliceKind::Host),
    ]
}

fn arb_ns() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..2_000, T0..T0 + 5_000_000, Just(u64::MAX)]
}

fn arb_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        (
            arb_track(),
            "\\PC{0,12}",
            arb_kind(),
            arb_ns(),
            arb_ns(),
            proptest::option::of("\\PC{0,8}")
        )
            .prop_map(
                |(track, name, kind, start_ns, end_ns, site)| TraceEvent::Slice {
                    track,
                    name,
                    kind,
                    start_ns,
                    end_ns,
                    site
                }
            ),
        (arb_track(), arb_ns(), arb_track(), arb_ns(), "\\PC{0,8}").prop_map(
            |(from, from_ns, to, to_ns, label)| TraceEvent::Flow {
                from,
                from_ns,
                to,
                to_ns,
                label
            }
        ),
        (arb_track(), arb_ns(), "\\PC{0,8}", any::<bool>()).prop_map(
            |(track, ts_ns, name, error)| TraceEvent::Instant {
                track,
                ts_ns,
                name,
                error
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn trace_renderers_accept_any_events(events in proptest::collection::vec(arb_event(), 0..40)) {
        let json = chrome_json(&events, "p");
        let doc = parse_json(&json);
        check_chrome_fields(&doc);
        prop_assert_eq!(&json, &chrome_json(&events, "p"));
        let svg = svg_timeline(&events, "p");
        parse_svg(&svg);
        prop_assert_eq!(&svg, &svg_timeline(&events, "p"));
    }
}

/// Writes the large case's SVG (and JSON) for looking at:
/// `PIPEFENCE_TIMELINE_OUT=/tmp/timeline cargo test -p pipefence --test trace_render -- --ignored`
/// then `scripts/render-timeline.sh /tmp/timeline.svg /tmp/timeline.png`.
#[test]
#[ignore = "writes files for scripts/render-timeline.sh"]
fn trace_write_example_timeline() {
    let base = std::env::var("PIPEFENCE_TIMELINE_OUT")
        .unwrap_or_else(|_| "/tmp/pipefence-timeline".to_string());
    std::fs::write(
        format!("{base}-small.svg"),
        svg_timeline(
            &small(),
            "pipefence: two queues, a wait released by a signal, a removal",
        ),
    )
    .unwrap();
    let events = large();
    std::fs::write(
        format!("{base}.svg"),
        svg_timeline(
            &events,
            "pipefence: copy burst, 85 frames gfx → compute, hang and removal",
        ),
    )
    .unwrap();
    std::fs::write(
        format!("{base}.json"),
        chrome_json(&events, "pipefence example"),
    )
    .unwrap();
}
