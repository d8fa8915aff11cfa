//! Shards of a sampled check: the blocks cover every seed once, in order; a sharded check's
//! reports merge into the unsharded report, also past the 32 failing outcomes a report keeps.

use pipefence_scenario::check::{check_with, CheckMode, CheckOptions, Shard};
use pipefence_scenario::merge::{merge, Input, Merged, SampledOptions, ScenarioId, ShardedReport};
use serde_json::{json, Value};

#[test]
fn shard_blocks_cover_every_seed_once_in_order() {
    for (seed, schedules) in [(0, 0), (0, 1), (5, 90), (7, 1000), (u64::MAX - 9, 100)] {
        let opts = CheckOptions {
            schedules,
            seed,
            strict: false,
        };
        // The seeds that fit before u64::MAX.
        let fit = (u128::from(schedules).min(u128::from(u64::MAX - seed) + 1)) as u64;
        for total in [1, 2, 3, 7, 64, 1001] {
            let mut next = seed;
            let mut ran = 0;
            for index in 0..total {
                let block = Shard::new(index, total).unwrap().options(&opts);
                if block.schedules > 0 {
                    assert_eq!(block.seed, next, "{seed} {schedules} {index}/{total}");
                }
                next = next.wrapping_add(block.schedules);
                ran += block.schedules;
                // Balanced: no block is more than one seed longer than another.
                assert!(block.schedules <= fit / total + 1);
            }
            assert_eq!(ran, fit, "{seed} {schedules} /{total}");
        }
    }
}

