//! Run and check reports as compiler-style diagnostics: a title with the kind (`error[stale-cache]:
//! ...`), the scenario lines involved with a labelled span under each command, every access's
//! `FILE:LINE:COLUMN` (an editor jumps there), what is missing, and the fix. Rendered with
//! `annotate-snippets` (rustc's renderer), in colour only when asked ([`Style`]).
//!
//! Everything here takes the outcome's own reports ([`HazardReport`], the removal report, failed
//! expectations, host errors) and the scenario's text; nothing is recomputed. A line the text
//! does not have (a report about another file, an edited file) is left out of the snippet, never
//! a panic.

use std::ops::Range;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use pipefence::diagnose::{QueueReport, SiteReport};
use pipefence::RemovalReport;

use crate::run::{site_text, writer_text, HazardAccessReport, HazardReport, HostError};

/// Whether diagnostics are coloured (ANSI escapes) or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Plain text (a pipe, a file, `--color never`, `NO_COLOR`).
    #[default]
    Plain,
    /// ANSI colours (a terminal, `--color always`).
    Color,
}

/// A scenario file's name and text, for the snippets of its diagnostics, with its line index.
#[derive(Debug, Clone)]
pub struct SourceFile<'a> {
    /// The name used in `FILE:LINE:COLUMN`.
    name: &'a str,
    /// The text.
    text: &'a str,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
}

/// A command or action on a scenario line: its span (the word naming it), 1-based column.
#[derive(Debug, Clone)]
struct Located {
    /// Byte range in the file.
    span: Range<usize>,
    /// 1-based line.
    line: usize,
    /// 1-based column (characters).
    column: usize,
}

impl<'a> SourceFile<'a> {
    /// The file `name` with text `text`.
    pub fn new(name: &'a str, text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        SourceFile { name, text, starts }
    }

    /// The name used in `FILE:LINE:COLUMN`.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The byte range of 1-based line `line` (without its line break).
    fn line_range(&self, line: usize) -> Option<Range<usize>> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        if start == self.text.len() && line > 1 {
            return None;
        }
        let rest = self.text.get(start..)?;
        let end = start + rest.find('\n').unwrap_or(rest.len());
        let end = if self.text[..end].ends_with('\r') {
            end - 1
        } else {
            end
        };
        Some(start..end)
    }

    /// Where `op` is named on `line`: the first word equal to `op`, else the line's first word.
    fn locate(&self, line: usize, op: Option<&str>) -> Option<Located> {
        let range = self.line_range(line)?;
        let text = &self.text[range.clone()];
        let word_end = |from: usize| {
            text[from..]
                .find(|c: char| c.is_whitespace() || c == ';' || c == '{' || c == '}')
                .map_or(text.len(), |i| from + i)
        };
        let is_sep = |c: Option<char>| {
            c.is_none_or(|c| c.is_whitespace() || c == ';' || c == '{' || c == '}')
        };
        let found = op.filter(|op| !op.is_empty()).and_then(|op| {
            text.match_indices(op).map(|(i, _)| i).find(|&i| {
                is_sep(text[..i].chars().next_back()) && is_sep(text[i + op.len()..].chars().next())
            })
        });
        let start = match found {
            Some(i) => i,
            None => text.find(|c: char| !c.is_whitespace())?,
        };
        let end = match found.and(op) {
            Some(op) => start + op.len(),
            None => word_end(start).max(start + 1).min(text.len()),
        };
        let end = end.max(start);
        Some(Located {
            span: range.start + start..range.start + end,
            line,
            column: text[..start].chars().count() + 1,
        })
    }

    /// `FILE:LINE:COLUMN` of a located command.
    fn at(&self, l: &Located) -> String {
        format!("{}:{}:{}", self.name, l.line, l.column)
    }
}

/// Marks at most this many lines apart are shown in one snippet.
const CLUSTER_LINES: usize = 6;

/// One labelled span of a diagnostic.
struct Mark {
    at: Located,
    label: String,
    primary: bool,
}

/// A diagnostic being built: title, kind, marks and notes.
struct Diag {
    title: String,
    id: Option<String>,
    marks: Vec<Mark>,
    notes: Vec<String>,
    help: Vec<String>,
    /// An expected event (a removal the scenario asked for): a note, not an error.
    note: bool,
}

