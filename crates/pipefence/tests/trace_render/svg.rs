//! The SVG timeline renderer.

use super::*;

// ---------------------------------------------------------------- SVG

pub(super) fn parse_svg(s: &str) -> roxmltree::Document<'_> {
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
            .any(|n| n.contains("260 edges") && n.contains("200")),
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

/// `small()` as the engine records it now: the blocked wait's flow repeated by its edge, and
/// edges for waits that did not block, one into a lane (`copy PFP`... here `dma ME`) that
/// nothing else mentions and one from a host's write into a PFP wait.
fn small_with_edges() -> Vec<TraceEvent> {
    let mut events = small();
    events.push(sync(
        me("gfx"),
        T0 + 8_500,
        me("compute"),
        T0 + 9_000,
        "fence frame = 1",
        SyncKind::QueueWait,
        true,
    ));
    events.push(sync(
        me("gfx"),
        T0 + 8_500,
        me("dma"),
        T0 + 9_200,
        "fence frame = 1",
        SyncKind::QueueWait,
        false,
    ));
    events.push(sync(
        host("main"),
        T0 + 100,
        pfp("gfx"),
        T0 + 600,
        "cpu-write flags = 1",
        SyncKind::PfpWait,
        false,
    ));
    events
}

#[test]
fn trace_svg_draws_an_edge_for_every_satisfied_wait_blocked_or_not() {
    let svg = svg_timeline(&small_with_edges(), "edges");
    let doc = parse_svg(&svg);
    let edges: Vec<_> = with_class(&doc, "g", "flow").collect();
    // The flow and its blocked edge are one arrow; the two edges that did not block are two.
    assert_eq!(edges.len(), 3, "{svg}");
    let blocked: Vec<_> = edges.iter().filter(|g| has_class(g, "blocked")).collect();
    let passed: Vec<_> = edges.iter().filter(|g| has_class(g, "passed")).collect();
    assert_eq!((blocked.len(), passed.len()), (1, 2));
    let line_attr = |g: &roxmltree::Node, a: &str| {
        g.children()
            .find(|c| c.has_tag_name("line"))
            .and_then(|l| l.attribute(a).map(str::to_string))
    };
    assert_eq!(
        line_attr(blocked[0], "marker-end").as_deref(),
        Some("url(#arrow)")
    );
    for g in &passed {
        assert_eq!(
            line_attr(g, "marker-end").as_deref(),
            Some("url(#arrow-pale)")
        );
        assert!(line_attr(g, "stroke-dasharray").is_some());
    }
    let tips: Vec<String> = passed.iter().filter_map(|g| tooltip(g)).collect();
    assert!(
        tips.iter().any(|t| t.starts_with("cpu-write flags = 1\nhost main to gfx PFP (PFP memory wait, found it already released)")),
        "{tips:?}"
    );
    // The lane only an edge mentions is drawn.
    let labels: Vec<String> = with_class(&doc, "text", "lane-label")
        .map(|n| text_of(&n))
        .collect();
    assert!(labels.iter().any(|l| l == "dma ME"), "{labels:?}");
    let summary: Vec<String> = with_class(&doc, "text", "summary")
        .map(|n| text_of(&n))
        .collect();
    assert!(
        summary[0].contains("3 sync edges (1 blocked)"),
        "{summary:?}"
    );
}

