//! The public side of hazard detection: what a report says (`docs/memory-model.md` 5.3, 5.4).

use crate::types::Site;
use std::fmt;

/// Which memory model a device runs (D5, `docs/memory-model.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum MemoryModel {
    /// Everything an engine writes is visible at once; no hazard analysis (the default).
    #[default]
    Plain,
    /// Hazard analysis only (vector clocks), no change to values: the validation layer
    /// (`--validate`). Works on both drivers; slower.
    Validate,
    /// The weakest legal GPU plus hazard analysis (`--strict`): per-engine write-back buffers,
    /// stale read caches, early write-backs and maximal PFP run-ahead chosen by the schedule.
    /// Needs the deterministic driver.
    Strict,
}

impl MemoryModel {
    /// Whether hazards are tracked.
    pub fn tracks_hazards(self) -> bool {
        !matches!(self, MemoryModel::Plain)
    }
}

/// The four hazard kinds (`docs/memory-model.md` 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HazardKind {
    /// A read of data whose last write was not released to the reader (or a write that lands
    /// on data an unordered reader read).
    UnreleasedRead,
    /// A `dispatch_indirect` whose arguments the PFP read before an earlier ME wait that would
    /// have guarded them was satisfied (C7).
    PfpReadBeforeWait,
    /// A read that may hit a stale line of the engine's read cache.
    StaleCache,
    /// Two unordered writes to the same bytes.
    WriteWrite,
}

impl HazardKind {
    /// The name used in reports and JSON: `unreleased-read`, `pfp-read-before-wait`,
    /// `stale-cache`, `write-write`.
    pub fn name(self) -> &'static str {
        match self {
            HazardKind::UnreleasedRead => "unreleased-read",
            HazardKind::PfpReadBeforeWait => "pfp-read-before-wait",
            HazardKind::StaleCache => "stale-cache",
            HazardKind::WriteWrite => "write-write",
        }
    }
}

impl fmt::Display for HazardKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who made an access.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HazardAgent {
    /// A command of a queue: a dispatch or copy (a task), the ME, or the PFP.
    Queue {
        /// The queue's name.
        queue: String,
        /// `task`, `me` or `pfp`.
        stage: &'static str,
        /// Where the command came from (for commands of a list, `submission` is 0: every
        /// execution of the list is reported as one).
        site: Site,
        /// The command list's name, for commands of a list.
        list: Option<String>,
    },
    /// A host thread.
    Host {
        /// The host thread's name.
        host: String,
        /// The source line it set with [`crate::hazard::set_source_line`], if any.
        line: Option<u32>,
    },
}

/// What an access did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AccessKind {
    /// A data read (task read, PFP argument read, host read).
    Read,
    /// A data write (task write).
    Write,
    /// A value write (CP or host), a synchronization access.
    ValueWrite,
    /// A kernel's atomic read-modify-write.
    Atomic,
    /// A satisfied memory-value wait.
    Wait,
    /// A release (bottom-of-pipe or top-of-pipe write, signal) named as the missing link.
    Release,
}

impl AccessKind {
    /// `read`, `write`, `value write`, `atomic`, `wait`, `release`.
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::ValueWrite => "value write",
            AccessKind::Atomic => "atomic",
            AccessKind::Wait => "wait",
            AccessKind::Release => "release",
        }
    }
}

/// One access of a hazard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct HazardAccess {
    /// Who.
    pub agent: HazardAgent,
    /// The command or call: `dispatch`, `write-value32-bop`, `cpu-write`, ...
    pub op: &'static str,
    /// A built-in or user kernel's name, for dispatches.
    pub kernel: Option<String>,
    /// What it did.
    pub kind: AccessKind,
}

impl HazardAccess {
    /// `queue/list:command` for a command of a list, `queue (op)` for a queue-level
    /// submission, `host NAME` for a host thread.
    pub fn short(&self) -> String {
        match &self.agent {
            HazardAgent::Queue {
                queue, site, list, ..
            } => match (list, site.command) {
                (Some(l), Some(c)) => format!("{queue}/{l}:{c}"),
                _ => format!("{queue} ({})", self.op),
            },
            HazardAgent::Host { host, .. } => format!("host {host}"),
        }
    }

    /// The command with its kernel: `dispatch fill`, `write-value32-bop`.
    pub fn what(&self) -> String {
        match &self.kernel {
            Some(k) => format!("{} {k}", self.op),
            None => self.op.to_string(),
        }
    }
}

