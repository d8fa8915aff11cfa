//! Scenario parsing: KDL text to a validated [`Scenario`], or every mistake in the file as a
//! [`Diagnostic`] with its line and column, and the plain-text rendering of those diagnostics.
//!
//! Two stages. The `kdl` crate (KDL v2) checks the syntax; its errors become diagnostics at the
//! byte offsets it reports. Then one pass over the document, in file order, resolves names
//! (declarations come before use), range-checks every value, checks addresses against their
//! buffers and the heap rules of host actions, and finally converts each list to
//! `pipefence::command::Command`s and runs the library's own command validation
//! ([`validate()`](pipefence::command::validate()), what `CommandList::close()` runs),
//! reporting each rejected command at its own line. Rules that the library owns (alignment,
//! comparisons a stage accepts, timestamps with a value, zero groups, unbalanced events, 32-bit
//! operands of waits and value writes) are not repeated here.
//!
//! The parser never panics or aborts, whatever the input (E3): every lookup is checked, every
//! conversion is fallible, and input that the `kdl` parser's recursion could not take (deep
//! nesting) is reported before it gets there. Its memory is bounded too: a file over 64 KiB is
//! read in windows (`windows`), so the `kdl` parser, whose error recovery costs about 1.4 KB per
//! error, is never given more garbage than a window holds.
//!
//! This file holds the entry point, the name tables and the parse state; the stages and node
//! kinds live in submodules: `syntax` (pre-pass, `kdl` run, syntax errors), `windows` (large
//! files in windows), `lines` (positions), `render` (diagnostics as text), `shape` and `values`
//! (reading a node's entries), `decls` (top-level nodes and declarations), `actions` (host
//! actions), `commands` (list commands) and `lower` (the library form of commands, for its
//! validation).

mod actions;
mod commands;
mod decls;
mod lines;
mod lower;
mod render;
mod shape;
mod suggest;
mod syntax;
mod values;
mod windows;

use std::collections::HashMap;

use kdl::{KdlEntry, KdlNode};
use pipefence::{Heap, QueueKind};

use crate::plan::{Addr, Diagnostic, Pos, Scenario};

use lines::Lines;
use syntax::{cap, parse_kdl, prepare, syntax_errors, ParseKdlError, MAX_SOURCE_BYTES};
use windows::{parse_windowed, Windowed, WINDOWED_FROM};

pub use render::{render_diagnostics, render_diagnostics_styled};

/// Parses and validates a scenario. `file` is the name used in messages.
///
/// Returns every mistake in the file, sorted by position, when there is at least one. A KDL
/// syntax error stops before the meaning is checked (the document could not be read).
pub fn parse(file: &str, source: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let lines = Lines::new(source);
    if source.len() > MAX_SOURCE_BYTES {
        return Err(vec![Diagnostic {
            pos: Pos { line: 1, column: 1 },
            message: format!(
                "the file is {} bytes; scenario files are limited to {MAX_SOURCE_BYTES} bytes",
                source.len()
            ),
        }]);
    }
    let text = prepare(source, &lines)?;
    let windowed = if text.len() > WINDOWED_FROM {
        parse_windowed(&text, &lines)
    } else {
        Ok(Windowed::Whole)
    };
    let parsed = match windowed {
        Ok(Windowed::Doc(doc)) => Ok(Ok(doc)),
        Ok(Windowed::Errors(diags)) => return Err(diags),
        Ok(Windowed::Whole) => parse_kdl(&text),
        Err(err) => Err(err),
    };
    let doc = match parsed {
        Ok(Ok(doc)) => doc,
        Ok(Err(err)) => return Err(syntax_errors(&lines, &err)),
        Err(ParseKdlError::Panicked) => {
            return Err(vec![Diagnostic {
                pos: Pos { line: 1, column: 1 },
                message: "KDL syntax error: the KDL parser failed on this file (a bug in the \
                          `kdl` crate; please report it)"
                    .to_string(),
            }])
        }
        Err(ParseKdlError::NoStack(bytes)) => {
            return Err(vec![Diagnostic {
                pos: Pos { line: 1, column: 1 },
                message: format!(
                    "cannot parse this file: its parser needs a thread with {} MiB of stack \
                     (address space), which this process could not get (memory limits?)",
                    bytes >> 20
                ),
            }])
        }
    };
    let mut parser = Parser::new(file, &lines);
    for node in doc.nodes() {
        parser.top(node);
    }
    parser.finish().map_err(cap)
}

/// Sorts diagnostics by position (stable) and drops exact repeats.
fn sort_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by_key(|d| (d.pos.line, d.pos.column));
    diags.dedup();
}

/// Top-level declarations (and `expect-removed`).
const DECLARATIONS: &[&str] = &[
    "device",
    "buffer",
    "fence",
    "queue",
    "list",
    "host",
    "expect-removed",
];

/// Host actions (top level and inside `host`).
const ACTIONS: &[&str] = &[
    "execute",
    "signal",
    "wait",
    "cpu-signal",
    "cpu-wait",
    "cpu-wait-multiple",
    "cpu-write",
    "cpu-poll",
    "sleep",
    "wait-idle",
    "remove-device",
    "expect",
    "expect-fence",
];

/// Commands (children of `list`).
const COMMANDS: &[&str] = &[
    "wait-value32",
    "wait-value64",
    "write-value32-bop",
    "write-value64-bop",
    "write-value32-top",
    "write-value64-top",
    "write-immediate",
    "flush-pipeline",
    "dispatch",
    "dispatch-indirect",
    "copy",
    "marker",
    "begin-event",
    "end-event",
];

