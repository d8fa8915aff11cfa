//! Typed values of entries: numbers in range or of a width, strings, keyword choices (widths,
//! queue kinds, comparisons, flushes, write sources), declared names and their uses, and
//! addresses checked against their buffers.

use kdl::{KdlEntry, KdlValue};
use pipefence::{Comparison, Flush, QueueKind, Width, WriteSource};

use crate::plan::{Addr, Pos};

use super::{Ns, Parser, COMPARISONS};

impl Parser<'_> {
    /// An unsigned 64-bit number: a KDL integer, or a string in decimal or `0x` hex.
    pub(super) fn num(&mut self, e: &KdlEntry, what: &str) -> Option<u64> {
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
    pub(super) fn num_in(&mut self, e: &KdlEntry, what: &str, lo: u64, hi: u64) -> Option<u64> {
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
    pub(super) fn num_fit(&mut self, e: &KdlEntry, what: &str, width: Width) -> Option<u64> {
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
    pub(super) fn num32(&mut self, e: &KdlEntry, what: &str) -> Option<u32> {
        let v = self.num(e, what)?;
        let fits = u32::try_from(v).ok();
        if fits.is_none() {
            let pos = self.entry_pos(e);
            self.error(pos, format!("{what} {} does not fit in 32 bits", shown(e)));
        }
        fits
    }

    /// A string value.
    pub(super) fn string<'a>(&mut self, e: &'a KdlEntry, what: &str) -> Option<&'a str> {
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
    pub(super) fn choice<T: Copy>(
        &mut self,
        e: &KdlEntry,
        what: &str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let text = self.string(e, what)?;
        let found = options.iter().find(|(n, _)| *n == text).map(|&(_, v)| v);
        if found.is_none() {
            let names: Vec<&str> = options.iter().map(|&(n, _)| n).collect();
            let pos = self.entry_pos(e);
            let hint = match super::suggest::closest(text, names.iter().copied()) {
                Some(k) => format!("; did you mean `{k}`?"),
                None => format!(" (expected one of: {})", names.join(", ")),
            };
            self.error(pos, format!("unknown {what} `{text}`{hint}"));
        }
        found
    }

    /// `width` = 32 or 64.
    pub(super) fn width(&mut self, e: &KdlEntry) -> Option<Width> {
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
    pub(super) fn kind(&mut self, e: &KdlEntry) -> Option<QueueKind> {
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
    pub(super) fn cmp(&mut self, e: &KdlEntry) -> Option<Comparison> {
        let options: Vec<(&str, Comparison)> = COMPARISONS
            .iter()
            .filter_map(|&n| Comparison::from_name(n).map(|c| (n, c)))
            .collect();
        self.choice(e, "comparison", &options)
    }

    /// A FLUSH string.
    pub(super) fn flush(&mut self, e: &KdlEntry) -> Option<Flush> {
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
    pub(super) fn source(&mut self, e: &KdlEntry) -> Option<WriteSource> {
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
    pub(super) fn name_arg<'a>(&mut self, e: &'a KdlEntry, ns: Ns) -> Option<&'a str> {
        self.string(e, &format!("a {} name", ns.noun()))
    }

    /// Registers a declared name; reports a duplicate. `index` is the new declaration's index.
    /// [`Parser::declare`] when the declaration has a name; else remembers that one of `ns`
    /// has none (its uses are then not reported as unknown: one mistake, one diagnostic).
    pub(super) fn declare_given(
        &mut self,
        ns: Ns,
        e: Option<&KdlEntry>,
        name: Option<&str>,
        index: usize,
    ) {
        match (e, name) {
            (Some(e), Some(name)) => self.declare(ns, e, name, index),
            _ => self.unnamed[ns.slot()] = true,
        }
    }

    /// Whether an unknown name of `ns` is worth reporting: not when a declaration of `ns` had
    /// no name (the use is most likely of that one).
    pub(super) fn report_unknown(&self, ns: Ns) -> bool {
        !self.unnamed[ns.slot()]
    }

    pub(super) fn declare(&mut self, ns: Ns, e: &KdlEntry, name: &str, index: usize) {
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
    pub(super) fn decl_pos(&self, ns: Ns, index: usize) -> Pos {
        let pos = match ns {
            Ns::Buffer => self.sc.buffers.get(index).map(|d| d.pos),
            Ns::Fence => self.sc.fences.get(index).map(|d| d.pos),
            Ns::Queue => self.sc.queues.get(index).map(|d| d.pos),
            Ns::List => self.sc.lists.get(index).map(|d| d.pos),
            Ns::Host => self.sc.hosts.get(index).map(|d| d.pos),
        };
        pos.unwrap_or_default()
    }

    /// `; did you mean `NAME`?` for the declared name of `ns` closest to `name`, or nothing.
    pub(super) fn name_hint(&self, name: &str, ns: Ns) -> String {
        super::suggest::did_you_mean(name, self.names[ns.slot()].keys().map(String::as_str))
    }

    /// A use of a declared name; reports an unknown one.
    pub(super) fn lookup(&mut self, e: &KdlEntry, ns: Ns) -> Option<usize> {
        let name = self.string(e, &format!("a {} name", ns.noun()))?;
        let found = self.names[ns.slot()].get(name).copied();
        if found.is_none() && self.report_unknown(ns) {
            let pos = self.entry_pos(e);
            let hint = self.name_hint(name, ns);
            self.error(pos, format!("unknown {} `{name}`{hint}", ns.noun()));
        }
        found
    }

    /// An ADDRESS (`BUFFER` or `BUFFER+OFFSET`). With `bytes`, the range `[address, address +
    /// bytes)` must lie in the buffer.
    pub(super) fn address(&mut self, e: &KdlEntry, what: &str, bytes: Option<u64>) -> Option<Addr> {
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
                if !self.report_unknown(Ns::Buffer) {
                    return None;
                }
                let hint = self.name_hint(name, Ns::Buffer);
                self.error(
                    pos,
                    format!("unknown buffer `{name}` in address `{text}`{hint}"),
                );
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
        } else if !self.report_unknown(Ns::Buffer) {
            return None;
        } else {
            let hint = self.name_hint(text, Ns::Buffer);
            self.error(pos, format!("unknown buffer `{text}`{hint}"));
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
}

/// An entry's value as written: the text of a string, the source form of anything else.
pub(super) fn shown(e: &KdlEntry) -> String {
    match e.value() {
        KdlValue::String(s) => s.clone(),
        other => match e.format() {
            Some(f) if !f.value_repr.is_empty() => f.value_repr.clone(),
            _ => other.to_string(),
        },
    }
}

/// Decimal or `0x` hex, unsigned 64-bit.
pub(super) fn parse_u64(text: &str) -> Option<u64> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
