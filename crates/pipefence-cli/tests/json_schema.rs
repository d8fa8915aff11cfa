//! The `--json` outputs of `run` and `check` against their published schemas
//! (`docs/run.schema.json`, `docs/check.schema.json`): the real output of every example and
//! every race scenario on the threaded driver, the deterministic driver and in strict mode, of
//! `check` (plain and strict), of invalid and unreadable files, of wrong command lines, and of
//! small scenarios that produce the rarer shapes (a page fault, a requested removal, a
//! timed-out host wait) must validate; real outputs with a field misspelled, missing, added or of the wrong type must not.

use jsonschema::{Registry, Validator};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The base URI the check schema is built at; `run.schema.json` is registered next to it, so
/// its relative references resolve as they do for files side by side in `docs/`.
const CHECK_URI: &str = "file:///pipefence/docs/check.schema.json";
const RUN_URI: &str = "file:///pipefence/docs/run.schema.json";

fn schema(name: &str) -> Value {
    let path = root().join("docs").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

/// The validators of `run --json` and `check --json`.
fn validators() -> (Validator, Validator) {
    let run_schema = schema("run.schema.json");
    let run = jsonschema::options()
        .build(&run_schema)
        .unwrap_or_else(|e| panic!("run.schema.json: {e}"));
    let registry = Registry::new()
        .add(RUN_URI, run_schema)
        .and_then(|r| r.prepare())
        .unwrap_or_else(|e| panic!("registry: {e}"));
    let check = jsonschema::options()
        .with_registry(&registry)
        .with_base_uri(CHECK_URI)
        .build(&schema("check.schema.json"))
        .unwrap_or_else(|e| panic!("check.schema.json: {e}"));
    (run, check)
}

/// Runs the binary; returns its stdout as JSON and its exit status.
fn pipefence(args: &[String]) -> (Value, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_pipefence"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run pipefence");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

/// Every scenario file of `examples/` and `tests/scenarios/`, relative to the root.
fn scenario_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["examples", "tests/scenarios"] {
        for e in std::fs::read_dir(root().join(dir)).expect("read scenario dir") {
            let name = e.expect("dir entry").file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".kdl") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 20, "{} scenario files", files.len());
    files
}

/// Small scenarios for the shapes the examples do not produce: a page fault (a `fault`
/// object), a requested removal (no classification), a host wait that times out, a run that
/// expects a removal that does not come.
const EXTRA: [(&str, &str); 4] = [
    (
        "page-fault.kdl",
        "buffer up size=64 heap=upload\nqueue gfx kind=direct\nlist l kind=direct {\n    \
         write-value32-bop up value=1\n}\nexecute gfx l\nwait-idle\n",
    ),
    (
        "requested.kdl",
        "fence f\nqueue q kind=compute\nwait q f 1\nremove-device\nexpect-fence f equals=1\n",
    ),
    (
        "timeout.kdl",
        "fence f\ncpu-wait f 1 timeout-ms=50\nexpect-fence f equals=0\n",
    ),
    (
        "not-removed.kdl",
        "expect-removed reason=hung\nfence f\ncpu-signal f 1\n",
    ),
];

