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
//! nesting) is reported before it gets there.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;

use kdl::{KdlDiagnostic, KdlDocument, KdlEntry, KdlError, KdlNode, KdlValue};
use pipefence::command::{self, Command, ImmediateWrite, KernelArgs};
use pipefence::{
    Comparison, Flush, Heap, ImmediateMode, QueueKind, RemovalReason, WaitEngine, Width,
    WriteSource,
};

use crate::plan::{
    Action, ActionKind, Addr, BufferDecl, Check, CommandDecl, Diagnostic, FenceDecl, HostDecl,
    KernelDecl, ListCommand, ListDecl, Pos, QueueDecl, Scenario,
};

/// Parses and validates a scenario. `file` is the name used in messages.
///
/// Returns every mistake in the file, sorted by position, when there is at least one. A KDL
/// syntax error stops before the meaning is checked (the document could not be read).
pub fn parse(file: &str, source: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let lines = Lines::new(source);
    let text = prepare(source, &lines)?;
    let doc = match parse_kdl(&text) {
        Some(Ok(doc)) => doc,
        Some(Err(err)) => return Err(syntax_errors(&lines, &err)),
        None => {
            return Err(vec![Diagnostic {
                pos: Pos { line: 1, column: 1 },
                message: "KDL syntax error: the KDL parser failed on this file (a bug in the \
                          `kdl` crate; please report it)"
                    .to_string(),
            }])
        }
    };
    let mut parser = Parser::new(file, &lines);
    for node in doc.nodes() {
        parser.top(node);
    }
    parser.finish()
}

/// Renders diagnostics for a terminal: for each, `FILE:LINE:COLUMN: message`, then the source
/// line and a caret under the column (plain text, no colors).
///
/// ```text
/// s.kdl:3:13: `size` 15 is not a positive multiple of 4
/// 3 | buffer data size=15
///   |             ^
/// ```
pub fn render_diagnostics(file: &str, source: &str, diags: &[Diagnostic]) -> String {
    let lines = Lines::new(source);
    let gutter = diags
        .iter()
        .map(|d| d.pos.line.to_string().len())
        .max()
        .unwrap_or(1);
    let mut cursor = Cursor::default();
    let mut out = String::new();
    for d in diags {
        let _ = writeln!(out, "{file}:{}:{}: {}", d.pos.line, d.pos.column, d.message);
        let Some(text) = lines.line(d.pos.line) else {
            continue;
        };
        let before = d.pos.column.saturating_sub(1);
        let (shown, caret) = if text.len() <= LONG_LINE {
            (Cow::Borrowed(text), before)
        } else {
            let (shown, caret) = excerpt(text, d.pos.line, before, &mut cursor);
            (Cow::Owned(shown), caret)
        };
        let mut pad: String = shown
            .chars()
            .take(caret)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let padded = pad.chars().count();
        pad.extend(std::iter::repeat_n(' ', caret.saturating_sub(padded)));
        let _ = writeln!(out, "{:>gutter$} | {shown}", d.pos.line);
        let _ = writeln!(out, "{:>gutter$} | {pad}^", "");
    }
    out
}

/// Lines longer than this (in bytes) are shown as an excerpt around the column.
const LONG_LINE: usize = 200;

/// Characters shown on each side of the column in an excerpt.
const EXCERPT: usize = 60;

/// Where the last excerpt's column was found: line, column (0-based) and byte offset in the
/// line, so that the diagnostics of one long line, in order, cost only the distance between
/// them.
#[derive(Debug, Default)]
struct Cursor {
    /// Line number.
    line: usize,
    /// 0-based column.
    column: usize,
    /// Byte offset of that column in the line.
    byte: usize,
}

/// An excerpt of a long line around the 0-based character column `before`, marked with `...`
/// where cut, and the column of the caret in it.
fn excerpt(text: &str, line: usize, before: usize, cursor: &mut Cursor) -> (String, usize) {
    let (mut column, mut byte) = if cursor.line == line && cursor.column <= before {
        (cursor.column, cursor.byte)
    } else {
        (0, 0)
    };
    while column < before {
        let Some(c) = char_at(text, byte) else { break };
        byte += c.len_utf8();
        column += 1;
    }
    *cursor = Cursor { line, column, byte };
    let head = text.get(..byte).unwrap_or("");
    let start = byte
        - head
            .chars()
            .rev()
            .take(EXCERPT)
            .map(char::len_utf8)
            .sum::<usize>();
    let tail = text.get(byte..).unwrap_or("");
    let end = byte
        + tail
            .chars()
            .take(EXCERPT)
            .map(char::len_utf8)
            .sum::<usize>();
    let mut shown = String::new();
    // A column past the end of the line keeps its distance from the end.
    let mut caret = before.saturating_sub(column);
    if start > 0 {
        shown.push_str("...");
        caret += 3;
    }
    caret += text.get(start..byte).map_or(0, |s| s.chars().count());
    shown.push_str(text.get(start..end).unwrap_or(""));
    if end < text.len() {
        shown.push_str("...");
    }
    (shown, caret)
}

/// The deepest `{ }` nesting accepted (scenario files need two levels: `host { cpu-wait-multiple
/// { ... } }`).
const MAX_DEPTH: usize = 16;

/// The longest run of slashdashes (`/-`) that follow each other directly.
const MAX_SLASHDASH_RUN: usize = 8;

/// Stack size of the thread that runs the `kdl` parser (it recurses; see [`prepare`]).
const KDL_STACK: usize = 32 << 20;

/// Readies a file for the `kdl` parser, whose recursive descent overflows the stack (an abort,
/// not a panic) on deep input: once per `{` level, once per chunk of a `/* */` comment, once per
/// slashdash that directly follows another. A scan that knows KDL v2's strings and comments
/// rejects nesting deeper than [`MAX_DEPTH`], slashdash runs longer than [`MAX_SLASHDASH_RUN`]
/// and unterminated `/*` comments, and replaces every `/* */` comment by as many spaces as it
/// has bytes (a comment is whitespace in KDL, and byte offsets stay those of `source`).
fn prepare<'a>(source: &'a str, lines: &Lines<'_>) -> Result<Cow<'a, str>, Vec<Diagnostic>> {
    let mut blanks: Vec<(usize, usize)> = Vec::new();
    let mut diags = Vec::new();
    let mut depth = 0usize;
    let mut run = 0usize;
    let mut i = 0usize;
    while let Some(c) = char_at(source, i) {
        let rest = source.get(i..).unwrap_or("");
        if rest.starts_with("//") {
            i = skip_line_comment(source, i + 2);
        } else if rest.starts_with("/*") {
            match skip_block_comment(source, i + 2) {
                Some(end) => {
                    blanks.push((i, end));
                    i = end;
                }
                None => {
                    diags.push(Diagnostic {
                        pos: lines.pos(i),
                        message: "KDL syntax error: this `/*` comment is never closed by `*/`"
                            .to_string(),
                    });
                    break;
                }
            }
        } else if rest.starts_with("/-") {
            run += 1;
            if run > MAX_SLASHDASH_RUN {
                diags.push(Diagnostic {
                    pos: lines.pos(i),
                    message: format!(
                        "more than {MAX_SLASHDASH_RUN} slashdashes `/-` in a row (the KDL \
                         parser cannot take more)"
                    ),
                });
                break;
            }
            i += 2;
        } else if c == '"' || (c == '#' && rest.trim_start_matches('#').starts_with('"')) {
            run = 0;
            let hashes = rest.bytes().take_while(|&b| b == b'#').count();
            let end = if hashes == 0 {
                skip_quoted(source, i)
            } else {
                skip_raw(source, i + hashes, hashes)
            };
            match end {
                Some(end) => i = end,
                None => {
                    // The `kdl` parser's recovery re-reads an unterminated multi-line string's
                    // text as KDL, braces included, past any depth check: stop here.
                    diags.push(Diagnostic {
                        pos: lines.pos(i),
                        message: "KDL syntax error: this multi-line string is never closed"
                            .to_string(),
                    });
                    break;
                }
            }
        } else if c == '#' {
            run = 0;
            i += rest.bytes().take_while(|&b| b == b'#').count();
        } else {
            if c == '{' {
                depth += 1;
                if depth > MAX_DEPTH {
                    diags.push(Diagnostic {
                        pos: lines.pos(i),
                        message: format!(
                            "`{{ }}` blocks nested more than {MAX_DEPTH} deep (scenario files \
                             nest at most 2)"
                        ),
                    });
                    break;
                }
            } else if c == '}' {
                depth = depth.saturating_sub(1);
            }
            if !(is_kdl_space(c) || is_kdl_newline(c) || c == '\\') {
                run = 0;
            }
            i += c.len_utf8();
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    if blanks.is_empty() {
        return Ok(Cow::Borrowed(source));
    }
    let mut bytes = source.as_bytes().to_vec();
    for (start, end) in blanks {
        if let Some(range) = bytes.get_mut(start..end) {
            range.fill(b' ');
        }
    }
    // Whole characters were replaced by ASCII spaces, so this is UTF-8.
    Ok(String::from_utf8(bytes).map_or(Cow::Borrowed(source), Cow::Owned))
}

/// Stack the `kdl` parser may need per `{` of the file: its recursion never goes deeper than
/// the file has `{` characters, whatever its error recovery does (measured: under 8 KiB a level).
const KDL_STACK_PER_BRACE: usize = 16 << 10;

/// The largest parser stack asked for (address space only: a thread's stack is backed as used).
const KDL_STACK_MAX: usize = 4 << 30;

/// Runs the `kdl` parser on a thread with a large stack: [`KDL_STACK`], plus enough for one
/// level per `{` in the text (so no input, however its recovery goes, can overflow it; the
/// depth checks of [`prepare`] keep valid files far from that). `None` if it panicked (a bug
/// there).
fn parse_kdl(text: &str) -> Option<Result<KdlDocument, KdlError>> {
    let braces = text.bytes().filter(|&b| b == b'{').count();
    let stack = braces
        .saturating_mul(KDL_STACK_PER_BRACE)
        .saturating_add(KDL_STACK)
        .min(KDL_STACK_MAX);
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("scenario-kdl".to_string())
            .stack_size(stack)
            .spawn_scoped(scope, || KdlDocument::parse_v2(text));
        match spawned {
            Ok(handle) => handle.join().ok(),
            Err(_) => Some(KdlDocument::parse_v2(text)),
        }
    })
}

