//! `--report FILE`: one self-contained HTML page for a run (no script, no external resource;
//! it opens from disk with no network): the status, the commands that replay the run, the hang
//! (removal report), the hazards, the failed expectations and the host errors, each with the
//! scenario text around its lines, the SVG timeline inline, the printed summary and the whole
//! scenario with line numbers. The page is also well-formed XML (XHTML), so tools can parse it.

use pipefence::diagnose::WriterReport;
use pipefence_scenario::run::{site_text, writer_text, Outcome, Status};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// What the page is of.
pub(crate) struct Page<'a> {
    /// The scenario's name (its path as given).
    pub(crate) name: &'a str,
    /// The scenario's text.
    pub(crate) source: &'a str,
    /// The run's title (driver, mode, seed).
    pub(crate) title: &'a str,
    /// The run.
    pub(crate) outcome: &'a Outcome,
    /// The summary as `run` prints it.
    pub(crate) summary: &'a str,
    /// Shell commands that replay the run (or explain it), in order.
    pub(crate) replay: &'a [String],
}

/// Lines of scenario text shown around a referenced line, on each side.
const CONTEXT: usize = 2;

/// Escapes `s` for XHTML text and attribute values, dropping characters XML 1.0 cannot hold.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The scenario text around `lines` (1-based): numbered, the lines themselves marked, gaps
/// between excerpts shown as `…`. Nothing for no (known) lines.
fn excerpt(source: &str, lines: &[usize]) -> String {
    let all: Vec<&str> = source.lines().collect();
    let marked: BTreeSet<usize> = lines
        .iter()
        .copied()
        .filter(|l| (1..=all.len()).contains(l))
        .collect();
    if marked.is_empty() {
        return String::new();
    }
    let mut shown = BTreeSet::new();
    for &l in &marked {
        shown.extend(l.saturating_sub(CONTEXT).max(1)..=(l + CONTEXT).min(all.len()));
    }
    let mut out = String::from(r#"<pre class="source">"#);
    let mut prev: Option<usize> = None;
    for l in shown {
        if prev.is_some_and(|p| p + 1 != l) {
            out.push_str("<span class=\"gap\">     …</span>\n");
        }
        let class = if marked.contains(&l) { "hit" } else { "ctx" };
        let _ = writeln!(
            out,
            r##"<span class="{class}"><a class="ln" href="#L{l}">{l:>5}</a>  {}</span>"##,
            esc(all[l - 1])
        );
        prev = Some(l);
    }
    out.push_str("</pre>");
    out
}

/// The whole scenario, numbered, each line an anchor (`#L12`), the lines in `hits` marked.
fn listing(source: &str, hits: &BTreeSet<usize>) -> String {
    let mut out = String::from(r#"<pre class="source listing">"#);
    for (i, text) in source.lines().enumerate() {
        let l = i + 1;
        let class = if hits.contains(&l) { "hit" } else { "ctx" };
        let _ = writeln!(
            out,
            r#"<span class="{class}" id="L{l}"><span class="ln">{l:>5}</span>  {}</span>"#,
            esc(text)
        );
    }
    out.push_str("</pre>");
    out
}

/// The timeline SVG without its XML prologue, to sit inside the page.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => "",
    }
}

