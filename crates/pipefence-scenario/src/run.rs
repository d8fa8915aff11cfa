//! Running a validated scenario on a device (threaded driver), and its [`Outcome`]: the
//! expectations, the final fence values, the removal report with scenario line numbers, and the
//! exit status (SCENARIO.md).
//!
//! Host threads: the main program runs on the calling thread, each `host NAME { }` on a thread of
//! its own. A monitor thread declares a hang (`Device::declare_hung`, `docs/semantics.md` D6/H1) when some
//! engine has work left, every host thread has ended or is blocked on the device, and no engine
//! has progressed for the watchdog timeout.

use crate::plan::{Action, ActionKind, Addr, Check, KernelDecl, ListCommand, Pos, Scenario};
use pipefence::diagnose::{QueueReport, SiteReport, WriterReport};
use pipefence::{
    Buffer, BufferDesc, Classification, CommandList, Comparison, Device, DeviceDesc, Fence,
    ImmediateWrite, Kernel, MultipleFenceWaitFlags, Queue, QueueDesc, RemovalReason, RemovalReport,
    Width,
};
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Which driver runs the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriverKind {
    /// Real threads, real time (the default).
    #[default]
    Threaded,
    /// One thread, virtual time, a seeded schedule.
    Deterministic,
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The driver.
    pub driver: DriverKind,
    /// The deterministic driver's seed.
    pub seed: u64,
    /// Strict mode (deterministic driver).
    pub strict: bool,
    /// Hazard detection on the threaded driver.
    pub validate: bool,
    /// Record a trace (returned in [`Outcome::trace`]).
    pub trace: bool,
}

/// The run's status (SCENARIO.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Everything held (exit 0).
    Passed,
    /// An expectation failed, a host wait timed out, a hazard was reported under strict or
    /// validate, or an `expect-removed` was not met (exit 1).
    Failed,
    /// The device was removed and the scenario did not expect it, or expected another reason
    /// (exit 3).
    Removed,
}

impl Status {
    /// The process exit status.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Passed => 0,
            Status::Failed => 1,
            Status::Removed => 3,
        }
    }
}

/// One `expect`, `expect-fence` or `expect-removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpectationResult {
    /// Its line.
    pub line: usize,
    /// `true`/`false`, or `None` if never reached.
    pub passed: Option<bool>,
    /// What was checked (and what was found, on failure).
    pub detail: String,
}

/// A host action that failed (a wait that timed out, an API error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostError {
    /// The host thread.
    pub host: String,
    /// The action's line.
    pub line: usize,
    /// What happened.
    pub message: String,
}

/// Per-queue summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSummary {
    /// Name.
    pub queue: String,
    /// Kind.
    pub kind: String,
    /// Commands completed.
    pub commands: u64,
    /// Nanoseconds with work it could run.
    pub busy_ns: u64,
    /// Nanoseconds stuck in a wait.
    pub blocked_ns: u64,
}

/// One access of a hazard report.
#[derive(Debug, Clone, Serialize)]
pub struct HazardAccessReport {
    /// The queue, for commands (`null` for host accesses).
    pub queue: Option<String>,
    /// `task` (a dispatch or copy), `me`, `pfp`, or `host`.
    pub agent: String,
    /// The host thread, for host accesses.
    pub host: Option<String>,
    /// The command list, for commands of a list.
    pub list: Option<String>,
    /// The command index in the list.
    pub command: Option<u32>,
    /// The command or host action (`dispatch`, `write-value32-bop`, `cpu-write`, ...).
    pub op: String,
    /// The kernel, for dispatches.
    pub kernel: Option<String>,
    /// `read`, `write`, `value write`, `atomic`, `wait` or `release`.
    pub access: String,
    /// The scenario line.
    pub line: Option<usize>,
    /// The whole label, as in the message.
    pub text: String,
}

