//! The time axis above the lanes: the tick step and unit for a span, tick labels, and the axis
//! line with its labelled ticks, grid lines across the lanes and unlabelled minor ticks.

use std::fmt::Write as _;

use super::format::{fmt_dur, px};
use super::place::{text_box, Anchor, Placed};
use super::{Layout, LANES_TOP};

/// The tick step (1, 2 or 5 times a power of ten nanoseconds) that puts 5 to 10 ticks on
/// `[0, span]` (fewer only when the span is under 4 ns).
fn tick_step(span: u64) -> u64 {
    let mut decade: u64 = 1;
    loop {
        for m in [1u64, 2, 5] {
            let Some(step) = decade.checked_mul(m) else {
                return span.max(1);
            };
            if span / step <= 9 {
                return step;
            }
        }
        match decade.checked_mul(10) {
            Some(d) => decade = d,
            None => return span.max(1),
        }
    }
}

/// The unit for an axis whose largest tick is `max_tick` ns: name and nanoseconds per unit
/// (so that tick values stay under 1000 units).
fn tick_unit(max_tick: u64) -> (&'static str, u64) {
    if max_tick < 1_000 {
        ("ns", 1)
    } else if max_tick < 1_000_000 {
        ("µs", 1_000)
    } else if max_tick < 1_000_000_000 {
        ("ms", 1_000_000)
    } else {
        ("s", 1_000_000_000)
    }
}

