#!/usr/bin/env bash
# Runs each fuzz target (fuzz/README.md) from its seed corpus for a bounded time and fails on any
# crash or hang, printing each failing input (base64) so it can be turned into a regression test.
#
#   scripts/fuzz-ci.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s; parse decode run explore)
#
# Installs cargo-afl (and with it AFL++) when the matching version is missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(parse decode run explore)
afl_version=$(awk '/^name = "afl"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)

if ! cargo afl --version 2>/dev/null | grep -q "cargo-afl $afl_version"; then
    echo "installing cargo-afl $afl_version"
    cargo install cargo-afl --locked --version "$afl_version"
fi
# The install builds AFL++ for this toolchain; this builds it where the install did not, and
# otherwise only says that it is already built.
cargo afl config --build >/dev/null 2>&1 || true
cargo afl build --release --locked

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
for t in "${targets[@]}"; do
    echo "== fuzz $t for ${secs} s"
    # The scenario language's tokens help the targets that read scenarios past the parser.
    dict=()
    [[ $t == decode ]] || dict=(-x dict/scenario.dict)
    AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1 \
        AFL_QUIET=1 cargo afl fuzz -V "$secs" -t 10000 -m none "${dict[@]}" -i "corpus/$t" -o "$out/$t" \
        "target/release/$t" >"$out/$t.log" 2>&1 || {
        tail -n 30 "$out/$t.log"
        echo "fuzz $t: afl-fuzz failed"
        failed=1
        continue
    }
    stats="$out/$t/default/fuzzer_stats"
    execs=$(awk -F': ' '/^execs_done/ { print $2 }' "$stats")
    cov=$(awk -F': ' '/^bitmap_cvg/ { print $2 }' "$stats")
    bad=$(find "$out/$t/default/crashes" "$out/$t/default/hangs" -type f ! -name README.txt | wc -l)
    echo "fuzz $t: $execs executions, coverage $cov, $bad crashes or hangs"
    if [[ $bad -gt 0 ]]; then
        failed=1
        for f in $(find "$out/$t/default/crashes" "$out/$t/default/hangs" -type f ! -name README.txt | head -n 5); do
            echo "-- $t: $f"
            base64 -w0 "$f"
            echo
        done
    fi
done
exit $failed
