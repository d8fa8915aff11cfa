//! Marks over the lanes: flow arrows from a writer's lane to the waiter's, and instants
//! (diamonds, and red triangles with a dashed line across all lanes for errors).

use std::fmt::Write as _;

use super::super::TraceEvent;
use super::format::{esc, px, truncate};
use super::{
    Layout, Sorted, CHAR_W_12_BOLD, COLOR_ERROR, COLOR_FLOW, COLOR_INSTANT, LANES_TOP, LANE_H,
    MAX_ERROR_LABELS, MAX_FLOWS, MAX_FLOW_LABELS, MAX_INSTANT_LABELS, WIDTH,
};

/// Draws the earliest [`MAX_FLOWS`] flows (labelled when at most [`MAX_FLOW_LABELS`] are
/// drawn), and adds a note when some were left out.
pub(super) fn flows(
    layout: &Layout,
    flows: &[&TraceEvent],
    body: &mut String,
    notes: &mut Vec<String>,
) {
    let scale = &layout.scale;
    let drawn = flows.len().min(MAX_FLOWS);
    for e in flows.iter().take(MAX_FLOWS) {
        let TraceEvent::Flow {
            from,
            from_ns,
            to,
            to_ns,
            label,
        } = e
        else {
            continue;
        };
        let (Some(a), Some(b)) = (layout.lane_of(from), layout.lane_of(to)) else {
            continue;
        };
        // From the writer's slice edge facing the waiter to the waiter's slice edge (centres
        // within one lane), so that arrows cover as little of the slices as they can.
        let inset = 4.0;
        let (y1, y2) = match a.cmp(&b) {
            std::cmp::Ordering::Less => {
                (layout.lane_y[a] + LANE_H - inset, layout.lane_y[b] + inset)
            }
            std::cmp::Ordering::Greater => {
                (layout.lane_y[a] + inset, layout.lane_y[b] + LANE_H - inset)
            }
            std::cmp::Ordering::Equal => (layout.center(a), layout.center(b)),
        };
        let (x1, x2) = (scale.x(*from_ns), scale.x(*to_ns));
        let tip = format!(
            "{label}\n{} to {}\n{} to {}",
            layout.labels[a],
            layout.labels[b],
            scale.rel(*from_ns),
            scale.rel(*to_ns)
        );
        let _ = write!(
            body,
            r#"<g class="flow"><title>{}</title><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_FLOW}" stroke-width="1.5" marker-end="url(#arrow)"/>"#,
            esc(&tip),
            px(x1),
            px(y1),
            px(x2),
            px(y2),
        );
        if drawn <= MAX_FLOW_LABELS {
            let _ = write!(
                body,
                r#"<text class="flow-label" x="{}" y="{}" fill="{COLOR_FLOW}">{}</text>"#,
                px((x1 + x2) / 2.0 + 4.0),
                px((y1 + y2) / 2.0 - 3.0),
                esc(&truncate(label, 40)),
            );
        }
        body.push_str("</g>");
    }
    if flows.len() > MAX_FLOWS {
        notes.push(format!(
            "{} flows; only the earliest {MAX_FLOWS} are drawn.",
            flows.len()
        ));
    }
}

/// An instant to draw: its lane, x and tooltip, and its name.
struct Mark<'a> {
    lane: usize,
    x: f64,
    tip: String,
    name: &'a str,
}