impl Diag {
    fn new(id: Option<&str>, title: String) -> Self {
        Diag {
            title,
            id: id.map(str::to_string),
            marks: Vec::new(),
            notes: Vec::new(),
            help: Vec::new(),
            note: false,
        }
    }

    fn mark(&mut self, at: Option<Located>, label: String, primary: bool) {
        if let Some(at) = at {
            self.marks.push(Mark { at, label, primary });
        }
    }

    fn render(mut self, src: &SourceFile<'_>, style: Style) -> String {
        // The first primary mark leads (its position is the `-->` line); marks are shown in
        // line order.
        if !self.marks.iter().any(|m| m.primary) {
            if let Some(m) = self.marks.first_mut() {
                m.primary = true;
            }
        }
        let level = if self.note { Level::NOTE } else { Level::ERROR };
        let mut title = level.primary_title(self.title.as_str());
        if let Some(id) = &self.id {
            title = title.id(id.as_str());
        }
        let mut group = Group::with_title(title);
        // The primary mark first (its position is the `-->` line), then the others in line
        // order; marks a few lines apart share a snippet, others get their own (`::: FILE:LINE`).
        self.marks.sort_by_key(|m| (!m.primary, m.at.line));
        let mut clusters: Vec<Vec<&Mark>> = Vec::new();
        for m in &self.marks {
            let near = clusters.iter_mut().find(|c| {
                c.iter()
                    .any(|o| o.at.line.abs_diff(m.at.line) <= CLUSTER_LINES)
            });
            match near {
                Some(c) => c.push(m),
                None => clusters.push(vec![m]),
            }
        }
        let mut first_primary = true;
        for c in &clusters {
            let lo = c.iter().map(|m| m.at.line).min().unwrap_or(1);
            let hi = c.iter().map(|m| m.at.line).max().unwrap_or(1);
            let start = src.line_range(lo).map_or(0, |r| r.start);
            let end = src.line_range(hi).map_or(src.text.len(), |r| r.end);
            let mut snippet = Snippet::source(&src.text[start..end])
                .line_start(lo)
                .path(src.name)
                .fold(true);
            for m in c {
                let kind = if m.primary && first_primary {
                    first_primary = false;
                    AnnotationKind::Primary
                } else {
                    AnnotationKind::Context
                };
                let span = m.at.span.start - start..m.at.span.end - start;
                snippet = snippet.annotation(kind.span(span).label(m.label.as_str()));
            }
            group = group.element(snippet);
        }
        for n in &self.notes {
            group = group.element(Level::NOTE.message(n.as_str()));
        }
        for h in &self.help {
            group = group.element(Level::HELP.message(h.as_str()));
        }
        let renderer = match style {
            Style::Color => Renderer::styled(),
            Style::Plain => Renderer::plain(),
        };
        let mut out = renderer.render(&[group]);
        out.push('\n');
        out
    }
}

/// The word a hazard access is named by on its line: the scenario's command or action.
fn access_op(a: &HazardAccessReport) -> &str {
    a.op.as_str()
}

/// A hazard as a diagnostic: both accesses (and the synchronization named as missing) marked on
/// their lines with their `FILE:LINE:COLUMN`, what is missing, and the fix. `notes` are added
/// at the end (a check's counts and seeds).
pub fn hazard(src: &SourceFile<'_>, h: &HazardReport, style: Style, notes: &[String]) -> String {
    let (a, b) = match h.kind.as_str() {
        "write-write" => ("written", "written"),
        _ if h.first.access == "read" => ("read", "then written"),
        _ => ("written", "read"),
    };
    let title = if a == b {
        format!(
            "`{}` {a} by {} and by {}",
            h.range,
            short(&h.first),
            short(&h.second)
        )
    } else {
        format!(
            "`{}` {a} by {}, {b} by {}",
            h.range,
            short(&h.first),
            short(&h.second)
        )
    };
    let mut d = Diag::new(Some(&h.kind), title);
    let first = src.locate_access(&h.first);
    let second = src.locate_access(&h.second);
    let via = h.via.as_ref().map(|v| (v, src.locate_access(v)));
    let label = |what: &str, acc: &HazardAccessReport| format!("{what} by {}", short(acc));
    d.mark(second.clone(), label(b, &h.second), true);
    d.mark(first.clone(), label(a, &h.first), false);
    if let Some((v, at)) = &via {
        d.mark(
            at.clone(),
            format!("the {} by {}", v.access, short(v)),
            false,
        );
    }
    let mut where_ = |what: &str, acc: &HazardAccessReport, at: &Option<Located>| {
        let place = at.as_ref().map_or_else(
            || acc.line.map_or(String::new(), |l| format!(" at line {l}")),
            |l| format!(" at {}", src.at(l)),
        );
        d.notes.push(format!("{what} by {}{place}", short(acc)));
    };
    where_(a, &h.first, &first);
    where_(b, &h.second, &second);
    if let Some((v, at)) = &via {
        where_(&format!("the {}", v.access), v, at);
    }
    d.notes.push(h.missing.clone());
    d.help.push(format!("fix: {}", h.fix));
    d.notes.extend(notes.iter().cloned());
    d.render(src, style)
}

