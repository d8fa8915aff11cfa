#!/usr/bin/env python3
"""Checks that the library's modules depend on each other one way (docs/architecture.md).

Each top-level module of crates/pipefence/src has a layer; a module may name (`crate::x`,
`use crate::x`, `super::` from a sibling file excluded) only modules of its own layer or below,
and modules of one layer may name each other only where listed as a known group. Prints every
edge that breaks the order and exits 1 if there is one.

    scripts/check-layers.py [--graph]
"""
import os, re, sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "pipefence", "src")

# Lower number = lower layer. A module may name modules of a lower layer, or of its own layer.
LAYERS = {
    "types": 0, "rng": 0, "choice": 0, "clock": 0, "error": 0, "memory": 0, "command": 0, "sync": 0,
    "trace": 0, "host_names": 0, "footprint": 0,
    "hazard": 1,
    "core": 2,
    "engine": 3,
    "diagnose": 4, "driver": 4, "runtime": 4,
    "host": 5, "api": 5, "explore": 6,
}
# Bottom modules must not name each other in a cycle; these are the allowed edges among them.
BOTTOM_ALLOWED = {("types", "command"), ("sync", "types"), ("trace", "types"),
                  ("sync", "clock"), ("memory", "sync"), ("command", "memory"),
                  ("trace", "command"), ("error", "command"), ("sync", "error"),
                  ("command", "error"), ("memory", "error"), ("trace", "error"),
                  ("trace", "sync"), ("host_names", "sync"),
                  ("memory", "footprint"), ("sync", "footprint"), ("choice", "footprint"),
                  ("choice", "types"), ("choice", "rng")}
# The hazard model is carried by the core (its handle) and reads the core's memory and names:
# one known pair, documented in docs/architecture.md.
KNOWN_PAIRS = {("hazard", "core"), ("hazard", "engine")}


def module_of(path):
    rel = os.path.relpath(path, SRC)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def edges():
    out = {}
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f)
            m = module_of(p)
            if m == "lib":
                continue
            text = open(p, encoding="utf-8").read()
            # Drop comments (doc links name modules without depending on them).
            text = re.sub(r"//[^\n]*", "", text)
            for t in re.findall(r"\bcrate::([a-z_]+)", text):
                if t != m and t in LAYERS:
                    out.setdefault((m, t), set()).add(os.path.relpath(p, SRC))
            for block in re.findall(r"use crate::\{([^;]*)\};", text, flags=re.S):
                for t in re.findall(r"(?:^|[,{\s])([a-z_]+)::", block):
                    if t != m and t in LAYERS:
                        out.setdefault((m, t), set()).add(os.path.relpath(p, SRC))
    return out


def main():
    es = edges()
    if "--graph" in sys.argv:
        for (a, b), files in sorted(es.items()):
            print(f"{a} -> {b}   ({', '.join(sorted(files))})")
        return 0
    bad = []
    for (a, b), files in sorted(es.items()):
        la, lb = LAYERS.get(a), LAYERS.get(b)
        if la is None or lb is None:
            bad.append((a, b, files, "module without a layer"))
        elif (a, b) in KNOWN_PAIRS:
            continue
        elif lb > la:
            bad.append((a, b, files, f"layer {la} names layer {lb}"))
        elif la == lb == 0 and (a, b) not in BOTTOM_ALLOWED:
            bad.append((a, b, files, "bottom modules naming each other outside the allowed edges"))
    for a, b, files, why in bad:
        print(f"{a} -> {b}: {why} ({', '.join(sorted(files))})")
    print(f"{len(es)} module dependencies, {len(bad)} against the layer order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
