//! `fences/ping-pong-pinned`: the ping-pong of `pingpong.rs` in a child process pinned to one
//! CPU (so fence waits cannot spin): pinning, the child's side, and the parent that runs it and
//! reads back its samples.

use super::pingpong::{
    pingpong_figures, pingpong_params, pingpong_samples, PingPongSamples, WAIT_KINDS,
};
use super::PINNED_CHILD_ARG;
use crate::harness::{Config, Report};
use std::process::ExitCode;

/// Restricts the calling thread (at process start: the whole process, since threads inherit
/// it) to the first CPU it may run on (normally CPU 0). Returns that CPU.
pub fn pin_to_one_cpu() -> Result<usize, String> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes (the empty set) is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a writable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    let max = libc::CPU_SETSIZE as usize;
    // SAFETY: `c < CPU_SETSIZE`, so CPU_ISSET reads within `set`.
    let cpu = (0..max)
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .ok_or("sched_getaffinity returned an empty CPU set")?;
    // SAFETY: `set` is a valid `cpu_set_t` and `cpu < CPU_SETSIZE`, so both write within it.
    unsafe {
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
    }
    // SAFETY: pid 0 is the calling thread; `set` is a readable `cpu_set_t` of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(format!(
            "sched_setaffinity(CPU {cpu}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(cpu)
}

/// The child side of `--pinned-child pingpong --iters N --reps R`: `main` has already pinned
/// the process (`pinned`); runs the ping-pongs and prints one `pinned-result` line.
pub fn pinned_child(pinned: Result<usize, String>, args: &[String]) -> ExitCode {
    let run = || -> Result<String, String> {
        let cpu = pinned?;
        let mut it = args.iter();
        let what = it.next().ok_or("--pinned-child: missing benchmark name")?;
        if what != "pingpong" {
            return Err(format!("--pinned-child: unknown benchmark `{what}`"));
        }
        let (mut iters, mut reps) = (0u64, 0usize);
        while let Some(a) = it.next() {
            let v = it
                .next()
                .ok_or(format!("--pinned-child: {a} needs a value"))?;
            match a.as_str() {
                "--iters" => iters = v.parse().map_err(|e| format!("--iters {v}: {e}"))?,
                "--reps" => reps = v.parse().map_err(|e| format!("--reps {v}: {e}"))?,
                _ => return Err(format!("--pinned-child: unknown argument {a}")),
            }
        }
        let par = std::thread::available_parallelism().map_or(1, |n| n.get());
        let samples = pingpong_samples(iters.max(1), reps.max(1))?;
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut line = format!("pinned-result cpu={cpu} parallelism={par}");
        for (kind, (fence, cv)) in WAIT_KINDS.into_iter().zip(&samples) {
            let k = kind.key();
            line += &format!(" fence_{k}_ns={} condvar_{k}_ns={}", list(fence), list(cv));
        }
        Ok(line)
    };
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pinned child: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(super) fn bench_pingpong_pinned(cfg: &Config) -> Result<Report, String> {
    let (iters, reps) = pingpong_params(cfg);
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = std::process::Command::new(&exe)
        .args([
            PINNED_CHILD_ARG,
            "pingpong",
            "--iters",
            &iters.to_string(),
            "--reps",
            &reps.to_string(),
        ])
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "pinned child failed ({}): {}{}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("pinned-result "))
        .ok_or_else(|| format!("pinned child printed no result: {stdout}"))?;
    let field = |key: &str| -> Result<&str, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| format!("pinned child result lacks `{key}`: {line}"))
    };
    let samples = |key: &str| -> Result<Vec<f64>, String> {
        field(key)?
            .split(',')
            .map(|x| x.parse::<f64>().map_err(|e| format!("{key} `{x}`: {e}")))
            .collect()
    };
    let mut parsed: [PingPongSamples; 2] = Default::default();
    for (kind, slot) in WAIT_KINDS.into_iter().zip(parsed.iter_mut()) {
        let k = kind.key();
        *slot = (
            samples(&format!("fence_{k}_ns"))?,
            samples(&format!("condvar_{k}_ns"))?,
        );
    }
    let cpu = field("cpu")?;
    let par = field("parallelism")?;
    let mut report = Report::new("fences/ping-pong-pinned").note(format!(
        "{iters} round trips x {reps} runs per wait kind in a child process pinned to CPU \
         {cpu}; available_parallelism there = {par} (so no spinning)"
    ));
    if par != "1" {
        report = report.note("WARNING: the child saw more than one CPU; waits may have spun");
    }
    Ok(pingpong_figures(report, "round trip, 1 CPU", parsed, 1.2))
}
