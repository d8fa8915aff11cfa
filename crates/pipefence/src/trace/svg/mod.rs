//! SVG timelines: [`svg_timeline`] draws trace events as a self-contained picture (one lane per
//! [`Track`], a time axis, slices, flow arrows, instants and a legend) that stays readable for a
//! few hundred commands.
//!
//! This file holds the layout (the lanes' places and the time scale), the events sorted by what
//! draws them, and the order in which the parts are drawn; the parts are in submodules: `axis`
//! (time ticks), `lanes` (lane backgrounds and slices), `marks` (flow arrows and instants),
//! `frame` (the document around them: header, legend, caption and notes) and `format` (text and
//! number formatting).

mod axis;
mod format;
mod frame;
mod lanes;
mod marks;
mod place;
mod scale;

use super::chrome::{ordered_tracks, time_bounds, track_label};
use super::{SyncKind, TraceEvent, Track};
use lanes::LaneSlice;
use scale::Scale;

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
/// The height of one row of a queue's `begin_event` band.
const REGION_H: f64 = 14.0;
/// A queue's band shows at most this many levels of nested regions.
const MAX_REGION_ROWS: u32 = 3;
/// Where the first lane starts.
const LANES_TOP: f64 = 104.0;
/// Slices narrower than this are merged with their narrow neighbours of the same kind.
const MIN_VISIBLE_PX: f64 = 2.0;
/// At most this many edges (release-to-acquire arrows) are drawn (the earliest).
const MAX_FLOWS: usize = 200;
/// Non-error instants get a drawn name only when there are at most this many.
const MAX_INSTANT_LABELS: usize = 20;
/// Error instants get a drawn name for the first this many.
const MAX_ERROR_LABELS: usize = 30;
/// Edges get a drawn label (where it overlaps no other label) only when at most this many are
/// drawn.
const MAX_FLOW_LABELS: usize = 60;
/// Estimated advance of one character of the 11 px slice font ([`place`]'s estimate).
const CHAR_W_11: f64 = 11.0 * place::EM_REGULAR;
/// Estimated advance of one character of the 12 px bold lane-label font.
const CHAR_W_12: f64 = 12.0 * place::EM_BOLD;

const COLOR_BUSY: &str = "#3b7dd8";
const COLOR_KERNEL: &str = "#2e9e4f";
const COLOR_HOST: &str = "#8a8f98";
const COLOR_BLOCKED_EDGE: &str = "#d9480f";
const COLOR_FLOW: &str = "#6f42c1";
/// Edges of waits that did not block.
const COLOR_EDGE: &str = "#a78bda";
const COLOR_ERROR: &str = "#d00000";
const COLOR_INSTANT: &str = "#222222";

/// Which group a lane belongs to (groups are separated by a gap).
fn group_of(track: &Track) -> String {
    match track {
        Track::Pfp { queue } | Track::Me { queue } => format!("q:{queue}"),
        Track::Worker { .. } => "workers".to_string(),
        Track::Host { .. } => "hosts".to_string(),
    }
}

/// Where things go: the lanes in order (track, label, top), the label column's width and the
/// time scale.
struct Layout {
    /// The tracks, one lane each, in lane order.
    tracks: Vec<Track>,
    /// Each lane's label.
    labels: Vec<String>,
    /// The width of the label column (where the plot starts).
    label_w: f64,
    /// The first event's time (device clock).
    t0: u64,
    /// The last event's time.
    t1: u64,
    /// Device-clock nanoseconds to x.
    scale: Scale,
    /// Where the plot ends.
    plot_x1: f64,
    /// Each lane's top.
    lane_y: Vec<f64>,
    /// Where the last lane ends (the first lane's top when there are none).
    lanes_bottom: f64,
    /// The `begin_event` bands, one above the lanes of each queue that has regions.
    bands: Vec<RegionBand>,
}

/// A queue's band of `begin_event` regions, above its lanes.
pub(super) struct RegionBand {
    /// The queue.
    pub(super) queue: String,
    /// Its top.
    pub(super) y: f64,
    /// How many rows (levels of nesting) it shows.
    pub(super) rows: u32,
    /// Where the queue's last lane ends.
    pub(super) bottom: f64,
}