/// The character at byte offset `i`, if `i` is inside the text and on a character boundary.
fn char_at(text: &str, i: usize) -> Option<char> {
    text.get(i..)?.chars().next()
}

/// KDL v2 `unicode-space`.
fn is_kdl_space(c: char) -> bool {
    matches!(
        c,
        '\t' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// KDL v2 `newline` (CRLF is two of them here, which changes nothing for scanning).
fn is_kdl_newline(c: char) -> bool {
    matches!(
        c,
        '\r' | '\n' | '\u{85}' | '\u{b}' | '\u{c}' | '\u{2028}' | '\u{2029}'
    )
}

/// The end of a `//` comment whose text starts at `i`: the newline that ends it.
fn skip_line_comment(text: &str, mut i: usize) -> usize {
    while let Some(c) = char_at(text, i) {
        if is_kdl_newline(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// The end (just after `*/`) of a `/*` comment whose text starts at `i`; comments nest.
fn skip_block_comment(text: &str, mut i: usize) -> Option<usize> {
    let mut open = 1usize;
    loop {
        let rest = text.get(i..)?;
        if rest.starts_with("*/") {
            open -= 1;
            i += 2;
            if open == 0 {
                return Some(i);
            }
        } else if rest.starts_with("/*") {
            open += 1;
            i += 2;
        } else {
            i += rest.chars().next()?.len_utf8();
        }
    }
}

/// The end of a quoted string (`"..."` or `"""..."""`) that starts at `i`. A single-line string
/// also ends at a newline (the `kdl` parser reports it).
fn skip_quoted(text: &str, i: usize) -> Option<usize> {
    let multi = text.get(i..).is_some_and(|r| r.starts_with("\"\"\""));
    let mut j = i + if multi { 3 } else { 1 };
    while let Some(c) = char_at(text, j) {
        if c == '\\' {
            j += 1;
            match char_at(text, j) {
                Some(w) if is_kdl_space(w) || is_kdl_newline(w) => {
                    while let Some(w) =
                        char_at(text, j).filter(|&w| is_kdl_space(w) || is_kdl_newline(w))
                    {
                        j += w.len_utf8();
                    }
                }
                Some(e) => j += e.len_utf8(),
                None => break,
            }
        } else if multi && text.get(j..).is_some_and(|r| r.starts_with("\"\"\"")) {
            return Some(j + 3);
        } else if !multi && c == '"' {
            return Some(j + 1);
        } else if !multi && is_kdl_newline(c) {
            return Some(j);
        } else {
            j += c.len_utf8();
        }
    }
    (!multi).then_some(text.len())
}

/// The end of a raw string whose opening quote is at `i`, after `hashes` `#`s: `"""` + newline
/// opens a multi-line one, closed by `"""` and as many `#`s; otherwise `"` and the `#`s close it,
/// and a newline ends it unterminated (a single-line string cannot hold one: the `kdl` parser
/// reports it there and goes on parsing after it, so the scan must count the braces that follow).
fn skip_raw(text: &str, i: usize, hashes: usize) -> Option<usize> {
    let rest = text.get(i..).unwrap_or("");
    let multi = rest.starts_with("\"\"\"") && char_at(rest, 3).is_some_and(is_kdl_newline);
    let (skip, quotes) = if multi { (3, "\"\"\"") } else { (1, "\"") };
    let close = format!("{quotes}{}", "#".repeat(hashes));
    let body = rest.get(skip..).unwrap_or("");
    let limit = if multi {
        body.len()
    } else {
        body.find(is_kdl_newline).unwrap_or(body.len())
    };
    match body.get(..limit).and_then(|b| b.find(&close)) {
        Some(at) => Some(i + skip + at + close.len()),
        None => (!multi).then_some(i + skip + limit),
    }
}

/// Line starts of a source text: byte offsets to 1-based line and column (in characters).
struct Lines<'s> {
    /// The text.
    source: &'s str,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
    /// The last position computed: (line start, byte offset, column), so that positions
    /// asked for in file order along one long line cost only the distance between them.
    last: Cell<(usize, usize, usize)>,
}

impl<'s> Lines<'s> {
    /// Indexes `source`.
    fn new(source: &'s str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines {
            source,
            starts,
            last: Cell::new((0, 0, 1)),
        }
    }

    /// The position of a byte offset (clamped to the text, rounded down to a character).
    fn pos(&self, offset: usize) -> Pos {
        let mut offset = offset.min(self.source.len());
        while offset > 0 && !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts.get(line - 1).copied().unwrap_or(0);
        let (last_start, last_offset, last_column) = self.last.get();
        let count =
            |from: usize, to: usize| self.source.get(from..to).map_or(0, |s| s.chars().count());
        let column = if last_start != start {
            1 + count(start, offset)
        } else if last_offset <= offset {
            last_column + count(last_offset, offset)
        } else if offset - start <= last_offset - offset {
            1 + count(start, offset)
        } else {
            last_column
                .saturating_sub(count(offset, last_offset))
                .max(1)
        };
        self.last.set((start, offset, column));
        Pos { line, column }
    }

    /// The text of a 1-based line, without its line break.
    fn line(&self, line: usize) -> Option<&'s str> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let end = self
            .starts
            .get(line)
            .map_or(self.source.len(), |&next| next.saturating_sub(1));
        let text = self.source.get(start..end)?;
        Some(text.strip_suffix('\r').unwrap_or(text))
    }
}

/// The diagnostics of a KDL syntax error, sorted, without repeats.
fn syntax_errors(lines: &Lines<'_>, err: &KdlError) -> Vec<Diagnostic> {
    let mut diags: Vec<Diagnostic> = err
        .diagnostics
        .iter()
        .map(|d| {
            let mut message = format!(
                "KDL syntax error: {}",
                d.message.as_deref().unwrap_or("invalid document")
            );
            if let Some(help) = &d.help {
                let _ = write!(message, " (help: {help})");
            }
            Diagnostic {
                pos: lines.pos(syntax_offset(lines.source, d)),
                message,
            }
        })
        .collect();
    if diags.is_empty() {
        diags.push(Diagnostic {
            pos: Pos { line: 1, column: 1 },
            message: "KDL syntax error: the document could not be parsed".to_string(),
        });
    }
    sort_dedup(&mut diags);
    diags
}

/// Where a syntax error is. The crate's span start is used, except for a missing or malformed
/// property value: that span runs from the start of the document (or of the enclosing block) to
/// the point of failure, so the error is placed at the start of the value that ends there (just
/// after the `=` when the value is missing).
fn syntax_offset(source: &str, d: &KdlDiagnostic) -> usize {
    let start = d.span.offset();
    if d.label.as_deref() != Some("not property value") {
        return start;
    }
    let end = start.saturating_add(d.span.len()).min(source.len());
    let Some(before) = source.get(..end) else {
        return start;
    };
    let token = before
        .chars()
        .rev()
        .take_while(|c| !c.is_whitespace() && *c != '=')
        .map(char::len_utf8)
        .sum::<usize>();
    end - token
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

    // ---------------------------------------------------------------------------------------
    // Node shape.

    /// Splits a node's entries and reports what does not fit its shape: type annotations,
    /// unknown and duplicate properties, missing and extra arguments, a missing or unexpected
    /// children block.
    fn read<'a>(&mut self, node: &'a KdlNode, shape: Shape<'_>) -> Reader<'a> {
        let name = node.name().value();
        let pos = self.node_pos(node);
        if let Some(ty) = node.ty() {
            self.error(
                pos,
                format!(
                    "type annotation `({})` on `{name}` is not used in scenario files",
                    ty.value()
                ),
            );
        }
        let mut reader = Reader {
            node: name,
            pos,
            args: Vec::new(),
            props: Vec::new(),
        };
        let mut seen: HashMap<&str, Pos> = HashMap::new();
        for e in node.entries() {
            let epos = self.entry_pos(e);
            if let Some(ty) = e.ty() {
                self.error(
                    epos,
                    format!(
                        "type annotation `({})` on `{name}` is not used in scenario files",
                        ty.value()
                    ),
                );
            }
            let Some(key) = e.name() else {
                reader.args.push(e);
                continue;
            };
            let key = key.value();
            if let Some(&first) = seen.get(key) {
                self.error(
                    epos,
                    format!(
                        "duplicate property `{key}` on `{name}` (first given at {}:{})",
                        first.line, first.column
                    ),
                );
                continue;
            }
            seen.insert(key, epos);
            if shape.props.contains(&key) {
                reader.props.push((key, e));
            } else if shape.props.is_empty() {
                self.error(
                    epos,
                    format!("unknown property `{key}` on `{name}` (it takes no properties)"),
                );
            } else {
                self.error(
                    epos,
                    format!(
                        "unknown property `{key}` on `{name}` (expected one of: {})",
                        shape.props.join(", ")
                    ),
                );
            }
        }
        let usage = usage(name, shape);
        let given = reader.args.len();
        if given < shape.args.len() {
            let missing = shape.args.get(given).copied().unwrap_or("");
            self.error(
                pos,
                format!("`{name}` is missing its {missing} argument (usage: {usage})"),
            );
        } else if !shape.variadic {
            for e in reader.args.iter().skip(shape.args.len()) {
                let epos = self.entry_pos(e);
                self.error(
                    epos,
                    format!(
                        "unexpected argument `{}` to `{name}` (usage: {usage})",
                        shown(e)
                    ),
                );
            }
        }
        match (shape.children, node.children()) {
            (false, Some(_)) => {
                self.error(pos, format!("`{name}` takes no children block `{{ }}`"));
            }
            (true, None) if name == "cpu-wait-multiple" => {
                self.error(
                    pos,
                    format!(
                        "`{name}` needs a children block of `FENCE VALUE` nodes (usage: {usage})"
                    ),
                );
            }
            _ => {}
        }
        reader
    }

    /// A required property; reports its absence.
    fn required<'a>(&mut self, r: &Reader<'a>, key: &str) -> Option<&'a KdlEntry> {
        let found = r.prop(key);
        if found.is_none() {
            self.error(
                r.pos,
                format!("missing required property `{key}` on `{}`", r.node),
            );
        }
        found
    }

    // ---------------------------------------------------------------------------------------
    // Values.

    /// An unsigned 64-bit number: a KDL integer, or a string in decimal or `0x` hex.
    fn num(&mut self, e: &KdlEntry, what: &str) -> Option<u64> {
        let value = match e.value() {
            KdlValue::Integer(i) => u64::try_from(*i).ok(),
            KdlValue::String(s) => parse_u64(s),
            _ => None,
        };
        if value.is_none() {
            let pos = self.entry_pos(e);
            self.error(
                pos,
                format!(
                    "bad number `{}` for {what} (expected an unsigned 64-bit integer, decimal or \
                     0x hex)",
                    shown(e)
                ),
            );
        }
        value
    }

    /// A number in `lo..=hi`.
    fn num_in(&mut self, e: &KdlEntry, what: &str, lo: u64, hi: u64) -> Option<u64> {
        let v = self.num(e, what)?;
        if (lo..=hi).contains(&v) {
            return Some(v);
        }
        let expected = if hi == u64::MAX {
            format!("at least {lo}")
        } else if lo == 0 {
            format!("at most {hi}")
        } else {
            format!("{lo} to {hi}")
        };
        let pos = self.entry_pos(e);
        self.error(
            pos,
            format!("{what} {} is out of range (expected {expected})", shown(e)),
        );
        None
    }

    /// A number that fits `width` (`value`, `reference`, `mask` of a host action).
    fn num_fit(&mut self, e: &KdlEntry, what: &str, width: Width) -> Option<u64> {
        let v = self.num(e, what)?;
        if v <= width.mask() {
            return Some(v);
        }
        let pos = self.entry_pos(e);
        self.error(
            pos,
            format!(
                "{what} {} is wider than {} bits (the node's width)",
                shown(e),
                width.bits()
            ),
        );
        None
    }

    /// A u32 (`init`, kernel values, `write-immediate`'s value).
    fn num32(&mut self, e: &KdlEntry, what: &str) -> Option<u32> {
        let v = self.num(e, what)?;
        let fits = u32::try_from(v).ok();
        if fits.is_none() {
            let pos = self.entry_pos(e);
            self.error(pos, format!("{what} {} does not fit in 32 bits", shown(e)));
        }
        fits
    }

    /// A string value.
    fn string<'a>(&mut self, e: &'a KdlEntry, what: &str) -> Option<&'a str> {
        let found = e.value().as_string();
        if found.is_none() {
            let pos = self.entry_pos(e);
            self.error(
                pos,
                format!("{what} must be a string, found `{}`", shown(e)),
            );
        }
        found
    }

    /// One of a set of names.
    fn choice<T: Copy>(&mut self, e: &KdlEntry, what: &str, options: &[(&str, T)]) -> Option<T> {
        let text = self.string(e, what)?;
        let found = options.iter().find(|(n, _)| *n == text).map(|&(_, v)| v);
        if found.is_none() {
            let names: Vec<&str> = options.iter().map(|&(n, _)| n).collect();
            let pos = self.entry_pos(e);
            self.error(
                pos,
                format!(
                    "unknown {what} `{text}` (expected one of: {})",
                    names.join(", ")
                ),
            );
        }
        found
    }

    /// `width` = 32 or 64.
    fn width(&mut self, e: &KdlEntry) -> Option<Width> {
        let v = self.num(e, "`width`")?;
        let width = match v {
            32 => Some(Width::W32),
            64 => Some(Width::W64),
            _ => None,
        };
        if width.is_none() {
            let pos = self.entry_pos(e);
            self.error(pos, format!("bad `width` {} (expected 32 or 64)", shown(e)));
        }
        width
    }

    /// A `kind` (direct, compute, copy).
    fn kind(&mut self, e: &KdlEntry) -> Option<QueueKind> {
        self.choice(
            e,
            "kind",
            &[
                ("direct", QueueKind::Direct),
                ("compute", QueueKind::Compute),
                ("copy", QueueKind::Copy),
            ],
        )
    }

    /// A CMP name.
    fn cmp(&mut self, e: &KdlEntry) -> Option<Comparison> {
        let options: Vec<(&str, Comparison)> = COMPARISONS
            .iter()
            .filter_map(|&n| Comparison::from_name(n).map(|c| (n, c)))
            .collect();
        self.choice(e, "comparison", &options)
    }

    /// A FLUSH string.
    fn flush(&mut self, e: &KdlEntry) -> Option<Flush> {
        let text = self.string(e, "`flush`")?;
        match Flush::parse(text) {
            Ok(flush) => Some(flush),
            Err(message) => {
                let pos = self.entry_pos(e);
                self.error(pos, message);
                None
            }
        }
    }

    /// A write `source`.
    fn source(&mut self, e: &KdlEntry) -> Option<WriteSource> {
        self.choice(
            e,
            "source",
            &[
                ("value", WriteSource::Value),
                ("gpu-timestamp", WriteSource::GpuTimestamp),
                ("system-timestamp", WriteSource::SystemTimestamp),
            ],
        )
    }

    /// A name argument (of a declaration), as a string.
    fn name_arg<'a>(&mut self, e: &'a KdlEntry, ns: Ns) -> Option<&'a str> {
        self.string(e, &format!("a {} name", ns.noun()))
    }

    /// Registers a declared name; reports a duplicate. `index` is the new declaration's index.
    fn declare(&mut self, ns: Ns, e: &KdlEntry, name: &str, index: usize) {
        let first = self.names[ns.slot()].get(name).copied();
        match first {
            Some(first) => {
                let at = self.decl_pos(ns, first);
                let pos = self.entry_pos(e);
                self.error(
                    pos,
                    format!(
                        "duplicate {} `{name}` (first declared at {}:{})",
                        ns.noun(),
                        at.line,
                        at.column
                    ),
                );
            }
            None => {
                self.names[ns.slot()].insert(name.to_string(), index);
            }
        }
    }

    /// Where a declaration was made.
    fn decl_pos(&self, ns: Ns, index: usize) -> Pos {
        let pos = match ns {
            Ns::Buffer => self.sc.buffers.get(index).map(|d| d.pos),
            Ns::Fence => self.sc.fences.get(index).map(|d| d.pos),
            Ns::Queue => self.sc.queues.get(index).map(|d| d.pos),
            Ns::List => self.sc.lists.get(index).map(|d| d.pos),
            Ns::Host => self.sc.hosts.get(index).map(|d| d.pos),
        };
        pos.unwrap_or_default()
    }

    /// A use of a declared name; reports an unknown one.
    fn lookup(&mut self, e: &KdlEntry, ns: Ns) -> Option<usize> {
        let name = self.string(e, &format!("a {} name", ns.noun()))?;
        let found = self.names[ns.slot()].get(name).copied();
        if found.is_none() {
            let pos = self.entry_pos(e);
            self.error(pos, format!("unknown {} `{name}`", ns.noun()));
        }
        found
    }

    /// An ADDRESS (`BUFFER` or `BUFFER+OFFSET`). With `bytes`, the range `[address, address +
    /// bytes)` must lie in the buffer.
    fn address(&mut self, e: &KdlEntry, what: &str, bytes: Option<u64>) -> Option<Addr> {
        let Some(text) = e.value().as_string() else {
            let pos = self.entry_pos(e);
            self.error(
                pos,
                format!(
                    "{what} must be an address (BUFFER or \"BUFFER+OFFSET\"), found `{}`",
                    shown(e)
                ),
            );
            return None;
        };
        let pos = self.entry_pos(e);
        let addr = if let Some(&buffer) = self.names[Ns::Buffer.slot()].get(text) {
            Addr { buffer, offset: 0 }
        } else if let Some((name, offset)) = text.rsplit_once('+') {
            let Some(&buffer) = self.names[Ns::Buffer.slot()].get(name) else {
                self.error(pos, format!("unknown buffer `{name}` in address `{text}`"));
                return None;
            };
            let Some(offset) = parse_u64(offset) else {
                self.error(
                    pos,
                    format!(
                        "bad offset `{offset}` in address `{text}` (expected an unsigned 64-bit \
                         integer, decimal or 0x hex)"
                    ),
                );
                return None;
            };
            Addr { buffer, offset }
        } else {
            self.error(pos, format!("unknown buffer `{text}`"));
            return None;
        };
        self.addrs.push((addr, text.to_string()));
        let size = self.buffer_size.get(addr.buffer).copied().flatten();
        if let (Some(bytes), Some(size)) = (bytes, size) {
            let inside = addr
                .offset
                .checked_add(bytes)
                .is_some_and(|end| end <= size);
            if !inside {
                let name = self
                    .sc
                    .buffers
                    .get(addr.buffer)
                    .map_or("", |b| b.name.as_str())
                    .to_string();
                self.error(
                    pos,
                    format!(
                        "address `{text}` ({bytes} bytes) is outside buffer `{name}` ({size} \
                         bytes)"
                    ),
                );
                return None;
            }
        }
        Some(addr)
    }

    // ---------------------------------------------------------------------------------------
    // Top level.

    /// One top-level node.
    fn top(&mut self, node: &KdlNode) {
        let name = node.name().value();
        match name {
            "device" => self.device(node),
            "buffer" => self.buffer(node),
            "fence" => self.fence(node),
            "queue" => self.queue(node),
            "list" => self.list(node),
            "host" => self.host(node),
            "expect-removed" => self.expect_removed(node),
            _ if ACTIONS.contains(&name) => {
                let pos = self.node_pos(node);
                if let Some(kind) = self.action(node) {
                    self.sc.main.push(Action { kind, pos });
                }
            }
            _ => {
                let pos = self.node_pos(node);
                if COMMANDS.contains(&name) {
                    self.error(
                        pos,
                        format!("`{name}` is a command: it belongs inside a `list` block"),
                    );
                } else {
                    self.error(
                        pos,
                        format!(
                            "unknown node `{name}` (expected one of: {}, {})",
                            DECLARATIONS.join(", "),
                            ACTIONS.join(", ")
                        ),
                    );
                }
            }
        }
    }

    /// `device`.
    fn device(&mut self, node: &KdlNode) {
        let r = self.read(
            node,
            Shape::new(&[], &["tdr-ms", "workers", "fifo-depth", "timestamp-hz"]),
        );
        if let Some(first) = self.device_at {
            self.error(
                r.pos,
                format!(
                    "duplicate `device` (first given at {}:{})",
                    first.line, first.column
                ),
            );
        } else {
            self.device_at = Some(r.pos);
        }
        if let Some(e) = r.prop("tdr-ms") {
            if let Some(v) = self.num_in(e, "`tdr-ms`", 1, u64::MAX) {
                self.sc.device.tdr_ms = v;
            }
        }
        if let Some(e) = r.prop("workers") {
            if let Some(v) = self.num_in(e, "`workers`", 1, 1024) {
                self.sc.device.workers = usize::try_from(v).ok();
            }
        }
        if let Some(e) = r.prop("fifo-depth") {
            if let Some(v) = self.num_in(e, "`fifo-depth`", 1, 65536) {
                if let Ok(v) = usize::try_from(v) {
                    self.sc.device.fifo_depth = v;
                }
            }
        }
        if let Some(e) = r.prop("timestamp-hz") {
            if let Some(v) = self.num_in(e, "`timestamp-hz`", 1, u64::MAX) {
                self.sc.device.timestamp_hz = v;
            }
        }
    }

    /// `buffer NAME size= heap= init=`.
    fn buffer(&mut self, node: &KdlNode) {
        let r = self.read(node, Shape::new(&["NAME"], &["size", "heap", "init"]));
        let size = self.required(&r, "size").and_then(|e| {
            let v = self.num(e, "`size`")?;
            if v == 0 || v % 4 != 0 {
                let pos = self.entry_pos(e);
                self.error(
                    pos,
                    format!("`size` {} is not a positive multiple of 4", shown(e)),
                );
                return None;
            }
            Some(v)
        });
        let heap = match r.prop("heap") {
            None => Some(Heap::DeviceLocal),
            Some(e) => {
                let text = self.string(e, "`heap`");
                let heap = text.and_then(Heap::from_name);
                if let (Some(text), None) = (text, heap) {
                    let pos = self.entry_pos(e);
                    self.error(
                        pos,
                        format!(
                            "unknown heap `{text}` (expected one of: device-local, upload, \
                             readback, shared)"
                        ),
                    );
                }
                heap
            }
        };
        let init = r.prop("init").map_or(Some(0), |e| self.num32(e, "`init`"));
        let index = self.sc.buffers.len();
        let name = r.arg(0).and_then(|e| self.name_arg(e, Ns::Buffer));
        self.sc.buffers.push(BufferDecl {
            name: name.unwrap_or_default().to_string(),
            size: size.unwrap_or(0),
            heap: heap.unwrap_or_default(),
            init: init.unwrap_or(0),
            pos: r.pos,
        });
        self.buffer_size.push(size);
        self.buffer_heap.push(heap);
        if let (Some(e), Some(name)) = (r.arg(0), name) {
            self.declare(Ns::Buffer, e, name, index);
        }
    }

    /// `fence NAME initial=`.
    fn fence(&mut self, node: &KdlNode) {
        let r = self.read(node, Shape::new(&["NAME"], &["initial"]));
        let initial = r
            .prop("initial")
            .map_or(Some(0), |e| self.num(e, "`initial`"));
        let index = self.sc.fences.len();
        let name = r.arg(0).and_then(|e| self.name_arg(e, Ns::Fence));
        self.sc.fences.push(FenceDecl {
            name: name.unwrap_or_default().to_string(),
            initial: initial.unwrap_or(0),
            pos: r.pos,
        });
        if let (Some(e), Some(name)) = (r.arg(0), name) {
            self.declare(Ns::Fence, e, name, index);
        }
    }

    /// `queue NAME kind=`.
    fn queue(&mut self, node: &KdlNode) {
        let r = self.read(node, Shape::new(&["NAME"], &["kind"]));
        let kind = self.required(&r, "kind").and_then(|e| self.kind(e));
        let index = self.sc.queues.len();
        let name = r.arg(0).and_then(|e| self.name_arg(e, Ns::Queue));
        self.sc.queues.push(QueueDecl {
            name: name.unwrap_or_default().to_string(),
            kind: kind.unwrap_or(QueueKind::Direct),
            pos: r.pos,
        });
        self.queue_kind.push(kind);
        if let (Some(e), Some(name)) = (r.arg(0), name) {
            self.declare(Ns::Queue, e, name, index);
        }
    }

    /// `list NAME kind= { commands }`.
    fn list(&mut self, node: &KdlNode) {
        let r = self.read(
            node,
            Shape {
                children: true,
                ..Shape::new(&["NAME"], &["kind"])
            },
        );
        let kind = self.required(&r, "kind").and_then(|e| self.kind(e));
        let index = self.sc.lists.len();
        let name = r.arg(0).and_then(|e| self.name_arg(e, Ns::List));
        let mut commands = Vec::new();
        // Library form of every command node, in order (a placeholder for a node that failed
        // its own checks), and the addresses each one names.
        let mut lowered = Vec::new();
        let mut positions = Vec::new();
        let mut addr_texts = Vec::new();
        for child in node.children().map_or(&[][..], KdlDocument::nodes) {
            let pos = self.node_pos(child);
            self.addrs.clear();
            let cmd = self.command(child);
            let lower = match &cmd {
                Some(cmd) => lower(cmd),
                None => placeholder(child.name().value()),
            };
            if let Some(cmd) = cmd {
                commands.push(CommandDecl { cmd, pos });
            }
            lowered.push(lower);
            positions.push(pos);
            addr_texts.push(std::mem::take(&mut self.addrs));
        }
        for err in command::validate(kind.unwrap_or(QueueKind::Direct), &lowered, 0) {
            let pos = positions.get(err.index).copied().unwrap_or(r.pos);
            let texts = addr_texts.get(err.index).map_or(&[][..], Vec::as_slice);
            let message = name_addresses(&err.message, texts);
            self.error(pos, message);
        }
        self.sc.lists.push(ListDecl {
            name: name.unwrap_or_default().to_string(),
            kind: kind.unwrap_or(QueueKind::Direct),
            commands,
            pos: r.pos,
        });
        self.list_kind.push(kind);
        if let (Some(e), Some(name)) = (r.arg(0), name) {
            self.declare(Ns::List, e, name, index);
        }
    }

    /// `host NAME { actions }`.
    fn host(&mut self, node: &KdlNode) {
        let r = self.read(
            node,
            Shape {
                children: true,
                ..Shape::new(&["NAME"], &[])
            },
        );
        let index = self.sc.hosts.len();
        let name = r.arg(0).and_then(|e| self.name_arg(e, Ns::Host));
        let host_name = name.unwrap_or_default();
        let mut actions = Vec::new();
        for child in node.children().map_or(&[][..], KdlDocument::nodes) {
            let child_name = child.name().value();
            let pos = self.node_pos(child);
            if ACTIONS.contains(&child_name) {
                if let Some(kind) = self.action(child) {
                    actions.push(Action { kind, pos });
                }
            } else if child_name == "host" {
                self.error(
                    pos,
                    format!("`host` blocks do not nest (this one is inside host `{host_name}`)"),
                );
            } else if DECLARATIONS.contains(&child_name) {
                self.error(
                    pos,
                    format!(
                        "`{child_name}` is only allowed at top level, not inside host \
                         `{host_name}`"
                    ),
                );
            } else if COMMANDS.contains(&child_name) {
                self.error(
                    pos,
                    format!("`{child_name}` is a command: it belongs inside a `list` block"),
                );
            } else {
                self.error(
                    pos,
                    format!(
                        "unknown action `{child_name}` in host `{host_name}` (expected one of: \
                         {})",
                        ACTIONS.join(", ")
                    ),
                );
            }
        }
        self.sc.hosts.push(HostDecl {
            name: host_name.to_string(),
            actions,
            pos: r.pos,
        });
        self.sc.main.push(Action {
            kind: ActionKind::StartHost(index),
            pos: r.pos,
        });
        if let (Some(e), Some(name)) = (r.arg(0), name) {
            self.declare(Ns::Host, e, name, index);
        }
    }

    /// `expect-removed reason=`.
    fn expect_removed(&mut self, node: &KdlNode) {
        let r = self.read(node, Shape::new(&[], &["reason"]));
        let reason = self.required(&r, "reason").and_then(|e| {
            self.choice(
                e,
                "removal reason",
                &[
                    ("hung", RemovalReason::Hung),
                    ("page-fault", RemovalReason::PageFault),
                    ("requested", RemovalReason::Requested),
                ],
            )
        });
        match self.sc.expect_removed {
            Some((_, first)) => self.error(
                r.pos,
                format!(
                    "duplicate `expect-removed` (first given at {}:{})",
                    first.line, first.column
                ),
            ),
            None => {
                self.sc.expect_removed = Some((reason.unwrap_or(RemovalReason::Hung), r.pos));
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Host actions.

    /// A host action (its name is in [`ACTIONS`]).
    fn action(&mut self, node: &KdlNode) -> Option<ActionKind> {
        match node.name().value() {
            "execute" => self.execute(node),
            "signal" | "wait" => self.queue_fence(node),
            "cpu-signal" => {
                let r = self.read(node, Shape::new(&["FENCE", "VALUE"], &[]));
                let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
                let value = r.arg(1).and_then(|e| self.num(e, "VALUE"));
                Some(ActionKind::CpuSignal {
                    fence: fence?,
                    value: value?,
                })
            }
            "cpu-wait" => {
                let r = self.read(node, Shape::new(&["FENCE", "VALUE"], &["timeout-ms"]));
                let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
                let value = r.arg(1).and_then(|e| self.num(e, "VALUE"));
                let timeout_ms = self.timeout(&r);
                Some(ActionKind::CpuWait {
                    fence: fence?,
                    value: value?,
                    timeout_ms: timeout_ms?,
                })
            }
            "cpu-wait-multiple" => self.cpu_wait_multiple(node),
            "cpu-write" => self.cpu_write(node),
            "cpu-poll" => self.cpu_poll(node),
            "sleep" => {
                let r = self.read(node, Shape::new(&[], &["ms"]));
                let ms = self.required(&r, "ms").and_then(|e| self.num(e, "`ms`"));
                Some(ActionKind::Sleep { ms: ms? })
            }
            "wait-idle" => {
                let r = self.read(node, Shape::new(&[], &["timeout-ms"]));
                let timeout_ms = self.timeout(&r);
                Some(ActionKind::WaitIdle {
                    timeout_ms: timeout_ms?,
                })
            }
            "remove-device" => {
                self.read(node, Shape::new(&[], &[]));
                Some(ActionKind::RemoveDevice)
            }
            "expect" => self.expect(node),
            "expect-fence" => self.expect_fence(node),
            _ => None,
        }
    }

    /// `timeout-ms` (default 10000).
    fn timeout(&mut self, r: &Reader<'_>) -> Option<u64> {
        r.prop("timeout-ms")
            .map_or(Some(10_000), |e| self.num(e, "`timeout-ms`"))
    }

    /// `execute QUEUE LIST...`.
    fn execute(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape {
                variadic: true,
                ..Shape::new(&["QUEUE", "LIST"], &[])
            },
        );
        let queue = r.arg(0).and_then(|e| self.lookup(e, Ns::Queue));
        let mut lists = Vec::new();
        let mut ok = queue.is_some() && r.args.len() >= 2;
        for e in r.args.iter().skip(1) {
            let Some(list) = self.lookup(e, Ns::List) else {
                ok = false;
                continue;
            };
            let list_kind = self.list_kind.get(list).copied().flatten();
            let queue_kind = queue.and_then(|q| self.queue_kind.get(q).copied().flatten());
            if let (Some(lk), Some(qk), Some(q)) = (list_kind, queue_kind, queue) {
                if lk != qk {
                    let list_name = self.sc.lists.get(list).map_or("", |l| l.name.as_str());
                    let queue_name = self.sc.queues.get(q).map_or("", |q| q.name.as_str());
                    let message =
                        format!("list `{list_name}` is a {lk} list; queue `{queue_name}` is {qk}");
                    let pos = self.entry_pos(e);
                    self.error(pos, message);
                    ok = false;
                }
            }
            lists.push(list);
        }
        if !ok {
            return None;
        }
        Some(ActionKind::Execute {
            queue: queue?,
            lists,
        })
    }

    /// `signal QUEUE FENCE VALUE` / `wait QUEUE FENCE VALUE`.
    fn queue_fence(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(node, Shape::new(&["QUEUE", "FENCE", "VALUE"], &[]));
        let queue = r.arg(0).and_then(|e| self.lookup(e, Ns::Queue));
        let fence = r.arg(1).and_then(|e| self.lookup(e, Ns::Fence));
        let value = r.arg(2).and_then(|e| self.num(e, "VALUE"));
        let (queue, fence, value) = (queue?, fence?, value?);
        if r.node == "signal" {
            Some(ActionKind::Signal {
                queue,
                fence,
                value,
            })
        } else {
            Some(ActionKind::Wait {
                queue,
                fence,
                value,
            })
        }
    }

    /// `cpu-wait-multiple { FENCE VALUE; ... } mode= timeout-ms=`.
    fn cpu_wait_multiple(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape {
                children: true,
                ..Shape::new(&[], &["mode", "timeout-ms"])
            },
        );
        let any = r.prop("mode").map_or(Some(false), |e| {
            self.choice(e, "wait mode", &[("all", false), ("any", true)])
        });
        let timeout_ms = self.timeout(&r);
        let mut fences = Vec::new();
        let mut ok = true;
        let children = node.children().map(KdlDocument::nodes);
        for child in children.unwrap_or(&[]) {
            let pos = self.node_pos(child);
            let c = self.read(child, Shape::new(&["VALUE"], &[]));
            let fence_name = child.name().value();
            let fence = self.names[Ns::Fence.slot()].get(fence_name).copied();
            if fence.is_none() {
                self.error(pos, format!("unknown fence `{fence_name}`"));
            }
            let value = c.arg(0).and_then(|e| self.num(e, "VALUE"));
            match (fence, value) {
                (Some(fence), Some(value)) => fences.push((fence, value)),
                _ => ok = false,
            }
        }
        if children.is_some_and(<[KdlNode]>::is_empty) {
            self.error(
                r.pos,
                "`cpu-wait-multiple` needs at least one `FENCE VALUE` child",
            );
            ok = false;
        }
        if !ok || children.is_none() {
            return None;
        }
        Some(ActionKind::CpuWaitMultiple {
            fences,
            any: any?,
            timeout_ms: timeout_ms?,
        })
    }

    /// The buffer's heap, when the address and the declaration are valid.
    fn heap_of(&self, addr: Option<Addr>) -> Option<(Heap, String)> {
        let addr = addr?;
        let heap = self.buffer_heap.get(addr.buffer).copied().flatten()?;
        let name = self.sc.buffers.get(addr.buffer)?.name.clone();
        Some((heap, name))
    }

    /// `cpu-write ADDRESS value= width=`.
    fn cpu_write(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(node, Shape::new(&["ADDRESS"], &["value", "width"]));
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(fit.bytes())));
        let mut heap_ok = true;
        if let Some((heap, name)) = self.heap_of(addr) {
            if !heap.cpu_writable() {
                self.error(
                    r.pos,
                    format!(
                        "`cpu-write` to buffer `{name}` ({heap} heap) is not allowed: the CPU \
                         writes only upload and shared buffers (M1)"
                    ),
                );
                heap_ok = false;
            }
        }
        let value = self
            .required(&r, "value")
            .and_then(|e| self.num_fit(e, "`value`", fit));
        if !heap_ok {
            return None;
        }
        Some(ActionKind::CpuWrite {
            addr: addr?,
            width: width?,
            value: value?,
        })
    }

    /// `cpu-poll ADDRESS cmp= reference= mask= width= timeout-ms=`.
    fn cpu_poll(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(
                &["ADDRESS"],
                &["cmp", "reference", "mask", "width", "timeout-ms"],
            ),
        );
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(fit.bytes())));
        let mut heap_ok = true;
        if let Some((heap, name)) = self.heap_of(addr) {
            if !heap.cpu_readable() {
                self.error(
                    r.pos,
                    format!(
                        "`cpu-poll` of buffer `{name}` ({heap} heap) is not allowed: the CPU \
                         reads only upload, readback and shared buffers (M1)"
                    ),
                );
                heap_ok = false;
            }
        }
        let cmp = self.required(&r, "cmp").and_then(|e| self.cmp(e));
        let reference = self
            .required(&r, "reference")
            .and_then(|e| self.num_fit(e, "`reference`", fit));
        let mask = r
            .prop("mask")
            .map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
        let timeout_ms = self.timeout(&r);
        if !heap_ok {
            return None;
        }
        Some(ActionKind::CpuPoll {
            addr: addr?,
            width: width?,
            cmp: cmp?,
            reference: reference?,
            mask: mask?,
            timeout_ms: timeout_ms?,
        })
    }

    /// `expect ADDRESS width= count= (equals= | cmp= reference= [mask=] | cmp= reference-at=
    /// [mask=])`.
    fn expect(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(
                &["ADDRESS"],
                &[
                    "width",
                    "count",
                    "equals",
                    "cmp",
                    "reference",
                    "reference-at",
                    "mask",
                ],
            ),
        );
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let count = r
            .prop("count")
            .map_or(Some(1), |e| self.num_in(e, "`count`", 1, u64::MAX));
        let bytes = count.map(|c| c.saturating_mul(fit.bytes()));
        let addr = r.arg(0).and_then(|e| self.address(e, "ADDRESS", bytes));
        let form = (
            r.prop("equals"),
            r.prop("cmp"),
            r.prop("reference"),
            r.prop("reference-at"),
            r.prop("mask"),
        );
        let check = match form {
            (Some(equals), None, None, None, None) => {
                Check::Equals(self.num_fit(equals, "`equals`", fit)?)
            }
            (None, Some(cmp), Some(reference), None, mask) => {
                let cmp = self.cmp(cmp);
                let reference = self.num_fit(reference, "`reference`", fit);
                let mask = mask.map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
                Check::Compare {
                    cmp: cmp?,
                    reference: reference?,
                    mask: mask?,
                }
            }
            (None, Some(cmp), None, Some(other), mask) => {
                let cmp = self.cmp(cmp);
                let other = self.address(other, "`reference-at`", bytes);
                let mask = mask.map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
                Check::CompareAt {
                    cmp: cmp?,
                    other: other?,
                    mask: mask?,
                }
            }
            _ => {
                let found: Vec<&str> = ["equals", "cmp", "reference", "reference-at", "mask"]
                    .into_iter()
                    .filter(|k| r.prop(k).is_some())
                    .collect();
                let found = if found.is_empty() {
                    "none of them".to_string()
                } else {
                    format!("found: {}", found.join(", "))
                };
                self.error(
                    r.pos,
                    format!(
                        "`expect` needs exactly one of: `equals`, `cmp` + `reference` (+ `mask`), \
                         or `cmp` + `reference-at` (+ `mask`) ({found})"
                    ),
                );
                return None;
            }
        };
        Some(ActionKind::Expect {
            addr: addr?,
            width: width?,
            count: count?,
            check,
        })
    }

    /// `expect-fence FENCE (equals= | cmp= reference=)`.
    fn expect_fence(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(&["FENCE"], &["equals", "cmp", "reference"]),
        );
        let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
        let check = match (r.prop("equals"), r.prop("cmp"), r.prop("reference")) {
            (Some(equals), None, None) => Check::Equals(self.num(equals, "`equals`")?),
            (None, Some(cmp), Some(reference)) => {
                let cmp = self.cmp(cmp);
                let reference = self.num(reference, "`reference`");
                Check::Compare {
                    cmp: cmp?,
                    reference: reference?,
                    mask: u64::MAX,
                }
            }
            _ => {
                let found: Vec<&str> = ["equals", "cmp", "reference"]
                    .into_iter()
                    .filter(|k| r.prop(k).is_some())
                    .collect();
                let found = if found.is_empty() {
                    "none of them".to_string()
                } else {
                    format!("found: {}", found.join(", "))
                };
                self.error(
                    r.pos,
                    format!(
                        "`expect-fence` needs exactly one of: `equals`, or `cmp` + `reference` \
                         ({found})"
                    ),
                );
                return None;
            }
        };
        Some(ActionKind::ExpectFence {
            fence: fence?,
            check,
        })
    }

    // ---------------------------------------------------------------------------------------
    // Commands.

    /// A command of a list; `None` when the node itself is wrong (already reported).
    fn command(&mut self, node: &KdlNode) -> Option<ListCommand> {
        let name = node.name().value();
        match name {
            "wait-value32" => self.wait_value(node, Width::W32),
            "wait-value64" => self.wait_value(node, Width::W64),
            "write-value32-bop" => self.write_bop(node, Width::W32),
            "write-value64-bop" => self.write_bop(node, Width::W64),
            "write-value32-top" => self.write_top(node, Width::W32),
            "write-value64-top" => self.write_top(node, Width::W64),
            "write-immediate" => {
                let r = self.read(node, Shape::new(&["ADDRESS"], &["value", "mode"]));
                let addr = r.arg(0).and_then(|e| self.address(e, "ADDRESS", Some(4)));
                let value = self
                    .required(&r, "value")
                    .and_then(|e| self.num32(e, "`value`"));
                let mode = r.prop("mode").map_or(Some(ImmediateMode::Default), |e| {
                    self.choice(
                        e,
                        "mode",
                        &[
                            ("default", ImmediateMode::Default),
                            ("marker-in", ImmediateMode::MarkerIn),
                            ("marker-out", ImmediateMode::MarkerOut),
                        ],
                    )
                });
                Some(ListCommand::WriteImmediate {
                    addr: addr?,
                    value: value?,
                    mode: mode?,
                })
            }
            "flush-pipeline" => {
                let r = self.read(node, Shape::new(&[], &["flush"]));
                let flush = r.prop("flush").map_or(Some(Flush::NONE), |e| self.flush(e));
                Some(ListCommand::FlushPipeline { flush: flush? })
            }
            "dispatch" | "dispatch-indirect" => self.dispatch(node),
            "copy" => {
                let r = self.read(node, Shape::new(&[], &["dst", "src", "bytes"]));
                let bytes = self
                    .required(&r, "bytes")
                    .and_then(|e| self.num(e, "`bytes`"));
                let dst = self
                    .required(&r, "dst")
                    .and_then(|e| self.address(e, "`dst`", bytes));
                let src = self
                    .required(&r, "src")
                    .and_then(|e| self.address(e, "`src`", bytes));
                Some(ListCommand::Copy {
                    dst: dst?,
                    src: src?,
                    bytes: bytes?,
                })
            }
            "marker" | "begin-event" => {
                let r = self.read(node, Shape::new(&["TEXT"], &[]));
                let text = r.arg(0).and_then(|e| self.string(e, "TEXT"))?.to_string();
                Some(if name == "marker" {
                    ListCommand::Marker(text)
                } else {
                    ListCommand::BeginEvent(text)
                })
            }
            "end-event" => {
                self.read(node, Shape::new(&[], &[]));
                Some(ListCommand::EndEvent)
            }
            _ => {
                let pos = self.node_pos(node);
                if ACTIONS.contains(&name) {
                    self.error(
                        pos,
                        format!(
                            "`{name}` is a host action, not a command: it belongs at top level \
                             or in a `host` block"
                        ),
                    );
                } else {
                    self.error(
                        pos,
                        format!(
                            "unknown command `{name}` (expected one of: {})",
                            COMMANDS.join(", ")
                        ),
                    );
                }
                None
            }
        }
    }

    /// `wait-value32/64 ADDRESS cmp= reference= mask= engine=`.
    fn wait_value(&mut self, node: &KdlNode, width: Width) -> Option<ListCommand> {
        let r = self.read(
            node,
            Shape::new(&["ADDRESS"], &["cmp", "reference", "mask", "engine"]),
        );
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(width.bytes())));
        let cmp = self.required(&r, "cmp").and_then(|e| self.cmp(e));
        let reference = self
            .required(&r, "reference")
            .and_then(|e| self.num(e, "`reference`"));
        let mask = r
            .prop("mask")
            .map_or(Some(width.mask()), |e| self.num(e, "`mask`"));
        let engine = r.prop("engine").map_or(Some(WaitEngine::Me), |e| {
            self.choice(
                e,
                "engine",
                &[("me", WaitEngine::Me), ("pfp", WaitEngine::Pfp)],
            )
        });
        Some(ListCommand::WaitValue {
            addr: addr?,
            width,
            cmp: cmp?,
            reference: reference?,
            mask: mask?,
            engine: engine?,
        })
    }

    /// `write-value32/64-bop ADDRESS value= flush= source=`.
    fn write_bop(&mut self, node: &KdlNode, width: Width) -> Option<ListCommand> {
        let r = self.read(
            node,
            Shape::new(&["ADDRESS"], &["value", "flush", "source"]),
        );
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(width.bytes())));
        let value = r.prop("value").map_or(Some(0), |e| self.num(e, "`value`"));
        let flush = r.prop("flush").map_or(Some(Flush::NONE), |e| self.flush(e));
        let source = r
            .prop("source")
            .map_or(Some(WriteSource::Value), |e| self.source(e));
        Some(ListCommand::WriteBottomOfPipe {
            addr: addr?,
            width,
            value: value?,
            flush: flush?,
            source: source?,
        })
    }

    /// `write-value32/64-top ADDRESS value= source=`.
    fn write_top(&mut self, node: &KdlNode, width: Width) -> Option<ListCommand> {
        let r = self.read(node, Shape::new(&["ADDRESS"], &["value", "source"]));
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(width.bytes())));
        let value = r.prop("value").map_or(Some(0), |e| self.num(e, "`value`"));
        let source = r
            .prop("source")
            .map_or(Some(WriteSource::Value), |e| self.source(e));
        Some(ListCommand::WriteTopOfPipe {
            addr: addr?,
            width,
            value: value?,
            source: source?,
        })
    }

    /// `dispatch KERNEL groups= ...` / `dispatch-indirect KERNEL args= ...`.
    fn dispatch(&mut self, node: &KdlNode) -> Option<ListCommand> {
        let indirect = node.name().value() == "dispatch-indirect";
        let first = if indirect { "args" } else { "groups" };
        // The kernel decides which properties are allowed; an unknown kernel allows them all
        // (so that only the kernel name is reported).
        let kernel = node
            .entries()
            .iter()
            .find(|e| e.name().is_none())
            .and_then(|e| e.value().as_string())
            .filter(|k| KERNELS.contains(k));
        let kernel_props: &[&str] = match kernel {
            Some("fill") => &["dst", "value"],
            Some("add") => &["dst", "src", "value"],
            Some("sum") => &["dst", "src"],
            Some("spin") => &["ns"],
            _ => &["dst", "src", "value", "ns"],
        };
        let mut props = vec![first];
        props.extend_from_slice(kernel_props);
        let r = self.read(node, Shape::new(&["KERNEL"], &props));
        if let Some(e) = r.arg(0) {
            let known = self
                .string(e, "KERNEL")
                .is_some_and(|k| KERNELS.contains(&k));
            if !known && e.value().is_string() {
                let pos = self.entry_pos(e);
                self.error(
                    pos,
                    format!(
                        "unknown kernel `{}` (expected one of: {})",
                        shown(e),
                        KERNELS.join(", ")
                    ),
                );
            }
        }
        let groups = if indirect {
            None
        } else {
            self.required(&r, "groups")
                .and_then(|e| self.num_in(e, "`groups`", 0, u64::from(u32::MAX)))
                .and_then(|g| u32::try_from(g).ok())
        };
        let args = if indirect {
            self.required(&r, "args")
                .and_then(|e| self.address(e, "`args`", Some(4)))
        } else {
            None
        };
        let kernel = match kernel? {
            "fill" => {
                let dst = self
                    .required(&r, "dst")
                    .and_then(|e| self.address(e, "`dst`", Some(4)));
                let value = self
                    .required(&r, "value")
                    .and_then(|e| self.num32(e, "`value`"));
                KernelDecl::Fill {
                    dst: dst?,
                    value: value?,
                }
            }
            "add" => {
                let dst = self
                    .required(&r, "dst")
                    .and_then(|e| self.address(e, "`dst`", Some(4)));
                let src = self
                    .required(&r, "src")
                    .and_then(|e| self.address(e, "`src`", Some(4)));
                let value = self
                    .required(&r, "value")
                    .and_then(|e| self.num32(e, "`value`"));
                KernelDecl::Add {
                    dst: dst?,
                    src: src?,
                    value: value?,
                }
            }
            "sum" => {
                let dst = self
                    .required(&r, "dst")
                    .and_then(|e| self.address(e, "`dst`", Some(8)));
                let src = self
                    .required(&r, "src")
                    .and_then(|e| self.address(e, "`src`", Some(4)));
                KernelDecl::Sum {
                    dst: dst?,
                    src: src?,
                }
            }
            _ => {
                let ns = self.required(&r, "ns").and_then(|e| self.num(e, "`ns`"));
                KernelDecl::Spin { ns: ns? }
            }
        };
        if indirect {
            Some(ListCommand::DispatchIndirect {
                kernel,
                args: args?,
            })
        } else {
            Some(ListCommand::Dispatch {
                kernel,
                groups: groups?,
            })
        }
    }
}

