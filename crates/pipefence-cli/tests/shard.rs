//! `pipefence check --shard I/N` (and the shard from Bazel's or Kubernetes' environment),
//! `pipefence merge`, and `check -j N`, on the real binary: merged shards are the unsharded
//! check, and the number of threads changes nothing but the elapsed time.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The environment variables that choose a shard: removed from every command unless a test
/// sets them.
const SHARD_ENV: [&str; 5] = [
    "TEST_SHARD_INDEX",
    "TEST_TOTAL_SHARDS",
    "TEST_SHARD_STATUS_FILE",
    "JOB_COMPLETION_INDEX",
    "PIPEFENCE_TOTAL_SHARDS",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pipefence_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipefence"));
    cmd.args(args).current_dir(root());
    for k in SHARD_ENV {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run pipefence")
}

fn pipefence(args: &[&str]) -> Output {
    pipefence_env(args, &[])
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
            stdout(out),
            stderr(out)
        )
    })
}

/// The output without what depends on time: `elapsed_ns` lines, `in N ms`.
fn timeless(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("\"elapsed_ns\""))
        .map(|l| match l.find(" failing, in ") {
            Some(i) => format!("{} failing, in _ ms", &l[..i]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A directory of this test's own, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipefence-shard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Runs every shard of `total` with `args` (a `check` command line) and writes each one's
/// --json report into `dir`; returns the files.
fn run_shards(dir: &Path, args: &[&str], total: u64) -> Vec<PathBuf> {
    (0..total)
        .map(|i| {
            let shard = format!("{i}/{total}");
            let out = pipefence(&[args, &["--json", "--shard", &shard]].concat());
            assert!(
                matches!(out.status.code(), Some(0 | 1 | 3)),
                "shard {shard}: {}",
                stderr(&out)
            );
            let v = json(&out);
            assert_eq!(v["shard"]["index"], i);
            assert_eq!(v["shard"]["total"], total);
            let file = dir.join(format!("shard-{i}-of-{total}.json"));
            std::fs::write(&file, &out.stdout).expect("write a shard's report");
            file
        })
        .collect()
}

fn merge(files: &[PathBuf], extra: &[&str]) -> Output {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(names.iter().map(String::as_str));
    args.extend(extra);
    pipefence(&args)
}

const FAILING: &str = "tests/scenarios/top-of-pipe-flag.kdl";
const PASSING: &str = "examples/ring-buffer.kdl";

#[test]
fn merged_shards_are_the_unsharded_check_for_1_2_3_and_7_shards() {
    let dir = scratch("merged");
    for (file, code) in [(FAILING, 1), (PASSING, 0)] {
        let args = ["check", file, "--schedules", "90", "--seed", "5"];
        let whole = pipefence(&[&args[..], &["--json"]].concat());
        assert_eq!(whole.status.code(), Some(code), "{}", stderr(&whole));
        let whole_text = pipefence(&args);
        if file == FAILING {
            let v = json(&whole);
            assert!(v["failures"].as_array().unwrap().len() >= 5, "{v}");
        }
        for total in [1, 2, 3, 7] {
            let mut files = run_shards(&dir, &args, total);
            files.reverse(); // the order given does not matter
            let merged = merge(&files, &["--json"]);
            assert_eq!(merged.status.code(), Some(code), "{}", stderr(&merged));
            assert_eq!(
                timeless(&stdout(&merged)),
                timeless(&stdout(&whole)),
                "{file}, {total} shards: --json"
            );
            let merged = merge(&files, &[]);
            assert_eq!(merged.status.code(), Some(code));
            assert_eq!(
                timeless(&stdout(&merged)),
                timeless(&stdout(&whole_text)),
                "{file}, {total} shards: the summary"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merged_problems_and_their_diagnostics_are_the_unsharded_checks() {
    // Several problems, expectations with several results (variants), hazards found by strict
    // mode and by validation.
    let dir = scratch("problems");
    for (file, flag) in [
        ("examples/missing-writeback.kdl", "--strict"),
        ("tests/scenarios/pfp-indirect-race.kdl", "--validate"),
        ("tests/scenarios/stale-cache.kdl", "--strict"),
    ] {
        let args = ["check", file, flag, "--schedules", "60", "--seed", "2"];
        let whole = pipefence(&[&args[..], &["--json"]].concat());
        let v = json(&whole);
        assert!(v["problems"].as_array().unwrap().len() >= 2, "{file}: {v}");
        let whole_text = pipefence(&args);
        assert!(
            stdout(&whole_text).contains("distinct problem"),
            "{}",
            stdout(&whole_text)
        );
        for total in [2, 3, 7] {
            let files = run_shards(&dir, &args, total);
            let merged = merge(&files, &["--json"]);
            assert_eq!(
                timeless(&stdout(&merged)),
                timeless(&stdout(&whole)),
                "{file} {flag}, {total} shards: --json"
            );
            let merged = merge(&files, &[]);
            assert_eq!(
                timeless(&stdout(&merged)),
                timeless(&stdout(&whole_text)),
                "{file} {flag}, {total} shards: the summary"
            );
            assert!(stderr(&merged).is_empty(), "{}", stderr(&merged));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A shard keeps at most 8 results of a failed expectation and counts the rest among its other
/// results, so a result another shard lists has a merged count that may be short of the
/// unsharded one: the merge marks those counts `at_least` (`in at least N schedules`); every
/// count it does not mark is the unsharded check's.
#[test]
fn merged_counts_of_results_a_shard_left_out_are_marked_lower_bounds() {
    let dir = scratch("variants");
    let args = [
        "check",
        "examples/missing-writeback.kdl",
        "--strict",
        "--schedules",
        "1000",
        "--seed",
        "17",
    ];
    let whole = json(&pipefence(&[&args[..], &["--json"]].concat()));
    let files = run_shards(&dir, &args, 2);
    let merged = json(&merge(&files, &["--json"]));
    let results = |v: &Value| -> Vec<(String, u64, bool)> {
        v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["variants"].as_array().unwrap().iter())
            .map(|r| {
                (
                    r["what"].as_str().unwrap().to_string(),
                    r["count"].as_u64().unwrap(),
                    r["at_least"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    let unsharded = results(&whole);
    assert!(unsharded.iter().all(|r| !r.2), "only a merge marks counts");
    let mut marked = 0;
    for (what, count, at_least) in results(&merged) {
        let Some(&(_, exact, _)) = unsharded.iter().find(|r| r.0 == what) else {
            continue;
        };
        if at_least {
            marked += 1;
            assert!(count <= exact, "{what}: {count} > {exact}");
        } else {
            assert_eq!(count, exact, "{what}");
        }
    }
    assert!(marked > 0, "{merged}");
    let text = stdout(&merge(&files, &[]));
    assert!(text.contains(" in at least "), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_without_the_scenario_file_says_so_and_prints_problems_by_their_words() {
    let dir = scratch("moved");
    let file = dir.join("flag.kdl");
    std::fs::copy(root().join(FAILING), &file).expect("copy the scenario");
    let name = file.display().to_string();
    let args = ["check", name.as_str(), "--schedules", "20"];
    let whole_text = pipefence(&args);
    let files = run_shards(&dir, &args, 2);
    // The file changed since the shards ran: its hash differs.
    let mut text = std::fs::read_to_string(&file).expect("read the copy");
    text.push_str("\n// changed\n");
    std::fs::write(&file, text).expect("change the copy");
    let merged = merge(&files, &[]);
    assert_eq!(merged.status.code(), whole_text.status.code());
    assert!(
        stderr(&merged).contains("is not the file the shards checked"),
        "{}",
        stderr(&merged)
    );
    let out = stdout(&merged);
    let first = |t: &str| t.lines().next().map(timeless).unwrap_or_default();
    assert_eq!(first(&out), first(&stdout(&whole_text)));
    assert!(
        out.contains("line ") && out.contains("= problem 1 of 1"),
        "{out}"
    );
    assert!(out.contains("failing schedules by problem"), "{out}");
    // Gone: the same, saying it cannot be read.
    std::fs::remove_file(&file).expect("remove the copy");
    let merged = merge(&files, &[]);
    assert!(
        stderr(&merged).contains("cannot read the scenario file"),
        "{}",
        stderr(&merged)
    );
    assert_eq!(stdout(&merged), out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merged_fail_fast_shards_stop_at_the_lowest_failing_seed_as_the_unsharded_check() {
    let dir = scratch("fail-fast");
    let args = ["check", FAILING, "--schedules", "60", "--fail-fast"];
    let whole = pipefence(&[&args[..], &["--json"]].concat());
    assert_eq!(whole.status.code(), Some(1));
    assert_eq!(json(&whole)["failing"], 1);
    for total in [2, 7] {
        let files = run_shards(&dir, &args, total);
        let merged = merge(&files, &["--json"]);
        assert_eq!(merged.status.code(), Some(1), "{}", stderr(&merged));
        assert_eq!(timeless(&stdout(&merged)), timeless(&stdout(&whole)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A shard, and merged shards, that `--max-schedules` cut say that the shards' units may hold
/// more schedules than the unsharded search, and to raise the bound for a proof; a complete
/// shard says nothing of it.
#[test]
fn shards_cut_by_max_schedules_say_to_raise_it() {
    let dir = scratch("cut");
    let note = "each shard stops at its --max-schedules";
    let args = [
        "check",
        "tests/scenarios/write-write.kdl",
        "--exhaustive",
        "--no-shrink",
        "--max-schedules",
        "2",
    ];
    let files = run_shards(&dir, &args, 2);
    let out = merge(&files, &[]);
    assert!(stdout(&out).contains(note), "{}", stdout(&out));
    let one = pipefence(&[&args[..], &["--shard", "0/2"]].concat());
    assert!(stdout(&one).contains(note), "{}", stdout(&one));
    let whole = pipefence(&[&args[..4], &["--shard", "0/2"]].concat());
    assert!(
        stdout(&whole).contains("every schedule explored") && !stdout(&whole).contains(note),
        "{}",
        stdout(&whole)
    );
}

#[test]
fn more_shards_than_schedules_leave_some_empty_and_merge_all_the_same() {
    let dir = scratch("empty");
    let args = ["check", FAILING, "--schedules", "3"];
    let whole = pipefence(&[&args[..], &["--json"]].concat());
    let files = run_shards(&dir, &args, 5);
    let empty: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
        .filter(|v: &Value| v["schedules"] == 0)
        .collect();
    assert_eq!(empty.len(), 2, "3 schedules over 5 shards");
    let merged = merge(&files, &["--json"]);
    assert_eq!(timeless(&stdout(&merged)), timeless(&stdout(&whole)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn jobs_1_2_and_3_give_the_same_report_human_and_json() {
    for extra in [&[][..], &["--fail-fast"][..], &["--strict"][..]] {
        let base = [&["check", FAILING, "--schedules", "80"][..], extra].concat();
        let outputs: Vec<(String, String)> = ["1", "2", "3"]
            .iter()
            .map(|j| {
                let text = pipefence(&[&base[..], &["-j", j]].concat());
                let js = pipefence(&[&base[..], &["--jobs", j, "--json"]].concat());
                assert_eq!(text.status.code(), js.status.code());
                (timeless(&stdout(&text)), timeless(&stdout(&js)))
            })
            .collect();
        if extra.is_empty() {
            let out = pipefence(&[&base[..], &["--json"]].concat());
            let v = json(&out);
            assert!(
                v["failures"].as_array().unwrap().len() >= 3,
                "several failing outcomes: {v}"
            );
        }
        for (j, o) in outputs.iter().enumerate().skip(1) {
            assert_eq!(o, &outputs[0], "-j {} against -j 1 ({extra:?})", j + 1);
        }
    }
}

#[test]
fn bazel_shard_variables_choose_the_shard_and_touch_the_status_file() {
    let dir = scratch("bazel");
    let status = dir.join("status");
    let status_name = status.display().to_string();
    let args = ["check", FAILING, "--schedules", "30", "--json"];
    let by_flag = pipefence(&[&args[..], &["--shard", "1/3"]].concat());
    let by_env = pipefence_env(
        &args,
        &[
            ("TEST_SHARD_INDEX", "1"),
            ("TEST_TOTAL_SHARDS", "3"),
            ("TEST_SHARD_STATUS_FILE", &status_name),
        ],
    );
    assert_eq!(
        by_env.status.code(),
        by_flag.status.code(),
        "{}",
        stderr(&by_env)
    );
    assert_eq!(timeless(&stdout(&by_env)), timeless(&stdout(&by_flag)));
    assert!(status.exists(), "TEST_SHARD_STATUS_FILE is touched");
    // --shard wins over the environment; the status file is Bazel's, touched only for it.
    std::fs::remove_file(&status).unwrap();
    let flag_wins = pipefence_env(
        &[&args[..], &["--shard", "1/3"]].concat(),
        &[
            ("TEST_SHARD_INDEX", "0"),
            ("TEST_TOTAL_SHARDS", "2"),
            ("TEST_SHARD_STATUS_FILE", &status_name),
        ],
    );
    assert_eq!(timeless(&stdout(&flag_wins)), timeless(&stdout(&by_flag)));
    assert!(!status.exists());
    assert!(
        stderr(&flag_wins).contains(
            "--shard 1/3 chooses the shard: TEST_SHARD_INDEX=0 TEST_TOTAL_SHARDS=2 not used"
        ),
        "{}",
        stderr(&flag_wins)
    );
    // Whatever the variables hold: the flag's user chose.
    let invalid = pipefence_env(
        &[&args[..], &["--shard", "1/3"]].concat(),
        &[("TEST_SHARD_INDEX", "x"), ("TEST_TOTAL_SHARDS", "3")],
    );
    assert_eq!(timeless(&stdout(&invalid)), timeless(&stdout(&by_flag)));
    assert!(
        stderr(&invalid).contains("TEST_SHARD_INDEX=x TEST_TOTAL_SHARDS=3 not used"),
        "{}",
        stderr(&invalid)
    );
    // Set but empty: as unset (nothing to touch), not an error.
    let empty = pipefence_env(
        &args,
        &[
            ("TEST_SHARD_INDEX", "1"),
            ("TEST_TOTAL_SHARDS", "3"),
            ("TEST_SHARD_STATUS_FILE", ""),
        ],
    );
    assert_eq!(
        empty.status.code(),
        by_flag.status.code(),
        "{}",
        stderr(&empty)
    );
    assert_eq!(timeless(&stdout(&empty)), timeless(&stdout(&by_flag)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kubernetes_job_completion_index_needs_a_total_from_the_flag_or_the_environment() {
    let args = ["check", FAILING, "--schedules", "30", "--json"];
    let by_flag = pipefence(&[&args[..], &["--shard", "2/4"]].concat());
    let with_flag = pipefence_env(
        &[&args[..], &["--total-shards", "4"]].concat(),
        &[("JOB_COMPLETION_INDEX", "2")],
    );
    let with_env = pipefence_env(
        &args,
        &[
            ("JOB_COMPLETION_INDEX", "2"),
            ("PIPEFENCE_TOTAL_SHARDS", "4"),
        ],
    );
    for out in [&with_flag, &with_env] {
        assert_eq!(out.status.code(), by_flag.status.code(), "{}", stderr(out));
        assert_eq!(timeless(&stdout(out)), timeless(&stdout(&by_flag)));
    }
    // The total alone (no index: not a pod of an indexed job) runs the whole check, and says so.
    let whole = pipefence(&args);
    let total_alone = pipefence_env(&args, &[("PIPEFENCE_TOTAL_SHARDS", "4")]);
    assert_eq!(total_alone.status.code(), whole.status.code());
    assert_eq!(timeless(&stdout(&total_alone)), timeless(&stdout(&whole)));
    assert!(
        stderr(&total_alone).contains(
            "PIPEFENCE_TOTAL_SHARDS=4 is set but JOB_COMPLETION_INDEX is not: running the whole check"
        ),
        "{}",
        stderr(&total_alone)
    );
    let alone = pipefence_env(&args, &[("JOB_COMPLETION_INDEX", "2")]);
    assert_eq!(alone.status.code(), Some(2));
    let e = stderr(&alone);
    assert!(
        e.contains("JOB_COMPLETION_INDEX=2") && e.contains("--total-shards"),
        "{e}"
    );
    // A total without an index is no shard asked for by the flag's user.
    let total_only = pipefence(&[&args[..], &["--total-shards", "4"]].concat());
    assert_eq!(total_only.status.code(), Some(2));
    assert!(stderr(&total_only).contains("needs JOB_COMPLETION_INDEX"));
}

#[test]
fn bad_shards_and_jobs_are_usage_errors_that_name_the_value() {
    let check = |extra: &[&str], env: &[(&str, &str)], says: &[&str]| {
        let out = pipefence_env(
            &[&["check", FAILING, "--schedules", "5"][..], extra].concat(),
            env,
        );
        assert_eq!(out.status.code(), Some(2), "{extra:?} {env:?}");
        let e = stderr(&out);
        for s in says {
            assert!(e.contains(s), "{extra:?} {env:?}: `{s}` not in: {e}");
        }
        assert!(!e.contains("panicked"), "{e}");
    };
    check(
        &["--shard", "3/3"],
        &[],
        &["--shard 3/3: ", "below the total"],
    );
    check(&["--shard", "0/0"], &[], &["0/0", "at least 1"]);
    check(
        &["--shard", "x/2"],
        &[],
        &["`x/2`", "`x` is not a whole number"],
    );
    check(&["--shard", "3/"], &[], &["`3/`", "total is missing"]);
    check(&["--shard", "1"], &[], &["`1`", "INDEX/TOTAL"]);
    check(&["--shard=-1/2"], &[], &["`-1/2`"]);
    check(&["--jobs", "0"], &[], &["--jobs 0"]);
    // Thousands of threads exhaust the process's memory maps, which aborts it (a thread that
    // cannot set up its stack guard): a limit, named.
    check(
        &["--jobs", "100000"],
        &[],
        &["--jobs 100000", "at most 1024"],
    );
    check(&["-j", "many"], &[], &["`many`"]);
    check(
        &[],
        &[("TEST_SHARD_INDEX", "4"), ("TEST_TOTAL_SHARDS", "4")],
        &["TEST_SHARD_INDEX=4", "below the total"],
    );
    check(
        &[],
        &[("TEST_SHARD_INDEX", "one"), ("TEST_TOTAL_SHARDS", "4")],
        &["TEST_SHARD_INDEX=one", "`one`"],
    );
    check(
        &[],
        &[("TEST_SHARD_INDEX", "1")],
        &["TEST_TOTAL_SHARDS is not"],
    );
    check(
        &["--total-shards", "0"],
        &[("JOB_COMPLETION_INDEX", "0")],
        &["0/0", "at least 1"],
    );
    check(
        &[],
        &[
            ("JOB_COMPLETION_INDEX", "1"),
            ("PIPEFENCE_TOTAL_SHARDS", "x"),
        ],
        &["PIPEFENCE_TOTAL_SHARDS=x"],
    );
    check(
        &["--shard", "0/2", "--total-shards", "2"],
        &[],
        &["give one of the two"],
    );
}

/// Exhaustive checks over small scenarios (complete, failing, bounded by preemptions, strict).
const EXHAUSTIVE_CASES: [&[&str]; 5] = [
    &["tests/scenarios/host-write-race.kdl"],
    &["tests/scenarios/write-write.kdl"],
    &[
        "tests/scenarios/pfp-indirect-race.kdl",
        "--preemption-bound",
        "0",
    ],
    &[
        "tests/scenarios/pfp-indirect-race.kdl",
        "--preemption-bound",
        "0",
        "--no-reduction",
    ],
    &["tests/scenarios/host-poll-result.kdl", "--strict"],
];

#[test]
fn x6_exhaustive_jobs_1_2_and_3_give_the_same_report_human_and_json() {
    for case in EXHAUSTIVE_CASES {
        let base = [&["check"][..], case, &["--exhaustive"][..]].concat();
        let outputs: Vec<(String, String)> = ["1", "2", "3"]
            .iter()
            .map(|j| {
                let text = pipefence(&[&base[..], &["-j", j]].concat());
                let js = pipefence(&[&base[..], &["--jobs", j, "--json"]].concat());
                assert_eq!(text.status.code(), js.status.code(), "{}", stderr(&js));
                (timeless(&stdout(&text)), timeless(&stdout(&js)))
            })
            .collect();
        for (j, o) in outputs.iter().enumerate().skip(1) {
            assert_eq!(o, &outputs[0], "-j {} against -j 1 ({case:?})", j + 1);
        }
    }
}

/// The fields of an exhaustive report that merged shards must reproduce. A plain search's
/// shards are its units, so they reproduce it whole: counts, each failing outcome's first
/// replay and its shrunk counterexample. A reduced search without shards is the sequential
/// one (`docs/exploration.md`), its shards explore units: they find the same outcomes and the
/// same failing outcomes, each first met in another schedule. So is a preemption-bounded one
/// with reduction (sleep sets across one actor's actions; `reduced` in its report), whose
/// shards explore the plain bounded search's units (`reduced: false`): `plain` is whether
/// both reports are of plain searches, and `reduced` is compared only then and between
/// reduced searches.
fn exhaustive_verdict(v: &Value, plain: bool, bounded: bool) -> Value {
    let mut failures: Vec<Value> = v["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            let mut o = serde_json::json!({
                "status": f["status"], "exit": f["exit"], "what": f["what"],
            });
            if plain {
                for k in ["replay", "count", "shrunk"] {
                    o[k] = f[k].clone();
                }
            }
            o
        })
        .collect();
    if !plain {
        failures.sort_by_key(|f| f.to_string());
    }
    let mut out = serde_json::json!({ "failures": failures });
    let mut keys = vec!["complete", "bound", "outcomes"];
    if plain || !bounded {
        keys.push("reduced");
    }
    if plain {
        keys.extend([
            "schedules",
            "failing",
            "other_failing",
            "repeated_runs",
            "sleep_blocked",
            "max_choice_points",
        ]);
    }
    for k in keys {
        out[k] = v[k].clone();
    }
    out
}

#[test]
fn x6_merged_exhaustive_shards_are_the_unsharded_check_for_1_2_3_and_7_shards() {
    let dir = scratch("exhaustive-shards");
    for case in EXHAUSTIVE_CASES {
        let base = [&["check"][..], case, &["--exhaustive"][..]].concat();
        let whole = pipefence(&[&base[..], &["--json"]].concat());
        let bounded = case.contains(&"--preemption-bound") && !case.contains(&"--no-reduction");
        let whole_v = json(&whole);
        for total in [1, 2, 3, 7] {
            let files = run_shards(&dir, &base, total);
            let merged = merge(&files, &["--json"]);
            assert_eq!(
                merged.status.code(),
                whole.status.code(),
                "{case:?} in {total} shards: {}",
                stderr(&merged)
            );
            let merged_v = json(&merged);
            let plain = [&whole_v, &merged_v]
                .iter()
                .all(|v| v["reduced"] == Value::Bool(false));
            if bounded {
                // The bounded search with sleep sets runs without shards, the plain one in them.
                assert_eq!(
                    (&whole_v["reduced"], &merged_v["reduced"]),
                    (&Value::Bool(true), &Value::Bool(false)),
                    "{case:?}"
                );
            }
            assert_eq!(
                exhaustive_verdict(&merged_v, plain, bounded),
                exhaustive_verdict(&whole_v, plain, bounded),
                "{case:?} in {total} shards"
            );
        }
    }
    // Bazel's variables shard an exhaustive check too.
    let out = pipefence_env(
        &["check", EXHAUSTIVE_CASES[0][0], "--exhaustive", "--json"],
        &[("TEST_SHARD_INDEX", "1"), ("TEST_TOTAL_SHARDS", "2")],
    );
    assert_eq!(json(&out)["shard"]["index"], 1, "{}", stderr(&out));
    // More shards than units: some have nothing to explore, and say so (not "proved").
    let out = pipefence(&[
        "check",
        EXHAUSTIVE_CASES[0][0],
        "--exhaustive",
        "--shard",
        "998/1000",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("no schedule to explore in this shard"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_refuses_missing_duplicate_and_mixed_shards_naming_the_files() {
    let dir = scratch("refuse");
    let args = ["check", FAILING, "--schedules", "20"];
    let three = run_shards(&dir, &args, 3);
    let refused = |files: &[PathBuf], says: &[&str]| {
        let out = merge(files, &["--json"]);
        assert_eq!(out.status.code(), Some(2), "{files:?}");
        // With --json, the usage object on stdout says the same as stderr.
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
        assert_eq!(v["status"], "usage", "{v}");
        let e = stderr(&out);
        for s in says {
            assert!(e.contains(s), "`{s}` not in: {e}");
            assert!(
                v["errors"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(s)),
                "`{s}` not in: {v}"
            );
        }
    };
    let name = |f: &PathBuf| f.display().to_string();
    refused(&three[..2], &["1 of 3 shards missing: 2/3"]);
    refused(
        &[three[0].clone(), three[1].clone(), three[1].clone()],
        &["both shard 1/3", &name(&three[1])],
    );
    let other_dir = dir.join("two");
    std::fs::create_dir_all(&other_dir).unwrap();
    let two = run_shards(&other_dir, &args, 2);
    refused(
        &[three[0].clone(), two[1].clone()],
        &["one total", &name(&three[0]), &name(&two[1])],
    );
    let options_dir = dir.join("options");
    std::fs::create_dir_all(&options_dir).unwrap();
    let options = run_shards(&options_dir, &["check", FAILING, "--schedules", "21"], 3);
    refused(
        &[three[0].clone(), options[1].clone(), three[2].clone()],
        &["different options", "--schedules 20", "--schedules 21"],
    );
    let file_dir = dir.join("file");
    std::fs::create_dir_all(&file_dir).unwrap();
    let other_file = run_shards(
        &file_dir,
        &[
            "check",
            "tests/scenarios/write-write.kdl",
            "--schedules",
            "20",
        ],
        3,
    );
    refused(
        &[three[0].clone(), three[1].clone(), other_file[2].clone()],
        &["different scenario files", "write-write.kdl"],
    );
    let missing = dir.join("no-such-report.json");
    refused(
        &[three[0].clone(), missing.clone()],
        &[&name(&missing), "cannot read"],
    );
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    refused(
        std::slice::from_ref(&garbage),
        &[&name(&garbage), "not JSON"],
    );
    let unsharded = dir.join("unsharded.json");
    std::fs::write(
        &unsharded,
        pipefence(&[&args[..], &["--json"]].concat()).stdout,
    )
    .unwrap();
    refused(
        std::slice::from_ref(&unsharded),
        &[&name(&unsharded), "no `shard` field"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_of_exhaustive_shards_sums_counts_and_keeps_the_lowest_shards_replay() {
    let dir = scratch("exhaustive");
    let out = pipefence(&[
        "check",
        "tests/scenarios/host-write-race.kdl",
        "--exhaustive",
        "--json",
    ]);
    let v = json(&out);
    assert!(v["failing"].as_u64().unwrap() > 0, "{v}");
    let failures = v["failures"].as_array().unwrap().len();
    assert_eq!(v["complete"], true, "{v}");
    // Two shards as the exhaustive check will print them: the same report with `shard`; the
    // second bounded, with another replay string for the same outcomes.
    let mut a = v.clone();
    a["shard"] = serde_json::json!({"index": 0, "total": 2});
    let mut b = v.clone();
    b["shard"] = serde_json::json!({"index": 1, "total": 2});
    b["complete"] = Value::Bool(false);
    b["bound"] = Value::String("--max-schedules 5".to_string());
    for f in b["failures"].as_array_mut().unwrap() {
        f["replay"] = Value::String("v1:not-the-lowest".to_string());
    }
    let (fa, fb) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&fa, serde_json::to_string_pretty(&a).unwrap()).unwrap();
    std::fs::write(&fb, serde_json::to_string_pretty(&b).unwrap()).unwrap();
    let merged = merge(&[fb.clone(), fa.clone()], &["--json"]);
    assert_eq!(
        merged.status.code(),
        out.status.code(),
        "{}",
        stderr(&merged)
    );
    let m = json(&merged);
    assert_eq!(m["mode"], "exhaustive");
    assert_eq!(m["complete"], false, "one shard was bounded");
    assert_eq!(m["bound"], "--max-schedules 5", "the first bound");
    for k in ["schedules", "failing", "repeated_runs"] {
        assert_eq!(m[k].as_u64(), v[k].as_u64().map(|n| 2 * n), "{k}");
    }
    let mf = m["failures"].as_array().unwrap();
    assert_eq!(mf.len(), failures, "the same outcomes merge");
    for (f, g) in mf.iter().zip(v["failures"].as_array().unwrap()) {
        assert_eq!(f["replay"], g["replay"], "shard 0's replay is kept");
        assert_eq!(f["count"].as_u64(), g["count"].as_u64().map(|n| 2 * n));
        assert_eq!(f["outcome"], g["outcome"]);
    }
    let text = merge(&[fa.clone(), fb.clone()], &[]);
    assert!(stdout(&text).contains("--schedule "), "{}", stdout(&text));
    // The shard's shrunk counterexample, as the check prints it.
    for says in ["1 preemption, the fewest possible", "decisive step 1: "] {
        assert!(stdout(&text).contains(says), "{}", stdout(&text));
    }
    // Shards of exhaustive checks with other options do not merge; the refusal names the
    // options that differ.
    let strictness = |strict: bool, index: u64| {
        let f = dir.join(format!("strict-{strict}-{index}.json"));
        let mut args = vec![
            "check",
            "tests/scenarios/host-write-race.kdl",
            "--exhaustive",
            "--json",
        ];
        if strict {
            args.push("--strict");
        }
        let shard = format!("{index}/2");
        args.extend(["--shard", &shard]);
        std::fs::write(&f, pipefence(&args).stdout).unwrap();
        f
    };
    let out = merge(&[strictness(false, 0), strictness(true, 1)], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("different options (strict: false and true)"),
        "{}",
        stderr(&out)
    );
    // Nor do shards run with and without --fail-fast (each stops at its own first failure
    // with it), nor shards of different files, whose refusal names both.
    let shard_of = |file: &str, extra: &[&str], index: u64| {
        let stem = std::path::Path::new(file)
            .file_stem()
            .unwrap()
            .to_string_lossy();
        let f = dir.join(format!("{stem}{}-{index}.json", extra.join("")));
        let shard = format!("{index}/2");
        let mut args = vec!["check", file, "--exhaustive", "--json", "--shard", &shard];
        args.extend(extra);
        std::fs::write(&f, pipefence(&args).stdout).unwrap();
        f
    };
    let race = "tests/scenarios/host-write-race.kdl";
    let out = merge(
        &[shard_of(race, &[], 0), shard_of(race, &["--fail-fast"], 1)],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("different options (fail_fast: false and true)"),
        "{}",
        stderr(&out)
    );
    let out = merge(
        &[
            shard_of(race, &[], 0),
            shard_of("tests/scenarios/write-write.kdl", &[], 1),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    for says in [
        "different scenario files",
        "host-write-race.kdl",
        "write-write.kdl",
        "fnv1a64:",
    ] {
        assert!(stderr(&out).contains(says), "`{says}`: {}", stderr(&out));
    }
    // An exhaustive shard and a sampled one do not merge.
    let sampled = run_shards(&dir, &["check", FAILING, "--schedules", "4"], 2);
    let out = merge(&[fa.clone(), sampled[1].clone()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("one mode"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
