//! Large files in windows. The `kdl` parser's error recovery costs about 1.4 KB of memory (and
//! up to a KiB of stack) per error, and garbage has about one error per byte, so a file larger
//! than [`WINDOWED_FROM`] is never handed to it whole before it is known to hold few errors.
//!
//! The prepared text (see [`prepare`](super::syntax::prepare)) is cut into windows of about
//! [`WINDOW`] bytes at statement boundaries: a `\n` or `;` outside strings and comments, not
//! ending a `\` line continuation and not inside a slashdashed (`/-`) node, entry or block. A
//! window that starts inside `{ }` blocks gets a synthetic `_ {` line per open block in front
//! and a closing `}` per block still open at its end, so it is a document on its own; positions
//! map back by its offset, and errors in synthetic text are not counted.
//!
//! A statement longer than two windows (one long line) is probed in chunks cut between entries
//! (at a space, or anywhere outside strings when there is none): a chunk that starts inside a
//! statement is read as the entries of a synthetic node `_`, and only errors farther than
//! [`MARGIN`] from a cut inside the statement are counted.
//!
//! Then, in file order, stopping as soon as more than [`MAX_DIAGNOSTICS`] errors were counted:
//! - no window has an error: the windows' documents, merged, are the file's document (its
//!   spans shifted to the file's offsets); so a valid file is parsed once, in pieces;
//! - more than [`MAX_DIAGNOSTICS`] errors: the `kdl` parser runs on the file from the first
//!   window with an error (the file before it is valid, and the synthetic blocks put the parser
//!   in the state a whole parse is in there) to the end of the window where that was reached,
//!   so the errors shown are those of a parse of the whole file (where the first error is in a
//!   chunk of a long statement, from a little after that chunk's start), and the rest is counted
//!   as "at least";
//! - otherwise (a few errors): the `kdl` parser runs on the whole file, as for a small one.
//!
//! So the parser never sees more than about one window of garbage: memory is bounded by a
//! window's worth of errors (about 50 MB), whatever the file holds.

use kdl::{KdlDiagnostic, KdlDocument, KdlNode};

use crate::plan::Diagnostic;

use super::lines::Lines;
use super::syntax::{
    parse_kdl, report_errors, skip_line_comment, skip_quoted, skip_raw, syntax_offset,
    ParseKdlError, MAX_DIAGNOSTICS,
};

/// Files up to this size are parsed whole.
pub(super) const WINDOWED_FROM: usize = 64 << 10;

/// The size of a window.
const WINDOW: usize = 32 << 10;

/// Errors this close to a cut inside a statement may be caused by the cut, and are not counted.
const MARGIN: usize = 1 << 10;

/// What the windows found.
pub(super) enum Windowed {
    /// The file is valid KDL: its document.
    Doc(KdlDocument),
    /// The file has many errors: the first ones, and a count of the rest.
    Errors(Vec<Diagnostic>),
    /// The file has a few errors: parse it whole.
    Whole,
}

/// One piece handed to the `kdl` parser: the file's bytes `start..end`, with synthetic text
/// around them.
#[derive(Clone)]
struct Piece {
    /// First byte in the file.
    start: usize,
    /// End in the file.
    end: usize,
    /// The `{` of each block open at `start`, outermost first.
    opens: Vec<usize>,
    /// Whether `start` is inside a statement (read as the entries of a synthetic node).
    mid_start: bool,
    /// Blocks open at `end`, closed by synthetic `}`s (none at the end of the file).
    close: usize,
    /// Whether `end` is inside a statement.
    mid_end: bool,
}

impl Piece {
    /// The text handed to the parser, and the length of its synthetic prefix.
    fn text(&self, src: &str) -> (String, usize) {
        let real = src.get(self.start..self.end).unwrap_or("");
        let mut text = String::with_capacity(real.len() + 4 * (self.opens.len() + self.close) + 4);
        for _ in &self.opens {
            text.push_str(OPENER);
        }
        if self.mid_start {
            text.push_str("_ ");
        }
        let prefix = text.len();
        text.push_str(real);
        // Inside a statement, no space or newline goes before the `}`s: the `kdl` parser takes
        // time quadratic in the length of `a=(a=(...` when whitespace follows it.
        let closer = if self.mid_end { "}" } else { "\n}" };
        for _ in 0..self.close {
            text.push_str(closer);
        }
        (text, prefix)
    }

