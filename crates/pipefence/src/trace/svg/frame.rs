//! The document around the drawing: the XML prologue with styles and definitions, the header
//! (title, summary and legend) and the footer (the axis caption and the notes).

use std::fmt::Write as _;

use super::super::{SliceKind, TraceEvent};
use super::format::{count, esc, fmt_clock, fmt_dur, px, truncate};
use super::lanes::kind_style;
use super::{
    Layout, Sorted, COLOR_BLOCKED_EDGE, COLOR_BUSY, COLOR_EDGE, COLOR_ERROR, COLOR_FLOW,
    COLOR_INSTANT, WIDTH,
};

/// The header: the title, a summary of what `events` hold, and the legend.
pub(super) fn header(
    events: &[TraceEvent],
    title: &str,
    layout: &Layout,
    sorted: &Sorted<'_>,
) -> String {
    let mut head = String::new();
    let _ = write!(
        head,
        r#"<text class="title" x="16" y="28">{}</text>"#,
        esc(&truncate(title, 140))
    );
    let summary = if events.is_empty() {
        "no events".to_string()
    } else {
        format!(
            "{} · {} · {} ({} blocked) · {} ({}) · span {}",
            count(layout.tracks.len(), "lane", "lanes"),
            count(sorted.n_slices, "slice", "slices"),
            count(sorted.flows.len(), "sync edge", "sync edges"),
            sorted.flows.iter().filter(|e| e.blocked).count(),
            count(sorted.instants.len(), "instant", "instants"),
            count(sorted.n_errors, "error", "errors"),
            fmt_dur(layout.t1 - layout.t0)
        )
    };
    let _ = write!(
        head,
        r#"<text class="summary" x="16" y="48">{}</text>"#,
        esc(&summary)
    );
    head.push_str(&legend(16.0, 66.0));
    head
}

/// The footer below the lanes: the axis caption (in tick `unit`s, when there are lanes) and the
/// notes; and the picture's height.
pub(super) fn footer(layout: &Layout, unit: &str, notes: &[String]) -> (String, f64) {
    let scale = &layout.scale;
    let mut y_note = layout.lanes_bottom + 20.0;
    let mut foot = String::new();
    if !layout.tracks.is_empty() {
        let _ = write!(
            foot,
            r#"<text class="caption" x="{}" y="{}">time since the first event ({}), t0 = device clock {}</text>"#,
            px(scale.x0),
            px(y_note),
            unit,
            fmt_clock(layout.t0)
        );
        y_note += 18.0;
    }
    for n in notes {
        let _ = write!(
            foot,
            r#"<text class="note" x="{}" y="{}">{}</text>"#,
            px(scale.x0),
            px(y_note),
            esc(n)
        );
        y_note += 16.0;
    }
    let height = (y_note + 6.0).ceil();
    (foot, height)
}

