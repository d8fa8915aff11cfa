#!/usr/bin/env python3
"""Reads one JSON value on stdin and prints it with every `elapsed_ns` removed (the one
wall-clock figure of pipefence's reports), keys sorted: what the before/after comparison
scripts compare."""
import json
import sys


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k != "elapsed_ns"}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o


try:
    print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True, indent=1))
except Exception as e:  # a report that is not JSON compares as its error
    print("not json:", e)
