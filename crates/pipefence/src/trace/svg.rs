//! SVG timelines: [`svg_timeline`] draws trace events as a self-contained picture (one lane per
//! [`Track`], a time axis, slices, flow arrows, instants and a legend) that stays readable for a
//! few hundred commands.

use std::fmt::Write as _;

use super::chrome::{kind_name, ordered_tracks, time_bounds, track_label};
use super::{SliceKind, TraceEvent, Track};

/// The picture's width in pixels.
const WIDTH: f64 = 1600.0;
/// Space right of the plot (the last tick label, arrowheads, error labels).
const RIGHT_MARGIN: f64 = 40.0;
/// A lane's height.
const LANE_H: f64 = 30.0;
/// Space between lanes of one group (a queue, the workers, the hosts).
const LANE_GAP: f64 = 3.0;
/// Extra space between groups.
const GROUP_GAP: f64 = 10.0;
/// Where the first lane starts.
const LANES_TOP: f64 = 104.0;
/// Slices narrower than this are merged with their narrow neighbours of the same kind.
const MIN_VISIBLE_PX: f64 = 2.0;
/// At most this many flow arrows are drawn (the earliest).
const MAX_FLOWS: usize = 200;
/// Non-error instants get a drawn name only when there are at most this many.
const MAX_INSTANT_LABELS: usize = 20;
/// Error instants get a drawn name for the first this many.
const MAX_ERROR_LABELS: usize = 30;
/// Flows get a drawn label only when at most this many are drawn.
const MAX_FLOW_LABELS: usize = 12;
/// Approximate advance of one character of the 11 px slice font.
const CHAR_W_11: f64 = 6.3;
/// Approximate advance of one character of the 12 px label font (bold, for sizing the label
/// column).
const CHAR_W_12: f64 = 7.0;
/// Approximate advance of one character of the 12 px regular font (the legend).
const CHAR_W_12_REGULAR: f64 = 5.7;
/// Approximate advance of one character of the 12 px bold font (error labels).
const CHAR_W_12_BOLD: f64 = 6.2;

const COLOR_BUSY: &str = "#3b7dd8";
const COLOR_KERNEL: &str = "#2e9e4f";
const COLOR_HOST: &str = "#8a8f98";
const COLOR_BLOCKED_EDGE: &str = "#d9480f";
const COLOR_FLOW: &str = "#6f42c1";
const COLOR_ERROR: &str = "#d00000";
const COLOR_INSTANT: &str = "#222222";

/// XML-escapes `s` for text and attribute values, dropping characters XML 1.0 cannot hold.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// `n` and the noun's singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `s` cut to at most `max` characters (with an ellipsis when cut).
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// A coordinate with one decimal.
fn px(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "0".to_string()
    }
}

/// A duration for people: `750 ns`, `1.5 µs`, `12.25 ms`, `3 s`.
fn fmt_dur(ns: u64) -> String {
    let (unit, div) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        ("µs", 1e3)
    } else if ns < 1_000_000_000 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    };
    let s = format!("{:.3}", ns as f64 / div);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

/// A device-clock time as seconds with nanosecond digits.
fn fmt_clock(ns: u64) -> String {
    format!("{}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000)
}

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

/// Maps device-clock nanoseconds to x.
struct Scale {
    t0: u64,
    span: u64,
    x0: f64,
    w: f64,
}

impl Scale {
    fn x(&self, ns: u64) -> f64 {
        self.x0 + ns.saturating_sub(self.t0) as f64 * self.w / self.span as f64
    }

    fn rel(&self, ns: u64) -> String {
        format!("+{}", fmt_dur(ns.saturating_sub(self.t0)))
    }
}

/// Fill, stroke and text colour of a slice kind.
fn kind_style(kind: SliceKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        SliceKind::Busy => (COLOR_BUSY, "#1f4f96", "#ffffff"),
        SliceKind::Blocked => ("url(#hatch)", COLOR_BLOCKED_EDGE, "#7a1d00"),
        SliceKind::Kernel => (COLOR_KERNEL, "#1c6b33", "#ffffff"),
        SliceKind::Host => (COLOR_HOST, "#5c6068", "#ffffff"),
    }
}

/// What a count of merged slices of `kind` is called.
fn kind_noun(kind: SliceKind) -> &'static str {
    match kind {
        SliceKind::Busy => "commands",
        SliceKind::Blocked => "waits",
        SliceKind::Kernel => "kernels",
        SliceKind::Host => "host actions",
    }
}

