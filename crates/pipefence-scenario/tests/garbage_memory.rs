//! E3 at scale: a file of garbage up to the size limit is reported, with its first errors
//! located and the rest counted, at a memory cost bounded whatever the garbage looks like. The
//! `kdl` parser's error recovery costs about 1.4 KB per error, and garbage has about one error
//! per byte: 1 MB of `=` once cost 1.4 GB. Alone in its file (its own process), so that the
//! peak resident set measured is this test's.

use pipefence_scenario::{parse, render_diagnostics};

/// The process's peak resident set, in KiB (`VmHWM` in `/proc/self/status`).
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Printable bytes other than braces, quotes, `#`, `/` and `\` (which the pre-pass would stop
/// at first), from a fixed xorshift sequence.
fn random_printable(len: usize) -> String {
    let allowed: Vec<char> = (b' '..=b'~')
        .map(char::from)
        .filter(|c| !"{}\"#/\\".contains(*c))
        .collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            allowed[(x % allowed.len() as u64) as usize]
        })
        .collect()
}

#[test]
fn e3_garbage_costs_bounded_memory_whatever_its_shape() {
    const MB: usize = 1_000_000;
    let before = peak_kib();
    let shapes: Vec<(&str, String)> = vec![
        ("=", "=".repeat(MB)),
        (")", ")".repeat(MB)),
        ("(t)", format!("device {{ }}\n{}", "(t)".repeat(MB / 3))),
        ("a=", "a=".repeat(MB / 2)),
        ("random printable", random_printable(MB)),
        (
            "long valid line, then garbage",
            format!(
                "fence f\ncpu-wait f {}{}\n",
                "1 ".repeat(150_000),
                "=".repeat(MB)
            ),
        ),
        (
            "garbage inside a deep list block",
            format!(
                "list l kind=direct {{\n{}    host {{\n{}\n    }}\n}}\n",
                "    dispatch fill dst=data groups=1 value=1\n".repeat(2000),
                "=".repeat(MB)
            ),
        ),
        ("4 MiB of =", "=".repeat((4 << 20) - 16)),
    ];
    for (shape, source) in &shapes {
        let diags = parse("g.kdl", source).expect_err(shape);
        assert!(diags.len() <= 51, "{shape}: {} diagnostics", diags.len());
        assert!(
            diags[0].message.starts_with("KDL syntax error"),
            "{shape}: {}",
            diags[0].message
        );
        if diags.len() == 51 {
            assert!(
                diags[50]
                    .message
                    .ends_with("more errors from here on (only the first 50 are shown)"),
                "{shape}: {}",
                diags[50].message
            );
        }
        let shown = render_diagnostics("g.kdl", source, &diags);
        let first = format!("g.kdl:{}:{}: ", diags[0].pos.line, diags[0].pos.column);
        assert!(shown.starts_with(&first), "{shape}: {}", &shown[..200]);
    }
    let (Some(before), Some(after)) = (before, peak_kib()) else {
        // No /proc: the diagnostics were checked, the memory cannot be.
        return;
    };
    let grown_mib = after.saturating_sub(before) / 1024;
    assert!(
        grown_mib < 300,
        "the peak resident set grew by {grown_mib} MiB parsing garbage"
    );
    eprintln!("peak resident set grew by {grown_mib} MiB");
}