/// Draws the instants, plain ones first and errors (with their labels) on top: plain ones
/// labelled when there are at most [`MAX_INSTANT_LABELS`] (else a note says so), the first
/// [`MAX_ERROR_LABELS`] errors labelled.
pub(super) fn instants(
    layout: &Layout,
    sorted: &Sorted<'_>,
    body: &mut String,
    notes: &mut Vec<String>,
) {
    let scale = &layout.scale;
    let instants = &sorted.instants;
    let n_errors = sorted.n_errors;
    let plain = instants.len() - n_errors;
    let mut error_labels = 0usize;
    // Plain instants first, errors (and their labels) on top.
    let is_error = |e: &&&TraceEvent| matches!(e, TraceEvent::Instant { error: true, .. });
    let plain_first = instants
        .iter()
        .filter(|e| !is_error(e))
        .chain(instants.iter().filter(is_error));
    for e in plain_first {
        let TraceEvent::Instant {
            track,
            ts_ns,
            name,
            error,
        } = e
        else {
            continue;
        };
        let Some(i) = layout.lane_of(track) else {
            continue;
        };
        let x = scale.x(*ts_ns);
        let tip = format!("{name}\n{} at {}", layout.labels[i], scale.rel(*ts_ns));
        let mark = Mark {
            lane: i,
            x,
            tip,
            name,
        };
        if *error {
            let labelled = error_labels < MAX_ERROR_LABELS;
            if labelled {
                error_labels += 1;
            }
            error_instant(layout, &mark, labelled, body);
        } else {
            plain_instant(layout, &mark, plain <= MAX_INSTANT_LABELS, body);
        }
    }
    if plain > MAX_INSTANT_LABELS {
        notes.push(format!(
            "{plain} instants drawn as diamonds without names (hover for them)."
        ));
    }
}

/// Draws an error instant: a dashed line across all lanes and a red triangle on its lane, with
/// its name in a box when `labelled`.
fn error_instant(layout: &Layout, mark: &Mark<'_>, labelled: bool, body: &mut String) {
    let Mark {
        lane: i, x, name, ..
    } = *mark;
    let tip: &str = &mark.tip;
    let y0 = layout.lane_y[i];
    let _ = write!(
        body,
        r##"<g class="instant error"><title>{}</title><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_ERROR}" stroke-width="1.2" stroke-dasharray="4 3"/><polygon points="{},{} {},{} {},{}" fill="{COLOR_ERROR}" stroke="#ffffff" stroke-width="0.8"/>"##,
        esc(tip),
        px(x),
        px(LANES_TOP - 6.0),
        px(x),
        px(layout.lanes_bottom),
        px(x - 6.0),
        px(y0 + 1.0),
        px(x + 6.0),
        px(y0 + 1.0),
        px(x),
        px(y0 + 13.0),
    );
    if labelled {
        let text = truncate(name, 60);
        let tw = text.chars().count() as f64 * CHAR_W_12_BOLD;
        let (tx, anchor, bx) = if x + 9.0 + tw + 4.0 > WIDTH - 2.0 {
            (x - 9.0, "end", x - 9.0 - tw - 4.0)
        } else {
            (x + 9.0, "start", x + 5.0)
        };
        let _ = write!(
            body,
            r##"<rect class="instant-box" x="{}" y="{}" width="{}" height="16" rx="3" fill="#ffffff" fill-opacity="0.92" stroke="{COLOR_ERROR}" stroke-width="1"/><text class="instant-label error" x="{}" y="{}" text-anchor="{anchor}" fill="{COLOR_ERROR}">{}</text>"##,
            px(bx.max(0.0)),
            px(y0 + 1.0),
            px(tw + 8.0),
            px(tx),
            px(y0 + 13.0),
            esc(&text),
        );
    }
    body.push_str("</g>");
}

/// Draws a plain instant: a small diamond on its lane, with its name when `labelled`.
fn plain_instant(layout: &Layout, mark: &Mark<'_>, labelled: bool, body: &mut String) {
    let Mark {
        lane: i, x, name, ..
    } = *mark;
    let tip: &str = &mark.tip;
    let y0 = layout.lane_y[i] + 2.0;
    let _ = write!(
        body,
        r##"<g class="instant"><title>{}</title><polygon points="{},{} {},{} {},{} {},{}" fill="{COLOR_INSTANT}" stroke="#ffffff" stroke-width="0.6"/>"##,
        esc(tip),
        px(x),
        px(y0),
        px(x + 3.5),
        px(y0 + 3.5),
        px(x),
        px(y0 + 7.0),
        px(x - 3.5),
        px(y0 + 3.5),
    );
    if labelled {
        let _ = write!(
            body,
            r#"<text class="instant-label" x="{}" y="{}">{}</text>"#,
            px(x + 5.0),
            px(y0 + 7.0),
            esc(&truncate(name, 40)),
        );
    }
    body.push_str("</g>");
}