    /// The file offset of an error at `offset` in [`Piece::text`], when it is to be counted. An
    /// error that the parser places at a synthetic block's `{` (or just after it: it gave that
    /// block up) is placed at the real block's.
    fn counted(&self, prefix: usize, offset: usize) -> Option<usize> {
        let Some(real) = offset.checked_sub(prefix) else {
            let level = offset / OPENER.len();
            let brace = self.opens.get(level)?;
            return match offset % OPENER.len() {
                2 => Some(*brace),
                3 => Some(brace + 1),
                _ => None,
            };
        };
        let at = self.start + real;
        let lo = self.start + if self.mid_start { MARGIN } else { 0 };
        let hi = if self.mid_end {
            self.end.saturating_sub(MARGIN)
        } else {
            self.end
        };
        let synthetic_end = self.close > 0 || self.mid_end;
        (at >= lo && (at < hi || (!synthetic_end && at == hi))).then_some(at)
    }
}

/// The synthetic line that opens a block (its `{` at offset 2).
const OPENER: &str = "_ {\n";

/// Parses a large prepared file `text` (`lines` indexes the original) in windows; see the
/// module documentation.
pub(super) fn parse_windowed(text: &str, lines: &Lines<'_>) -> Result<Windowed, ParseKdlError> {
    let mut docs: Vec<(usize, KdlDocument)> = Vec::new();
    let mut errors = 0usize;
    let mut clean = true;
    // The first piece where an error was counted.
    let mut first: Option<Piece> = None;
    for window in windows(text) {
        let pieces = if window.end - window.start > 2 * WINDOW {
            chunks(text, &window)
        } else {
            vec![window]
        };
        let long = pieces.len() > 1;
        for piece in &pieces {
            let (piece_text, prefix) = piece.text(text);
            match parse_kdl(&piece_text)? {
                Ok(doc) => {
                    if !long && clean {
                        docs.push((piece.opens.len(), shifted(doc, piece.start, prefix)));
                    }
                }
                Err(err) => {
                    clean = false;
                    docs.clear();
                    let counted = err
                        .diagnostics
                        .iter()
                        .filter(|d| {
                            piece
                                .counted(prefix, syntax_offset(&piece_text, d))
                                .is_some()
                        })
                        .count();
                    if counted > 0 && first.is_none() {
                        first = Some(piece.clone());
                    }
                    errors += counted;
                    if errors > MAX_DIAGNOSTICS {
                        return parse_span(text, lines, first.as_ref().unwrap_or(piece), piece);
                    }
                }
            }
        }
        if long && clean {
            // Every chunk of the long statement parsed: parse it whole, for its document.
            let (head, tail) = (&pieces[0], &pieces[pieces.len() - 1]);
            let piece = Piece {
                end: tail.end,
                close: tail.close,
                mid_end: false,
                ..head.clone()
            };
            let (piece_text, prefix) = piece.text(text);
            match parse_kdl(&piece_text)? {
                Ok(doc) => docs.push((piece.opens.len(), shifted(doc, piece.start, prefix))),
                Err(_) => {
                    clean = false;
                    docs.clear();
                }
            }
        }
    }
    if !clean {
        return Ok(Windowed::Whole);
    }
    let mut doc = KdlDocument::new();
    for (open, part) in docs {
        if !merge(&mut doc, part, open) {
            return Ok(Windowed::Whole);
        }
    }
    doc.set_span((0, text.len()));
    Ok(Windowed::Doc(doc))
}

/// The errors of a parse of the file from the start of `first` (the first piece with an error:
/// the file before it is valid, so a parse of the whole file is there in the state that the
/// synthetic blocks reproduce) to the end of `last` (where the count passed
/// [`MAX_DIAGNOSTICS`]): the first ones are those a parse of the whole file reports.
fn parse_span(
    text: &str,
    lines: &Lines<'_>,
    first: &Piece,
    last: &Piece,
) -> Result<Windowed, ParseKdlError> {
    let piece = Piece {
        end: last.end,
        close: last.close,
        mid_end: last.mid_end,
        ..first.clone()
    };
    let at_end = piece.end >= text.len();
    let (piece_text, prefix) = piece.text(text);
    let Err(err) = parse_kdl(&piece_text)? else {
        return Ok(Windowed::Whole);
    };
    let placed: Vec<(usize, &KdlDiagnostic)> = err
        .diagnostics
        .iter()
        .filter_map(|d| Some((piece.counted(prefix, syntax_offset(&piece_text, d))?, d)))
        .collect();
    if placed.is_empty() {
        return Ok(Windowed::Whole);
    }
    Ok(Windowed::Errors(report_errors(lines, placed, !at_end)))
}

