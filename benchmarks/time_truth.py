#!/usr/bin/env python3
"""Seconds: hloshard's flops, HBM bytes and step time per device beside XLA's own cost analysis.

For every sample (``samples/NAME.pre.hlo``, mesh 2x4) and, with ``--corpus``, the MaxText train step of
``../shared/corpus/xla_benchmarks`` (mesh 8), two plans:

* **GSPMD**: ``NAME.propagated.hlo`` (XLA's own sharding propagation; the corpus module: not run, its
  propagated form is not stored);
* **solve**: ``solve_module(NAME.pre.hlo, --device tpu-v5e, keep io, deterministic, --time-limit T,
  pin operands)`` (what ``hloshard solve --device tpu-v5e`` writes),
  the module as written.

For each plan (the module text, compiled for 8 partitions):

* hloshard (``--device tpu-v5e``, :mod:`hloshard.commands.timing`): flops per device, HBM bytes per
  device (the roofline's), the roofline's compute seconds, communication + resharding seconds, the
  no-overlap step time;
* XLA CPU: ``compiled.cost_analysis()`` flops and bytes accessed per device (:func:`hloshard.xla_cost.xla_cost`);
* the TPU compiler ahead of time (``v5e:2x4``, libtpu in ``--tpu-python``;
  :func:`hloshard.xla_cost.tpu_cost`): flops, bytes accessed, ``optimal_seconds`` with the -1 of each
  ``ConcatBitcast`` added back (:attr:`hloshard.xla_cost.XlaCost.estimate_seconds`; the column "TPU
  estimate s").

``--probe`` first runs single-operation modules on the TPU compiler to show what ``optimal_seconds``
counts (HBM bytes at a fixed bandwidth; MXU time; ICI time or not).

Usage::

    python benchmarks/time_truth.py [--only NAME] [--time-limit 10] [--probe] [--corpus] [--json out.json]
                                    [--device tpu-v5p] [--plans GSPMD]

``--device`` prices hloshard's side on another TPU profile and compiles for its 8-chip topology
(:data:`TOPOLOGIES`); solve's plans are still solved with ``--device DEVICE``. ``--plans GSPMD`` compares
GSPMD's plans only (no solve).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from hloshard.devices import get_profile  # noqa: E402  (after the path insert)
CORPUS = ROOT.parent / "shared" / "corpus" / "xla_benchmarks"
MAXTEXT = CORPUS / "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo"
#: a Python with jax 0.10.2 and libtpu 0.0.42.* (../shared/reference/tpu_aot.md), e.g. a venv of its own
TPU_PYTHON = os.environ.get("HLOSHARD_TPU_PYTHON", "")
V5E_HBM = get_profile("tpu-v5e").hbm_bandwidth          # bytes/s (hloshard.devices, the one place)
V5E_BF16 = get_profile("tpu-v5e").peak_flops["bf16"]    # FLOP/s

#: the 8-chip TPU topology the TPU compiler compiles for, per device profile
TOPOLOGIES = {"tpu-v5e": "v5e:2x4", "tpu-v5p": "v5p:2x2x2", "tpu-v6e": "v6e:2x4", "tpu-v4": "v4:2x2x2"}

#: single-operation probes of what optimal_seconds counts (8 chips of v5e:2x4)
PROBES = {
    "add f32[8192,8192] (HBM only)": """HloModule add, num_partitions=8
ENTRY e {
  a = f32[8192,8192] parameter(0), sharding={devices=[8,1]<=[8]}
  b = f32[8192,8192] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT c = f32[8192,8192] add(a, b), sharding={devices=[8,1]<=[8]}
}""",
    "all-gather bf16[4096,4096] over 8 (ICI 29 MB/device)": """HloModule ag, num_partitions=8
ENTRY e {
  a = bf16[4096,4096] parameter(0), sharding={devices=[8,1]<=[8]}
  ROOT c = bf16[4096,4096] custom-call(a), custom_call_target="Sharding", sharding={replicated}
}""",
    "all-reduce bf16[4096,4096] over 8 (partial dot sums)": """HloModule ar, num_partitions=8
