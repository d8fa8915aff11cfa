//! The benchmark harness shared by every benchmark module: repetition and timing helpers,
//! medians, the [`Report`] builder, table printing and (serde-free) JSON output.
//!
//! A benchmark measures each figure several times (`reps` runs of `iters` iterations), for the
//! project and for a baseline measured in the same run, and returns a [`Report`]:
//!
//! ```text
//! Report::new("fences/ping-pong")
//!     .note("20000 round trips x 7 runs")
//!     .figure("round trip", Stats::from_samples(project), Unit::Ns)
//!     .baseline("Mutex+Condvar", Stats::from_samples(baseline))
//!     .ratio(0.5) // goal: median(project) / median(baseline) <= 0.5
//! ```
//!
//! Each figure prints as one line: the project's median `[min .. max]`, the baseline's, the
//! ratio project/baseline (and which direction is better), the goal, and PASS, MISS or `info`
//! (no goal).

use std::fmt::Write as _;
use std::time::Instant;

/// How the whole run is configured.
#[derive(Debug, Clone)]
pub struct Config {
    /// Small iteration counts (CI smoke runs).
    pub quick: bool,
}

impl Config {
    /// `full` normally, `quick` with `--quick`.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// One benchmark: a name (matched by `--filter`) and the function that measures it.
#[derive(Debug, Clone, Copy)]
pub struct Bench {
    /// `group/name`, e.g. `fences/ping-pong`.
    pub name: &'static str,
    /// What it measures, for `--list`.
    pub about: &'static str,
    /// Runs it.
    pub run: fn(&Config) -> Result<Report, String>,
}

/// Summary of repeated measurements: median, min, max and the samples themselves.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Median of the samples (mean of the two middle ones for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// The samples, in measurement order.
    pub samples: Vec<f64>,
}

impl Stats {
    /// Summarizes `samples` (NaN everywhere when empty).
    pub fn from_samples(samples: Vec<f64>) -> Stats {
        let min = samples.iter().copied().fold(f64::NAN, f64::min);
        let max = samples.iter().copied().fold(f64::NAN, f64::max);
        Stats {
            median: median(&samples),
            min,
            max,
            samples,
        }
    }

    /// A figure measured once (or deterministic, like a byte count).
    pub fn single(value: f64) -> Stats {
        Stats::from_samples(vec![value])
    }
}

/// Median of `xs` (NaN when empty). NaN samples sort last.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Runs `f` and returns its wall time in nanoseconds divided by `iters` (at least 1).
pub fn ns_per_iter(iters: u64, f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_nanos() as f64 / iters.max(1) as f64
}

/// The unit of a figure; it decides how values print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds (printed as ns, µs, ms or s).
    Ns,
    /// Bytes.
    Bytes,
    /// Percent (e.g. of one core).
    Percent,
    /// A dimensionless factor (printed with an `x`).
    Factor,
    /// Events per second (printed as k/s, M/s or G/s).
    PerSec,
    /// Bytes per second (printed as GB/s, decimal).
    BytesPerSec,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Bytes => "B",
            Unit::Percent => "%",
            Unit::Factor => "x",
            Unit::PerSec => "1/s",
            Unit::BytesPerSec => "B/s",
        }
    }

    /// `v` in this unit, with about 3 significant digits.
    pub fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return "n/a".to_string();
        }
        match self {
            Unit::Ns => {
                let a = v.abs();
                if a >= 1e9 {
                    format!("{} s", sig3(v / 1e9))
                } else if a >= 1e6 {
                    format!("{} ms", sig3(v / 1e6))
                } else if a >= 1e3 {
                    format!("{} µs", sig3(v / 1e3))
                } else {
                    format!("{} ns", sig3(v))
                }
            }
            Unit::Bytes => format!("{} B", sig3(v)),
            Unit::Percent => format!("{}%", sig3(v)),
            Unit::Factor => format!("{}x", sig3(v)),
            Unit::PerSec => {
                let a = v.abs();
                if a >= 1e9 {
                    format!("{} G/s", sig3(v / 1e9))
                } else if a >= 1e6 {
                    format!("{} M/s", sig3(v / 1e6))
                } else if a >= 1e3 {
                    format!("{} k/s", sig3(v / 1e3))
                } else {
                    format!("{}/s", sig3(v))
                }
            }
            Unit::BytesPerSec => format!("{} GB/s", sig3(v / 1e9)),
        }
    }
}

