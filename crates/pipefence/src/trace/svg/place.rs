//! Text boxes: how much room a label takes (estimated from its length, font size, weight and
//! anchor, with no font metrics at hand), and the labels placed so far, so that an optional
//! label is drawn only where it overlaps none of them (its text stays in the tooltip).
//!
//! The estimate is the contract with the tests: `tests/timeline_labels.rs` of the CLI parses
//! every `<text>` of a timeline and checks with the same formula that no two boxes intersect.

/// Advance of one character, in ems, of the regular font (a little over Helvetica's average,
/// so that estimates err on the wide side).
pub(super) const EM_REGULAR: f64 = 0.58;
/// Advance of one character, in ems, of the bold font.
pub(super) const EM_BOLD: f64 = 0.62;
/// Height above the baseline, in ems.
const ASCENT: f64 = 0.72;
/// Depth below the baseline, in ems.
const DESCENT: f64 = 0.22;

/// Where a text's `x` is: its start, middle or end (`text-anchor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Anchor {
    Start,
    Middle,
    End,
}

/// An axis-aligned box.
#[derive(Debug, Clone, Copy)]
pub(super) struct TextBox {
    pub(super) x0: f64,
    pub(super) y0: f64,
    pub(super) x1: f64,
    pub(super) y1: f64,
}

impl TextBox {
    /// Whether the boxes share area (touching edges do not count).
    fn intersects(&self, o: &TextBox) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// The width of `text` at `font_px`.
pub(super) fn text_w(text: &str, font_px: f64, bold: bool) -> f64 {
    let em = if bold { EM_BOLD } else { EM_REGULAR };
    text.chars().count() as f64 * font_px * em
}

/// The box of `text` drawn at `(x, y)` (baseline) with `anchor`.
pub(super) fn text_box(
    text: &str,
    x: f64,
    y: f64,
    anchor: Anchor,
    font_px: f64,
    bold: bool,
) -> TextBox {
    let w = text_w(text, font_px, bold);
    let x0 = match anchor {
        Anchor::Start => x,
        Anchor::Middle => x - w / 2.0,
        Anchor::End => x - w,
    };
    TextBox {
        x0,
        y0: y - ASCENT * font_px,
        x1: x0 + w,
        y1: y + DESCENT * font_px,
    }
}

/// The boxes of the labels placed so far, and where optional labels may go (`x_min..x_max`).
#[derive(Debug)]
pub(super) struct Placed {
    x_min: f64,
    x_max: f64,
    boxes: Vec<TextBox>,
}

impl Placed {
    /// Nothing placed yet; optional labels go between `x_min` and `x_max`.
    pub(super) fn new(x_min: f64, x_max: f64) -> Self {
        Placed {
            x_min,
            x_max,
            boxes: Vec::new(),
        }
    }

    /// Whether `b` lies between `x_min` and `x_max` and overlaps no placed label.
    pub(super) fn is_free(&self, b: &TextBox) -> bool {
        b.x0 >= self.x_min && b.x1 <= self.x_max && !self.boxes.iter().any(|p| p.intersects(b))
    }

    /// Places `b` if it overlaps no placed label; whether it did.
    pub(super) fn try_place(&mut self, b: TextBox) -> bool {
        let free = self.is_free(&b);
        if free {
            self.boxes.push(b);
        }
        free
    }

    /// Places `b` whatever it overlaps (labels laid out so that they cannot: axis ticks, lane
    /// names).
    pub(super) fn place(&mut self, b: TextBox) {
        self.boxes.push(b);
    }
}
