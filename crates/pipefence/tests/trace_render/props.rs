//! Properties over random event lists, and the example timeline written for looking at.

use super::chrome::{check_chrome_fields, parse_json};
use super::svg::parse_svg;
use super::*;

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
