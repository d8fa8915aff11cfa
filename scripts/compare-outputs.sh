#!/usr/bin/env bash
# Before/after comparison of what `pipefence run` prints and writes, for a change that should
# preserve behaviour (or change it only where a rule changed): runs two `pipefence` binaries
# over every scenario in examples/ and tests/scenarios/, on the deterministic driver at several
# seeds (plain, --strict and --validate), and compares the --json output (with the run's wall-clock
# `elapsed_ns` removed), the Chrome trace bytes and the SVG timeline bytes. Prints one line per
# difference (naming what differs) and a count.
#
#   scripts/compare-outputs.sh OLD_BINARY NEW_BINARY [SEEDS...]
#
# FILES="a.kdl b.kdl" compares those scenarios instead of the examples and test scenarios.
#
# Exits 0 when everything is identical, 1 when anything differs, 2 on usage errors.
set -uo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_BINARY NEW_BINARY [SEEDS...]" >&2
    exit 2
fi
old=$1 new=$2
shift 2
seeds=("$@")
[[ ${#seeds[@]} -eq 0 ]] && seeds=(0 1 2 3 5 8)
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
strip() { python3 scripts/strip-elapsed.py; }
# Same bytes, or neither side wrote the file.
same_file() { [[ ! -e $1 && ! -e $2 ]] || cmp -s "$1" "$2"; }
same=0 differ=0
files=(examples/*.kdl tests/scenarios/*.kdl)
[[ -n ${FILES:-} ]] && read -r -a files <<<"$FILES"
for file in "${files[@]}"; do
    for seed in "${seeds[@]}"; do
        for mode in plain strict validate; do
            flags=(--driver deterministic --seed "$seed")
            [[ $mode == strict ]] && flags=(--strict --seed "$seed")
            [[ $mode == validate ]] && flags+=(--validate)
            rm -f "$work"/*.trace.json "$work"/*.svg
            for side in old new; do
                bin=$old; [[ $side == new ]] && bin=$new
                "$bin" run "$file" "${flags[@]}" --json --trace "$work/$side.trace.json" \
                    --timeline "$work/$side.svg" 2>/dev/null | strip >"$work/$side.json"
                echo "exit $?" >>"$work/$side.json"
            done
            what=()
            cmp -s "$work/old.json" "$work/new.json" || what+=(json)
            same_file "$work/old.trace.json" "$work/new.trace.json" || what+=(trace)
            same_file "$work/old.svg" "$work/new.svg" || what+=(svg)
            if [[ ${#what[@]} -eq 0 ]]; then
                same=$((same + 1))
            else
                differ=$((differ + 1))
                echo "differs (${what[*]}): $file seed $seed $mode"
            fi
        done
    done
done
echo "$same identical, $differ different"
[[ $differ -eq 0 ]]
