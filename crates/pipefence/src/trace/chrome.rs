//! Chrome/Perfetto trace JSON: [`chrome_json`] turns trace events into the Trace Event Format
//! (the JSON object form) that `ui.perfetto.dev` and `chrome://tracing` load.
//!
//! One process (pid 1) with one thread per [`Track`] in a stable lane order (per queue in
//! first-appearance order its PFP then its ME, then workers by index, then hosts in
//! first-appearance order); times are microseconds since the earliest event (the format's unit),
//! with the absolute device-clock nanoseconds kept in each slice's `args`.

use serde_json::{json, Value};

use super::{SliceKind, TraceEvent, Track};

/// The process id of every event.
const PID: u64 = 1;

/// The tracks that `events` mention (slices, both ends of flows, instants, and with `svg_events`
/// the events only the SVG timeline draws: both ends of [`TraceEvent::Sync`] edges, regions) in the stable lane order: per queue in
/// first-appearance order its PFP then its ME, then workers by index, then hosts in
/// first-appearance order.
pub(crate) fn ordered_tracks(events: &[TraceEvent], svg_events: bool) -> Vec<Track> {
    let mut queues: Vec<(&str, bool, bool)> = Vec::new();
    let mut workers: Vec<u32> = Vec::new();
    let mut hosts: Vec<&str> = Vec::new();
    for e in events {
        let tracks: [Option<&Track>; 2] = match e {
            TraceEvent::Slice { track, .. } | TraceEvent::Instant { track, .. } => {
                [Some(track), None]
            }
            TraceEvent::Flow { from, to, .. } => [Some(from), Some(to)],
            TraceEvent::Sync { from, to, .. } if svg_events => [Some(from), Some(to)],
            TraceEvent::Region { track, .. } if svg_events => [Some(track), None],
            TraceEvent::Sync { .. } | TraceEvent::Region { .. } => [None, None],
        };
        for t in tracks.into_iter().flatten() {
            match t {
                Track::Pfp { queue } | Track::Me { queue } => {
                    let pfp = matches!(t, Track::Pfp { .. });
                    let slot = match queues.iter().position(|q| q.0 == queue.as_str()) {
                        Some(i) => &mut queues[i],
                        None => {
                            queues.push((queue.as_str(), false, false));
                            let last = queues.len() - 1;
                            &mut queues[last]
                        }
                    };
                    if pfp {
                        slot.1 = true;
                    } else {
                        slot.2 = true;
                    }
                }
                Track::Worker { index } => {
                    if !workers.contains(index) {
                        workers.push(*index);
                    }
                }
                Track::Host { name } => {
                    if !hosts.contains(&name.as_str()) {
                        hosts.push(name.as_str());
                    }
                }
            }
        }
    }
    workers.sort_unstable();
    let mut out = Vec::new();
    for (queue, pfp, me) in queues {
        if pfp {
            out.push(Track::Pfp {
                queue: queue.to_string(),
            });
        }
        if me {
            out.push(Track::Me {
                queue: queue.to_string(),
            });
        }
    }
    out.extend(workers.into_iter().map(|index| Track::Worker { index }));
    out.extend(hosts.into_iter().map(|name| Track::Host {
        name: name.to_string(),
    }));
    out
}

/// A lane's display name: `gfx PFP`, `gfx ME`, `worker 0`, `host main`.
pub(crate) fn track_label(track: &Track) -> String {
    match track {
        Track::Pfp { queue } => format!("{queue} PFP"),
        Track::Me { queue } => format!("{queue} ME"),
        Track::Worker { index } => format!("worker {index}"),
        Track::Host { name } => format!("host {name}"),
    }
}

/// A slice kind's name (`busy`, `blocked`, `kernel`, `host`).
pub(crate) fn kind_name(kind: SliceKind) -> &'static str {
    match kind {
        SliceKind::Busy => "busy",
        SliceKind::Blocked => "blocked",
        SliceKind::Kernel => "kernel",
        SliceKind::Host => "host",
    }
}

/// The earliest and latest times of `events` (slice ends and both ends of flows included, and
/// with `svg_events` both ends of [`TraceEvent::Sync`] edges and regions), or `None` when there
/// are none.
pub(crate) fn time_bounds(events: &[TraceEvent], svg_events: bool) -> Option<(u64, u64)> {
    let mut bounds: Option<(u64, u64)> = None;
    let mut see = |ns: u64| {
        bounds = Some(match bounds {
            None => (ns, ns),
            Some((lo, hi)) => (lo.min(ns), hi.max(ns)),
        });
    };
    for e in events {
        match e {
            TraceEvent::Slice {
                start_ns, end_ns, ..
            } => {
                see(*start_ns);
                see(*end_ns);
            }
            TraceEvent::Flow { from_ns, to_ns, .. } => {
                see(*from_ns);
                see(*to_ns);
            }
            TraceEvent::Sync { from_ns, to_ns, .. } if svg_events => {
                see(*from_ns);
                see(*to_ns);
            }
            TraceEvent::Region {
                start_ns, end_ns, ..
            } if svg_events => {
                see(*start_ns);
                see(*end_ns);
            }
            TraceEvent::Sync { .. } | TraceEvent::Region { .. } => {}
            TraceEvent::Instant { ts_ns, .. } => see(*ts_ns),
        }
    }
    bounds
}

/// Nanoseconds since `t0` as the format's microseconds.
fn micros(ns: u64, t0: u64) -> f64 {
    ns.saturating_sub(t0) as f64 / 1000.0
}

