//! Host actions (top level and inside `host`): `execute`, `signal`, `wait`, the CPU fence and
//! memory actions, `sleep`, `wait-idle`, `remove-device`, and the `expect` checks.

use kdl::{KdlDocument, KdlNode};
use pipefence::{Heap, Width};

use crate::plan::{ActionKind, Addr, Check};

use super::{Ns, Parser, Reader, Shape};

impl Parser<'_> {
    /// A host action (its name is in [`ACTIONS`](super::ACTIONS)).
    pub(super) fn action(&mut self, node: &KdlNode) -> Option<ActionKind> {
        match node.name().value() {
            "execute" => self.execute(node),
            "signal" | "wait" => self.queue_fence(node),
            "cpu-signal" => {
                let r = self.read(node, Shape::new(&["FENCE", "VALUE"], &[]));
                let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
                let value = r.arg(1).and_then(|e| self.num(e, "VALUE"));
                Some(ActionKind::CpuSignal {
                    fence: fence?,
                    value: value?,
                })
            }
            "cpu-wait" => {
                let r = self.read(node, Shape::new(&["FENCE", "VALUE"], &["timeout-ms"]));
                let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
                let value = r.arg(1).and_then(|e| self.num(e, "VALUE"));
                let timeout_ms = self.timeout(&r);
                Some(ActionKind::CpuWait {
                    fence: fence?,
                    value: value?,
                    timeout_ms: timeout_ms?,
                })
            }
            "cpu-wait-multiple" => self.cpu_wait_multiple(node),
            "cpu-write" => self.cpu_write(node),
            "cpu-poll" => self.cpu_poll(node),
            "sleep" => {
                let r = self.read(node, Shape::new(&[], &["ms"]));
                let ms = self.required(&r, "ms").and_then(|e| self.num(e, "`ms`"));
                Some(ActionKind::Sleep { ms: ms? })
            }
            "wait-idle" => {
                let r = self.read(node, Shape::new(&[], &["timeout-ms"]));
                let timeout_ms = self.timeout(&r);
                Some(ActionKind::WaitIdle {
                    timeout_ms: timeout_ms?,
                })
            }
            "remove-device" => {
                self.read(node, Shape::new(&[], &[]));
                Some(ActionKind::RemoveDevice)
            }
            "expect" => self.expect(node),
            "expect-fence" => self.expect_fence(node),
            _ => None,
        }
    }

    /// `timeout-ms` (default 10000).
    pub(super) fn timeout(&mut self, r: &Reader<'_>) -> Option<u64> {
        r.prop("timeout-ms")
            .map_or(Some(10_000), |e| self.num(e, "`timeout-ms`"))
    }

    /// `execute QUEUE LIST...`.
    pub(super) fn execute(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape {
                variadic: true,
                ..Shape::new(&["QUEUE", "LIST"], &[])
            },
        );
        let queue = r.arg(0).and_then(|e| self.lookup(e, Ns::Queue));
        let mut lists = Vec::new();
        let mut ok = queue.is_some() && r.args.len() >= 2;
        for e in r.args.iter().skip(1) {
            let Some(list) = self.lookup(e, Ns::List) else {
                ok = false;
                continue;
            };
            let list_kind = self.list_kind.get(list).copied().flatten();
            let queue_kind = queue.and_then(|q| self.queue_kind.get(q).copied().flatten());
            if let (Some(lk), Some(qk), Some(q)) = (list_kind, queue_kind, queue) {
                if lk != qk {
                    let list_name = self.sc.lists.get(list).map_or("", |l| l.name.as_str());
                    let queue_name = self.sc.queues.get(q).map_or("", |q| q.name.as_str());
                    let message =
                        format!("list `{list_name}` is a {lk} list; queue `{queue_name}` is {qk}");
                    let pos = self.entry_pos(e);
                    self.error(pos, message);
                    ok = false;
                }
            }
            lists.push(list);
        }
        if !ok {
            return None;
        }
        Some(ActionKind::Execute {
            queue: queue?,
            lists,
        })
    }

    /// `signal QUEUE FENCE VALUE` / `wait QUEUE FENCE VALUE`.
    pub(super) fn queue_fence(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(node, Shape::new(&["QUEUE", "FENCE", "VALUE"], &[]));
        let queue = r.arg(0).and_then(|e| self.lookup(e, Ns::Queue));
        let fence = r.arg(1).and_then(|e| self.lookup(e, Ns::Fence));
        let value = r.arg(2).and_then(|e| self.num(e, "VALUE"));
        let (queue, fence, value) = (queue?, fence?, value?);
        if r.node == "signal" {
            Some(ActionKind::Signal {
                queue,
                fence,
                value,
            })
        } else {
            Some(ActionKind::Wait {
                queue,
                fence,
                value,
            })
        }
    }

    /// `cpu-wait-multiple { FENCE VALUE; ... } mode= timeout-ms=`.
    pub(super) fn cpu_wait_multiple(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape {
                children: true,
                ..Shape::new(&[], &["mode", "timeout-ms"])
            },
        );
        let any = r.prop("mode").map_or(Some(false), |e| {
            self.choice(e, "wait mode", &[("all", false), ("any", true)])
        });
        let timeout_ms = self.timeout(&r);
        let mut fences = Vec::new();
        let mut ok = true;
        let children = node.children().map(KdlDocument::nodes);
        for child in children.unwrap_or(&[]) {
            let pos = self.node_pos(child);
            let c = self.read(child, Shape::new(&["VALUE"], &[]));
            let fence_name = child.name().value();
            let fence = self.names[Ns::Fence.slot()].get(fence_name).copied();
            if fence.is_none() && self.report_unknown(Ns::Fence) {
                let hint = self.name_hint(fence_name, Ns::Fence);
                self.error(pos, format!("unknown fence `{fence_name}`{hint}"));
            }
            let value = c.arg(0).and_then(|e| self.num(e, "VALUE"));
            match (fence, value) {
                (Some(fence), Some(value)) => fences.push((fence, value)),
                _ => ok = false,
            }
        }
        if children.is_some_and(<[KdlNode]>::is_empty) {
            self.error(
                r.pos,
                "`cpu-wait-multiple` needs at least one `FENCE VALUE` child",
            );
            ok = false;
        }
        if !ok || children.is_none() {
            return None;
        }
        Some(ActionKind::CpuWaitMultiple {
            fences,
            any: any?,
            timeout_ms: timeout_ms?,
        })
    }

    /// The buffer's heap, when the address and the declaration are valid.
    pub(super) fn heap_of(&self, addr: Option<Addr>) -> Option<(Heap, String)> {
        let addr = addr?;
        let heap = self.buffer_heap.get(addr.buffer).copied().flatten()?;
        let name = self.sc.buffers.get(addr.buffer)?.name.clone();
        Some((heap, name))
    }

    /// `cpu-write ADDRESS value= width=`.
    pub(super) fn cpu_write(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(node, Shape::new(&["ADDRESS"], &["value", "width"]));
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(fit.bytes())));
        let mut heap_ok = true;
        if let Some((heap, name)) = self.heap_of(addr) {
            if !heap.cpu_writable() {
                self.error(
                    r.pos,
                    format!(
                        "`cpu-write` to buffer `{name}` ({heap} heap) is not allowed: the CPU \
                         writes only upload and shared buffers (M1)"
                    ),
                );
                heap_ok = false;
            }
        }
        let value = self
            .required(&r, "value")
            .and_then(|e| self.num_fit(e, "`value`", fit));
        if !heap_ok {
            return None;
        }
        Some(ActionKind::CpuWrite {
            addr: addr?,
            width: width?,
            value: value?,
        })
    }

    /// `cpu-poll ADDRESS cmp= reference= mask= width= timeout-ms=`.
    pub(super) fn cpu_poll(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(
                &["ADDRESS"],
                &["cmp", "reference", "mask", "width", "timeout-ms"],
            ),
        );
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let addr = r
            .arg(0)
            .and_then(|e| self.address(e, "ADDRESS", Some(fit.bytes())));
        let mut heap_ok = true;
        if let Some((heap, name)) = self.heap_of(addr) {
            if !heap.cpu_readable() {
                self.error(
                    r.pos,
                    format!(
                        "`cpu-poll` of buffer `{name}` ({heap} heap) is not allowed: the CPU \
                         reads only upload, readback and shared buffers (M1)"
                    ),
                );
                heap_ok = false;
            }
        }
        let cmp = self.required(&r, "cmp").and_then(|e| self.cmp(e));
        let reference = self
            .required(&r, "reference")
            .and_then(|e| self.num_fit(e, "`reference`", fit));
        let mask = r
            .prop("mask")
            .map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
        let timeout_ms = self.timeout(&r);
        if !heap_ok {
            return None;
        }
        Some(ActionKind::CpuPoll {
            addr: addr?,
            width: width?,
            cmp: cmp?,
            reference: reference?,
            mask: mask?,
            timeout_ms: timeout_ms?,
        })
    }

    /// `expect ADDRESS width= count= (equals= | cmp= reference= [mask=] | cmp= reference-at=
    /// [mask=])`.
    pub(super) fn expect(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(
                &["ADDRESS"],
                &[
                    "width",
                    "count",
                    "equals",
                    "cmp",
                    "reference",
                    "reference-at",
                    "mask",
                ],
            ),
        );
        let width = r.prop("width").map_or(Some(Width::W32), |e| self.width(e));
        let fit = width.unwrap_or(Width::W64);
        let count = r
            .prop("count")
            .map_or(Some(1), |e| self.num_in(e, "`count`", 1, u64::MAX));
        let bytes = count.map(|c| c.saturating_mul(fit.bytes()));
        let addr = r.arg(0).and_then(|e| self.address(e, "ADDRESS", bytes));
        let form = (
            r.prop("equals"),
            r.prop("cmp"),
            r.prop("reference"),
            r.prop("reference-at"),
            r.prop("mask"),
        );
        let check = match form {
            (Some(equals), None, None, None, None) => {
                Check::Equals(self.num_fit(equals, "`equals`", fit)?)
            }
            (None, Some(cmp), Some(reference), None, mask) => {
                let cmp = self.cmp(cmp);
                let reference = self.num_fit(reference, "`reference`", fit);
                let mask = mask.map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
                Check::Compare {
                    cmp: cmp?,
                    reference: reference?,
                    mask: mask?,
                }
            }
            (None, Some(cmp), None, Some(other), mask) => {
                let cmp = self.cmp(cmp);
                let other = self.address(other, "`reference-at`", bytes);
                let mask = mask.map_or(Some(fit.mask()), |e| self.num_fit(e, "`mask`", fit));
                Check::CompareAt {
                    cmp: cmp?,
                    other: other?,
                    mask: mask?,
                }
            }
            _ => {
                let found: Vec<&str> = ["equals", "cmp", "reference", "reference-at", "mask"]
                    .into_iter()
                    .filter(|k| r.prop(k).is_some())
                    .collect();
                let found = if found.is_empty() {
                    "none of them".to_string()
                } else {
                    format!("found: {}", found.join(", "))
                };
                self.error(
                    r.pos,
                    format!(
                        "`expect` needs exactly one of: `equals`, `cmp` + `reference` (+ `mask`), \
                         or `cmp` + `reference-at` (+ `mask`) ({found})"
                    ),
                );
                return None;
            }
        };
        Some(ActionKind::Expect {
            addr: addr?,
            width: width?,
            count: count?,
            check,
        })
    }

    /// `expect-fence FENCE (equals= | cmp= reference=)`.
    pub(super) fn expect_fence(&mut self, node: &KdlNode) -> Option<ActionKind> {
        let r = self.read(
            node,
            Shape::new(&["FENCE"], &["equals", "cmp", "reference"]),
        );
        let fence = r.arg(0).and_then(|e| self.lookup(e, Ns::Fence));
        let check = match (r.prop("equals"), r.prop("cmp"), r.prop("reference")) {
            (Some(equals), None, None) => Check::Equals(self.num(equals, "`equals`")?),
            (None, Some(cmp), Some(reference)) => {
                let cmp = self.cmp(cmp);
                let reference = self.num(reference, "`reference`");
                Check::Compare {
                    cmp: cmp?,
                    reference: reference?,
                    mask: u64::MAX,
                }
            }
            _ => {
                let found: Vec<&str> = ["equals", "cmp", "reference"]
                    .into_iter()
                    .filter(|k| r.prop(k).is_some())
                    .collect();
                let found = if found.is_empty() {
                    "none of them".to_string()
                } else {
                    format!("found: {}", found.join(", "))
                };
                self.error(
                    r.pos,
                    format!(
                        "`expect-fence` needs exactly one of: `equals`, or `cmp` + `reference` \
                         ({found})"
                    ),
                );
                return None;
            }
        };
        Some(ActionKind::ExpectFence {
            fence: fence?,
            check,
        })
    }
}
