//! Marks over the lanes: release-to-acquire arrows from a writer's lane to the waiter's, and instants
//! (diamonds, and red triangles with a dashed line across all lanes for errors).

use std::fmt::Write as _;

use super::super::{SyncKind, TraceEvent};
use super::format::{esc, px, truncate};
use super::place::{text_box, text_w, Anchor, Placed};
use super::{
    Edge, Layout, Sorted, COLOR_EDGE, COLOR_ERROR, COLOR_FLOW, COLOR_INSTANT, LANES_TOP, LANE_H,
    MAX_ERROR_LABELS, MAX_FLOWS, MAX_FLOW_LABELS, MAX_INSTANT_LABELS, WIDTH,
};

/// Draws the earliest [`MAX_FLOWS`] edges (labelled, when at most [`MAX_FLOW_LABELS`] are
/// drawn, where a label overlaps nothing in `placed`; `hidden` counts those left out), and adds
/// a note when some were left out.
pub(super) fn flows(
    layout: &Layout,
    flows: &[Edge<'_>],
    body: &mut String,
    notes: &mut Vec<String>,
    placed: &mut Placed,
    hidden: &mut usize,
) {
    let scale = &layout.scale;
    let drawn = flows.len().min(MAX_FLOWS);
    for e in flows.iter().take(MAX_FLOWS) {
        let Edge {
            from,
            from_ns,
            to,
            to_ns,
            label,
            wait,
            blocked,
        } = *e;
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
        let (x1, x2) = (scale.x(from_ns), scale.x(to_ns));
        let what = match wait {
            Some(SyncKind::QueueWait) => "queue wait",
            Some(SyncKind::HostWait) => "host fence wait",
            Some(SyncKind::MeWait) => "ME memory wait",
            Some(SyncKind::PfpWait) => "PFP memory wait",
            Some(SyncKind::HostPoll) => "host poll",
            None => "wait",
        };
        let how = if blocked {
            "blocked until released"
        } else {
            "found it already released"
        };
        let tip = format!(
            "{label}\n{} to {} ({what}, {how})\n{} to {}",
            layout.labels[a],
            layout.labels[b],
            scale.rel(from_ns),
            scale.rel(to_ns)
        );
        let (class, style) = if blocked {
            (
                "flow blocked",
                format!(r#"stroke="{COLOR_FLOW}" stroke-width="1.5" marker-end="url(#arrow)""#),
            )
        } else {
            (
                "flow passed",
                format!(
                    r#"stroke="{COLOR_EDGE}" stroke-width="1" stroke-dasharray="4 2" marker-end="url(#arrow-pale)""#
                ),
            )
        };
        let _ = write!(
            body,
            r#"<g class="{class}"><title>{}</title><line x1="{}" y1="{}" x2="{}" y2="{}" {style}/>"#,
            esc(&tip),
            px(x1),
            px(y1),
            px(x2),
            px(y2),
        );
        if drawn <= MAX_FLOW_LABELS {
            let text = truncate(label, 40);
            // Beside the middle of the arrow, else beside either end; right of it, else left.
            let (xm, ym) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0 - 3.0);
            let candidates = [
                (xm + 4.0, ym, Anchor::Start),
                (x2 + 4.0, (y1 + 2.0 * y2) / 3.0, Anchor::Start),
                (x1 + 4.0, (2.0 * y1 + y2) / 3.0, Anchor::Start),
                (xm - 4.0, ym, Anchor::End),
                (x2 - 4.0, (y1 + 2.0 * y2) / 3.0, Anchor::End),
                (x1 - 4.0, (2.0 * y1 + y2) / 3.0, Anchor::End),
            ];
            let spot = candidates.into_iter().find(|(x, y, anchor)| {
                placed.try_place(text_box(&text, *x, *y, *anchor, 11.0, false))
            });
            match spot {
                Some((x, y, anchor)) => {
                    let anchor = if anchor == Anchor::End {
                        r#" text-anchor="end""#
                    } else {
                        ""
                    };
                    let _ = write!(
                        body,
                        r#"<text class="flow-label" x="{}" y="{}"{anchor} fill="{COLOR_FLOW}">{}</text>"#,
                        px(x),
                        px(y),
                        esc(&text),
                    );
                }
                None => *hidden += 1,
            }
        }
        body.push_str("</g>");
    }
    if flows.len() > MAX_FLOWS {
        notes.push(format!(
            "{} edges; only the earliest {MAX_FLOWS} are drawn.",
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

/// Draws the error instants (with `errors`) or the plain ones: the first
/// [`MAX_ERROR_LABELS`] errors labelled, plain ones labelled when there are at most
/// [`MAX_INSTANT_LABELS`]; each label only where it overlaps nothing in `placed` (`hidden`
/// counts those left out).
pub(super) fn instants(
    layout: &Layout,
    sorted: &Sorted<'_>,
    errors: bool,
    body: &mut String,
    placed: &mut Placed,
    hidden: &mut usize,
) {
    let scale = &layout.scale;
    let instants = &sorted.instants;
    let plain = instants.len() - sorted.n_errors;
    let mut error_labels = 0usize;
    let of_kind = instants
        .iter()
        .filter(|e| matches!(e, TraceEvent::Instant { error, .. } if *error == errors));
    for e in of_kind {
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
            error_instant(layout, &mark, labelled, body, placed, hidden);
        } else {
            plain_instant(
                layout,
                &mark,
                plain <= MAX_INSTANT_LABELS,
                body,
                placed,
                hidden,
            );
        }
    }
}

/// The note for plain instants drawn without names (too many of them).
pub(super) fn instant_notes(sorted: &Sorted<'_>, notes: &mut Vec<String>) {
    let plain = sorted.instants.len() - sorted.n_errors;
    if plain > MAX_INSTANT_LABELS {
        notes.push(format!(
            "{plain} instants drawn as diamonds without names (hover for them)."
        ));
    }
}

/// Draws an error instant: a dashed line across all lanes and a red triangle on its lane, with
/// its name in a box when `labelled`.
fn error_instant(
    layout: &Layout,
    mark: &Mark<'_>,
    labelled: bool,
    body: &mut String,
    placed: &mut Placed,
    hidden: &mut usize,
) {
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
        let tw = text_w(&text, 12.0, true);
        let (tx, anchor, bx) = if x + 9.0 + tw + 4.0 > WIDTH - 2.0 {
            (x - 9.0, Anchor::End, x - 9.0 - tw - 4.0)
        } else {
            (x + 9.0, Anchor::Start, x + 5.0)
        };
        // On its own lane, else on the next free one below (then above) it.
        let n = layout.lane_y.len();
        let lanes = (i..n).chain((0..i).rev());
        let spot = lanes
            .map(|j| layout.lane_y[j])
            .find(|ly| placed.try_place(text_box(&text, tx, ly + 13.0, anchor, 12.0, true)));
        if let Some(ly) = spot {
            let anchor = match anchor {
                Anchor::End => "end",
                _ => "start",
            };
            let _ = write!(
                body,
                r##"<rect class="instant-box" x="{}" y="{}" width="{}" height="16" rx="3" fill="#ffffff" fill-opacity="0.92" stroke="{COLOR_ERROR}" stroke-width="1"/><text class="instant-label error" x="{}" y="{}" text-anchor="{anchor}" fill="{COLOR_ERROR}">{}</text>"##,
                px(bx.max(0.0)),
                px(ly + 1.0),
                px(tw + 8.0),
                px(tx),
                px(ly + 13.0),
                esc(&text),
            );
        } else {
            *hidden += 1;
        }
    }
    body.push_str("</g>");
}

/// Draws a plain instant: a small diamond on its lane, with its name when `labelled`.
fn plain_instant(
    layout: &Layout,
    mark: &Mark<'_>,
    labelled: bool,
    body: &mut String,
    placed: &mut Placed,
    hidden: &mut usize,
) {
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
        let text = truncate(name, 40);
        let y = y0 + 7.0;
        if placed.try_place(text_box(&text, x + 5.0, y, Anchor::Start, 11.0, false)) {
            let _ = write!(
                body,
                r#"<text class="instant-label" x="{}" y="{}">{}</text>"#,
                px(x + 5.0),
                px(y),
                esc(&text),
            );
        } else if placed.try_place(text_box(&text, x - 5.0, y, Anchor::End, 11.0, false)) {
            let _ = write!(
                body,
                r#"<text class="instant-label" x="{}" y="{}" text-anchor="end">{}</text>"#,
                px(x - 5.0),
                px(y),
                esc(&text),
            );
        } else {
            *hidden += 1;
        }
    }
    body.push_str("</g>");
}
