//! Plain values shared by every layer: where a command is ([`Site`]), which engine stage
//! ([`Stage`]), how an access faulted ([`Access`]), and (from the command vocabulary)
//! what a memory-value wait compares ([`ValueCondition`]).

pub use crate::command::ValueCondition;

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
