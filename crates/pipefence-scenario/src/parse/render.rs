//! Plain-text rendering of diagnostics: `FILE:LINE:COLUMN: message`, the source line (an
//! excerpt around the column when the line is long) and a caret under the column.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::plan::Diagnostic;

use super::lines::Lines;
use super::syntax::char_at;

/// Renders diagnostics for a terminal: for each, `FILE:LINE:COLUMN: message`, then the source
/// line and a caret under the column (plain text, no colors).
///
/// ```text
/// s.kdl:3:13: `size` 15 is not a positive multiple of 4
/// 3 | buffer data size=15
///   |             ^
/// ```
pub fn render_diagnostics(file: &str, source: &str, diags: &[Diagnostic]) -> String {
    render_diagnostics_styled(file, source, diags, false)
}

/// [`render_diagnostics`], with ANSI colours when `color` is true (the position and message in
/// bold, the gutter in blue, the caret in red, as rustc does); the same text otherwise.
pub fn render_diagnostics_styled(
    file: &str,
    source: &str,
    diags: &[Diagnostic],
    color: bool,
) -> String {
    let (bold, blue, red, reset) = if color {
        ("\x1b[1m", "\x1b[1;34m", "\x1b[1;31m", "\x1b[0m")
    } else {
        ("", "", "", "")
    };
    let lines = Lines::new(source);
    let gutter = diags
        .iter()
        .map(|d| d.pos.line.to_string().len())
        .max()
        .unwrap_or(1);
    let mut cursor = Cursor::default();
    let mut out = String::new();
    for d in diags {
        let _ = writeln!(
            out,
            "{bold}{file}:{}:{}: {}{reset}",
            d.pos.line, d.pos.column, d.message
        );
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
        let _ = writeln!(out, "{blue}{:>gutter$} |{reset} {shown}", d.pos.line);
        let _ = writeln!(out, "{blue}{:>gutter$} |{reset} {pad}{red}^{reset}", "");
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
