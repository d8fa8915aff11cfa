//! D4: the reduced exhaustive search (`check --exhaustive`) misses no outcome that sampling
//! finds, on every example and test scenario, plain and strict: each outcome signature a
//! sampled check's seeds produce (`check::signature`: status, expectations, fences, hazards,
//! removal, host errors) is among those of the reduced search, which must complete.
//!
//! The plain search of every interleaving (`reduction_soundness.rs`) is the exact oracle but
//! only for tiny scenarios; sampling reaches the real ones, whose plain search never ends. A
//! sampled outcome the reduced search does not find is a schedule it wrongly took for
//! equivalent to one it explored (a dependence the footprints miss).

use pipefence::explore::{ExhaustiveOptions, Parallel};
use pipefence_scenario::check::{check_each, signature, CheckOptions};
use pipefence_scenario::exhaustive::{check_exhaustive_each, ExhaustiveCheckOptions};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Seeds sampled per scenario and mode (`REDUCTION_SAMPLED_SEEDS` overrides).
const SEEDS: u64 = 150;

fn seeds() -> u64 {
    std::env::var("REDUCTION_SAMPLED_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SEEDS)
}

fn scenario_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["examples", "tests/scenarios"] {
        let mut more: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
            .collect();
        more.sort();
        files.extend(more);
    }
    files
}

fn exhaustive_outcomes(
    sc: &pipefence_scenario::plan::Scenario,
    strict: bool,
) -> (bool, u64, BTreeSet<String>) {
    let mut outcomes = BTreeSet::new();
    let r = check_exhaustive_each(
        sc,
        &ExhaustiveCheckOptions {
            strict,
            bounds: ExhaustiveOptions {
                max_schedules: 20_000,
                preemption_bound: None,
                reduction: true,
            },
            shrink: None,
            parallel: Parallel {
                jobs: 2,
                shard: None,
            },
        },
        |_| {},
        |_, o| {
            outcomes.insert(signature(&mut o.clone()));
        },
    );
    (r.complete, r.schedules, outcomes)
}

#[test]
fn d4_reduced_exhaustive_finds_every_outcome_sampling_finds_in_every_scenario() {
    let n = seeds();
    let mut failures = Vec::new();
    for path in scenario_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let sc = pipefence_scenario::parse(&name, &text).unwrap();
        for strict in [false, true] {
            let (complete, schedules, exhaustive) = exhaustive_outcomes(&sc, strict);
            let mut sampled = BTreeSet::new();
            check_each(
                &sc,
                &CheckOptions {
                    schedules: n,
                    seed: 0,
                    strict,
                },
                |_| {},
                |_, o| {
                    sampled.insert(signature(&mut o.clone()));
                },
            );
            let missed: Vec<&String> = sampled.difference(&exhaustive).collect();
            eprintln!(
                "{name} strict={strict}: exhaustive complete={complete} {schedules} schedules \
                 {} outcomes; sampled {} outcomes, {} missed",
                exhaustive.len(),
                sampled.len(),
                missed.len()
            );
            if !complete {
                failures.push(format!(
                    "{name} (strict {strict}): the reduced search did not complete"
                ));
            }
            if !missed.is_empty() {
                failures.push(format!(
                    "{name} (strict {strict}): {} sampled outcomes the reduced search did not \
                     find, the first:\n{}\n--- the reduced search's ---\n{}",
                    missed.len(),
                    missed[0],
                    exhaustive.iter().cloned().collect::<Vec<_>>().join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
