//! `pipefence-bench [--quick] [--filter NAME] [--json FILE] [--list]`
//!
//! Runs pipefence's benchmarks. Each figure is printed with a baseline measured in the same run,
//! the ratio project/baseline (with the better direction), the goal, and PASS/MISS. Medians over
//! several runs; min and max are printed too. `--quick` uses small counts (CI smoke runs).
//! The exit status is 0 even when a goal is missed (timings vary by machine); it is 1 when a
//! benchmark fails to run and 2 for bad arguments.
//!
//! `pipefence-bench --workload NAME COUNT` runs one hot path for `scripts/instructions.sh`
//! (instruction counts under callgrind; see `workload`).

mod alloc;
mod engine;
mod exhaustive;
mod fences;
mod harness;
mod schedules;
mod strict;
mod tracing;
mod workload;

use harness::{Bench, Config, Header, Report, Verdict};
use std::process::ExitCode;
use std::time::Instant;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

const USAGE: &str = "usage: pipefence-bench [--quick] [--filter NAME] [--json FILE] [--list]
  --quick        small iteration counts (smoke run, a few seconds)
  --filter NAME  run only the benchmarks whose name contains NAME (repeatable)
  --json FILE    also write the results as JSON to FILE
  --list         list the benchmarks and exit";

/// Every benchmark, in running order.
fn all_benches() -> Vec<Bench> {
    let mut v = fences::BENCHES.to_vec();
    v.extend_from_slice(engine::BENCHES);
    v.extend_from_slice(schedules::BENCHES);
    v.extend_from_slice(exhaustive::BENCHES);
    v.extend_from_slice(tracing::BENCHES);
    v.extend_from_slice(strict::BENCHES);
    v
}

#[derive(Debug, Default)]
struct Args {
    quick: bool,
    filters: Vec<String>,
    json: Option<String>,
    list: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => out.quick = true,
            "--list" => out.list = true,
            "--filter" => out
                .filters
                .push(it.next().ok_or("--filter needs a NAME")?.clone()),
            "--json" => out.json = Some(it.next().ok_or("--json needs a FILE")?.clone()),
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument `{a}`")),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    // A pinned child restricts itself to one CPU before anything else runs (in particular
    // before pipefence first asks how many CPUs it may use).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == fences::PINNED_CHILD_ARG)
    {
        let pinned = fences::pin_to_one_cpu();
        let args: Vec<String> = std::env::args().skip(2).collect();
        return fences::pinned_child(pinned, &args);
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == workload::WORKLOAD_ARG)
    {
        let args: Vec<String> = std::env::args().skip(2).collect();
        return workload::main(&args);
    }

    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&raw) {
        Ok(a) => a,
        Err(e) => {
            if e.is_empty() {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            eprintln!("pipefence-bench: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let selected: Vec<Bench> = all_benches()
        .into_iter()
        .filter(|b| args.filters.is_empty() || args.filters.iter().any(|f| b.name.contains(f)))
        .collect();
    if args.list {
        for b in &selected {
            println!("{:<26} {}", b.name, b.about);
        }
        return ExitCode::SUCCESS;
    }
    if selected.is_empty() {
        eprintln!("pipefence-bench: no benchmark matches {:?}", args.filters);
        return ExitCode::from(2);
    }

    let cfg = Config { quick: args.quick };
    let header = Header::collect(&cfg);
    print!("{}", header.render());
    let started = Instant::now();
    let mut reports: Vec<Report> = Vec::new();
    let mut failed = 0;
    for b in &selected {
        let t = Instant::now();
        match (b.run)(&cfg) {
            Ok(r) => {
                println!();
                r.print();
                println!("   ({:.1} s)", t.elapsed().as_secs_f64());
                reports.push(r);
            }
            Err(e) => {
                println!();
                println!("== {}\n   ERROR: {e}", b.name);
                failed += 1;
            }
        }
    }
    let count = |v: Verdict| {
        reports
            .iter()
            .flat_map(|r| &r.figures)
            .filter(|f| f.verdict() == v)
            .count()
    };
    println!(
        "\nsummary: {} PASS, {} MISS, {} info, {failed} error(s) in {:.1} s",
        count(Verdict::Pass),
        count(Verdict::Miss),
        count(Verdict::Info),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, harness::run_json(&header, &reports)) {
            eprintln!("pipefence-bench: writing {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn args_parse() {
        let a = parse_args(&s(&["--quick", "--filter", "ping", "--json", "o.json"])).unwrap();
        assert!(a.quick);
        assert_eq!(a.filters, ["ping"]);
        assert_eq!(a.json.as_deref(), Some("o.json"));
        assert!(parse_args(&s(&["--filter"])).is_err());
        assert!(parse_args(&s(&["--bogus"])).is_err());
    }

    #[test]
    fn bench_names_unique() {
        let b = all_benches();
        for (i, x) in b.iter().enumerate() {
            assert!(b[i + 1..].iter().all(|y| y.name != x.name));
        }
    }
}
