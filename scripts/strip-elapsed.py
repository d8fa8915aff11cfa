#!/usr/bin/env python3
"""Reads one JSON value on stdin and prints it with every `elapsed_ns` removed (the one
wall-clock figure of pipefence's reports), keys sorted: what the before/after comparison
scripts compare. Keys named in the environment variable STRIP_KEYS (comma-separated) are
removed too."""
import json
import os
import sys

DROP = {"elapsed_ns"} | {k for k in os.environ.get("STRIP_KEYS", "").split(",") if k}


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in DROP}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o


try:
    print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True, indent=1))
except Exception as e:  # a report that is not JSON compares as its error
    print("not json:", e)