impl Layout {
    /// The lanes of `events`, one per track, and the scale of their time span.
    fn new(events: &[TraceEvent]) -> Self {
        let tracks = ordered_tracks(events, true);
        let labels: Vec<String> = tracks.iter().map(track_label).collect();
        let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let label_chars = longest.min(36);
        let label_w = (label_chars as f64 * CHAR_W_12 + 24.0).clamp(90.0, 290.0);
        let (t0, t1) = time_bounds(events, true).unwrap_or((0, 0));
        // Where something happens: running slices, and the moments of everything else (a
        // wait that blocks is not activity; only its start and end are).
        let mut activity: Vec<(u64, u64)> = Vec::with_capacity(2 * events.len());
        for e in events {
            match e {
                TraceEvent::Slice {
                    start_ns,
                    end_ns,
                    kind,
                    ..
                } => {
                    if *kind == super::SliceKind::Blocked {
                        activity.extend([(*start_ns, *start_ns), (*end_ns, *end_ns)]);
                    } else {
                        activity.push((*start_ns, (*end_ns).max(*start_ns)));
                    }
                }
                TraceEvent::Flow { from_ns, to_ns, .. }
                | TraceEvent::Sync { from_ns, to_ns, .. } => {
                    activity.extend([(*from_ns, *from_ns), (*to_ns, *to_ns)]);
                }
                TraceEvent::Instant { ts_ns, .. } => activity.push((*ts_ns, *ts_ns)),
                TraceEvent::Region {
                    start_ns, end_ns, ..
                } => activity.extend([(*start_ns, *start_ns), (*end_ns, *end_ns)]),
            }
        }
        let scale = Scale::new(
            t0,
            t1.saturating_sub(t0),
            label_w,
            WIDTH - RIGHT_MARGIN - label_w,
            &mut activity,
        );
        let plot_x1 = WIDTH - RIGHT_MARGIN;

        // How many rows each queue's band of regions needs.
        let mut rows: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for e in events {
            if let TraceEvent::Region {
                track: Track::Me { queue },
                depth,
                ..
            } = e
            {
                let r = rows.entry(queue.as_str()).or_default();
                *r = (*r).max((*depth + 1).min(MAX_REGION_ROWS));
            }
        }

        // Lane positions, with a queue's band above its first lane.
        let mut lane_y = Vec::with_capacity(tracks.len());
        let mut bands: Vec<RegionBand> = Vec::new();
        let mut y = LANES_TOP;
        let mut prev_group: Option<String> = None;
        for t in &tracks {
            let g = group_of(t);
            let new_group = prev_group.as_ref() != Some(&g);
            if let Some(p) = &prev_group {
                y += if *p == g { LANE_GAP } else { GROUP_GAP };
            }
            if let (true, Track::Pfp { queue } | Track::Me { queue }) = (new_group, t) {
                if let Some(&r) = rows.get(queue.as_str()) {
                    bands.push(RegionBand {
                        queue: queue.clone(),
                        y,
                        rows: r,
                        bottom: y,
                    });
                    y += f64::from(r) * REGION_H + LANE_GAP;
                }
            }
            lane_y.push(y);
            y += LANE_H;
            if let (Some(b), Track::Pfp { queue } | Track::Me { queue }) = (bands.last_mut(), t) {
                if b.queue == *queue {
                    b.bottom = y;
                }
            }
            prev_group = Some(g);
        }
        let lanes_bottom = if tracks.is_empty() { LANES_TOP } else { y };

        Layout {
            tracks,
            labels,
            label_w,
            t0,
            t1,
            scale,
            plot_x1,
            lane_y,
            lanes_bottom,
            bands,
        }
    }

    /// The lane of a track.
    fn lane_of(&self, t: &Track) -> Option<usize> {
        self.tracks.iter().position(|x| x == t)
    }

    /// The vertical centre of lane `i`.
    fn center(&self, i: usize) -> f64 {
        self.lane_y[i] + LANE_H / 2.0
    }
}

/// A release-to-acquire arrow: a [`TraceEvent::Sync`] edge, or a [`TraceEvent::Flow`] that no
/// edge repeats (traces recorded before edges, or made by hand).
pub(super) struct Edge<'e> {
    pub(super) from: &'e Track,
    pub(super) from_ns: u64,
    pub(super) to: &'e Track,
    pub(super) to_ns: u64,
    pub(super) label: &'e str,
    /// What waited (`None` for a flow).
    pub(super) wait: Option<SyncKind>,
    /// Whether the wait blocked (flows always did).
    pub(super) blocked: bool,
}

/// The events by what draws them: per-lane slices sorted by start (then end, then as given),
/// edges by time, instants by time, and the counts for the summary.
struct Sorted<'e> {
    /// Each lane's slices.
    per_lane: Vec<Vec<LaneSlice<'e>>>,
    /// The edges: every Sync edge, and each flow no edge repeats.
    flows: Vec<Edge<'e>>,
    /// The instants, errors included.
    instants: Vec<&'e TraceEvent>,
    /// The `begin_event` regions.
    regions: Vec<&'e TraceEvent>,
    /// How many slices there are (on a lane or not).
    n_slices: usize,
    /// How many instants are errors.
    n_errors: usize,
}