/// A synchronization hazard (strict mode and `--validate`; `docs/memory-model.md` 5.3).
#[derive(Debug, Clone, Serialize)]
pub struct HazardReport {
    /// `unreleased-read`, `pfp-read-before-wait`, `stale-cache` or `write-write`.
    pub kind: String,
    /// The affected range, e.g. `data+0x0..+0x1000`.
    pub range: String,
    /// The first address (hexadecimal).
    pub address: String,
    /// The range's length in bytes.
    pub bytes: u64,
    /// The earlier access (the write, or the read a later write landed on).
    pub first: HazardAccessReport,
    /// The later access.
    pub second: HazardAccessReport,
    /// The synchronization named as missing (a release or a wait), if one is.
    pub via: Option<HazardAccessReport>,
    /// What is missing, in words.
    pub missing: String,
    /// What would fix it.
    pub fix: String,
    /// The whole report, as printed.
    pub message: String,
}

/// The result of a run: serializes to the documented `--json` object.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Always 1.
    pub version: u32,
    /// `passed`, `failed`, `removed`.
    pub status: Status,
    /// Every expectation, in line order.
    pub expectations: Vec<ExpectationResult>,
    /// Final fence values.
    pub fences: BTreeMap<String, u64>,
    /// Hazards (strict mode and validation; empty without `--strict` or `--validate`).
    pub hazards: Vec<HazardReport>,
    /// The removal report, if the device was removed, with the scenario line of every command
    /// it names ([`SiteReport::line`]) and of each host writer. In the JSON it has the shape of
    /// SCENARIO.md's "A removal report" ([`removed_json`]).
    #[serde(serialize_with = "removed_json")]
    pub removed: Option<RemovalReport>,
    /// Wall-clock nanoseconds of the run.
    pub elapsed_ns: u64,
    /// Host actions that failed (timed-out waits, API errors).
    pub host_errors: Vec<HostError>,
    /// Per-queue summary.
    pub queues: Vec<QueueSummary>,
    /// The trace, when [`RunOptions::trace`] asked for one (not part of the JSON).
    #[serde(skip)]
    pub trace: Vec<pipefence::trace::TraceEvent>,
}

impl Outcome {
    /// The process exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }
}

const RUNNING: u8 = 0;
const BLOCKED: u8 = 1;
const DONE: u8 = 2;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

struct Ctx {
    sc: Arc<Scenario>,
    device: Device,
    buffers: Vec<Buffer>,
    fences: Vec<Fence>,
    queues: Vec<Queue>,
    lists: Vec<CommandList>,
    /// (queue index, submission) -> line of the queue action.
    submissions: Mutex<HashMap<(usize, u64), usize>>,
    /// (buffer index, word offset) -> (host, line) of the last host write.
    host_writes: Mutex<HashMap<(usize, u64), (String, usize)>>,
    /// fence index -> (host, line) of the last CPU signal.
    host_signals: Mutex<HashMap<usize, (String, usize)>>,
    /// line -> result.
    expectations: Mutex<BTreeMap<usize, ExpectationResult>>,
    errors: Mutex<Vec<HostError>>,
    /// Host thread states, main first (threaded driver's hang monitor).
    states: Vec<AtomicU8>,
}

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

