//! Text and number formatting for the SVG timeline: XML escaping, counts with their noun,
//! truncation, coordinates, durations and device-clock times.

/// XML-escapes `s` for text and attribute values, dropping characters XML 1.0 cannot hold.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// `n` and the noun's singular or plural.
pub(super) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `s` cut to at most `max` characters (with an ellipsis when cut).
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// A coordinate with one decimal.
pub(super) fn px(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "0".to_string()
    }
}

/// A duration for people: `750 ns`, `1.5 µs`, `12.25 ms`, `3 s`.
pub(super) fn fmt_dur(ns: u64) -> String {
    let (unit, div) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        ("µs", 1e3)
    } else if ns < 1_000_000_000 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    };
    let s = format!("{:.3}", ns as f64 / div);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

/// A device-clock time as seconds with nanosecond digits.
pub(super) fn fmt_clock(ns: u64) -> String {
    format!("{}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000)
}
