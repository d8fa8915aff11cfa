#!/usr/bin/env bash
# Instructions (and system calls) per hop, per host round trip and per packet on the threaded
# driver's hot paths, counted by `valgrind --tool=callgrind`: a figure that does not depend on
# the load of the machine, for comparing commits where wall-clock benchmarks are noisy.
#
# usage: scripts/instructions.sh [BIN] [WORKLOAD...]
#   BIN       a pipefence-bench binary (default target/release/pipefence-bench, built if absent)
#   WORKLOAD  chain2 chain4 chain16 round-trip throughput throughput-validate, and the
#             baselines condvar-chain2 condvar-ping-pong (default: all)
#
# Each workload (`pipefence-bench --workload NAME COUNT`) runs twice, with COUNT and 2 x COUNT;
# the difference divided by the units of COUNT cancels set-up and tear-down. The counts are
# over every thread of the process (host, engines, workers). The process is restricted to one
# CPU (taskset), so pipefence's waits park at once instead of spinning (spinning would count
# however long the other thread took to be scheduled): the figure is the work of a hop, not
# its wait. `syscalls` is the system calls per unit (futex waits and wakes, mostly) and
# `clock reads` the clock_gettime calls (a system call under valgrind, not natively), from
# callgrind's --collect-systime. Valgrind runs one thread at a time and may switch at every
# system call (--fair-sched=yes: in turn), so where the threads interleave still varies a
# little from run to run: the chain's figures by a few per cent, the host round trip's (whose
# host and engine may or may not park, depending on who runs first) by up to about 20 %; run
# it twice or more before comparing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/pipefence-bench}
shift || true
if [[ ! -x $bin ]]; then
    cargo build --release -q -p pipefence-bench
fi
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind not found (apt-get install -y valgrind)" >&2; exit 2; }
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(chain2 chain4 chain16 condvar-chain2 round-trip condvar-ping-pong throughput throughput-validate)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count_for() {
    case $1 in
        chain2|chain4|condvar-chain2) echo 500 ;;
        chain16) echo 150 ;;
        round-trip|condvar-ping-pong) echo 1000 ;;
        throughput) echo 4 ;;
        throughput-validate) echo 2 ;;
        *) echo "instructions.sh: unknown workload $1" >&2; exit 2 ;;
    esac
}

# Prints "Ir sysCount units" of one run.
measure() {
    local name=$1 count=$2 out=$tmp/cg.$1.$2
    local line
    line=$(taskset -c 0 valgrind --tool=callgrind --fair-sched=yes --collect-systime=yes --callgrind-out-file="$out" \
        "$bin" --workload "$name" "$count" 2>"$tmp/err" | tail -n 1) || { cat "$tmp/err" >&2; exit 1; }
    local units=${line##*: }
    units=${units%% units}
    # The totals line: "totals: Ir sysCount sysTime" (or "summary:").
    local ir sys clock
    read -r ir sys _ < <(grep -E '^(totals|summary):' "$out" | head -n 1 | cut -d' ' -f2-)
    # Under valgrind a clock read is a system call (no vDSO); natively it is not: counted apart.
    clock=$(callgrind_annotate --inclusive=no --show=sysCount "$out" 2>/dev/null |
        awk '/clock_gettime/ { gsub(",", "", $1); n += $1 } END { print n + 0 }')
    echo "$ir $((sys - clock)) $clock $units"
}

printf '%-20s %-10s %14s %10s %12s\n' workload unit instructions syscalls "clock reads"
for w in "${workloads[@]}"; do
    n=$(count_for "$w")
    read -r ir1 sys1 clk1 u1 < <(measure "$w" "$n")
    read -r ir2 sys2 clk2 u2 < <(measure "$w" $((2 * n)))
    du=$((u2 - u1))
    case $w in *chain*) unit=hop ;; round-trip|*ping-pong) unit="round trip" ;; *) unit=packet ;; esac
    awk -v w="$w" -v u="$unit" -v a="$ir1" -v b="$ir2" -v s="$sys1" -v t="$sys2" -v c="$clk1" \
        -v k="$clk2" -v d="$du" 'BEGIN { printf "%-20s %-10s %14.0f %10.2f %12.2f\n", w, u,
        (b - a) / d, (t - s) / d, (k - c) / d }'
done
