//! What the fuzz targets share: the budgets that keep a fuzzed scenario's runs small.

use pipefence_scenario::plan::{ListCommand, Scenario};

/// A scenario's budget: the most bytes of buffers in all, groups per dispatch, commands per
/// list, and actions per host program (the main one included).
pub struct Budget {
    pub buffer_bytes: u64,
    pub groups: u32,
    pub commands: usize,
    pub actions: usize,
}

impl Budget {
    /// The scenario an input's bytes (as UTF-8, lossily) parse to, when it is within this
    /// budget, with a seed hashed from the bytes (for the choices a target makes per input).
    pub fn scenario(&self, data: &[u8]) -> Option<(Scenario, u64)> {
        let seed = data
            .iter()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b));
        let text = String::from_utf8_lossy(data);
        let sc = pipefence_scenario::parse("fuzz.kdl", &text).ok()?;
        self.admits(&sc).then_some((sc, seed))
    }

    /// Whether `sc` is within this budget (a target skips a scenario that is not).
    pub fn admits(&self, sc: &Scenario) -> bool {
        let bytes: u64 = sc.buffers.iter().map(|b| b.size).sum();
        bytes <= self.buffer_bytes
            && sc.lists.iter().all(|l| {
                l.commands.len() <= self.commands
                    && l.commands.iter().all(|c| {
                        !matches!(c.cmd, ListCommand::Dispatch { groups, .. } if groups > self.groups)
                    })
            })
            && sc.main.len() <= self.actions
            && sc.hosts.iter().all(|h| h.actions.len() <= self.actions)
    }
}
