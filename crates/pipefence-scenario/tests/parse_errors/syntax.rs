//! KDL syntax errors, and inputs that must be reported, not crash: deep nesting, unterminated strings and comments, garbage, long lines.

use super::*;

/// A KDL syntax error, at its line and column.
#[test]
fn kdl_syntax_error() {
    check(
        r#"
buffer data size=16
list produce kind=direct {
    marker "unterminated
}
"#,
        r#"
t.kdl:3:12: KDL syntax error: Unexpected newline in single-line quoted string (help: You can make a string multi-line by wrapping it in '"""', with a newline immediately after the opening quotes.)
3 |     marker "unterminated
  |            ^
"#,
    );
}

/// A malformed property value is placed at the value, not at the start of the file.
#[test]
fn kdl_syntax_error_in_property_value() {
    check(
        r#"
buffer data size=16
fence f initial=1.
"#,
        r#"
t.kdl:2:17: KDL syntax error: Non-digit character found after the '.' of a float
2 | fence f initial=1.
  |                 ^
"#,
    );
}

/// The diagnostics' order and positions, without rendering: sorted by line and column.
#[test]
fn diagnostics_are_sorted_with_positions() {
    let source = "expect-removed reason=x\nfence f initial=-1\nbufer\n";
    let diags = parse("t.kdl", source).expect_err("invalid");
    let at: Vec<(usize, usize)> = diags.iter().map(|d| (d.pos.line, d.pos.column)).collect();
    assert_eq!(at, vec![(1, 16), (2, 9), (3, 1)]);
}

/// A column counts characters, not bytes, and the caret keeps tabs.
#[test]
fn columns_count_characters_and_keep_tabs() {
    check(
        "\n\tfence \"é\" initial=-1\n",
        "\nt.kdl:1:12: bad number `-1` for `initial` (expected an unsigned 64-bit integer, decimal \
         or 0x hex)\n1 | \tfence \"é\" initial=-1\n  | \t          ^\n",
    );
}

/// E3: input that the `kdl` parser would recurse on without bound (and overflow the stack, an
/// abort) is reported instead: deep `{ }` nesting and long slashdash runs. Long `/* */`
/// comments, which it also recurses on, are read as the whitespace they are.
#[test]
fn deep_input_is_reported_not_a_crash() {
    let deep = format!("list a kind=direct {}", "{ x ".repeat(10_000));
    let diags = parse("t.kdl", &deep).expect_err("too deep");
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].message,
        "`{ }` blocks nested more than 16 deep (scenario files nest at most 2)"
    );
    // The 17th `{`.
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (1, 20 + 16 * 4));

    let slashdashes = format!("fence f {}1", "/- ".repeat(1000));
    let diags = parse("t.kdl", &slashdashes).expect_err("too many slashdashes");
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].message,
        "more than 8 slashdashes `/-` in a row (the KDL parser cannot take more)"
    );
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (1, 9 + 8 * 3));

    let comment = format!("/*{}\n*/\nfence f initial=-1\n", "* / ".repeat(50_000));
    let diags = parse("t.kdl", &comment).expect_err("bad number");
    assert_eq!(diags.len(), 1);
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (3, 9));
}

/// E3: strings that are never closed hide no braces from the depth check. A single-line string
/// (quoted or raw) ends at the newline, where the `kdl` parser reports it and parses on, so the
/// braces after it count; an unterminated multi-line one is reported at its opening quote. Each
/// of these, followed by 8000 `{`, overflowed the parser's stack (an abort) before.
#[test]
fn unterminated_strings_followed_by_deep_nesting_are_reported_not_a_crash() {
    let braces = "{".repeat(8000);
    for (head, line, column) in [
        ("a #\"\n", 2, 17),
        ("a ##\"\n", 2, 17),
        ("a \"x\n", 2, 17),
        ("a \"\"\"\n", 1, 3),
        ("a #\"\"\"\n", 1, 3),
    ] {
        let text = format!("{head}{braces}");
        let diags = parse("t.kdl", &text).expect_err(head);
        let first = &diags[0];
        assert_eq!(
            (first.pos.line, first.pos.column),
            (line, column),
            "{head:?}: {}",
            first.message
        );
        assert!(
            first.message.contains("nested more than 16 deep")
                || first.message.contains("multi-line string is never closed"),
            "{head:?}: {}",
            first.message
        );
    }
    // With no newline, the parser meets the end of the file inside the string: an error too.
    for head in ["a #\"", "a \""] {
        assert!(
            parse("t.kdl", &format!("{head}{braces}")).is_err(),
            "{head:?}"
        );
    }
}