/// `name ARG ARG...` for messages.
fn usage(name: &str, shape: Shape<'_>) -> String {
    let mut text = name.to_string();
    for arg in shape.args {
        text.push(' ');
        text.push_str(arg);
    }
    if shape.variadic {
        text.push_str("...");
    }
    if shape.children {
        text.push_str(" { ... }");
    }
    text
}

/// An entry's value as written: the text of a string, the source form of anything else.
fn shown(e: &KdlEntry) -> String {
    match e.value() {
        KdlValue::String(s) => s.clone(),
        other => match e.format() {
            Some(f) if !f.value_repr.is_empty() => f.value_repr.clone(),
            _ => other.to_string(),
        },
    }
}

/// Decimal or `0x` hex, unsigned 64-bit.
fn parse_u64(text: &str) -> Option<u64> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// The fake GPU address used to validate commands: each buffer at its own 4 GiB-aligned base,
/// so that alignment is kept.
fn fake_address(addr: Addr) -> u64 {
    const BASE: u64 = 0x1_0000_0000;
    BASE.wrapping_add((addr.buffer as u64).wrapping_mul(BASE))
        .wrapping_add(addr.offset)
}

/// The library form of a command (for validation).
fn lower(cmd: &ListCommand) -> Command {
    match cmd {
        ListCommand::WaitValue {
            addr,
            width,
            cmp,
            reference,
            mask,
            engine,
        } => Command::WaitValue {
            address: fake_address(*addr),
            width: *width,
            cmp: *cmp,
            reference: *reference,
            mask: *mask,
            engine: *engine,
        },
        ListCommand::WriteBottomOfPipe {
            addr,
            width,
            value,
            flush,
            source,
        } => Command::WriteValueBottomOfPipe {
            address: fake_address(*addr),
            width: *width,
            value: *value,
            flush: *flush,
            source: *source,
        },
        ListCommand::WriteTopOfPipe {
            addr,
            width,
            value,
            source,
        } => Command::WriteValueTopOfPipe {
            address: fake_address(*addr),
            width: *width,
            value: *value,
            source: *source,
        },
        ListCommand::WriteImmediate { addr, value, mode } => Command::WriteImmediate {
            writes: vec![ImmediateWrite {
                address: fake_address(*addr),
                value: *value,
                mode: *mode,
            }],
        },
        ListCommand::FlushPipeline { flush } => Command::FlushPipeline { flush: *flush },
        ListCommand::Dispatch { kernel, groups } => Command::Dispatch {
            kernel: lower_kernel(kernel),
            groups: *groups,
        },
        ListCommand::DispatchIndirect { kernel, args } => Command::DispatchIndirect {
            kernel: lower_kernel(kernel),
            args: fake_address(*args),
        },
        ListCommand::Copy { dst, src, bytes } => Command::Copy {
            dst: fake_address(*dst),
            src: fake_address(*src),
            bytes: *bytes,
        },
        ListCommand::Marker(label) => Command::SetMarker {
            label: label.clone(),
        },
        ListCommand::BeginEvent(label) => Command::BeginEvent {
            label: label.clone(),
        },
        ListCommand::EndEvent => Command::EndEvent,
    }
}