fn kind_index(kind: SliceKind) -> usize {
    match kind {
        SliceKind::Busy => 0,
        SliceKind::Blocked => 1,
        SliceKind::Kernel => 2,
        SliceKind::Host => 3,
    }
}

/// One slice of a lane.
struct LaneSlice<'a> {
    name: &'a str,
    kind: SliceKind,
    start: u64,
    end: u64,
    site: Option<&'a str>,
}

/// What a lane draws: one slice, or a run of narrow neighbours of one kind.
enum Item<'a> {
    Single(&'a LaneSlice<'a>),
    Merged {
        kind: SliceKind,
        start: u64,
        end: u64,
        count: usize,
        first: &'a str,
        last: &'a str,
    },
}

impl Item<'_> {
    fn start(&self) -> u64 {
        match self {
            Item::Single(s) => s.start,
            Item::Merged { start, .. } => *start,
        }
    }
}

/// An open run of narrow slices.
struct Run<'a> {
    items: Vec<&'a LaneSlice<'a>>,
    end: u64,
}

fn close_run<'a>(run: Run<'a>, out: &mut Vec<Item<'a>>) {
    match run.items.as_slice() {
        [] => {}
        [one] => out.push(Item::Single(one)),
        [first, .., last] => out.push(Item::Merged {
            kind: first.kind,
            start: first.start,
            end: run.end,
            count: run.items.len(),
            first: first.name,
            last: last.name,
        }),
    }
}

