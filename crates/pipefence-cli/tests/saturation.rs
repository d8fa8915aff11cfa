//! Durations at the edge of `u64` nanoseconds (`docs/semantics.md` D4, D6): a watchdog of
//! `u64::MAX` ms saturates instead of wrapping, and a run whose virtual clock saturated says so
//! instead of printing a difference from the saturated clock.

use std::path::PathBuf;
use std::process::{Command, Output};

fn scenario(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipefence-saturation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

fn run_deterministic(file: &PathBuf, json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipefence"));
    cmd.args(["run", "--driver", "deterministic"]).arg(file);
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("run pipefence")
}

/// D6: `tdr-ms=18446744073709551615` and one group of `ns=18446744073709551615` pass (the
/// watchdog in nanoseconds wrapped below the group's cost: "endless-kernel ... ran longer than
/// the watchdog timeout (18446744073709551.615s)", exit 3).
#[test]
fn d6_a_tdr_of_u64_max_ms_passes_a_group_of_u64_max_ns() {
    let file = scenario(
        "tdr-max.kdl",
        "device tdr-ms=18446744073709551615\nfence f\nqueue q kind=compute\n\
         list l kind=compute {\n    dispatch spin groups=1 ns=18446744073709551615\n}\n\
         execute q l\nsignal q f 1\ncpu-wait f 1\nexpect-fence f equals=1\n",
    );
    let out = run_deterministic(&file, true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "passed");
    assert!(v["removed"].is_null(), "{stdout}");
}

/// D4: three host sleeps of 10^13 ms saturate the virtual clock; the run says so (it printed
/// "passed in 18446744072709.6 ms", the saturated clock less its 1 s epoch) and the JSON gives
/// `u64::MAX`.
#[test]
fn d4_a_saturated_virtual_clock_is_reported_as_such() {
    let file = scenario(
        "sleeps.kdl",
        "device\nsleep ms=10000000000000\nsleep ms=10000000000000\nsleep ms=10000000000000\n",
    );
    let out = run_deterministic(&file, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("passed in over 584 years (the virtual clock saturated)")
            || stderr.contains("passed in over 584 years (the virtual clock saturated)"),
        "{stdout}{stderr}"
    );
    let out = run_deterministic(&file, true);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["elapsed_ns"].as_u64(), Some(u64::MAX));
}
