//! Writes the encoded command stream of every list of every scenario under `examples/` and
//! `tests/scenarios/` as little-endian words, one file per list: the seed corpus of the
//! decoder's fuzz target.
//!
//! ```sh
//! cargo run -p pipefence-scenario --example decode-corpus -- fuzz/corpus/decode
//! ```

use std::path::{Path, PathBuf};

fn main() {
    let Some(out) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: decode-corpus OUT_DIR");
        std::process::exit(2);
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("decode-corpus: {}: {e}", out.display());
        std::process::exit(1);
    }
    let mut written = 0;
    for dir in ["examples", "tests/scenarios"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            let sc = match pipefence_scenario::parse(&file.to_string_lossy(), &text) {
                Ok(sc) => sc,
                Err(_) => continue, // a file kept to show a diagnostic has no lists to encode
            };
            let lists = pipefence_scenario::run::encoded_lists(&sc)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (name, words) in lists {
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let path = out.join(format!("{stem}-{name}.bin"));
                std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                written += 1;
            }
        }
    }
    println!(
        "decode-corpus: {written} command streams written to {}",
        out.display()
    );
}
