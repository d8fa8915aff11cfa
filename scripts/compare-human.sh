#!/usr/bin/env bash
# Before/after comparison of what `pipefence` prints for people, beside compare-outputs.sh (which
# compares `run --json` and the traces): runs two `pipefence` binaries over every scenario in
# examples/ and tests/scenarios/ and compares
#   - `run` without --json (stdout and stderr together, and the exit status) on the
#     deterministic driver at several seeds, plain and --strict;
#   - `run --json` at the same seeds, with its keys in their order (compare-outputs.sh sorts
#     them) and `elapsed_ns` removed;
#   - `check --schedules N` without --json (stdout and stderr together, and the exit status),
#     plain and --strict, with the wall-clock figures removed (the progress line's rate and the
#     summary's `in ... ms`);
#   - `check --schedules N --json` (keys in their order, `elapsed_ns` removed, and the exit
#     status), plain and --strict.
# Prints one line per difference and a count per kind.
#
#   scripts/compare-human.sh OLD_BINARY NEW_BINARY [SCHEDULES [SEEDS...]]
#
# SCHEDULES defaults to 200, SEEDS to 0 1 2. Exits 0 when everything is identical, 1 when
# anything differs, 2 on usage errors.
set -uo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_BINARY NEW_BINARY [SCHEDULES [SEEDS...]]" >&2
    exit 2
fi
old=$1 new=$2
shift 2
schedules=${1:-200}
[[ $# -gt 0 ]] && shift
seeds=("$@")
[[ ${#seeds[@]} -eq 0 ]] && seeds=(0 1 2)
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The progress line is rewritten in place (`\r`) and shows a rate; the summary ends with the
# wall-clock time.
untime() { tr '\r' '\n' | grep -v -e '/s, ' -e 'elapsed' \
    | sed -E 's/, in [0-9]+\.[0-9] ms$/, in (time)/'; }
strip() { python3 -c 'import json,sys
def f(o):
    if isinstance(o, dict): return {k: f(v) for k, v in o.items() if k != "elapsed_ns"}
    if isinstance(o, list): return [f(x) for x in o]
    return o
try: print(json.dumps(f(json.load(sys.stdin)), indent=1))
except Exception as e: print("not json:", e)'; }
declare -A same differ
for kind in run run-json check check-json; do
    same[$kind]=0
    differ[$kind]=0
done
compare() { # KIND WHAT
    if cmp -s "$work/old" "$work/new"; then
        same[$1]=$((same[$1] + 1))
    else
        differ[$1]=$((differ[$1] + 1))
        echo "differs ($1): $2"
    fi
}
for file in examples/*.kdl tests/scenarios/*.kdl; do
    for mode in plain strict; do
        for seed in "${seeds[@]}"; do
            flags=(--driver deterministic --seed "$seed")
            [[ $mode == strict ]] && flags=(--strict --seed "$seed")
            for side in old new; do
                bin=$old; [[ $side == new ]] && bin=$new
                "$bin" run "$file" "${flags[@]}" >"$work/$side" 2>&1
                echo "exit $?" >>"$work/$side"
            done
            compare run "$file seed $seed $mode"
            for side in old new; do
                bin=$old; [[ $side == new ]] && bin=$new
                "$bin" run "$file" "${flags[@]}" --json 2>/dev/null | strip >"$work/$side"
                echo "exit ${PIPESTATUS[0]}" >>"$work/$side"
            done
            compare run-json "$file seed $seed $mode"
        done
        flags=(--schedules "$schedules")
        [[ $mode == strict ]] && flags+=(--strict)
        for side in old new; do
            bin=$old; [[ $side == new ]] && bin=$new
            "$bin" check "$file" "${flags[@]}" 2>&1 | untime >"$work/$side"
            echo "exit ${PIPESTATUS[0]}" >>"$work/$side"
        done
        compare check "$file $mode"
        for side in old new; do
            bin=$old; [[ $side == new ]] && bin=$new
            "$bin" check "$file" "${flags[@]}" --json 2>/dev/null | strip >"$work/$side"
            echo "exit ${PIPESTATUS[0]}" >>"$work/$side"
        done
        compare check-json "$file $mode"
    done
done
total=0
for kind in run run-json check check-json; do
    echo "$kind: ${same[$kind]} identical, ${differ[$kind]} different"
    total=$((total + differ[$kind]))
done
[[ $total -eq 0 ]]