/// E3: a file of garbage makes the `kdl` parser's error recovery recurse about once per byte
/// (it skips one character and parses the rest as a new document): 70,000 stray `}`, 200,000
/// `=` or `)`, or a run of `(t)` annotations overflowed its 32 MiB stack (an abort) before
/// (in a release build; these smaller runs did in the test build). Its
/// stack now grows with the file, a stray `}` is reported at once, the diagnostics are capped
/// (the rest counted in a last one) and a file over the size limit is refused.
#[test]
fn e3_garbage_of_any_length_is_reported_not_a_crash() {
    let diags = parse("t.kdl", &"}".repeat(200_000)).expect_err("stray braces");
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].message, "KDL syntax error: this `}` closes no `{`");
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (1, 1));
    let inner = format!(
        "fence f\nhost a {{\n    cpu-wait f 1\n}}\n{}",
        "}\n".repeat(10)
    );
    let diags = parse("t.kdl", &inner).expect_err("one stray brace");
    assert_eq!((diags[0].pos.line, diags[0].pos.column), (5, 1));

    for garbage in [
        "=".repeat(100_000),
        ")".repeat(100_000),
        format!("fence f\ncpu-wait f {}1", "(t)".repeat(50_000)),
    ] {
        let diags = parse("t.kdl", &garbage).expect_err("garbage");
        // 50 diagnostics and the count of the rest.
        assert_eq!(diags.len(), 51, "{}", diags[0].message);
        let last = &diags[50];
        assert!(
            last.message
                .ends_with("more errors from here on (only the first 50 are shown)"),
            "{}",
            last.message
        );
    }

    let huge = "fence f\n".repeat((4 << 20) / 8 + 1);
    let diags = parse("t.kdl", &huge).expect_err("too large");
    assert_eq!(diags.len(), 1);
    assert!(
        diags[0]
            .message
            .contains("scenario files are limited to 4194304 bytes"),
        "{}",
        diags[0].message
    );
}

/// A `/*` comment that is never closed.
#[test]
fn unterminated_block_comment() {
    check(
        r#"
fence f
/* never /* closed */
fence g
"#,
        r#"
t.kdl:2:1: KDL syntax error: this `/*` comment is never closed by `*/`
2 | /* never /* closed */
  | ^
"#,
    );
}

/// Comments are whitespace, also across lines inside a node; `/*` inside strings is text.
#[test]
fn comments_and_strings() {
    let plan = valid(
        r##"
fence f /* a comment
   over two lines */ initial=3 // the end
list l kind=direct {
    marker "/* kept */" /* { not a block } */
    marker #"/* raw "too" */"#
    /- marker "slashdashed"
}
"##,
    );
    assert_eq!(plan.fences[0].initial, 3);
    let cmds: Vec<&ListCommand> = plan.lists[0].commands.iter().map(|c| &c.cmd).collect();
    assert_eq!(
        cmds,
        [
            &ListCommand::Marker("/* kept */".into()),
            &ListCommand::Marker("/* raw \"too\" */".into())
        ]
    );
    assert_eq!(plan.lists[0].commands[1].pos.line, 5);
}

/// A long line is shown as an excerpt around the column.
#[test]
fn long_lines_are_shown_as_an_excerpt() {
    let source = format!(
        "fence f /* {} */ initial=-1 // {}\n",
        "c".repeat(300),
        "d".repeat(300)
    );
    let diags = parse("t.kdl", &source).expect_err("bad number");
    let rendered = render_diagnostics("t.kdl", &source, &diags);
    let expected = format!(
        "t.kdl:1:316: bad number `-1` for `initial` (expected an unsigned 64-bit integer, \
         decimal or 0x hex)\n1 | ...{} */ initial=-1 // {}...\n  | {}^\n",
        "c".repeat(56),
        "d".repeat(46),
        " ".repeat(3 + 60)
    );
    assert_eq!(rendered, expected);
}

/// One mistake, one diagnostic: an unclosed `{` is reported at the `{` (not again as a node
/// with no `}`), `value=(1` once as the type annotation it opens (not also as a missing value),
/// and a missing closing quote once, at the string (the lines after it are not misread).
#[test]
fn e3_one_syntax_mistake_gives_one_diagnostic() {
    check(
        r#"
fence f
list l kind=compute {
    marker "a"

fence g
"#,
        r#"
t.kdl:2:21: KDL syntax error: No closing '}' for child block
2 | list l kind=compute {
  |                     ^
"#,
    );
    check(
        r#"
buffer data size=64
list l kind=compute {
    dispatch fill dst=data groups=1 value=(1
}
"#,
        r#"
t.kdl:3:43: KDL syntax error: invalid contents inside type annotation
3 |     dispatch fill dst=data groups=1 value=(1
  |                                           ^
"#,
    );
    check(
        r#"
fence f
list l kind=compute {
    marker "start
    marker "b"
}
fence g
"#,
        r#"
t.kdl:3:12: KDL syntax error: Unexpected newline in single-line quoted string (help: You can make a string multi-line by wrapping it in '"""', with a newline immediately after the opening quotes.)
3 |     marker "start
  |            ^
"#,
    );
}
