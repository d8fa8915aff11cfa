//! Fuzz target: a scenario run on the deterministic driver, plain or strict, at a seed taken
//! from the input, within small budgets: at most 1 MiB of buffers, 4096 groups per dispatch,
//! 4096 commands per list and 64 actions per host program (inputs over budget are skipped, not
//! run). A valid scenario must end with a verdict (exit 0-3); a panic, an abort or a hang (AFL's
//! timeout) is a crash.

use pipefence_scenario::plan::{ListCommand, Scenario};
use pipefence_scenario::run::{run, DriverKind, RunOptions};

fn within_budget(sc: &Scenario) -> bool {
    let bytes: u64 = sc.buffers.iter().map(|b| b.size).sum();
    bytes <= 1 << 20
        && sc.lists.iter().all(|l| {
            l.commands.len() <= 4096
                && l.commands.iter().all(
                    |c| !matches!(c.cmd, ListCommand::Dispatch { groups, .. } if groups > 4096),
                )
        })
        && sc.main.len() <= 64
        && sc.hosts.iter().all(|h| h.actions.len() <= 64)
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let seed = data
            .iter()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b));
        let text = String::from_utf8_lossy(data);
        let Ok(sc) = pipefence_scenario::parse("fuzz.kdl", &text) else {
            return;
        };
        if !within_budget(&sc) {
            return;
        }
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
