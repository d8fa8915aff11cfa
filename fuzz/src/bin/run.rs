//! Fuzz target: a scenario run on the deterministic driver, plain or strict, at a seed taken
//! from the input, within small budgets: at most 1 MiB of buffers, 4096 groups per dispatch,
//! 4096 commands per list and 64 actions per host program (inputs over budget are skipped, not
//! run). A valid scenario must end with a verdict (exit 0-3); a panic, an abort or a hang (AFL's
//! timeout) is a crash.

use pipefence_fuzz::Budget;
use pipefence_scenario::run::{run, DriverKind, RunOptions};

/// The budget of a fuzzed scenario (above).
const BUDGET: Budget = Budget {
    buffer_bytes: 1 << 20,
    groups: 4096,
    commands: 4096,
    actions: 64,
};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((sc, seed)) = BUDGET.scenario(data) else {
            return;
        };
        let o = run(
            &sc,
            &RunOptions {
                driver: DriverKind::Deterministic,
                seed,
                strict: seed % 2 == 1,
                ..RunOptions::default()
            },
        );
        let code = o.exit_code();
        assert!((0..=3).contains(&code), "exit {code}");
    });
}