ENTRY e {
  a = bf16[4096,4096] parameter(0), sharding={devices=[1,8]<=[8]}
  b = bf16[4096,4096] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT d = bf16[4096,4096] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}""",
    "dot bf16[512,4096]x[4096,4096] per device (MXU)": """HloModule dot, num_partitions=8
ENTRY e {
  a = bf16[4096,4096] parameter(0), sharding={devices=[8,1]<=[8]}
  b = bf16[4096,4096] parameter(1), sharding={replicated}
  ROOT d = bf16[4096,4096] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[8,1]<=[8]}
}""",
    "dot bf16[8192,8192]x[8192,8192] per device (MXU-bound)": """HloModule bigdot, num_partitions=8
ENTRY e {
  a = bf16[8192,8192] parameter(0), sharding={replicated}
  b = bf16[8192,8192] parameter(1), sharding={replicated}
  ROOT d = bf16[8192,8192] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}""",
}


def cases(only, corpus: bool) -> list[dict]:
    out = []
    for pre in sorted((ROOT / "samples").glob("*.pre.hlo")):
        if pre.name.endswith(".shardy.pre.hlo"):
            continue
        name = pre.name[: -len(".pre.hlo")]
        if only and name not in only:
            continue
        out.append({"name": name, "pre": pre, "propagated": pre.with_name(f"{name}.propagated.hlo"), "mesh": "2x4"})
    if corpus and MAXTEXT.exists() and (not only or "maxtext_train_step" in only):
        out.append({"name": "maxtext_train_step", "pre": MAXTEXT, "propagated": None, "mesh": "8"})
    return out


def hloshard_side(text: str, mesh: str, device: str = "tpu-v5e") -> dict:
    from hloshard.autoshard import evaluate_module
    from hloshard.commands.options import timed_mesh_from_options
    from hloshard.commands.timing import plan_timing
    from hloshard.hlo import parse_module

    module = parse_module(text)
    dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, device)
    res = evaluate_module(module, dmesh)
    t = plan_timing(res, module, scale)
    b = t["step_time"]["breakdown_s"]
    return {"flops": t["flops_per_device"], "bytes": t["hbm_bytes_per_device"], "compute_s": b["compute_s"],
            "comm_s": b["communication_s"] + b["resharding_s"], "step_s": t["estimated_step_time_s"]}


def solved_text(pre: pathlib.Path, mesh: str, time_limit: float, budget_is_hbm: bool = True,
                device: str = "tpu-v5e") -> str:
    from hloshard.autoshard import solve_module
    from hloshard.commands.options import timed_mesh_from_options
    from hloshard.hlo import print_module
    from hloshard.load import load_module

    module = load_module(str(pre))
    dmesh, _, budget = timed_mesh_from_options(module, mesh, None, None, None, device)
    budget = budget if budget_is_hbm else None
    solve_module(module, dmesh, keep="io", memory_budget=budget, time_limit=time_limit, deterministic=True,
                 pin_operands=True)   # as `hloshard solve` (--pin-operands is its default)
    return print_module(module)


def probe(python: str) -> list[dict]:
    from hloshard.xla_cost import tpu_cost

    rows = []
    for label, costs in zip(PROBES, tpu_cost(list(PROBES.values()), 8, "v5e:2x4", python)):
        rows.append({"probe": label, **costs.to_json()})
    return rows


def run(args) -> list[dict]:
    from hloshard.xla_cost import tpu_cost, xla_cost

    rows = []
    for case in cases(args.only, args.corpus):
        plans = []
        if case["propagated"] is not None and case["propagated"].exists():
            plans.append(("GSPMD", case["propagated"].read_text()))
        t0 = time.monotonic()
        try:
            if "solve" in args.plans:
                plans.append(("solve", solved_text(case["pre"], case["mesh"], args.time_limit, not args.no_budget,
                                                   args.device)))
        except Exception as exc:  # noqa: BLE001 - report and go on
            rows.append({"name": case["name"], "plan": "solve", "error": f"{type(exc).__name__}: {exc}"})
        plans = [p for p in plans if p[0] in args.plans]
        print(f"# {case['name']}: plans ready ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
        texts = [t for _, t in plans]
        cpu = xla_cost(texts, 8)
        tpu = tpu_cost(texts, 8, TOPOLOGIES[args.device], args.tpu_python) if args.tpu_python else [None] * len(texts)
        for (plan, text), c, t in zip(plans, cpu, tpu):
            try:
                mine = hloshard_side(text, case["mesh"], args.device)
            except Exception as exc:  # noqa: BLE001
                mine = {"error": f"{type(exc).__name__}: {exc}"}
            rows.append({"name": case["name"], "plan": plan, "hloshard": mine, "cpu": c.to_json(),
                         "tpu": None if t is None else t.to_json()})
    return rows


def _g(x, d=3) -> str:
    return "-" if x is None else f"{x:.{d}g}"


def _r(a, b) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}"


def table(rows) -> str:
    head = ("| module | plan | flops hloshard | XLA CPU | TPU | ratio (CPU) | bytes hloshard | XLA CPU | TPU | "
            "ratio (CPU) | ratio (TPU) | roofline s | TPU estimate s | roofline / estimate | comm s | step s |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['plan']} | error: {r['error'][:80]} |" + " |" * 14)
            continue
        h, c, t = r["hloshard"], r["cpu"], r["tpu"] or {}
        if "error" in h:
            lines.append(f"| {r['name']} | {r['plan']} | hloshard error: {h['error'][:80]} |" + " |" * 14)
            continue
        lines.append(
            f"| {r['name']} | {r['plan']} | {_g(h['flops'])} | {_g(c.get('flops'))} | {_g(t.get('flops'))} | "
            f"{_r(h['flops'], c.get('flops'))} | {_g(h['bytes'])} | {_g(c.get('bytes_accessed'))} | "
            f"{_g(t.get('bytes_accessed'))} | {_r(h['bytes'], c.get('bytes_accessed'))} | "
            f"{_r(h['bytes'], t.get('bytes_accessed'))} | {_g(h['compute_s'])} | {_g(t.get('estimate_seconds', t.get('optimal_seconds')))} | "
            f"{_r(h['compute_s'], t.get('estimate_seconds', t.get('optimal_seconds')))} | {_g(h['comm_s'])} | {_g(h['step_s'])} |")
    return "\n".join(lines)


def probe_table(rows) -> str:
    lines = ["| probe (v5e:2x4, per chip) | flops | bytes accessed | optimal_seconds | bytes / 819 GB/s | "
             "flops / 197 TF/s | optimal x 819 GB/s / bytes |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        b, f, o = r.get("bytes_accessed"), r.get("flops"), r.get("optimal_seconds")
        lines.append(f"| {r['probe']} | {_g(f)} | {_g(b)} | {_g(o)} | {_g(b / V5E_HBM if b else None)} | "
                     f"{_g(f / V5E_BF16 if f else None)} | {_g(o * V5E_HBM / b if o and b else None)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--corpus", action="store_true", help="also the MaxText corpus train step (mesh 8)")
    ap.add_argument("--probe", action="store_true", help="single-op TPU probes of what optimal_seconds counts")
    ap.add_argument("--tpu-python", default=TPU_PYTHON if TPU_PYTHON and pathlib.Path(TPU_PYTHON).exists() else None,
                    help="a Python with jax and libtpu (default: $HLOSHARD_TPU_PYTHON when set)")
    ap.add_argument("--no-budget", action="store_true",
                    help="solve without the device's HBM as memory budget (the MaxText step needs more than a "
                         "v5e's 16 GiB per chip)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="tpu-v5e", choices=sorted(TOPOLOGIES),
                    help="the TPU profile hloshard prices with and whose 8-chip topology the TPU compiler targets")
    ap.add_argument("--plans", nargs="*", default=["GSPMD", "solve"], choices=["GSPMD", "solve"])
    args = ap.parse_args(argv)
    out: dict = {}
    if args.probe and args.tpu_python:
        out["probes"] = probe(args.tpu_python)
        print(probe_table(out["probes"]), flush=True)
        print()
    out["rows"] = run(args)
    print(table(out["rows"]))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
