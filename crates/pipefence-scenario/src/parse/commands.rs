//! The commands of a list: each command node read and checked into a [`ListCommand`].

use kdl::KdlNode;
use pipefence::{Flush, ImmediateMode, WaitEngine, Width, WriteSource};

use crate::plan::{Addr, KernelDecl, ListCommand};

use super::values::shown;
use super::{Parser, Shape, ACTIONS, COMMANDS, KERNELS};

/// A command node read: the command, or where a value of it was wrong (already reported),
/// what stands in for it so that the library's rules still check the others.
pub(super) struct Parsed {
    /// The command, each wrong value replaced by one that no rule rejects.
    pub(super) cmd: ListCommand,
    /// Whether every value was right (the command is the scenario's).
    pub(super) whole: bool,
}

/// Reads the values of one command: each wrong one (`None`, already reported) is replaced by
/// a value that no rule of the library rejects (an offset of 0, no flush flags, `0`), so that
/// the rules on the others still run, and the command is then marked not whole.
struct Fields {
    whole: bool,
}

impl Fields {
    fn new() -> Self {
        Fields { whole: true }
    }

    fn or<T>(&mut self, v: Option<T>, stand_in: T) -> T {
        v.unwrap_or_else(|| {
            self.whole = false;
            stand_in
        })
    }

    fn addr(&mut self, v: Option<Addr>) -> Addr {
        self.or(
            v,
            Addr {
                buffer: 0,
                offset: 0,
            },
        )
    }

    fn done(self, cmd: ListCommand) -> Option<Parsed> {
        Some(Parsed {
            cmd,
            whole: self.whole,
        })
    }
}

impl Parser<'_> {
    /// A command of a list; `None` when the node itself is wrong (already reported), and not
    /// whole when one of its values is.
    pub(super) fn command(&mut self, node: &KdlNode) -> Option<Parsed> {
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
                let mut f = Fields::new();
                let cmd = ListCommand::WriteImmediate {
                    addr: f.addr(addr),
                    value: f.or(value, 0),
                    mode: f.or(mode, ImmediateMode::Default),
                };
                f.done(cmd)
            }
            "flush-pipeline" => {
                let r = self.read(node, Shape::new(&[], &["flush"]));
                let flush = r.prop("flush").map_or(Some(Flush::NONE), |e| self.flush(e));
                let mut f = Fields::new();
                let cmd = ListCommand::FlushPipeline {
                    flush: f.or(flush, Flush::NONE),
                };
                f.done(cmd)
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
                let mut f = Fields::new();
                let cmd = ListCommand::Copy {
                    dst: f.addr(dst),
                    src: f.addr(src),
                    bytes: f.or(bytes, 0),
                };
                f.done(cmd)
            }
            "marker" | "begin-event" => {
                let r = self.read(node, Shape::new(&["TEXT"], &[]));
                let text = r.arg(0).and_then(|e| self.string(e, "TEXT"))?.to_string();
                Fields::new().done(if name == "marker" {
                    ListCommand::Marker(text)
                } else {
                    ListCommand::BeginEvent(text)
                })
            }
            "end-event" => {
                self.read(node, Shape::new(&[], &[]));
                Fields::new().done(ListCommand::EndEvent)
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
                    let hint = match super::suggest::closest(name, COMMANDS.iter().copied()) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None => format!(" (expected one of: {})", COMMANDS.join(", ")),
                    };
                    self.error(pos, format!("unknown command `{name}`{hint}"));
                }
                None
            }
        }
    }

    /// `wait-value32/64 ADDRESS cmp= reference= mask= engine=`.
    pub(super) fn wait_value(&mut self, node: &KdlNode, width: Width) -> Option<Parsed> {
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
        let mut f = Fields::new();
        let cmd = ListCommand::WaitValue {
            addr: f.addr(addr),
            cond: pipefence::ValueCondition {
                width,
                cmp: f.or(cmp, pipefence::Comparison::GreaterEqual),
                reference: f.or(reference, 0),
                mask: f.or(mask, 0),
            },
            engine: f.or(engine, WaitEngine::Me),
        };
        f.done(cmd)
    }

    /// `write-value32/64-bop ADDRESS value= flush= source=`.
    pub(super) fn write_bop(&mut self, node: &KdlNode, width: Width) -> Option<Parsed> {
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
        let mut f = Fields::new();
        // A wrong source leaves the value's rule unknown (0 with a timestamp): not checked.
        let value = value.filter(|_| source.is_some());
        let cmd = ListCommand::WriteBottomOfPipe {
            addr: f.addr(addr),
            width,
            value: f.or(value, 0),
            flush: f.or(flush, Flush::NONE),
            source: f.or(source, WriteSource::Value),
        };
        f.done(cmd)
    }

    /// `write-value32/64-top ADDRESS value= source=`.
    pub(super) fn write_top(&mut self, node: &KdlNode, width: Width) -> Option<Parsed> {
        let r = self.read(node, Shape::new(&["ADDRESS"], &["value", "source"]));
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(width.bytes())));
        let value = r.prop("value").map_or(Some(0), |e| self.num(e, "`value`"));
        let source = r
            .prop("source")
            .map_or(Some(WriteSource::Value), |e| self.source(e));
        let mut f = Fields::new();
        let value = value.filter(|_| source.is_some());
        let cmd = ListCommand::WriteTopOfPipe {
            addr: f.addr(addr),
            width,
            value: f.or(value, 0),
            source: f.or(source, WriteSource::Value),
        };
        f.done(cmd)
    }

    /// `dispatch KERNEL groups= ...` / `dispatch-indirect KERNEL args= ...`.
    pub(super) fn dispatch(&mut self, node: &KdlNode) -> Option<Parsed> {
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
                let text = shown(e);
                let hint = match e
                    .value()
                    .as_string()
                    .and_then(|k| super::suggest::closest(k, KERNELS.iter().copied()))
                {
                    Some(k) => format!("; did you mean `{k}`?"),
                    None => format!(" (expected one of: {})", KERNELS.join(", ")),
                };
                self.error(pos, format!("unknown kernel `{text}`{hint}"));
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
        let mut f = Fields::new();
        // An unknown kernel (reported) stands as a spin of 0 ns, which no rule rejects.
        let kernel = match f.or(kernel, "") {
            "fill" => {
                let dst = self
                    .required(&r, "dst")
                    .and_then(|e| self.address(e, "`dst`", Some(4)));
                let value = self
                    .required(&r, "value")
                    .and_then(|e| self.num32(e, "`value`"));
                KernelDecl::Fill {
                    dst: f.addr(dst),
                    value: f.or(value, 0),
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
                    dst: f.addr(dst),
                    src: f.addr(src),
                    value: f.or(value, 0),
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
                    dst: f.addr(dst),
                    src: f.addr(src),
                }
            }
            "spin" => {
                let ns = self.required(&r, "ns").and_then(|e| self.num(e, "`ns`"));
                KernelDecl::Spin { ns: f.or(ns, 0) }
            }
            _ => KernelDecl::Spin { ns: 0 },
        };
        let cmd = if indirect {
            ListCommand::DispatchIndirect {
                kernel,
                args: f.addr(args),
            }
        } else {
            ListCommand::Dispatch {
                kernel,
                groups: f.or(groups, 1),
            }
        };
        f.done(cmd)
    }
}
