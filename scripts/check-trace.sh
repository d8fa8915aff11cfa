#!/usr/bin/env bash
# Loads Chrome Trace Event Format files (what `pipefence run --trace` writes) with a
# third-party consumer: the Chrome DevTools Performance panel's trace engine, as published
# on npm as @paulirish/trace_engine (the DevTools models/trace code, run under Node).
# For each file it prints what that engine found: the slices per thread (with thread
# names), instants, bound flows and the trace bounds. Not used by CI.
#
#   scripts/check-trace.sh TRACE.json...
#
# What this engine does not take from pipefence's traces (its behaviour, checked against
# @paulirish/trace_engine 0.0.65, not a format error in itself):
#   - instants: it only reads ph "I", so ph "i" instants are counted in the file but not kept;
#   - flows: it binds a flow event ("s"/"f") only to a slice with the same ts, pid, tid AND
#     cat, so "flow"-category arrows next to "busy"/"host"/"blocked" slices bind to nothing;
#   - trace bounds: it ignores events at ts 0 when computing them.
#
# Exits 1 when any file fails to load (unreadable, bad JSON, no traceEvents array, or the
# engine throws while parsing), 2 on usage errors.
#
# Needs node and npm. The engine is installed on first use into $TRACE_CHECK_DIR
# (default /tmp/pipefence-trace-check) from the npm registry, pinned to one version since
# its API is not stable; after that it runs offline.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 TRACE.json..." >&2
    exit 2
fi
command -v node >/dev/null 2>&1 || { echo "$0: node not found (apt-get install -y nodejs npm)" >&2; exit 1; }

engine_version=0.0.65
dir=${TRACE_CHECK_DIR:-/tmp/pipefence-trace-check}
pkg=$dir/node_modules/@paulirish/trace_engine
if [[ ! -f $pkg/package.json ]] || ! grep -q "\"version\": \"$engine_version\"" "$pkg/package.json"; then
    command -v npm >/dev/null 2>&1 || { echo "$0: npm not found (apt-get install -y npm)" >&2; exit 1; }
    mkdir -p "$dir"
    [[ -f $dir/package.json ]] || echo '{"name":"pipefence-trace-check","private":true}' >"$dir/package.json"
    echo "$0: installing @paulirish/trace_engine@$engine_version into $dir" >&2
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
        "@paulirish/trace_engine@$engine_version" >&2)
fi

files=()
for f in "$@"; do
    files+=("$(realpath -- "$f" 2>/dev/null || echo "$f")")
done

# The checker lives beside node_modules so that its imports resolve there.
cat >"$dir/check-trace.mjs" <<'EOF'
import fs from 'node:fs';
import {analyzeEvents} from '@paulirish/trace_engine/analyze-trace.mjs';

let failed = 0;
for (const file of process.argv.slice(2)) {
  console.log(`== ${file}`);
  try {
    const json = JSON.parse(fs.readFileSync(file, 'utf8'));
    const events = Array.isArray(json) ? json : json.traceEvents;
    if (!Array.isArray(events)) throw new Error('no traceEvents array');
    const {parsedTrace} = await analyzeEvents(events);
    const data = parsedTrace.data;
    const raw = {X: 0, B: 0, i: 0, flows: 0};
    for (const e of events) {
      if (e.ph === 'X') raw.X++;
      else if (e.ph === 'B') raw.B++;
      else if (e.ph === 'i' || e.ph === 'I' || e.ph === 'n') raw.i++;
      else if (e.ph === 's') raw.flows++;
    }
    let slices = 0, instants = 0, threads = 0;
    const lines = [];
    for (const [pid, proc] of data.Renderer.processes) {
      const pname = data.Meta.processNames.get(pid)?.args?.name ?? '';
      for (const [tid, thread] of proc.threads) {
        const s = thread.entries.filter(e => e.ph === 'X' || e.ph === 'B').length;
        const n = thread.entries.filter(e => e.ph === 'i' || e.ph === 'I' || e.ph === 'n').length;
        slices += s; instants += n; threads++;
        lines.push(`  pid ${pid} (${pname}) tid ${tid} "${thread.name ?? ''}": ` +
                   `${s} slices, ${n} instants, ${thread.tree?.roots?.size ?? 0} roots`);
      }
    }
    const b = data.Meta.traceBounds;
    console.log(`  loaded: ${events.length} events; generic trace: ${data.Meta.traceIsGeneric}; ` +
                `bounds ${b.min}..${b.max} us`);
    console.log(`  threads: ${threads}; slices: ${slices} (file has ${raw.X} X + ${raw.B} B); ` +
                `instants: ${instants} (file has ${raw.i}); ` +
                `flows bound: ${data.Flows.flows.length} (file has ${raw.flows} starts)`);
    for (const l of lines) console.log(l);
    // The engine keeps only threads that have events; list the named ones it dropped.
    const kept = new Set();
    for (const [pid, proc] of data.Renderer.processes) for (const tid of proc.threads.keys()) kept.add(`${pid}:${tid}`);
    const dropped = events.filter(e => e.ph === 'M' && e.name === 'thread_name' && !kept.has(`${e.pid}:${e.tid}`))
                          .map(e => `tid ${e.tid} "${e.args?.name ?? ''}"`);
    if (dropped.length) console.log(`  named threads with no slices (not kept): ${dropped.join(', ')}`);
  } catch (err) {
    failed++;
    console.log(`  LOAD FAILED: ${err && err.stack ? err.stack : err}`);
  }
}
process.exit(failed ? 1 : 0);
EOF

cd "$dir"
exec node check-trace.mjs "${files[@]}"
