//! Timeline labels never overlap: the SVG timeline of every example and test scenario (plain
//! deterministic and `--strict`, a few seeds) is parsed and every `<text>` gets a box estimated
//! the way the renderer lays labels out (`crates/pipefence/src/trace/svg/place.rs`: characters
//! times the font size times 0.58 em, 0.62 em bold; 0.72 em above the baseline, 0.22 em below;
//! placed by `text-anchor`); no two boxes may intersect, and none may stick out of the picture.
//!
//! `PIPEFENCE_TIMELINE_CHECK_BIN=/path/to/pipefence` checks another build's timelines (an
//! older one, to see that the check catches its overlaps).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn binary() -> PathBuf {
    std::env::var_os("PIPEFENCE_TIMELINE_CHECK_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_pipefence")),
        PathBuf::from,
    )
}

/// A label's estimated box.
#[derive(Debug, Clone)]
struct Label {
    text: String,
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Label {
    fn intersects(&self, o: &Label) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// The font size and weight of a `<text>` by its class (the timeline's stylesheet).
fn font(class: &str, bold_attr: bool) -> (f64, bool) {
    let classes: Vec<&str> = class.split_whitespace().collect();
    let has = |c: &str| classes.contains(&c);
    if has("title") {
        (18.0, true)
    } else if has("lane-label") || (has("instant-label") && has("error")) {
        (12.0, true)
    } else if has("tick-label") || has("slice-label") || has("flow-label") || has("instant-label") {
        (11.0, bold_attr)
    } else if has("region-label") {
        (10.0, bold_attr)
    } else if has("summary") || has("caption") || has("note") || classes.is_empty() {
        // Unclassed text is the legend's (12 px).
        (12.0, bold_attr)
    } else {
        panic!("a <text> of class {class:?} this check does not know the font of");
    }
}

/// Every `<text>` of `svg` with its estimated box (its own text, not its tooltip's).
fn labels(svg: &str) -> Vec<Label> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    let mut out = Vec::new();
    for n in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let text: String = n
            .children()
            .filter(roxmltree::Node::is_text)
            .filter_map(|c| c.text())
            .collect();
        if text.is_empty() {
            continue;
        }
        let num = |a: &str| -> f64 {
            n.attribute(a)
                .unwrap_or_else(|| panic!("<text> without {a}: {text}"))
                .parse()
                .unwrap()
        };
        let (x, y) = (num("x"), num("y"));
        let (size, bold) = font(
            n.attribute("class").unwrap_or(""),
            n.attribute("font-weight") == Some("bold"),
        );
        let w = text.chars().count() as f64 * size * if bold { 0.62 } else { 0.58 };
        let x0 = match n.attribute("text-anchor").unwrap_or("start") {
            "start" => x,
            "middle" => x - w / 2.0,
            "end" => x - w,
            a => panic!("text-anchor {a}"),
        };
        out.push(Label {
            text,
            x0,
            y0: y - 0.72 * size,
            x1: x0 + w,
            y1: y + 0.22 * size,
        });
    }
    out
}

/// The labels of `svg` that stick out of its width.
fn outside(svg: &str) -> Vec<Label> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    let width: f64 = doc
        .root_element()
        .attribute("width")
        .and_then(|w| w.parse().ok())
        .expect("a width");
    labels(svg)
        .into_iter()
        .filter(|l| l.x0 < 0.0 || l.x1 > width)
        .collect()
}

/// The pairs of labels of `svg` that overlap.
fn overlaps(svg: &str) -> Vec<(Label, Label)> {
    let l = labels(svg);
    let mut out = Vec::new();
    for (i, a) in l.iter().enumerate() {
        for b in &l[i + 1..] {
            if a.intersects(b) {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}

fn scenarios() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["examples", "tests/scenarios"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
            .collect();
        v.sort();
        files.extend(v);
    }
    assert!(files.len() >= 20, "{files:?}");
    files
}

/// The timeline `pipefence run FILE FLAGS --timeline` writes.
fn timeline(file: &Path, flags: &[&str], out: &Path) -> String {
    let _ = std::fs::remove_file(out);
    let status = Command::new(binary())
        .arg("run")
        .arg(file)
        .args(flags)
        .arg("--timeline")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run pipefence");
    assert!(status.code().is_some(), "{file:?} {flags:?}: {status}");
    std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{file:?} {flags:?}: no timeline: {e}"))
}

#[test]
fn timeline_labels_of_every_scenario_never_overlap() {
    let dir = std::env::temp_dir().join(format!("pipefence-labels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("t.svg");
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in scenarios() {
        for seed in ["0", "1", "2"] {
            for strict in [false, true] {
                let mode = if strict {
                    "--strict"
                } else {
                    "--driver=deterministic"
                };
                let svg = timeline(&file, &[mode, "--seed", seed], &out);
                checked += 1;
                for l in outside(&svg) {
                    failures.push(format!(
                        "{} {mode} --seed {seed}: {:?} sticks out of the picture ({:.0}..{:.0})",
                        file.display(),
                        l.text,
                        l.x0,
                        l.x1
                    ));
                }
                for (a, b) in overlaps(&svg) {
                    failures.push(format!(
                        "{} {mode} --seed {seed}: {:?} overlaps {:?}",
                        file.display(),
                        a.text,
                        b.text
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(checked >= 120, "{checked} timelines");
    assert!(
        failures.is_empty(),
        "{} overlapping or cut labels:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The check itself: two labels on one baseline, the second starting inside the first, overlap;
/// apart, or one anchored at its end left of the other, they do not.
#[test]
fn timeline_label_check_catches_overlapping_text() {
    let doc = |body: &str| {
        format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50">{body}</svg>"#)
    };
    let overlapping = doc(
        r#"<text class="instant-label" x="10" y="20">signal copied = 1</text><text class="instant-label" x="40" y="20">signal copied = 2</text>"#,
    );
    let found = overlaps(&overlapping);
    assert_eq!(found.len(), 1, "{found:?}");
    let apart = doc(
        r#"<text class="instant-label" x="10" y="20">signal copied = 1</text><text class="instant-label" x="200" y="20">signal copied = 2</text><text class="flow-label" x="9" y="20" text-anchor="end">fence a = 1</text><text class="slice-label" x="10" y="32">copy</text>"#,
    );
    assert!(overlaps(&apart).is_empty(), "{:?}", overlaps(&apart));
    let wide = doc(r#"<text x="90" y="20">a legend entry past the right edge</text>"#);
    assert_eq!(outside(&wide).len(), 1);
    // A lane label's tooltip is not drawn text.
    let l = labels(&doc(
        r#"<text class="lane-label" x="80" y="20" text-anchor="end">gfx ME<title>gfx ME, a long tooltip</title></text>"#,
    ));
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].text, "gfx ME");
    assert!((l[0].x1 - 80.0).abs() < 1e-9 && (l[0].x0 - (80.0 - 6.0 * 12.0 * 0.62)).abs() < 1e-9);
}
