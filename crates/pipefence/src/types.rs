//! Plain values shared by every layer: where a command is ([`Site`]), which engine stage
//! ([`Stage`]), how an access faulted ([`Access`]), and what a memory-value wait compares
//! ([`ValueCondition`]). Names only the command vocabulary.

use crate::command::{Comparison, Width};

/// Where a packet came from: the queue's submission and, inside a list, the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site {
    /// The queue's submission sequence number (0-based, in submission order; the value
    /// `execute_command_lists`, `signal` and `wait` return).
    pub submission: u64,
    /// The command list's id ([`CommandList::id`](crate::CommandList::id)), for commands of a list.
    pub list: Option<u32>,
    /// The command index in the list.
    pub command: Option<u32>,
}

/// Which stage a driver steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The pre-fetch parser.
    Pfp,
    /// The micro engine.
    Me,
}

/// How a GPU access faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A read.
    Read,
    /// A write.
    Write,
}

impl Access {
    /// `read` or `write`.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// What a memory-value wait compares (C1): the 32- or 64-bit value at its address, masked,
/// against a reference (`(value & mask) cmp reference`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueCondition {
    /// 32 or 64 bits.
    pub width: Width,
    /// The comparison.
    pub cmp: Comparison,
    /// The reference.
    pub reference: u64,
    /// The mask.
    pub mask: u64,
}

impl ValueCondition {
    /// Whether `value` (read at [`width`](Self::width)) satisfies the condition.
    #[inline]
    pub fn holds(&self, value: u64) -> bool {
        self.cmp.holds(value, self.mask, self.reference)
    }
}
