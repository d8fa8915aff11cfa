//! Top-level nodes: the dispatch of each, and the declarations (`device`, `buffer`, `fence`,
//! `queue`, `list` with its commands validated by the library, `host` with its actions,
//! `expect-removed`).

use kdl::{KdlDocument, KdlNode};
use pipefence::command;
use pipefence::{Heap, QueueKind, RemovalReason};

use crate::plan::{
    Action, ActionKind, BufferDecl, CommandDecl, FenceDecl, HostDecl, ListDecl, QueueDecl,
};

use super::lower::{lower, name_addresses, placeholder};
use super::values::shown;
use super::{Ns, Parser, Shape, ACTIONS, COMMANDS, DECLARATIONS};

impl Parser<'_> {
    /// One top-level node.
    pub(super) fn top(&mut self, node: &KdlNode) {
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
                    let known = DECLARATIONS.iter().chain(ACTIONS).copied();
                    let hint = match super::suggest::closest(name, known) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None => format!(
                            " (expected one of: {}, {})",
                            DECLARATIONS.join(", "),
                            ACTIONS.join(", ")
                        ),
                    };
                    self.error(pos, format!("unknown node `{name}`{hint}"));
                }
            }
        }
    }

    /// `device`.
    pub(super) fn device(&mut self, node: &KdlNode) {
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
    pub(super) fn buffer(&mut self, node: &KdlNode) {
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
            if v > pipefence::MAX_BUFFER_SIZE {
                let pos = self.entry_pos(e);
                self.error(
                    pos,
                    format!(
                        "`size` {} is above the largest buffer the device creates ({} bytes, {} \
                         GiB)",
                        shown(e),
                        pipefence::MAX_BUFFER_SIZE,
                        pipefence::MAX_BUFFER_SIZE >> 30
                    ),
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
                    let heaps = ["device-local", "upload", "readback", "shared"];
                    let hint = match super::suggest::closest(text, heaps) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None => {
                            " (expected one of: device-local, upload, readback, shared)".to_string()
                        }
                    };
                    self.error(pos, format!("unknown heap `{text}`{hint}"));
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
        self.declare_given(Ns::Buffer, r.arg(0), name, index);
    }

    /// `fence NAME initial=`.
    pub(super) fn fence(&mut self, node: &KdlNode) {
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
        self.declare_given(Ns::Fence, r.arg(0), name, index);
    }

    /// `queue NAME kind=`.
    pub(super) fn queue(&mut self, node: &KdlNode) {
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
        self.declare_given(Ns::Queue, r.arg(0), name, index);
    }

    /// `list NAME kind= { commands }`.
    pub(super) fn list(&mut self, node: &KdlNode) {
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
            let lower = match self.command(child) {
                Some(parsed) => {
                    let lower = lower(&parsed.cmd);
                    if parsed.whole {
                        commands.push(CommandDecl {
                            cmd: parsed.cmd,
                            pos,
                        });
                    }
                    lower
                }
                None => placeholder(child.name().value()),
            };
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
        self.declare_given(Ns::List, r.arg(0), name, index);
    }

    /// `host NAME { actions }`.
    pub(super) fn host(&mut self, node: &KdlNode) {
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
                let hint = match super::suggest::closest(child_name, ACTIONS.iter().copied()) {
                    Some(k) => format!("; did you mean `{k}`?"),
                    None => format!(" (expected one of: {})", ACTIONS.join(", ")),
                };
                self.error(
                    pos,
                    format!("unknown action `{child_name}` in host `{host_name}`{hint}"),
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
        self.declare_given(Ns::Host, r.arg(0), name, index);
    }

    /// `expect-removed reason=`.
    pub(super) fn expect_removed(&mut self, node: &KdlNode) {
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
}
