//! The reference example, host blocks and expectation forms, and edits of valid files that must give located diagnostics.

use super::*;

/// The first example of `docs/scenario-language.md` ("A first scenario"), verbatim.
const EXAMPLE: &str = r#"// A graphics queue fills a buffer; an async compute queue waits on a bottom-of-pipe flag
// (pre-fetch parser wait) and sums it; the host waits for the compute queue's fence.
device tdr-ms=2000
buffer data size=16384
buffer flags size=64 heap=shared
fence done initial=0
queue gfx kind=direct
queue async kind=compute

list produce kind=direct {
    begin-event "fill"
    dispatch fill dst=data groups=64 value=7
    end-event
    write-value64-bop flags value=1 flush=l2-writeback
}
list consume kind=compute {
    wait-value64 flags cmp=greater-equal reference=1 engine=pfp
    dispatch sum src=data dst="flags+8" groups=64
}

execute gfx produce
execute async consume
signal async done 1
cpu-wait done 1 timeout-ms=5000
expect "flags+8" width=64 equals=28672
expect-fence done equals=1
"#;

/// The language reference's first example parses into the expected plan.
#[test]
fn reference_example_parses() {
    let plan = parse("example.kdl", EXAMPLE).expect("the example is valid");
    assert_eq!(plan.file, "example.kdl");
    assert_eq!(plan.device.tdr_ms, 2000);
    assert_eq!(plan.device.fifo_depth, 16);
    assert_eq!(plan.device.workers, None);
    assert_eq!(plan.device.timestamp_hz, 100_000_000);

    let names: Vec<&str> = plan.buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["data", "flags"]);
    assert_eq!(plan.buffers[0].size, 16384);
    assert_eq!(plan.buffers[0].heap, Heap::DeviceLocal);
    assert_eq!(plan.buffers[1].size, 64);
    assert_eq!(plan.buffers[1].heap, Heap::Shared);
    assert_eq!(
        (plan.buffers[1].pos.line, plan.buffers[1].pos.column),
        (5, 1)
    );
    assert_eq!(plan.fences.len(), 1);
    assert_eq!(
        (plan.fences[0].name.as_str(), plan.fences[0].initial),
        ("done", 0)
    );
    let queues: Vec<(&str, QueueKind)> = plan
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.kind))
        .collect();
    assert_eq!(
        queues,
        [("gfx", QueueKind::Direct), ("async", QueueKind::Compute)]
    );

    let flags = |offset| Addr { buffer: 1, offset };
    let produce = &plan.lists[0];
    assert_eq!(
        (produce.name.as_str(), produce.kind),
        ("produce", QueueKind::Direct)
    );
    let cmds: Vec<&ListCommand> = produce.commands.iter().map(|c| &c.cmd).collect();
    assert_eq!(
        cmds,
        [
            &ListCommand::BeginEvent("fill".into()),
            &ListCommand::Dispatch {
                kernel: KernelDecl::Fill {
                    dst: Addr {
                        buffer: 0,
                        offset: 0
                    },
                    value: 7
                },
                groups: 64
            },
            &ListCommand::EndEvent,
            &ListCommand::WriteBottomOfPipe {
                addr: flags(0),
                width: Width::W64,
                value: 1,
                flush: Flush::L2_WRITEBACK,
                source: pipefence::WriteSource::Value
            },
        ]
    );
    assert_eq!(produce.commands[3].pos.line, 14);
    assert_eq!(produce.commands[3].pos.column, 5);

    let consume = &plan.lists[1];
    assert_eq!(consume.kind, QueueKind::Compute);
    assert_eq!(
        consume.commands[0].cmd,
        ListCommand::WaitValue {
            addr: flags(0),
            cond: pipefence::ValueCondition {
                width: Width::W64,
                cmp: Comparison::GreaterEqual,
                reference: 1,
                mask: u64::MAX
            },
            engine: WaitEngine::Pfp
        }
    );
    assert_eq!(
        consume.commands[1].cmd,
        ListCommand::Dispatch {
            kernel: KernelDecl::Sum {
                dst: flags(8),
                src: Addr {
                    buffer: 0,
                    offset: 0
                }
            },
            groups: 64
        }
    );

    let main: Vec<&ActionKind> = plan.main.iter().map(|a| &a.kind).collect();
    assert_eq!(
        main,
        [
            &ActionKind::Execute {
                queue: 0,
                lists: vec![0]
            },
            &ActionKind::Execute {
                queue: 1,
                lists: vec![1]
            },
            &ActionKind::Signal {
                queue: 1,
                fence: 0,
                value: 1
            },
            &ActionKind::CpuWait {
                fence: 0,
                value: 1,
                timeout_ms: 5000
            },
            &ActionKind::Expect {
                addr: flags(8),
                width: Width::W64,
                count: 1,
                check: Check::Equals(28672)
            },
            &ActionKind::ExpectFence {
                fence: 0,
                check: Check::Equals(1)
            },
        ]
    );
    // The JSON report's `line` of each expectation.
    assert_eq!(plan.main[4].pos.line, 25);
    assert_eq!(plan.main[5].pos.line, 26);
    assert!(plan.hosts.is_empty());
    assert_eq!(plan.expect_removed, None);
}

