//! The syntax stage: a pre-pass that readies a file for the `kdl` parser (rejects nesting and
//! slashdash runs that would overflow its recursion, blanks `/* */` comments), the run of that
//! parser on a thread with a large stack, and its syntax errors as diagnostics.

use std::borrow::Cow;
use std::fmt::Write as _;

use kdl::{KdlDiagnostic, KdlDocument, KdlError};

use crate::plan::{Diagnostic, Pos};

use super::lines::Lines;
use super::sort_dedup;

/// The deepest `{ }` nesting accepted (scenario files need two levels: `host { cpu-wait-multiple
/// { ... } }`).
const MAX_DEPTH: usize = 16;

/// Type annotations not closed by `)` from which the scan reports the first itself (fewer go to
/// the `kdl` parser, which reports them with the file's other errors).
const MAX_UNCLOSED_ANNOTATIONS: usize = 32;

/// The longest run of slashdashes (`/-`) that follow each other directly.
const MAX_SLASHDASH_RUN: usize = 8;

/// Stack size of the thread that runs the `kdl` parser (it recurses; see [`prepare`]).
const KDL_STACK: usize = 32 << 20;

/// Readies a file for the `kdl` parser, whose recursive descent overflows the stack (an abort,
/// not a panic) on deep input: once per `{` level, once per chunk of a `/* */` comment, once per
/// slashdash that directly follows another. A scan that knows KDL v2's strings and comments
/// rejects nesting deeper than [`MAX_DEPTH`], slashdash runs longer than [`MAX_SLASHDASH_RUN`],
/// unterminated `/*` comments and [`MAX_UNCLOSED_ANNOTATIONS`] or more type annotations `(` not
/// closed by `)` (whose recovery takes the parser time quadratic in the token), and replaces every `/* */` comment by as many spaces as it
/// has bytes (a comment is whitespace in KDL, and byte offsets stay those of `source`).
pub(super) fn prepare<'a>(
    source: &'a str,
    lines: &Lines<'_>,
) -> Result<Cow<'a, str>, Vec<Diagnostic>> {
    let mut blanks: Vec<(usize, usize)> = Vec::new();
    let mut diags = Vec::new();
    let mut depth = 0usize;
    let mut run = 0usize;
    // Type annotations not closed by `)`: how many, and where the first one is.
    let mut unclosed: (usize, Option<usize>) = (0, None);
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
                if depth == 0 {
                    // The `kdl` parser's recovery recurses once per stray `}` (and reports each).
                    diags.push(Diagnostic {
                        pos: lines.pos(i),
                        message: "KDL syntax error: this `}` closes no `{`".to_string(),
                    });
                    break;
                }
                depth -= 1;
            }
            if c == '(' && !type_annotation_closes(source, i) {
                unclosed.0 += 1;
                unclosed.1.get_or_insert(i);
            }
            if !(is_kdl_space(c) || is_kdl_newline(c) || c == '\\') {
                run = 0;
            }
            i += c.len_utf8();
        }
    }
    if let (n @ MAX_UNCLOSED_ANNOTATIONS.., Some(first)) = unclosed {
        // The `kdl` parser's recovery from unclosed annotations inside a long token
        // (`=(=(=(...`) takes time quadratic in the token's length; a few it reports as usual.
        diags.push(Diagnostic {
            pos: lines.pos(first),
            message: format!(
                "KDL syntax error: this type annotation `(` is not closed by `)` (it holds one \
                 type name: `(u8)1`, `(\"my type\")node`), nor are {} more after it",
                n - 1
            ),
        });
    }
    if !diags.is_empty() {
        // The first error in the file, whichever check found it.
        diags.sort_by_key(|d| (d.pos.line, d.pos.column));
        diags.truncate(1);
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

/// Whether the type annotation opened by the `(` at `i` is closed: a KDL type annotation holds
/// one string (an identifier, or a quoted or raw string) between optional spaces, then `)`.
fn type_annotation_closes(text: &str, i: usize) -> bool {
    let mut j = i + 1;
    while let Some(c) = char_at(text, j) {
        let rest = text.get(j..).unwrap_or("");
        if c == ')' {
            return true;
        } else if c == '"' {
            match skip_quoted(text, j) {
                Some(end) => j = end,
                None => return false,
            }
        } else if c == '#' && rest.trim_start_matches('#').starts_with('"') {
            let hashes = rest.bytes().take_while(|&b| b == b'#').count();
            match skip_raw(text, j + hashes, hashes) {
                Some(end) => j = end,
                None => return false,
            }
        } else if is_kdl_newline(c) || "\\/(){};[]=#".contains(c) {
            return false;
        } else {
            j += c.len_utf8();
        }
    }
    false
}

/// Stack the `kdl` parser may need per byte of the text it is given. Its error recovery recurses
/// once per place where the document stops parsing (a stray `}`, `)`, `=`, a repeated type
/// annotation, ...: `document` skips one character and calls itself), so garbage recurses about
/// once per byte; measured: about 560 bytes of stack per stray `}`, 220 per `=`, 75 per byte of
/// `(t)(t)...` (release build). Twice the worst seen; unoptimized builds have frames several
/// times larger. (A file over 64 KiB is given to it in windows first, see `windows`: a window of
/// garbage touches a few MB of stack.)
const KDL_STACK_PER_BYTE: usize = if cfg!(debug_assertions) {
    16 << 10
} else {
    1 << 10
};

/// The largest file the parser takes (4 MiB; the largest scenario seen, 16,000 generated
/// dispatch pairs, is 1 MiB). Garbage costs the `kdl` parser about 1.4 KB of memory per byte
/// (one error each) and up to [`KDL_STACK_PER_BYTE`] of stack, so a file over 64 KiB is never
/// given to it whole before its windows showed few errors (see `windows`: a 4 MiB file of
/// garbage costs about 60 MB, not 5.6 GB); this bounds the stack asked for.
pub(super) const MAX_SOURCE_BYTES: usize = 4 << 20;

/// The largest parser stack asked for (address space only: a thread's stack is backed as used).
const KDL_STACK_MAX: usize = KDL_STACK + MAX_SOURCE_BYTES * KDL_STACK_PER_BYTE;

/// Why the `kdl` parser was not run.
#[derive(Debug)]
pub(super) enum ParseKdlError {
    /// It panicked (a bug there).
    Panicked,
    /// No thread with the stack the file may need could be started (address space or memory
    /// limits): the bytes asked for.
    NoStack(usize),
}

/// Runs the `kdl` parser on a thread whose stack grows with the file: [`KDL_STACK`] plus
/// [`KDL_STACK_PER_BYTE`] per byte, so no input, however its recovery goes, can overflow it
/// (the caller keeps files under [`MAX_SOURCE_BYTES`]); the depth checks of [`prepare`] keep
/// valid files far from that.
pub(super) fn parse_kdl(text: &str) -> Result<Result<KdlDocument, KdlError>, ParseKdlError> {
    let stack = text
        .len()
        .saturating_mul(KDL_STACK_PER_BYTE)
        .saturating_add(KDL_STACK)
        .min(KDL_STACK_MAX);
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("scenario-kdl".to_string())
            .stack_size(stack)
            .spawn_scoped(scope, || KdlDocument::parse_v2(text));
        match spawned {
            Ok(handle) => handle.join().map_err(|_| ParseKdlError::Panicked),
            Err(_) => Err(ParseKdlError::NoStack(stack)),
        }
    })
}

