#!/usr/bin/env python3
"""Before/after comparison of `pipefence run` on the threaded driver, for a change to its hot
paths that should preserve behaviour: runs two `pipefence` binaries RUNS times each over every
scenario in examples/ and tests/scenarios/ (plain, and with --validate), and compares the sets
of --json reports each produced, with every wall-clock figure (`*_ns` keys) removed. The
threaded driver's schedule is the machine's, so a racy scenario may give several reports;
a scenario whose set differs is printed, with whether the old binary alone already gave more
than one report (racy) or not.

    scripts/compare-threaded.py OLD_BINARY NEW_BINARY [RUNS]

Exits 0 when every set is identical, 1 otherwise, 2 on usage errors."""
import glob
import json
import os
import subprocess
import sys


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if not k.endswith("_ns")}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o


def report(binary, path, flags):
    p = subprocess.run([binary, "run", path, "--json", *flags], capture_output=True, text=True,
                       timeout=120)
    try:
        body = json.dumps(strip(json.loads(p.stdout)), sort_keys=True)
    except ValueError as e:
        body = f"not json: {e}"
    return f"exit {p.returncode} {body}"


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = sorted(glob.glob("examples/*.kdl")) + sorted(glob.glob("tests/scenarios/*.kdl"))
    same = differ = 0
    for path in files:
        for flags in ([], ["--validate"]):
            a = {report(old, path, flags) for _ in range(runs)}
            b = {report(new, path, flags) for _ in range(runs)}
            if a == b:
                same += 1
            else:
                differ += 1
                racy = "racy: the old binary gave %d reports" % len(a) if len(a) > 1 else "old: 1 report"
                print(f"differs: {path} {' '.join(flags) or 'plain'} ({racy}, new {len(b)})")
    print(f"{same} identical, {differ} different")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