/// `v` with about three significant digits (no exponent for everyday magnitudes).
fn sig3(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 1e-9 {
        // Three significant digits in plain decimal: 0.000658.
        let decimals = (2 - a.log10().floor() as i32).clamp(3, 11) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{v:.2e}")
    }
}

/// Which direction of a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Smaller values are better (times, bytes, CPU).
    Lower,
    /// Larger values are better (throughput).
    Higher,
}

/// The goal a figure is judged against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// No goal: the figure is informational.
    None,
    /// `median(project) / median(baseline) <= x`.
    RatioAtMost(f64),
    /// `median(project) / median(baseline) >= x`.
    RatioAtLeast(f64),
    /// `median(project) < x` (in the figure's unit).
    ValueBelow(f64),
    /// `median(project) <= x`.
    ValueAtMost(f64),
    /// `median(project) >= x`.
    ValueAtLeast(f64),
}

impl Goal {
    fn describe(self, unit: Unit) -> String {
        match self {
            Goal::None => "-".to_string(),
            Goal::RatioAtMost(x) => format!("ratio <= {}", sig3(x)),
            Goal::RatioAtLeast(x) => format!("ratio >= {}", sig3(x)),
            Goal::ValueBelow(x) => format!("< {}", unit.format(x)),
            Goal::ValueAtMost(x) => format!("<= {}", unit.format(x)),
            Goal::ValueAtLeast(x) => format!(">= {}", unit.format(x)),
        }
    }

    fn json(self) -> String {
        let (kind, x) = match self {
            Goal::None => return "null".to_string(),
            Goal::RatioAtMost(x) => ("ratio_at_most", x),
            Goal::RatioAtLeast(x) => ("ratio_at_least", x),
            Goal::ValueBelow(x) => ("value_below", x),
            Goal::ValueAtMost(x) => ("value_at_most", x),
            Goal::ValueAtLeast(x) => ("value_at_least", x),
        };
        format!("{{\"kind\":{},\"limit\":{}}}", json_str(kind), json_num(x))
    }
}

/// The judgement of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The goal is met.
    Pass,
    /// The goal is missed (or cannot be evaluated: NaN, no baseline for a ratio goal).
    Miss,
    /// No goal.
    Info,
}

impl Verdict {
    /// `PASS`, `MISS` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Miss => "MISS",
            Verdict::Info => "info",
        }
    }
}

/// One figure: the project's measurement, an optional baseline, and a goal.
#[derive(Debug, Clone)]
pub struct Figure {
    /// What is measured.
    pub label: String,
    /// Its unit.
    pub unit: Unit,
    /// The project's measurements.
    pub value: Stats,
    /// The baseline's name and measurements (same unit).
    pub baseline: Option<(String, Stats)>,
    /// Which direction is better.
    pub better: Better,
    /// The goal.
    pub goal: Goal,
}

impl Figure {
    /// `median(project) / median(baseline)`, if there is a baseline.
    pub fn ratio(&self) -> Option<f64> {
        self.baseline
            .as_ref()
            .map(|(_, b)| self.value.median / b.median)
    }

    /// PASS, MISS or info.
    pub fn verdict(&self) -> Verdict {
        let v = self.value.median;
        let ok = match self.goal {
            Goal::None => return Verdict::Info,
            Goal::RatioAtMost(x) => self.ratio().is_some_and(|r| r <= x),
            Goal::RatioAtLeast(x) => self.ratio().is_some_and(|r| r >= x),
            Goal::ValueBelow(x) => v < x,
            Goal::ValueAtMost(x) => v <= x,
            Goal::ValueAtLeast(x) => v >= x,
        };
        if ok {
            Verdict::Pass
        } else {
            Verdict::Miss
        }
    }
}

/// The result of one benchmark: its figures and free-text notes.
#[derive(Debug, Clone)]
pub struct Report {
    /// The benchmark's name.
    pub name: String,
    /// Notes printed under the name (parameters, caveats).
    pub notes: Vec<String>,
    /// The figures, in order.
    pub figures: Vec<Figure>,
}

