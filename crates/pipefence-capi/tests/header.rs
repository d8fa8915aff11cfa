//! `include/pipefence/pipefence.h` is what cbindgen generates from this crate: fails, with
//! the difference and how to regenerate, when the committed header and the code disagree.

use std::path::Path;

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_what_cbindgen_generates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/pipefence/pipefence.h");
    let fresh = generate();
    if std::env::var_os("PIPEFENCE_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        let show = |text: &str| -> String {
            text.lines()
                .skip(first.saturating_sub(2))
                .take(6)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{} is out of date with crates/pipefence-capi/src (first difference at line {}).\n\
             committed:\n{}\ngenerated:\n{}\n\
             Regenerate it with:\n    PIPEFENCE_BLESS=1 cargo test -p pipefence-capi --test header",
            path.display(),
            first + 1,
            show(&committed),
            show(&fresh)
        );
    }
}
