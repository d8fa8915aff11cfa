#!/usr/bin/env bash
# Instructions per schedule of the reduced exhaustive search against sampled `check`, counted
# by `valgrind --tool=callgrind`: what `pipefence-bench --filter exhaustive-rate` times, as a
# figure that does not depend on the load of the machine (the rate benchmark's wall-clock
# ratios move by a few hundredths from run to run on a shared machine).
#
# usage: scripts/exhaustive-instructions.sh [BIN] [FILE...]
#   BIN   a pipefence-bench binary (default target/release/pipefence-bench, built if absent)
#   FILE  scenarios (default: examples/*.kdl and tests/scenarios/*.kdl)
#
# Each side runs twice (`pipefence-bench --workload exhaustive|sampled COUNT FILE`), with COUNT
# and 2 x COUNT; the difference of the instruction counts divided by the difference of the
# schedules cancels the process's start, the parse and the tear-down. The exhaustive side
# repeats whole searches (as the benchmark does for small ones: COUNT searches make 10
# schedules or more), so its figure includes each search's fixed costs; the sampled side runs
# 100 and 200 schedules. ratio = sampled / exhaustive per schedule: the benchmark's goal is
# 0.5 or more.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/pipefence-bench
if [[ $# -gt 0 && -x $1 && $1 != *.kdl ]]; then
    bin=$1
    shift
fi
if [[ ! -x $bin ]]; then
    cargo build --release -q -p pipefence-bench
fi
command -v valgrind >/dev/null || { echo "exhaustive-instructions.sh: valgrind not found (apt-get install -y valgrind)" >&2; exit 2; }
files=("$@")
[[ ${#files[@]} -gt 0 ]] || files=(examples/*.kdl tests/scenarios/*.kdl)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints "Ir units" of one run.
measure() {
    local what=$1 count=$2 file=$3 out=$tmp/cg
    local line
    line=$(valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --workload "$what" "$count" "$file" 2>"$tmp/err" | tail -n 1) || { cat "$tmp/err" >&2; exit 1; }
    local units=${line##*: }
    units=${units%% units}
    local ir
    ir=$(grep -E '^(totals|summary):' "$out" | head -n 1 | cut -d' ' -f2)
    echo "$ir $units"
}

printf '%-32s %10s %16s %16s %7s\n' scenario schedules "exhaustive/sched" "sampled/sched" ratio
met=0
for f in "${files[@]}"; do
    # Searches enough for 10 schedules or more (one search's schedules, counted natively).
    one=$("$bin" --workload exhaustive 1 "$f" | tail -n 1)
    one=${one##*: }
    one=${one%% units}
    [[ $one -gt 0 ]] || one=1
    c=$(((10 + one - 1) / one))
    read -r e1 s1 < <(measure exhaustive "$c" "$f")
    read -r e2 s2 < <(measure exhaustive $((2 * c)) "$f")
    read -r p1 q1 < <(measure sampled 100 "$f")
    read -r p2 q2 < <(measure sampled 200 "$f")
    line=$(awk -v f="$(basename "$f" .kdl)" -v n="$one" -v a="$e1" -v b="$e2" -v da=$((s2 - s1)) \
        -v c="$p1" -v d="$p2" -v dc=$((q2 - q1)) 'BEGIN { ex = (b - a) / da; sa = (d - c) / dc;
        printf "%-32s %10d %16.0f %16.0f %7.3f", f, n, ex, sa, sa / ex }')
    echo "$line"
    awk '{ exit !($NF >= 0.5) }' <<<"$line" && met=$((met + 1))
done
echo "ratio >= 0.5: $met of ${#files[@]}"
