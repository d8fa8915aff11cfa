//! The lanes: their backgrounds and labels, and their slices, drawn as rectangles (named
//! inside when the name fits) with narrow neighbours of one kind merged into one outlined
//! rectangle labelled with their count.

use std::fmt::Write as _;

use super::super::chrome::kind_name;
use super::super::{SliceKind, TraceEvent, Track};
use super::format::{count, esc, fmt_dur, px, truncate};
use super::place::{text_box, Anchor, Placed};
use super::{
    Layout, Scale, CHAR_W_11, COLOR_BLOCKED_EDGE, COLOR_BUSY, COLOR_HOST, COLOR_KERNEL, LANE_H,
    MAX_REGION_ROWS, MIN_VISIBLE_PX, REGION_H,
};

/// Fill, stroke and text colour of a slice kind.
pub(super) fn kind_style(kind: SliceKind) -> (&'static str, &'static str, &'static str) {
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
pub(super) struct LaneSlice<'a> {
    pub(super) name: &'a str,
    pub(super) kind: SliceKind,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) site: Option<&'a str>,
}

/// What a lane draws: one slice, or a run of narrow neighbours of one kind.
enum Item<'a> {
    Single(&'a LaneSlice<'a>),
    Merged(Merged<'a>),
}

/// A run of narrow neighbours of one kind, drawn as one rectangle.
#[derive(Clone, Copy)]
struct Merged<'a> {
    kind: SliceKind,
    start: u64,
    end: u64,
    count: usize,
    first: &'a str,
    last: &'a str,
}

