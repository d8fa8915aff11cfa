//! `pipefence-bench --workload NAME COUNT`: runs one hot path COUNT times and prints nothing
//! but a line saying what ran. `scripts/instructions.sh` runs it under
//! `valgrind --tool=callgrind` twice, with COUNT and 2 x COUNT, and divides the difference by
//! COUNT: the instructions (and system calls) per hop, round trip or packet, with the set-up
//! and tear-down cancelled out. An instruction count does not depend on the load of the
//! machine, so it compares commits where wall-clock figures are too noisy.
//!
//! Workloads (each on a threaded device with 1 worker, like the benchmarks):
//! - `chain2`, `chain4`, `chain16`: engine/cross-queue-chain, COUNT rounds; the unit is one hop
//!   (a round is N + 1 hops), including the submission of the queues' wait/signal pairs.
//! - `round-trip`: engine/host-round-trip, submitted per iteration; the unit is a round trip.
//! - `throughput`, `throughput-validate`: engine/command-throughput's list of
//!   [`LIST_PACKETS`] packets executed COUNT times (recorded once, so the recording cancels
//!   out) on a Plain and a Validate device; the unit is a packet.
//! - `condvar-chain2`, `condvar-ping-pong`: the baselines of the chain (N = 2) and of the
//!   round trip (threads handing a counter through `Mutex<u64>` + `Condvar`).
//!
//! And on a scenario (`--workload NAME COUNT FILE`; `scripts/exhaustive-instructions.sh`):
//! - `exhaustive`: COUNT reduced exhaustive searches of FILE as `schedules/exhaustive-rate`
//!   times them (strict off, one thread, up to 1,000 schedules, no shrinking); the unit is a
//!   schedule explored.
//! - `sampled`: sampled `check` of COUNT schedules of FILE (one thread); the unit is a schedule.

use crate::engine::{
    compute_queue, condvar_chain, device_with, engine_chain, engine_round_trip, ThroughputRig,
};
use crate::fences::{condvar_pingpong, WaitKind, WAIT_TIMEOUT};
use pipefence::MemoryModel;
use std::process::ExitCode;

/// Hidden argument that runs one workload.
pub const WORKLOAD_ARG: &str = "--workload";

/// The workloads and the unit each counts.
pub const WORKLOADS: &[(&str, &str)] = &[
    ("chain2", "hop"),
    ("chain4", "hop"),
    ("chain16", "hop"),
    ("round-trip", "round trip"),
    ("throughput", "packet"),
    ("throughput-validate", "packet"),
    ("condvar-chain2", "hop"),
    ("condvar-ping-pong", "round trip"),
];

/// Packets of the throughput workloads' list.
pub const LIST_PACKETS: u64 = 10_000;

/// Units of `name`'s COUNT that one run does (hops for the chains).
fn units(name: &str, count: u64) -> Option<u64> {
    Some(match name {
        "chain2" | "condvar-chain2" => count * 3,
        "chain4" => count * 5,
        "chain16" => count * 17,
        "round-trip" | "condvar-ping-pong" => count,
        "throughput" | "throughput-validate" => count * LIST_PACKETS,
        _ => return None,
    })
}

fn run(name: &str, count: u64) -> Result<(), String> {
    match name {
        "condvar-chain2" => return condvar_chain(2, count).map(|_| ()),
        "condvar-ping-pong" => return condvar_pingpong(count, WaitKind::Timed).map(|_| ()),
        _ => {}
    }
    let model = if name == "throughput-validate" {
        MemoryModel::Validate
    } else {
        MemoryModel::Plain
    };
    let dev = device_with(1, model)?;
    match name {
        "chain2" | "chain4" | "chain16" => {
            let n: usize = name["chain".len()..].parse().map_err(|_| "bad chain")?;
            let queues = (0..n)
                .map(|i| compute_queue(&dev, &format!("chain{i}")))
                .collect::<Result<Vec<_>, String>>()?;
            engine_chain(&dev, &queues, count)?;
        }
        "round-trip" => {
            let q = compute_queue(&dev, "rt")?;
            engine_round_trip(&dev, &q, count, false)?;
        }
        _ => {
            let rig = ThroughputRig::new(&dev, LIST_PACKETS)?;
            for _ in 0..count {
                rig.run(&dev)?;
            }
            let (last, got) = rig.last_write()?;
            if got != last as u32 {
                return Err(format!("last write {got}, expected {last}"));
            }
        }
    }
    dev.wait_idle(WAIT_TIMEOUT).map_err(|e| e.to_string())
}

/// The scenario workloads: `COUNT` exhaustive searches or sampled schedules of `file`; returns
/// the schedules run.
fn run_scenario(name: &str, count: u64, file: &str) -> Result<u64, String> {
    let (_, sc) = crate::schedules::load_kdl(std::path::Path::new(file))?;
    match name {
        "exhaustive" => Ok((0..count)
            .map(|_| crate::exhaustive::exhaustive(&sc, 1000, None).0.schedules)
            .sum()),
        "sampled" => Ok(crate::exhaustive::sampled(&sc, count)),
        _ => Err(format!(
            "no scenario workload `{name}` (exhaustive, sampled)"
        )),
    }
}

/// `--workload NAME COUNT [FILE]` (the arguments after the flag).
pub fn main(args: &[String]) -> ExitCode {
    if let [name, count, file] = args {
        let Ok(count) = count.parse::<u64>() else {
            eprintln!("pipefence-bench: workload {name}: COUNT `{count}` is not a number");
            return ExitCode::from(2);
        };
        return match run_scenario(name, count, file) {
            Ok(n) => {
                println!("workload {name} {file}: {n} units");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("pipefence-bench: workload {name} {file}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let parsed = match args {
        [name, count] => count.parse::<u64>().ok().and_then(|c| {
            let u = units(name, c)?;
            Some((name.as_str(), c, u))
        }),
        _ => None,
    };
    let Some((name, count, units)) = parsed else {
        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.0).collect();
        eprintln!(
            "usage: pipefence-bench --workload NAME COUNT; NAME one of {names:?}; or \
             --workload exhaustive|sampled COUNT FILE"
        );
        return ExitCode::from(2);
    };
    match run(name, count) {
        Ok(()) => {
            println!("workload {name}: {units} units");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pipefence-bench: workload {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_runs() {
        for (name, _) in WORKLOADS {
            run(name, 2).unwrap();
            assert!(units(name, 2).unwrap() >= 2);
        }
        assert!(units("nope", 1).is_none());
    }

    #[test]
    fn the_scenario_workloads_run_their_schedules() {
        let file = crate::schedules::workspace_dir().join("tests/scenarios/write-write.kdl");
        let file = file.to_str().unwrap();
        // The reduced search of write-write has 16 schedules.
        assert_eq!(run_scenario("exhaustive", 2, file).unwrap(), 32);
        assert_eq!(run_scenario("sampled", 3, file).unwrap(), 3);
        assert!(run_scenario("nope", 1, file).is_err());
    }
}