impl SourceFile<'_> {
    fn locate_access(&self, a: &HazardAccessReport) -> Option<Located> {
        self.locate(a.line?, Some(access_op(a)))
    }

    fn locate_site(&self, s: &SiteReport) -> Option<Located> {
        self.locate(usize::try_from(s.line?).ok()?, Some(&s.op))
    }
}

/// An access's short name: `queue/list:command (op)`, or `host NAME (op)`.
fn short(a: &HazardAccessReport) -> String {
    let what = match &a.kernel {
        Some(k) => format!("{} {k}", a.op),
        None => a.op.clone(),
    };
    let pfp = if a.agent == "pfp" { "the PFP of " } else { "" };
    match (&a.queue, &a.list, a.command, &a.host) {
        (Some(q), Some(l), Some(c), _) => format!("{pfp}{q}/{l}:{c} ({what})"),
        (Some(q), _, _, _) => format!("{pfp}{q} ({what})"),
        (None, _, _, Some(h)) => format!("host {h} ({what})"),
        _ => a.text.clone(),
    }
}

/// A failed expectation as a diagnostic at its line: `detail` says what was checked (and what
/// was found, for one result).
pub fn expectation(
    src: &SourceFile<'_>,
    line: usize,
    detail: &str,
    style: Style,
    notes: &[String],
) -> String {
    let mut d = Diag::new(None, format!("expectation failed: {detail}"));
    d.mark(src.locate(line, None), "this expectation".into(), true);
    d.notes.extend(notes.iter().cloned());
    d.render(src, style)
}

/// What several results of one expectation have in common (what was checked): their longest
/// common prefix, cut at its last `, ` (`totals+8 (u64) == 320` of `..., got 192` and
/// `..., got 256`).
pub fn common_detail<'a>(results: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut it = results.into_iter();
    let mut prefix = it.next()?.to_string();
    for r in it {
        let n = prefix
            .char_indices()
            .zip(r.chars())
            .find(|((_, a), b)| a != b)
            .map_or(prefix.len().min(r.len()), |((i, _), _)| i);
        prefix.truncate(n);
    }
    let cut = prefix.rfind(", ")?;
    prefix.truncate(cut);
    Some(prefix)
}

/// A host action that failed (a wait that timed out, an API error) as a diagnostic.
pub fn host_error(src: &SourceFile<'_>, e: &HostError, style: Style, notes: &[String]) -> String {
    let mut d = Diag::new(None, format!("host {}: {}", e.host, e.message));
    d.mark(src.locate(e.line, None), format!("host {}", e.host), true);
    d.notes.extend(notes.iter().cloned());
    d.render(src, style)
}

/// The removal report as a diagnostic: the fault or the hang, each stuck queue marked where it
/// is stuck, with what it waits for, its last writer and its last completed command. An
/// `expected` removal (the scenario's `expect-removed` held) is a note, not an error.
pub fn removal(
    src: &SourceFile<'_>,
    r: &RemovalReport,
    expected: bool,
    style: Style,
    notes: &[String],
) -> String {
    let class = r.classification.map(|c| c.to_string());
    let reason = r.reason.to_string();
    let mut title = format!("device removed: {reason} ({})", r.hresult);
    if let Some(f) = &r.fault {
        title = format!("device removed ({}): {}", r.hresult, f.message);
        if let Some(n) = &f.near {
            title += &format!(", {n}");
        }
    } else if !r.cycle.is_empty() {
        title += &format!(
            ": the queues wait on each other ({} -> {})",
            r.cycle.join(" -> "),
            r.cycle[0]
        );
    }
    // The id is the classification; when it says the reason again it is said once.
    let id = class.as_deref().or(Some(reason.as_str()));
    let mut d = Diag::new(id, title);
    d.note = expected;
    if let Some(f) = &r.fault {
        let at = src.locate_site(&f.at);
        let label = match (&f.access, &f.near) {
            (Some(acc), Some(n)) => format!("{acc} {n}"),
            (Some(acc), None) => format!("{acc} of {}", f.address.as_deref().unwrap_or("?")),
            _ => f.kind.to_string(),
        };
        d.mark(at, label, true);
    }
    for q in &r.queues {
        queue_marks(src, &mut d, q, r.fault.as_ref().map(|f| &f.at));
    }
    d.notes.extend(notes.iter().cloned());
    d.render(src, style)
}