impl Report {
    /// An empty report.
    pub fn new(name: impl Into<String>) -> Report {
        Report {
            name: name.into(),
            notes: Vec::new(),
            figures: Vec::new(),
        }
    }

    /// Adds a note printed under the benchmark's name.
    pub fn note(mut self, text: impl Into<String>) -> Report {
        self.notes.push(text.into());
        self
    }

    /// Starts a new figure (lower is better, no goal until one is set).
    pub fn figure(mut self, label: impl Into<String>, value: Stats, unit: Unit) -> Report {
        self.figures.push(Figure {
            label: label.into(),
            unit,
            value,
            baseline: None,
            better: Better::Lower,
            goal: Goal::None,
        });
        self
    }

    fn last(&mut self) -> &mut Figure {
        self.figures
            .last_mut()
            .expect("Report: call figure() before baseline()/goal methods")
    }

    /// Sets the baseline of the last figure (same unit).
    pub fn baseline(mut self, label: impl Into<String>, value: Stats) -> Report {
        self.last().baseline = Some((label.into(), value));
        self
    }

    /// Marks the last figure as higher-is-better.
    pub fn higher_is_better(mut self) -> Report {
        self.last().better = Better::Higher;
        self
    }

    /// Goal for the last figure on project/baseline: at most `goal` when lower is better, at
    /// least `goal` when higher is better.
    pub fn ratio(mut self, goal: f64) -> Report {
        let f = self.last();
        f.goal = match f.better {
            Better::Lower => Goal::RatioAtMost(goal),
            Better::Higher => Goal::RatioAtLeast(goal),
        };
        self
    }

    /// Sets any goal for the last figure.
    pub fn goal(mut self, goal: Goal) -> Report {
        self.last().goal = goal;
        self
    }

    /// Prints the report as a block of lines, one per figure.
    pub fn print(&self) {
        print!("{}", self.render());
    }

    /// The printed form of the report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== {}", self.name);
        for n in &self.notes {
            let _ = writeln!(out, "   {n}");
        }
        let label_w = self
            .figures
            .iter()
            .map(|f| f.label.chars().count())
            .max()
            .unwrap_or(0);
        for f in &self.figures {
            let value = range(&f.value, f.unit);
            let base = match &f.baseline {
                Some((name, b)) => format!("{name} {}", range(b, f.unit)),
                None => "-".to_string(),
            };
            let dir = match f.better {
                Better::Lower => "lower is better",
                Better::Higher => "higher is better",
            };
            let ratio = match f.ratio() {
                Some(r) if r.is_finite() => format!("{} ({dir})", sig3(r)),
                Some(_) => format!("n/a ({dir})"),
                None => format!("- ({dir})"),
            };
            let _ = writeln!(
                out,
                "  {:<label_w$}  {value:<30} | baseline {base:<52} | ratio {ratio:<24} | goal {:<12} {}",
                f.label,
                f.goal.describe(f.unit),
                f.verdict().as_str(),
            );
        }
        out
    }

    /// The report as a JSON object.
    pub fn json(&self) -> String {
        let notes: Vec<String> = self.notes.iter().map(|n| json_str(n)).collect();
        let figures: Vec<String> = self
            .figures
            .iter()
            .map(|f| {
                let baseline = match &f.baseline {
                    Some((name, b)) => {
                        format!("{{\"label\":{},{}}}", json_str(name), stats_json(b))
                    }
                    None => "null".to_string(),
                };
                format!(
                    "{{\"label\":{},\"unit\":{},{},\"baseline\":{},\"ratio\":{},\"better\":{},\"goal\":{},\"verdict\":{}}}",
                    json_str(&f.label),
                    json_str(f.unit.name()),
                    stats_json(&f.value),
                    baseline,
                    f.ratio().map_or("null".to_string(), json_num),
                    json_str(match f.better {
                        Better::Lower => "lower",
                        Better::Higher => "higher",
                    }),
                    f.goal.json(),
                    json_str(f.verdict().as_str()),
                )
            })
            .collect();
        format!(
            "{{\"name\":{},\"notes\":[{}],\"figures\":[{}]}}",
            json_str(&self.name),
            notes.join(","),
            figures.join(",")
        )
    }
}