/// The page.
pub(crate) fn report(page: &Page<'_>) -> String {
    let o = page.outcome;
    let src = page.source;
    let mut hits: BTreeSet<usize> = BTreeSet::new();
    let mut body = String::new();

    let (status, class) = match o.status {
        Status::Passed => ("passed", "ok"),
        Status::Failed => ("FAILED", "bad"),
        Status::Removed => ("DEVICE REMOVED", "bad"),
    };
    let _ = write!(
        body,
        r#"<h1>{}</h1><p class="run">{} <span class="status {class}">{status}</span> exit {}</p>"#,
        esc(page.name),
        esc(page.title),
        o.exit_code()
    );

    body.push_str(r#"<h2 id="replay">Replay</h2><pre class="cmd">"#);
    for c in page.replay {
        let _ = writeln!(body, "{}", esc(c));
    }
    body.push_str("</pre>");

    if let Some(r) = &o.removed {
        body.push_str(r#"<section class="problem"><h2 id="hang">Device removed</h2>"#);
        let mut head = format!("{} ({})", r.reason, r.hresult);
        if let Some(c) = &r.classification {
            let _ = write!(head, ", {c}");
        }
        let _ = write!(body, "<p><b>{}</b></p>", esc(&head));
        if !r.cycle.is_empty() {
            let _ = write!(
                body,
                "<p>cycle: {} → {}</p>",
                esc(&r.cycle.join(" → ")),
                esc(&r.cycle[0])
            );
        }
        if let Some(f) = &r.fault {
            let mut t = format!("fault: {} by {}", f.kind, site_text(&f.at));
            if let (Some(a), Some(acc)) = (&f.address, &f.access) {
                let _ = write!(t, ", {acc} of {a}");
            }
            let _ = write!(t, ": {}", f.message);
            let _ = write!(body, "<h3>{}</h3>", esc(&t));
            let lines: Vec<usize> = f.at.line.map(|l| l as usize).into_iter().collect();
            hits.extend(&lines);
            body.push_str(&excerpt(src, &lines));
        }
        for q in &r.queues {
            let mut t = format!("queue {} [{}]", q.queue, q.class);
            if let Some(at) = &q.at {
                let _ = write!(t, " stuck in {}", site_text(at));
            }
            let _ = write!(body, "<h3>{}</h3><ul>", esc(&t));
            if let Some(w) = &q.waiting_for {
                let cur = q.current.map(|c| format!(", current value {c}"));
                let _ = write!(
                    body,
                    "<li>waiting for {}{}</li>",
                    esc(w),
                    esc(&cur.unwrap_or_default())
                );
            }
            if let Some(w) = &q.last_writer {
                let _ = write!(body, "<li>last writer: {}</li>", esc(&writer_text(w)));
            }
            if let Some(l) = &q.last_completed {
                let _ = write!(body, "<li>last completed: {}</li>", esc(&site_text(l)));
            }
            if !q.events.is_empty() {
                let _ = write!(body, "<li>events: {}</li>", esc(&q.events.join(" > ")));
            }
            if !q.waits_on.is_empty() {
                let _ = write!(
                    body,
                    "<li>released only by: {}</li>",
                    esc(&q.waits_on.join(", "))
                );
            }
            body.push_str("</ul>");
            let mut lines: Vec<usize> =
                q.at.iter()
                    .filter_map(|s| s.line)
                    .map(|l| l as usize)
                    .collect();
            match &q.last_writer {
                Some(WriterReport::Queue { site, .. }) => {
                    lines.extend(site.line.map(|l| l as usize));
                }
                Some(WriterReport::Host { line, .. }) => lines.extend(line.map(|l| l as usize)),
                _ => {}
            }
            lines.extend(
                q.satisfiers
                    .iter()
                    .filter_map(|s| s.line)
                    .map(|l| l as usize),
            );
            hits.extend(&lines);
            body.push_str(&excerpt(src, &lines));
        }
        body.push_str("</section>");
    }

    if !o.hazards.is_empty() {
        let _ = write!(
            body,
            r#"<section class="problem"><h2 id="hazards">Hazards ({})</h2>"#,
            o.hazards.len()
        );
        for h in &o.hazards {
            let _ = write!(
                body,
                "<h3>{} on {}</h3><p>{}</p><p>missing: {}</p><p>fix: {}</p>",
                esc(&h.kind),
                esc(&h.range),
                esc(&format!("{} → {}", h.first.text, h.second.text)),
                esc(&h.missing),
                esc(&h.fix)
            );
            let lines: Vec<usize> = [Some(&h.first), Some(&h.second), h.via.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|a| a.line)
                .collect();
            hits.extend(&lines);
            body.push_str(&excerpt(src, &lines));
        }
        body.push_str("</section>");
    }

    let failed: Vec<_> = o
        .expectations
        .iter()
        .filter(|e| e.passed != Some(true))
        .collect();
    if !failed.is_empty() {
        body.push_str(
            r#"<section class="problem"><h2 id="expectations">Expectations not met</h2>"#,
        );
        for e in failed {
            let what = if e.passed.is_none() {
                "not reached"
            } else {
                "FAIL"
            };
            let _ = write!(
                body,
                "<h3>line {}: {} ({what})</h3>",
                e.line,
                esc(&e.detail)
            );
            hits.insert(e.line);
            body.push_str(&excerpt(src, &[e.line]));
        }
        body.push_str("</section>");
    }

    if !o.host_errors.is_empty() {
        body.push_str(r#"<section class="problem"><h2 id="host-errors">Host errors</h2>"#);
        for e in &o.host_errors {
            let _ = write!(
                body,
                "<h3>line {}: host {}: {}</h3>",
                e.line,
                esc(&e.host),
                esc(&e.message)
            );
            hits.insert(e.line);
            body.push_str(&excerpt(src, &[e.line]));
        }
        body.push_str("</section>");
    }

    body.push_str(r#"<h2 id="timeline">Timeline</h2><div class="timeline">"#);
    let svg = pipefence::trace::svg::svg_timeline(&o.trace, page.title);
    body.push_str(inline_svg(&svg));
    body.push_str("</div>");

    let _ = write!(
        body,
        r#"<h2 id="summary">Summary</h2><pre class="summary">{}</pre>"#,
        esc(page.summary)
    );
    body.push_str(r#"<h2 id="scenario">Scenario</h2>"#);
    body.push_str(&listing(src, &hits));

    let mut out = String::with_capacity(body.len() + 2048);
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" lang="en">
<head>
<meta charset="utf-8"/>
<title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 24px; color: #111; }}
h1 {{ font-size: 22px; margin: 0 0 4px 0; }}
h2 {{ font-size: 17px; margin: 22px 0 8px 0; border-bottom: 1px solid #ccd; }}
h3 {{ font-size: 14px; margin: 14px 0 4px 0; }}
.run {{ color: #444; margin: 0; }}
.status {{ font-weight: bold; padding: 1px 8px; border-radius: 4px; color: #fff; }}
.status.ok {{ background: #2e9e4f; }}
.status.bad {{ background: #d00000; }}
.problem h3 {{ color: #a00000; }}
pre {{ background: #f5f6f8; border: 1px solid #dde; padding: 8px; overflow-x: auto; font-size: 12.5px; }}
pre.source .hit {{ background: #ffe8a8; display: inline-block; min-width: 100%; }}
pre.source .ln {{ color: #889; text-decoration: none; }}
pre.source .gap {{ color: #889; }}
pre.listing {{ max-height: 600px; overflow-y: auto; }}
.timeline {{ overflow-x: auto; border: 1px solid #dde; }}
</style>
</head>
<body>
"#,
        title = esc(&format!("pipefence report: {}", page.title))
    );
    out.push_str(&body);
    out.push_str("\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::{esc, excerpt};

    #[test]
    fn excerpts_mark_their_lines_with_context_and_gaps() {
        let src: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let e = excerpt(&src, &[3, 15, 99]);
        assert!(
            e.contains(r##"<span class="hit"><a class="ln" href="#L3">    3</a>  line 3</span>"##),
            "{e}"
        );
        assert!(
            e.contains("line 1<") && e.contains("line 5<") && !e.contains("line 6<"),
            "{e}"
        );
        assert!(
            e.contains("…") && e.contains("line 17<") && !e.contains("line 18<"),
            "{e}"
        );
        assert_eq!(excerpt(&src, &[0, 21]), "");
    }

    #[test]
    fn escaping_keeps_markup_out() {
        assert_eq!(esc("<a href='x'>&\u{1}"), "&lt;a href=&#39;x&#39;&gt;&amp;");
    }
}