fn collect_expectations(sc: &Scenario) -> BTreeMap<usize, ExpectationResult> {
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

fn record(l: &mut CommandList, buffers: &[Buffer], cmd: &ListCommand) {
    let a = |x: Addr| buffers[x.buffer].address(x.offset);
    let kernel = |k: &KernelDecl| match k {
        KernelDecl::Fill { dst, value } => Kernel::fill(a(*dst), *value),
        KernelDecl::Add { dst, src, value } => Kernel::add(a(*dst), a(*src), *value),
        KernelDecl::Sum { dst, src } => Kernel::sum(a(*dst), a(*src)),
        KernelDecl::Spin { ns } => Kernel::spin(*ns),
    };
    match cmd {
        ListCommand::WaitValue {
            addr,
            width,
            cmp,
            reference,
            mask,
            engine,
        } => match width {
            Width::W32 => l.wait_value32(a(*addr), *cmp, *reference as u32, *mask as u32, *engine),
            Width::W64 => l.wait_value64(a(*addr), *cmp, *reference, *mask, *engine),
        },
        ListCommand::WriteBottomOfPipe {
            addr,
            width,
            value,
            flush,
            source,
        } => match width {
            Width::W32 => l.write_value32_bottom_of_pipe(a(*addr), *value as u32, *flush, *source),
            Width::W64 => l.write_value64_bottom_of_pipe(a(*addr), *value, *flush, *source),
        },
        ListCommand::WriteTopOfPipe {
            addr,
            width,
            value,
            source,
        } => match width {
            Width::W32 => l.write_value32_top_of_pipe(a(*addr), *value as u32, *source),
            Width::W64 => l.write_value64_top_of_pipe(a(*addr), *value, *source),
        },
        ListCommand::WriteImmediate { addr, value, mode } => {
            l.write_buffer_immediate(&[ImmediateWrite {
                address: a(*addr),
                value: *value,
                mode: *mode,
            }])
        }
        ListCommand::FlushPipeline { flush } => l.flush_pipeline(*flush),
        ListCommand::Dispatch { kernel: k, groups } => l.dispatch(&kernel(k), *groups),
        ListCommand::DispatchIndirect { kernel: k, args } => {
            l.dispatch_indirect(&kernel(k), a(*args))
        }
        ListCommand::Copy { dst, src, bytes } => l.copy_buffer_region(a(*dst), a(*src), *bytes),
        ListCommand::Marker(t) => l.set_marker(t),
        ListCommand::BeginEvent(t) => l.begin_event(t),
        ListCommand::EndEvent => l.end_event(),
    };
}

/// Runs a validated scenario on the driver `opts` selects (strict mode and validation are not
/// built yet; the caller rejects them). On the deterministic driver the run is a pure function
/// of the scenario and the seed, and `elapsed_ns` is virtual time.
/// The encoded command stream (the packet words `CommandList::close` writes) of each list of the
/// scenario, by list name, recorded on a plain device with the scenario's buffers. For tooling
/// that works on command streams: the decoder's fuzz corpus is made from these
/// (`cargo run -p pipefence-scenario --example decode-corpus`).
///
/// # Errors
/// The device or a buffer could not be created; the message names it.
pub fn encoded_lists(sc: &Scenario) -> Result<Vec<(String, Vec<u32>)>, String> {
    let device = Device::new(DeviceDesc::default()).map_err(|e| format!("device: {e}"))?;
    let mut buffers = Vec::new();
    for b in &sc.buffers {
        let buf = device
            .create_buffer(&BufferDesc::new(b.size, b.heap).named(&b.name))
            .map_err(|e| format!("buffer `{}`: {e}", b.name))?;
        buffers.push(buf);
    }
    let mut out = Vec::new();
    for l in &sc.lists {
        let mut cl = device
            .create_command_list(l.kind, &l.name)
            .map_err(|e| format!("list `{}`: {e}", l.name))?;
        for c in &l.commands {
            record(&mut cl, &buffers, &c.cmd);
        }
        out.push((l.name.clone(), pipefence::command::encode(cl.commands())));
    }
    Ok(out)
}

pub fn run(sc: &Scenario, opts: &RunOptions) -> Outcome {
    let start = Instant::now();
    let sc = Arc::new(sc.clone());
    let mut setup_errors = Vec::new();
    let base = DeviceDesc {
        watchdog_timeout: Duration::from_millis(sc.device.tdr_ms.max(1)),
        workers: sc.device.workers.unwrap_or(0),
        fifo_depth: sc.device.fifo_depth,
        timestamp_frequency: sc.device.timestamp_hz,
        ..DeviceDesc::default()
    };
    let deterministic = opts.driver == DriverKind::Deterministic;
    let recorder = opts
        .trace
        .then(|| Arc::new(pipefence::trace::TraceRecorder::new()));
    let base = DeviceDesc {
        trace: recorder
            .clone()
            .map(|r| r as Arc<dyn pipefence::trace::TraceSink>),
        ..base
    };
    let base = DeviceDesc {
        memory_model: if opts.strict {
            pipefence::MemoryModel::Strict
        } else if opts.validate {
            pipefence::MemoryModel::Validate
        } else {
            pipefence::MemoryModel::Plain
        },
        ..base
    };
    let desc = if deterministic || opts.strict {
        pipefence::explore::deterministic_desc(&base, opts.seed)
    } else {
        base
    };
    let device = match Device::new(desc) {
        Ok(d) => d,
        Err(e) => {
            return early_failure(
                &sc,
                start,
                Pos { line: 1, column: 1 },
                format!("device: {e}"),
            )
        }
    };
    let mut buffers = Vec::new();
    for b in &sc.buffers {
        match device.create_buffer(
            &BufferDesc::new(b.size, b.heap)
                .named(&b.name)
                .with_init(b.init),
        ) {
            Ok(buf) => buffers.push(buf),
            Err(e) => {
                setup_errors.push((b.pos, e.to_string()));
                // Keep indices aligned with a minimal stand-in.
                match device.create_buffer(&BufferDesc::new(4, b.heap).named(&b.name)) {
                    Ok(buf) => buffers.push(buf),
                    Err(_) => return early_failure(&sc, start, b.pos, e.to_string()),
                }
            }
        }
    }
    let mut fences = Vec::new();
    for f in &sc.fences {
        match device.create_named_fence(&f.name, f.initial) {
            Ok(x) => fences.push(x),
            Err(e) => return early_failure(&sc, start, f.pos, e.to_string()),
        }
    }
    let mut queues = Vec::new();
    for q in &sc.queues {
        match device.create_queue(&QueueDesc::new(q.kind, &q.name)) {
            Ok(x) => queues.push(x),
            Err(e) => return early_failure(&sc, start, q.pos, e.to_string()),
        }
    }
    let mut lists = Vec::new();
    let mut list_index = HashMap::new();
    for l in &sc.lists {
        let mut cl = match device.create_command_list(l.kind, &l.name) {
            Ok(x) => x,
            Err(e) => return early_failure(&sc, start, l.pos, e.to_string()),
        };
        for c in &l.commands {
            record(&mut cl, &buffers, &c.cmd);
        }
        if let Err(e) = cl.close() {
            setup_errors.push((l.pos, e.to_string()));
        }
        list_index.insert(cl.id(), lists.len());
        lists.push(cl);
    }
    let ctx = Arc::new(Ctx {
        sc: sc.clone(),
        device: device.clone(),
        buffers,
        fences,
        queues,
        lists,
        submissions: Mutex::new(HashMap::new()),
        host_writes: Mutex::new(HashMap::new()),
        host_signals: Mutex::new(HashMap::new()),
        expectations: Mutex::new(collect_expectations(&sc)),
        errors: Mutex::new(
            setup_errors
                .into_iter()
                .map(|(pos, message)| HostError {
                    host: "main".into(),
                    line: pos.line,
                    message,
                })
                .collect(),
        ),
        states: (0..=sc.hosts.len())
            .map(|_| AtomicU8::new(RUNNING))
            .collect(),
    });
    let finished = Arc::new(AtomicBool::new(false));
    let monitor_handle = (!deterministic).then(|| {
        let (c, f) = (ctx.clone(), finished.clone());
        thread::spawn(move || monitor(&c, &f))
    });
    pipefence::host::set_current_name("main");
    let mut handles = Vec::new();
    run_actions(&ctx, 0, "main", &sc.main, &mut handles);
    // The main program ended: wait for the host threads, then for the queues (a hang is
    // detected as usual: by the monitor, or at once on the deterministic driver).
    ctx.states[0].store(BLOCKED, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    if !device.is_removed() {
        if deterministic {
            device.settle(Duration::from_secs(24 * 3600));
        } else {
            let _ = device.wait_idle(Duration::from_secs(24 * 3600));
        }
    }
    ctx.states[0].store(DONE, Ordering::SeqCst);
    finished.store(true, Ordering::SeqCst);
    if let Some(m) = monitor_handle {
        m.thread().unpark();
        let _ = m.join();
    }
    let elapsed = if deterministic {
        device.clock_ns().saturating_sub(1_000_000_000)
    } else {
        start.elapsed().as_nanos() as u64
    };
    device.flush_trace();
    let mut outcome = finish(&ctx, &list_index, elapsed);
    if let Some(r) = recorder {
        outcome.trace = r.events();
    }
    outcome
}

fn early_failure(sc: &Scenario, start: Instant, pos: Pos, message: String) -> Outcome {
    Outcome {
        version: 1,
        status: Status::Failed,
        expectations: collect_expectations(sc).into_values().collect(),
        fences: BTreeMap::new(),
        hazards: Vec::new(),
        removed: None,
        elapsed_ns: start.elapsed().as_nanos() as u64,
        host_errors: vec![HostError {
            host: "main".into(),
            line: pos.line,
            message,
        }],
        queues: Vec::new(),
        trace: Vec::new(),
    }
}

/// Set by [`interrupt`] (the binary's Ctrl-C handler).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks the runs in progress to stop (Ctrl-C): a threaded run removes its device at once
/// (reason `requested`), whose report shows what every queue was waiting on then; `check`
/// starts no further schedule. Safe to call from a signal handler's thread.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether [`interrupt`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Declares a hang when every host thread has ended or is blocked on the device, some engine
/// has work left, and nothing progressed for the watchdog timeout (D6). On [`interrupt`] it
/// removes the device (the report is the snapshot of what waits on what).
fn monitor(ctx: &Ctx, finished: &AtomicBool) {
    let tdr = Duration::from_millis(ctx.sc.device.tdr_ms.max(1));
    let mut last = (ctx.device.progress(), Instant::now());
    while !finished.load(Ordering::SeqCst) && !ctx.device.is_removed() {
        thread::park_timeout(
            Duration::from_millis(10)
                .min(tdr / 4)
                .max(Duration::from_millis(1)),
        );
        if interrupted() {
            ctx.device.remove();
            return;
        }
        let all_stuck = ctx
            .states
            .iter()
            .all(|s| s.load(Ordering::SeqCst) != RUNNING);
        let p = ctx.device.progress();
        if p != last.0 || !all_stuck || !ctx.device.has_work() {
            last = (p, Instant::now());
            continue;
        }
        if last.1.elapsed() >= tdr {
            ctx.device.declare_hung();
            return;
        }
    }
}

fn run_actions(
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
                Ok(h) => handles.push(h),
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
        pipefence::hazard::set_source_line(u32::try_from(a.pos.line).ok());
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

fn blocking<T>(ctx: &Ctx, me: usize, f: impl FnOnce() -> T) -> T {
    ctx.states[me].store(BLOCKED, Ordering::SeqCst);
    let r = f();
    ctx.states[me].store(RUNNING, Ordering::SeqCst);
    r
}

fn read(b: &Buffer, off: u64, w: Width) -> u64 {
    match w {
        Width::W32 => b.debug_read_u32(off).map(u64::from).unwrap_or(0),
        Width::W64 => b.debug_read_u64(off).unwrap_or(0),
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

fn act(ctx: &Ctx, me: usize, host: &str, a: &Action) -> Result<(), String> {
    let sc = &*ctx.sc;
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
            lock(&ctx.host_signals).insert(*fence, (host.to_string(), line));
            ctx.fences[*fence].signal(*value).or_else(removed_ok)?;
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
            lock(&ctx.host_writes)
                .insert((addr.buffer, addr.offset & !7), (host.to_string(), line));
            let r = match width {
                Width::W32 => b.write_u32(addr.offset, *value as u32),
                Width::W64 => b.write_u64(addr.offset, *value),
            };
            r.map_err(|e| e.to_string())?;
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
        } => {
            let b = &ctx.buffers[addr.buffer];
            let other = |o: Addr| read(&ctx.buffers[o.buffer], o.offset, *width);
            let mut failure = None;
            for i in 0..*count {
                let off = addr.offset + i * width.bytes();
                let v = read(b, off, *width);
                if !eval(check, v, *width, other) {
                    let extra = match check {
                        Check::CompareAt { other: o, .. } => {
                            format!(" ({} is {})", addr_text(sc, *o), other(*o))
                        }
                        _ => String::new(),
                    };
                    failure = Some(if *count > 1 {
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
            }
            set_expectation(ctx, line, failure);
        }
        ActionKind::ExpectFence { fence, check } => {
            let v = ctx.fences[*fence].completed_value();
            let ok = eval(check, v, Width::W64, |_| 0);
            set_expectation(ctx, line, (!ok).then(|| format!("got {v}")));
        }
        ActionKind::StartHost(_) => {}
    }
    let _ = Comparison::Always;
    Ok(())
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

/// The scenario line of a site: its command's, for a command of a list; else the line of the
/// queue action that submitted it.
fn site_line(ctx: &Ctx, list_index: &HashMap<u32, usize>, s: &SiteReport) -> Option<u32> {
    let line = match (s.list_id, s.command) {
        (Some(id), Some(c)) => {
            let li = *list_index.get(&id)?;
            ctx.sc.lists[li]
                .commands
                .get(c as usize)
                .map(|c| c.pos.line)
        }
        _ => {
            let qi = ctx.sc.queues.iter().position(|q| q.name == s.queue)?;
            lock(&ctx.submissions).get(&(qi, s.submission)).copied()
        }
    }?;
    u32::try_from(line).ok()
}

/// The scenario line of the host action that last wrote what queue `q` waits on (a CPU signal
/// of its fence, or a `cpu-write` of its word).
fn host_writer_line(ctx: &Ctx, q: &QueueReport) -> Option<u32> {
    let sc = &*ctx.sc;
    let line = if let Some(f) = &q.fence {
        sc.fences
            .iter()
            .position(|x| &x.name == f)
            .and_then(|fi| lock(&ctx.host_signals).get(&fi).map(|x| x.1))
    } else {
        let bi = q
            .buffer
            .as_ref()
            .and_then(|b| sc.buffers.iter().position(|x| &x.name == b));
        bi.and_then(|bi| {
            lock(&ctx.host_writes)
                .get(&(bi, q.offset.unwrap_or(0) & !7))
                .map(|x| x.1)
        })
    }?;
    u32::try_from(line).ok()
}

/// Fills in the scenario lines of a removal report: of every site it names, and of each host
/// writer.
fn locate(ctx: &Ctx, li: &HashMap<u32, usize>, r: &mut RemovalReport) {
    for q in &mut r.queues {
        let host_line = host_writer_line(ctx, q);
        match &mut q.last_writer {
            Some(WriterReport::Host { line, .. }) => *line = host_line,
            Some(WriterReport::Queue { site, .. }) => site.line = site_line(ctx, li, site),
            Some(WriterReport::Never) | None => {}
        }
        let sites =
            q.at.iter_mut()
                .chain(q.last_completed.iter_mut())
                .chain(q.satisfiers.iter_mut());
        for s in sites {
            s.line = site_line(ctx, li, s);
        }
    }
    if let Some(f) = &mut r.fault {
        f.at.line = site_line(ctx, li, &f.at);
    }
}

/// A site in words, with its scenario line when known: `queue q, list l, command 2 (dispatch),
/// line 14` for a command of a list, else `queue q, signal, line 20`.
pub fn site_text(s: &SiteReport) -> String {
    let line = s.line.map(|l| format!(", line {l}")).unwrap_or_default();
    match (&s.list, s.command) {
        (Some(l), Some(c)) => format!("queue {}, list {l}, command {c} ({}){line}", s.queue, s.op),
        _ => format!("queue {}, {}{line}", s.queue, s.op),
    }
}

/// A writer in words, with its scenario line when known: `never written`, `host main, line 9`,
/// or the queue's site ([`site_text`]).
pub fn writer_text(w: &WriterReport) -> String {
    match w {
        WriterReport::Never => "never written".to_string(),
        WriterReport::Host {
            host,
            line: Some(l),
            ..
        } => format!("host {host}, line {l}"),
        WriterReport::Host { host, .. } => format!("host {host}"),
        WriterReport::Queue { site, .. } => site_text(site),
    }
}

/// Serializes [`Outcome::removed`] in the shape of SCENARIO.md's "A removal report": the
/// report's own values, with each queue's site flattened into the queue (`list`, `command`,
/// `op`, `line`), the fault's into the fault, and writers and completed commands in words
/// ([`writer_text`], [`site_text`]); ids, timestamps and the wait-for details the text already
/// says are left out.
fn removed_json<S: Serializer>(r: &Option<RemovalReport>, s: S) -> Result<S::Ok, S::Error> {
    r.as_ref().map(RemovedJson::new).serialize(s)
}

/// The `removed` object of the JSON, borrowed from the report ([`removed_json`]).
#[derive(Serialize)]
struct RemovedJson<'a> {
    reason: RemovalReason,
    hresult: &'a str,
    classification: Option<Classification>,
    cycle: &'a [String],
    queues: Vec<RemovedQueueJson<'a>>,
    fault: Option<RemovedFaultJson<'a>>,
}

/// A stuck queue in the JSON.
#[derive(Serialize)]
struct RemovedQueueJson<'a> {
    queue: &'a str,
    list: Option<&'a str>,
    command: Option<u32>,
    op: Option<&'a str>,
    line: Option<u32>,
    waiting_for: Option<&'a str>,
    current: Option<u64>,
    last_writer: Option<String>,
    last_completed: Option<String>,
    events: &'a [String],
    class: Classification,
    stage: Option<&'a str>,
    waits_on: &'a [String],
}

/// The fault in the JSON.
#[derive(Serialize)]
struct RemovedFaultJson<'a> {
    kind: Classification,
    address: Option<&'a str>,
    access: Option<&'a str>,
    op: &'a str,
    buffer: Option<&'a str>,
    queue: &'a str,
    list: Option<&'a str>,
    command: Option<u32>,
    line: Option<u32>,
    message: &'a str,
}

impl<'a> RemovedJson<'a> {
    fn new(r: &'a RemovalReport) -> Self {
        let queues = r
            .queues
            .iter()
            .map(|q| RemovedQueueJson {
                queue: &q.queue,
                list: q.at.as_ref().and_then(|s| s.list.as_deref()),
                command: q.at.as_ref().and_then(|s| s.command),
                op: q.at.as_ref().map(|s| s.op.as_str()),
                line: q.at.as_ref().and_then(|s| s.line),
                waiting_for: q.waiting_for.as_deref(),
                current: q.current,
                last_writer: q.last_writer.as_ref().map(writer_text),
                last_completed: q.last_completed.as_ref().map(site_text),
                events: &q.events,
                class: q.class,
                stage: q.stage.as_deref(),
                waits_on: &q.waits_on,
            })
            .collect();
        RemovedJson {
            reason: r.reason,
            hresult: &r.hresult,
            classification: r.classification,
            cycle: &r.cycle,
            queues,
            fault: r.fault.as_ref().map(|f| RemovedFaultJson {
                kind: f.kind,
                address: f.address.as_deref(),
                access: f.access.as_deref(),
                op: &f.at.op,
                buffer: f.buffer.as_deref(),
                queue: &f.at.queue,
                list: f.at.list.as_deref(),
                command: f.at.command,
                line: f.at.line,
                message: &f.message,
            }),
        }
    }
}

/// The scenario's name for a host API call in a hazard report.
fn host_op_name(op: &str) -> &str {
    match op {
        "write_u32" | "write_u64" => "cpu-write",
        "wait_u32" | "wait_u64" => "cpu-poll",
        "read_u32" | "read_u64" => "cpu-read",
        other => other,
    }
}

fn access_report(
    ctx: &Ctx,
    li: &HashMap<u32, usize>,
    a: &pipefence::HazardAccess,
) -> HazardAccessReport {
    match &a.agent {
        pipefence::HazardAgent::Queue {
            queue,
            stage,
            site,
            list,
        } => {
            let sr = SiteReport {
                queue: queue.clone(),
                queue_id: 0,
                submission: site.submission,
                list: list.clone(),
                list_id: site.list,
                command: site.command,
                op: a.op.to_string(),
                line: None,
            };
            let line = site_line(ctx, li, &sr).map(|l| l as usize);
            let what = a.what();
            let pfp = if *stage == "pfp" { "the PFP of " } else { "" };
            let at = match (list, site.command) {
                (Some(l), Some(c)) => format!("{pfp}{queue}/{l}:{c}"),
                _ => format!("{pfp}{queue}"),
            };
            let text = match line {
                Some(l) => format!("{at} ({what}, line {l})"),
                None => format!("{at} ({what})"),
            };
            HazardAccessReport {
                queue: Some(queue.clone()),
                agent: stage.to_string(),
                host: None,
                list: list.clone(),
                command: site.command,
                op: a.op.to_string(),
                kernel: a.kernel.clone(),
                access: a.kind.name().to_string(),
                line,
                text,
            }
        }
        pipefence::HazardAgent::Host { host, line } => {
            let op = host_op_name(a.op).to_string();
            let line = line.map(|l| l as usize);
            let text = match line {
                Some(l) => format!("host {host} ({op}, line {l})"),
                None => format!("host {host} ({op})"),
            };
            HazardAccessReport {
                queue: None,
                agent: "host".into(),
                host: Some(host.clone()),
                list: None,
                command: None,
                op,
                kernel: None,
                access: a.kind.name().to_string(),
                line,
                text,
            }
        }
    }
}

fn hazard_reports(ctx: &Ctx, li: &HashMap<u32, usize>) -> Vec<HazardReport> {
    let label = |a: &pipefence::HazardAccess| access_report(ctx, li, a).text;
    ctx.device
        .hazards()
        .iter()
        .map(|h| {
            let via = match &h.missing {
                pipefence::Missing::NoWriteback { release, .. }
                | pipefence::Missing::TopOfPipe { release } => Some(release),
                pipefence::Missing::PfpBeforeWait { wait } => Some(wait),
                _ => None,
            };
            let message = h.message(&label);
            let range = h.range_text();
            HazardReport {
                kind: h.kind.name().to_string(),
                range,
                address: format!("{:#x}", h.address),
                bytes: h.bytes,
                first: access_report(ctx, li, &h.first),
                second: access_report(ctx, li, &h.second),
                via: via.map(|v| access_report(ctx, li, v)),
                missing: h.missing_text(&label),
                fix: h.fix_text(&label),
                message,
            }
        })
        .collect()
}

fn finish(ctx: &Ctx, li: &HashMap<u32, usize>, elapsed_ns: u64) -> Outcome {
    let sc = &*ctx.sc;
    let removed = ctx.device.removal_report().map(|r| {
        let mut r = RemovalReport::clone(&r);
        locate(ctx, li, &mut r);
        r
    });
    let reason = ctx.device.removed_reason();
    let mut expectations = std::mem::take(&mut *lock(&ctx.expectations));
    let mut removal_ok = true;
    if let Some((want, pos)) = sc.expect_removed {
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
        removal_ok = met || reason.is_none();
        let _: RemovalReason = want;
    } else {
        removal_ok = removal_ok && reason.is_none();
    }
    let errors = std::mem::take(&mut *lock(&ctx.errors));
    let hazards = hazard_reports(ctx, li);
    let failed = expectations.values().any(|e| e.passed == Some(false))
        || !errors.is_empty()
        || !hazards.is_empty();
    let status = if !removal_ok {
        Status::Removed
    } else if failed {
        Status::Failed
    } else {
        Status::Passed
    };
    let fences = sc
        .fences
        .iter()
        .zip(&ctx.fences)
        .map(|(d, f)| (d.name.clone(), f.completed_value()))
        .collect();
    let queues = sc
        .queues
        .iter()
        .zip(&ctx.queues)
        .map(|(d, q)| {
            let st = q.stats();
            QueueSummary {
                queue: d.name.clone(),
                kind: d.kind.name().to_string(),
                commands: st.commands,
                busy_ns: st.busy_ns,
                blocked_ns: st.blocked_ns,
            }
        })
        .collect();
    Outcome {
        version: 1,
        status,
        expectations: expectations.into_values().collect(),
        fences,
        hazards,
        removed,
        elapsed_ns,
        host_errors: errors,
        queues,
        trace: Vec::new(),
    }
}
