//! Expectations: the text of each `expect`, `expect-fence` and `expect-removed` before the run,
//! their evaluation when the host program reaches them (and `expect-removed` at the end), and
//! the value reads they need.

use super::{lock, monitor, Ctx, ExpectationResult};
use crate::plan::{ActionKind, Addr, Check, Scenario};
use pipefence::{Buffer, RemovalReason, Width};
use std::collections::BTreeMap;

fn addr_text(sc: &Scenario, a: Addr) -> String {
    let name = &sc.buffers[a.buffer].name;
    if a.offset == 0 {
        name.clone()
    } else {
        format!("{name}+{}", a.offset)
    }
}

fn width_name(w: Width) -> &'static str {
    w.type_name()
}

fn check_text(c: &Check, width: Width, other: impl Fn(Addr) -> String) -> String {
    match c {
        Check::Equals(v) => format!("== {v}"),
        Check::Compare {
            cmp,
            reference,
            mask,
        } => {
            let m = if *mask == width.mask() {
                String::new()
            } else {
                format!("& {mask:#x} ")
            };
            format!("{m}{} {reference}", cmp.symbol())
        }
        Check::CompareAt {
            cmp,
            other: o,
            mask,
        } => {
            let m = if *mask == width.mask() {
                String::new()
            } else {
                format!("& {mask:#x} ")
            };
            format!("{m}{} {}", cmp.symbol(), other(*o))
        }
    }
}

/// The text of an expectation before it is evaluated.
fn expectation_text(sc: &Scenario, a: &ActionKind) -> Option<String> {
    match a {
        ActionKind::Expect {
            addr,
            width,
            count,
            check,
        } => {
            let n = if *count > 1 {
                format!(" x{count}")
            } else {
                String::new()
            };
            Some(format!(
                "{} ({}){n} {}",
                addr_text(sc, *addr),
                width_name(*width),
                check_text(check, *width, |o| format!(
                    "{} ({})",
                    addr_text(sc, o),
                    width_name(*width)
                ))
            ))
        }
        ActionKind::ExpectFence { fence, check } => Some(format!(
            "fence {} {}",
            sc.fences[*fence].name,
            check_text(check, Width::W64, |_| String::new())
        )),
        _ => None,
    }
}

pub(super) fn collect_expectations(sc: &Scenario) -> BTreeMap<usize, ExpectationResult> {
    let mut m = BTreeMap::new();
    let all = sc
        .main
        .iter()
        .chain(sc.hosts.iter().flat_map(|h| h.actions.iter()));
    for a in all {
        if let Some(detail) = expectation_text(sc, &a.kind) {
            m.insert(
                a.pos.line,
                ExpectationResult {
                    line: a.pos.line,
                    passed: None,
                    detail,
                },
            );
        }
    }
    if let Some((reason, pos)) = sc.expect_removed {
        m.insert(
            pos.line,
            ExpectationResult {
                line: pos.line,
                passed: None,
                detail: format!("device removed ({reason})"),
            },
        );
    }
    m
}

/// Elements an `expect count=` reads at a time (512 KiB of u64s).
const EXPECT_CHUNK: u64 = 1 << 16;

fn read_one(b: &Buffer, off: u64, w: Width) -> u64 {
    match w {
        Width::W32 => b.tools().debug_read_u32(off).map(u64::from).unwrap_or(0),
        Width::W64 => b.tools().debug_read_u64(off).unwrap_or(0),
    }
}

fn eval(check: &Check, v: u64, width: Width, other: impl Fn(Addr) -> u64) -> bool {
    match check {
        Check::Equals(x) => v == *x,
        Check::Compare {
            cmp,
            reference,
            mask,
        } => cmp.holds(v, *mask, *reference),
        Check::CompareAt {
            cmp,
            other: o,
            mask,
        } => {
            let r = other(*o) & mask & width.mask();
            cmp.holds(v, *mask, r)
        }
    }
}