/// A lane's slices (sorted by start) as drawable items: narrow slices (< 2 px) that follow each
/// other within 2 px on the lane, of one kind and with no visible slice between them, merge.
fn lane_items<'a>(slices: &'a [LaneSlice<'a>], scale: &Scale) -> Vec<Item<'a>> {
    let mut out = Vec::new();
    let mut open: [Option<Run<'a>>; 4] = [None, None, None, None];
    for s in slices {
        let x0 = scale.x(s.start);
        let w = scale.x(s.end) - x0;
        if w >= MIN_VISIBLE_PX {
            for run in open.iter_mut() {
                if let Some(run) = run.take() {
                    close_run(run, &mut out);
                }
            }
            out.push(Item::Single(s));
            continue;
        }
        let slot = &mut open[kind_index(s.kind)];
        match slot {
            Some(run) if x0 - scale.x(run.end) < MIN_VISIBLE_PX => {
                run.items.push(s);
                run.end = run.end.max(s.end);
            }
            _ => {
                if let Some(run) = slot.take() {
                    close_run(run, &mut out);
                }
                *slot = Some(Run {
                    items: vec![s],
                    end: s.end,
                });
            }
        }
    }
    for run in open.iter_mut() {
        if let Some(run) = run.take() {
            close_run(run, &mut out);
        }
    }
    out.sort_by_key(Item::start);
    out
}

/// Which group a lane belongs to (groups are separated by a gap).
fn group_of(track: &Track) -> String {
    match track {
        Track::Pfp { queue } | Track::Me { queue } => format!("q:{queue}"),
        Track::Worker { .. } => "workers".to_string(),
        Track::Host { .. } => "hosts".to_string(),
    }
}

/// Text that fits `width` pixels at the slice font, or `None`.
fn fitting_label(name: &str, width: f64) -> Option<String> {
    let avail = ((width - 6.0) / CHAR_W_11).floor();
    if avail < 1.0 {
        return None;
    }
    let avail = avail as usize;
    let n = name.chars().count();
    if n <= avail {
        Some(name.to_string())
    } else if avail >= 5 {
        Some(truncate(name, avail))
    } else {
        None
    }
}

/// A self-contained SVG timeline of `events` (about 1600 px wide): the title and a summary, a
/// legend, a time axis (5 to 10 ticks in ns, µs, ms or s since the first event), one lane per
/// track (lane order as in [`chrome_json`](super::chrome::chrome_json)) with its label on the
/// left, and in the lanes:
///
/// - slices as rectangles: busy blue, blocked hatched orange-red, kernel green, host grey (class
///   `slice busy` ...), named inside when the name fits and always with a `<title>` tooltip;
///   narrow neighbours (< 2 px) of one kind merge into one outlined rectangle (class
///   `aggregate`) labelled with their count (`37 commands`);
/// - flows as purple arrows from the writer's lane to the waiter's (at most 200, the earliest;
///   a note says how many were left out);
/// - instants as small diamonds; errors (removal, faults, hazards) as red triangles with their
///   name and a dashed red line across all lanes.
///
/// Pure and deterministic: the same events give the same bytes; any input (empty, zero-length
/// or inverted slices, odd characters) gives well-formed XML.
pub fn svg_timeline(events: &[TraceEvent], title: &str) -> String {
    let tracks = ordered_tracks(events);
    let labels: Vec<String> = tracks.iter().map(track_label).collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let label_chars = longest.min(36);
    let label_w = (label_chars as f64 * CHAR_W_12 + 24.0).clamp(90.0, 290.0);
    let (t0, t1) = time_bounds(events).unwrap_or((0, 0));
    let scale = Scale {
        t0,
        span: t1.saturating_sub(t0).max(1),
        x0: label_w,
        w: WIDTH - RIGHT_MARGIN - label_w,
    };
    let plot_x1 = WIDTH - RIGHT_MARGIN;

    // Lane positions.
    let mut lane_y = Vec::with_capacity(tracks.len());
    let mut y = LANES_TOP;
    let mut prev_group: Option<String> = None;
    for t in &tracks {
        let g = group_of(t);
        if let Some(p) = &prev_group {
            y += if *p == g { LANE_GAP } else { GROUP_GAP };
        }
        lane_y.push(y);
        y += LANE_H;
        prev_group = Some(g);
    }
    let lanes_bottom = if tracks.is_empty() { LANES_TOP } else { y };
    let lane_of = |t: &Track| tracks.iter().position(|x| x == t);
    let center = |i: usize| lane_y[i] + LANE_H / 2.0;

    // Per-lane slices, sorted by start (then end, then as given).
    let mut per_lane: Vec<Vec<LaneSlice<'_>>> = (0..tracks.len()).map(|_| Vec::new()).collect();
    let mut flows = Vec::new();
    let mut instants = Vec::new();
    let (mut n_slices, mut n_errors) = (0usize, 0usize);
    for e in events {
        match e {
            TraceEvent::Slice {
                track,
                name,
                kind,
                start_ns,
                end_ns,
                site,
            } => {
                n_slices += 1;
                if let Some(i) = lane_of(track) {
                    per_lane[i].push(LaneSlice {
                        name,
                        kind: *kind,
                        start: *start_ns,
                        end: (*end_ns).max(*start_ns),
                        site: site.as_deref(),
                    });
                }
            }
            TraceEvent::Flow { .. } => flows.push(e),
            TraceEvent::Instant { error, .. } => {
                n_errors += usize::from(*error);
                instants.push(e);
            }
        }
    }
    for lane in &mut per_lane {
        lane.sort_by_key(|s| (s.start, s.end));
    }
    flows.sort_by_key(|e| match e {
        TraceEvent::Flow { from_ns, to_ns, .. } => (*from_ns, *to_ns),
        _ => (0, 0),
    });
    instants.sort_by_key(|e| e.ts_ns());

    let mut body = String::new();
    let mut notes: Vec<String> = Vec::new();

    // Tick grid and labels.
    let step = tick_step(scale.span);
    let max_tick = scale.span / step * step;
    let (unit, per_unit) = tick_unit(max_tick);
    if !tracks.is_empty() {
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
            let _ = write!(
                body,
                r##"<line class="grid" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#d5d8de" stroke-width="1"/><line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#555" stroke-width="1"/><text class="tick-label" x="{x}" y="{}" text-anchor="middle">{} {}</text>"##,
                px(LANES_TOP - 6.0),
                px(lanes_bottom),
                px(LANES_TOP - 10.0),
                px(LANES_TOP - 6.0),
                px(LANES_TOP - 13.0),
                fmt_tick(rel, per_unit),
                unit,
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

    // Lanes: background and label.
    for (i, label) in labels.iter().enumerate() {
        let fill = if i % 2 == 0 { "#f3f5f8" } else { "#e9edf2" };
        let _ = write!(
            body,
            r#"<rect class="lane" x="{}" y="{}" width="{}" height="{}" fill="{fill}"/><text class="lane-label" x="{}" y="{}" text-anchor="end">{}<title>{}</title></text>"#,
            px(scale.x0),
            px(lane_y[i]),
            px(plot_x1 - scale.x0),
            px(LANE_H),
            px(label_w - 10.0),
            px(center(i) + 4.0),
            esc(&truncate(label, 36)),
            esc(label),
        );
    }

    // Slices.
    let (mut merged_slices, mut merged_rects) = (0usize, 0usize);
    for (i, lane) in per_lane.iter().enumerate() {
        let top = lane_y[i] + 4.0;
        let h = LANE_H - 8.0;
        let track_name = &labels[i];
        let items = lane_items(lane, &scale);
        for (j, item) in items.iter().enumerate() {
            // Where the next item on the lane starts (room for a label outside a rectangle).
            let next_x = items
                .get(j + 1)
                .map_or(plot_x1, |n| scale.x(n.start()).max(scale.x(item.start())));
            match *item {
                Item::Single(s) => {
                    let (fill, stroke, text) = kind_style(s.kind);
                    let x = scale.x(s.start);
                    let w = (scale.x(s.end) - x).max(1.0);
                    let mut tip = format!(
                        "{}\n{} on {}\n{} to {} ({})",
                        s.name,
                        kind_name(s.kind),
                        track_name,
                        scale.rel(s.start),
                        scale.rel(s.end),
                        fmt_dur(s.end - s.start)
                    );
                    if let Some(site) = s.site {
                        tip.push_str("\nsite: ");
                        tip.push_str(site);
                    }
                    let _ = write!(
                        body,
                        r#"<rect class="slice {}" x="{}" y="{}" width="{}" height="{}" fill="{fill}" stroke="{stroke}" stroke-width="0.6"><title>{}</title></rect>"#,
                        kind_name(s.kind),
                        px(x),
                        px(top),
                        px(w),
                        px(h),
                        esc(&tip),
                    );
                    if let Some(l) = fitting_label(s.name, w) {
                        let _ = write!(
                            body,
                            r#"<text class="slice-label {}" x="{}" y="{}" fill="{text}">{}</text>"#,
                            kind_name(s.kind),
                            px(x + 3.0),
                            px(center(i) + 4.0),
                            esc(&l),
                        );
                    }
                }
                Item::Merged {
                    kind,
                    start,
                    end,
                    count,
                    first,
                    last,
                } => {
                    merged_slices += count;
                    merged_rects += 1;
                    let (fill, _, text) = kind_style(kind);
                    let x = scale.x(start);
                    let w = (scale.x(end) - x).max(MIN_VISIBLE_PX);
                    let label = format!("{count} {}", kind_noun(kind));
                    let tip = format!(
                        "{label} merged (each narrower than {MIN_VISIBLE_PX} px)\n{} on {}\n{} to {} ({})\nfirst: {first}\nlast: {last}",
                        kind_name(kind),
                        track_name,
                        scale.rel(start),
                        scale.rel(end),
                        fmt_dur(end - start),
                    );
                    let _ = write!(
                        body,
                        r##"<rect class="slice {} aggregate" x="{}" y="{}" width="{}" height="{}" fill="{fill}" stroke="#111" stroke-width="1" stroke-dasharray="3 2"><title>{}</title></rect>"##,
                        kind_name(kind),
                        px(x),
                        px(top),
                        px(w),
                        px(h),
                        esc(&tip),
                    );
                    if let Some(l) = fitting_label(&label, w) {
                        let _ = write!(
                            body,
                            r#"<text class="slice-label aggregate-label" x="{}" y="{}" fill="{text}" font-weight="bold">{}</text>"#,
                            px(x + 3.0),
                            px(center(i) + 4.0),
                            esc(&l),
                        );
                    } else if next_x - (x + w) >= label.chars().count() as f64 * CHAR_W_11 + 12.0 {
                        // Too narrow for its count: write it just right of the rectangle.
                        let _ = write!(
                            body,
                            r##"<text class="slice-label aggregate-label outside" x="{}" y="{}" fill="#111111" font-weight="bold">{}</text>"##,
                            px(x + w + 4.0),
                            px(center(i) + 4.0),
                            esc(&label),
                        );
                    }
                }
            }
        }
    }
    if merged_rects > 0 {
        notes.push(format!(
            "{} narrower than {MIN_VISIBLE_PX} px merged into {} labelled with their count (hover for the first and last).",
            count(merged_slices, "slice", "slices"),
            count(merged_rects, "outlined rectangle", "outlined rectangles"),
        ));
    }

    // Flows.
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
        let (Some(a), Some(b)) = (lane_of(from), lane_of(to)) else {
            continue;
        };
        // From the writer's slice edge facing the waiter to the waiter's slice edge (centres
        // within one lane), so that arrows cover as little of the slices as they can.
        let inset = 4.0;
        let (y1, y2) = match a.cmp(&b) {
            std::cmp::Ordering::Less => (lane_y[a] + LANE_H - inset, lane_y[b] + inset),
            std::cmp::Ordering::Greater => (lane_y[a] + inset, lane_y[b] + LANE_H - inset),
            std::cmp::Ordering::Equal => (center(a), center(b)),
        };
        let (x1, x2) = (scale.x(*from_ns), scale.x(*to_ns));
        let tip = format!(
            "{label}\n{} to {}\n{} to {}",
            labels[a],
            labels[b],
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

    // Instants.
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
        let Some(i) = lane_of(track) else {
            continue;
        };
        let x = scale.x(*ts_ns);
        let tip = format!("{name}\n{} at {}", labels[i], scale.rel(*ts_ns));
        if *error {
            let y0 = lane_y[i];
            let _ = write!(
                body,
                r##"<g class="instant error"><title>{}</title><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_ERROR}" stroke-width="1.2" stroke-dasharray="4 3"/><polygon points="{},{} {},{} {},{}" fill="{COLOR_ERROR}" stroke="#ffffff" stroke-width="0.8"/>"##,
                esc(&tip),
                px(x),
                px(LANES_TOP - 6.0),
                px(x),
                px(lanes_bottom),
                px(x - 6.0),
                px(y0 + 1.0),
                px(x + 6.0),
                px(y0 + 1.0),
                px(x),
                px(y0 + 13.0),
            );
            if error_labels < MAX_ERROR_LABELS {
                error_labels += 1;
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
        } else {
            let y0 = lane_y[i] + 2.0;
            let _ = write!(
                body,
                r##"<g class="instant"><title>{}</title><polygon points="{},{} {},{} {},{} {},{}" fill="{COLOR_INSTANT}" stroke="#ffffff" stroke-width="0.6"/>"##,
                esc(&tip),
                px(x),
                px(y0),
                px(x + 3.5),
                px(y0 + 3.5),
                px(x),
                px(y0 + 7.0),
                px(x - 3.5),
                px(y0 + 3.5),
            );
            if plain <= MAX_INSTANT_LABELS {
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
    }
    if plain > MAX_INSTANT_LABELS {
        notes.push(format!(
            "{plain} instants drawn as diamonds without names (hover for them)."
        ));
    }

    // Header, legend, caption and notes.
    let mut head = String::new();
    let _ = write!(
        head,
        r#"<text class="title" x="16" y="28">{}</text>"#,
        esc(&truncate(title, 160))
    );
    let summary = if events.is_empty() {
        "no events".to_string()
    } else {
        format!(
            "{} · {} · {} · {} ({}) · span {}",
            count(tracks.len(), "lane", "lanes"),
            count(n_slices, "slice", "slices"),
            count(flows.len(), "flow", "flows"),
            count(instants.len(), "instant", "instants"),
            count(n_errors, "error", "errors"),
            fmt_dur(t1 - t0)
        )
    };
    let _ = write!(
        head,
        r#"<text class="summary" x="16" y="48">{}</text>"#,
        esc(&summary)
    );
    head.push_str(&legend(16.0, 66.0));

    let mut y_note = lanes_bottom + 20.0;
    let mut foot = String::new();
    if !tracks.is_empty() {
        let _ = write!(
            foot,
            r#"<text class="caption" x="{}" y="{}">time since the first event ({}), t0 = device clock {}</text>"#,
            px(scale.x0),
            px(y_note),
            unit,
            fmt_clock(t0)
        );
        y_note += 18.0;
    }
    for n in &notes {
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
.slice-label, .instant-label, .flow-label {{ paint-order: stroke; }}
.instant-label.error {{ font-size: 12px; font-weight: bold; }}
.flow-label {{ stroke: #ffffff; stroke-width: 3px; }}
.slice-label.blocked {{ stroke: #fcd9c8; stroke-width: 3px; }}
.legend text {{ font-size: 12px; fill: #333; }}
</style>
<defs>
<pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fcd9c8"/><line x1="0" y1="0" x2="0" y2="6" stroke="{blocked}" stroke-width="2.4"/></pattern>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{flow}"/></marker>
</defs>
<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>
"##,
        w = WIDTH,
        h = height,
        title = esc(title),
        blocked = COLOR_BLOCKED_EDGE,
        flow = COLOR_FLOW,
    );
    svg.push_str(&head);
    svg.push('\n');
    svg.push_str(&body);
    svg.push('\n');
    svg.push_str(&foot);
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
        x + s.chars().count() as f64 * CHAR_W_12_REGULAR + 18.0
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
    x = text(&mut out, x + 23.0, "merged narrow slices (count)");
    let _ = write!(
        out,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{COLOR_FLOW}" stroke-width="1.5" marker-end="url(#arrow)"/>"#,
        px(x),
        px(y - 4.0),
        px(x + 24.0),
        px(y - 4.0)
    );
    x = text(&mut out, x + 30.0, "signal/write released a wait");
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
    text(&mut out, x + 17.0, "error (removal, fault, hazard)");
    out.push_str("</g>");
    out
}
