//! The time scale: device-clock nanoseconds to x, with time compressed where nothing happens.
//!
//! A stretch where nothing happens (no busy, kernel or host slice runs; no slice starts or ends,
//! no instant, no end of an arrow: waits that block across it do not count) longer than a tenth
//! of the span is elided: it takes [`BREAK_W`] pixels, drawn as a break
//! mark, and the rest of the plot shares the width in proportion to time. At most
//! [`MAX_GAPS`] stretches (the longest) are elided. With none, the scale is linear.

use super::format::fmt_dur;

/// The width an elided stretch takes.
pub(super) const BREAK_W: f64 = 24.0;
/// At most this many stretches are elided (the longest).
const MAX_GAPS: usize = 8;
/// A stretch is elided when it is longer than the span divided by this.
const GAP_DIVISOR: u64 = 10;

/// A part of the plot: `[t0, t1]` drawn on `[x0, x1]`; an elided stretch when `gap`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    pub(super) t0: u64,
    pub(super) t1: u64,
    pub(super) x0: f64,
    pub(super) x1: f64,
    pub(super) gap: bool,
}

/// Maps device-clock nanoseconds to x.
pub(super) struct Scale {
    /// The first event's time.
    pub(super) t0: u64,
    /// The span of the events (at least 1).
    pub(super) span: u64,
    /// Where the plot starts.
    pub(super) x0: f64,
    /// The plot's width.
    pub(super) w: f64,
    /// The parts, in time order (one, not a gap, when nothing is elided).
    segments: Vec<Segment>,
}

impl Scale {
    /// The scale of `[t0, t0 + span]` on `[x0, x0 + w]` for `activity`: the intervals where
    /// something happens (any order; a moment is an empty interval).
    pub(super) fn new(t0: u64, span: u64, x0: f64, w: f64, activity: &mut [(u64, u64)]) -> Self {
        let span = span.max(1);
        let t1 = t0.saturating_add(span);
        let linear = Scale {
            t0,
            span,
            x0,
            w,
            segments: vec![Segment {
                t0,
                t1,
                x0,
                x1: x0 + w,
                gap: false,
            }],
        };
        activity.sort_unstable();
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        let mut end: Option<u64> = None;
        for &(a, b) in activity.iter() {
            if let Some(e) = end {
                if a > e && a - e > span / GAP_DIVISOR && a - e > 1 {
                    gaps.push((e, a));
                }
            }
            end = Some(end.map_or(b, |e| e.max(b)));
        }
        if gaps.is_empty() {
            return linear;
        }
        gaps.sort_by_key(|g| std::cmp::Reverse(g.1 - g.0));
        gaps.truncate(MAX_GAPS);
        gaps.sort_unstable();
        let elided: u64 = gaps.iter().map(|g| g.1 - g.0).sum();
        let shown = span - elided.min(span);
        let room = w - BREAK_W * gaps.len() as f64;
        if shown == 0 || room < w / 2.0 {
            return linear;
        }
        let mut segments = Vec::with_capacity(2 * gaps.len() + 1);
        let (mut t, mut x) = (t0, x0);
        for (g0, g1) in gaps {
            let x1 = x + (g0 - t) as f64 * room / shown as f64;
            segments.push(Segment {
                t0: t,
                t1: g0,
                x0: x,
                x1,
                gap: false,
            });
            segments.push(Segment {
                t0: g0,
                t1: g1,
                x0: x1,
                x1: x1 + BREAK_W,
                gap: true,
            });
            (t, x) = (g1, x1 + BREAK_W);
        }
        segments.push(Segment {
            t0: t,
            t1,
            x0: x,
            x1: x0 + w,
            gap: false,
        });
        Scale {
            t0,
            span,
            x0,
            w,
            segments,
        }
    }

    /// The x of `ns`.
    pub(super) fn x(&self, ns: u64) -> f64 {
        if let [_] = self.segments.as_slice() {
            return self.x0 + ns.saturating_sub(self.t0) as f64 * self.w / self.span as f64;
        }
        let i = self
            .segments
            .partition_point(|s| s.t1 < ns)
            .min(self.segments.len() - 1);
        let s = &self.segments[i];
        let ns = ns.clamp(s.t0, s.t1);
        if s.t1 == s.t0 {
            return s.x0;
        }
        s.x0 + (ns - s.t0) as f64 * (s.x1 - s.x0) / (s.t1 - s.t0) as f64
    }

    /// `ns` as time since the first event (`+1.5 µs`).
    pub(super) fn rel(&self, ns: u64) -> String {
        format!("+{}", fmt_dur(ns.saturating_sub(self.t0)))
    }

    /// The parts of the plot, in time order.
    pub(super) fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The time drawn (the span less the elided stretches).
    pub(super) fn shown_span(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| !s.gap)
            .map(|s| s.t1 - s.t0)
            .sum::<u64>()
            .max(1)
    }
}
