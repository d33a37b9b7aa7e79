"""Bytes per device that XLA's partitioned HLO moves, counted from XLA's own text (test-side oracle).

Independent of hloshard's cost code on purpose: it reads the raw after-spmd-partitioning HLO that
``tests/xla_oracle.spmd_partition`` returns and applies the ring formulas of issue 8 (n = replica
group size): all-gather (n-1)/n x result bytes, reduce-scatter (n-1)/n x operand bytes (= n x result),
all-reduce 2(n-1)/n x bytes, all-to-all (n-1)/n x bytes, collective-permute the bytes sent (its result).
A collective in a ``while`` body counts once per trip (XLA's ``known_trip_count`` backend config); a
loop without one raises, so a test never counts a loop body as if it ran once.
"""

from __future__ import annotations

import re

from tests import xla_oracle

ELEMENT_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                 "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1}
_ARRAY = re.compile(r"\b([a-z]+[0-9a-z]*)\[([0-9,]*)\]")
_COMP = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\))?.*\{\s*$")
_WHILE = re.compile(r"\bwhile\(.*body=%?([\w.\-]+)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_COMMENT = re.compile(r"/\*.*?\*/")   # XLA's /*index=5*/ markers in long tuple shapes


def _header(line: str) -> str | None:
    """The computation a header line opens (``%body (p: (f32[2], ..., /*index=5*/f32[2])) -> ... {``), else
    None; instruction lines (``name = ...``) are not headers."""
    line = _COMMENT.sub("", line)
    m = _COMP.match(line)
    if m and "=" not in line.split("{")[0]:
        return m.group(1)
    return None


def shape_bytes(shape_text: str) -> int:
    """Bytes of a shape text (a tuple: the sum of its arrays); token and opaque shapes are 0."""
    total = 0
    for ty, dims in _ARRAY.findall(shape_text):
        if ty not in ELEMENT_BYTES:
            continue
        n = 1
        for d in dims.split(","):
            if d:
                n *= int(d)
        total += n * ELEMENT_BYTES[ty]
    return total


def _computation_weights(text: str) -> dict[str, int]:
    """Computation name -> how many times a body runs per program execution (entry 1, loop bodies their
    trip count, nested loops multiplied); computations not reached through a while count 1."""
    bodies: dict[str, list[tuple[str, int]]] = {}
    current = None
    for line in text.splitlines():
        h = _header(line)
        if h is not None:
            current = h
            bodies.setdefault(current, [])
            continue
        w = _WHILE.search(line)
        if w and current is not None:
            t = _TRIPS.search(line)
            if t is None:
                raise ValueError(f"while loop without known_trip_count in {current}: {line.strip()[:120]}")
            bodies[current].append((w.group(1), int(t.group(1))))
    weights = {name: 1 for name in bodies}
    changed = True
    while changed:     # propagate down the (acyclic) while nesting
        changed = False
        for parent, loops in bodies.items():
            for body, trips in loops:
                want = weights.get(parent, 1) * trips
                if weights.get(body) != want:
                    weights[body] = want
                    changed = True
    return weights


def collective_bytes(partitioned_text: str) -> list[dict]:
    """Per collective of XLA's partitioned HLO: name, kind, group size, ring bytes per device (trip-counted)."""
    weights = _computation_weights(partitioned_text)
    comp_of = {}
    current = None
    for line in partitioned_text.splitlines():
        h = _header(line)
        if h is not None:
            current = h
            continue
        nm = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", line)
        if nm:
            comp_of[nm.group(1)] = current
    out = []
    for c in xla_oracle.collectives(partitioned_text):
        kind = c["kind"]
        if kind.endswith("-done"):
            continue
        groups = c["replica_groups"] or []
        n = len(groups[0]) if groups and groups[0] else 8
        b = shape_bytes(c["shape"])
        if kind == "collective-permute":
            ring = float(b)
        elif kind == "all-reduce":
            ring = 2.0 * (n - 1) / n * b
        elif kind == "reduce-scatter":
            ring = (n - 1) / n * b * n
        else:   # all-gather (result bytes), all-to-all
            ring = (n - 1) / n * b
        w = weights.get(comp_of.get(c["name"]), 1)
        out.append({"name": c["name"], "kind": kind, "n": n, "bytes": ring * w})
    return out


def xla_ring_bytes(text: str, num_partitions: int = 8) -> float:
    """Total ring bytes per device of the collectives XLA's SPMD partitioner inserts for ``text``."""
    raw = xla_oracle.spmd_partition(text, num_partitions)
    return sum(c["bytes"] for c in collective_bytes(raw))
