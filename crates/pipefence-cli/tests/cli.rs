//! The real `pipefence` binary on every example and on the race scenarios: exit codes and JSON
//! fields (docs/run.schema.json), schedule exploration and replay (D4, D6).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pipefence(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipefence"));
    cmd.args(args).current_dir(root());
    output_within(cmd, 300)
}

/// Runs `cmd` with stdout and stderr piped, killing it if it runs past `secs`.
fn output_within(mut cmd: Command, secs: u64) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pipefence");
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pipefence {:?} ran past {secs} s", cmd.get_args());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
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

const EXAMPLES: [&str; 6] = [
    "examples/async-compute.kdl",
    "examples/ring-buffer.kdl",
    "examples/cpu-gpu-handshake.kdl",
    "examples/gpu-timers.kdl",
    "examples/deadlock.kdl",
    "examples/missing-writeback.kdl",
];

#[test]
fn every_example_passes_on_the_threaded_driver() {
    for ex in EXAMPLES {
        let out = pipefence(&["run", ex, "--json"]);
        let v = json(&out);
        assert_eq!(out.status.code(), Some(0), "{ex}: {v}");
        assert_eq!(v["version"], 1);
        assert_eq!(v["status"], "passed", "{ex}");
        assert!(v["hazards"].as_array().is_some_and(|h| h.is_empty()));
        assert!(v["elapsed_ns"].as_u64().is_some());
        for e in v["expectations"].as_array().unwrap() {
            assert_eq!(e["passed"], true, "{ex}: {e}");
            assert!(e["line"].as_u64().unwrap() > 0);
        }
    }
}

#[test]
fn async_compute_json_fields() {
    let v = json(&pipefence(&["run", "examples/async-compute.kdl", "--json"]));
    assert_eq!(v["fences"]["done"], 1);
    assert_eq!(v["removed"], Value::Null);
    let e = &v["expectations"][0];
    assert_eq!(e["detail"], "flags+8 (u64) == 28672");
}

