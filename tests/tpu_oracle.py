"""The real TPU compiler (libtpu, ahead of time, no TPU needed) as a test and benchmark oracle.

``libtpu`` compiles for a TPU topology on a CPU-only machine (``../shared/reference/tpu_aot.md``): the
HLO text goes through jaxlib's HLO -> StableHLO route (what ``jax.jit`` and the TPU pipeline take) and
is compiled with GSPMD for ``num_partitions`` chips of ``topology``.  Everything runs in a child process
(``sys.executable``, which must be able to import ``libtpu``; a compiler crash cannot take the caller
with it) and returns plain data:

* :func:`tpu_available` -- None when libtpu and jax import here, else the reason they do not.
* :func:`with_trip_counts` -- the partitioned text with a ``known_trip_count`` on each ``while`` that has
  none (the TPU pipeline annotates trip counts after its partitioner, the CPU pipeline before it), so
  that :func:`tests.xla_bytes.collective_bytes` counts a loop body once per trip.
* :func:`offset_scalar_spills` -- which partition-offset scalars XLA's buffer assignment puts into
  the HBM temp heap, replayed on libtpu's own schedule (a record's ``offset_scalars``).
* :func:`compile_for_tpu` -- per text (HLO text, compiled with GSPMD; or StableHLO text as jax lowers it,
  compiled with Shardy when it carries ``sdy.sharding``s, as ``jax.jit`` would): ``ok`` / ``error`` (XLA's
  message), ``partitioned`` (the TPU pipeline's raw HLO right after its SPMD partitioner, from the
  ``xla_dump_to`` dump: ``after_tpu-spmd-partitioning``), ``final`` (the optimized HLO the TPU runs: after
  its collective combiners, async conversion and layout assignment), ``memory``
  (``get_compiled_memory_stats``: argument, output, alias and temp bytes per device, the TPU buffer
  assignment; compiled ahead of time its temp need not be the HBM temporary: 0 on some modules whose
  buffer assignment holds a preallocated temporary buffer in HBM), ``hbm_bytes`` (the buffer assignment's total of HBM, memory space 0, from
  its memory-usage report: arguments, outputs and temporaries), ``hbm_heap`` (the buffer assignment's HBM
temp heap: ``bytes``, ``headers`` (tuple values: async headers), ``other_values`` / ``other_bytes`` (the
rest), ``small_slots`` (distinct offsets of values of at most 512 B), ``scalars_in_outputs`` (one-element arrays, the
partition offsets ``s32[1]`` / ``pred[1]``, that it placed in an entry output's allocation instead); what
:func:`hloshard.cost.tpu_layout.reported_temp_bytes` takes), ``offset_scalars`` (``steps``: the length of
the scheduled entry computation; ``outputs``: per entry-output allocation in HBM its ``size`` and
``values``, each ``name``, ``scalar`` (a one-element array), ``tuple``, ``start`` / ``end`` (its
definition and last read in that schedule, reads through bitcasts included), ``op_name`` (its metadata:
the instruction of the compiled text it was made for); ``heap``: the scalars
in the temp heap; for :func:`offset_scalar_spills`) and ``cost`` (``cost_analysis``: flops,
  ``optimal_seconds``, the TPU cost model's time).

The collective bytes of ``partitioned`` are counted with :func:`tests.xla_bytes.collective_bytes`, the
same ring formulas as for the CPU backend's partitioner.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

DEFAULT_TOPOLOGY = "v5e:2x4"

_CHILD = r'''
import glob, json, os, re, sys, tempfile, traceback
req = json.loads(sys.stdin.read())
dump = req["dump"]
os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=spmd-partitioning"
import numpy as np
import jax, jax.extend, jax.extend.mlir, jax.extend.backend
from jax.experimental import topologies
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir
from jax._src.interpreters import mlir as jmlir
from jax._src import compiler

def _scalar_hosts(ba, final):
    # libtpu's schedule of the entry computation (the final HLO is scheduled: text order) and, per
    # entry-output allocation of HBM (color 0, not a parameter), its values with their live ranges in
    # that schedule; the one-element arrays (partition-offset scalars) in outputs and in the temp heap.
    body = final.split("\nENTRY ", 1)[1].split("\n}\n", 1)[0].splitlines()[1:]
    pos, users, origin = {}, {}, {}
    for i, line in enumerate(body):
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (.*)", line)
        if not m:
            continue
        rest, depth, k = m.group(2), 0, 0
        for k, ch in enumerate(rest):   # past the shape (a tuple shape has spaces inside its parentheses)
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == " " and depth == 0:
                break
        op = re.match(r"\s*([\w\-]+)\(", rest[k:])
        pos[m.group(1)] = (i, op.group(1) if op else "")
        where = re.search(r'op_name="([^"]*)"', rest)
        origin[m.group(1)] = where.group(1) if where else None
        for u in re.findall(r"%([\w.\-]+)", rest):
            users.setdefault(u, []).append(m.group(1))
    def last_use(name, depth=0):
        best = pos[name][0] if name in pos else -1
        for u in users.get(name, []):
            best = max(best, pos[u][0])
            if pos[u][1] in ("bitcast", "get-tuple-element") and depth < 20:   # a view: its reads count
                best = max(best, last_use(u, depth + 1))
        return best
    def value(name, shape):
        base = name.split("{")[0]
        return {"name": name, "scalar": bool(re.match(r"[a-z]\w*\[1\]\{", shape)), "tuple": shape.startswith("("),
                "start": pos[base][0] if base in pos else None, "end": last_use(base) if base in pos else None,
                "op_name": origin.get(base)}
    outputs, heap = [], []
    for block in ba.split("\nallocation ")[1:]:
        head = block.split("\n", 1)[0]
        if re.search(r"color [1-9]", head):
            continue
        vals = [value(v, sh) for v, sh in re.findall(r"value: <\d+ (\S+) @0> \(size=\d+,offset=\d+\): (\S+)", block)]
        if "maybe-live-out" in head and "parameter" not in head:
            outputs.append({"size": int(re.search(r"size (\d+)", head).group(1)), "values": vals})
        elif "preallocated-temp" in head:
            heap += [v for v in vals if v["scalar"]]
    return {"steps": len(body), "outputs": outputs, "heap": heap}

topo = topologies.get_topology_desc(req["topology"], "tpu")
n = req["partitions"]
client = topo.devices[0].client
out = []
for k, text in enumerate(req["texts"]):
    rec = {"ok": False, "error": None, "partitioned": None, "final": None, "memory": None, "hbm_bytes": None,
           "hbm_heap": None, "offset_scalars": None, "cost": None}
    before = set(glob.glob(os.path.join(dump, "*after_tpu-spmd-partitioning*")))
    reports = set(glob.glob(os.path.join(dump, "*memory-usage-report*")))
    try:
        shardy = False
        if text.lstrip().startswith(("module", "#loc")):   # StableHLO text (jax's lowering): as jax compiles it
            bytecode, shardy = text, "sdy.sharding" in text
        else:
            mod = xc.hlo.hlo_module_from_text(text)
            bytecode = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
        opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=n,
                                                      device_assignment=np.arange(n).reshape(1, n))
        opts.executable_build_options.use_shardy_partitioner = shardy   # GSPMD for written sharding={...}
        opts.executable_build_options.allow_spmd_sharding_propagation_to_output = [bool(req["propagate_outputs"])]
        with jmlir.make_ir_context():
            exe = compiler.backend_compile_and_load(client, ir.Module.parse(bytecode),
                                                    xc.DeviceList(tuple(topo.devices[:n])), opts, [])
        m = exe.get_compiled_memory_stats()
        rec["memory"] = {"argument": int(m.argument_size_in_bytes), "output": int(m.output_size_in_bytes),
                         "alias": int(m.alias_size_in_bytes), "temp": int(m.temp_size_in_bytes)}
        c = exe.cost_analysis()
        c = c[0] if isinstance(c, (list, tuple)) and c else c
        rec["cost"] = {key: float(c[key]) for key in ("flops", "optimal_seconds", "bytes accessed")
                       if isinstance(c, dict) and key in c}
        new = sorted(set(glob.glob(os.path.join(dump, "*after_tpu-spmd-partitioning*"))) - before)
        if new:
            rec["partitioned"] = open(new[-1]).read()
        rec["final"] = exe.hlo_modules()[0].to_string()
        for path in sorted(set(glob.glob(os.path.join(dump, "*memory-usage-report*"))) - reports)[-1:]:
            hbm = re.search(r"Memory Space: default \(color=0\)\s*Total bytes: (\d+)", open(path).read())
            rec["hbm_bytes"] = int(hbm.group(1)) if hbm else None
            # the HBM temp heap (color 0, preallocated-temp) of the buffer assignment: its size, its async
            # headers (tuple values) and the bytes of its other values (cost.tpu_layout.reported_temp_bytes)
            ba = path.replace("memory-usage-report", "buffer-assignment")
            if os.path.exists(ba):
                heap = {"bytes": 0, "headers": 0, "small_slots": 0, "other_values": 0, "other_bytes": 0}
                for block in open(ba).read().split("\nallocation ")[1:]:
                    head = block.split("\n", 1)[0]
                    if "preallocated-temp" not in head or re.search(r"color [1-9]", head):
                        continue
                    heap["bytes"] += int(re.search(r"size (\d+)", head).group(1))
                    small = set()
                    for size, offset, shape in re.findall(r"value: <\d+ \S+ @0> \(size=(\d+),offset=(\d+)\): (\S)",
                                                          block):
                        key = "headers" if shape == "(" else "other_values"
                        heap[key] += 1
                        heap["other_bytes"] += int(size) if key == "other_values" else 0
                        if int(size) <= 512:
                            small.add(int(offset))
                    heap["small_slots"] += len(small)
                # one-element arrays (the s32[1] / pred[1] partition offsets) that the buffer
                # assignment put into an entry output's allocation before the output is written
                heap["scalars_in_outputs"] = 0
                for block in open(ba).read().split("\nallocation ")[1:]:
                    head = block.split("\n", 1)[0]
                    if "maybe-live-out" in head and "parameter" not in head:
                        heap["scalars_in_outputs"] += len(re.findall(r"value: <\d+ \S+ @0> \(size=\d+,offset=\d+\): [a-z]\w*\[1\]\{", block))
                rec["hbm_heap"] = heap
                try:   # a diagnostic: a text it cannot read leaves the record as it was
                    rec["offset_scalars"] = _scalar_hosts(open(ba).read(), exe.hlo_modules()[0].to_string())
                except Exception:
                    rec["offset_scalars"] = None
        rec["ok"] = True
    except Exception as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
    out.append(rec)
print("@@TPU@@" + json.dumps(out))
'''


def with_trip_counts(text: str) -> str:
    """``text`` (an HLO module) with ``backend_config={"known_trip_count":{"n":"N"}}`` added to every
    ``while`` without one; N from :func:`hloshard.hlo.loops.trip_count` (the induction variable's init,
    step and bound).  Raises ValueError when a count is only a guess (the loop would be miscounted)."""
    import re

    from hloshard.hlo import parse_module
    from hloshard.hlo.loops import trip_count

    module = parse_module(text)
    trips = {}
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "while":
                tc = trip_count(instr)
                if not tc.exact:
                    raise ValueError(f"while {instr.name}: trip count unknown ({tc.reason})")
                trips[instr.name] = tc.count
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*\bwhile\(", line)
        if m and m.group(1) in trips and "known_trip_count" not in line:
            line = line + f', backend_config={{"known_trip_count":{{"n":"{trips[m.group(1)]}"}}}}'
        out.append(line)
    return "\n".join(out)


def offset_scalar_spills(hosts: dict) -> list[str]:
    """The partition-offset scalars (one-element ``s32[1]`` / ``u32[1]`` / ``pred[1]`` values in HBM)
    that XLA's buffer assignment must put into the temp heap, replayed on libtpu's own schedule:
    ``hosts`` is a record's ``offset_scalars`` (:func:`compile_for_tpu`: the entry outputs' allocations
    with their values' live ranges, the heap's scalars, positions in the scheduled entry computation).

    The rule (BENCHMARKS.md "Round 20, helper tpumem"): scalars in order of definition, each into the
    first entry-output allocation that is free over its whole live range -- its last read strictly
    before the output's own value is written (the latest-defined non-scalar value of that allocation;
    the reader of a scalar cannot write into it), not overlapping another temporary placed there (a
    scalar whose reader is the next scalar of its chain shares: ``[a, b]`` and ``[b, c]`` do not
    overlap); an allocation holding a tuple value (the root tuple's pointer table) hosts none.  What
    finds no host goes into the heap; libtpu then reports the heap (:func:`hloshard.cost.tpu_layout.
    reported_temp_bytes`).  Returns the names of the scalars the replay puts in the heap."""
    allocs = []
    for out in hosts["outputs"]:
        vals = out["values"]
        if any(v["tuple"] for v in vals):
            continue
        arrays = [v for v in vals if not v["scalar"] and v["start"] is not None]
        written = max((v["start"] for v in arrays), default=hosts["steps"])
        occupied = [(written, None)] + [(v["start"], v["end"]) for v in arrays if v["start"] != written]
        allocs.append(occupied)
    scalars = [v for out in hosts["outputs"] for v in out["values"] if v["scalar"]] + list(hosts["heap"])
    scalars = sorted((v for v in scalars if v["start"] is not None), key=lambda v: (v["start"], v["name"]))
    spilled = []
    for v in scalars:
        a, b = v["start"], v["end"]
        for occupied in allocs:
            if all(b < x if y is None else not (a < y and x < b) for x, y in occupied):
                occupied.append((a, b))
                break
        else:
            spilled.append(v["name"])
    return spilled


def tpu_available() -> str | None:
    """None when this interpreter can compile for TPU ahead of time (libtpu and jax installed), else the
    reason it cannot (for a test's skip message)."""
    for mod in ("jax", "libtpu"):
        if importlib.util.find_spec(mod) is None:
            return (f"{mod} is not installed in {sys.executable} (the TPU oracle needs "
                    f"jax==0.10.2 and libtpu==0.0.42.*, ../shared/reference/tpu_aot.md)")
    return None


def compile_for_tpu(texts: list[str], topology: str = DEFAULT_TOPOLOGY, partitions: int = 8,
                    timeout: float = 600.0, propagate_outputs: bool = False) -> list[dict]:
    """Compile each HLO text for ``partitions`` chips of ``topology`` ahead of time (GSPMD), in one child
    process; returns one dict per text (module docstring).  ``propagate_outputs``: GSPMD may choose
    unannotated outputs' shardings (as ``jax.jit`` without ``out_shardings``; default: replicated).
    Raises RuntimeError when the child dies or times out (an XLA error on one text is that text's
    ``error``, not an exception)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hloshard-tpu-") as dump:
        req = {"texts": list(texts), "topology": topology, "partitions": partitions, "dump": dump,
               "propagate_outputs": bool(propagate_outputs)}
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        env.pop("JAX_PLATFORMS", None)
        # compile only: another process's libtpu lock file (a second TPU oracle running) must not abort it
        env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(req), capture_output=True,
                                  text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"TPU compile child timed out after {timeout:.0f} s") from exc
    for line in proc.stdout.splitlines():
        if line.startswith("@@TPU@@"):
            return json.loads(line[len("@@TPU@@"):])
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-8:])
    raise RuntimeError(f"TPU compile child died (exit code {proc.returncode}): {tail}")