/// Shifts the spans of a piece's document (nodes and entries, all levels) to file offsets.
fn shifted(mut doc: KdlDocument, start: usize, prefix: usize) -> KdlDocument {
    fn shift_nodes(nodes: &mut [KdlNode], start: usize, prefix: usize) {
        let at = |offset: usize| (start + offset).saturating_sub(prefix);
        for node in nodes {
            let span = node.span();
            node.set_span((at(span.offset()), span.len()));
            for entry in node.entries_mut() {
                let span = entry.span();
                entry.set_span((at(span.offset()), span.len()));
            }
            if let Some(children) = node.children_mut() {
                shift_nodes(children.nodes_mut(), start, prefix);
            }
        }
    }
    shift_nodes(doc.nodes_mut(), start, prefix);
    doc
}

/// Appends a window's document, which starts `open` blocks deep, to the file's document: its
/// first node is then the synthetic `_` whose children continue the last node at that depth.
fn merge(doc: &mut KdlDocument, mut part: KdlDocument, open: usize) -> bool {
    if open == 0 {
        doc.nodes_mut().append(part.nodes_mut());
        return true;
    }
    let nodes = part.nodes_mut();
    if nodes.is_empty() {
        return false;
    }
    let mut synthetic = nodes.remove(0);
    let (Some(inner), Some(last)) = (synthetic.children_mut().take(), doc.nodes_mut().last_mut())
    else {
        return false;
    };
    let Some(children) = last.children_mut() else {
        return false;
    };
    if !merge(children, inner, open - 1) {
        return false;
    }
    doc.nodes_mut().append(nodes);
    true
}

/// A statement boundary: the offset just after it, and the `{` of each block open there.
type Boundary = (usize, Vec<usize>);

/// The windows of a prepared text: cuts at statement boundaries about [`WINDOW`] apart (a
/// statement longer than that is a window of its own).
fn windows(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut start: Boundary = (0, Vec::new());
    let mut best: Option<Boundary> = None;
    let cut = |out: &mut Vec<Piece>, from: &Boundary, to: &Boundary| {
        out.push(Piece {
            start: from.0,
            end: to.0,
            opens: from.1.clone(),
            mid_start: false,
            close: to.1.len(),
            mid_end: false,
        });
    };
    for boundary in boundaries(text) {
        if boundary.0 - start.0 <= WINDOW {
            best = Some(boundary);
            continue;
        }
        if let Some(b) = best.take() {
            cut(&mut out, &start, &b);
            start = b;
        }
        if boundary.0 - start.0 <= WINDOW {
            best = Some(boundary);
        } else {
            cut(&mut out, &start, &boundary);
            start = boundary;
        }
    }
    if start.0 < text.len() {
        if let Some(b) = best.take() {
            if text.len() - start.0 > WINDOW {
                cut(&mut out, &start, &b);
                start = b;
            }
        }
        // The end of the file: nothing is closed there that the file does not close.
        cut(&mut out, &start, &(text.len(), Vec::new()));
    }
    out
}

/// Every statement boundary of a prepared text, in order.
fn boundaries(text: &str) -> impl Iterator<Item = Boundary> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0usize;
    let mut opens: Vec<usize> = Vec::new();
    // A `\` line continuation waits for its newline.
    let mut cont = false;
    // A slashdash is open at this depth; and whether what it comments out has begun.
    let mut slashdash: Option<usize> = None;
    let mut begun = false;
    std::iter::from_fn(move || {
        while let Some(&b) = bytes.get(i) {
            let at = i;
            i += 1;
            match b {
                b'\n' | b';' => {
                    if b == b'\n' && cont {
                        cont = false;
                        continue;
                    }
                    if cont {
                        continue;
                    }
                    match slashdash {
                        Some(d) if d == opens.len() && begun => slashdash = None,
                        Some(_) => continue,
                        None => {}
                    }
                    return Some((i, opens.clone()));
                }
                b'\\' => cont = true,
                b'{' => {
                    opens.push(at);
                    begun = true;
                }
                b'}' => {
                    opens.pop();
                    if slashdash.is_some_and(|d| opens.len() < d) {
                        slashdash = None;
                    }
                }
                b'/' if bytes.get(i) == Some(&b'/') => i = skip_line_comment(text, i + 1),
                b'/' if bytes.get(i) == Some(&b'-') => {
                    i += 1;
                    if slashdash.is_none() {
                        slashdash = Some(opens.len());
                        begun = false;
                    }
                }
                b'"' => {
                    begun = true;
                    i = skip_quoted(text, at).unwrap_or(text.len());
                }
                b'#' => {
                    begun = true;
                    let hashes = bytes[at..].iter().take_while(|&&c| c == b'#').count();
                    i = if bytes.get(at + hashes) == Some(&b'"') {
                        skip_raw(text, at + hashes, hashes).unwrap_or(text.len())
                    } else {
                        at + hashes
                    };
                }
                b' ' | b'\t' | b'\r' => {}
                // Non-ASCII may be a space or a newline: a slashdash stays open past it.
                _ => begun |= b.is_ascii(),
            }
        }
        None
    })
}

