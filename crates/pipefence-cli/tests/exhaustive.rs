//! `pipefence check --exhaustive` and `pipefence run --schedule` on the real binary.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pipefence(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pipefence"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run pipefence")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn x3_max_schedules_5_on_a_big_scenario_is_not_complete_and_says_so() {
    // Strict mode: in the plain model the ring buffer is one class (every conflict is
    // ordered by its fences), proved in one schedule; strict-mode write-backs make thousands.
    let args = [
        "check",
        "examples/ring-buffer.kdl",
        "--strict",
        "--exhaustive",
        "--max-schedules",
        "5",
    ];
    let out = pipefence(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("bounded by --max-schedules 5: ") && text.contains("not a proof"),
        "{text}"
    );
    assert!(!text.contains("proved"), "{text}");
    let out = pipefence(&[&args[..], &["--json"]].concat());
    let v = json(&out);
    assert_eq!(v["complete"], false);
    assert_eq!(v["bound"], "--max-schedules 5");
    assert!(v["schedules"].as_u64().unwrap() <= 5, "{v}");
    assert_eq!(v["failing"], 0);
    assert_eq!(v["failures"], serde_json::json!([]));
}

#[test]
fn x3_a_small_fixed_scenario_is_proved() {
    let dir = std::env::temp_dir().join(format!("pipefence-x3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fence.kdl");
    std::fs::write(
        &file,
        "device tdr-ms=2000\nfence f\nfence g\nqueue a kind=compute\nqueue b kind=compute\n\
         signal a f 1\nwait b f 1\nsignal b g 1\ncpu-wait g 1 timeout-ms=5000\n\
         expect-fence g equals=1\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = pipefence(&["check", f, "--exhaustive", "--strict", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["complete"], true);
    assert_eq!(v["bound"], Value::Null);
    assert_eq!(v["failing"], 0);
    let out = pipefence(&["check", f, "--exhaustive", "--strict"]);
    let n = v["schedules"].as_u64().unwrap();
    let noun = if n == 1 { "schedule" } else { "schedules" };
    assert!(
        stdout(&out).contains(&format!("proved: {n} {noun}, 1 outcome, all pass")),
        "{}",
        stdout(&out)
    );
    // A preemption bound of 0 leaves schedules out: not a proof.
    let out = pipefence(&[
        "check",
        f,
        "--exhaustive",
        "--preemption-bound",
        "0",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["complete"], false);
    assert_eq!(v["bound"], "--preemption-bound 0");
    // The summary says how to get the proof the bound gave up.
    let out = pipefence(&["check", f, "--exhaustive", "--preemption-bound", "0"]);
    assert!(
        stdout(&out).contains("without --preemption-bound the reduced search may prove"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn x2_run_schedule_replays_an_exhaustive_failure_byte_identically() {
    // Sixteen groups of each of two queues race on one buffer: far more classes of schedules
    // than the bound.
    let file = "tests/scenarios/top-of-pipe-flag.kdl";
    let out = pipefence(&[
        "check",
        file,
        "--exhaustive",
        "--max-schedules",
        "300",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["complete"], false);
    assert!(v["failing"].as_u64().unwrap() > 0);
    let failure = &v["failures"][0];
    let replay = failure["replay"].as_str().unwrap();
    let dir = std::env::temp_dir().join(format!("pipefence-x2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |n: u32| {
        let trace = dir.join(format!("{n}.trace.json"));
        let out = pipefence(&[
            "run",
            file,
            "--schedule",
            replay,
            "--json",
            "--trace",
            trace.to_str().unwrap(),
        ]);
        (out, std::fs::read(&trace).unwrap())
    };
    let ((a, ta), (b, tb)) = (run(1), run(2));
    assert_eq!(a.status.code(), Some(1));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(ta, tb);
    // The outcome is the one the exploration recorded (which keeps only the expectations that
    // did not pass).
    let mut got = json(&a);
    let mut want = failure["outcome"].clone();
    for o in [&mut got, &mut want] {
        o.as_object_mut().unwrap().remove("elapsed_ns");
    }
    got["expectations"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["passed"] != true);
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn x2_schedule_and_seed_together_are_a_usage_error() {
    let out = pipefence(&[
        "run",
        "tests/scenarios/write-write.kdl",
        "--schedule",
        "v1:AA",
        "--seed",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = pipefence(&[
        "run",
        "tests/scenarios/write-write.kdl",
        "--schedule",
        "v2:AA",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = pipefence(&[
        "check",
        "tests/scenarios/write-write.kdl",
        "--max-schedules",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// The exhaustive report prints each distinct problem once (with how many schedules had it),
/// then each failing outcome with its problems and the schedule string that replays it.
#[test]
fn x1_exhaustive_failures_print_each_problem_once() {
    let out = pipefence(&[
        "check",
        "tests/scenarios/write-write-queues.kdl",
        "--exhaustive",
        "--strict",
        "--no-reduction",
        "--max-schedules",
        "40",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert_eq!(text.matches("error[write-write]").count(), 1, "{text}");
    assert!(text.contains("in 40 of 40 failing schedules"), "{text}");
    assert!(text.contains("failing outcomes:\n"), "{text}");
    assert!(
        text.contains("problem 1") && text.contains("--schedule v6:"),
        "{text}"
    );
}

/// Each failure is shrunk by default: the summary says how many preemptions the shrunk
/// schedule has, whether that is the fewest, and its decisive steps; the JSON has `shrunk`
/// with a replay that fails the same way. `--no-shrink` leaves it out.
#[test]
fn x4_failures_are_shrunk_unless_no_shrink() {
    let f = "tests/scenarios/pfp-indirect-race.kdl";
    let out = pipefence(&["check", f, "--exhaustive", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let s = &v["failures"][0]["shrunk"];
    assert_eq!(s["preemptions"], 0, "{s}");
    assert_eq!(s["fewest"], true, "{s}");
    let replay = s["replay"].as_str().expect("a replay string");
    let run = pipefence(&["run", f, "--schedule", replay, "--json"]);
    assert_eq!(run.status.code(), Some(1), "the shrunk schedule fails");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("0 preemptions, the fewest possible")
            || text.contains("shrunk to 0 preemptions (the fewest possible"),
        "{text}"
    );

    let out = pipefence(&[
        "check",
        "tests/scenarios/host-write-race.kdl",
        "--exhaustive",
    ]);
    let text = stdout(&out);
    assert!(text.contains("1 preemption, the fewest possible"), "{text}");
    // The first line gives the search's time and the shrink's apart; without shrinking, one.
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(": the search ") && first.contains(" ms, shrinking the failures "),
        "{first}"
    );
    let unshrunk = pipefence(&[
        "check",
        "tests/scenarios/host-write-race.kdl",
        "--exhaustive",
        "--no-shrink",
    ]);
    let first = stdout(&unshrunk);
    let first = first.lines().next().unwrap_or_default();
    assert!(
        first.contains("1 failing, in ") && !first.contains("shrinking"),
        "{first}"
    );
    assert!(
        text.contains("decisive step 1: `gfx`'s PFP parsed `dispatch sum` (line 16) before host thread `main` went on from line 20"),
        "{text}"
    );

    // A shrink its budget cut says so, and names the bounded check that settles the count,
    // which finds no failure of that outcome with fewer preemptions.
    let flag = "tests/scenarios/top-of-pipe-flag.kdl";
    let out = pipefence(&["check", flag, "--exhaustive", "--shrink-runs", "20"]);
    let text = stdout(&out);
    assert!(
        text.contains("    1 preemption, the fewest found\n"),
        "{text}"
    );
    assert!(
        text.contains("not proved the fewest: the shrink's budget (--shrink-runs) ran out before every schedule with fewer preemptions was explored; `check --exhaustive --preemption-bound 0 --no-shrink` explores those, and says whether it finished within its --max-schedules"),
        "{text}"
    );
    let cut = json(&pipefence(&[
        "check",
        flag,
        "--exhaustive",
        "--shrink-runs",
        "20",
        "--json",
    ]));
    let bounded = json(&pipefence(&[
        "check",
        flag,
        "--exhaustive",
        "--preemption-bound",
        "0",
        "--no-shrink",
        "--json",
    ]));
    assert_eq!(bounded["bound"], "--preemption-bound 0", "{bounded}");
    // An outcome as the check groups them: without its times.
    let key = |o: &Value| {
        let mut o = o.clone();
        for k in ["elapsed_ns", "queues"] {
            o.as_object_mut().unwrap().remove(k);
        }
        o
    };
    let at_0: Vec<Value> = bounded["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| key(&f["outcome"]))
        .collect();
    let mut unsettled = 0;
    for f in cut["failures"].as_array().unwrap() {
        if f["shrunk"]["preemptions"] == 1 && f["shrunk"]["fewest"] == false {
            unsettled += 1;
            assert!(
                !at_0.contains(&key(&f["outcome"])),
                "{f} fails at bound 0 too"
            );
        }
    }
    // (The key finds an outcome again: a bound-0 failure's replay has the same one.)
    let replay = bounded["failures"][0]["replay"].as_str().unwrap();
    let again = json(&pipefence(&["run", flag, "--schedule", replay, "--json"]));
    assert!(at_0.contains(&key(&again)), "{again}");
    assert!(unsettled > 0, "{cut}");

    let out = pipefence(&["check", f, "--exhaustive", "--json", "--no-shrink"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(json(&out)["failures"][0].get("shrunk").is_none());
    let out = pipefence(&["check", f, "--no-shrink"]);
    assert_eq!(out.status.code(), Some(2), "--no-shrink needs --exhaustive");
}

/// A schedule string replays the scenario and mode it was printed for. One that does not fit
/// the run (a try naming an alternative the point does not have, or tries left when the run
/// ends) is refused with an error that says so, not replayed as some other schedule that
/// passes; so is one longer than any run, before it is decoded into memory, and the threaded
/// driver, which has no schedules.
#[test]
fn x2_a_schedule_string_that_does_not_fit_the_run_is_refused() {
    let f = "tests/scenarios/write-write.kdl";
    let out = pipefence(&[
        "check",
        f,
        "--exhaustive",
        "--strict",
        "--json",
        "--no-shrink",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let replay = json(&out)["failures"][0]["replay"]
        .as_str()
        .expect("a replay string")
        .to_string();
    let ok = pipefence(&["run", f, "--strict", "--schedule", &replay]);
    assert_eq!(ok.status.code(), Some(1), "it replays its failure");
    let refused = |args: &[&str], why: &str| {
        let out = pipefence(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing is reported as replayed"
        );
    };
    // Another mode, another file.
    refused(
        &["run", f, "--schedule", &replay],
        "is not a schedule of tests/scenarios/write-write.kdl: its choice",
    );
    refused(
        &["run", "examples/deadlock.kdl", "--schedule", &replay],
        "is not a schedule of examples/deadlock.kdl",
    );
    // Tries past the run's end: `AGQ` is a run of 100 tries of the first alternative, which
    // every point has; the deadlock's run ends after a few.
    refused(
        &["run", "examples/deadlock.kdl", "--schedule", "v7:AGQ"],
        "it has 100 choices, and this run ended after the first",
    );
    // 2^32 tries, in 8 characters.
    refused(
        &["run", f, "--schedule", "v7:AICAgIAQ"],
        "longer than any run",
    );
    refused(
        &["run", f, "--schedule", &replay, "--driver", "threaded"],
        "the threaded driver has none",
    );
}

/// A dispatch of 4,294,967,295 groups: past 4,096 groups left it is one actor choosing which
/// groups complete, a choice among billions (where it does not run alone). The exhaustive searches (reduced, plain, in
/// shards) explore such a choice one alternative after another without listing them (they
/// listed them: 16 GiB, and the process aborted or was killed). Run with 4 GB of address
/// space, so that a search that lists them again fails here at once.
#[cfg(unix)]
#[test]
fn x3_a_dispatch_of_billions_of_groups_is_searched_in_bounded_memory() {
    let dir = std::env::temp_dir().join(format!("pipefence-x3-groups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("groups.kdl");
    std::fs::write(
        &file,
        "queue q kind=compute\nlist l kind=compute {\n    dispatch spin ns=1 groups=4294967295\n}\nexecute q l\nwait-idle\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    for extra in [
        &[][..],
        &["--no-reduction"],
        &["--preemption-bound", "1"],
        &["--shard", "0/2"],
        &["-j", "2"],
    ] {
        let mut args = vec![
            "-c",
            "ulimit -v 4000000 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_pipefence"),
            "check",
            file,
            "--exhaustive",
            "--max-schedules",
            "30",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = Command::new("sh").args(&args).output().expect("run sh");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {err}");
        let v = json(&out);
        assert_eq!(v["failing"], 0, "{extra:?}");
        assert!(v["schedules"].as_u64().unwrap() >= 1, "{extra:?}");
        match extra {
            // The dispatch runs alone in the reduced search's run (the main thread waits for
            // idle): its groups are one step, and the search proves the scenario.
            [] | ["-j", "2"] => {
                assert_eq!(
                    (&v["complete"], &v["schedules"]),
                    (&serde_json::json!(true), &serde_json::json!(1))
                );
            }
            // The plain searches list the dispatch as one actor choosing which groups
            // complete: bounded.
            ["--no-reduction"] | ["--preemption-bound", "1"] => {
                assert_eq!(v["complete"], false, "{extra:?}")
            }
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report without its elapsed time (the only field that differs between runs).
fn timeless(mut v: Value) -> Value {
    v.as_object_mut().expect("an object").remove("elapsed_ns");
    v
}

#[test]
fn x6_exhaustive_fail_fast_stops_at_the_first_failing_schedule_whatever_the_threads() {
    let mut reports = Vec::new();
    for jobs in ["1", "2", "3"] {
        let out = pipefence(&[
            "check",
            "tests/scenarios/write-write-queues.kdl",
            "--strict",
            "--exhaustive",
            "--fail-fast",
            "--json",
            "-j",
            jobs,
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let v = timeless(json(&out));
        assert_eq!(v["complete"], false, "{v}");
        assert_eq!(v["bound"], "--fail-fast", "{v}");
        assert_eq!(v["failing"], 1, "{v}");
        assert_eq!(v["failures"].as_array().map(Vec::len), Some(1), "{v}");
        assert!(v["failures"][0]["shrunk"].is_object(), "{v}");
        reports.push(v);
    }
    assert_eq!(reports[0], reports[1], "-j 1 and -j 2");
    assert_eq!(reports[0], reports[2], "-j 1 and -j 3");
    // Without it the same search goes on past that schedule.
    let whole = json(&pipefence(&[
        "check",
        "tests/scenarios/write-write-queues.kdl",
        "--strict",
        "--exhaustive",
        "--max-schedules",
        "50",
        "--json",
    ]));
    assert!(whole["failing"].as_u64().unwrap() > 1, "{whole}");
    assert_eq!(
        whole["failures"][0]["replay"], reports[0]["failures"][0]["replay"],
        "the first failing schedule is the one --fail-fast stops at"
    );
    // A scenario with no failure is still proved: the option stops nothing there.
    let text = stdout(&pipefence(&[
        "check",
        "tests/scenarios/write-write-queues-fixed.kdl",
        "--strict",
        "--exhaustive",
        "--fail-fast",
    ]));
    assert!(text.contains(": proved: "), "{text}");
}

#[test]
fn x6_exhaustive_timelines_traces_and_report_replay_each_failing_outcome() {
    let dir = std::env::temp_dir().join(format!("pipefence-x6-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (tl, tr, html) = (dir.join("tl"), dir.join("tr"), dir.join("report.html"));
    let out = pipefence(&[
        "check",
        "tests/scenarios/stale-cache.kdl",
        "--strict",
        "--exhaustive",
        "--json",
        "--timeline",
        tl.to_str().unwrap(),
        "--trace",
        tr.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let failures = v["failures"].as_array().expect("failures");
    assert!(failures.len() > 1, "{v}");
    let files = |d: &PathBuf| {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .expect("the directory was made")
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let want = |ext: &str| {
        let mut n: Vec<String> = (1..=failures.len())
            .map(|i| format!("failure-{i}.{ext}"))
            .collect();
        n.sort();
        n
    };
    assert_eq!(files(&tl), want("svg"));
    assert_eq!(files(&tr), want("json"));
    for (i, f) in failures.iter().enumerate() {
        // Each is the failure's shrunk schedule replayed: the same trace as `run` gives it.
        let schedule = f["shrunk"]["replay"].as_str().expect("shrunk");
        let own = dir.join(format!("own-{i}.json"));
        let run = pipefence(&[
            "run",
            "tests/scenarios/stale-cache.kdl",
            "--strict",
            "--schedule",
            schedule,
            "--trace",
            own.to_str().unwrap(),
        ]);
        assert_eq!(run.status.code(), Some(f["exit"].as_i64().unwrap() as i32));
        assert_eq!(
            std::fs::read(&own).unwrap(),
            std::fs::read(tr.join(format!("failure-{}.json", i + 1))).unwrap(),
            "failure {}",
            i + 1
        );
        let svg = std::fs::read_to_string(tl.join(format!("failure-{}.svg", i + 1))).unwrap();
        assert!(svg.contains(&format!("schedule {schedule}")), "{svg}");
    }
    let page = std::fs::read_to_string(&html).expect("the report");
    let first = failures[0]["shrunk"]["replay"].as_str().unwrap();
    assert!(page.contains(&format!("--schedule {first}")), "{page}");
    // With nothing failing, the report is of the search's first schedule, which replays.
    let html2 = dir.join("proved.html");
    let out = pipefence(&[
        "check",
        "tests/scenarios/stale-cache-fixed.kdl",
        "--strict",
        "--exhaustive",
        "--report",
        html2.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let page = std::fs::read_to_string(&html2).expect("the report");
    let at = page.find("--schedule ").expect("a replay command") + "--schedule ".len();
    let schedule: String = page[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '<')
        .collect();
    let run = pipefence(&[
        "run",
        "tests/scenarios/stale-cache-fixed.kdl",
        "--strict",
        "--schedule",
        &schedule,
    ]);
    assert_eq!(run.status.code(), Some(0), "{schedule}");
    // --validate stays a sampled check's option.
    let out = pipefence(&[
        "check",
        "tests/scenarios/stale-cache.kdl",
        "--exhaustive",
        "--validate",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The failing outcomes of an exhaustive report, as sorted lists of what failed.
fn failing_whats(v: &Value) -> Vec<String> {
    let mut w: Vec<String> = v["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| f["what"].to_string())
        .collect();
    w.sort();
    w
}

#[test]
fn x2_a_preemption_bound_explores_one_order_of_a_dispatchs_groups_and_finds_every_outcome() {
    // Two dispatches of 4 groups each on one queue: their groups' orders are 2,450 plain
    // schedules at bound 0; they keep the preemptions, so the bounded search explores one.
    let f = "tests/scenarios/write-write.kdl";
    let bounded = |extra: &[&str]| {
        let mut args = vec![
            "check",
            f,
            "--exhaustive",
            "--preemption-bound",
            "0",
            "--no-shrink",
            "--max-schedules",
            "5000",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&pipefence(&args))
    };
    let sleepy = bounded(&[]);
    let plain = bounded(&["--no-reduction"]);
    for v in [&sleepy, &plain] {
        assert_eq!(v["bound"], "--preemption-bound 0", "{v}");
    }
    assert_eq!(
        (&sleepy["reduced"], &plain["reduced"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
    let (s, p) = (
        sleepy["schedules"].as_u64().unwrap(),
        plain["schedules"].as_u64().unwrap(),
    );
    assert!(s * 100 < p, "{s} schedules with sleep sets, {p} plain");
    assert_eq!(sleepy["outcomes"], plain["outcomes"]);
    assert_eq!(failing_whats(&sleepy), failing_whats(&plain));
    assert!(!failing_whats(&sleepy).is_empty());
    // Each failure found replays as the check saw it.
    let replay = sleepy["failures"][0]["replay"].as_str().unwrap();
    let out = pipefence(&["run", f, "--schedule", replay, "--json"]);
    assert_eq!(
        out.status.code(),
        sleepy["failures"][0]["exit"].as_i64().map(|c| c as i32)
    );
}

#[test]
fn x2_a_bounded_search_mostly_stopped_asleep_starts_again_as_the_plain_one() {
    // Strict mode, a fixed flag scenario at bound 1: the early write-backs of the fill's lines
    // stop nearly every run asleep (1 schedule in 10,000 runs), so the check gives up on the
    // sleep sets after 1,000 such runs and runs the plain bounded search from the start.
    let args = [
        "check",
        "tests/scenarios/top-of-pipe-flag-fixed.kdl",
        "--strict",
        "--exhaustive",
        "--preemption-bound",
        "1",
        "--max-schedules",
        "1500",
        "--json",
    ];
    let v = json(&pipefence(&args));
    assert_eq!(v["reduced"], false, "{v}");
    assert_eq!(v["schedules"], 1500);
    assert_eq!(v["bound"], "--max-schedules 1500");
    assert_eq!(v["sleep_blocked"], 0);
    assert_eq!(v["failing"], 0);
    // Without the bound the reduced search proves it.
    let v = json(&pipefence(
        &args[..4]
            .iter()
            .chain(&["--json"])
            .copied()
            .collect::<Vec<_>>(),
    ));
    assert_eq!(v["complete"], true, "{v}");
}
