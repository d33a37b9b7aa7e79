"""XLA's own memory figure for a module, per device, measured in a child process.

The reference for hloshard's predicted peak (:mod:`hloshard.cost.liveness`): the module is compiled by
XLA's CPU backend for N partitions (GSPMD, Shardy off, no propagation to parameters; the same options as
:func:`hloshard.xla_check.compile_with_dump`), and ``compiled.memory_analysis()`` gives, per device,

* ``argument``: bytes of the parameter buffers,
* ``output``: bytes of the output buffers,
* ``alias``: bytes of outputs that share a parameter's buffer (``input_output_alias``),
* ``temp``: the size of the one preallocated temporary heap (XLA's heap simulator packs every other
  buffer into it; fragmentation included).

XLA's figure is ``argument + output + temp - alias`` (:attr:`XlaMemory.total`).  The buffer assignment
XLA dumps beside the optimised module (``*buffer-assignment.txt``, ``*live-range.txt``) gives the
buffers live at XLA's peak (:attr:`XlaMemory.peak_buffers`): the point of its schedule where the temp
buffers live at once (each (allocation, offset) slot counted once) plus every parameter and output
allocation are largest.  jax is never imported in the calling process
(:func:`hloshard.xla_check.run_jax_child`).

Public API::

    xla_memory(texts, num_partitions, timeout=900) -> list[XlaMemory]
    parse_buffer_assignment(text, live_range_text) -> (allocations, values)   # pure text, no jax
    peak_buffers(buffer_assignment_text, live_range_text, k=5) -> list[dict]

Raises :class:`hloshard.errors.InputError` when jax is missing or the child fails as a whole; a module
XLA rejects is reported in ``XlaMemory.error``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from typing import Any

from .xla_check import compile_with_dump, run_jax_child

__all__ = ["XlaMemory", "xla_memory", "parse_buffer_assignment", "peak_buffers"]


@dataclasses.dataclass
class XlaMemory:
    """``compiled.memory_analysis()`` of one module, bytes per device, and the largest buffers live at
    XLA's peak (``{"name", "shape", "bytes", "kind"}``, kind 'parameter' | 'output' | 'temp')."""

    argument: int = 0
    output: int = 0
    temp: int = 0
    alias: int = 0
    peak_buffers: list = dataclasses.field(default_factory=list)
    error: str | None = None
    #: XLA's optimised module (``compiled.as_text()``: fused, scheduled, per device), when asked for
    compiled: str | None = None
    #: ``compiled.cost_analysis()['flops']`` per device (XLA's HloCostAnalysis), None where jaxlib has none
    flops: float | None = None
    #: the dump files kept (``xla_memory(..., keep_dump=DIR)``), gzipped
    dumps: list = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        """``argument + output + temp - alias``: what one device allocates for the run (bytes)."""
        return self.argument + self.output + self.temp - self.alias

    def to_json(self) -> dict[str, Any]:
        return {"argument_bytes": self.argument, "output_bytes": self.output, "temp_bytes": self.temp,
                "alias_bytes": self.alias, "total_bytes": self.total, "peak_buffers": self.peak_buffers,
                "flops": self.flops, "error": self.error}


# --------------------------------------------------------------------------------------------
# buffer assignment text (no jax)

_ALLOC = re.compile(r"^allocation (\d+): size (\d+)(.*)$")
_VALUE = re.compile(r"^\s*value: <\d+ (\S+?)(\{[\d,]*\})? @\d+> \(size=(\d+),offset=(\d+)\): (.*)$")
_RANGE = re.compile(r"^\s*(\S+?)(\{[\d,]*\})?:(\d+)-(\d+)\s*$")