/// A directory of its own for this test's files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipefence-json-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Runs every command line (a few at a time) and returns the outputs in order.
fn run_all(commands: &[Vec<String>]) -> Vec<(Value, i32)> {
    let chunks: Vec<&[Vec<String>]> = commands.chunks(commands.len().div_ceil(4)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| s.spawn(move || chunk.iter().map(|c| pipefence(c)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("runner thread"))
            .collect()
    })
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Every validation error of `v`, in words.
fn errors(validator: &Validator, v: &Value) -> Vec<String> {
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

#[test]
fn every_real_output_validates_against_its_schema() {
    let (run_v, check_v) = validators();
    let dir = scratch();
    let mut files = scenario_files();
    for (name, text) in EXTRA {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write scenario");
        files.push(path.display().to_string());
    }
    let invalid = dir.join("invalid.kdl");
    std::fs::write(&invalid, "buffer b size=15\nexpect c equals=1\n").expect("write scenario");
    let invalid = invalid.display().to_string();
    let missing = dir.join("missing.kdl").display().to_string();

    let mut runs = Vec::new();
    for f in &files {
        runs.push(args(&["run", f, "--json"]));
        runs.push(args(&[
            "run",
            f,
            "--json",
            "--driver",
            "deterministic",
            "--seed",
            "3",
        ]));
        runs.push(args(&["run", f, "--json", "--strict"]));
    }
    runs.push(args(&[
        "run",
        "examples/missing-writeback.kdl",
        "--json",
        "--validate",
    ]));
    runs.push(args(&["run", &invalid, "--json"]));
    runs.push(args(&["run", &missing, "--json"]));
    runs.push(args(&["run", &missing, "--json", "--sede", "3"]));
    runs.push(args(&[
        "run",
        "examples/deadlock.kdl",
        "--json",
        "--seed",
        "1",
        "--schedule",
        "v1:AA",
    ]));
    let mut checks = Vec::new();
    for f in &files {
        checks.push(args(&["check", f, "--json", "--schedules", "8"]));
        checks.push(args(&[
            "check",
            f,
            "--json",
            "--schedules",
            "8",
            "--seed",
            "100",
            "--strict",
        ]));
        checks.push(args(&[
            "check",
            f,
            "--json",
            "--schedules",
            "8",
            "--shard",
            "1/3",
        ]));
    }
    checks.push(args(&["check", &invalid, "--json"]));
    checks.push(args(&["check", &invalid, "--json", "--jobs", "0"]));
    checks.push(args(&["merge", &missing, "--json"]));
    // Exhaustive reports: proved, failing with shrunk counterexamples, bounded by schedules
    // and by preemptions, strict with hazards, a removal, a shard's.
    let exhaustive: [&[&str]; 7] = [
        &["tests/scenarios/write-write-fixed.kdl"],
        &["tests/scenarios/host-write-race.kdl"],
        &[
            "tests/scenarios/stale-cache.kdl",
            "--strict",
            "--max-schedules",
            "40",
        ],
        &[
            "tests/scenarios/pfp-indirect-race.kdl",
            "--preemption-bound",
            "0",
            "--no-shrink",
        ],
        &[
            "tests/scenarios/page-fault.kdl",
            "--max-schedules",
            "20",
            "--shrink-runs",
            "50",
        ],
        &[
            "tests/scenarios/host-write-race.kdl",
            "--shard",
            "1/2",
            "-j",
            "1",
        ],
        &[
            "tests/scenarios/host-poll-result.kdl",
            "--strict",
            "--no-reduction",
        ],
    ];
    for extra in exhaustive {
        checks.push(args(
            &[&["check", "--exhaustive", "--json"][..], extra].concat(),
        ));
    }

    let run_outputs = run_all(&runs);
    let check_outputs = run_all(&checks);
    let mut bad = Vec::new();
    for (cmd, (v, _)) in runs.iter().zip(&run_outputs) {
        let e = errors(&run_v, v);
        if !e.is_empty() {
            bad.push(format!("{cmd:?}: {e:?}"));
        }
    }
    for (cmd, (v, _)) in checks.iter().zip(&check_outputs) {
        let e = errors(&check_v, v);
        if !e.is_empty() {
            bad.push(format!("{cmd:?}: {e:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "outputs that do not validate:\n{}",
        bad.join("\n")
    );

    // The outputs covered the shapes the schemas describe, not only the common ones.
    let outcomes: Vec<&Value> = run_outputs
        .iter()
        .map(|(v, _)| v)
        .chain(check_outputs.iter().flat_map(|(v, _)| {
            v["failures"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| &f["outcome"])
        }))
        .collect();
    let any = |f: &dyn Fn(&Value) -> bool| outcomes.iter().any(|v| f(v));
    for status in ["passed", "failed", "removed", "invalid", "usage"] {
        assert!(
            any(&|v| v["status"] == status),
            "no output with status {status}"
        );
    }
    assert!(
        any(&|v| v["hazards"].as_array().is_some_and(|h| !h.is_empty())),
        "no hazard"
    );
    assert!(
        any(&|v| v["hazards"][0]["via"].is_object()),
        "no hazard with a via"
    );
    assert!(
        any(&|v| v["host_errors"].as_array().is_some_and(|h| !h.is_empty())),
        "no host error"
    );
    assert!(any(&|v| v["removed"]["fault"].is_object()), "no fault");
    assert!(
        any(&|v| v["removed"]["cycle"]
            .as_array()
            .is_some_and(|c| !c.is_empty())),
        "no cycle"
    );
    assert!(
        any(&|v| v["removed"]["reason"] == "requested"),
        "no requested removal"
    );
    assert!(
        any(&|v| v["expectations"][0]["passed"].is_null()),
        "no unreached expectation"
    );
    assert!(any(&|v| v["errors"][0]["line"] == 0), "no unreadable file");
    assert!(
        check_outputs.iter().any(|(v, _)| v["status"] == "usage"),
        "no usage error of check or merge"
    );
    assert!(
        check_outputs
            .iter()
            .any(|(v, _)| v["failures"].as_array().is_some_and(|f| !f.is_empty())),
        "no failing check"
    );
    let exhaustive_outputs: Vec<&Value> = check_outputs
        .iter()
        .map(|(v, _)| v)
        .filter(|v| v["mode"] == "exhaustive")
        .collect();
    let any_ex = |f: &dyn Fn(&Value) -> bool| exhaustive_outputs.iter().any(|v| f(v));
    assert!(any_ex(&|v| v["complete"] == true), "no proof");
    assert!(any_ex(&|v| v["bound"].is_string()), "no bounded search");
    assert!(
        any_ex(&|v| v["failures"][0]["shrunk"]["steps"][0]["ran"]["line"].is_u64()),
        "no shrunk counterexample with a decisive step"
    );
    assert!(any_ex(&|v| v["merge"]["options"].is_object()), "no shard");
    assert!(
        any_ex(&|v| v["failures"][0]["status"] == "removed"),
        "no removal"
    );
    eprintln!(
        "validated {} run outputs and {} check outputs",
        run_outputs.len(),
        check_outputs.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `v` with the value at `path` (object keys and array indices) changed by `f`.
fn mutate(v: &Value, path: &[&str], f: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut v = v.clone();
    let mut at = &mut v;
    for p in path {
        at = match p.parse::<usize>() {
            Ok(i) => &mut at[i],
            Err(_) => &mut at[*p],
        };
    }
    f(at.as_object_mut()
        .unwrap_or_else(|| panic!("{path:?} is not an object")));
    v
}

fn rename(key: &'static str, to: &'static str) -> impl FnOnce(&mut serde_json::Map<String, Value>) {
    move |m| {
        let x = m.remove(key).unwrap_or_else(|| panic!("no field {key}"));
        m.insert(to.to_string(), x);
    }
}

fn remove(key: &'static str) -> impl FnOnce(&mut serde_json::Map<String, Value>) {
    move |m| {
        m.remove(key).unwrap_or_else(|| panic!("no field {key}"));
    }
}

fn set(key: &'static str, x: Value) -> impl FnOnce(&mut serde_json::Map<String, Value>) {
    move |m| {
        m.insert(key.to_string(), x);
    }
}

#[test]
fn misspelled_missing_extra_and_mistyped_fields_are_rejected() {
    let (run_v, check_v) = validators();
    let (hazard, _) = pipefence(&args(&[
        "run",
        "examples/missing-writeback.kdl",
        "--json",
        "--strict",
    ]));
    let (removed, _) = pipefence(&args(&[
        "run",
        "examples/deadlock.kdl",
        "--json",
        "--driver",
        "deterministic",
    ]));
    let (check, _) = pipefence(&args(&[
        "check",
        "tests/scenarios/pfp-indirect-race.kdl",
        "--json",
        "--schedules",
        "8",
    ]));
    let (exhaustive, _) = pipefence(&args(&[
        "check",
        "tests/scenarios/host-write-race.kdl",
        "--exhaustive",
        "--json",
    ]));
    for (v, validator) in [
        (&hazard, &run_v),
        (&removed, &run_v),
        (&check, &check_v),
        (&exhaustive, &check_v),
    ] {
        assert!(
            validator.is_valid(v),
            "the unmutated output must validate: {v}"
        );
    }
    let cases: Vec<(&str, Value, &Validator)> = vec![
        (
            "exhaustive: misspelled sleep_blocked",
            mutate(&exhaustive, &[], rename("sleep_blocked", "sleep_block")),
            &check_v,
        ),
        (
            "exhaustive: missing complete",
            mutate(&exhaustive, &[], remove("complete")),
            &check_v,
        ),
        (
            "exhaustive: unknown mode",
            mutate(&exhaustive, &[], set("mode", "exhaustiv".into())),
            &check_v,
        ),
        (
            "exhaustive: a replay that is not a schedule string",
            mutate(
                &exhaustive,
                &["failures", "0"],
                set("replay", "seed 3".into()),
            ),
            &check_v,
        ),
        (
            "exhaustive: fewest not a bool",
            mutate(
                &exhaustive,
                &["failures", "0", "shrunk"],
                set("fewest", "yes".into()),
            ),
            &check_v,
        ),
        (
            "exhaustive: decisive step without its text",
            mutate(
                &exhaustive,
                &["failures", "0", "shrunk", "steps", "0"],
                remove("text"),
            ),
            &check_v,
        ),
        (
            "misspelled top-level field",
            mutate(&hazard, &[], rename("expectations", "expectation")),
            &run_v,
        ),
        (
            "missing elapsed_ns",
            mutate(&hazard, &[], remove("elapsed_ns")),
            &run_v,
        ),
        (
            "missing queues",
            mutate(&hazard, &[], remove("queues")),
            &run_v,
        ),
        (
            "missing host_errors",
            mutate(&hazard, &[], remove("host_errors")),
            &run_v,
        ),
        (
            "unknown top-level field",
            mutate(&hazard, &[], set("extra", Value::Null)),
            &run_v,
        ),
        (
            "misspelled status",
            mutate(&hazard, &[], set("status", "fail".into())),
            &run_v,
        ),
        (
            "misspelled hazard field",
            mutate(&hazard, &["hazards", "0"], rename("fix", "fx")),
            &run_v,
        ),
        (
            "missing hazard access field",
            mutate(&hazard, &["hazards", "0", "first"], remove("agent")),
            &run_v,
        ),
        (
            "unknown hazard kind",
            mutate(&hazard, &["hazards", "0"], set("kind", "race".into())),
            &run_v,
        ),
        (
            "queue summary as string",
            mutate(&hazard, &["queues", "0"], set("commands", "3".into())),
            &run_v,
        ),
        (
            "negative fence value",
            mutate(&hazard, &["fences"], set("done", (-1).into())),
            &run_v,
        ),
        (
            "misspelled removal field",
            mutate(&removed, &["removed"], rename("cycle", "cycles")),
            &run_v,
        ),
        (
            "missing removal queue field",
            mutate(&removed, &["removed", "queues", "0"], remove("waiting_for")),
            &run_v,
        ),
        (
            "unknown removal queue field",
            mutate(
                &removed,
                &["removed", "queues", "0"],
                set("blocked", true.into()),
            ),
            &run_v,
        ),
        (
            "unknown classification",
            mutate(
                &removed,
                &["removed"],
                set("classification", "livelock".into()),
            ),
            &run_v,
        ),
        (
            "missing check field",
            mutate(&check, &[], remove("other_seeds")),
            &check_v,
        ),
        (
            "misspelled check field",
            mutate(&check, &[], rename("failing", "failed")),
            &check_v,
        ),
        (
            "missing passed_expectations",
            mutate(&check, &["failures", "0"], remove("passed_expectations")),
            &check_v,
        ),
        (
            "misspelled field of a kept outcome",
            mutate(
                &check,
                &["failures", "0", "outcome"],
                rename("fences", "fence"),
            ),
            &check_v,
        ),
        (
            "passed as a failure status",
            mutate(&check, &["failures", "0"], set("status", "passed".into())),
            &check_v,
        ),
        ("a run output as a check output", hazard.clone(), &check_v),
    ];
    for (what, v, validator) in cases {
        assert!(!validator.is_valid(&v), "{what}: accepted by the schema");
    }
}

#[test]
fn schemas_document_every_property() {
    fn walk(v: &Value, at: &str, missing: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Object(props)) = m.get("properties") {
                    for (k, p) in props {
                        if p.get("description").is_none() {
                            missing.push(format!("{at}/properties/{k}"));
                        }
                    }
                }
                for (k, x) in m {
                    walk(x, &format!("{at}/{k}"), missing);
                }
            }
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, &format!("{at}/{i}"), missing)),
            _ => {}
        }
    }
    for name in ["run.schema.json", "check.schema.json"] {
        let mut missing = Vec::new();
        walk(&schema(name), "#", &mut missing);
        assert!(
            missing.is_empty(),
            "{name}: properties without a description: {missing:?}"
        );
        let s = schema(name);
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        assert!(Path::new(&root().join("docs").join(name)).exists());
    }
}