/// The SVG document of `height` pixels: prologue, styles and definitions, then `head`, `body`
/// and `foot`.
pub(super) fn document(title: &str, height: f64, head: &str, body: &str, foot: &str) -> String {
    let mut svg = String::with_capacity(body.len() + head.len() + foot.len() + 2048);
    let _ = write!(
        svg,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<title>{title}</title>
<style>
.title {{ font-size: 18px; font-weight: bold; fill: #111; }}
.summary, .caption, .note {{ font-size: 12px; fill: #444; }}
.note {{ font-style: italic; }}
.tick-label {{ font-size: 11px; fill: #333; }}
.lane-label {{ font-size: 12px; font-weight: bold; fill: #222; }}
.slice-label, .flow-label, .instant-label {{ font-size: 11px; pointer-events: none; }}
.region-label {{ font-size: 10px; pointer-events: none; }}
.slice-label, .instant-label, .flow-label {{ paint-order: stroke; }}
.instant-label.error {{ font-size: 12px; font-weight: bold; }}
.flow-label {{ stroke: #ffffff; stroke-width: 3px; }}
.slice-label.blocked {{ stroke: #fcd9c8; stroke-width: 3px; }}
.legend text {{ font-size: 12px; fill: #333; }}
</style>
<defs>
<pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fcd9c8"/><line x1="0" y1="0" x2="0" y2="6" stroke="{blocked}" stroke-width="2.4"/></pattern>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{flow}"/></marker>
<marker id="arrow-pale" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{edge}"/></marker>
</defs>
<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>
"##,
        w = WIDTH,
        h = height,
        title = esc(title),
        blocked = COLOR_BLOCKED_EDGE,
        flow = COLOR_FLOW,
        edge = COLOR_EDGE,
    );
    svg.push_str(head);
    svg.push('\n');
    svg.push_str(body);
    svg.push('\n');
    svg.push_str(foot);
    svg.push_str("\n</svg>\n");
    svg
}

/// The legend row at `(x, y)` (its baseline).
fn legend(mut x: f64, y: f64) -> String {
    let mut out = String::from(r#"<g class="legend">"#);
    let swatch = |out: &mut String, x: f64, fill: &str, stroke: &str, dash: bool| {
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="18" height="11" fill="{fill}" stroke="{stroke}" stroke-width="{}"{}/>"#,
            px(x),
            px(y - 10.0),
            if dash { "1" } else { "0.6" },
            if dash {
                r#" stroke-dasharray="3 2""#
            } else {
                ""
            },
        );
    };
    let text = |out: &mut String, x: f64, s: &str| -> f64 {
        let _ = write!(
            out,
            r#"<text x="{}" y="{}">{}</text>"#,
            px(x),
            px(y),
            esc(s)
        );
        x + super::place::text_w(s, 12.0, false) + 18.0
    };
    for kind in [
        SliceKind::Busy,
        SliceKind::Blocked,
        SliceKind::Kernel,
        SliceKind::Host,
    ] {
        let (fill, stroke, _) = kind_style(kind);
        swatch(&mut out, x, fill, stroke, false);
        let what = match kind {
            SliceKind::Busy => "busy",
            SliceKind::Blocked => "blocked (waiting)",
            SliceKind::Kernel => "kernel",
            SliceKind::Host => "host",
        };
        x = text(&mut out, x + 23.0, what);
    }
    swatch(&mut out, x, COLOR_BUSY, "#111", true);
    x = text(&mut out, x + 23.0, "merged slices (count)");
    let _ = write!(
        out,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_FLOW}" stroke-width="1.5" marker-end="url(#arrow)"/>"#,
        px(x),
        px(y - 4.0),
        px(x + 24.0),
        px(y - 4.0)
    );
    x = text(&mut out, x + 30.0, "released a blocked wait");
    let _ = write!(
        out,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_EDGE}" stroke-width="1" stroke-dasharray="4 2" marker-end="url(#arrow-pale)"/>"#,
        px(x),
        px(y - 4.0),
        px(x + 24.0),
        px(y - 4.0)
    );
    x = text(&mut out, x + 30.0, "… a wait that did not block");
    let _ = write!(
        out,
        r#"<polygon points="{},{} {},{} {},{} {},{}" fill="{COLOR_INSTANT}"/>"#,
        px(x + 4.0),
        px(y - 9.0),
        px(x + 8.0),
        px(y - 5.0),
        px(x + 4.0),
        px(y - 1.0),
        px(x),
        px(y - 5.0),
    );
    x = text(&mut out, x + 13.0, "instant");
    let _ = write!(
        out,
        r#"<polygon points="{},{} {},{} {},{}" fill="{COLOR_ERROR}"/>"#,
        px(x),
        px(y - 10.0),
        px(x + 12.0),
        px(y - 10.0),
        px(x + 6.0),
        px(y + 1.0),
    );
    x = text(&mut out, x + 17.0, "error (removal, fault, hazard)");
    let _ = write!(
        out,
        r##"<rect x="{}" y="{}" width="18" height="10" rx="2" fill="#e3d9f3" stroke="#8a6fc0" stroke-width="0.8"/>"##,
        px(x),
        px(y - 9.0)
    );
    text(&mut out, x + 23.0, "begin_event region");
    out.push_str("</g>");
    out
}
