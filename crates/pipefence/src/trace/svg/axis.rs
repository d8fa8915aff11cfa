//! The time axis above the lanes: the tick step and unit for a span, tick labels, and the axis
//! line with its labelled ticks, grid lines across the lanes and unlabelled minor ticks.

use std::fmt::Write as _;

use super::format::px;
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

/// Draws the axis, the grid and the ticks into `body` (nothing when there are no lanes) and
/// returns the unit of the tick labels (for the caption); the tick labels are placed in `placed`.
pub(super) fn axis(layout: &Layout, body: &mut String, placed: &mut Placed) -> &'static str {
    let scale = &layout.scale;
    let t0 = layout.t0;
    let plot_x1 = layout.plot_x1;
    let lanes_bottom = layout.lanes_bottom;
    let step = tick_step(scale.span);
    let max_tick = scale.span / step * step;
    let (unit, per_unit) = tick_unit(max_tick);
    if !layout.tracks.is_empty() {
        let _ = write!(
            body,
            r##"<g class="axis"><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#555" stroke-width="1"/>"##,
            px(scale.x0),
            px(LANES_TOP - 6.0),
            px(plot_x1),
            px(LANES_TOP - 6.0)
        );
        let mut k: u64 = 0;
        while let Some(rel) = k.checked_mul(step).filter(|r| *r <= scale.span) {
            let x = scale.x(t0.saturating_add(rel));
            let label = format!("{} {}", fmt_tick(rel, per_unit), unit);
            placed.place(text_box(
                &label,
                x,
                LANES_TOP - 13.0,
                Anchor::Middle,
                11.0,
                false,
            ));
            let _ = write!(
                body,
                r##"<line class="grid" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#d5d8de" stroke-width="1"/><line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#555" stroke-width="1"/><text class="tick-label" x="{x}" y="{}" text-anchor="middle">{label}</text>"##,
                px(LANES_TOP - 6.0),
                px(lanes_bottom),
                px(LANES_TOP - 10.0),
                px(LANES_TOP - 6.0),
                px(LANES_TOP - 13.0),
                x = px(x),
            );
            k += 1;
        }
        // Unlabelled minor ticks, five per step.
        if step >= 5 && step.is_multiple_of(5) {
            let minor = step / 5;
            let mut k: u64 = 1;
            while let Some(rel) = k.checked_mul(minor).filter(|r| *r <= scale.span) {
                if !k.is_multiple_of(5) {
                    let x = px(scale.x(t0.saturating_add(rel)));
                    let _ = write!(
                        body,
                        r##"<line class="minor-tick" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#777" stroke-width="1"/>"##,
                        px(LANES_TOP - 9.0),
                        px(LANES_TOP - 6.0),
                    );
                }
                k += 1;
            }
        }
        body.push_str("</g>");
    }
    unit
}