#[test]
fn shard_text_is_index_slash_total_and_errors_name_it() {
    assert_eq!(Shard::parse("2/5"), Ok(Shard { index: 2, total: 5 }));
    for (text, says) in [
        ("5/5", "below the total"),
        ("5/5", "5 shards are 0/5 to 4/5"),
        ("1/1", "the one shard is 0/1"),
        ("0/0", "at least 1"),
        ("a/2", "`a` is not a whole number"),
        ("3/", "the total is missing"),
        ("/3", "the index is missing"),
        ("3", "no `/`"),
        ("1/2/3", "`2/3` is not a whole number"),
        (
            "99999999999999999999/1",
            "is larger than 18446744073709551615",
        ),
    ] {
        let e = Shard::parse(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
        assert!(e.contains(text) || e.contains("0/0"), "{text}: {e}");
    }
}

/// A sharded report of `failures` (`(hash, first seed, count)`), every one kept, plus
/// `more` failing outcomes only in `merge.failing`.
fn shard_json(
    index: u64,
    total: u64,
    kept: &[(&str, u64, u64)],
    more: &[(&str, u64, u64)],
) -> String {
    let failures: Vec<Value> = kept
        .iter()
        .map(|(h, seed, count)| {
            json!({"seed": seed, "count": count, "seeds": [seed], "status": "failed", "exit": 1,
                   "what": [format!("outcome {h}")], "passed_expectations": 0,
                   "outcome": {"version": 1, "status": "failed", "tag": h}})
        })
        .collect();
    let failing: Vec<Value> = kept
        .iter()
        .chain(more)
        .map(|(h, seed, count)| json!({"outcome": h, "count": count, "seeds": [seed]}))
        .collect();
    let n: u64 = kept.iter().chain(more).map(|k| k.2).sum();
    let mut outcomes: Vec<&str> = kept.iter().chain(more).map(|k| k.0).collect();
    outcomes.sort_unstable();
    serde_json::to_string_pretty(&json!({
        "version": 1, "schedules": n, "outcomes": outcomes.len(), "failing": n,
        "failures": failures, "other_failing": more.iter().map(|k| k.2).sum::<u64>(),
        "other_seeds": more.iter().map(|k| k.1).collect::<Vec<_>>(), "interrupted": false,
        "elapsed_ns": 10,
        "shard": {"index": index, "total": total},
        "merge": {"scenario": {"name": "s.kdl", "hash": "fnv1a64:0000000000000001"},
                  "options": {"seed": 0, "schedules": 100, "strict": false, "validate": false,
                              "fail_fast": false},
                  "outcomes": outcomes, "failing": failing}
    }))
    .unwrap()
}

#[test]
fn merge_keeps_the_first_32_failing_outcomes_overall_and_counts_the_rest() {
    let hashes: Vec<String> = (0..40).map(|i| format!("{i:016x}")).collect();
    let h = |i: usize| hashes[i].as_str();
    // Shard 0: outcomes 0..30 kept (seeds 0..30). Shard 1: outcomes 30..34 first, then 5 again;
    // it keeps 30, 31, 32, 33 and 5 (all its own), but overall 32 and 33 are the 33rd and 34th.
    let kept0: Vec<(&str, u64, u64)> = (0..30).map(|i| (h(i), i as u64, 1)).collect();
    let kept1: Vec<(&str, u64, u64)> = vec![
        (h(30), 50, 2),
        (h(31), 51, 1),
        (h(32), 52, 3),
        (h(33), 53, 1),
        (h(5), 54, 4),
    ];
    let inputs = [
        Input {
            name: "b.json".into(),
            text: shard_json(1, 2, &kept1, &[(h(34), 60, 2)]),
        },
        Input {
            name: "a.json".into(),
            text: shard_json(0, 2, &kept0, &[]),
        },
    ];
    let Merged::Sampled(m) = merge(&inputs).unwrap() else {
        panic!("a sampled merge")
    };
    assert_eq!(m.failures.len(), 32);
    assert_eq!(m.failures[5].count, 1 + 4);
    assert_eq!(m.failures[5].seeds, vec![5, 54]);
    assert_eq!(m.failures[30].seed, 50);
    assert_eq!(m.failures[31].seed, 51);
    assert!(m.failures[30].outcome.get().contains(h(30)));
    // 32 (3 schedules), 33 (1) and 34 (2) are the others.
    assert_eq!(m.other_failing, 6);
    assert_eq!(m.other_seeds, vec![52, 53, 60]);
    assert_eq!(m.outcomes, 35);
    assert_eq!(m.failing, 30 + 2 + 1 + 3 + 1 + 4 + 2);
    assert_eq!(m.elapsed_ns, 20);
}

#[test]
fn a_real_sharded_check_merges_into_the_unsharded_report() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/scenarios/write-write.kdl"
    );
    let source = std::fs::read_to_string(file).unwrap();
    let scenario = pipefence_scenario::parse(file, &source).unwrap();
    let opts = CheckOptions {
        schedules: 40,
        seed: 3,
        strict: false,
    };
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("elapsed_ns");
        v
    };
    let whole = check_with(&scenario, &opts, CheckMode::default(), |_| {}, |_, _| {});
    let whole = strip(serde_json::to_value(&whole).unwrap());
    let id = ScenarioId::new(file, source.as_bytes());
    let options = SampledOptions {
        seed: 3,
        schedules: 40,
        strict: false,
        validate: false,
        fail_fast: false,
    };
    let inputs: Vec<Input> = (0..3)
        .map(|i| {
            let shard = Shard::new(i, 3).unwrap();
            let mode = CheckMode {
                jobs: 2,
                shard_data: true,
                ..CheckMode::default()
            };
            let r = check_with(&scenario, &shard.options(&opts), mode, |_| {}, |_, _| {});
            Input {
                name: format!("{i}.json"),
                text: serde_json::to_string_pretty(&ShardedReport::new(&r, shard, &id, options))
                    .unwrap(),
            }
        })
        .collect();
    let Merged::Sampled(m) = merge(&inputs).unwrap() else {
        panic!("a sampled merge")
    };
    assert!(m.failing > 0);
    assert_eq!(strip(serde_json::to_value(&m).unwrap()), whole);
}