impl<'e> Sorted<'e> {
    /// Sorts `events` onto the lanes of `layout`.
    fn new(events: &'e [TraceEvent], layout: &Layout) -> Self {
        let mut per_lane: Vec<Vec<LaneSlice<'_>>> =
            (0..layout.tracks.len()).map(|_| Vec::new()).collect();
        let mut flows = Vec::new();
        let mut flow_events = Vec::new();
        let mut instants = Vec::new();
        let mut regions = Vec::new();
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
                    if let Some(i) = layout.lane_of(track) {
                        per_lane[i].push(LaneSlice {
                            name,
                            kind: *kind,
                            start: *start_ns,
                            end: (*end_ns).max(*start_ns),
                            site: site.as_deref(),
                        });
                    }
                }
                TraceEvent::Flow {
                    from,
                    from_ns,
                    to,
                    to_ns,
                    label,
                } => flow_events.push(Edge {
                    from,
                    from_ns: *from_ns,
                    to,
                    to_ns: *to_ns,
                    label,
                    wait: None,
                    blocked: true,
                }),
                TraceEvent::Sync {
                    from,
                    from_ns,
                    to,
                    to_ns,
                    label,
                    wait,
                    blocked,
                } => flows.push(Edge {
                    from,
                    from_ns: *from_ns,
                    to,
                    to_ns: *to_ns,
                    label,
                    wait: Some(*wait),
                    blocked: *blocked,
                }),
                TraceEvent::Instant { error, .. } => {
                    n_errors += usize::from(*error);
                    instants.push(e);
                }
                TraceEvent::Region { .. } => regions.push(e),
            }
        }
        for lane in &mut per_lane {
            lane.sort_by_key(|s| (s.start, s.end));
        }
        // A blocked wait records both a flow (for the Chrome trace) and its edge: one arrow.
        let blocked_edges: std::collections::HashSet<(&Track, u64, &Track, u64)> = flows
            .iter()
            .filter(|e| e.blocked)
            .map(|e| (e.from, e.from_ns, e.to, e.to_ns))
            .collect();
        flows.extend(
            flow_events
                .into_iter()
                .filter(|f| !blocked_edges.contains(&(f.from, f.from_ns, f.to, f.to_ns))),
        );
        flows.sort_by_key(|e| (e.from_ns, e.to_ns));
        instants.sort_by_key(|e| e.ts_ns());
        Sorted {
            per_lane,
            flows,
            instants,
            regions,
            n_slices,
            n_errors,
        }
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
/// - release-to-acquire edges as purple arrows from the signal's or write's lane to the
///   waiter's, one per satisfied wait (queue, host, ME and PFP waits): solid for waits that
///   blocked, pale and dashed for waits that found their value already there (at most 200, the
///   earliest; a note says how many were left out);
/// - instants as small diamonds; errors (removal, faults, hazards) as red triangles with their
///   name and a dashed red line across all lanes;
/// - above the lanes of each queue that has `begin_event` regions, a band (`gfx events`) with
///   one rectangle per region, nested regions in rows below their parents (3 levels), and a
///   faint line down the queue's lanes where each outermost region (a frame) begins.
///
/// Time is compressed where nothing happens: a stretch longer than a tenth of the span with no
/// slice running (blocked waits aside) and no event is drawn as a 24 px break mark (see
/// `scale`).
///
/// No two labels overlap: error labels, axis ticks and lane names are placed first, then slice
/// names, then instant and edge labels wherever they overlap none placed before (else they are
/// left to the tooltip, and a note says how many).
///
/// Pure and deterministic: the same events give the same bytes; any input (empty, zero-length
/// or inverted slices, odd characters) gives well-formed XML.
pub fn svg_timeline(events: &[TraceEvent], title: &str) -> String {
    let layout = Layout::new(events);
    let sorted = Sorted::new(events, &layout);
    let mut body = String::new();
    let mut notes: Vec<String> = Vec::new();
    let mut placed = place::Placed::new(layout.scale.x0, WIDTH - 2.0);
    let unit = axis::axis(&layout, &mut body, &mut placed);
    lanes::backgrounds(&layout, &mut body, &mut placed);
    lanes::regions(&layout, &sorted.regions, &mut body, &mut notes, &mut placed);
    // Errors are placed first (they matter most) and drawn last (on top).
    let mut errors = String::new();
    let mut hidden = 0usize;
    marks::instants(
        &layout,
        &sorted,
        true,
        &mut errors,
        &mut placed,
        &mut hidden,
    );
    lanes::slices(
        &layout,
        &sorted.per_lane,
        &mut body,
        &mut notes,
        &mut placed,
    );
    axis::breaks(&layout, &mut body, &mut notes);
    let mut plain = String::new();
    marks::instants(
        &layout,
        &sorted,
        false,
        &mut plain,
        &mut placed,
        &mut hidden,
    );
    marks::flows(
        &layout,
        &sorted.flows,
        &mut body,
        &mut notes,
        &mut placed,
        &mut hidden,
    );
    body.push_str(&plain);
    body.push_str(&errors);
    marks::instant_notes(&sorted, &mut notes);
    if hidden > 0 {
        notes.push(format!(
            "{} left out where {} overlap another (hover the mark for it).",
            format::count(hidden, "label", "labels"),
            if hidden == 1 {
                "it would"
            } else {
                "they would"
            }
        ));
    }
    let head = frame::header(events, title, &layout, &sorted);
    let (foot, height) = frame::footer(&layout, unit, &notes);
    frame::document(title, height, &head, &body, &foot)
}