/// Built-in kernels.
const KERNELS: &[&str] = &["fill", "add", "sum", "spin"];

/// Comparison names of the scenario language (`none` is not one).
const COMPARISONS: &[&str] = &[
    "never",
    "less",
    "equal",
    "less-equal",
    "greater",
    "not-equal",
    "greater-equal",
    "always",
];

/// The name spaces of declared objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ns {
    /// `buffer NAME`.
    Buffer,
    /// `fence NAME`.
    Fence,
    /// `queue NAME`.
    Queue,
    /// `list NAME`.
    List,
    /// `host NAME`.
    Host,
}

impl Ns {
    /// The noun used in messages.
    fn noun(self) -> &'static str {
        match self {
            Ns::Buffer => "buffer",
            Ns::Fence => "fence",
            Ns::Queue => "queue",
            Ns::List => "list",
            Ns::Host => "host",
        }
    }

    /// Index into [`Parser::names`].
    fn slot(self) -> usize {
        match self {
            Ns::Buffer => 0,
            Ns::Fence => 1,
            Ns::Queue => 2,
            Ns::List => 3,
            Ns::Host => 4,
        }
    }
}

/// What a node accepts: its arguments (all required), whether more of the last one may follow,
/// its properties, and whether it has a children block.
#[derive(Debug, Clone, Copy)]
struct Shape<'p> {
    /// Argument names, for messages (`QUEUE`, `FENCE`, ...).
    args: &'p [&'p str],
    /// The last argument may repeat (`execute QUEUE LIST...`).
    variadic: bool,
    /// Property names.
    props: &'p [&'p str],
    /// Whether a children block is expected.
    children: bool,
}

impl<'p> Shape<'p> {
    /// A node with these arguments and properties and no children.
    const fn new(args: &'p [&'p str], props: &'p [&'p str]) -> Self {
        Shape {
            args,
            variadic: false,
            props,
            children: false,
        }
    }
}

/// A node's entries, split into arguments and (de-duplicated, known) properties.
#[derive(Debug)]
struct Reader<'a> {
    /// The node name.
    node: &'a str,
    /// The node's position.
    pos: Pos,
    /// Positional arguments, in order.
    args: Vec<&'a KdlEntry>,
    /// Known properties (the first of duplicates).
    props: Vec<(&'a str, &'a KdlEntry)>,
    /// Known properties that an unknown one was reported as a misspelling of (their absence
    /// is not reported again).
    misspelled: Vec<String>,
}

impl<'a> Reader<'a> {
    /// The `i`th argument.
    fn arg(&self, i: usize) -> Option<&'a KdlEntry> {
        self.args.get(i).copied()
    }

    /// A property, if given.
    fn prop(&self, key: &str) -> Option<&'a KdlEntry> {
        self.props.iter().find(|(k, _)| *k == key).map(|&(_, e)| e)
    }
}

/// The state of one parse: the scenario built so far, the diagnostics, and what is known about
/// each declaration (values that failed their checks are `None` there, so that later checks
/// that depend on them stay quiet).
struct Parser<'s> {
    /// The source's line index.
    lines: &'s Lines<'s>,
    /// Every mistake found.
    diags: Vec<Diagnostic>,
    /// The plan.
    sc: Scenario,
    /// Where `device` was first given.
    device_at: Option<Pos>,
    /// Name to index, per [`Ns`].
    names: [HashMap<String, usize>; 5],
    /// Per [`Ns`]: a declaration had no name.
    unnamed: [bool; 5],
    /// Each buffer's size, when valid.
    buffer_size: Vec<Option<u64>>,
    /// Each buffer's heap, when valid.
    buffer_heap: Vec<Option<Heap>>,
    /// Each queue's kind, when valid.
    queue_kind: Vec<Option<QueueKind>>,
    /// Each list's kind, when valid.
    list_kind: Vec<Option<QueueKind>>,
    /// The addresses of the command being parsed, with their text (to name them in the
    /// library's messages).
    addrs: Vec<(Addr, String)>,
}

impl<'s> Parser<'s> {
    /// An empty parse of `file`.
    fn new(file: &str, lines: &'s Lines<'s>) -> Self {
        Parser {
            lines,
            diags: Vec::new(),
            sc: Scenario {
                file: file.to_string(),
                ..Scenario::default()
            },
            device_at: None,
            names: Default::default(),
            unnamed: [false; 5],
            buffer_size: Vec::new(),
            buffer_heap: Vec::new(),
            queue_kind: Vec::new(),
            list_kind: Vec::new(),
            addrs: Vec::new(),
        }
    }

    /// The scenario, or every diagnostic sorted by position.
    fn finish(mut self) -> Result<Scenario, Vec<Diagnostic>> {
        if self.diags.is_empty() {
            Ok(self.sc)
        } else {
            sort_dedup(&mut self.diags);
            Err(self.diags)
        }
    }

    // ---------------------------------------------------------------------------------------
    // Positions and messages.

    /// Records a mistake.
    fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.diags.push(Diagnostic {
            pos,
            message: message.into(),
        });
    }

    /// A node's position (its first character, a type annotation included).
    fn node_pos(&self, node: &KdlNode) -> Pos {
        self.lines.pos(node.span().offset())
    }

    /// An entry's position (its property name, or the value of an argument).
    fn entry_pos(&self, e: &KdlEntry) -> Pos {
        self.lines.pos(e.span().offset())
    }
}
