#!/usr/bin/env bash
# Before/after comparison of what `pipefence check` (sampled) prints, for a change that should
# preserve behaviour: runs two `pipefence` binaries over every scenario in examples/ and
# tests/scenarios/, plain and --strict, on 1 and 2 threads, and compares the --json report (with
# its wall-clock `elapsed_ns` removed) and the human summary (with its timing removed). Prints
# one line per difference and a count.
#
#   scripts/compare-check.sh OLD_BINARY NEW_BINARY [SCHEDULES]
#
# EXHAUSTIVE=1 compares `check --exhaustive --no-shrink --max-schedules SCHEDULES` instead
# (schedules, runs asleep, outcomes, failures and their replay strings). With IGNORE_ASLEEP=1 as
# well, the runs stopped asleep are left out of the comparison (`sleep_blocked` in the JSON, the
# summary's count of runs stopped as equivalent): for a change to the search that only stops it
# making runs that end asleep.
#
# IGNORE_REPLAY=1 leaves the schedule strings out (`replay` in the JSON, the summary's replay
# hints) and the runs' number of choice points (`max_choice_points`): for a change to what a
# reducing run lists at its points (its strings change, a new version prefix, and its runs
# have fewer points) that keeps every search's schedules, outcomes and failures.
#
# SHRINK=1 (with EXHAUSTIVE=1) leaves the shrinking of failures on. EXTRA_ARGS adds arguments
# to every check (e.g. EXTRA_ARGS="--no-reduction", "--preemption-bound 2", "--shard 1/2").
#
# Exits 0 when everything is identical, 1 when anything differs, 2 on usage errors.
set -uo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_BINARY NEW_BINARY [SCHEDULES]" >&2
    exit 2
fi
old=$1 new=$2 schedules=${3:-200}
cd "$(dirname "$0")/.."
strip_keys=()
[[ -n ${IGNORE_ASLEEP:-} ]] && strip_keys+=(sleep_blocked)
[[ -n ${IGNORE_REPLAY:-} ]] && strip_keys+=(replay max_choice_points)
STRIP_KEYS=$(IFS=,; echo "${strip_keys[*]}")
export STRIP_KEYS
strip() { python3 scripts/strip-elapsed.py; }
# The summary without its timing, and with the replay hints' program (which names where each
# binary is) as PROGRAM.
timeless() {
    sed -E 's/ in [0-9.]+ (ms|s|µs)(: the search [0-9.]+ ms( \([0-9.]+\/s\))?, shrinking the failures [0-9.]+ ms)?( \([0-9.]+\/s\))?/ in _/; s/[0-9.]+ k?\/s/_\/s/g; s/`[^`]* run /`PROGRAM run /g' |
        if [[ -n ${IGNORE_ASLEEP:-} ]]; then sed -E 's/ \([0-9,]+ more runs? stopped as equivalent[^)]*\)//'; else cat; fi |
        if [[ -n ${IGNORE_REPLAY:-} ]]; then sed -E 's/--schedule v[0-9]+:[A-Za-z0-9_-]*/--schedule _/g'; else cat; fi
}
same=0 differ=0
for file in examples/*.kdl tests/scenarios/*.kdl; do
    for mode in "" --strict; do
        for jobs in 1 2; do
            if [[ -n ${EXHAUSTIVE:-} ]]; then
                args=(check "$file" --exhaustive --max-schedules "$schedules")
                [[ -n ${SHRINK:-} ]] || args+=(--no-shrink)
            else
                args=(check "$file" --schedules "$schedules")
            fi
            # shellcheck disable=SC2206 # EXTRA_ARGS is split into words on purpose
            args+=(-j "$jobs" $mode ${EXTRA_ARGS:-})
            a=$("$old" "${args[@]}" --json 2>/dev/null | strip)
            b=$("$new" "${args[@]}" --json 2>/dev/null | strip)
            c=$("$old" "${args[@]}" 2>&1 | timeless)
            d=$("$new" "${args[@]}" 2>&1 | timeless)
            if [[ $a == "$b" && $c == "$d" ]]; then
                same=$((same + 1))
            else
                differ=$((differ + 1))
                echo "differs: ${args[*]}"
            fi
        done
    done
done
echo "$same identical, $differ different"
[[ $differ -eq 0 ]]
