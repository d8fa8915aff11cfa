//! The scenario parser's diagnostics: one test per kind of mistake, each a snapshot of the
//! rendered `FILE:LINE:COLUMN: message` text with its source line and caret; the language
//! example parsed into its plan; and a property test that mutated scenarios never panic the
//! parser and always come with a located diagnostic (E3).

use pipefence::{Comparison, Flush, Heap, QueueKind, RemovalReason, WaitEngine, Width};
use pipefence_scenario::plan::{ActionKind, Addr, Check, KernelDecl, ListCommand, Scenario};
use pipefence_scenario::{parse, render_diagnostics};
use proptest::prelude::*;

/// Drops the line break that follows the opening `r#"` of a test literal.
fn text(literal: &str) -> &str {
    literal.strip_prefix('\n').unwrap_or(literal)
}

/// Asserts that `source` is invalid and renders exactly as `expected` (file name `t.kdl`).
#[track_caller]
fn check(source: &str, expected: &str) {
    let source = text(source);
    let diags = match parse("t.kdl", source) {
        Ok(plan) => panic!("expected diagnostics, got a plan: {plan:#?}"),
        Err(diags) => diags,
    };
    let rendered = render_diagnostics("t.kdl", source, &diags);
    assert_eq!(rendered, text(expected), "rendered:\n{rendered}");
}

/// Parses a scenario that must be valid.
#[track_caller]
fn valid(source: &str) -> Scenario {
    match parse("t.kdl", text(source)) {
        Ok(plan) => plan,
        Err(diags) => panic!(
            "unexpected diagnostics:\n{}",
            render_diagnostics("t.kdl", text(source), &diags)
        ),
    }
}

mod reference;
mod semantics;
mod syntax;
/// E3: the `kdl` parser's recovery from a type annotation that is never closed, inside a long
/// token (`=(=(=(...`), took time quadratic in its length: 2,000 repeats (6 KB) 9.9 s, 20,000
/// about 15 minutes. The scan before it reports the first of 32 or more unclosed `(` at once;
/// fewer, and annotations that close (an identifier or a quoted string between spaces), still
/// reach the parser.
#[test]
fn e3_an_unclosed_type_annotation_is_reported_at_once() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(parse("t.kdl", &"=(".repeat(20_000)).map(|_| ()));
    });
    let diags = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("parse did not end within 120 s")
        .expect_err("unclosed annotations");
    assert_eq!(diags.len(), 1);
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (1, 2));
    assert!(
        diags[0]
            .message
            .contains("type annotation `(` is not closed"),
        "{}",
        diags[0].message
    );
    assert!(
        diags[0].message.ends_with("nor are 19999 more after it"),
        "{}",
        diags[0].message
    );
    // A few are left to the `kdl` parser, which reports them with the file's other errors.
    let diags = parse("t.kdl", "fence f ) 1\nbuffer b size=64 (\n").expect_err("two errors");
    assert!(diags.len() >= 2, "{diags:?}");
    assert_eq!(diags[0].pos.line, 1, "{diags:?}");
    assert!(diags.iter().any(|d| d.pos.line == 2), "{diags:?}");
    // Closed annotations pass the scan; the language then names what it does not take.
    for closed in [
        "(t)fence f\n",
        "( t )fence f\n",
        "(\"my type\")fence f\n",
        "fence f initial=(u8)0\n",
    ] {
        if let Err(d) = parse("t.kdl", closed) {
            assert!(
                d.iter().all(|d| !d.message.contains("is not closed")),
                "{closed}: {}",
                d[0].message
            );
        }
    }
}