#[test]
fn deadlock_example_reports_the_cycle_with_lines() {
    let out = pipefence(&["run", "examples/deadlock.kdl", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let r = &v["removed"];
    assert_eq!(r["reason"], "hung");
    assert_eq!(r["hresult"], "0x887A0006");
    assert_eq!(r["classification"], "deadlock");
    assert_eq!(r["cycle"], serde_json::json!(["q1", "q2"]));
    let q1 = &r["queues"][0];
    assert_eq!(q1["queue"], "q1");
    assert_eq!(q1["op"], "wait");
    assert_eq!(q1["line"], 11);
    assert_eq!(q1["list"], Value::Null);
    assert_eq!(q1["waiting_for"], "fence b >= 1");
    assert_eq!(q1["current"], 0);
    assert_eq!(q1["last_writer"], "never written");
    assert_eq!(r["queues"][1]["line"], 13);
    // Fences read u64::MAX after removal, as an exact JSON integer.
    assert_eq!(v["fences"]["a"].as_u64(), Some(u64::MAX));
}

#[test]
fn unexpected_removal_exits_3_and_failed_expectation_exits_1() {
    let dir = std::env::temp_dir().join(format!("pipefence-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hang = dir.join("hang.kdl");
    std::fs::write(
        &hang,
        "device tdr-ms=100\nbuffer m size=64 heap=shared\nqueue q kind=compute\nlist l kind=compute {\n    wait-value32 m cmp=equal reference=1\n}\nexecute q l\n",
    )
    .unwrap();
    let out = pipefence(&["run", hang.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(v["status"], "removed");
    assert_eq!(v["removed"]["classification"], "waiting-on-host");
    assert_eq!(v["removed"]["queues"][0]["line"], 5);
    assert_eq!(v["removed"]["queues"][0]["list"], "l");
    assert_eq!(v["removed"]["queues"][0]["command"], 0);

    let fail = dir.join("fail.kdl");
    std::fs::write(
        &fail,
        "buffer m size=64 heap=shared\ncpu-write m value=3\nexpect m equals=4\nexpect m equals=3\n",
    )
    .unwrap();
    let out = pipefence(&["run", fail.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["expectations"][0]["passed"], false);
    assert_eq!(v["expectations"][0]["detail"], "m (u32) == 4, got 3");
    assert_eq!(v["expectations"][1]["passed"], true);

    let timeout = dir.join("timeout.kdl");
    std::fs::write(
        &timeout,
        "fence f\ncpu-wait f 1 timeout-ms=20\nexpect-fence f equals=0\n",
    )
    .unwrap();
    let out = pipefence(&["run", timeout.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["expectations"][0]["passed"], Value::Null, "never reached");
    assert_eq!(v["host_errors"][0]["line"], 2);

    let invalid = dir.join("invalid.kdl");
    std::fs::write(&invalid, "buffer m size=64\nfrobnicate m\n").unwrap();
    let out = pipefence(&["run", invalid.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let v = json(&out);
    assert_eq!(v["status"], "invalid");
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("invalid.kdl:2:1:"), "{msg}");
    assert_eq!(v["errors"][0]["line"], 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid.kdl:2:1:") && stderr.contains("frobnicate m"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn command_line_errors_exit_2() {
    assert_eq!(pipefence(&["run"]).status.code(), Some(2));
    assert_eq!(
        pipefence(&["run", "no/such/file.kdl"]).status.code(),
        Some(2)
    );
    assert_eq!(
        pipefence(&[
            "run",
            "examples/async-compute.kdl",
            "--driver",
            "threaded",
            "--strict"
        ])
        .status
        .code(),
        Some(2)
    );
    assert_eq!(pipefence(&["frobnicate"]).status.code(), Some(2));
}

/// With `--json`, a wrong command line prints the `usage` object on stdout (one object, exit 2,
/// the message naming the flag or value; docs/run.schema.json), for clap's own errors and the
/// command's checks alike; without `--json` stdout stays empty, and `--help` is still help.
#[test]
fn a_usage_error_with_json_prints_the_usage_object() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["check", "examples/deadlock.kdl", "--json", "--jbos", "2"],
            "--jbos",
        ),
        (&["check", "--json"], "<FILE>"),
        (
            &["check", "examples/deadlock.kdl", "--json", "--jobs", "0"],
            "--jobs 0",
        ),
        (
            &[
                "check",
                "examples/deadlock.kdl",
                "--exhaustive",
                "--seed",
                "3",
                "--json",
            ],
            "--seed",
        ),
        (
            &[
                "run",
                "examples/deadlock.kdl",
                "--json",
                "--seed",
                "1",
                "--schedule",
                "v1:AA",
            ],
            "--seed 1",
        ),
        (
            &["merge", "no/such/shard.json", "--json"],
            "no/such/shard.json",
        ),
    ];
    for (args, named) in cases {
        let out = pipefence(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v = json(&out);
        assert_eq!(v["status"], "usage", "{args:?}: {v}");
        assert_eq!(v["version"], 1, "{args:?}: {v}");
        let message = v["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(named),
            "{args:?}: {message:?} names no {named}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{args:?}: stderr {stderr:?}");
        // The same without --json: the message on stderr, nothing on stdout.
        let plain: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
        let out = pipefence(&plain);
        assert_eq!(out.status.code(), Some(2), "{plain:?}");
        assert!(out.stdout.is_empty(), "{plain:?}: {:?}", out.stdout);
    }
    // After `--`, `--json` is a value, not the flag: no JSON.
    let out = pipefence(&["run", "--bogus", "--", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = pipefence(&["check", "--help", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: pipefence check"));
}

/// A negative or malformed count is a usage error that names its option and the value (a
/// negative number used to be taken for an unknown flag: "unexpected argument '-1'"), and a
/// count's error does not offer a range its option refuses (`--jobs` counts from 1).
#[test]
fn negative_and_malformed_counts_name_their_option() {
    let f = "examples/deadlock.kdl";
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["check", f, "--exhaustive", "--preemption-bound", "-1"],
            &["--preemption-bound", "-1"],
        ),
        (
            &["check", f, "--exhaustive", "--shrink-runs", "-3"],
            &["--shrink-runs", "-3"],
        ),
        (
            &["check", f, "--exhaustive", "--max-schedules", "-2"],
            &["--max-schedules", "-2"],
        ),
        (&["check", f, "--schedules", "-5"], &["--schedules", "-5"]),
        (&["check", f, "--seed", "-5"], &["--seed", "-5"]),
        (
            &["run", f, "--driver", "deterministic", "--seed", "-5"],
            &["--seed", "-5"],
        ),
        (&["check", f, "-j", "-1"], &["--jobs `-1`", "1 to 1024"]),
        (&["check", f, "-j", "abc"], &["--jobs `abc`", "1 to 1024"]),
        (
            &["check", f, "--shard", "-1/3"],
            &["--shard `-1/3`", "the index `-1`"],
        ),
    ];
    for (args, says) in cases {
        let out = pipefence(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        for s in says {
            assert!(err.contains(s), "{args:?}: `{s}` not in {err}");
        }
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(!err.contains("from 0 to"), "{args:?}: {err}");
    }
}

/// A seed range past `u64::MAX` is a usage error naming the values (it used to wrap to seed
/// 0), and so is a `--seed` the threaded driver would ignore; the largest range that fits runs.
#[test]
fn seed_ranges_that_overflow_and_ignored_seeds_are_errors() {
    let out = pipefence(&[
        "check",
        "examples/deadlock.kdl",
        "--seed",
        "18446744073709551610",
        "--schedules",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--seed 18446744073709551610 with --schedules 7")
            && err.contains("at most 6 schedules"),
        "{err}"
    );
    let out = pipefence(&[
        "check",
        "examples/deadlock.kdl",
        "--seed",
        "18446744073709551610",
        "--schedules",
        "6",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["schedules"], 6);
    let out = pipefence(&["run", "examples/async-compute.kdl", "--seed", "3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--seed 3") && err.contains("deterministic"),
        "{err}"
    );
    let out = pipefence(&[
        "run",
        "examples/async-compute.kdl",
        "--strict",
        "--seed",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn d4_correct_examples_pass_every_schedule() {
    for ex in EXAMPLES {
        let out = pipefence(&["check", ex, "--schedules", "100", "--json"]);
        let v = json(&out);
        assert_eq!(out.status.code(), Some(0), "{ex}: {v}");
        assert_eq!(v["schedules"], 100);
        assert_eq!(v["failures"].as_array().unwrap().len(), 0, "{ex}");
        assert!(v["outcomes"].as_u64().unwrap() >= 1);
    }
    let out = pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-fixed.kdl",
        "--schedules",
        "200",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn d4_race_found_within_200_schedules_and_its_seed_replays() {
    let out = pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--schedules",
        "200",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let failures = v["failures"].as_array().unwrap();
    assert!(!failures.is_empty());
    assert!(failures.len() < 200, "the race must depend on the schedule");
    assert!(v["outcomes"].as_u64().unwrap() >= 2);
    let seed = failures[0]["seed"].as_u64().unwrap();
    assert_eq!(failures[0]["status"], "failed");
    assert_eq!(failures[0]["exit"], 1);
    // Replaying the seed gives the same failure, byte for byte.
    let replay = |s: u64| {
        pipefence(&[
            "run",
            "tests/scenarios/pfp-indirect-race.kdl",
            "--driver",
            "deterministic",
            "--seed",
            &s.to_string(),
            "--json",
        ])
    };
    let a = replay(seed);
    assert_eq!(a.status.code(), Some(1));
    let av = json(&a);
    assert_eq!(av["expectations"], failures[0]["outcome"]["expectations"]);
    let b = replay(seed);
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn d4_identical_seeds_give_identical_output_for_50_seeds() {
    for seed in 0..50u64 {
        let run = || {
            pipefence(&[
                "run",
                "examples/ring-buffer.kdl",
                "--driver",
                "deterministic",
                "--seed",
                &seed.to_string(),
                "--json",
            ])
            .stdout
        };
        let a = run();
        assert!(!a.is_empty());
        assert_eq!(a, run(), "seed {seed}");
    }
}

#[test]
fn d6_hang_classification_matches_the_threaded_driver() {
    for ex in ["examples/deadlock.kdl"] {
        let threaded = json(&pipefence(&["run", ex, "--json"]));
        for seed in 0..20u64 {
            let det = json(&pipefence(&[
                "run",
                ex,
                "--driver",
                "deterministic",
                "--seed",
                &seed.to_string(),
                "--json",
            ]));
            assert_eq!(
                det["removed"]["classification"],
                threaded["removed"]["classification"]
            );
            assert_eq!(det["removed"]["cycle"], threaded["removed"]["cycle"]);
            assert_eq!(
                det["removed"]["queues"], threaded["removed"]["queues"],
                "seed {seed}"
            );
        }
    }
}

#[test]
fn d5_run_strict_reports_the_missing_writeback_and_exits_1() {
    let out = pipefence(&[
        "run",
        "examples/missing-writeback.kdl",
        "--strict",
        "--seed",
        "7",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["status"], "failed");
    let h = v["hazards"].as_array().expect("hazards array");
    assert_eq!(h.len(), 1, "{v}");
    let h = &h[0];
    assert_eq!(h["kind"], "unreleased-read");
    assert_eq!(h["range"], "data..+0x1000");
    assert_eq!(h["first"]["queue"], "producer");
    assert_eq!(h["first"]["list"], "produce");
    assert_eq!(h["first"]["command"], 0);
    assert_eq!(h["first"]["line"], 18);
    assert_eq!(h["first"]["kernel"], "fill");
    assert_eq!(h["second"]["queue"], "consumer");
    assert_eq!(h["second"]["line"], 23);
    assert_eq!(h["via"]["op"], "write-value32-bop");
    assert_eq!(h["via"]["line"], 19);
    assert!(h["missing"].as_str().unwrap().contains("no l2-writeback"));
    assert!(h["fix"].as_str().unwrap().contains("flush=l2-writeback"));
    // The human summary (stderr with --json) shows the hazard as a diagnostic: both accesses
    // at FILE:LINE:COLUMN, the release, and the fix.
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "error[unreleased-read]: `data..+0x1000` written by producer/produce:0 (dispatch fill)",
        "--> examples/missing-writeback.kdl:23:",
        "written by producer/produce:0 (dispatch fill) at examples/missing-writeback.kdl:18:",
        "at examples/missing-writeback.kdl:19:",
        "help: fix: add flush=l2-writeback",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn d5_run_validate_on_the_threaded_driver_finds_the_same_hazard() {
    let out = pipefence(&[
        "run",
        "examples/missing-writeback.kdl",
        "--validate",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["hazards"][0]["kind"], "unreleased-read");
    assert_eq!(v["hazards"][0]["via"]["line"], 19);
    let out = pipefence(&["run", "examples/async-compute.kdl", "--validate", "--json"]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["hazards"].as_array().map(Vec::len), Some(0));
}

#[test]
fn d5_check_strict_fails_every_seed_and_replays_with_strict() {
    let out = pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--strict",
        "--schedules",
        "20",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20 failing"), "{text}");
    // The replay hint works where the test runs: a Cargo build, from inside the checkout.
    assert!(
        text.contains(
            "replay with `cargo run --release -p pipefence-cli -- run \
             tests/scenarios/pfp-indirect-race.kdl --strict --seed 0`"
        ) || !in_checkout_build(),
        "{text}"
    );
    assert!(text.contains("error[pfp-read-before-wait]"), "{text}");
    assert!(text.contains("engine=pfp"), "{text}");
    // Failing schedules are grouped by problem: one hazard here, printed once with its count
    // and first seeds (bounded output whatever --schedules is).
    assert_eq!(
        text.matches("error[pfp-read-before-wait]").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("problem 1 of 2: in 20 of 20 failing schedules (seeds 0 1 2 3 4 5 6 7 ...)"),
        "{text}"
    );
    // The expectation it breaks is the second problem; every schedule has both.
    assert!(
        text.contains("problems 1 + 2: 20 schedules (seeds 0 1 2 3 4 5 6 7 ...)"),
        "{text}"
    );
}

#[test]
fn d5_strict_examples_are_clean_and_flag_misuse_is_a_usage_error() {
    for ex in EXAMPLES
        .iter()
        .filter(|e| !e.contains("deadlock") && !e.contains("missing"))
    {
        for seed in ["0", "1", "2"] {
            let out = pipefence(&["run", ex, "--strict", "--seed", seed, "--json"]);
            let v = json(&out);
            assert_eq!(out.status.code(), Some(0), "{ex} seed {seed}: {v}");
            assert_eq!(v["hazards"].as_array().map(Vec::len), Some(0));
        }
    }
    let both = pipefence(&[
        "run",
        "examples/async-compute.kdl",
        "--strict",
        "--validate",
    ]);
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--validate"));
}

/// Ctrl-C (SIGINT) during `check` prints the summary of the schedules that ran and exits 130;
/// during a threaded `run`, it prints what is waiting on what (the device is removed as
/// requested, with the usual report) and exits 130.
#[test]
fn ctrl_c_prints_what_ran_and_exits_130() {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    /// Whether process `pid` catches SIGINT yet (Linux: bit 1 of `SigCgt`).
    fn catches_sigint(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let l = s.lines().find(|l| l.starts_with("SigCgt:"))?;
                u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok()
            })
            .is_some_and(|mask| mask & 2 != 0)
    }
    let interrupt = |args: &[&str]| -> (Option<i32>, String, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pipefence"))
            .args(args)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pipefence");
        let start = Instant::now();
        while !catches_sigint(child.id()) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no SIGINT handler"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Only makes it likely that the work has started; nothing below depends on it.
        std::thread::sleep(Duration::from_millis(300));
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
        let mut out = String::new();
        let mut err = String::new();
        let mut so = child.stdout.take().unwrap();
        let mut se = child.stderr.take().unwrap();
        let t = std::thread::spawn(move || {
            let mut e = String::new();
            let _ = se.read_to_string(&mut e);
            e
        });
        let _ = so.read_to_string(&mut out);
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no exit after SIGINT"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        err.push_str(&t.join().unwrap());
        (status.code(), out, err)
    };
    let (code, out, err) = interrupt(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--schedules",
        "1000000000",
    ]);
    assert_eq!(code, Some(130), "{out}{err}");
    assert!(
        out.contains("of 1000000000 schedules (interrupted)"),
        "{out}"
    );
    assert!(err.contains("pipefence: interrupted"), "{err}");
    // An exhaustive check on two threads: a run cut short by the interrupt is not taken for a
    // program that does not replay its prefix (it once panicked).
    let (code, out, err) = interrupt(&[
        "check",
        "tests/scenarios/top-of-pipe-flag.kdl",
        "--exhaustive",
        "-j",
        "2",
        "--max-schedules",
        "1000000",
    ]);
    assert_eq!(code, Some(130), "{out}{err}");
    assert!(out.contains("bounded by interrupted"), "{out}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("pipefence: interrupted"), "{err}");
    // A queue waits for a CPU signal that never comes, and so does the host.
    let file = std::env::temp_dir().join(format!("pipefence-ctrl-c-{}.kdl", std::process::id()));
    std::fs::write(
        &file,
        "device tdr-ms=600000\nfence f\nqueue q kind=compute\nwait q f 1\ncpu-wait f 1 timeout-ms=600000\n",
    )
    .unwrap();
    let (code, out, err) = interrupt(&["run", &file.to_string_lossy()]);
    std::fs::remove_file(&file).ok();
    assert_eq!(code, Some(130), "{out}{err}");
    assert!(out.contains("device removed: requested"), "{out}");
    assert!(err.contains("pipefence: interrupted"), "{err}");
}

/// E3: a file that is not UTF-8 is an input error with the position of its first bad byte, as
/// any other (before: "cannot read: stream did not contain valid UTF-8", line 0, column 0).
#[test]
fn e3_non_utf8_input_names_the_line_and_column_of_the_bad_byte() {
    let dir = std::env::temp_dir().join(format!("pipefence-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.kdl");
    std::fs::write(&file, b"buffer b size=64\nfence \xc3\xa9\xff\xfe(\n").unwrap();
    let f = file.to_str().unwrap();
    let out = pipefence(&["run", f]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{f}:2:8: byte 0xff is not UTF-8")),
        "{err}"
    );
    let v = json(&pipefence(&["check", f, "--json"]));
    assert_eq!(v["status"], "invalid");
    assert_eq!(
        (
            v["errors"][0]["line"].as_u64(),
            v["errors"][0]["column"].as_u64()
        ),
        (Some(2), Some(8))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether the binary under test is a Cargo build in this checkout (`ROOT/target/...`), which is
/// what replay hints spell as `cargo run` when the command runs inside the checkout.
fn in_checkout_build() -> bool {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_pipefence")).unwrap();
    let target = std::fs::canonicalize(root()).unwrap().join("target");
    exe.starts_with(target)
}

/// `pipefence` with extra environment variables (and NO_COLOR and CLICOLOR_FORCE cleared first).
fn pipefence_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipefence"));
    cmd.args(args)
        .current_dir(root())
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_within(cmd, 300)
}

/// `--color`: `always` colours the diagnostics of run and check (and parse errors), `never`
/// and a pipe (auto) do not; in auto mode CLICOLOR_FORCE turns it on off a terminal and
/// NO_COLOR (any non-empty value) turns it off whatever else says so.
#[test]
fn color_always_never_auto_and_no_color() {
    let bad = std::env::temp_dir().join(format!("pf-color-{}.kdl", std::process::id()));
    std::fs::write(
        &bad,
        "queue q kind=compute
frobnicate q
",
    )
    .unwrap();
    let bad = bad.display().to_string();
    let hazard = [
        "run",
        "examples/missing-writeback.kdl",
        "--strict",
        "--seed",
        "7",
    ];
    let check = [
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--strict",
        "--schedules",
        "3",
    ];
    let invalid = ["run", bad.as_str()];
    let esc = |o: &Output| {
        String::from_utf8_lossy(&o.stdout).contains('\u{1b}')
            || String::from_utf8_lossy(&o.stderr).contains('\u{1b}')
    };
    let with = |args: &[&str], color: &str| {
        let mut a = args.to_vec();
        a.extend(["--color", color]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    for args in [&hazard[..], &check[..], &invalid[..]] {
        let always = with(args, "always");
        let always: Vec<&str> = always.iter().map(String::as_str).collect();
        let never = with(args, "never");
        let never: Vec<&str> = never.iter().map(String::as_str).collect();
        let out = pipefence_env(&always, &[]);
        assert!(esc(&out), "{args:?} --color always: no escape");
        // `always` is asked for: NO_COLOR does not undo it.
        assert!(
            esc(&pipefence_env(&always, &[("NO_COLOR", "1")])),
            "{args:?}"
        );
        assert!(
            !esc(&pipefence_env(&never, &[("CLICOLOR_FORCE", "1")])),
            "{args:?}"
        );
        // Auto on a pipe: plain.
        assert!(!esc(&pipefence_env(args, &[])), "{args:?} auto on a pipe");
        assert!(
            esc(&pipefence_env(args, &[("CLICOLOR_FORCE", "1")])),
            "{args:?}"
        );
        let off = pipefence_env(args, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
        assert!(!esc(&off), "{args:?}: NO_COLOR=1 in auto mode");
        // An empty NO_COLOR is not set.
        let empty = pipefence_env(args, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "")]);
        assert!(esc(&empty), "{args:?}: NO_COLOR empty");
        // The text is the same without the escapes.
        let plain = String::from_utf8_lossy(&pipefence_env(&never, &[]).stderr).to_string();
        let colored = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(strip_ansi(&colored), plain, "{args:?}");
    }
    let _ = std::fs::remove_file(&bad);
}

/// `text` without its ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The progress-off-a-pipe test: with stderr on a pipe (as here, or in a log), `check` writes
/// no progress line, no `\r`, and every stream it writes ends with a newline.
#[test]
fn check_progress_stays_off_a_pipe() {
    for args in [
        &[
            "check",
            "tests/scenarios/pfp-indirect-race.kdl",
            "--schedules",
            "300",
        ][..],
        &[
            "check",
            "tests/scenarios/pfp-indirect-race.kdl",
            "--schedules",
            "300",
            "--json",
        ],
        &["check", "examples/async-compute.kdl", "--schedules", "50"],
    ] {
        let out = pipefence(args);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}");
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains('\r'), "{args:?}: \\r on {stream}: {text:?}");
            assert!(
                !text.contains('\u{1b}'),
                "{args:?}: escape on {stream}: {text:?}"
            );
            assert!(
                text.is_empty() || text.ends_with('\n'),
                "{args:?}: {stream} does not end with a newline: {text:?}"
            );
        }
        // The summary is the only thing on stderr with --json, and nothing is without.
        let err = String::from_utf8_lossy(&out.stderr);
        if args.contains(&"--json") {
            assert!(
                err.starts_with("tests/scenarios/pfp-indirect-race.kdl: 300 schedules"),
                "{err}"
            );
        } else {
            assert_eq!(err, "", "{args:?}");
        }
    }
}

/// `check --validate`: hazard reports in every schedule on the deterministic driver without
/// strict mode's weaker GPU, replayed with `run --driver deterministic --validate`; with
/// `--strict` it is a usage error, as for `run`.
#[test]
fn check_validate_reports_hazards_and_replays_with_validate() {
    let out = pipefence(&[
        "check",
        "examples/missing-writeback.kdl",
        "--validate",
        "--schedules",
        "10",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["failing"], 10);
    let f = &v["failures"][0];
    assert_eq!(f["outcome"]["hazards"][0]["kind"], "unreleased-read");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "run examples/missing-writeback.kdl --driver deterministic --validate --seed 0`"
        ),
        "{err}"
    );
    // The replay gives the same hazard.
    let seed = f["seed"].as_u64().unwrap().to_string();
    let r = json(&pipefence(&[
        "run",
        "examples/missing-writeback.kdl",
        "--driver",
        "deterministic",
        "--validate",
        "--seed",
        &seed,
        "--json",
    ]));
    assert_eq!(r["hazards"], f["outcome"]["hazards"]);
    // Without --validate the values happen to be right on every schedule: no failure.
    let out = pipefence(&[
        "check",
        "examples/missing-writeback.kdl",
        "--schedules",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = pipefence(&[
        "check",
        "examples/async-compute.kdl",
        "--validate",
        "--schedules",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let both = pipefence(&[
        "check",
        "examples/async-compute.kdl",
        "--strict",
        "--validate",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("--strict already reports hazards"), "{err}");
}

/// `check --fail-fast` stops at the first failing schedule and reports it.
#[test]
fn check_fail_fast_stops_at_the_first_failing_schedule() {
    let all = json(&pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--schedules",
        "200",
        "--json",
    ]));
    let first = all["failures"][0]["seed"].as_u64().unwrap();
    let out = pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--schedules",
        "200",
        "--fail-fast",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["schedules"], first + 1);
    assert_eq!(v["failing"], 1);
    assert_eq!(v["failures"][0]["seed"], first);
    assert_eq!(v["failures"][0]["outcome"], all["failures"][0]["outcome"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{} of 200 schedules (--fail-fast: stopped at the first failing one)",
            first + 1
        )),
        "{err}"
    );
    // Nothing fails: every schedule runs.
    let v = json(&pipefence(&[
        "check",
        "examples/async-compute.kdl",
        "--schedules",
        "20",
        "--fail-fast",
        "--json",
    ]));
    assert_eq!(v["schedules"], 20);
}

/// `check --timeline DIR --trace DIR` writes DIR/seed-N.svg and DIR/seed-N.json for the first
/// seed of each failing outcome, the same bytes `run --seed N` writes; a passing check writes
/// none, and a DIR that cannot be a directory is a usage error before anything runs.
#[test]
fn check_timeline_and_trace_dirs_hold_each_failing_seed() {
    let dir = std::env::temp_dir().join(format!("pipefence-cli-dirs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pics = dir.join("pics");
    let p = pics.to_str().unwrap();
    let out = pipefence(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--schedules",
        "50",
        "--timeline",
        p,
        "--trace",
        p,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let mut seeds: Vec<u64> = v["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["seed"].as_u64().unwrap())
        .collect();
    seeds.sort_unstable();
    let mut names: Vec<String> = std::fs::read_dir(&pics)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = seeds
        .iter()
        .flat_map(|s| [format!("seed-{s}.json"), format!("seed-{s}.svg")])
        .collect();
    want.sort();
    assert_eq!(names, want);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("timeline: {p}/seed-{}.svg", seeds[0])),
        "{err}"
    );
    let s = seeds[0].to_string();
    let svg = dir.join("run.svg");
    let trace = dir.join("run.json");
    let r = pipefence(&[
        "run",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--driver",
        "deterministic",
        "--seed",
        &s,
        "--timeline",
        svg.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    assert_eq!(read(svg), read(pics.join(format!("seed-{s}.svg"))));
    assert_eq!(read(trace), read(pics.join(format!("seed-{s}.json"))));

    let clean = dir.join("clean");
    let out = pipefence(&[
        "check",
        "examples/async-compute.kdl",
        "--schedules",
        "10",
        "--timeline",
        clean.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_dir(&clean).unwrap().count(), 0);

    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = pipefence(&[
        "check",
        "examples/async-compute.kdl",
        "--trace",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace"));
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Replay hints name a program that runs where the user is: `pipefence` when PATH finds this
/// binary, the binary's own path when neither PATH nor a checkout around the current
/// directory leads to it.
#[test]
fn replay_hints_name_a_program_that_runs_here() {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_pipefence")).unwrap();
    let race = std::fs::canonicalize(root().join("tests/scenarios/pfp-indirect-race.kdl")).unwrap();
    let race = race.to_str().unwrap();
    let hint = |path: &std::ffi::OsStr| {
        let mut cmd = Command::new(&exe);
        cmd.args(["check", race, "--schedules", "5"])
            .current_dir(std::env::temp_dir())
            .env("PATH", path);
        let out = output_within(cmd, 300);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let on_path = hint(exe.parent().unwrap().as_os_str());
    assert!(
        on_path.contains(&format!(
            "replay with `pipefence run {race} --driver deterministic --seed "
        )),
        "{on_path}"
    );
    let elsewhere = hint(std::ffi::OsStr::new("/nonexistent"));
    assert!(
        elsewhere.contains(&format!(
            "replay with `{} run {race} --driver deterministic --seed ",
            exe.display()
        )) || exe.to_str().is_none_or(|e| e.contains(' ')),
        "{elsewhere}"
    );
}

/// Completions and the man page come from the command line's own definition.
#[test]
fn completions_and_man_page_are_generated_from_the_command_line() {
    let out = pipefence(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let bash = String::from_utf8_lossy(&out.stdout);
    assert!(
        bash.contains("check") && bash.contains("--strict"),
        "{bash}"
    );
    assert!(
        bash.contains("--fail-fast") && bash.contains("completions"),
        "{bash}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = pipefence(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--strict"),
            "{shell}"
        );
    }
    assert_eq!(
        pipefence(&["completions", "frobnicate"]).status.code(),
        Some(2)
    );
    let out = pipefence(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let man = String::from_utf8_lossy(&out.stdout);
    assert!(man.contains(".SH NAME\npipefence"), "{man}");
    assert!(
        man.contains(".SH SUBCOMMANDS") && man.contains("check"),
        "{man}"
    );
    let out = pipefence(&["man", "check"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".SH NAME\npipefence\\-check"), "{page}");
    assert!(page.contains("\\-\\-fail\\-fast"), "{page}");
    assert!(
        page.contains(&format!("\"pipefence {}\"", env!("CARGO_PKG_VERSION"))),
        "{page}"
    );
    assert_eq!(pipefence(&["man", "frobnicate"]).status.code(), Some(2));
}

#[test]
fn e3_a_file_of_garbage_at_the_size_limit_exits_2_with_its_errors_located() {
    let dir = std::env::temp_dir().join(format!("pipefence-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("garbage.kdl");
    std::fs::write(
        &file,
        format!("device\n{}", "(t)=".repeat((4 << 20) / 4 - 4)),
    )
    .unwrap();
    let out = pipefence(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let located = stderr
        .lines()
        .filter(|l| l.contains("garbage.kdl:2:"))
        .count();
    assert_eq!(located, 51, "{}", &stderr[..stderr.len().min(2000)]);
    assert!(
        stderr.contains("more errors from here on (only the first 50 are shown)"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// D7: a page fault's report says it once (the classification is not repeated after the
/// reason), how far past its buffer the access was, and that the queue faulted in the command
/// (not that it is stuck in it, nor that it completed it), at FILE:LINE:COLUMN.
#[test]
fn d7_page_fault_report_says_where_the_access_was_and_does_not_repeat_itself() {
    let out = pipefence(&[
        "run",
        "tests/scenarios/page-fault.kdl",
        "--driver",
        "deterministic",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "error[page-fault]: device removed (0x887A0006): dispatch write 0x100000100 \
             (unmapped), just past the end of `small` (size 256)"
        ),
        "{text}"
    );
    let title = text.lines().find(|l| l.starts_with("error[")).unwrap_or("");
    assert_eq!(title.matches("page-fault").count(), 1, "{title}");
    assert!(
        text.contains(
            "queue q [page-fault] faulted in list l, command 2 (dispatch) at \
             tests/scenarios/page-fault.kdl:7:5"
        ),
        "{text}"
    );
    assert!(!text.contains("stuck in"), "{text}");
    assert!(
        !text.contains("last completed: queue q, list l, command 2"),
        "{text}"
    );
    assert!(text.contains("commands processed"), "{text}");
}

/// `check` at scale: 100 failing schedules in a few ways print each distinct problem once
/// (the stale-cache hazard, whatever value each schedule read; the expectation, with its most
/// frequent results), with counts and first seeds, instead of one long line per outcome.
#[test]
fn check_prints_each_distinct_problem_once_with_its_count() {
    let out = pipefence(&["check", "tests/scenarios/stale-cache.kdl", "--strict"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("error[stale-cache]").count(), 1, "{text}");
    assert_eq!(
        text.matches("error: expectation failed").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("2 distinct problems in the 100 failing schedules"),
        "{text}"
    );
    assert!(
        text.contains(
            "problem 1 of 2: in 100 of 100 failing schedules (seeds 0 1 2 3 4 5 6 7 ...)"
        ),
        "{text}"
    );
    assert!(text.contains("= note: found: got "), "{text}");
    // Both accesses at FILE:LINE:COLUMN.
    for at in [
        "tests/scenarios/stale-cache.kdl:27:5",
        "tests/scenarios/stale-cache.kdl:31:5",
    ] {
        assert!(text.contains(at), "{at}: {text}");
    }
    // No line is as long as the old one-line reports.
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 200, "{longest}: {text}");
    // The JSON has the same problems.
    let out = pipefence(&[
        "check",
        "tests/scenarios/stale-cache.kdl",
        "--strict",
        "--json",
    ]);
    let v = json(&out);
    let problems = v["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 2, "{v}");
    assert_eq!(problems[0]["kind"], "hazard");
    assert_eq!(problems[0]["count"], 100);
    assert_eq!(problems[1]["kind"], "expectation");
    let variants: u64 = problems[1]["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|r| r["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(Some(variants), problems[1]["count"].as_u64());
    for f in v["failures"].as_array().expect("failures") {
        assert!(
            f["problems"].as_array().is_some_and(|p| !p.is_empty()),
            "{f}"
        );
    }
}

/// A reader that closes the pipe before the report is written (`pipefence check ... --json |
/// head -c 10`) ends the process by SIGPIPE, as it ends `cat`: no panic about a failed print
/// (E3). The pipe is closed before the child writes anything, so every write of it fails.
#[cfg(unix)]
#[test]
fn e3_a_closed_stdout_ends_the_process_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    for args in [
        &[
            "check",
            "tests/scenarios/write-write.kdl",
            "--exhaustive",
            "--json",
        ][..],
        &[
            "check",
            "tests/scenarios/write-write.kdl",
            "--schedules",
            "20",
        ][..],
        &["run", "examples/ring-buffer.kdl", "--json"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pipefence"))
            .args(args)
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pipefence");
        drop(child.stdout.take());
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        let status = child.wait().expect("pipefence ends");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            status.signal() == Some(13) || status.code().is_some_and(|c| c < 100),
            "{args:?}: {status:?} {err}"
        );
    }
}