/// Host blocks, `cpu-wait-multiple`, every `expect` form, string numbers and the defaults.
#[test]
fn host_blocks_expect_forms_and_defaults() {
    let plan = valid(
        r#"
buffer up size=32 heap=upload init=0xffffffff
fence a
fence b initial=0x10
queue q kind=copy
list l kind=copy {
    write-value32-top "up+0x4"
}
host worker {
    cpu-signal a 1
    cpu-wait-multiple mode=any { a 1; b "0x20"; }
}
execute q l
cpu-poll up cmp=not-equal reference=0
cpu-write "up+8" value=5 width=64
expect up count=2 cmp=less-equal reference-at="up+8" mask=0xff
expect up cmp=greater reference=1
expect-fence b cmp=greater-equal reference=16
sleep ms=3
wait-idle
remove-device
expect-removed reason=requested
"#,
    );
    assert_eq!(plan.buffers[0].init, u32::MAX);
    assert_eq!(plan.fences[1].initial, 16);
    assert_eq!(
        plan.lists[0].commands[0].cmd,
        ListCommand::WriteTopOfPipe {
            addr: Addr {
                buffer: 0,
                offset: 4
            },
            width: Width::W32,
            value: 0,
            source: pipefence::WriteSource::Value
        }
    );
    assert_eq!(plan.hosts.len(), 1);
    assert_eq!(plan.hosts[0].name, "worker");
    assert_eq!(
        plan.hosts[0].actions[1].kind,
        ActionKind::CpuWaitMultiple {
            fences: vec![(0, 1), (1, 0x20)],
            any: true,
            timeout_ms: 10_000
        }
    );
    let main: Vec<&ActionKind> = plan.main.iter().map(|a| &a.kind).collect();
    assert_eq!(main[0], &ActionKind::StartHost(0));
    assert_eq!(plan.main[0].pos.line, 8);
    assert_eq!(
        main[2],
        &ActionKind::CpuPoll {
            addr: Addr {
                buffer: 0,
                offset: 0
            },
            width: Width::W32,
            cmp: Comparison::NotEqual,
            reference: 0,
            mask: 0xffff_ffff,
            timeout_ms: 10_000
        }
    );
    assert_eq!(
        main[3],
        &ActionKind::CpuWrite {
            addr: Addr {
                buffer: 0,
                offset: 8
            },
            width: Width::W64,
            value: 5
        }
    );
    assert_eq!(
        main[4],
        &ActionKind::Expect {
            addr: Addr {
                buffer: 0,
                offset: 0
            },
            width: Width::W32,
            count: 2,
            check: Check::CompareAt {
                cmp: Comparison::LessEqual,
                other: Addr {
                    buffer: 0,
                    offset: 8
                },
                mask: 0xff
            }
        }
    );
    assert_eq!(
        main[5],
        &ActionKind::Expect {
            addr: Addr {
                buffer: 0,
                offset: 0
            },
            width: Width::W32,
            count: 1,
            check: Check::Compare {
                cmp: Comparison::Greater,
                reference: 1,
                mask: 0xffff_ffff
            }
        }
    );
    assert_eq!(
        main[6],
        &ActionKind::ExpectFence {
            fence: 1,
            check: Check::Compare {
                cmp: Comparison::GreaterEqual,
                reference: 16,
                mask: u64::MAX
            }
        }
    );
    assert_eq!(main[7], &ActionKind::Sleep { ms: 3 });
    assert_eq!(main[8], &ActionKind::WaitIdle { timeout_ms: 10_000 });
    assert_eq!(main[9], &ActionKind::RemoveDevice);
    let (reason, pos) = plan.expect_removed.expect("expect-removed");
    assert_eq!((reason, pos.line), (RemovalReason::Requested, 21));
}