def parse_buffer_assignment(text: str, live_range_text: str = "") -> tuple[dict, list]:
    """``(allocations, values)`` of XLA's ``*buffer-assignment.txt`` dump.

    ``allocations``: index -> ``{"size", "kind"}`` (kind 'parameter', 'output' (output or
    maybe-live-out of the entry), 'constant', 'thread-local' or 'temp'); ``values``: one dict per
    assigned value ``{"name", "index", "alloc", "size", "offset", "shape", "start", "end"}`` (start/end:
    its live range in XLA's schedule from ``live_range_text``, None when absent)."""
    allocs: dict = {}
    values: list = []
    cur = None
    for line in text.splitlines():
        m = _ALLOC.match(line)
        if m:
            cur = int(m.group(1))
            rest = m.group(3)
            kind = ("parameter" if "parameter" in rest else "constant" if "constant" in rest else
                    "thread-local" if "thread-local" in rest else
                    "output" if ("output shape" in rest or "maybe-live-out" in rest) else "temp")
            allocs[cur] = {"size": int(m.group(2)), "kind": kind}
            continue
        m = _VALUE.match(line)
        if m and cur is not None:
            values.append({"name": m.group(1), "index": m.group(2) or "{}", "alloc": cur,
                           "size": int(m.group(3)), "offset": int(m.group(4)), "shape": m.group(5).strip(),
                           "start": None, "end": None})
        elif line and not line.startswith(" ") and cur is not None and not line.startswith("allocation"):
            cur = None   # the per-allocation listing ended
    ranges: dict = {}
    for line in live_range_text.splitlines():
        m = _RANGE.match(line)
        if m:
            ranges[(m.group(1), m.group(2) or "{}")] = (int(m.group(3)), int(m.group(4)))
    for v in values:
        r = ranges.get((v["name"], v["index"]))
        if r is not None:
            v["start"], v["end"] = r
    return allocs, values


def peak_buffers(text: str, live_range_text: str, k: int = 5) -> list[dict]:
    """The ``k`` largest buffers live at XLA's peak, largest first (see the module docstring):
    ``{"name", "shape", "bytes", "kind"}``.  Parameter and output allocations are live throughout;
    temp values at the schedule point where the temp slots live at once are largest."""
    allocs, values = parse_buffer_assignment(text, live_range_text)
    fixed = []
    for v in values:
        kind = allocs[v["alloc"]]["kind"]
        if kind in ("parameter", "output") and v["size"] > 0 and v["index"] == "{}" or \
                kind in ("parameter", "output") and not v["shape"].startswith("("):
            fixed.append(v)
    temps = [v for v in values if allocs[v["alloc"]]["kind"] == "temp" and v["start"] is not None
             and not v["shape"].startswith("(")]
    best_t, best = None, -1
    for t in sorted({v["start"] for v in temps}):
        slots = {(v["alloc"], v["offset"]): v["size"] for v in temps if v["start"] <= t <= v["end"]}
        s = sum(slots.values())
        if s > best:
            best_t, best = t, s
    live = [v for v in temps if best_t is not None and v["start"] <= best_t <= v["end"]]
    seen_alloc: set = set()
    out = []
    for v in sorted(fixed, key=lambda v: -v["size"]):   # one entry per parameter / output allocation
        key = v["alloc"]
        if key in seen_alloc or v["shape"].startswith("("):
            continue
        seen_alloc.add(key)
        out.append({"name": v["name"], "shape": v["shape"], "bytes": allocs[key]["size"],
                    "kind": allocs[key]["kind"]})
    seen_slot: set = set()
    for v in sorted(live, key=lambda v: -v["size"]):
        key = (v["alloc"], v["offset"])
        if key in seen_slot:
            continue
        seen_slot.add(key)
        out.append({"name": v["name"] + ("" if v["index"] == "{}" else v["index"]), "shape": v["shape"],
                    "bytes": v["size"], "kind": "temp"})
    out.sort(key=lambda d: (-d["bytes"], d["name"]))
    return out[:k]


# --------------------------------------------------------------------------------------------
# the child process (jax imported only there)

