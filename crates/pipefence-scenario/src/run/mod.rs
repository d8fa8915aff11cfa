//! Running a validated scenario on a device (threaded or deterministic driver), and its
//! [`Outcome`]: the expectations, the final fence values, the removal report with scenario line
//! numbers, and the exit status (`docs/scenario-language.md`).
//!
//! Host threads: the main program runs on the calling thread, each `host NAME { }` on a thread of
//! its own. On the threaded driver a monitor thread declares a hang (`DeviceTools::declare_hung`,
//! `docs/semantics.md` D6/H1) when some engine has work left, every host thread has ended or is
//! blocked on the device, and no engine has progressed for the watchdog timeout.
//!
//! The files: `host.rs` runs the host programs, action by action; `monitor.rs` is the threaded
//! driver's hang monitor and the Ctrl-C interruption; `expect.rs` the expectations;
//! `record.rs` records the command lists; `outcome.rs` builds the [`Outcome`] at the end of the
//! run and `report.rs` its removal and hazard reports, with scenario lines.

mod expect;
mod host;
mod monitor;
pub mod narrate;
mod outcome;
mod record;
mod report;

pub use monitor::{interrupt, interrupted};
pub use outcome::{
    ExpectationResult, HazardAccessReport, HazardReport, HostError, Outcome, QueueSummary, Status,
};
pub use record::encoded_lists;
pub use report::{site_text, writer_text};

use crate::plan::{Pos, Scenario};
use monitor::{BLOCKED, DONE, RUNNING};
use pipefence::CommandListDesc;
use pipefence::FenceDesc;
use pipefence::{Buffer, BufferDesc, CommandList, Device, DeviceDesc, Fence, Queue, QueueDesc};
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
    /// The deterministic driver's choices come from this script (a schedule string's replay,
    /// or an exhaustive check's run) instead of the seed.
    pub schedule: Option<Arc<pipefence::explore::Script>>,
}

impl RunOptions {
    /// A run on the deterministic driver that takes its choices from `script` (the replay of
    /// a schedule string, or an exhaustive check's run), strict or not, without a trace.
    pub fn scripted(strict: bool, script: Arc<pipefence::explore::Script>) -> Self {
        RunOptions {
            driver: DriverKind::Deterministic,
            strict,
            schedule: Some(script),
            ..RunOptions::default()
        }
    }
}

/// Locks `m`, also after a panic on another thread.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// What the host threads, the monitor and the end of the run share.
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
    /// The host threads started, in order (the deterministic driver's host slots 1, 2, ...).
    started: Mutex<Vec<String>>,
}

/// Runs a validated scenario on the driver `opts` selects, in strict mode or with validation
/// when `opts` asks. On the deterministic driver the run is a pure function of the scenario and
/// the seed, and `elapsed_ns` is virtual time (`u64::MAX` once the virtual clock saturated, D4).
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
        interrupt: Some(monitor::interrupt_flag()),
        ..base
    };
    let desc = match &opts.schedule {
        Some(script) => pipefence::explore::script_desc(&base, script.clone()),
        None if deterministic || opts.strict => {
            pipefence::explore::deterministic_desc(&base, opts.seed)
        }
        None => base,
    };
    let device = match Device::new(desc) {
        Ok(d) => d,
        Err(e) => {
            return outcome::early_failure(
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
                    Err(_) => return outcome::early_failure(&sc, start, b.pos, e.to_string()),
                }
            }
        }
    }
    let mut fences = Vec::new();
    for f in &sc.fences {
        match device.create_fence(&FenceDesc::new(f.initial).named(&f.name)) {
            Ok(x) => fences.push(x),
            Err(e) => return outcome::early_failure(&sc, start, f.pos, e.to_string()),
        }
    }
    let mut queues = Vec::new();
    for q in &sc.queues {
        match device.create_queue(&QueueDesc::new(q.kind, &q.name)) {
            Ok(x) => queues.push(x),
            Err(e) => return outcome::early_failure(&sc, start, q.pos, e.to_string()),
        }
    }
    let mut lists = Vec::new();
    let mut list_index = HashMap::new();
    for l in &sc.lists {
        let mut cl = match device.create_command_list(&CommandListDesc::new(l.kind, &l.name)) {
            Ok(x) => x,
            Err(e) => return outcome::early_failure(&sc, start, l.pos, e.to_string()),
        };
        for c in &l.commands {
            record::record(&mut cl, &buffers, &c.cmd);
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
        expectations: Mutex::new(expect::collect_expectations(&sc)),
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
        started: Mutex::new(Vec::new()),
    });
    let finished = Arc::new(AtomicBool::new(false));
    let monitor_handle = (!deterministic).then(|| {
        let (c, f) = (ctx.clone(), finished.clone());
        thread::spawn(move || monitor::monitor(&c, &f))
    });
    pipefence::host::set_current_name("main");
    let mut handles = Vec::new();
    host::run_actions(&ctx, 0, "main", &sc.main, &mut handles);
    // The main program ended: wait for the host threads, then for the queues (a hang is
    // detected as usual: by the monitor, or at once on the deterministic driver).
    ctx.states[0].store(BLOCKED, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    if !device.is_removed() {
        if deterministic {
            device.tools().settle(Duration::from_secs(24 * 3600));
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
    // The tools' reading: how long the run took is bookkeeping, not something the scenario
    // computes (an exhaustive search leaves the clock out of its relation unless a timestamp
    // is written).
    let elapsed = match device.tools().clock_ns() {
        // The virtual clock saturated (D4): how much time passed is unknown beyond that.
        u64::MAX if deterministic => u64::MAX,
        now if deterministic => now.saturating_sub(1_000_000_000),
        _ => u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
    };
    device.tools().flush_trace();
    let mut outcome = outcome::finish(&ctx, &list_index, elapsed);
    if let Some(r) = recorder {
        outcome.trace = r.events();
    }
    if let Some(script) = &opts.schedule {
        outcome.steps = narrate::decisive_steps(&ctx, &list_index, script);
    }
    outcome
}
