//! Every list of every example and race scenario, encoded as `CommandList::close` encodes it,
//! decodes back to the commands recorded (`docs/semantics.md` D2). These streams are also the
//! decoder fuzz target's seed corpus (`examples/decode-corpus.rs`).

use std::path::{Path, PathBuf};

fn scenario_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["examples", "tests/scenarios"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "kdl") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn d2_every_scenario_list_round_trips_through_the_decoder() {
    let mut lists = 0;
    for file in scenario_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.display().to_string();
        let Ok(sc) = pipefence_scenario::parse(&name, &text) else {
            continue;
        };
        let streams = pipefence_scenario::run::encoded_lists(&sc).unwrap();
        assert_eq!(streams.len(), sc.lists.len(), "{name}");
        for ((list, words), decl) in streams.iter().zip(&sc.lists) {
            assert_eq!(list, &decl.name);
            let cmds = pipefence::command::decode_all(words)
                .unwrap_or_else(|e| panic!("{name}: list `{list}`: {e}"));
            assert_eq!(cmds.len(), decl.commands.len(), "{name}: list `{list}`");
            assert_eq!(
                pipefence::command::encode(&cmds),
                *words,
                "{name}: list `{list}`"
            );
            lists += 1;
        }
    }
    assert!(lists >= 30, "only {lists} lists found");
}