fn set_expectation(ctx: &Ctx, line: usize, failure: Option<String>) {
    let mut m = lock(&ctx.expectations);
    if let Some(e) = m.get_mut(&line) {
        e.passed = Some(failure.is_none());
        if let Some(f) = failure {
            e.detail = format!("{}, {f}", e.detail);
        }
    }
}

/// Evaluates `expect` (memory) at `line`: `count` elements of `width` from `addr`; the first that
/// fails is named.
pub(super) fn expect_memory(
    ctx: &Ctx,
    line: usize,
    addr: Addr,
    width: Width,
    count: u64,
    check: &Check,
) {
    let sc = &*ctx.sc;
    let b = &ctx.buffers[addr.buffer];
    let other = |o: Addr| read_one(&ctx.buffers[o.buffer], o.offset, width);
    let mut failure = None;
    // Read in chunks (one pass over the buffer's storage each), checking for Ctrl-C between
    // them: a count of 2^29 elements is one call, not 2^29.
    let mut values: Vec<u64> = Vec::new();
    let mut halves: Vec<u32> = Vec::new();
    let mut first = 0u64;
    while first < count {
        if first > 0 && monitor::interrupted() {
            failure = Some(format!("interrupted after {first} of {count} elements"));
            break;
        }
        let n = (count - first).min(EXPECT_CHUNK);
        let start = addr.offset + first * width.bytes();
        let ok = |v: u64| eval(check, v, width, other);
        let read = match width {
            Width::W32 => {
                halves.clear();
                b.tools()
                    .debug_read_u32s(start, n as usize, &mut halves)
                    .map(|()| {
                        halves
                            .iter()
                            .position(|&v| !ok(u64::from(v)))
                            .map(|k| (k, u64::from(halves[k])))
                    })
            }
            Width::W64 => {
                values.clear();
                b.tools()
                    .debug_read_u64s(start, n as usize, &mut values)
                    .map(|()| values.iter().position(|&v| !ok(v)).map(|k| (k, values[k])))
            }
        };
        // Past the end (the parser keeps expectations inside their buffer): read as the
        // element-wise reads did, 0 for each.
        let bad = read.unwrap_or_else(|_| {
            (0..n)
                .map(|i| read_one(b, start + i * width.bytes(), width))
                .enumerate()
                .find(|&(_, v)| !ok(v))
        });
        if let Some((k, v)) = bad {
            let i = first + k as u64;
            let off = addr.offset + i * width.bytes();
            let extra = match check {
                Check::CompareAt { other: o, .. } => {
                    format!(" ({} is {})", addr_text(sc, *o), other(*o))
                }
                _ => String::new(),
            };
            failure = Some(if count > 1 {
                format!(
                    "element {i} ({}) is {v}{extra}",
                    addr_text(
                        sc,
                        Addr {
                            buffer: addr.buffer,
                            offset: off
                        }
                    )
                )
            } else {
                format!("got {v}{extra}")
            });
            break;
        }
        first += n;
    }
    set_expectation(ctx, line, failure);
}

/// Evaluates `expect-fence` at `line`: the fence's completed value.
pub(super) fn expect_fence(ctx: &Ctx, line: usize, fence: usize, check: &Check) {
    let v = ctx.fences[fence].completed_value();
    let ok = eval(check, v, Width::W64, |_| 0);
    set_expectation(ctx, line, (!ok).then(|| format!("got {v}")));
}

/// Evaluates `expect-removed` at the end of the run, `reason` being why the device was removed
/// (if it was): whether the removal is acceptable (expected, or none at all; an expected
/// removal that did not happen fails the expectation instead).
pub(super) fn removal_as_expected(
    sc: &Scenario,
    reason: Option<RemovalReason>,
    expectations: &mut BTreeMap<usize, ExpectationResult>,
) -> bool {
    let Some((want, pos)) = sc.expect_removed else {
        return reason.is_none();
    };
    let met = reason == Some(want);
    if let Some(e) = expectations.get_mut(&pos.line) {
        e.passed = Some(met);
        if !met {
            e.detail = match reason {
                Some(r) => format!("{}, got {r}", e.detail),
                None => format!("{}, the device was not removed", e.detail),
            };
        }
    }
    met || reason.is_none()
}
