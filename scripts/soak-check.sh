#!/usr/bin/env bash
# Soak test of `pipefence check` (not run by CI): every example and race scenario under many
# schedules (default 100000, plain and --strict), printing for each the verdict line, the exit
# status of that check, the wall time and the peak resident memory (GNU time's %M, KiB).
#
#   scripts/soak-check.sh [SCHEDULES] [PIPEFENCE_BINARY]
#
# Needs /usr/bin/time (Debian package `time`). Builds the release binary unless one is given.
set -uo pipefail
cd "$(dirname "$0")/.."
schedules=${1:-100000}
bin=${2:-}
if [[ -z $bin ]]; then
    cargo build --release -q -p pipefence-cli || exit 1
    bin=target/release/pipefence
fi
timebin=/usr/bin/time
[[ -x $timebin ]] || { echo "$0: /usr/bin/time not found (apt-get install -y time)" >&2; exit 1; }
printf '%-45s %-7s %5s %9s %10s\n' scenario mode exit seconds peak_KiB
for file in examples/*.kdl tests/scenarios/*.kdl; do
    for mode in plain strict; do
        flags=()
        [[ $mode == strict ]] && flags=(--strict)
        timing=$(mktemp)
        "$timebin" -o "$timing" -f '%e %M' "$bin" check "$file" --schedules "$schedules" \
            "${flags[@]}" >/dev/null 2>&1
        code=$?
        read -r secs peak < <(tail -n 1 "$timing")
        rm -f "$timing"
        printf '%-45s %-7s %5s %9s %10s\n' "$file" "$mode" "$code" "$secs" "$peak"
    done
done