/// The library form of a kernel.
fn lower_kernel(kernel: &KernelDecl) -> KernelArgs {
    match kernel {
        KernelDecl::Fill { dst, value } => KernelArgs::Fill {
            dst: fake_address(*dst),
            value: *value,
        },
        KernelDecl::Add { dst, src, value } => KernelArgs::Add {
            dst: fake_address(*dst),
            src: fake_address(*src),
            value: *value,
        },
        KernelDecl::Sum { dst, src } => KernelArgs::Sum {
            dst: fake_address(*dst),
            src: fake_address(*src),
        },
        KernelDecl::Spin { ns } => KernelArgs::Spin { ns: *ns },
    }
}

/// What stands in for a command node that failed its own checks, so that the indices of the
/// others are kept: an event node keeps its effect on event balance, anything else is a marker
/// (which no rule rejects).
fn placeholder(name: &str) -> Command {
    match name {
        "begin-event" => Command::BeginEvent {
            label: String::new(),
        },
        "end-event" => Command::EndEvent,
        _ => Command::SetMarker {
            label: String::new(),
        },
    }
}

/// Replaces the fake GPU addresses in a library message by the addresses as written
/// (`address 0x100000002 is not ...` becomes ``address `flags+2` is not ...``). Only a hex word
/// right after `address`, `destination` or `source` is an address.
fn name_addresses(message: &str, addrs: &[(Addr, String)]) -> String {
    let mut words: Vec<String> = message.split(' ').map(str::to_string).collect();
    for i in 1..words.len() {
        let after_address = words
            .get(i - 1)
            .is_some_and(|w| matches!(w.as_str(), "address" | "destination" | "source"));
        if !after_address {
            continue;
        }
        let Some(word) = words.get(i) else { continue };
        let text = addrs
            .iter()
            .find(|(addr, _)| format!("{:#x}", fake_address(*addr)) == *word)
            .map(|(_, text)| format!("`{text}`"));
        if let (Some(text), Some(slot)) = (text, words.get_mut(i)) {
            *slot = text;
        }
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_characters() {
        let lines = Lines::new("ab\n\u{e9}x\r\nlast");
        assert_eq!(lines.pos(0), Pos { line: 1, column: 1 });
        assert_eq!(lines.pos(3), Pos { line: 2, column: 1 });
        // After the two-byte é.
        assert_eq!(lines.pos(5), Pos { line: 2, column: 2 });
        // Inside é rounds down; past the end clamps.
        assert_eq!(lines.pos(4), Pos { line: 2, column: 1 });
        assert_eq!(lines.pos(999), Pos { line: 3, column: 5 });
        // Backwards on one line, near and far from the last position.
        let long = Lines::new("\u{e9}\u{e9}abcdef\u{e9}gh");
        assert_eq!(
            long.pos(13),
            Pos {
                line: 1,
                column: 11
            }
        );
        assert_eq!(long.pos(11), Pos { line: 1, column: 9 });
        assert_eq!(long.pos(2), Pos { line: 1, column: 2 });
        assert_eq!(long.pos(9), Pos { line: 1, column: 8 });
        assert_eq!(lines.line(2), Some("\u{e9}x"));
        assert_eq!(lines.line(0), None);
        assert_eq!(lines.line(4), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0x10"), Some(16));
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64("18446744073709551616"), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("+1"), None);
        assert_eq!(parse_u64("0x"), None);
        assert_eq!(parse_u64(""), None);
    }

    #[test]
    fn library_addresses_are_named() {
        let addr = Addr {
            buffer: 1,
            offset: 2,
        };
        let text = name_addresses(
            &format!(
                "address {:#x} is not 8-byte aligned (64-bit wait)",
                fake_address(addr)
            ),
            &[(addr, "flags+2".to_string())],
        );
        assert_eq!(
            text,
            "address `flags+2` is not 8-byte aligned (64-bit wait)"
        );
        // A value that happens to equal the address is left alone.
        let value = format!("value {:#x} does not fit", fake_address(addr));
        assert_eq!(name_addresses(&value, &[(addr, "x".to_string())]), value);
    }
}
