//! The line index of a source text: byte offsets to 1-based line and column (in characters),
//! and the text of a line.

use std::cell::Cell;

use crate::plan::Pos;

/// Line starts of a source text: byte offsets to 1-based line and column (in characters).
pub(super) struct Lines<'s> {
    /// The text.
    pub(super) source: &'s str,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
    /// The last position computed: (line start, byte offset, column), so that positions
    /// asked for in file order along one long line cost only the distance between them.
    last: Cell<(usize, usize, usize)>,
}

impl<'s> Lines<'s> {
    /// Indexes `source`.
    pub(super) fn new(source: &'s str) -> Self {
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
    pub(super) fn pos(&self, offset: usize) -> Pos {
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
    pub(super) fn line(&self, line: usize) -> Option<&'s str> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let end = self
            .starts
            .get(line)
            .map_or(self.source.len(), |&next| next.saturating_sub(1));
        let text = self.source.get(start..end)?;
        Some(text.strip_suffix('\r').unwrap_or(text))
    }
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
}
