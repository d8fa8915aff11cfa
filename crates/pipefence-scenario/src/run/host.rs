//! Running host programs: the main program and each `host NAME { }` thread, action by action
//! (queue submissions, CPU signals, waits, writes and polls, expectations), recording the
//! scenario line of each submission and host write for the reports.

use super::expect;
use super::monitor::{BLOCKED, DONE, RUNNING};
use super::{lock, Ctx, HostError};
use crate::plan::{Action, ActionKind};
use pipefence::{CommandList, Fence, MultipleFenceWaitFlags, Width};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Runs `actions` as host thread `host` (state index `me`: 0 for main), starting the `host`
/// threads it names (their handles go to `handles`); stops at the first failed action, recorded
/// as a host error, or when the device is removed.
pub(super) fn run_actions(
    ctx: &Arc<Ctx>,
    me: usize,
    host: &str,
    actions: &[Action],
    handles: &mut Vec<pipefence::host::HostHandle<()>>,
) {
    for a in actions {
        if ctx.device.is_removed() {
            return;
        }
        // A narrated schedule's decisive steps name the line a host thread was at.
        pipefence::host::set_current_position(u32::try_from(a.pos.line).unwrap_or(0));
        if let ActionKind::StartHost(h) = a.kind {
            let decl = &ctx.sc.hosts[h];
            let name = decl.name.clone();
            let c = ctx.clone();
            let handle = pipefence::host::spawn(&ctx.device, &name, move || {
                let actions = c.sc.hosts[h].actions.clone();
                let name = c.sc.hosts[h].name.clone();
                let mut none = Vec::new();
                run_actions(&c, h + 1, &name, &actions, &mut none);
                c.states[h + 1].store(DONE, Ordering::SeqCst);
            });
            match handle {
                Ok(h) => {
                    lock(&ctx.started).push(decl.name.clone());
                    handles.push(h);
                }
                Err(e) => {
                    lock(&ctx.errors).push(HostError {
                        host: host.into(),
                        line: a.pos.line,
                        message: format!("cannot start host `{}`: {e}", decl.name),
                    });
                    ctx.states[h + 1].store(DONE, Ordering::SeqCst);
                }
            }
            continue;
        }
        pipefence::set_source_line(u32::try_from(a.pos.line).ok());
        if let Err(message) = act(ctx, me, host, a) {
            if !ctx.device.is_removed() {
                lock(&ctx.errors).push(HostError {
                    host: host.into(),
                    line: a.pos.line,
                    message,
                });
            }
            return;
        }
    }
}

/// Runs `f`, a call that may block on the device, with the thread marked blocked for the hang
/// monitor.
fn blocking<T>(ctx: &Ctx, me: usize, f: impl FnOnce() -> T) -> T {
    ctx.states[me].store(BLOCKED, Ordering::SeqCst);
    let r = f();
    ctx.states[me].store(RUNNING, Ordering::SeqCst);
    r
}

/// Runs one action; `Err` with the message when it failed (queue calls refused because the
/// device is removed are not failures: the run ends with its report).
fn act(ctx: &Ctx, me: usize, host: &str, a: &Action) -> Result<(), String> {
    let line = a.pos.line;
    let removed_ok = |e: pipefence::Error| -> Result<(), String> {
        if e.is_device_removed() {
            Ok(())
        } else {
            Err(e.to_string())
        }
    };
    match &a.kind {
        ActionKind::Execute { queue, lists } => {
            let ls: Vec<&CommandList> = lists.iter().map(|&i| &ctx.lists[i]).collect();
            match ctx.queues[*queue].execute_command_lists(&ls) {
                Ok(seq) => {
                    lock(&ctx.submissions).insert((*queue, seq), line);
                }
                Err(e) => return removed_ok(e),
            }
        }
        ActionKind::Signal {
            queue,
            fence,
            value,
        } => match ctx.queues[*queue].signal(&ctx.fences[*fence], *value) {
            Ok(seq) => {
                lock(&ctx.submissions).insert((*queue, seq), line);
            }
            Err(e) => return removed_ok(e),
        },
        ActionKind::Wait {
            queue,
            fence,
            value,
        } => match ctx.queues[*queue].wait(&ctx.fences[*fence], *value) {
            Ok(seq) => {
                lock(&ctx.submissions).insert((*queue, seq), line);
            }
            Err(e) => return removed_ok(e),
        },
        ActionKind::CpuSignal { fence, value } => {
            // Noted after the call: the call is a scheduling point, and another host may
            // signal the fence between it and the signal itself.
            ctx.fences[*fence].signal(*value).or_else(removed_ok)?;
            lock(&ctx.host_signals).insert(*fence, (host.to_string(), line));
        }
        ActionKind::CpuWait {
            fence,
            value,
            timeout_ms,
        } => {
            let f = &ctx.fences[*fence];
            blocking(ctx, me, || {
                f.wait(*value, Duration::from_millis(*timeout_ms))
            })
            .map_err(|e| e.to_string())?;
        }
        ActionKind::CpuWaitMultiple {
            fences,
            any,
            timeout_ms,
        } => {
            let fs: Vec<&Fence> = fences.iter().map(|(f, _)| &ctx.fences[*f]).collect();
            let vs: Vec<u64> = fences.iter().map(|(_, v)| *v).collect();
            let flags = if *any {
                MultipleFenceWaitFlags::ANY
            } else {
                MultipleFenceWaitFlags::ALL
            };
            blocking(ctx, me, || {
                ctx.device
                    .wait_multiple(&fs, &vs, flags, Duration::from_millis(*timeout_ms))
            })
            .map_err(|e| e.to_string())?;
        }
        ActionKind::CpuWrite { addr, width, value } => {
            let b = &ctx.buffers[addr.buffer];
            let r = match width {
                Width::W32 => b.write_u32(addr.offset, *value as u32),
                Width::W64 => b.write_u64(addr.offset, *value),
            };
            r.map_err(|e| e.to_string())?;
            // Noted after the write, as a signal is.
            lock(&ctx.host_writes)
                .insert((addr.buffer, addr.offset & !7), (host.to_string(), line));
        }
        ActionKind::CpuPoll {
            addr,
            width,
            cmp,
            reference,
            mask,
            timeout_ms,
        } => {
            let b = &ctx.buffers[addr.buffer];
            let t = Duration::from_millis(*timeout_ms);
            blocking(ctx, me, || match width {
                Width::W32 => b.wait_u32(addr.offset, *cmp, *reference as u32, *mask as u32, t),
                Width::W64 => b.wait_u64(addr.offset, *cmp, *reference, *mask, t),
            })
            .map_err(|e| e.to_string())?;
        }
        ActionKind::Sleep { ms } => pipefence::host::sleep(&ctx.device, Duration::from_millis(*ms)),
        ActionKind::WaitIdle { timeout_ms } => {
            blocking(ctx, me, || {
                ctx.device.wait_idle(Duration::from_millis(*timeout_ms))
            })
            .map_err(|e| e.to_string())?;
        }
        ActionKind::RemoveDevice => ctx.device.remove(),
        ActionKind::Expect {
            addr,
            width,
            count,
            check,
        } => expect::expect_memory(ctx, line, *addr, *width, *count, check),
        ActionKind::ExpectFence { fence, check } => expect::expect_fence(ctx, line, *fence, check),
        ActionKind::StartHost(_) => {}
    }
    Ok(())
}