/// The Chrome Trace Event Format of `events` (`{"traceEvents": [...], "displayTimeUnit": "ns"}`)
/// for Perfetto or `chrome://tracing`.
///
/// - Metadata first: `process_name` (pid 1 is named `process_name`), then per track in lane
///   order a `thread_name` (`gfx PFP`, `gfx ME`, `worker 0`, `host main`) and a
///   `thread_sort_index` (tids are 1, 2, ... in that order).
/// - Slices are complete events (`"ph":"X"`, `cat` = the kind, `args` = site and the absolute
///   device-clock `start_ns`/`end_ns`); a slice whose end precedes its start gets `dur` 0.
/// - Flows are `"ph":"s"` (on the writer's thread) / `"ph":"f"` (on the waiter's, `"bp":"e"`)
///   pairs sharing an `id`, named by the flow's label, `cat` `flow`.
/// - Instants are `"ph":"i"` with `"s":"t"` and `args.error`; errors also get `cat` `error` and
///   `cname` `terrible` (red in `chrome://tracing`).
/// - [`TraceEvent::Sync`] edges (every satisfied wait) and [`TraceEvent::Region`]s are left
///   out, lanes and time bounds included: the flows are the waits that blocked.
///
/// `ts`/`dur` are microseconds (floats) since the earliest event. Events are in time order (ties
/// as given), so the same events always give the same bytes.
pub fn chrome_json(events: &[TraceEvent], process_name: &str) -> String {
    // Sync edges are the SVG timeline's: the Chrome trace draws the waits that blocked (Flow).
    let tracks = ordered_tracks(events, false);
    let tid = |t: &Track| -> u64 {
        tracks
            .iter()
            .position(|x| x == t)
            .map_or(0, |i| i as u64 + 1)
    };
    let t0 = time_bounds(events, false).map_or(0, |(lo, _)| lo);

    let mut out: Vec<Value> = Vec::with_capacity(1 + 2 * tracks.len() + events.len() + 8);
    out.push(json!({
        "name": "process_name", "ph": "M", "ts": 0.0, "pid": PID, "tid": 0,
        "args": { "name": process_name },
    }));
    for (i, t) in tracks.iter().enumerate() {
        let tid = i as u64 + 1;
        out.push(json!({
            "name": "thread_name", "ph": "M", "ts": 0.0, "pid": PID, "tid": tid,
            "args": { "name": track_label(t) },
        }));
        out.push(json!({
            "name": "thread_sort_index", "ph": "M", "ts": 0.0, "pid": PID, "tid": tid,
            "args": { "sort_index": i },
        }));
    }

    // (sort key in ns, value): stable-sorted by time below.
    let mut timed: Vec<(u64, Value)> = Vec::with_capacity(events.len() + 8);
    let mut flow_id: u64 = 0;
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
                let mut args = serde_json::Map::new();
                if let Some(site) = site {
                    args.insert("site".into(), Value::from(site.as_str()));
                }
                args.insert("start_ns".into(), Value::from(*start_ns));
                args.insert("end_ns".into(), Value::from(*end_ns));
                timed.push((
                    *start_ns,
                    json!({
                        "name": name, "cat": kind_name(*kind), "ph": "X",
                        "ts": micros(*start_ns, t0),
                        "dur": end_ns.saturating_sub(*start_ns) as f64 / 1000.0,
                        "pid": PID, "tid": tid(track), "args": args,
                    }),
                ));
            }
            TraceEvent::Flow {
                from,
                from_ns,
                to,
                to_ns,
                label,
            } => {
                flow_id += 1;
                // The write or signal itself, as a tiny slice on the writer's thread: flow
                // starts bind to the slice that encloses them, and the write may land after the
                // writer's busy slice ended (a bottom-of-pipe retirement).
                timed.push((
                    *from_ns,
                    json!({
                        "name": label, "cat": "flow", "ph": "X",
                        "ts": micros(*from_ns, t0), "dur": 0.001, "pid": PID, "tid": tid(from),
                        "args": { "start_ns": from_ns, "end_ns": from_ns },
                    }),
                ));
                timed.push((
                    *from_ns,
                    json!({
                        "name": label, "cat": "flow", "ph": "s", "id": flow_id,
                        "ts": micros(*from_ns, t0), "pid": PID, "tid": tid(from),
                    }),
                ));
                timed.push((
                    *to_ns,
                    json!({
                        "name": label, "cat": "flow", "ph": "f", "bp": "e", "id": flow_id,
                        "ts": micros(*to_ns, t0), "pid": PID, "tid": tid(to),
                    }),
                ));
            }
            TraceEvent::Sync { .. } | TraceEvent::Region { .. } => {}
            TraceEvent::Instant {
                track,
                ts_ns,
                name,
                error,
            } => {
                let mut v = json!({
                    "name": name, "cat": if *error { "error" } else { "instant" }, "ph": "i",
                    "s": "t", "ts": micros(*ts_ns, t0), "pid": PID, "tid": tid(track),
                    "args": { "error": error },
                });
                if *error {
                    if let Some(m) = v.as_object_mut() {
                        m.insert("cname".into(), Value::from("terrible"));
                    }
                }
                timed.push((*ts_ns, v));
            }
        }
    }
    timed.sort_by_key(|(ns, _)| *ns);
    out.extend(timed.into_iter().map(|(_, v)| v));

    let doc = json!({ "traceEvents": out, "displayTimeUnit": "ns" });
    // Serializing a `Value` cannot fail (its map keys are strings).
    serde_json::to_string(&doc).unwrap_or_default()
}
