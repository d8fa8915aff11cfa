#!/usr/bin/env bash
# Before/after comparison of `check --exhaustive --preemption-bound K` (and, with SHRINK=1,
# of the unbounded exhaustive check with its shrinks, which run the bounded search with sleep
# sets too): runs two `pipefence` binaries over every
# scenario in examples/ and tests/scenarios/, plain and --strict, at bounds 0, 1 and 2 (the
# bounded search with sleep sets, or the plain one it gives up for), and compares the --json
# reports without their elapsed time. Prints one line per difference and a count.
#
#   scripts/compare-bounded.sh OLD_BINARY NEW_BINARY [MAX_SCHEDULES] [JOBS]
#
# IGNORE_REPLAY=1 leaves the schedule strings and the runs' number of choice points out (as
# compare-check.sh does): for a change to the choice points that keeps every search's
# schedules, outcomes and failures.
#
# Exits 0 when everything is identical, 1 when anything differs, 2 on usage errors.
set -uo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_BINARY NEW_BINARY [MAX_SCHEDULES] [JOBS]" >&2
    exit 2
fi
old=$1 new=$2 max=${3:-10000} jobs=${4:-2}
cd "$(dirname "$0")/.."
STRIP_KEYS=
[[ -n ${IGNORE_REPLAY:-} ]] && STRIP_KEYS=replay,max_choice_points
export STRIP_KEYS
same=0 different=0
report() {
    "$1" check "${@:2}" --json 2>/dev/null | python3 scripts/strip-elapsed.py | md5sum
}
for f in examples/*.kdl tests/scenarios/*.kdl; do
    for mode in "" --strict; do
        if [[ -n "${SHRINK:-}" ]]; then
            runs=("")
        else
            runs=("--preemption-bound 0" "--preemption-bound 1" "--preemption-bound 2")
        fi
        for bound in "${runs[@]}"; do
            # shellcheck disable=SC2086
            args=("$f" $mode --exhaustive $bound --max-schedules "$max" -j "$jobs")
            [[ -z "${SHRINK:-}" ]] && args+=(--no-shrink)
            if [[ "$(report "$old" "${args[@]}")" == "$(report "$new" "${args[@]}")" ]]; then
                same=$((same + 1))
            else
                different=$((different + 1))
                echo "differs: check ${args[*]}"
            fi
        done
    done
done
echo "$same identical, $different different"
[[ $different -eq 0 ]]