/// One edit of a scenario's text.
#[derive(Debug, Clone)]
enum Edit {
    /// Delete a line.
    DeleteLine(usize),
    /// Duplicate a line.
    DuplicateLine(usize),
    /// Swap two lines.
    SwapLines(usize, usize),
    /// Delete a token (split at spaces) of a line.
    DeleteToken(usize, usize),
    /// Duplicate a token of a line.
    DuplicateToken(usize, usize),
    /// Swap two tokens, possibly on different lines.
    SwapTokens((usize, usize), (usize, usize)),
    /// Insert a character that matters to KDL before a token.
    Insert(usize, usize, char),
}

/// Any edit (indices are taken modulo the current sizes).
fn edit() -> impl Strategy<Value = Edit> {
    let i = || 0..64usize;
    let special = prop::sample::select(vec![
        '{', '}', '"', '=', ';', '-', '/', '#', '(', '\\', '9', '*',
    ]);
    prop_oneof![
        i().prop_map(Edit::DeleteLine),
        i().prop_map(Edit::DuplicateLine),
        (i(), i()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (i(), i()).prop_map(|(l, t)| Edit::DeleteToken(l, t)),
        (i(), i()).prop_map(|(l, t)| Edit::DuplicateToken(l, t)),
        ((i(), i()), (i(), i())).prop_map(|(a, b)| Edit::SwapTokens(a, b)),
        (i(), i(), special).prop_map(|(l, t, c)| Edit::Insert(l, t, c)),
    ]
}

/// Applies edits to the lines (each a list of space-separated tokens) of a text.
fn apply(source: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<Vec<String>> = source
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect();
    for e in edits {
        let n = lines.len();
        if n == 0 {
            break;
        }
        match *e {
            Edit::DeleteLine(l) => {
                lines.remove(l % n);
            }
            Edit::DuplicateLine(l) => {
                let line = lines[l % n].clone();
                lines.insert(l % n, line);
            }
            Edit::SwapLines(a, b) => lines.swap(a % n, b % n),
            Edit::DeleteToken(l, t) => {
                let line = &mut lines[l % n];
                let k = t % line.len();
                line.remove(k);
            }
            Edit::DuplicateToken(l, t) => {
                let line = &mut lines[l % n];
                let k = t % line.len();
                let token = line[k].clone();
                line.insert(k, token);
            }
            Edit::SwapTokens((l1, t1), (l2, t2)) => {
                let (l1, l2) = (l1 % n, l2 % n);
                let (k1, k2) = (t1 % lines[l1].len(), t2 % lines[l2].len());
                let a = lines[l1][k1].clone();
                let b = std::mem::replace(&mut lines[l2][k2], a);
                lines[l1][k1] = b;
            }
            Edit::Insert(l, t, c) => {
                let line = &mut lines[l % n];
                let k = t % line.len();
                line[k].insert(0, c);
            }
        }
        lines.retain(|l| !l.is_empty());
    }
    let mut out: Vec<String> = lines.iter().map(|l| l.join(" ")).collect();
    out.push(String::new());
    out.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// E3: a mutated example never panics the parser or the renderer, and every invalid file
    /// has at least one diagnostic, each at a real position.
    #[test]
    fn mutated_example_never_panics(edits in prop::collection::vec(edit(), 1..5)) {
        let source = apply(EXAMPLE, &edits);
        if let Err(diags) = parse("m.kdl", &source) {
            prop_assert!(!diags.is_empty(), "no diagnostic for:\n{source}");
            let lines = source.lines().count().max(1);
            for d in &diags {
                prop_assert!(d.pos.line >= 1 && d.pos.column >= 1, "{d:?} in:\n{source}");
                prop_assert!(d.pos.line <= lines + 1, "{d:?} past the end of:\n{source}");
            }
            let rendered = render_diagnostics("m.kdl", &source, &diags);
            prop_assert!(rendered.starts_with("m.kdl:"), "{rendered}");
        }
    }
}