impl HazardAccess {
    /// The access in the Rust API's words: `queue/list:command (dispatch_indirect fill)`.
    pub fn rust_label(&self) -> String {
        let op = Vocabulary::Rust.op(self.op);
        let what = match &self.kernel {
            Some(k) => format!("{op} {k}"),
            None => op.to_string(),
        };
        match &self.agent {
            HazardAgent::Queue {
                queue, site, list, ..
            } => match (list, site.command) {
                (Some(l), Some(c)) => format!("{queue}/{l}:{c} ({what})"),
                _ => format!("{queue} ({what})"),
            },
            HazardAgent::Host { host, .. } => format!("host {host} ({what})"),
        }
    }
}

impl fmt::Display for HazardAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.short(), self.what())
    }
}

/// What synchronization is missing (`docs/memory-model.md` 5.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Missing {
    /// The reader acquired a bottom-of-pipe write later than the writer that has no
    /// `L2_WRITEBACK` (the seed's warning).
    NoWriteback {
        /// The bottom-of-pipe write.
        release: HazardAccess,
        /// It had a volatile flag, which does not count.
        volatile: bool,
    },
    /// The reader acquired a top-of-pipe or immediate write, which does not wait for the task.
    TopOfPipe {
        /// That write.
        release: HazardAccess,
    },
    /// Both on one queue, with no `flush_pipeline` between them.
    NoFlush,
    /// The PFP read the arguments before this ME wait, which acquires their write, was
    /// satisfied.
    PfpBeforeWait {
        /// The ME wait.
        wait: HazardAccess,
    },
    /// The reading engine read the word before and has not invalidated since.
    NoInvalidate,
    /// Nothing orders the two accesses.
    Nothing,
}

/// The words a report uses for commands, flags and options: the Rust API's (the default, what
/// [`Hazard`]'s `Display` says) or the scenario language's (what `pipefence` prints). Every
/// hazard text comes from one place ([`Hazard::message_in`], [`Hazard::missing_text_in`],
/// [`Hazard::fix_text_in`]) in either vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Vocabulary {
    /// The Rust API: `flush_pipeline(Flush::L1_INVALIDATE)`, `Flush::L2_WRITEBACK`,
    /// `write_value32_bottom_of_pipe`, `Comparison::GreaterEqual`, `WaitEngine::Pfp`.
    #[default]
    Rust,
    /// The scenario language (`docs/scenario-language.md`): `flush-pipeline
    /// flush=l1-invalidate`, `flush=l2-writeback`, `write-value32-bop`, `cmp=greater-equal
    /// engine=pfp`.
    Scenario,
}

impl Vocabulary {
    /// A command's name (`op` is the scenario's name, as in [`HazardAccess::op`]).
    pub fn op(self, op: &str) -> &str {
        if self == Vocabulary::Scenario {
            return op;
        }
        match op {
            "wait-value32" => "wait_value32",
            "wait-value64" => "wait_value64",
            "write-value32-bop" => "write_value32_bottom_of_pipe",
            "write-value64-bop" => "write_value64_bottom_of_pipe",
            "write-value32-top" => "write_value32_top_of_pipe",
            "write-value64-top" => "write_value64_top_of_pipe",
            "write-immediate" => "write_buffer_immediate",
            "flush-pipeline" => "flush_pipeline",
            "dispatch-indirect" => "dispatch_indirect",
            "copy" => "copy_buffer_region",
            "marker" => "set_marker",
            "begin-event" => "begin_event",
            "end-event" => "end_event",
            "signal" => "Queue::signal",
            "wait" => "Queue::wait",
            other => other,
        }
    }

    /// The phrases of the fixes, by key.
    fn says(self, key: Phrase) -> &'static str {
        use Phrase::*;
        match (self, key) {
            (Vocabulary::Scenario, L2Writeback) => "l2-writeback",
            (Vocabulary::Scenario, WithL2Writeback) => "flush=l2-writeback",
            (Vocabulary::Scenario, FlushPipeline) => "flush-pipeline",
            (Vocabulary::Scenario, InvalidateL1) => "flush-pipeline flush=l1-invalidate",
            (Vocabulary::Scenario, BopWrite) => "write-value32-bop or write-value64-bop",
            (Vocabulary::Scenario, BopInvalidate) => "write-value32-bop with flush=l1-invalidate",
            (Vocabulary::Scenario, MarkerOut) => "write-immediate (MARKER_OUT)",
            (Vocabulary::Scenario, Bop32) => "write-value32-bop",
            (Vocabulary::Scenario, PfpWait) => "cmp=greater-equal engine=pfp",
            (Vocabulary::Scenario, Signal) => "signal",
            (Vocabulary::Scenario, Wait) => "wait",
            (Vocabulary::Scenario, QueueWait) => "a queue wait",
            (Vocabulary::Scenario, CpuSignal) => "cpu-signal",
            (Vocabulary::Scenario, CpuWait) => "cpu-wait",
            (Vocabulary::Scenario, Execute) => "execute or wait on the queue",
            (_, L2Writeback) => "Flush::L2_WRITEBACK",
            (_, WithL2Writeback) => "Flush::L2_WRITEBACK",
            (_, FlushPipeline) => "flush_pipeline",
            (_, InvalidateL1) => "flush_pipeline(Flush::L1_INVALIDATE)",
            (_, BopWrite) => "write_value32_bottom_of_pipe or write_value64_bottom_of_pipe",
            (_, BopInvalidate) => "write_value32_bottom_of_pipe with Flush::L1_INVALIDATE",
            (_, MarkerOut) => "write_buffer_immediate (ImmediateMode::MarkerOut)",
            (_, Bop32) => "write_value32_bottom_of_pipe",
            (_, PfpWait) => "Comparison::GreaterEqual with WaitEngine::Pfp",
            (_, Signal) => "Queue::signal",
            (_, Wait) => "Queue::wait",
            (_, QueueWait) => "a Queue::wait",
            (_, CpuSignal) => "Fence::signal",
            (_, CpuWait) => "Fence::wait",
            (_, Execute) => "execute_command_lists or Queue::wait on the queue",
        }
    }
}

