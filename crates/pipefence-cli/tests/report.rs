//! `run --report` and `check --report`: one self-contained HTML page (well-formed XHTML, no
//! script, no external resource) with the status, replay commands, the hang or hazards with
//! the scenario lines around them, and the timeline inline. With `chromium` on PATH, the page
//! is also rendered headless to a PNG (skipped with a message otherwise).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn temp_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pipefence-report-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `cmd` (output discarded), killed past `secs`; its exit code.
fn status_within(mut cmd: Command, secs: u64) -> Option<i32> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{:?} ran past {secs} s", cmd.get_program());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `pipefence ARGS --report OUT`: its exit code and the page.
fn report(args: &[&str], out: &Path) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipefence"));
    cmd.args(args).arg("--report").arg(out).current_dir(root());
    let code = status_within(cmd, 300);
    let page = std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    (code, page)
}

/// Checks that `page` is well-formed and self-contained: it parses as XML, has no script, no
/// link, object or iframe element, and no `src`/`href` outside the page (only `#...` anchors).
fn assert_self_contained(page: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse_with_options(
        page,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("not well-formed: {e}"));
    for n in doc.descendants().filter(roxmltree::Node::is_element) {
        let tag = n.tag_name().name();
        assert!(
            !["script", "link", "iframe", "object", "embed", "img"].contains(&tag),
            "<{tag}> in the report"
        );
        for a in n.attributes() {
            let name = a.name();
            if ["src", "href"].contains(&name) {
                assert!(a.value().starts_with('#'), "<{tag} {name}={:?}>", a.value());
            }
            assert!(
                !a.value().contains("http://") && !a.value().contains("https://"),
                "<{tag} {name}={:?}>",
                a.value()
            );
        }
    }
    assert!(
        !page.contains("url(http"),
        "an external url() in the styles"
    );
    assert!(!page.contains("@import"), "an @import in the styles");
    doc
}

fn text(doc: &roxmltree::Document<'_>) -> String {
    doc.descendants()
        .filter(roxmltree::Node::is_text)
        .filter_map(|n| n.text())
        .collect()
}

#[test]
fn run_report_of_a_hang_names_it_with_its_lines_and_replays_it() {
    let dir = temp_dir("hang");
    let (code, page) = report(
        &["run", "examples/deadlock.kdl", "--strict", "--seed", "3"],
        &dir.join("r.html"),
    );
    assert_eq!(code, Some(0), "deadlock.kdl expects its removal");
    let doc = assert_self_contained(&page);
    let t = text(&doc);
    assert!(
        t.contains("Device removed") && t.contains("deadlock"),
        "{t}"
    );
    assert!(t.contains("cycle: q1 → q2 → q1"), "{t}");
    // The excerpt of each stuck queue's wait, with the line marked.
    let hits: Vec<String> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("hit"))
        .map(|n| n.descendants().filter_map(|c| c.text()).collect())
        .collect();
    assert!(hits.iter().any(|h| h.contains("wait q1 b 1")), "{hits:?}");
    assert!(hits.iter().any(|h| h.contains("wait q2 a 1")), "{hits:?}");
    assert!(
        t.contains("run examples/deadlock.kdl --strict --seed 3\n"),
        "replay command: {t}"
    );
    // The timeline inline, with its lanes.
    let svg = doc
        .descendants()
        .find(|n| n.has_tag_name(("http://www.w3.org/2000/svg", "svg")))
        .expect("an inline <svg>");
    assert!(svg
        .descendants()
        .any(|n| n.attribute("class") == Some("lane-label")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_report_of_a_hazard_shows_both_accesses_in_the_scenario() {
    let dir = temp_dir("hazard");
    let (code, page) = report(
        &["run", "tests/scenarios/stale-cache.kdl", "--strict"],
        &dir.join("r.html"),
    );
    assert_eq!(code, Some(1));
    let doc = assert_self_contained(&page);
    let t = text(&doc);
    assert!(
        t.contains("Hazards (1)") && t.contains("stale-cache on data"),
        "{t}"
    );
    assert!(t.contains("fix: flush-pipeline flush=l1-invalidate"), "{t}");
    assert!(t.contains("dispatch fill dst=data groups=1 value=5"), "{t}");
    assert!(t.contains("Expectations not met"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_report_is_the_first_failing_schedule() {
    let dir = temp_dir("check");
    let (code, page) = report(
        &[
            "check",
            "tests/scenarios/write-write-queues.kdl",
            "--strict",
            "--schedules",
            "20",
        ],
        &dir.join("r.html"),
    );
    assert_eq!(code, Some(1));
    let doc = assert_self_contained(&page);
    let t = text(&doc);
    assert!(t.contains("FAILED") && t.contains("Hazards"), "{t}");
    assert!(t.contains("--strict --seed "), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `chromium`, `chromium-browser` or `google-chrome` on PATH.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser", "google-chrome"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

#[test]
fn report_renders_in_headless_chromium_when_available() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH (scripts/screenshot-report.sh needs one too)");
        return;
    };
    let dir = temp_dir("chromium");
    let html = dir.join("r.html");
    let _ = report(&["run", "examples/ring-buffer.kdl", "--strict"], &html);
    let png = dir.join("r.png");
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--window-size=1400,1000",
    ])
    .arg(format!("--screenshot={}", png.display()))
    .arg(format!("file://{}", html.display()))
    .env("HOME", &dir);
    status_within(cmd, 120);
    let bytes = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank 1400x1000 page compresses to a few kilobytes; the report is text and a picture.
    assert!(bytes.len() > 20_000, "{} bytes: a blank page?", bytes.len());
    let _ = std::fs::remove_dir_all(&dir);
}