/// Two bursts of work a millisecond apart: the idle stretch between them is elided behind a
/// break mark, so both bursts get most of the width; without a long idle stretch, no break.
#[test]
fn trace_svg_compresses_time_where_nothing_happens() {
    let gap = 1_000_000;
    let events = vec![
        slice(me("gfx"), "first", SliceKind::Busy, T0, T0 + 1_000),
        slice(
            me("gfx"),
            "second",
            SliceKind::Busy,
            T0 + gap,
            T0 + gap + 1_000,
        ),
        instant(me("gfx"), T0 + gap + 1_000, "signal f = 1", false),
    ];
    let svg = svg_timeline(&events, "bursts");
    let doc = parse_svg(&svg);
    let breaks: Vec<_> = with_class(&doc, "g", "break").collect();
    assert_eq!(breaks.len(), 1, "{svg}");
    assert!(
        tooltip(&breaks[0])
            .unwrap()
            .starts_with("nothing happens for 999 µs"),
        "{:?}",
        tooltip(&breaks[0])
    );
    let widths: Vec<f64> = with_class(&doc, "rect", "busy")
        .map(|r| r.attribute("width").unwrap().parse().unwrap())
        .collect();
    assert_eq!(widths.len(), 2);
    assert!(widths.iter().all(|w| *w > 500.0), "{widths:?}");
    let notes: Vec<String> = with_class(&doc, "text", "note")
        .map(|n| text_of(&n))
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("Time is compressed: 1 stretch")),
        "{notes:?}"
    );
    // At most 10 ticks over the drawn parts; none inside the break.
    let ticks = with_class(&doc, "text", "tick-label").count();
    assert!((2..=10).contains(&ticks), "{ticks} ticks");
    let rect = breaks[0]
        .children()
        .find(|c| c.has_tag_name("rect"))
        .unwrap();
    let bx = |a: &str| rect.attribute(a).unwrap().parse::<f64>().unwrap();
    let (b0, b1) = (bx("x"), bx("x") + bx("width"));
    for t in with_class(&doc, "text", "tick-label") {
        let x: f64 = t.attribute("x").unwrap().parse().unwrap();
        assert!(
            x <= b0 || x >= b1,
            "tick {} at {x} inside the break",
            text_of(&t)
        );
    }
    // A kernel running through the quiet stretch is something happening: no break.
    let mut busy = events.clone();
    busy.push(slice(
        worker(0),
        "spin",
        SliceKind::Kernel,
        T0 + 500,
        T0 + gap,
    ));
    let doc_busy = svg_timeline(&busy, "busy");
    assert_eq!(with_class(&parse_svg(&doc_busy), "g", "break").count(), 0);
    // A wait blocked through it is not.
    let mut waiting = events.clone();
    waiting.push(slice(
        host("main"),
        "wait",
        SliceKind::Blocked,
        T0 + 500,
        T0 + gap,
    ));
    let doc_wait = svg_timeline(&waiting, "waiting");
    assert_eq!(with_class(&parse_svg(&doc_wait), "g", "break").count(), 1);
    // Evenly spread events: no break.
    let even: Vec<TraceEvent> = (0..10u64)
        .map(|i| {
            slice(
                me("gfx"),
                "s",
                SliceKind::Busy,
                T0 + i * 100,
                T0 + i * 100 + 60,
            )
        })
        .collect();
    let doc_even = svg_timeline(&even, "even");
    assert_eq!(with_class(&parse_svg(&doc_even), "g", "break").count(), 0);
}

/// `begin_event` regions group a queue's lanes: a band above them named after the queue, a
/// rectangle per region in the row of its depth, a frame line where each outermost one begins.
#[test]
fn trace_svg_groups_a_queues_lanes_under_its_begin_event_regions() {
    let region = |name: &str, depth: u32, start: u64, end: u64| TraceEvent::Region {
        track: me("gfx"),
        name: name.to_string(),
        depth,
        start_ns: T0 + start,
        end_ns: T0 + end,
    };
    let mut events = small();
    events.push(region("frame 0", 0, 0, 4_000));
    events.push(region("shadows", 1, 500, 2_000));
    events.push(region("frame 1", 0, 4_000, 8_500));
    events.push(region("deep", 3, 4_100, 4_200));
    let svg = svg_timeline(&events, "frames");
    let doc = parse_svg(&svg);
    let labels: BTreeMap<String, f64> = with_class(&doc, "text", "lane-label")
        .map(|n| (text_of(&n), n.attribute("y").unwrap().parse().unwrap()))
        .collect();
    // The band sits in gfx's group, just above its PFP lane and below compute's lanes.
    let band = labels["gfx events"];
    assert!(
        band < labels["gfx PFP"] && band > labels["compute ME"],
        "{labels:?}"
    );
    assert!(!labels.contains_key("compute events"), "{labels:?}");
    let rects: Vec<_> = with_class(&doc, "rect", "region").collect();
    assert_eq!(rects.len(), 3, "the region nested 4 deep is left out");
    let y = |r: &roxmltree::Node| r.attribute("y").unwrap().parse::<f64>().unwrap();
    assert!(y(&rects[1]) > y(&rects[0]), "depth 1 below depth 0");
    assert_eq!(y(&rects[0]), y(&rects[2]));
    assert!(tooltip(&rects[1])
        .unwrap()
        .starts_with("shadows\nbegin_event on gfx ME, depth 1"));
    assert_eq!(with_class(&doc, "line", "frame-line").count(), 2);
    let notes: Vec<String> = with_class(&doc, "text", "note")
        .map(|n| text_of(&n))
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("1 begin_event region nested deeper")),
        "{notes:?}"
    );
    // Not in the Chrome trace.
    assert_eq!(chrome_json(&events, "p"), chrome_json(&small(), "p"));
}
