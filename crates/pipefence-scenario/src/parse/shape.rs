//! A node's shape: its entries split into arguments and known properties, with every entry
//! that does not fit reported (type annotations, unknown and duplicate properties, missing and
//! extra arguments, children blocks), and the `name ARG...` usage text of messages.

use std::collections::HashMap;

use kdl::{KdlEntry, KdlNode};

use crate::plan::Pos;

use super::values::shown;
use super::{Parser, Reader, Shape};

impl Parser<'_> {
    /// Splits a node's entries and reports what does not fit its shape: type annotations,
    /// unknown and duplicate properties, missing and extra arguments, a missing or unexpected
    /// children block.
    pub(super) fn read<'a>(&mut self, node: &'a KdlNode, shape: Shape<'_>) -> Reader<'a> {
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
            misspelled: Vec::new(),
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
                let hint = match super::suggest::closest(key, shape.props.iter().copied()) {
                    Some(k) => {
                        reader.misspelled.push(k.to_string());
                        format!("; did you mean `{k}`?")
                    }
                    None => format!(" (expected one of: {})", shape.props.join(", ")),
                };
                self.error(epos, format!("unknown property `{key}` on `{name}`{hint}"));
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
    pub(super) fn required<'a>(&mut self, r: &Reader<'a>, key: &str) -> Option<&'a KdlEntry> {
        let found = r.prop(key);
        // A misspelling of it was reported already (`valeu=1`: did you mean `value`?).
        if found.is_none() && !r.misspelled.iter().any(|m| m == key) {
            self.error(
                r.pos,
                format!("missing required property `{key}` on `{}`", r.node),
            );
        }
        found
    }
}

/// `name ARG ARG...` for messages.
pub(super) fn usage(name: &str, shape: Shape<'_>) -> String {
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