/// Cuts a long window into chunks of about [`WINDOW`] bytes, between entries where it can;
/// consecutive chunks overlap by about twice [`MARGIN`], so that the errors counted in one start
/// about where those counted in the previous one end.
fn chunks(text: &str, window: &Piece) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut walk = Walk {
        text,
        i: window.start,
        end: window.end,
        opens: window.opens.clone(),
    };
    let mut from = (window.start, window.opens.clone(), false);
    loop {
        let target = from.0 + WINDOW;
        let mut ahead = walk.clone();
        let next = ahead.cut_at_or_after(target.saturating_sub(2 * MARGIN).max(from.0 + 1));
        let end = walk.cut_at_or_after(target);
        let (Some(end), Some(next)) = (end, next) else {
            out.push(Piece {
                start: from.0,
                end: window.end,
                opens: from.1,
                mid_start: from.2,
                close: window.close,
                mid_end: false,
            });
            return out;
        };
        out.push(Piece {
            start: from.0,
            end: end.0,
            opens: from.1,
            mid_start: from.2,
            close: end.1.len(),
            mid_end: true,
        });
        from = (next.0, next.1, true);
        walk = ahead;
    }
}

/// A walk through a statement that knows its strings and blocks, for [`chunks`].
#[derive(Clone)]
struct Walk<'a> {
    /// The prepared text.
    text: &'a str,
    /// The next byte.
    i: usize,
    /// The end of the statement.
    end: usize,
    /// The `{` of each block open at `i`.
    opens: Vec<usize>,
}

