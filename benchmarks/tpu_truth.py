#!/usr/bin/env python3
"""The solved samples on the real TPU compiler: do they compile, and do they move no more than GSPMD's plan?

For every sample (``samples/NAME.pre.hlo``, mesh 2x4, 8 chips of a ``v5e:2x4`` topology) two plans,
compiled ahead of time by libtpu through jaxlib's HLO -> StableHLO route with GSPMD
(:mod:`tests.tpu_oracle`; ``../shared/reference/tpu_aot.md``):

* **GSPMD**: ``NAME.propagated.hlo`` (XLA's own propagation; where the TPU compiler rejects it, the pre
  module, which XLA propagates itself: the same plan);
* **solve**: ``hloshard solve NAME.pre.hlo --keep-shardings io --deterministic --time-limit T`` (operand
  pins on, the CLI default); with ``--unpinned`` also the same plan written with ``--no-pin-operands``.

Measured per plan: whether it compiles (XLA's message if not), the ring bytes per device of the
collectives the TPU pipeline's SPMD partitioner inserts (raw ``after_tpu-spmd-partitioning`` dump, the
ring formulas of :func:`tests.xla_bytes.collective_bytes`, loop bodies once per trip
(:func:`tests.tpu_oracle.with_trip_counts`); a
collective-permute counts its whole result, self-pairs included), the TPU buffer assignment
(``memory_analysis``: argument + output + temp - alias bytes per device) and the TPU cost model's time
(``optimal_seconds``).  Prints a Markdown table; ``--json`` writes the raw figures.

**Memory** (``--memory``, issue 25): per plan hloshard's predicted peak per device with ``--device
tpu-v5e`` (the one liveness model with the TPU compiler's padded layouts and VMEM rule,
:mod:`hloshard.cost.tpu_layout`, plus the heap a spilled partition-offset scalar makes libtpu report,
:func:`hloshard.cost.tpu_heap.spill_heap_slots`: ``Evaluation.reported_peak``) beside the TPU compiler's ``memory_analysis()`` (argument + output +
temp - alias).  The solve plan is then ``solve --device tpu-v5e`` (no budget);
``--modules DIR`` measures the modules of DIR (held-out cases: ``NAME.pre.hlo``, ``NAME.propagated.hlo``,
``NAME.mesh``) instead of the samples.  Each plan's row also gives libtpu's HBM temp heap (buffer
assignment: its slots of small values, whether it holds more than async headers) and the temp
:func:`hloshard.cost.tpu_layout.reported_temp_bytes` says libtpu reports for it.
``--corpus`` adds the MaxText corpus module on 8 chips (GSPMD: XLA's CPU propagation dump priced by
hloshard, the pre module compiled by libtpu with propagation to outputs; solve: 60 s).  ``--budgets``
also solves each sample under budgets of 200/160/100/80/60/40% of the TPU compiler's GSPMD peak with
``--device tpu-v5e`` and compiles every accepted plan.

Needs an interpreter with jax 0.10.2 and libtpu 0.0.42.* (run it with that venv's python).

Usage::

    python benchmarks/tpu_truth.py [--time-limit 10] [--only NAME] [--unpinned] [--json out.json]
    python benchmarks/tpu_truth.py --memory [--corpus] [--budgets] [--tie-matching] [--only NAME] [--modules DIR] [--json out.json]
    python benchmarks/tpu_truth.py --heap-probes [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
from tests.shared_dir import SHARED  # noqa: E402  (HLOSHARD_SHARED, else <repo>/../shared)
sys.path.insert(0, str(ROOT))
MB = 1e6


def solved_text(pre: pathlib.Path, time_limit: float, pin: bool) -> str:
    from hloshard.autoshard import solve_module
    from hloshard.hlo import parse_module, print_module
    from hloshard.mesh import DeviceMesh

    module = parse_module(pre.read_text(), str(pre))
    mesh = DeviceMesh.for_module(module, "2x4")
    solve_module(module, mesh, keep="io", time_limit=time_limit, workers=1, deterministic=True, pin_operands=pin)
    return print_module(module)


def figures(rec: dict) -> dict:
    from tests.tpu_oracle import with_trip_counts
    from tests.xla_bytes import collective_bytes

    if not rec["ok"]:
        return {"compiles": False, "error": rec["error"].splitlines()[0][:200] if rec["error"] else None}
    m = rec["memory"]
    mb = None
    if rec["partitioned"]:
        mb = sum(c["bytes"] for c in collective_bytes(with_trip_counts(rec["partitioned"]))) / MB
    return {"compiles": True, "error": None, "xla_mb": mb,
            "memory_bytes": m["argument"] + m["output"] + m["temp"] - m["alias"],
            "optimal_seconds": rec["cost"].get("optimal_seconds")}


def run(args) -> list[dict]:
    from tests.tpu_oracle import compile_for_tpu

    names = [p.name[: -len(".pre.hlo")] for p in sorted((ROOT / "samples").glob("*.pre.hlo"))
             if not p.name.endswith(".shardy.pre.hlo")]
    names = [n for n in names if not args.only or n in args.only]
    jobs = []   # (name, plan, text)
    for n in names:
        pre = ROOT / "samples" / f"{n}.pre.hlo"
        t0 = time.monotonic()
        jobs.append((n, "gspmd", (ROOT / "samples" / f"{n}.propagated.hlo").read_text()))
        jobs.append((n, "gspmd-pre", pre.read_text()))
        jobs.append((n, "solve", solved_text(pre, args.time_limit, True)))
        if args.unpinned:
            jobs.append((n, "unpinned", solved_text(pre, args.time_limit, False)))
        print(f"{n}: solved in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    t0 = time.monotonic()
    recs = compile_for_tpu([t for _, _, t in jobs], timeout=3600)
    print(f"TPU compiles: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    by = {(n, p): figures(r) for (n, p, _), r in zip(jobs, recs)}
    rows = []
    for n in names:
        g = by[(n, "gspmd")]
        note = None
        if not g["compiles"]:
            note = f"the TPU compiler rejects the propagated module ({g['error']}); GSPMD measured on the pre module"
            g = by[(n, "gspmd-pre")]
        s = by[(n, "solve")]
        row = {"name": n, "gspmd": g, "solve": s, "unpinned": by.get((n, "unpinned")), "note": note}
        gx, sx = g.get("xla_mb"), s.get("xla_mb")
        row["ratio"] = None if gx is None or sx is None else (sx / gx if gx > 0 else (1.0 if sx == 0 else float("inf")))
        rows.append(row)
    return rows


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(rows, unpinned: bool) -> str:
    head = ("| module | solve compiles | GSPMD plan: TPU MB | solve plan: TPU MB | solve / GSPMD | "
            + ("unpinned: TPU MB | " if unpinned else "")
            + "memory per device, GSPMD / solve (MB) | TPU time, GSPMD / solve (us) |")
    lines = [head, "|---|---|---:|---:|---:|" + ("---:|" if unpinned else "") + "---|---|"]
    for r in rows:
        g, s, u = r["gspmd"], r["solve"], r["unpinned"] or {}
        ok = "yes" if s["compiles"] else f"no: {s['error']}"
        us = lambda x: None if x is None else x * 1e6   # noqa: E731
        cells = [f"`{r['name']}`", ok, _f(g.get("xla_mb")), _f(s.get("xla_mb")),
                 "-" if r["ratio"] is None else f"{r['ratio']:.3f}"]
        if unpinned:
            cells.append(_f(u.get("xla_mb")) if u.get("compiles") else f"no: {u.get('error')}")
        cells.append(f"{_f(g.get('memory_bytes') and g['memory_bytes'] / MB)} / "
                     f"{_f(s.get('memory_bytes') and s['memory_bytes'] / MB)}")
        cells.append(f"{_f(us(g.get('optimal_seconds')), '{:.1f}')} / {_f(us(s.get('optimal_seconds')), '{:.1f}')}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: A probe program for :func:`heap_probes` (run in a child: XLA_FLAGS before jax): ``k`` collectives of
#: one ``kind`` in a ``shard_map`` over the 8 chips, each overlapped by an independent matmul chain (so
#: that the TPU compiler makes it asynchronous), with ``scalar``: a scalar read at a ``partition-id``
#: offset (``dynamic_slice`` at ``axis_index * 8``) added to the one output.  Prints memory_analysis()
#: and the HBM temp heap of libtpu's buffer assignment.
_HEAP_PROBE = r"""
import os, sys, json, re, glob, tempfile
dump = tempfile.mkdtemp()
os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump}"
import numpy as np, jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map
topo = topologies.get_topology_desc("v5e:2x4", "tpu")
mesh = Mesh(np.array(topo.devices).reshape(8), ("x",))
kind, k, scalar = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def body(a, w):
    y = a
    for _ in range(k):
        y = jnp.tanh(y @ w)
        if kind == "all-gather": a = jax.lax.all_gather(a, "x", tiled=True)[: a.shape[0]] * 1.5
        elif kind == "all-reduce": a = jax.lax.psum(a, "x") * 0.5
        elif kind == "reduce-scatter": a = jnp.tile(jax.lax.psum_scatter(a, "x", tiled=True), (8, 1)) * 0.5
        elif kind == "collective-permute": a = jax.lax.ppermute(a, "x", [(j, (j + 1) % 8) for j in range(8)]) * 0.5
        elif kind == "all-to-all": a = jax.lax.all_to_all(a, "x", 0, 0, tiled=True) * 0.5
    if scalar:
        a = a + jax.lax.dynamic_slice_in_dim(y, jax.lax.axis_index("x") * 8, 8, 0).sum()
    return a + y
f = shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
x = jax.ShapeDtypeStruct((8 * 1024, 512), jnp.float32, sharding=NamedSharding(mesh, P("x")))
w = jax.ShapeDtypeStruct((512, 512), jnp.float32, sharding=NamedSharding(mesh, P()))
m = jax.jit(f).lower(x, w).compile().memory_analysis()
ba = sorted(glob.glob(os.path.join(dump, "*after_optimizations-buffer-assignment.txt")))[-1]
heap = {"bytes": 0, "headers": 0, "small_slots": 0, "other_values": 0, "values": []}
for block in open(ba).read().split("\nallocation ")[1:]:
    head = block.split("\n", 1)[0]
    if "preallocated-temp" in head and not re.search(r"color [1-9]", head):
        heap["bytes"] += int(re.search(r"size (\d+)", head).group(1))
        small = set()
        for name, size, off, sh in re.findall(r"value: <\d+ (\S+) @0> \(size=(\d+),offset=(\d+)\): (\S)", block):
            heap["headers" if sh == "(" else "other_values"] += 1
            heap["values"].append(name)
            if int(size) <= 512:
                small.add(int(off))
        heap["small_slots"] += len(small)
print("@@PROBE@@" + json.dumps({"kind": kind, "k": k, "scalar": scalar, "temp": int(m.temp_size_in_bytes), "heap": heap}))
"""


def heap_probes() -> list[dict]:
    """The heap probes (``--heap-probes``): every collective kind, 1 and 3 of them, with and without a
    scalar at a partition offset; per probe libtpu's temp, its HBM heap and the temp
    :func:`hloshard.cost.tpu_layout.reported_temp_bytes` says it reports for that heap."""
    import os
    import subprocess

    from hloshard.cost.tpu_layout import reported_temp_bytes

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    env.pop("XLA_FLAGS", None)
    out = []
    for kind in ("all-gather", "all-reduce", "reduce-scatter", "collective-permute", "all-to-all"):
        for k in (1, 3):
            for scalar in ("0", "1"):
                proc = subprocess.run([sys.executable, "-c", _HEAP_PROBE, kind, str(k), scalar], capture_output=True,
                                      text=True, env=env, timeout=600)
                line = next((x for x in proc.stdout.splitlines() if x.startswith("@@PROBE@@")), None)
                if line is None:
                    out.append({"kind": kind, "k": k, "scalar": scalar == "1", "error": proc.stderr[-300:]})
                    continue
                r = json.loads(line[len("@@PROBE@@"):])
                h = r["heap"]
                r["rule_temp"] = reported_temp_bytes(h["bytes"], h["small_slots"], h["other_values"] > 0)
                out.append(r)
    return out


def heap_probe_table(rows) -> str:
    lines = ["| collectives | scalar at a partition offset | HBM heap B | slots | values in the heap | libtpu temp B | "
             "rule B |", "|---|---|---:|---:|---|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['k']} x {r['kind']} | {r['scalar']} | error: {r['error'][:80]} | | | | |")
            continue
        h = r["heap"]
        names = ", ".join(sorted({re.sub(r"[.\d]+(\{.*\})?$", "", v) for v in h["values"]})) or "-"
        lines.append(f"| {r['k']} x {r['kind']} | {'yes' if r['scalar'] else 'no'} | {h['bytes']:,} | {h['small_slots']} | "
                     f"{names} | {r['temp']:,} | {r['rule_temp']:,}{'' if r['rule_temp'] == r['temp'] else ' **differs**'} |")
    return "\n".join(lines)


DEVICE = "tpu-v5e"
CORPUS_MAXTEXT = SHARED / "corpus" / "xla_benchmarks" / "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo"


def tpu_mesh(module, spec: str, budget: int | None = None):
    """The mesh ``--mesh spec --device tpu-v5e`` gives (memory as the TPU compiler lays it out)."""
    from hloshard.mesh_setup import timed_mesh_from_options

    mesh, _scale, budget = timed_mesh_from_options(module, spec, None, None, None, DEVICE, budget)
    return mesh, budget


def predicted_peak(text: str, name: str, spec: str) -> tuple[int, int]:
    """hloshard's peak per device of the plan ``text`` carries, with ``--device tpu-v5e``: (what libtpu is
    predicted to report, the model's HBM data alone) -- the two differ by the spilled-offset heap
    (``Evaluation.tpu_heap``, :func:`hloshard.cost.tpu_heap.spill_heap_slots`, round 25)."""
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module

    module = parse_module(text, name)
    mesh, _ = tpu_mesh(module, spec)
    ev = evaluate_module(module, mesh).evaluation
    return ev.reported_peak, int(ev.peak_memory)


def solve_tpu(text: str, name: str, spec: str, time_limit: float, budget: int | None = None, tie: bool = False):
    """``solve --device tpu-v5e [--memory-budget B] [--tie matching]`` (pins on): (written text, predicted
    peak as libtpu is predicted to report it, the model's HBM data), or (None, the refusal's message, None).  Without ``budget`` no budget binds (the CLI's default, the
    device's HBM, is not applied: the plan measured is the unconstrained one).  ``tie``: every root output
    tied to the entry parameter of its shape and dtype (``--tie matching``: a training step's updated state
    leaves in its parameter's layout, as a loop runs it; ``hloshard.jax.auto_shard`` ties its state so)."""
    from hloshard.autoshard import solve_module
    from hloshard.autoshard.aliases import matching_ties
    from hloshard.errors import SolveFailed
    from hloshard.hlo import parse_module, print_module

    module = parse_module(text, name)
    if tie:
        module.ties = list(getattr(module, "ties", None) or []) + list(matching_ties(module))
    given = budget
    mesh, budget = tpu_mesh(module, spec, budget)
    if given is None:
        budget = None
        mesh.with_policy(None, None)
    try:
        res = solve_module(module, mesh, keep="io", memory_budget=budget, time_limit=time_limit, workers=1,
                           deterministic=True, pin_operands=True)
    except SolveFailed as exc:
        return None, str(exc).splitlines()[0], None
    ev = (res.written or res).evaluation
    return print_module(module), ev.reported_peak, int(ev.peak_memory)


def heap_allowance(pre_text: str, name: str) -> dict:
    """What a budget allows for libtpu's heap on the module ``pre_text`` (:mod:`hloshard.cost.tpu_heap`):
    ``heap_bound`` (:func:`~hloshard.cost.tpu_heap.heap_slot_bound`, slots), ``fits_vmem``
    (:func:`~hloshard.cost.tpu_heap.temporaries_fit_vmem`); with them :func:`_envelope` gives the budget
    the model's margin needs for a plan."""
    from hloshard.cost.tpu_heap import tpu_memory_device
    from hloshard.hlo import parse_module

    dev = tpu_memory_device(DEVICE, parse_module(pre_text, name))
    return {"heap_bound": dev.heap_slots, "fits_vmem": dev.temporaries_fit_vmem}


def _envelope(r) -> int | None:
    """The budget the model's margin needs for row ``r``'s plan (:func:`hloshard.cost.memory.
    budget_for_model_limit` of its predicted peak on its module's :class:`~hloshard.cost.tpu_heap.
    TpuMemoryDevice`): libtpu's peak must be at most this for any budget it accepts to be kept."""
    from hloshard.cost.memory import budget_for_model_limit
    from hloshard.cost.tpu_heap import TpuMemoryDevice

    data = r.get("data", r.get("predicted"))   # the model's data: what a budget's check compares
    if data is None or r.get("heap_bound") is None:
        return None
    # the written plan's device (cost.tpu_heap.written_memory_device): the data margin dropped where the
    # plan's own temporaries fit the VMEM, as the budget's check of the written module reads it
    fits = r["fits_vmem"] or bool(r.get("written_fits"))
    return budget_for_model_limit(data, TpuMemoryDevice(DEVICE, r["heap_bound"], fits))


def _written_fits(text: str | None, name: str) -> bool | None:
    """:func:`hloshard.cost.tpu_heap.written_temporaries_fit_vmem` of a plan's text (None without one)."""
    from hloshard.cost.tpu_heap import written_temporaries_fit_vmem
    from hloshard.hlo import parse_module

    return None if not text else written_temporaries_fit_vmem(parse_module(text, name), DEVICE)


def _total(rec) -> int | None:
    m = rec.get("memory") if rec.get("ok") else None
    return None if m is None else m["argument"] + m["output"] + m["temp"] - m["alias"]


def _take(row: dict, rec: dict) -> None:
    """Into ``row``: the TPU compiler's peak (``tpu``), its parts, its HBM heap (buffer assignment) and
    the temp :func:`hloshard.cost.tpu_layout.reported_temp_bytes` says libtpu reports for that heap
    (``rule_temp``; ``rule_ok``: equal to ``memory_analysis()``'s temp)."""
    from hloshard.cost.tpu_layout import reported_temp_bytes

    from tests.tpu_oracle import offset_scalar_spills

    row["tpu"], row["tpu_parts"], row["heap"] = _total(rec), rec.get("memory"), rec.get("hbm_heap")
    hosts = rec.get("offset_scalars")
    if hosts:
        # which offset scalars libtpu put in its heap, and which the placement rule puts there when
        # replayed on libtpu's own schedule (tests.tpu_oracle.offset_scalar_spills)
        row["spills"] = {"libtpu": sorted(v["name"] for v in hosts["heap"]),
                         "replay": sorted(offset_scalar_spills(hosts)),
                         # every offset scalar and the instruction of the compiled text it serves (op_name)
                         "scalars": sorted({(v["name"], v["op_name"] or "") for out in hosts["outputs"]
                                            for v in out["values"] if v["scalar"]}
                                           | {(v["name"], v["op_name"] or "") for v in hosts["heap"]})}
    h, m = row["heap"], row["tpu_parts"]
    if h and m:
        row["rule_temp"] = reported_temp_bytes(h["bytes"], h["small_slots"], h["other_values"] > 0)
        row["rule_ok"] = row["rule_temp"] == m["temp"]


def memory_run(args) -> list[dict]:
    """Rows ``{name, plan, predicted, tpu, error}`` (bytes per device) for every sample's GSPMD and solve
    plan, and with ``args.corpus`` MaxText's."""
    from tests.tpu_oracle import compile_for_tpu

    src = pathlib.Path(args.modules) if getattr(args, "modules", None) else ROOT / "samples"
    names = [p.name[: -len(".pre.hlo")] for p in sorted(src.glob("*.pre.hlo"))
             if not p.name.endswith(".shardy.pre.hlo")]
    names = [n for n in names if not args.only or n in args.only]
    rows = []
    for n in names:
        t0 = time.monotonic()
        pre = (src / f"{n}.pre.hlo").read_text()
        prop = (src / f"{n}.propagated.hlo").read_text()
        mesh_file = src / f"{n}.mesh"
        spec = mesh_file.read_text().strip() if mesh_file.exists() else "2x4"
        written, spred, sdata = solve_tpu(pre, n, spec, args.time_limit, tie=getattr(args, "tie_matching", False))
        bound = heap_allowance(pre, n)
        gpred, gdata = predicted_peak(prop, n, spec)
        rows.append({"name": n, "plan": "GSPMD", "predicted": gpred, "data": gdata, "text": prop,
                     "fallback": pre, **bound})
        rows.append({"name": n, "plan": "solve", "predicted": spred if written else None, "data": sdata,
                     "text": written, "error": None if written else spred, **bound})
        print(f"{n}: hloshard side {time.monotonic() - t0:.0f} s", file=sys.stderr)
    for r in rows:
        r["written_fits"] = _written_fits(r.get("text"), r["name"])
    jobs = [r for r in rows if r.get("text")]
    for r, rec in zip(jobs, compile_for_tpu([r["text"] for r in jobs], timeout=3600)):
        _take(r, rec)
        if not rec["ok"]:
            r["tpu_error"] = rec["error"].splitlines()[0][:200]
    # a propagated module the TPU compiler rejects: the pre module with propagation to outputs (same plan)
    redo = [r for r in rows if r.get("tpu") is None and r.get("fallback")]
    if redo:
        for r, rec in zip(redo, compile_for_tpu([r["fallback"] for r in redo], timeout=3600, propagate_outputs=True)):
            _take(r, rec)
            r["note"] = "TPU: the pre module with propagation to outputs (the propagated file is rejected)"
    if args.corpus and CORPUS_MAXTEXT.exists():
        rows += maxtext_rows(args)
    for r in rows:
        r.pop("text", None)
        r.pop("fallback", None)
    return rows


def maxtext_rows(args) -> list[dict]:
    """MaxText on 8 chips: GSPMD (XLA's CPU propagation of the pre module, priced by hloshard; libtpu
    compiles the pre module with propagation to outputs), ``solve --device tpu-v5e`` (60 s) and the same
    with the CLI's default budget under ``--device tpu-v5e`` (the chip's HBM), compiled by libtpu."""
    from hloshard.hlo import parse_module
    from hloshard.xla_compare import run_xla
    from tests.tpu_oracle import compile_for_tpu

    text = CORPUS_MAXTEXT.read_text()
    t0 = time.monotonic()
    res = run_xla([text], 8, propagated=True, timeout=3600, crash_as_error=True)[0]
    out = []
    bound = heap_allowance(text, "maxtext")
    g = {"name": "maxtext_train_step", "plan": "GSPMD", "predicted": None, **bound}
    if res.propagated:
        g["predicted"], g["data"] = predicted_peak(res.propagated, "maxtext", "8")
        g["written_fits"] = _written_fits(res.propagated, "maxtext")
    rec = compile_for_tpu([text], timeout=3600, propagate_outputs=True)[0]
    _take(g, rec)
    out.append(g)
    written, spred, sdata = solve_tpu(text, "maxtext", "8", 60.0)
    s = {"name": "maxtext_train_step", "plan": "solve", "predicted": spred if written else None, "data": sdata,
         "error": None if written else spred, **bound}
    if written:
        s["written_fits"] = _written_fits(written, "maxtext")
        rec = compile_for_tpu([written], timeout=3600)[0]
        _take(s, rec)
    out.append(s)
    # the CLI's default budget with --device tpu-v5e: the chip's HBM; an accepted plan must fit under libtpu
    from hloshard.devices import get_profile

    hbm = get_profile(DEVICE).hbm_bytes
    written, spred, sdata = solve_tpu(text, "maxtext", "8", 60.0, hbm)
    b = {"name": "maxtext_train_step", "plan": f"solve, budget {hbm / MB:,.0f} MB (HBM)",
         "predicted": spred if written else None, "data": sdata, "error": None if written else spred, "budget": hbm, **bound}
    if written:
        b["written_fits"] = _written_fits(written, "maxtext")
        rec = compile_for_tpu([written], timeout=3600)[0]
        _take(b, rec)
    out.append(b)
    print(f"maxtext: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return out


def budget_run(args, rows) -> list[dict]:
    """Per sample, ``solve --device tpu-v5e --memory-budget B`` for B = 200/160/100/80/60/40% of the
    TPU compiler's GSPMD peak; every accepted plan compiled by libtpu."""
    from tests.tpu_oracle import compile_for_tpu

    out = []
    for r in rows:
        if r["plan"] != "GSPMD" or r.get("tpu") is None or r["name"] == "maxtext_train_step":
            continue
        src = pathlib.Path(args.modules) if getattr(args, "modules", None) else ROOT / "samples"
        pre = (src / f"{r['name']}.pre.hlo").read_text()
        mesh_file = src / f"{r['name']}.mesh"
        spec = mesh_file.read_text().strip() if mesh_file.exists() else "2x4"
        for share in (2.0, 1.6, 1.0, 0.8, 0.6, 0.4):
            b = int(r["tpu"] * share)
            written, msg, _data = solve_tpu(pre, r["name"], spec, min(args.time_limit, 5.0), b,
                                            tie=getattr(args, "tie_matching", False))
            print(f"{r['name']} {share:.0%}: {'accepted' if written else 'refused'}", file=sys.stderr)
            out.append({"name": r["name"], "share": share, "budget": b, "text": written,
                        "predicted": msg if written else None, "refusal": None if written else msg})
    jobs = [o for o in out if o["text"]]
    for o, rec in zip(jobs, compile_for_tpu([o["text"] for o in jobs], timeout=3600)):
        _take(o, rec)
    for o in out:
        o.pop("text", None)
    return out


def memory_table(rows) -> str:
    """The ``--memory`` table: per plan the predicted peak, libtpu's, their ratio, libtpu's temp, its HBM
    heap (slots; the partition-offset scalars its buffer assignment placed in entry outputs and in the
    heap), the temp :func:`hloshard.cost.tpu_layout.reported_temp_bytes` gives for that heap, and the
    predicted peak plus libtpu's temp over libtpu's peak (1.000: libtpu's figure is the model's HBM data
    plus its reported heap; module docstring of :mod:`hloshard.cost.tpu_layout`, "which heap is reported")."""
    lines = ["| module | plan | predicted MB | of which spilled heap MB | TPU compiler MB | ratio | TPU temp MB | HBM heap: slots, more than headers | "
             "offset scalars: in outputs, in the heap | heap's scalars replayed on libtpu's schedule | "
             "temp by the heap rule MB | (model data + TPU temp) / TPU | heap-slot bound (fits VMEM: module unsharded, "
             "written plan) | "
             "TPU / smallest budget accepting P |",
             "|---|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|"]
    for r in rows:
        p, t = r.get("predicted"), r.get("tpu")
        ratio = "-" if not p or not t else f"{p / t:.3f}"
        h, m = r.get("heap"), r.get("tpu_parts")
        heap = "-" if not h else f"{h['small_slots']}, {'yes' if h['other_values'] else 'no'}"
        scal = "-" if not h or "scalars_in_outputs" not in h else f"{h['scalars_in_outputs']}, {h['other_values']}"
        rule = "-" if r.get("rule_temp") is None else _f(r["rule_temp"] / MB) + ("" if r["rule_ok"] else " **differs**")
        d = r.get("data", p)
        plus = "-" if not d or not t or not m else f"{(d + m['temp']) / t:.3f}"
        sp = r.get("spills")
        replay = "-" if not sp else ("same" if sp["libtpu"] == sp["replay"] else
                                     f"**differs**: libtpu {', '.join(sp['libtpu']) or 'none'}; "
                                     f"replay {', '.join(sp['replay']) or 'none'}")
        env = _envelope(r)
        wf = r.get("written_fits")
        bound = "-" if r.get("heap_bound") is None else (f"{r['heap_bound']} ({'yes' if r['fits_vmem'] else 'no'}"
                                                        f"{'' if wf is None else ', written ' + ('yes' if wf else 'no')})")
        envr = "-" if not env or not t else f"{t / env:.3f}" + ("" if t <= env else " **OVER**")
        hp = "-" if not p or d is None else _f((p - d) / MB)
        lines.append(f"| `{r['name']}` | {r['plan']} | {_f(p and p / MB)} | {hp} | {_f(t and t / MB)} | {ratio} | "
                     f"{_f(m and m['temp'] / MB)} | {heap} | {scal} | {replay} | {rule} | {plus} | {bound} | {envr} |")
    spilled = [r for r in rows if r.get("heap") and r.get("tpu_parts") and r["heap"]["other_values"]]
    kept = [r for r in rows if r.get("heap") and r.get("tpu_parts") and not r["heap"]["other_values"]]
    lines.append(f"\n- no offset scalar in the heap (headers only): temp 0 on {sum(r['tpu_parts']['temp'] == 0 for r in kept)}"
                 f" of {len(kept)} plans; a scalar in the heap: temp > 0 on "
                 f"{sum(r['tpu_parts']['temp'] > 0 for r in spilled)} of {len(spilled)}")
    ok = [r for r in rows if r.get("predicted") and r.get("tpu")]
    within = [r for r in ok if abs(r["predicted"] / r["tpu"] - 1) <= 0.15]
    lines.append(f"\n- within 15% of the TPU compiler: {len(within)} of {len(ok)} plans")
    replayed = [r for r in rows if r.get("spills")]
    lines.append(f"- offset scalars in libtpu's heap = the placement rule replayed on libtpu's schedule "
                 f"(tests.tpu_oracle.offset_scalar_spills): {sum(r['spills']['libtpu'] == r['spills']['replay'] for r in replayed)}"
                 f" of {len(replayed)} plans")
    ruled = [r for r in rows if r.get("rule_temp") is not None]
    lines.append(f"- libtpu's temp equal to cost.tpu_layout.reported_temp_bytes of its HBM heap: "
                 f"{sum(1 for r in ruled if r['rule_ok'])} of {len(ruled)} plans")
    if ok:
        rs = [r["predicted"] / r["tpu"] for r in ok]
        lines.append(f"- ratio predicted / TPU: {min(rs):.3f} .. {max(rs):.3f}")
    bounded = [r for r in rows if r.get("heap") and r.get("heap_bound") is not None]
    if bounded:
        lines.append(f"- libtpu's heap slots within the module's bound (cost.tpu_heap.heap_slot_bound): "
                     f"{sum(r['heap']['small_slots'] <= r['heap_bound'] for r in bounded)} of {len(bounded)} plans "
                     f"(slots / bound {min(r['heap']['small_slots'] / r['heap_bound'] for r in bounded):.2f} .. "
                     f"{max(r['heap']['small_slots'] / r['heap_bound'] for r in bounded):.2f})")
    env = [(r, _envelope(r)) for r in ok]
    env = [(r, e) for r, e in env if e]
    if env:
        lines.append(f"- libtpu's peak within the smallest budget that accepts the plan's predicted peak "
                     f"(cost.memory.budget_for_model_limit): {sum(r['tpu'] <= e for r, e in env)} of {len(env)} plans")
    return "\n".join(lines)


def budget_table(out, rows) -> str:
    """Each budget's outcome; a refusal's stated bound ("under XLA every plan needs at least N bytes")
    against the smallest TPU peak among the module's GSPMD and solve plans and its accepted plans."""
    import re

    lines = ["| module | share of TPU GSPMD peak | budget MB | outcome |", "|---|---:|---:|---|"]
    for o in out:
        peaks = [r["tpu"] for r in rows if r["name"] == o["name"] and r.get("tpu")]
        peaks += [x["tpu"] for x in out if x["name"] == o["name"] and x.get("tpu")]
        if o.get("refusal"):
            m = re.search(r"at least ([\d,]+) bytes", o["refusal"])
            if m and peaks:
                bound = int(m.group(1).replace(",", ""))
                what = (f"refused, stated bound {bound / min(peaks):.3f} of the smallest TPU peak"
                        + ("" if bound <= min(peaks) else " **ABOVE**"))
            else:
                what = "refused (no bound stated): " + o["refusal"][:60]
        else:
            t = o.get("tpu")
            what = "accepted; TPU compiler " + ("did not compile" if t is None else
                                                f"{t / MB:.3f} MB = {t / o['budget']:.3f} of B" +
                                                ("" if t <= o["budget"] else " **BROKEN**"))
        lines.append(f"| `{o['name']}` | {o['share']:.0%} | {o['budget'] / MB:.3f} | {what} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="solve time limit per module (s)")
    ap.add_argument("--only", action="append", help="only these samples (repeatable)")
    ap.add_argument("--unpinned", action="store_true", help="also the plan written with --no-pin-operands")
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--memory", action="store_true", help="predicted peak (--device tpu-v5e) vs memory_analysis()")
    ap.add_argument("--corpus", action="store_true", help="with --memory: also MaxText (8 chips)")
    ap.add_argument("--budgets", action="store_true", help="with --memory: budgets at 100/80/60/40%% of GSPMD's peak")
    ap.add_argument("--tie-matching", action="store_true", help="with --memory: solve (and --budgets) with "
                    "--tie matching (each root output in the layout of the parameter of its shape: a loop's plan)")
    ap.add_argument("--heap-probes", action="store_true", help="one-collective probes: libtpu's HBM heap of async "
                    "headers and its reported temp beside cost.tpu_layout.reported_temp_bytes")
    ap.add_argument("--modules", help="with --memory: the modules of this directory (NAME.pre.hlo, NAME.propagated.hlo, "
                    "NAME.mesh: held-out cases such as benchmarks/attention_heads.py --out writes) instead of samples/")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import tpu_available

    why = tpu_available()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    if args.heap_probes:
        probes = heap_probes()
        print(heap_probe_table(probes))
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(probes, indent=1))
        return 0
    if args.memory:
        rows = memory_run(args)
        print(memory_table(rows))
        budgets = budget_run(args, rows) if args.budgets else []
        if budgets:
            print()
            print(budget_table(budgets, rows))
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps({"rows": rows, "budgets": budgets}, indent=1))
        return 0
    rows = run(args)
    print(table(rows, args.unpinned))
    le = [r for r in rows if r["ratio"] is not None and r["ratio"] <= 1.0 + 1e-9]
    comp = [r for r in rows if r["solve"]["compiles"]]
    print(f"\n- solved module compiles for TPU ({'v5e:2x4'}, ahead of time): {len(comp)} of {len(rows)}")
    print(f"- solve <= GSPMD under XLA-TPU: {len(le)} of {sum(1 for r in rows if r['ratio'] is not None)}")
    for r in rows:
        if r["note"]:
            print(f"- `{r['name']}`: {r['note']}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