/// The phrases of hazard texts that differ between vocabularies.
#[derive(Debug, Clone, Copy)]
enum Phrase {
    L2Writeback,
    WithL2Writeback,
    FlushPipeline,
    InvalidateL1,
    BopWrite,
    BopInvalidate,
    MarkerOut,
    Bop32,
    PfpWait,
    Signal,
    Wait,
    QueueWait,
    CpuSignal,
    CpuWait,
    Execute,
}

/// How a report calls a command-processor value write.
fn cp_write_name(op: &str) -> &'static str {
    if op.ends_with("-top") {
        "top-of-pipe write"
    } else if op == "write-immediate" {
        "immediate write"
    } else {
        "value write"
    }
}

/// A synchronization hazard: two accesses that some legal schedule can turn into wrong values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hazard {
    /// The kind.
    pub kind: HazardKind,
    /// The first byte of the affected range.
    pub address: u64,
    /// The range's length in bytes (words grouped per pair of accesses).
    pub bytes: u64,
    /// The buffer holding `address` and the offset in it, when it is still mapped.
    pub buffer: Option<(String, u64)>,
    /// The earlier access: the write (or, for a write landing on read data, the read).
    pub first: HazardAccess,
    /// The later access.
    pub second: HazardAccess,
    /// What is missing between them.
    pub missing: Missing,
    /// For `stale-cache`: what this schedule returned, e.g. `old value 3; current 5`.
    pub observed: Option<String>,
}

impl Hazard {
    /// The affected range: `buffer+offset..+length` (or the address when no buffer holds it).
    pub fn range_text(&self) -> String {
        let base = match &self.buffer {
            Some((name, off)) => {
                if *off == 0 {
                    name.clone()
                } else {
                    format!("{name}+{off:#x}")
                }
            }
            None => format!("{:#x}", self.address),
        };
        if self.bytes > 4 {
            format!("{base}..+{:#x}", self.bytes)
        } else {
            base
        }
    }

    /// The missing synchronization, in words, with accesses labelled by `label`, in the
    /// scenario language's words ([`Vocabulary::Scenario`]).
    pub fn missing_text(&self, label: &dyn Fn(&HazardAccess) -> String) -> String {
        self.missing_text_in(Vocabulary::Scenario, label)
    }

    /// What would fix it, with accesses labelled by `label`, in the scenario language's words.
    pub fn fix_text(&self, label: &dyn Fn(&HazardAccess) -> String) -> String {
        self.fix_text_in(Vocabulary::Scenario, label)
    }

    /// The whole report, with accesses labelled by `label`, in the scenario language's words.
    pub fn message(&self, label: &dyn Fn(&HazardAccess) -> String) -> String {
        self.message_in(Vocabulary::Scenario, label)
    }