/// `v` ns in units of `per_unit` ns, with as many decimals as needed (at most 9): `0`, `0.5`,
/// `12`.
fn fmt_tick(v: u64, per_unit: u64) -> String {
    let whole = v / per_unit.max(1);
    let frac = v % per_unit.max(1);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = per_unit.max(1).ilog10() as usize;
    let f = format!("{frac:0digits$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// The multiples of `step` (as time since `t0`) within `[a, b]` (absolute times).
fn multiples(t0: u64, a: u64, b: u64, step: u64) -> impl Iterator<Item = u64> {
    let (a, b) = (a.saturating_sub(t0), b.saturating_sub(t0));
    let first = a.div_ceil(step);
    let last = b / step;
    (first..=last).filter_map(move |k| k.checked_mul(step))
}

/// The tick step for the drawn parts of the plot: the smallest 1, 2 or 5 times a power of ten
/// nanoseconds that puts at most 10 ticks in them (with nothing elided, [`tick_step`]'s).
fn shown_step(layout: &Layout) -> u64 {
    let scale = &layout.scale;
    if let [_] = scale.segments() {
        return tick_step(scale.span).max(1);
    }
    let count = |step: u64| -> usize {
        scale
            .segments()
            .iter()
            .filter(|s| !s.gap)
            .map(|s| multiples(layout.t0, s.t0, s.t1, step).count())
            .sum()
    };
    let mut step = tick_step(scale.shown_span()).max(1);
    while count(step) > 10 {
        // 1, 2, 5, 10, 20, 50...: from the step chosen for the drawn time up.
        let decade = 10u64.pow(step.ilog10());
        let next = match step / decade {
            1 => decade.checked_mul(2),
            2 => decade.checked_mul(5),
            _ => decade.checked_mul(10),
        };
        let Some(next) = next else {
            return step;
        };
        step = next;
    }
    step
}

/// Draws the axis, the grid and the ticks into `body` (nothing when there are no lanes) and
/// returns the unit of the tick labels (for the caption); the tick labels are placed in
/// `placed` (a label that would overlap another, next to a break, is left out). Ticks fall in
/// the parts of the plot that are drawn; each elided stretch gets a break mark.
pub(super) fn axis(layout: &Layout, body: &mut String, placed: &mut Placed) -> &'static str {
    let scale = &layout.scale;
    let t0 = layout.t0;
    let plot_x1 = layout.plot_x1;
    let lanes_bottom = layout.lanes_bottom;
    let step = shown_step(layout);
    let max_tick = scale.span / step * step;
    let (unit, per_unit) = tick_unit(max_tick);
    if layout.tracks.is_empty() {
        return unit;
    }
    let _ = write!(
        body,
        r##"<g class="axis"><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#555" stroke-width="1"/>"##,
        px(scale.x0),
        px(LANES_TOP - 6.0),
        px(plot_x1),
        px(LANES_TOP - 6.0)
    );
    let shown = || scale.segments().iter().filter(|s| !s.gap);
    let mut first = true;
    for seg in shown() {
        for rel in multiples(t0, seg.t0, seg.t1, step) {
            let x = scale.x(t0.saturating_add(rel));
            let label = format!("{} {}", fmt_tick(rel, per_unit), unit);
            let b = text_box(&label, x, LANES_TOP - 13.0, Anchor::Middle, 11.0, false);
            // The first tick's label always shows; later ones where they fit.
            let labelled = if first {
                placed.place(b);
                true
            } else {
                placed.try_place(b)
            };
            first = false;
            let _ = write!(
                body,
                r##"<line class="grid" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#d5d8de" stroke-width="1"/><line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#555" stroke-width="1"/>"##,
                px(LANES_TOP - 6.0),
                px(lanes_bottom),
                px(LANES_TOP - 10.0),
                px(LANES_TOP - 6.0),
                x = px(x),
            );
            if labelled {
                let _ = write!(
                    body,
                    r##"<text class="tick-label" x="{}" y="{}" text-anchor="middle">{label}</text>"##,
                    px(x),
                    px(LANES_TOP - 13.0),
                );
            }
        }
    }
    // Unlabelled minor ticks, five per step.
    if step >= 5 && step.is_multiple_of(5) {
        let minor = step / 5;
        for seg in shown() {
            for rel in multiples(t0, seg.t0, seg.t1, minor) {
                if rel % step != 0 {
                    let x = px(scale.x(t0.saturating_add(rel)));
                    let _ = write!(
                        body,
                        r##"<line class="minor-tick" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#777" stroke-width="1"/>"##,
                        px(LANES_TOP - 9.0),
                        px(LANES_TOP - 6.0),
                    );
                }
            }
        }
    }
    body.push_str("</g>");
    unit
}

/// Draws a break mark over each elided stretch (after the slices, so that a slice across it is
/// visibly cut): a pale band across the lanes and two slanted strokes on the axis, with the
/// stretch's length in the tooltip; and a note saying how much was elided.
pub(super) fn breaks(layout: &Layout, body: &mut String, notes: &mut Vec<String>) {
    let scale = &layout.scale;
    let mut elided = 0u64;
    let mut n = 0usize;
    for seg in scale.segments().iter().filter(|s| s.gap) {
        n += 1;
        elided += seg.t1 - seg.t0;
        let (x0, x1) = (seg.x0 + 3.0, seg.x1 - 3.0);
        let y0 = LANES_TOP - 12.0;
        let _ = write!(
            body,
            r##"<g class="break"><title>nothing happens for {} (from {} to {}): elided</title><rect x="{}" y="{}" width="{}" height="{}" fill="#ffffff" fill-opacity="0.8" stroke="#9aa0aa" stroke-width="0.8" stroke-dasharray="2 2"/><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333" stroke-width="1.4"/><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333" stroke-width="1.4"/></g>"##,
            fmt_dur(seg.t1 - seg.t0),
            scale.rel(seg.t0),
            scale.rel(seg.t1),
            px(x0),
            px(y0),
            px(x1 - x0),
            px(layout.lanes_bottom - y0),
            px(x0 + 2.0),
            px(LANES_TOP - 1.0),
            px(x0 + 8.0),
            px(LANES_TOP - 11.0),
            px(x1 - 8.0),
            px(LANES_TOP - 1.0),
            px(x1 - 2.0),
            px(LANES_TOP - 11.0),
        );
    }
    if n > 0 {
        notes.push(format!(
            "Time is compressed: {} where nothing happens ({} in all) drawn as break marks.",
            if n == 1 {
                "1 stretch".to_string()
            } else {
                format!("{n} stretches")
            },
            fmt_dur(elided)
        ));
    }
}
