//! The Chrome/Perfetto JSON renderer.

use super::*;

// ---------------------------------------------------------------- Chrome JSON

pub(super) fn parse_json(s: &str) -> Value {
    serde_json::from_str(s).expect("chrome_json output is JSON")
}

fn trace_events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().expect("traceEvents array")
}

/// Every event has the fields its phase documents, with non-negative times.
pub(super) fn check_chrome_fields(doc: &Value) {
    assert!(doc.is_object());
    assert_eq!(doc["displayTimeUnit"], "ns");
    for e in trace_events(doc) {
        assert!(e["name"].is_string(), "name: {e}");
        let ph = e["ph"].as_str().expect("ph");
        let ts = e["ts"].as_f64().expect("ts");
        assert!(ts >= 0.0, "ts: {e}");
        assert!(e["pid"].is_u64(), "pid: {e}");
        assert!(e["tid"].is_u64(), "tid: {e}");
        match ph {
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_u64()),
            "X" => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "dur: {e}");
                assert!(e["cat"].is_string());
                assert!(e["args"].is_object());
            }
            "s" | "f" => {
                assert!(e["id"].is_u64(), "id: {e}");
                if ph == "f" {
                    assert_eq!(e["bp"], "e");
                }
            }
            "i" => {
                assert_eq!(e["s"], "t");
                assert!(e["args"]["error"].is_boolean());
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
}

fn thread_names(doc: &Value) -> BTreeMap<u64, String> {
    trace_events(doc)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn trace_chrome_json_is_well_formed() {
    for events in [small(), large(), Vec::new()] {
        let doc = parse_json(&chrome_json(&events, "pipefence"));
        check_chrome_fields(&doc);
    }
    let doc = parse_json(&chrome_json(&small(), "pipefence"));
    let n = |ph: &str| trace_events(&doc).iter().filter(|e| e["ph"] == ph).count();
    // 9 slices, plus one tiny slice marking the write each flow starts from.
    assert_eq!(n("X"), 10);
    assert_eq!(n("s"), 1);
    assert_eq!(n("f"), 1);
    assert_eq!(n("i"), 2);
    // process_name + (thread_name, thread_sort_index) per lane.
    assert_eq!(n("M"), 1 + 2 * SMALL_LANES.len());
}

#[test]
fn trace_chrome_json_metadata_names_process_and_orders_threads() {
    let doc = parse_json(&chrome_json(&small(), "scenario \"two queues\""));
    let events = trace_events(&doc);
    let process: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .collect();
    assert_eq!(process.len(), 1);
    assert_eq!(process[0]["pid"], 1);
    assert_eq!(process[0]["args"]["name"], "scenario \"two queues\"");
    assert!(events.iter().all(|e| e["pid"] == 1));

    let names = thread_names(&doc);
    let ordered: Vec<&str> = names.values().map(String::as_str).collect();
    assert_eq!(ordered, SMALL_LANES);
    let sort: BTreeMap<u64, u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_sort_index")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["sort_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sort.len(), SMALL_LANES.len());
    let by_sort: Vec<&str> = {
        let mut v: Vec<(u64, &str)> = sort
            .iter()
            .map(|(tid, idx)| (*idx, names[tid].as_str()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    };
    assert_eq!(by_sort, SMALL_LANES);
    // Every non-metadata event is on a named thread.
    for e in events.iter().filter(|e| e["ph"] != "M") {
        assert!(names.contains_key(&e["tid"].as_u64().unwrap()), "{e}");
    }
}

#[test]
fn trace_chrome_json_slices_are_complete_events_in_microseconds() {
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let pfp = trace_events(&doc)
        .iter()
        .find(|e| e["ph"] == "X" && e["name"] == "wait memory flags >= 1")
        .expect("gfx PFP slice");
    // The earliest event is at T0: the slice starts 0.5 µs after it and lasts 1.5 µs.
    assert_eq!(pfp["ts"].as_f64(), Some(0.5));
    assert_eq!(pfp["dur"].as_f64(), Some(1.5));
    assert_eq!(pfp["cat"], "busy");
    assert_eq!(pfp["args"]["site"], "list produce, command 0");
    assert_eq!(pfp["args"]["start_ns"], T0 + 500);
    assert_eq!(names[&pfp["tid"].as_u64().unwrap()], "gfx PFP");
    let cats: Vec<&str> = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["cat"].as_str().unwrap())
        .collect();
    for kind in ["busy", "blocked", "kernel", "host"] {
        assert!(cats.contains(&kind), "{kind} in {cats:?}");
    }
    let first = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(first, 0.0);
}

#[test]
fn trace_chrome_json_flows_are_paired_from_writer_to_waiter() {
    for events in [small(), large()] {
        let doc = parse_json(&chrome_json(&events, "p"));
        let mut pairs: BTreeMap<u64, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
        for e in trace_events(&doc) {
            match e["ph"].as_str() {
                Some("s") => pairs
                    .entry(e["id"].as_u64().unwrap())
                    .or_default()
                    .0
                    .push(e),
                Some("f") => pairs
                    .entry(e["id"].as_u64().unwrap())
                    .or_default()
                    .1
                    .push(e),
                _ => {}
            }
        }
        let flows = events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Flow { .. }))
            .count();
        assert_eq!(pairs.len(), flows);
        for (id, (s, f)) in &pairs {
            assert_eq!((s.len(), f.len()), (1, 1), "flow {id}");
            assert_eq!(s[0]["name"], f[0]["name"]);
            assert!(s[0]["ts"].as_f64() <= f[0]["ts"].as_f64());
        }
    }
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let s = trace_events(&doc).iter().find(|e| e["ph"] == "s").unwrap();
    let f = trace_events(&doc).iter().find(|e| e["ph"] == "f").unwrap();
    assert_eq!(s["name"], "fence frame = 1");
    assert_eq!(names[&s["tid"].as_u64().unwrap()], "gfx ME");
    assert_eq!(names[&f["tid"].as_u64().unwrap()], "compute ME");
    assert_eq!(f["bp"], "e");
    assert_eq!(s["ts"].as_f64(), Some(8.5));
    assert_eq!(f["ts"].as_f64(), Some(9.0));
}