impl Item<'_> {
    fn start(&self) -> u64 {
        match self {
            Item::Single(s) => s.start,
            Item::Merged(m) => m.start,
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
        [first, .., last] => out.push(Item::Merged(Merged {
            kind: first.kind,
            start: first.start,
            end: run.end,
            count: run.items.len(),
            first: first.name,
            last: last.name,
        })),
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

/// Draws each lane's background and its label (cut to 36 characters, in full in the tooltip),
/// placed in `placed`.
pub(super) fn backgrounds(layout: &Layout, body: &mut String, placed: &mut Placed) {
    let scale = &layout.scale;
    for (i, label) in layout.labels.iter().enumerate() {
        let shown = truncate(label, 36);
        placed.place(text_box(
            &shown,
            layout.label_w - 10.0,
            layout.center(i) + 4.0,
            Anchor::End,
            12.0,
            true,
        ));
        let fill = if i % 2 == 0 { "#f3f5f8" } else { "#e9edf2" };
        let _ = write!(
            body,
            r#"<rect class="lane" x="{}" y="{}" width="{}" height="{}" fill="{fill}"/><text class="lane-label" x="{}" y="{}" text-anchor="end">{}<title>{}</title></text>"#,
            px(scale.x0),
            px(layout.lane_y[i]),
            px(layout.plot_x1 - scale.x0),
            px(LANE_H),
            px(layout.label_w - 10.0),
            px(layout.center(i) + 4.0),
            esc(&shown),
            esc(label),
        );
    }
}

/// Draws each queue's band of `begin_event` regions above its lanes: the band's label (`gfx
/// events`), a rectangle per region in the row of its depth with its name inside where it fits
/// (and in the tooltip), and a faint line down the queue's lanes where each outermost region
/// (a frame) begins. Regions nested deeper than the band's rows are left out, with a note.
pub(super) fn regions(
    layout: &Layout,
    regions: &[&TraceEvent],
    body: &mut String,
    notes: &mut Vec<String>,
    placed: &mut Placed,
) {
    let scale = &layout.scale;
    for (k, band) in layout.bands.iter().enumerate() {
        let h = f64::from(band.rows) * REGION_H;
        let label = format!("{} events", band.queue);
        let y_label = band.y + h / 2.0 + 4.0;
        placed.place(text_box(
            &label,
            layout.label_w - 10.0,
            y_label,
            Anchor::End,
            12.0,
            true,
        ));
        let _ = write!(
            body,
            r##"<rect class="band" x="{}" y="{}" width="{}" height="{}" fill="{}"/><text class="lane-label band-label" x="{}" y="{}" text-anchor="end">{}<title>begin_event ... end_event regions of queue {}, outermost on top</title></text>"##,
            px(scale.x0),
            px(band.y),
            px(layout.plot_x1 - scale.x0),
            px(h),
            if k % 2 == 0 { "#f7f4fb" } else { "#f1ecf8" },
            px(layout.label_w - 10.0),
            px(y_label),
            esc(&label),
            esc(&band.queue),
        );
    }
    let mut deeper = 0usize;
    for e in regions {
        let TraceEvent::Region {
            track: Track::Me { queue },
            name,
            depth,
            start_ns,
            end_ns,
        } = e
        else {
            continue;
        };
        let Some(band) = layout.bands.iter().find(|b| b.queue == *queue) else {
            continue;
        };
        if *depth >= band.rows.min(MAX_REGION_ROWS) {
            deeper += 1;
            continue;
        }
        let x = scale.x(*start_ns);
        let w = (scale.x(*end_ns) - x).max(MIN_VISIBLE_PX);
        let y = band.y + f64::from(*depth) * REGION_H + 1.0;
        let tip = format!(
            "{name}\nbegin_event on {queue} ME, depth {depth}\n{} to {} ({})",
            scale.rel(*start_ns),
            scale.rel(*end_ns),
            fmt_dur(end_ns.saturating_sub(*start_ns))
        );
        if *depth == 0 {
            let _ = write!(
                body,
                r##"<line class="frame-line" x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#8a6fc0" stroke-width="0.8" stroke-dasharray="1 3"/>"##,
                px(band.y),
                px(band.bottom),
                x = px(x),
            );
        }
        let _ = write!(
            body,
            r##"<rect class="region" x="{}" y="{}" width="{}" height="{}" rx="2" fill="#e3d9f3" stroke="#8a6fc0" stroke-width="0.8"><title>{}</title></rect>"##,
            px(x),
            px(y),
            px(w),
            px(REGION_H - 2.0),
            esc(&tip),
        );
        let avail = ((w - 4.0) / (10.0 * super::place::EM_REGULAR)).floor();
        if avail >= 1.0 {
            let n = name.chars().count();
            let avail = avail as usize;
            let text = if n <= avail {
                Some(name.to_string())
            } else if avail >= 5 {
                Some(truncate(name, avail))
            } else {
                None
            };
            let ty = y + REGION_H - 5.0;
            if let Some(t) = text
                .filter(|t| placed.try_place(text_box(t, x + 2.0, ty, Anchor::Start, 10.0, false)))
            {
                let _ = write!(
                    body,
                    r##"<text class="region-label" x="{}" y="{}" fill="#3d2a66">{}</text>"##,
                    px(x + 2.0),
                    px(ty),
                    esc(&t),
                );
            }
        }
    }
    if deeper > 0 {
        notes.push(format!(
            "{} nested deeper than {MAX_REGION_ROWS} levels not drawn.",
            count(deeper, "begin_event region", "begin_event regions")
        ));
    }
}

/// Where a lane's slices go: the lane, the band they fill and the lane's name (for tooltips).
#[derive(Clone, Copy)]
struct Band<'l> {
    lane: usize,
    top: f64,
    h: f64,
    track_name: &'l str,
}

/// Draws every lane's slices, and adds a note when narrow ones were merged; slice names are
/// drawn where they overlap no label in `placed` (overlapping slices of one lane).
pub(super) fn slices(
    layout: &Layout,
    per_lane: &[Vec<LaneSlice<'_>>],
    body: &mut String,
    notes: &mut Vec<String>,
    placed: &mut Placed,
) {
    let scale = &layout.scale;
    let (mut merged_slices, mut merged_rects) = (0usize, 0usize);
    for (i, lane) in per_lane.iter().enumerate() {
        let band = Band {
            lane: i,
            top: layout.lane_y[i] + 4.0,
            h: LANE_H - 8.0,
            track_name: &layout.labels[i],
        };
        let items = lane_items(lane, scale);
        for (j, item) in items.iter().enumerate() {
            // Where the next item on the lane starts (room for a label outside a rectangle).
            let next_x = items.get(j + 1).map_or(layout.plot_x1, |n| {
                scale.x(n.start()).max(scale.x(item.start()))
            });
            match *item {
                Item::Single(s) => single(layout, band, s, body, placed),
                Item::Merged(m) => {
                    merged_slices += m.count;
                    merged_rects += 1;
                    merged(layout, band, m, next_x, body, placed);
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
}

/// Draws one slice: its rectangle with a tooltip, and its name inside when it fits.
fn single(
    layout: &Layout,
    band: Band<'_>,
    s: &LaneSlice<'_>,
    body: &mut String,
    placed: &mut Placed,
) {
    let scale = &layout.scale;
    let Band {
        lane: i,
        top,
        h,
        track_name,
    } = band;
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
    let y = layout.center(i) + 4.0;
    let label = fitting_label(s.name, w)
        .filter(|l| placed.try_place(text_box(l, x + 3.0, y, Anchor::Start, 11.0, false)));
    if let Some(l) = label {
        let _ = write!(
            body,
            r#"<text class="slice-label {}" x="{}" y="{}" fill="{text}">{}</text>"#,
            kind_name(s.kind),
            px(x + 3.0),
            px(layout.center(i) + 4.0),
            esc(&l),
        );
    }
}

/// Draws a run of merged slices: an outlined rectangle with a tooltip, labelled with the count
/// inside when it fits, else just right of it when there is room before `next_x`.
fn merged(
    layout: &Layout,
    band: Band<'_>,
    m: Merged<'_>,
    next_x: f64,
    body: &mut String,
    placed: &mut Placed,
) {
    let scale = &layout.scale;
    let Band {
        lane: i,
        top,
        h,
        track_name,
    } = band;
    let Merged {
        kind,
        start,
        end,
        count,
        first,
        last,
    } = m;
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
    let y = layout.center(i) + 4.0;
    let inside = fitting_label(&label, w)
        .filter(|l| placed.try_place(text_box(l, x + 3.0, y, Anchor::Start, 11.0, true)));
    if let Some(l) = inside {
        let _ = write!(
            body,
            r#"<text class="slice-label aggregate-label" x="{}" y="{}" fill="{text}" font-weight="bold">{}</text>"#,
            px(x + 3.0),
            px(layout.center(i) + 4.0),
            esc(&l),
        );
    } else if next_x - (x + w) >= label.chars().count() as f64 * CHAR_W_11 + 12.0
        && placed.try_place(text_box(&label, x + w + 4.0, y, Anchor::Start, 11.0, true))
    {
        // Too narrow for its count: write it just right of the rectangle.
        let _ = write!(
            body,
            r##"<text class="slice-label aggregate-label outside" x="{}" y="{}" fill="#111111" font-weight="bold">{}</text>"##,
            px(x + w + 4.0),
            px(layout.center(i) + 4.0),
            esc(&label),
        );
    }
}
