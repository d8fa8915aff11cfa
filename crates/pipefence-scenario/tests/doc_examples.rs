//! Every `kdl` example of the scenario language reference (`docs/scenario-language.md`) and of
//! the README, so that the documentation cannot drift from the parser. The fence's info string
//! says what a block is:
//!
//! - ` ```kdl `: a complete scenario; it must parse and pass on the deterministic driver (seed 0);
//! - ` ```kdl fails `: a complete scenario that parses and must not pass there (a bug shown on
//!   purpose);
//! - ` ```kdl invalid `: a scenario the parser must reject;
//! - ` ```kdl fragment `: a piece of a scenario; it must be valid KDL v2.
//!
//! A ` ```text ` block right after an invalid one lists its diagnostics
//! (`s.kdl:LINE:COLUMN: message`, other lines ignored): they must be exactly the parser's.

use pipefence_scenario::parse;
use pipefence_scenario::run::{run, DriverKind, RunOptions, Status};
use std::path::PathBuf;

/// What a block claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Passes,
    Fails,
    Invalid,
    Fragment,
    /// A `text` block (the diagnostics of the invalid block before it, if it follows one).
    Output,
}

/// One fenced `kdl` or `text` block: its kind, its first and last lines in the file, its text.
#[derive(Debug)]
struct Block {
    kind: Kind,
    line: usize,
    end: usize,
    text: String,
}

/// The `kdl` blocks of a Markdown text (fences of three backticks, not indented).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(Option<Kind>, usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        match &mut open {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    let kind = match (words.next(), words.next()) {
                        (Some("kdl"), None) => Some(Kind::Passes),
                        (Some("kdl"), Some("fails")) => Some(Kind::Fails),
                        (Some("kdl"), Some("invalid")) => Some(Kind::Invalid),
                        (Some("kdl"), Some("fragment")) => Some(Kind::Fragment),
                        (Some("text"), None) => Some(Kind::Output),
                        (Some("kdl"), Some(other)) => {
                            panic!("line {}: unknown kdl block kind `{other}`", i + 1)
                        }
                        _ => None,
                    };
                    open = Some((kind, i + 2, String::new()));
                }
            }
            Some((kind, start, text)) => {
                if line.trim_end() == "```" {
                    if let Some(kind) = *kind {
                        out.push(Block {
                            kind,
                            line: *start,
                            end: i + 1,
                            text: std::mem::take(text),
                        });
                    }
                    open = None;
                } else {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    out
}

/// Checks every block of `file` (relative to the repository root); returns how many of each
/// kind there were.
fn check_file(file: &str) -> [usize; 4] {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file);
    let markdown =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut counts = [0; 4];
    let all = blocks(&markdown);
    for (i, b) in all.iter().enumerate() {
        let at = format!("{file}:{}", b.line);
        match b.kind {
            Kind::Output => {}
            Kind::Fragment => {
                counts[3] += 1;
                if let Err(e) = kdl::KdlDocument::parse_v2(&b.text) {
                    panic!("{at}: fragment is not valid KDL: {e:?}\n{}", b.text);
                }
            }
            Kind::Invalid => {
                counts[2] += 1;
                let Err(diags) = parse("s.kdl", &b.text) else {
                    panic!("{at}: marked invalid, but it parses:\n{}", b.text);
                };
                // The diagnostics shown right after it, if any.
                let shown = all
                    .get(i + 1)
                    .filter(|o| o.kind == Kind::Output && o.line <= b.end + 3);
                if let Some(o) = shown {
                    let want: Vec<&str> =
                        o.text.lines().filter(|l| l.starts_with("s.kdl:")).collect();
                    let got: Vec<String> = diags
                        .iter()
                        .map(|d| format!("s.kdl:{}:{}: {}", d.pos.line, d.pos.column, d.message))
                        .collect();
                    assert_eq!(
                        want, got,
                        "{at}: the diagnostics shown are not the parser's"
                    );
                }
            }
            Kind::Passes | Kind::Fails => {
                let sc = match parse(&at, &b.text) {
                    Ok(sc) => sc,
                    Err(diags) => panic!(
                        "{at}: does not parse:\n{}",
                        pipefence_scenario::render_diagnostics(&at, &b.text, &diags)
                    ),
                };
                let o = run(
                    &sc,
                    &RunOptions {
                        driver: DriverKind::Deterministic,
                        seed: 0,
                        ..RunOptions::default()
                    },
                );
                if b.kind == Kind::Passes {
                    counts[0] += 1;
                    assert_eq!(
                        o.status,
                        Status::Passed,
                        "{at}: does not pass on the deterministic driver: {}",
                        serde_json::to_string_pretty(&o).unwrap_or_default()
                    );
                } else {
                    counts[1] += 1;
                    assert_ne!(
                        o.status,
                        Status::Passed,
                        "{at}: marked fails, but it passes"
                    );
                }
            }
        }
    }
    counts
}

#[test]
fn every_example_of_the_scenario_language_reference_parses_and_runs() {
    let [passes, _, invalid, fragments] = check_file("docs/scenario-language.md");
    assert!(passes >= 7, "{passes} complete scenarios");
    assert!(invalid >= 2, "{invalid} invalid scenarios");
    assert!(fragments >= 5, "{fragments} fragments");
}

#[test]
fn every_example_of_the_readme_parses_and_runs() {
    let [passes, fails, ..] = check_file("README.md");
    assert!(
        passes >= 3 && fails >= 1,
        "{passes} passing, {fails} failing scenarios"
    );
}

#[test]
fn the_readme_test_suite_code_is_the_tested_code() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let tests =
        std::fs::read_to_string(root.join("crates/pipefence-scenario/tests/readme_test_suite.rs"))
            .expect("readme_test_suite.rs");
    let section = readme
        .split("## Using pipefence from an engine's test suite")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has the section");
    let mut n = 0;
    for block in section.split("```rust\n").skip(1) {
        let code = block.split("```").next().unwrap_or("");
        assert!(
            tests.contains(code),
            "README code not in readme_test_suite.rs:\n{code}"
        );
        n += 1;
    }
    assert_eq!(n, 3, "rust blocks in the section");
}

#[test]
fn blocks_are_found_with_their_kind_and_line() {
    let md = "text\n```kdl\nfence a\n```\n```kdl fragment\nx\n```\n```sh\nls\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].end, 4);
    assert_eq!(
        (b[0].kind, b[0].line, b[0].text.as_str()),
        (Kind::Passes, 3, "fence a\n")
    );
    assert_eq!((b[1].kind, b[1].line), (Kind::Fragment, 6));
}