#[test]
fn trace_chrome_json_instants_are_thread_scoped_with_error_flag() {
    let doc = parse_json(&chrome_json(&small(), "p"));
    let names = thread_names(&doc);
    let instants: Vec<&Value> = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "i")
        .collect();
    assert_eq!(instants.len(), 2);
    let removal = instants
        .iter()
        .find(|e| e["args"]["error"] == true)
        .expect("the removal");
    assert!(removal["name"]
        .as_str()
        .unwrap()
        .starts_with("device removed"));
    assert_eq!(removal["s"], "t");
    assert_eq!(names[&removal["tid"].as_u64().unwrap()], "compute ME");
    assert_eq!(removal["ts"].as_f64(), Some(20.0));
    let signal = instants
        .iter()
        .find(|e| e["args"]["error"] == false)
        .unwrap();
    assert_eq!(signal["name"], "signal frame = 1");
}

#[test]
fn trace_chrome_json_is_byte_identical_for_the_same_events() {
    for events in [small(), large(), Vec::new()] {
        let a = chrome_json(&events, "p");
        let b = chrome_json(&events.clone(), "p");
        assert_eq!(a, b);
    }
}

#[test]
fn trace_chrome_json_survives_odd_input() {
    let events = vec![
        // End before start, a zero-length slice, extreme times, odd characters.
        slice(
            me("q\"<&>\u{1}\u{7f}"),
            "inverted",
            SliceKind::Busy,
            5_000,
            10,
        ),
        slice(me("q"), "zero", SliceKind::Blocked, 7, 7),
        instant(host("h\n"), u64::MAX, "late", true),
        flow(worker(u32::MAX), 0, host("h\n"), u64::MAX, "\u{0}wide"),
    ];
    let doc = parse_json(&chrome_json(&events, "\u{1}\"odd\""));
    check_chrome_fields(&doc);
    let inverted = trace_events(&doc)
        .iter()
        .find(|e| e["name"] == "inverted")
        .unwrap();
    assert_eq!(inverted["dur"].as_f64(), Some(0.0));
    let doc = parse_json(&chrome_json(&[], "empty"));
    assert_eq!(trace_events(&doc).len(), 1);
}

/// The Chrome trace shows the waits that blocked (flows); the release-to-acquire edges of the
/// SVG timeline add no event, lane or time to it.
#[test]
fn trace_chrome_json_leaves_sync_edges_out() {
    let mut events = small();
    events.push(sync(
        me("dma"),
        T0 - 5_000,
        pfp("late"),
        T0 + 99_000,
        "fence x = 1",
        SyncKind::QueueWait,
        false,
    ));
    events.insert(
        2,
        sync(
            me("gfx"),
            T0 + 8_500,
            me("compute"),
            T0 + 9_000,
            "fence frame = 1",
            SyncKind::QueueWait,
            true,
        ),
    );
    assert_eq!(chrome_json(&events, "p"), chrome_json(&small(), "p"));
}
