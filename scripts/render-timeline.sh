#!/usr/bin/env bash
# Renders an SVG timeline (pipefence::trace::svg::svg_timeline) to a PNG with headless
# Chromium, for looking at a picture outside a browser. Not used by CI.
#
#   scripts/render-timeline.sh TIMELINE.svg TIMELINE.png
#
# Needs Debian's chromium (apt-get install -y chromium); CHROMIUM=/path/to/binary overrides.
# The window (so the PNG) takes the size the SVG declares on its root element (svg_timeline
# writes width="1600" height="..."), 1700x900 when it declares none; WIDTH=... and HEIGHT=...
# override.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 SVG PNG" >&2
    exit 2
fi
svg=$1
png=$2
[[ -f $svg ]] || { echo "$0: no such file: $svg" >&2; exit 1; }

chromium=${CHROMIUM:-}
if [[ -z $chromium ]]; then
    for c in chromium chromium-browser google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then chromium=$c; break; fi
    done
fi
[[ -n $chromium ]] || { echo "$0: chromium not found (apt-get install -y chromium)" >&2; exit 1; }

# The root element's width and height, when they are plain pixel numbers.
root=$(tr '\n' ' ' <"$svg" | grep -o '<svg[^>]*>' | head -n 1 || true)
svg_w=$(sed -n 's/.*[[:space:]]width="\([0-9][0-9]*\)\(\.[0-9]*\)\{0,1\}\(px\)\{0,1\}".*/\1/p' <<<"$root")
svg_h=$(sed -n 's/.*[[:space:]]height="\([0-9][0-9]*\)\(\.[0-9]*\)\{0,1\}\(px\)\{0,1\}".*/\1/p' <<<"$root")
width=${WIDTH:-${svg_w:-1700}}
height=${HEIGHT:-${svg_h:-900}}
svg_abs=$(cd "$(dirname "$svg")" && pwd)/$(basename "$svg")
case $png in /*) png_abs=$png ;; *) png_abs=$PWD/$png ;; esac
rm -f "$png_abs"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" --screenshot="$png_abs" \
    --window-size="$width,$height" "file://$svg_abs" >/dev/null 2>&1 || true

if [[ ! -s $png_abs ]]; then
    echo "$0: chromium wrote no screenshot to $png_abs" >&2
    exit 1
fi
echo "$png_abs"