/// A site without its queue: `list l, command 2 (dispatch)`, or the queue-level op (`wait`).
fn site_words(s: &SiteReport) -> String {
    match (&s.list, s.command) {
        (Some(l), Some(c)) => format!("list {l}, command {c} ({})", s.op),
        _ => s.op.clone(),
    }
}

/// Marks and notes of one queue of a removal report: one note for the queue, its lines saying
/// where it is, what it waits for, its last writer, its last completed command, its open events
/// and who alone could release it.
fn queue_marks(src: &SourceFile<'_>, d: &mut Diag, q: &QueueReport, fault_at: Option<&SiteReport>) {
    let faulted =
        q.at.as_ref()
            .zip(fault_at)
            .is_some_and(|(a, f)| a.queue == f.queue && a.command == f.command && a.list == f.list);
    let mut label = format!("queue {} [{}]", q.queue, q.class);
    let mut waits = String::new();
    if let Some(w) = &q.waiting_for {
        waits = format!("waits for {w}");
        if let Some(c) = q.current {
            waits += &format!(" (current value {c})");
        }
        label += &format!(" {waits}");
    }
    let mut lines = Vec::new();
    match &q.at {
        Some(at) => {
            let loc = src.locate_site(at);
            let verb = if faulted { "faulted in" } else { "stuck in" };
            let place = loc
                .as_ref()
                .map(|l| format!(" at {}", src.at(l)))
                .unwrap_or_default();
            lines.push(format!(
                "queue {} [{}] {verb} {}{place}",
                q.queue,
                q.class,
                site_words(at)
            ));
            if !waits.is_empty() {
                lines.push(waits);
            }
            if !faulted {
                d.mark(loc, label, false);
            }
        }
        None => lines.push(label),
    }
    if let Some(w) = &q.last_writer {
        lines.push(format!("last writer: {}", writer_text(w)));
    }
    // A command is either where the queue is stuck or completed, not both.
    let same = q
        .last_completed
        .as_ref()
        .zip(q.at.as_ref())
        .is_some_and(|(l, a)| {
            l.list == a.list && l.command == a.command && l.submission == a.submission
        });
    if let (Some(l), false) = (&q.last_completed, same) {
        lines.push(format!("last completed: {}", site_text(l)));
    }
    if !q.events.is_empty() {
        lines.push(format!("open events: {}", q.events.join(" > ")));
    }
    if !q.waits_on.is_empty() {
        lines.push(format!("released only by: {}", q.waits_on.join(", ")));
    }
    d.notes.push(lines.join("\n"));
}

#[cfg(test)]
mod tests {
    use super::SourceFile;

    #[test]
    fn locate_finds_the_command_word_and_its_column() {
        let src = SourceFile::new(
            "s.kdl",
            "queue q\nlist l {\n    dispatch-indirect fill\n    dispatch fill dst=dispatch\n}\n",
        );
        let l = src.locate(4, Some("dispatch")).expect("line 4");
        assert_eq!((l.line, l.column), (4, 5));
        assert_eq!(&src.text[l.span], "dispatch");
        let l = src.locate(3, Some("dispatch")).expect("line 3");
        // Not the prefix of `dispatch-indirect`: the first word instead.
        assert_eq!(&src.text[l.span], "dispatch-indirect");
        assert!(src.locate(9, None).is_none());
        assert!(src.locate(0, None).is_none());
    }

    #[test]
    fn common_detail_is_what_was_checked() {
        let d = super::common_detail(["t (u64) == 320, got 192", "t (u64) == 320, got 128"]);
        assert_eq!(d.as_deref(), Some("t (u64) == 320"));
        assert_eq!(super::common_detail(["a, b", "c, d"]), None);
    }
}