/// The character at byte offset `i`, if `i` is inside the text and on a character boundary.
pub(super) fn char_at(text: &str, i: usize) -> Option<char> {
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
pub(super) fn skip_line_comment(text: &str, mut i: usize) -> usize {
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
pub(super) fn skip_quoted(text: &str, i: usize) -> Option<usize> {
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
pub(super) fn skip_raw(text: &str, i: usize, hashes: usize) -> Option<usize> {
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

/// The diagnostics of a KDL syntax error, sorted, without repeats.
pub(super) fn syntax_errors(lines: &Lines<'_>, err: &KdlError) -> Vec<Diagnostic> {
    // A file of garbage has about one error per byte: place them all (cheap), word only the
    // first ones (see `cap`).
    let placed: Vec<(usize, &KdlDiagnostic)> = err
        .diagnostics
        .iter()
        .map(|d| (syntax_offset(lines.source, d), d))
        .collect();
    report_errors(lines, placed, false)
}

/// The diagnostics of KDL syntax errors placed at byte offsets of the file: the first
/// [`MAX_DIAGNOSTICS`], sorted, without repeats, and the count of the rest (`at_least`: of those
/// found, when the file was not read to its end).
pub(super) fn report_errors(
    lines: &Lines<'_>,
    mut placed: Vec<(usize, &KdlDiagnostic)>,
    at_least: bool,
) -> Vec<Diagnostic> {
    placed.sort_by_key(|(offset, _)| *offset);
    drop_consequences(&mut placed);
    let total = placed.len();
    let mut diags: Vec<Diagnostic> = placed
        .iter()
        .take(MAX_DIAGNOSTICS)
        .map(|(offset, d)| {
            let mut message = format!(
                "KDL syntax error: {}",
                d.message.as_deref().unwrap_or("invalid document")
            );
            if let Some(help) = &d.help {
                let _ = write!(message, " (help: {help})");
            }
            Diagnostic {
                pos: lines.pos(*offset),
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
    if let Some((offset, _)) = placed.get(MAX_DIAGNOSTICS) {
        let mut more = more_errors(lines.pos(*offset), total - MAX_DIAGNOSTICS);
        if at_least {
            more.message.insert_str(0, "at least ");
        }
        diags.push(more);
    }
    diags
}

/// Pairs of `kdl` errors where the second, right after the first, is only a consequence of it
/// (one mistake, one diagnostic): the first message, the second's, and whether the second
/// words the mistake better (then its message is kept at the first's place).
const CONSEQUENCES: &[(&str, &str, bool)] = &[
    // An unclosed `{`: the block has no `}`, so the node has none either.
    (
        "No closing '}' for child block",
        "Closing '}' was not found after nodes",
        false,
    ),
    // `value=(1`: the value is missing because a type annotation opened and never closed.
    (
        "Expected property value",
        "invalid contents inside type annotation",
        true,
    ),
];

/// Drops the `kdl` errors that only follow from the one just before them ([`CONSEQUENCES`]);
/// `placed` is sorted by offset. Errors elsewhere, even many of them (a file of garbage), stay.
fn drop_consequences(placed: &mut Vec<(usize, &KdlDiagnostic)>) {
    let message = |d: &KdlDiagnostic| d.message.as_deref().unwrap_or("").to_string();
    let mut kept: Vec<(usize, &KdlDiagnostic)> = Vec::with_capacity(placed.len());
    for &(offset, d) in placed.iter() {
        if let Some(last) = kept.last_mut() {
            let (first, second) = (message(last.1), message(d));
            let rule = CONSEQUENCES
                .iter()
                .find(|(a, b, _)| first.starts_with(a) && second.starts_with(b));
            if let (Some(&(_, _, better)), true) = (rule, offset <= last.0 + 1) {
                if better {
                    last.1 = d;
                }
                continue;
            }
        }
        kept.push((offset, d));
    }
    *placed = kept;
}

/// The most diagnostics reported for one file; the rest are counted in a last one.
pub(super) const MAX_DIAGNOSTICS: usize = 50;

/// The diagnostic that stands for `n` more, the first of them at `pos`.
pub(super) fn more_errors(pos: Pos, n: usize) -> Diagnostic {
    Diagnostic {
        pos,
        message: format!(
            "{n} more error{} from here on (only the first {MAX_DIAGNOSTICS} are shown)",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Keeps the first [`MAX_DIAGNOSTICS`] of sorted `diags` and counts the rest in a last one.
pub(super) fn cap(mut diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    if diags.len() > MAX_DIAGNOSTICS {
        let rest = diags.split_off(MAX_DIAGNOSTICS);
        diags.push(more_errors(rest[0].pos, rest.len()));
    }
    diags
}

/// Where a syntax error is. The crate's span start is used, except for a missing or malformed
/// property value: that span runs from the start of the document (or of the enclosing block) to
/// the point of failure, so the error is placed at the start of the value that ends there (just
/// after the `=` when the value is missing).
pub(super) fn syntax_offset(source: &str, d: &KdlDiagnostic) -> usize {
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