impl Walk<'_> {
    /// Walks to the first cut at or after `target` and before the end of the statement: a space
    /// between entries within a quarter window, else the first character there outside strings.
    /// Returns it and the blocks open there.
    fn cut_at_or_after(&mut self, target: usize) -> Option<Boundary> {
        let bytes = self.text.as_bytes();
        let mut fallback: Option<Boundary> = None;
        while self.i < self.end {
            let at = self.i;
            let b = bytes[at];
            if at >= target && self.text.is_char_boundary(at) {
                if (b == b' ' || b == b'\t') && self.between_entries(at) {
                    return Some((at, self.opens.clone()));
                }
                if fallback.is_none() {
                    fallback = Some((at, self.opens.clone()));
                }
                if at >= target + WINDOW / 4 {
                    let cut = fallback?;
                    // Back to the fallback, to walk on from there.
                    self.i = cut.0;
                    self.opens.clone_from(&cut.1);
                    return Some(cut);
                }
            }
            self.i += 1;
            match b {
                b'{' => self.opens.push(at),
                b'}' => {
                    self.opens.pop();
                }
                b'/' if bytes.get(self.i) == Some(&b'/') => {
                    self.i = skip_line_comment(self.text, self.i + 1);
                }
                b'"' => self.i = skip_quoted(self.text, at).unwrap_or(self.end),
                b'#' => {
                    let hashes = bytes[at..].iter().take_while(|&&c| c == b'#').count();
                    self.i = if bytes.get(at + hashes) == Some(&b'"') {
                        skip_raw(self.text, at + hashes, hashes).unwrap_or(self.end)
                    } else {
                        at + hashes
                    };
                }
                _ => {}
            }
        }
        // The statement ends first: the rest is the last chunk.
        None
    }

    /// Whether the space at `at` separates two entries: neither side is an `=`, a `\`, a
    /// slashdash or a type annotation's parenthesis.
    fn between_entries(&self, at: usize) -> bool {
        let bytes = self.text.as_bytes();
        let before = bytes[..at]
            .iter()
            .rev()
            .take(64)
            .find(|&&c| c != b' ' && c != b'\t');
        let after = bytes[at..]
            .iter()
            .take(64)
            .find(|&&c| c != b' ' && c != b'\t');
        let slashdash = at >= 2 && bytes.get(at - 2..at) == Some(b"/-");
        !slashdash
            && !matches!(before, Some(b'=' | b'\\' | b')' | b'(') | None)
            && !matches!(after, Some(b'=') | None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::syntax::syntax_errors;
    use super::*;

    /// Valid KDL of every shape that a cut must respect: blocks, `;`, slashdashed nodes,
    /// entries and blocks, multi-line and raw strings holding braces and `;`, line
    /// continuations, and a block longer than a window.
    fn varied(n: usize) -> String {
        let mut s = String::from("big {\n");
        for i in 0..3000 {
            s.push_str(&format!(
                "    child{i} {i} x=\"{{\" {{\n        leaf; leaf2\n    }}\n"
            ));
        }
        s.push_str("}\n");
        for i in 0..n {
            s.push_str(&match i % 8 {
                0 => format!("node{i} 1 2 key=\"v;\" (t)3 #true\n"),
                1 => format!(
                    "outer{i} {{\n    inner a=1; inner b=2\n    deep {{\n        leaf \"x;y\" \
                     #\"raw{{\"#\n    }}\n}}\n"
                ),
                2 => format!("/-gone{i} {{\n    hidden 1\n    hidden 2\n}}\nkept{i}\n"),
                3 => format!("text{i} \"\"\"\n    multi {{ line\n    ;\n    \"\"\"\n"),
                4 => format!("cont{i} 1 \\\n    2 \\ // comment\n    3\n"),
                5 => format!("semi{i}; semi{i}b /- skipped; after{i}\n"),
                6 => format!("kids{i} /-{{\n    not 1\n}} {{\n    real 2\n}}\n"),
                _ => format!("/-\nslashed{i}\nplain{i} ##\"a\"#b\"## r=#\"q\"#\n"),
            });
        }
        s.push_str("long");
        for i in 0..10_000 {
            s.push_str(&format!(" {i} k{i}=\"a b\""));
        }
        s.push_str(" {\n    after-long\n}\ntail\n");
        s
    }

    /// The nodes, entries and positions of a document, one line each.
    fn describe(doc: &KdlDocument) -> Vec<String> {
        fn walk(nodes: &[KdlNode], depth: usize, out: &mut Vec<String>) {
            for node in nodes {
                out.push(format!(
                    "{depth} {} {:?} @{} children={}",
                    node.name().value(),
                    node.ty().map(|t| t.value().to_string()),
                    node.span().offset(),
                    node.children().is_some()
                ));
                for e in node.entries() {
                    out.push(format!(
                        "  {:?} {:?} {:?} @{}",
                        e.name().map(|n| n.value().to_string()),
                        e.value(),
                        e.ty().map(|t| t.value().to_string()),
                        e.span().offset()
                    ));
                }
                if let Some(children) = node.children() {
                    walk(children.nodes(), depth + 1, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(doc.nodes(), 0, &mut out);
        out
    }

    #[test]
    fn windows_of_a_valid_file_merge_into_its_document() {
        let text = varied(2500);
        assert!(text.len() > 8 * WINDOW, "{}", text.len());
        let whole = parse_kdl(&text).expect("ran").expect("valid");
        let lines = Lines::new(&text);
        let Ok(Windowed::Doc(doc)) = parse_windowed(&text, &lines) else {
            panic!("the windows of a valid file did not merge");
        };
        let (a, b) = (describe(&whole), describe(&doc));
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y);
        }
    }

    #[test]
    fn a_few_errors_parse_the_whole_file() {
        let mut text = varied(1200);
        text.insert_str(text.len() / 2, "bad = =\n");
        text.push_str("big2 {\n    x = 1\n}\n");
        let lines = Lines::new(&text);
        assert!(matches!(parse_windowed(&text, &lines), Ok(Windowed::Whole)));
    }

    #[test]
    fn many_errors_report_the_first_as_a_whole_parse_does() {
        let garbage = [
            "= (t)(t) ==\n".repeat(400),
            "a= ) (".repeat(3_000),
            format!("x {}", "1 ".repeat(40_000)) + &"=".repeat(3_000) + "\n",
        ];
        for (i, bad) in garbage.iter().enumerate() {
            let mut text = varied(1200);
            // Inside a block two deep, in the middle of the file.
            let at = text.find("outer601 {\n    inner").expect("node") + 12;
            text.insert_str(at, &format!("    deep {{\n{bad}\n    }}\n"));
            let lines = Lines::new(&text);
            let Ok(Windowed::Errors(diags)) = parse_windowed(&text, &lines) else {
                panic!("{i}: many errors not reported");
            };
            let err = parse_kdl(&text).expect("ran").expect_err("garbage");
            let whole = syntax_errors(&lines, &err);
            assert_eq!(diags.len(), MAX_DIAGNOSTICS + 1, "{i}");
            assert_eq!(diags[..MAX_DIAGNOSTICS], whole[..MAX_DIAGNOSTICS], "{i}");
            assert!(
                diags[MAX_DIAGNOSTICS].message.starts_with("at least "),
                "{i}"
            );
        }
    }
}
