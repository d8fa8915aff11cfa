//! The C and C++ programs of `tests/programs` (and `examples/cpp`), built with the system
//! compilers (`cc` and `c++`, or `$CC` and `$CXX`) against the static library this test was
//! built with, then run. Warnings are errors; every build and run has a timeout.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `libpipefence_capi.a`: cargo builds the library's static form in the same compiler run as
/// the rlib this test links, into the `deps` directory next to the test executable (and
/// copies it one level up).
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the deps directory");
    let candidates = [
        deps.join("libpipefence_capi.a"),
        deps.parent()
            .map(|p| p.join("libpipefence_capi.a"))
            .unwrap_or_default(),
    ];
    let newest = candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone());
    match newest {
        Some(p) => p,
        None => panic!(
            "libpipefence_capi.a not found next to {} (looked at {candidates:?}); build it with \
             `cargo build -p pipefence-capi`",
            exe.display()
        ),
    }
}

/// Runs `cmd` with its output in `log`, killing it after `timeout`.
fn run(cmd: &mut Command, log: &Path, timeout: Duration) -> (Option<ExitStatus>, String) {
    let out = File::create(log).expect("create the log");
    let err = out.try_clone().expect("clone the log");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            break Some(s);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status, std::fs::read_to_string(log).unwrap_or_default())
}

/// Builds `source` (C for `.c`, C++17 otherwise) into an executable and returns its path.
fn build(source: &Path) -> PathBuf {
    let name = source.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pipefence-capi-programs");
    std::fs::create_dir_all(&dir).expect("create the build directory");
    let exe = dir.join(&name);
    let is_c = source.extension().is_some_and(|e| e == "c");
    let (var, default, std) = if is_c {
        ("CC", "cc", "-std=c99")
    } else {
        ("CXX", "c++", "-std=c++17")
    };
    let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let mut cmd = Command::new(&compiler);
    cmd.arg(std)
        .args(["-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(source)
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe);
    if is_c {
        cmd.arg("-pedantic");
    }
    let (status, log) = run(
        &mut cmd,
        &dir.join(format!("{name}.build.log")),
        BUILD_TIMEOUT,
    );
    match status {
        Some(s) if s.success() => exe,
        Some(s) => panic!("building {} failed ({s}): {cmd:?}\n{log}", source.display()),
        None => panic!(
            "building {} took over {BUILD_TIMEOUT:?}\n{log}",
            source.display()
        ),
    }
}

/// Builds and runs the program at `path` (relative to the crate); returns its output.
fn build_and_run(path: &str) -> String {
    let exe = build(&crate_dir().join(path));
    let log = exe.with_extension("run.log");
    let (status, out) = run(&mut Command::new(&exe), &log, RUN_TIMEOUT);
    match status {
        Some(s) if s.success() => out,
        Some(s) => panic!("{path} failed ({s}):\n{out}"),
        None => panic!("{path} did not finish within {RUN_TIMEOUT:?} (killed):\n{out}"),
    }
}

#[test]
fn c_api_from_c() {
    assert!(build_and_run("tests/programs/c_api.c").contains("c_api: ok"));
}

#[test]
fn seeds_calls_as_the_pages_spell_them() {
    assert!(build_and_run("tests/programs/seeds.cpp").contains("seeds: ok"));
}

#[test]
fn async_compute_example_in_cpp() {
    let out = build_and_run("tests/programs/async_compute.cpp");
    assert!(out.contains("sum = 28672"), "{out}");
}

#[test]
fn cross_queue_memory_value_handshake() {
    assert!(build_and_run("tests/programs/handshake.cpp").contains("3 rounds ok"));
}

#[test]
fn unsatisfied_wait_hangs_the_device() {
    let out = build_and_run("tests/programs/hang.cpp");
    assert!(
        out.contains("hang: ok") && out.contains("waiting for flag"),
        "{out}"
    );
}

#[test]
fn multiple_fence_waits_any_and_all() {
    assert!(build_and_run("tests/programs/multi_fence.cpp").contains("multi_fence: ok"));
}

#[test]
fn exploration_finds_the_racy_submission() {
    let out = build_and_run("tests/programs/explore_race.cpp");
    assert!(out.contains("explore_race: ok"), "{out}");
}

#[test]
fn exhaustive_exploration_proves_the_fix_and_replays_the_race() {
    let out = build_and_run("tests/programs/explore_exhaustive.cpp");
    assert!(out.contains("explore_exhaustive: ok"), "{out}");
}

#[test]
fn header_next_to_win32_macros() {
    assert!(build_and_run("tests/programs/macros_first.cpp").contains("macros_first: ok"));
}

#[test]
fn engine_example_runs_on_both_drivers() {
    let out = build_and_run("examples/cpp/engine.cpp");
    assert!(out.contains("threaded driver: 8 frames checked"), "{out}");
    assert!(out.contains("20 schedules, 0 failing"), "{out}");
}

#[test]
fn d3d12_sample_idioms_compile_as_written() {
    assert!(build_and_run("tests/programs/d3d12_idioms.cpp").contains("d3d12_idioms: ok"));
}

#[test]
fn win32_events_on_the_deterministic_driver() {
    let out = build_and_run("tests/programs/deterministic_events.cpp");
    assert!(out.contains("deterministic_events: ok"), "{out}");
}