/// `median [min .. max]`, or just the value for a single sample.
fn range(s: &Stats, unit: Unit) -> String {
    if s.samples.len() <= 1 {
        unit.format(s.median)
    } else {
        format!(
            "{} [{} .. {}]",
            unit.format(s.median),
            unit.format(s.min),
            unit.format(s.max)
        )
    }
}

fn stats_json(s: &Stats) -> String {
    let samples: Vec<String> = s.samples.iter().map(|&x| json_num(x)).collect();
    format!(
        "\"median\":{},\"min\":{},\"max\":{},\"samples\":[{}]",
        json_num(s.median),
        json_num(s.min),
        json_num(s.max),
        samples.join(",")
    )
}

/// A JSON number (`null` for NaN and infinities).
pub fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".to_string()
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the header says about the run.
#[derive(Debug, Clone)]
pub struct Header {
    /// CPU model name.
    pub machine: String,
    /// CPUs this process may use (what `nproc` prints).
    pub cpus: usize,
    /// UTC date and time of the run.
    pub date: String,
    /// Short git commit (`+dirty` with uncommitted changes), or `unknown`.
    pub commit: String,
    /// `full` or `quick`.
    pub mode: String,
}

impl Header {
    /// Reads the machine, date and commit.
    pub fn collect(cfg: &Config) -> Header {
        Header {
            machine: cpu_model(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            date: utc_now(),
            commit: git_commit(),
            mode: if cfg.quick { "quick" } else { "full" }.to_string(),
        }
    }

    /// The printed header line.
    pub fn render(&self) -> String {
        format!(
            "pipefence-bench | machine: {} | nproc: {} | date: {} | commit: {} | mode: {}\n\
             each figure: median [min .. max] over runs; ratio = project/baseline (medians)\n",
            self.machine, self.cpus, self.date, self.commit, self.mode
        )
    }

    /// The JSON form.
    pub fn json(&self) -> String {
        format!(
            "{{\"machine\":{},\"nproc\":{},\"date\":{},\"commit\":{},\"mode\":{}}}",
            json_str(&self.machine),
            self.cpus,
            json_str(&self.date),
            json_str(&self.commit),
            json_str(&self.mode)
        )
    }
}

/// The whole run as a JSON document.
pub fn run_json(header: &Header, reports: &[Report]) -> String {
    let reports: Vec<String> = reports.iter().map(Report::json).collect();
    format!(
        "{{\"header\":{},\"reports\":[\n{}\n]}}\n",
        header.json(),
        reports.join(",\n")
    )
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "--short", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}+dirty")
            } else {
                c
            }
        }
        _ => "unknown".to_string(),
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn stats_min_max() {
        let s = Stats::from_samples(vec![5.0, 1.0, 9.0]);
        assert_eq!((s.median, s.min, s.max), (5.0, 1.0, 9.0));
    }

    #[test]
    fn verdicts() {
        let r = Report::new("x")
            .figure("a", Stats::single(1.0), Unit::Ns)
            .baseline("b", Stats::single(4.0))
            .ratio(0.5)
            .figure("c", Stats::single(2.0), Unit::Percent)
            .goal(Goal::ValueBelow(1.0))
            .figure("d", Stats::single(2.0), Unit::Bytes);
        let v: Vec<Verdict> = r.figures.iter().map(Figure::verdict).collect();
        assert_eq!(v, [Verdict::Pass, Verdict::Miss, Verdict::Info]);
        assert_eq!(r.figures[0].ratio(), Some(0.25));
    }

    #[test]
    fn json_escapes_and_nan() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(json_num(1.5), "1.5");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn units_format() {
        assert_eq!(Unit::Ns.format(312.4), "312 ns");
        assert_eq!(Unit::Ns.format(15_200.0), "15.2 µs");
        assert_eq!(Unit::Percent.format(0.0042), "0.00420%");
        assert_eq!(Unit::Percent.format(0.000658), "0.000658%");
        assert_eq!(Unit::Factor.format(0.5), "0.500x");
        assert_eq!(Unit::Bytes.format(f64::NAN), "n/a");
        assert_eq!(Unit::PerSec.format(23_400_000.0), "23.4 M/s");
        assert_eq!(Unit::PerSec.format(950.0), "950/s");
        assert_eq!(Unit::BytesPerSec.format(12_345_000_000.0), "12.3 GB/s");
    }
}