def _child_main() -> int:  # pragma: no cover - runs in the subprocess
    import glob
    import gzip
    import os
    import shutil
    import tempfile


    request = json.load(sys.stdin)
    n = int(request["num_partitions"])
    k = int(request.get("k", 5))
    keep = request.get("keep_dump")
    results = []
    for i, text in enumerate(request["texts"]):
        try:
            with tempfile.TemporaryDirectory(prefix="hloshard-xla-mem-") as dump:
                prop = bool(request.get("propagate_outputs"))
                pass_re = "sharding-propagation|spmd-partitioning" if keep else "NO-PASS-MATCHES^"
                exe = compile_with_dump(text, n, dump, pass_re, propagate_outputs=prop)
                m = exe.get_compiled_memory_stats()
                ba = sorted(glob.glob(os.path.join(dump, "*after_optimizations-buffer-assignment.txt")))
                lr = sorted(glob.glob(os.path.join(dump, "*after_optimizations-live-range.txt")))
                ao = sorted(glob.glob(os.path.join(dump, "*after_optimizations.txt")))
                compiled = open(ao[-1]).read() if ao and request.get("compiled") else None
                buffers = []
                if ba:
                    buffers = peak_buffers(open(ba[-1]).read(), open(lr[-1]).read() if lr else "", k)
                flops = None
                try:   # XLA's HloCostAnalysis of the optimised module, per device
                    ca = exe.cost_analysis()
                    ca = ca[0] if isinstance(ca, (list, tuple)) and ca else ca
                    flops = float(ca.get("flops")) if ca and ca.get("flops") is not None else None
                except Exception:  # noqa: BLE001 - not every jaxlib has it; the memory figure stands alone
                    flops = None
                kept = []
                if keep:   # the dumps a diagnosis reads, gzipped: KEEP/<i>.<what>.txt.gz
                    os.makedirs(keep, exist_ok=True)
                    pats = {"buffer-assignment": ba[-1:], "live-range": lr[-1:], "optimized": ao[-1:],
                            "partitioned": sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))[:1],
                            "propagated": sorted(glob.glob(os.path.join(dump, "*after_sharding-propagation*.txt")))[-1:]}
                    for what, files in pats.items():
                        for f in files:
                            dst = os.path.join(keep, f"{i}.{what}.txt.gz")
                            with open(f, "rb") as src, gzip.open(dst, "wb") as out:
                                shutil.copyfileobj(src, out)
                            kept.append(dst)
                results.append({"argument": int(m.argument_size_in_bytes), "output": int(m.output_size_in_bytes),
                                "temp": int(m.temp_size_in_bytes), "alias": int(m.alias_size_in_bytes),
                                "peak_buffers": buffers, "compiled": compiled, "flops": flops, "dumps": kept})
        except Exception as exc:  # one bad module must not hide the others
            results.append({"error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
    json.dump({"results": results}, sys.stdout)
    return 0


def xla_memory(texts: list[str], num_partitions: int, timeout: float = 900.0, k: int = 5,
               propagate_outputs: bool = False, compiled: bool = False,
               keep_dump: str | None = None) -> list[XlaMemory]:
    """XLA's memory figures for each HLO text (one child process for all; see the module docstring),
    compiled for ``num_partitions`` devices.  ``k``: how many peak buffers to keep;
    ``propagate_outputs``: GSPMD may choose unannotated outputs' shardings (as jax compiles a module
    without out_shardings); ``compiled``: also return XLA's optimised module text
    (:attr:`XlaMemory.compiled`); ``keep_dump``: a directory where the child writes, gzipped, XLA's
    dumps of text ``i`` as ``i.buffer-assignment.txt.gz``, ``i.live-range.txt.gz``, ``i.optimized.txt.gz``,
    ``i.partitioned.txt.gz`` (after spmd-partitioning) and ``i.propagated.txt.gz`` (after
    sharding-propagation) -- the files :attr:`XlaMemory.dumps` lists.  Raises InputError when jax is
    missing or the child dies."""

    if not texts:
        return []
    data = run_jax_child("hloshard.xla_memory", {"num_partitions": int(num_partitions), "texts": list(texts),
                                                 "k": int(k), "propagate_outputs": bool(propagate_outputs),
                                                 "compiled": bool(compiled), "keep_dump": keep_dump},
                         num_partitions, timeout, what="XLA memory analysis", flag="--xla")
    out = []
    for r in data["results"]:
        if r.get("error"):
            out.append(XlaMemory(error=r["error"]))
        else:
            out.append(XlaMemory(argument=r["argument"], output=r["output"], temp=r["temp"], alias=r["alias"],
                                 peak_buffers=r.get("peak_buffers", []), compiled=r.get("compiled"),
                                 flops=r.get("flops"), dumps=r.get("dumps", [])))
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_child_main())
