#!/usr/bin/env bash
# Writes the HTML report and the SVG timeline of one `pipefence run` and screenshots both with
# headless Chromium, for looking at them outside a browser. Not used by CI.
#
#   scripts/screenshot-report.sh SCENARIO.kdl OUT_DIR [RUN FLAGS...]
#
# for example `scripts/screenshot-report.sh examples/ring-buffer.kdl /tmp/shots --strict`
# writes OUT_DIR/report.html, report.png (1400x1000), timeline.svg and timeline.png. The
# binary is PIPEFENCE (default target/debug/pipefence, built when missing); CHROMIUM=/path
# overrides the browser (Debian: apt-get install -y chromium).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 SCENARIO OUT_DIR [RUN FLAGS...]" >&2
    exit 2
fi
scenario=$1
out=$2
shift 2
cd "$(dirname "$0")/.."
pipefence=${PIPEFENCE:-target/debug/pipefence}
if [[ ! -x $pipefence ]]; then
    cargo build -p pipefence-cli
fi
chromium=${CHROMIUM:-}
if [[ -z $chromium ]]; then
    for c in chromium chromium-browser google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then chromium=$c; break; fi
    done
fi
[[ -n $chromium ]] || { echo "$0: chromium not found (apt-get install -y chromium)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
# The run's own exit status (1 for a failed scenario) is not this script's concern.
"$pipefence" run "$scenario" "$@" --report "$out/report.html" --timeline "$out/timeline.svg" \
    >/dev/null || true
[[ -f $out/report.html ]] || { echo "$0: pipefence wrote no report" >&2; exit 1; }

shot() { # FILE PNG WIDTH HEIGHT
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --hide-scrollbars --window-size="$3,$4" \
        --screenshot="$2" "file://$1" >/dev/null 2>&1
    [[ -s $2 ]] || { echo "$0: no screenshot of $1" >&2; exit 1; }
    echo "$2"
}
shot "$out/report.html" "$out/report.png" 1400 1000
# The timeline at the size it declares.
height=$(grep -o '<svg[^>]*>' "$out/timeline.svg" | head -n 1 | sed -n 's/.* height="\([0-9]*\)".*/\1/p')
shot "$out/timeline.svg" "$out/timeline.png" 1600 "${height:-900}"