    /// The missing synchronization, in words of `v`, with accesses labelled by `label`.
    pub fn missing_text_in(
        &self,
        v: Vocabulary,
        label: &dyn Fn(&HazardAccess) -> String,
    ) -> String {
        use Phrase::*;
        match &self.missing {
            Missing::NoWriteback { release, volatile } => {
                let vol = if *volatile {
                    " (volatile flags do not count)"
                } else {
                    ""
                };
                format!(
                    "the bottom-of-pipe write at {}, acquired by the reader, has no {}{vol}",
                    label(release),
                    v.says(L2Writeback)
                )
            }
            Missing::TopOfPipe { release } if self.first.op == "copy" => format!(
                "the reader acquired the {} at {}, which waits for the copy but does not write \
                 its data back",
                cp_write_name(release.op),
                label(release)
            ),
            Missing::TopOfPipe { release } => format!(
                "the reader acquired the {} at {}, which does not wait for the {}",
                cp_write_name(release.op),
                label(release),
                v.op(self.first.op)
            ),
            Missing::NoFlush => format!("no {} between them on the queue", v.says(FlushPipeline)),
            Missing::PfpBeforeWait { wait } => format!(
                "the PFP read before the ME wait at {} was satisfied",
                label(wait)
            ),
            Missing::NoInvalidate => format!(
                "the reading engine read this word before and has not invalidated since{}",
                self.observed
                    .as_ref()
                    .map(|o| format!(" (this schedule returned {o})"))
                    .unwrap_or_default()
            ),
            Missing::Nothing => "nothing orders them".into(),
        }
    }

    /// What would fix it, in words of `v`, with accesses labelled by `label`.
    pub fn fix_text_in(&self, v: Vocabulary, label: &dyn Fn(&HazardAccess) -> String) -> String {
        use Phrase::*;
        let host_first = matches!(self.first.agent, HazardAgent::Host { .. });
        let host_second = matches!(self.second.agent, HazardAgent::Host { .. });
        match &self.missing {
            Missing::NoWriteback { release, .. } if release.op == "write-immediate" => format!(
                "replace the {} at {} by {} with {}",
                v.says(MarkerOut),
                label(release),
                v.says(Bop32),
                v.says(WithL2Writeback)
            ),
            Missing::NoWriteback { release, .. } => format!(
                "add {} to the bottom-of-pipe write at {}",
                v.says(WithL2Writeback),
                label(release)
            ),
            Missing::TopOfPipe { release } => format!(
                "replace the {} at {} by a bottom-of-pipe write with {} ({})",
                cp_write_name(release.op),
                label(release),
                v.says(WithL2Writeback),
                v.says(BopWrite)
            ),
            Missing::NoFlush if self.second.op == "dispatch-indirect" => format!(
                "{} before the {} at {}",
                v.says(FlushPipeline),
                v.op("dispatch-indirect"),
                label(&self.second)
            ),
            Missing::NoFlush => format!(
                "{} between {} and {}",
                v.says(FlushPipeline),
                label(&self.first),
                label(&self.second)
            ),
            Missing::PfpBeforeWait { wait } => {
                format!("make the wait at {} {}", label(wait), v.says(PfpWait))
            }
            Missing::NoInvalidate if self.second.op == "copy" => format!(
                "invalidate the engine's cache before {}: {} on a fence, or a {} that the list \
                 waits for",
                label(&self.second),
                v.says(QueueWait),
                v.says(BopInvalidate)
            ),
            Missing::NoInvalidate => format!(
                "{} before {} (or wait on a fence instead)",
                v.says(InvalidateL1),
                label(&self.second)
            ),
            Missing::Nothing if host_first && host_second => format!(
                "order the host threads: {} a fence after {} and {} for it before {}",
                v.says(CpuSignal),
                label(&self.first),
                v.says(CpuWait),
                label(&self.second)
            ),
            Missing::Nothing if host_first && !host_second => format!(
                "make {} acquire the host's write: {} after it",
                label(&self.second),
                v.says(Execute)
            ),
            Missing::Nothing if host_second => format!(
                "make the host wait ({} on a fence the queue signals after {}) before it",
                v.says(CpuWait),
                label(&self.first)
            ),
            Missing::Nothing => format!(
                "order them: {} a fence after {} and {} for it before {} (or a \
                 bottom-of-pipe write with {} and a wait on it)",
                v.says(Signal),
                label(&self.first),
                v.says(Wait),
                label(&self.second),
                v.says(WithL2Writeback)
            ),
        }
    }

    /// The whole report, in words of `v`, with accesses labelled by `label`.
    pub fn message_in(&self, v: Vocabulary, label: &dyn Fn(&HazardAccess) -> String) -> String {
        let (a, b) = match self.kind {
            HazardKind::WriteWrite => ("written by", "and by"),
            _ if self.first.kind == AccessKind::Read => ("read by", "then written by"),
            _ => ("written by", "read by"),
        };
        format!(
            "hazard {}: {} {a} {}, {b} {}: {}. fix: {}",
            self.kind,
            self.range_text(),
            label(&self.first),
            label(&self.second),
            self.missing_text_in(v, label),
            self.fix_text_in(v, label)
        )
    }
}

/// The report in the Rust API's words ([`Vocabulary::Rust`]), each access as
/// [`HazardAccess::rust_label`].
impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message_in(Vocabulary::Rust, &HazardAccess::rust_label))
    }
}
