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

* hloshard (``--device tpu-v5e``, :mod:`hloshard.timing`): flops per device, HBM bytes per
  device (the roofline's), the roofline's compute seconds, communication + resharding seconds, the
  no-overlap step time;
* XLA CPU: ``compiled.cost_analysis()`` flops and bytes accessed per device (:func:`hloshard.xla_cost.xla_cost`);
* the TPU compiler ahead of time (``v5e:2x4``, libtpu in ``--tpu-python``;
  :func:`hloshard.xla_cost.tpu_cost`): flops, bytes accessed, ``optimal_seconds`` with the -1 of each
  ``ConcatBitcast`` added back (:attr:`hloshard.xla_cost.XlaCost.estimate_seconds`; the column "TPU
  estimate s"), beside hloshard's like-for-like figure (roofline plus the collectives' HBM seconds),
  per trip and with every loop body once (:func:`roofline_seconds_once`: what the estimate counts).

``--chips`` (round 23) compiles single-kernel modules for every topology and prints the rates the estimate
charges; a second table gives each plan's like / estimate beside the estimate less the optimised
program's copies of intermediates (:func:`msa_copy_seconds`).

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
import dataclasses
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
from tests.shared_dir import SHARED  # noqa: E402  (HLOSHARD_SHARED, else <repo>/../shared)
from hloshard.devices import get_profile  # noqa: E402  (after the path insert)
CORPUS = SHARED / "corpus" / "xla_benchmarks"
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

_ADD = "%add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
_G8 = "replica_groups={{0,1,2,3,4,5,6,7}}"
_G2 = "replica_groups={{0,1},{2,3},{4,5},{6,7}}"


def _collective_probe(op: str, in_rows: int, out_rows: int, attrs: str) -> str:
    """A per-device program of one collective of f32[in_rows,4096] (no shardings: manual collectives)."""
    head = _ADD if "to_apply" in attrs else ""
    return (f"HloModule {op}, num_partitions=8\n{head}ENTRY e {{\n  a = f32[{in_rows},4096] parameter(0)\n"
            f"  ROOT c = f32[{out_rows},4096] {op}(a), channel_id=1, {attrs}\n}}")


#: round 10: collectives alone (what optimal_seconds charges a collective), and the smallest kernels
PROBES.update({
    "all-gather f32[1024,4096] x8 (16 MB in, 134 MB out)":
        _collective_probe("all-gather", 1024, 8192, f"{_G8}, dimensions={{0}}, use_global_device_ids=true"),
    "all-gather f32[1024,4096] x2 (groups of 2)":
        _collective_probe("all-gather", 1024, 2048, f"{_G2}, dimensions={{0}}, use_global_device_ids=true"),
    "all-reduce f32[1024,4096] over 8 (alone)":
        _collective_probe("all-reduce", 1024, 1024, f"{_G8}, to_apply=%add, use_global_device_ids=true"),
    "all-reduce f32[8,4096] over 8 (128 KB)":
        _collective_probe("all-reduce", 8, 8, f"{_G8}, to_apply=%add, use_global_device_ids=true"),
    "all-reduce f32[1024,4096] in groups of 2":
        _collective_probe("all-reduce", 1024, 1024, f"{_G2}, to_apply=%add, use_global_device_ids=true"),
    "reduce-scatter f32[2048,4096] in groups of 2":
        _collective_probe("reduce-scatter", 2048, 1024, f"{_G2}, dimensions={{0}}, to_apply=%add, "
                                                        "use_global_device_ids=true"),
    "all-to-all f32[8192,4096] over 8": _collective_probe("all-to-all", 8192, 8192, f"{_G8}, dimensions={{0}}"),
    "collective-permute f32[1024,4096] ring shift": _collective_probe(
        "collective-permute", 1024, 1024,
        "source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}"),
    "add f32[2,128] (3 KB: a fixed cost per kernel?)": """HloModule tiny, num_partitions=8
ENTRY e {
  a = f32[2,128] parameter(0)
  b = f32[2,128] parameter(1)
  ROOT c = f32[2,128] add(a, b)
}""",
    "add f32[8,100] (minor dim padded to 128 lanes?)": """HloModule pad, num_partitions=8
ENTRY e {
  a = f32[8,100] parameter(0)
  b = f32[8,100] parameter(1)
  ROOT c = f32[8,100] add(a, b)
}""",
})


def _chip_probe_text(body: str, params: str) -> str:
    return f"HloModule chip, num_partitions=8\n%add {{ x = f32[] parameter(0)\n y = f32[] parameter(1)\n " \
           f"ROOT s = f32[] add(x, y) }}\nENTRY e {{\n{params}{body}\n}}"


def _chip_dot(m: int, k: int, n: int, dt: str = "bf16") -> str:
    return _chip_probe_text(f"  ROOT d = {dt}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                            f"  a = {dt}[{m},{k}] parameter(0)\n  b = {dt}[{k},{n}] parameter(1)\n")


_X = "  a = f32[16384,1024] parameter(0)\n"
#: round 23: one kind of kernel alone, per-device programs, compiled for each 8-chip topology of
#: :data:`TOPOLOGIES` (``--chips``): what ``optimal_seconds`` charges per byte and per flop on each chip
CHIP_PROBES = {
    "add f32[16384,1024]": _chip_probe_text("  ROOT c = f32[16384,1024] add(a, b)", _X + "  b = f32[16384,1024] parameter(1)\n"),
    "exponential f32[16384,1024]": _chip_probe_text("  ROOT c = f32[16384,1024] exponential(a)", _X),
    "reduce rows f32[16384,1024]": _chip_probe_text(
        "  z = f32[] constant(0)\n  ROOT r = f32[16384] reduce(a, z), dimensions={1}, to_apply=%add", _X),
    "transpose f32[16384,1024]": _chip_probe_text("  ROOT t = f32[1024,16384] transpose(a), dimensions={1,0}", _X),
    "dot bf16 1024x1024x1024": _chip_dot(1024, 1024, 1024),
    "dot bf16 4096x512x2048": _chip_dot(4096, 512, 2048),
    "dot bf16 4096x4096x4096": _chip_dot(4096, 4096, 4096),
    "dot bf16 8192x8192x8192": _chip_dot(8192, 8192, 8192),
    "dot f32 8192x8192x8192": _chip_dot(8192, 8192, 8192, "f32"),
    "all-reduce f32[1024,4096] over 8": PROBES["all-reduce f32[1024,4096] over 8 (alone)"],
    "all-gather f32[1024,4096] x8": PROBES["all-gather f32[1024,4096] x8 (16 MB in, 134 MB out)"],
}


def chip_probe(python: str) -> list[dict]:
    """``--chips``: each :data:`CHIP_PROBES` module compiled for every topology of :data:`TOPOLOGIES`;
    per probe and topology the TPU compiler's flops, bytes accessed and estimate, with the rates they
    imply (bytes / estimate, flops / estimate) beside the profile's sustained HBM bandwidth and bf16
    peak (:mod:`hloshard.devices`)."""
    from hloshard.xla_cost import tpu_cost

    rows = []
    for device, topology in TOPOLOGIES.items():
        prof = get_profile(device)
        for label, costs in zip(CHIP_PROBES, tpu_cost(list(CHIP_PROBES.values()), 8, topology, python)):
            rows.append({"probe": label, "device": device, "hbm_bandwidth": prof.sustained_hbm_bandwidth,
                         "bf16_peak": prof.peak_flops["bf16"], **costs.to_json()})
    return rows


def chip_table(rows) -> str:
    """The ``--chips`` rows as a markdown table: the estimate, bytes / estimate and flops / estimate per
    topology, and the profile's figures they compare with."""
    lines = ["| probe | device | estimate us | bytes accessed | bytes / estimate, GB/s (profile's sustained) | "
             "flops / estimate, TF/s (profile's bf16 peak) |", "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (list(CHIP_PROBES).index(r["probe"]), r["device"])):
        e, b, f = r.get("estimate_seconds"), r.get("bytes_accessed"), r.get("flops")
        if not e:
            lines.append(f"| {r['probe']} | {r['device']} | error: {(r.get('error') or '')[:60]} | | | |")
            continue
        lines.append(f"| {r['probe']} | {r['device']} | {e * 1e6:.2f} | {_g(b)} | {b / e / 1e9:.0f} "
                     f"({r['hbm_bandwidth'] / 1e9:.0f}) | {(f or 0) / e / 1e12:.1f} ({r['bf16_peak'] / 1e12:.0f}) |")
    return "\n".join(lines)


def msa_copy_seconds(tpu: dict, device: str) -> float | None:
    """Seconds the TPU compiler's estimate charges the optimised program's copies of intermediates between
    HBM and on-chip memory (:func:`hloshard.xla_cost.intermediate_copies`), counted
    :data:`hloshard.cost.roofline.PREFETCH_COPY_FACTOR` x their padded bytes at the profile's sustained HBM
    bandwidth; None when the row has no such count.  Read off the compiler's output, not predicted: the
    column that says how much of a row's estimate these copies are (``v5p:2x2x2`` has them, ``v5e:2x4`` and
    ``v6e:2x4`` do not; BENCHMARKS.md "Round 23, helper seconds")."""
    from hloshard.cost.roofline import PREFETCH_COPY_FACTOR

    b = (tpu or {}).get("intermediate_copy_bytes")
    if b is None:
        return None
    return PREFETCH_COPY_FACTOR * b / get_profile(device).sustained_hbm_bandwidth


def cases(only, corpus: bool, extra: str | None = None) -> list[dict]:
    """The samples (mesh 2x4), or with ``extra`` the ``NAME.pre.hlo`` / ``NAME.propagated.hlo`` pairs of that
    directory instead (held-out modules: ``scripts/make_transformer.py``'s, ``benchmarks/attention_heads.py``'s;
    the mesh from ``NAME.mesh`` when present, else 2x4)."""
    out = []
    where = pathlib.Path(extra) if extra else ROOT / "samples"
    for pre in sorted(where.glob("*.pre.hlo")):
        if pre.name.endswith(".shardy.pre.hlo"):
            continue
        name = pre.name[: -len(".pre.hlo")]
        if only and name not in only:
            continue
        mesh_file = pre.with_name(f"{name}.mesh")
        mesh = mesh_file.read_text().strip() if mesh_file.exists() else "2x4"
        out.append({"name": name, "pre": pre, "propagated": pre.with_name(f"{name}.propagated.hlo"), "mesh": mesh})
    if corpus and MAXTEXT.exists() and (not only or "maxtext_train_step" in only):
        out.append({"name": "maxtext_train_step", "pre": MAXTEXT, "propagated": None, "mesh": "8"})
    return out


def hloshard_side(text: str, mesh: str, device: str = "tpu-v5e") -> dict:
    from hloshard.autoshard import evaluate_module
    from hloshard.cost.roofline import PREFETCH_COPY_FACTOR
    from hloshard.cost.tpu_partitioner import tpu_partitioned_view
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.timing import body_once, plan_roofline, plan_timing
    from hloshard.hlo import parse_module

    module = parse_module(text)
    dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, device)
    folded = []
    if scale.profile.backend == "tpu":   # what the TPU's partitioner is given (cost.tpu_partitioner)
        module, folded = tpu_partitioned_view(module, scale.profile.name)
    res = evaluate_module(module, dmesh)
    t = plan_timing(res, module, scale)
    b = t["step_time"]["breakdown_s"]
    coll = collective_hbm_seconds(res, scale.profile)
    # the like-for-like figure prices what the TPU compiler's cost model counts: every byte a kernel reads
    # or writes at HBM bandwidth, no per-kernel overhead -- the profile's on-chip terms (vmem_bandwidth,
    # kernel_overhead_s: round 32's VMEM-resident intermediates, which the chip does not spend) left out
    like_profile = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0)
    roof = plan_roofline(res, module, like_profile)[0]
    flops_once, bytes_once = body_once(roof)
    coll_once = collective_hbm_seconds(res, scale.profile, once=True)
    vm = vmem_seconds(roof, scale.profile)
    gt = gather_tile_seconds(roof, scale.profile)
    pre = vm + gt   # what optimal_seconds counts and the chip does not spend (like-for-like only)
    # of vm: the copies a megacore TPU's memory-space assignment makes of shared results (timing's
    # msa-copy rows, roofline.shared_intermediates), the buffers' bytes once each
    msa = sum(r.hbm_bytes for r in roof.rows if r.opcode == "msa-copy")
    msa_once = sum(r.hbm_bytes / r.executions for r in roof.rows if r.opcode == "msa-copy" and r.executions > 0)
    bw = scale.profile.sustained_hbm_bandwidth
    pre_once = pre - (msa - msa_once) / bw   # a loop body's copies once, as the estimate counts the body
    return {"flops": t["flops_per_device"], "bytes": t["hbm_bytes_per_device"], "compute_s": b["compute_s"],
            "flops_once": flops_once, "bytes_once": bytes_once,
            "comm_s": b["communication_s"] + b["resharding_s"], "step_s": t["estimated_step_time_s"],
            "collective_hbm_s": coll, "vmem_s": vm, "gather_tile_s": gt,
            "msa_copy_bytes": msa_once / PREFETCH_COPY_FACTOR, "msa_copy_s": msa_once / bw, "tpu_like_s": roof.seconds + coll + pre,
            "tpu_like_once_s": roofline_seconds_once(roof) + coll_once + pre_once, "folded_transposes": len(folded)}


def vmem_seconds(roof, profile) -> float:
    """Seconds of the bytes the roofline counts but gives no HBM seconds, as the TPU compiler's
    ``optimal_seconds`` counts them (every byte it accesses at its HBM rate): the rows'
    :attr:`hloshard.cost.roofline.RooflineRow.vmem_bytes` -- an entry parameter's prefetch copy beyond its
    one HBM read (``HloCostAnalysis`` counts it :data:`hloshard.cost.roofline.PREFETCH_COPY_FACTOR` x its
    size) and the kernels' reads of parameters held in on-chip memory
    (:func:`hloshard.cost.roofline.vmem_resident`) -- at the profile's sustained HBM bandwidth.  The
    chip does not spend them, the estimate does, so the like-for-like figure adds them back (round 20's
    ``prefetch_seconds`` was the copies' part: the copy's four counts, when the roofline gave it none)."""
    return sum(r.vmem_bytes for r in roof.rows) / profile.sustained_hbm_bandwidth


def gather_tile_seconds(roof, profile) -> float:
    """Seconds of the bytes the TPU compiler's ``optimal_seconds`` counts for the plan's row gathers beyond
    what the roofline's kernels count: the ``gather-tiles`` rows of :func:`hloshard.timing.plan_roofline`
    (:func:`hloshard.cost.tpu_fusion.gather_counted_bytes`: each index reads the 8 rows of its tile and
    writes its row, lane-padded, less the table shard and the result the gather's row reads and writes), at
    the profile's sustained HBM bandwidth.  The chip does not pay them (round 21: the same gather kernel
    moves 512 MiB in ~1.3 ms, and the compiler's estimate of the 16,384-id gather is 1.83x the chip's
    time), so, like :func:`vmem_seconds`, only the like-for-like figure adds them."""
    return sum(r.hbm_bytes for r in roof.rows if r.opcode == "gather-tiles") / profile.sustained_hbm_bandwidth


def roofline_seconds_once(roof) -> float:
    """The roofline's seconds with every instruction counted once, a loop body's once rather than once per
    trip (each row's seconds over its executions; the layout copies' seconds scaled by their bytes counted
    once over their bytes per trip): the TPU compiler's ``optimal_seconds`` counts a while body once
    (BENCHMARKS.md, round 14: the windowed einsum loops), so this, plus the collectives' HBM seconds
    counted once, is the like-for-like figure for a module with loops; equal to ``roof.seconds``
    without loops."""
    rows = sum(r.seconds for r in roof.rows)
    once = sum(r.seconds / r.executions for r in roof.rows if r.executions > 0)
    rest = roof.seconds - rows   # the memory model's layout copies (relayout_bytes), per trip
    if roof.relayout_bytes > 0:
        rest *= roof.relayout_bytes_once / roof.relayout_bytes
    return once + rest


def collective_hbm_seconds(result, profile, once: bool = False) -> float:
    """Seconds one device spends moving the HBM bytes of the collectives hloshard predicts for the plan
    (:func:`hloshard.timing.plan_collective_hbm_bytes`) at the profile's sustained HBM
    bandwidth.  The part of the step time the TPU compiler's ``optimal_seconds`` also counts (it charges
    a collective its HBM bytes, no link time), so compute + this is hloshard's like-for-like figure.
    ``once``: each collective counted once (a loop body's not per trip)."""
    from hloshard.timing import plan_collective_hbm_bytes

    return plan_collective_hbm_bytes(result, once=once) / profile.sustained_hbm_bandwidth


def solved_text(pre: pathlib.Path, mesh: str, time_limit: float, budget_is_hbm: bool = True,
                device: str = "tpu-v5e") -> str:
    from hloshard.autoshard import solve_module
    from hloshard.mesh_setup import timed_mesh_from_options
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
    for case in cases(args.only, args.corpus, args.extra):
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
                         "tpu": None if t is None else t.to_json(), "device": args.device})
    return rows


#: the pod-scale train step (``--pod LAYERS``): the sample transformer's model in bf16 with sizes a 16x16
#: mesh divides (d 1024, ffn 4096, 16 heads, batch 64 x 512 tokens), Megatron parameter shardings
POD = {"topology": "v5e:16x16", "mesh": "data=16,model=16", "d": 1024, "f": 4096, "heads": 16, "batch": 64,
       "seq": 512}


def _pod_worker(layers: int, out: str) -> int:  # pragma: no cover - runs under the TPU python
    """Child of :func:`pod_modules`: lower the pod train step for the 256-chip topology with jax and write
    ``pre.hlo`` (GSPMD input) and ``propagated.hlo`` (the TPU compiler's after-sharding-propagation dump:
    GSPMD's plan) under ``out``."""
    import glob
    import tempfile

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    sys.path.insert(0, str(ROOT / "scripts"))
    import make_samples

    jax.config.update("jax_use_shardy_partitioner", False)
    topo = topologies.get_topology_desc(POD["topology"], "tpu")
    mesh = Mesh(np.array(topo.devices).reshape(16, 16), ("data", "model"))
    d, f, heads = POD["d"], POD["f"], POD["heads"]

    def spec(shape, *axes):
        return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, P(*axes)))

    def forward(params, x):
        for p in params:
            h = make_samples._layer_norm(jnp, x, p["ln1_g"], p["ln1_b"])
            a = make_samples._attention(jax, jnp, h @ p["wq"], h @ p["wk"], h @ p["wv"], heads)
            x = x + a @ p["wo"]
            h = make_samples._layer_norm(jnp, x, p["ln2_g"], p["ln2_b"])
            x = x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
        return x

    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(forward(params, x) - y))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)

    def layer():
        return {"ln1_g": spec((d,)), "ln1_b": spec((d,)), "wq": spec((d, d), None, "model"),
                "wk": spec((d, d), None, "model"), "wv": spec((d, d), None, "model"),
                "wo": spec((d, d), "model", None), "ln2_g": spec((d,)), "ln2_b": spec((d,)),
                "w1": spec((d, f), None, "model"), "w2": spec((f, d), "model", None)}

    act = (POD["batch"], POD["seq"], d)
    args = ([layer() for _ in range(layers)], spec(act, "data", None, None), spec(act, "data", None, None))
    lowered = jax.jit(step).lower(*args)
    target = pathlib.Path(out)
    target.mkdir(parents=True, exist_ok=True)
    (target / "pre.hlo").write_text(lowered.as_text(dialect="hlo"))
    with tempfile.TemporaryDirectory() as dump:
        lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "sharding-propagation"})
        files = sorted(glob.glob(os.path.join(dump, "*after_sharding-propagation*.txt")))
        (target / "propagated.hlo").write_text(make_samples._canonical(pathlib.Path(files[-1]).read_text()))
    return 0


def pod(args) -> list[dict]:
    """``--pod LAYERS``: the pod train step on 256 v5e chips; GSPMD's plan and ``solve --device tpu-v5e``'s
    (``--time-limit``, keep io, pin operands, deterministic), hloshard's figures beside the TPU compiler's
    for ``v5e:16x16`` (256 partitions).  Modules are written under ``--pod-dir`` (generated once)."""
    import subprocess

    from hloshard.xla_cost import tpu_cost

    out = pathlib.Path(args.pod_dir) / f"l{args.pod}"
    if not (out / "propagated.hlo").exists():
        env = dict(os.environ, ALLOW_MULTIPLE_LIBTPU_LOAD="1", TF_CPP_MIN_LOG_LEVEL="3")
        subprocess.run([args.tpu_python, __file__, "--pod-worker", str(args.pod), str(out)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    plans = [("GSPMD", (out / "propagated.hlo").read_text())]
    if "solve" in args.plans:
        t0 = time.monotonic()
        text = solved_text(out / "pre.hlo", POD["mesh"], args.time_limit)
        (out / "solve.hlo").write_text(text)
        plans.append(("solve", text))
        print(f"# pod {args.pod} layers: solved ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    tpu = tpu_cost([t for _, t in plans], 256, POD["topology"], args.tpu_python) if args.tpu_python else [None] * len(plans)
    rows = []
    for (plan, text), t in zip(plans, tpu):
        rows.append({"name": f"pod_{args.pod}l", "plan": plan, "hloshard": hloshard_side(text, POD["mesh"]),
                     "cpu": {}, "tpu": None if t is None else t.to_json()})
    return rows


def _g(x, d=3) -> str:
    return "-" if x is None else f"{x:.{d}g}"


def _r(a, b) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}"


def table(rows) -> str:
    head = ("| module | plan | flops hloshard | XLA CPU | TPU | ratio (CPU) | loop bodies once / CPU | bytes hloshard | "
            "XLA CPU | TPU | ratio (CPU) | loop bodies once / CPU | ratio (TPU) | roofline s | TPU estimate s | "
            "roofline / estimate | roofline + collectives' HBM s | that / estimate | that, loop bodies once / estimate | "
            "comm s | step s |")
    lines = [head, "|" + "---|" * 21]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['plan']} | error: {r['error'][:80]} |" + " |" * 19)
            continue
        h, c, t = r["hloshard"], r["cpu"], r["tpu"] or {}
        if "error" in h:
            lines.append(f"| {r['name']} | {r['plan']} | hloshard error: {h['error'][:80]} |" + " |" * 19)
            continue
        lines.append(
            f"| {r['name']} | {r['plan']} | {_g(h['flops'])} | {_g(c.get('flops'))} | {_g(t.get('flops'))} | "
            f"{_r(h['flops'], c.get('flops'))} | {_r(h.get('flops_once'), c.get('flops'))} | {_g(h['bytes'])} | "
            f"{_g(c.get('bytes_accessed'))} | {_g(t.get('bytes_accessed'))} | {_r(h['bytes'], c.get('bytes_accessed'))} | "
            f"{_r(h.get('bytes_once'), c.get('bytes_accessed'))} | "
            f"{_r(h['bytes'], t.get('bytes_accessed'))} | {_g(h['compute_s'])} | {_g(t.get('estimate_seconds', t.get('optimal_seconds')))} | "
            f"{_r(h['compute_s'], t.get('estimate_seconds', t.get('optimal_seconds')))} | {_g(h.get('tpu_like_s'))} | "
            f"{_r(h.get('tpu_like_s'), t.get('estimate_seconds', t.get('optimal_seconds')))} | "
            f"{_r(h.get('tpu_like_once_s'), t.get('estimate_seconds', t.get('optimal_seconds')))} | {_g(h['comm_s'])} | {_g(h['step_s'])} |")
    return "\n".join(lines)


def like_table(rows) -> str:
    """Per row: the TPU estimate, hloshard's like-for-like figure (loop bodies once) over it, the
    estimate's copies of intermediates (:func:`msa_copy_seconds`), hloshard's prediction of them (the
    ``msa-copy`` rows of a megacore profile, :func:`hloshard.cost.roofline.shared_intermediates`: the
    copied buffers' bytes once, and the seconds the like figure counts for them), and the like-for-like
    figure less its predicted copies over the estimate less its measured ones (both sides without them);
    the count of rows within 25% both ways."""
    lines = ["| module | plan | TPU estimate us | like us | like / estimate | copies of intermediates: n, MB, "
             "us counted | predicted copies: MB, us | like / (estimate - copies), both sides' copies out |",
             "|---|---|---|---|---|---|---|---|"]
    n = inside = inside_less = 0
    for r in rows:
        h, t = r.get("hloshard") or {}, r.get("tpu") or {}
        e, like = t.get("estimate_seconds"), h.get("tpu_like_once_s")
        if not e or like is None:
            continue
        cs = msa_copy_seconds(t, r.get("device", "tpu-v5e")) or 0.0
        ps = h.get("msa_copy_s") or 0.0   # hloshard's own prediction of them (in like)
        n += 1
        inside += 0.75 <= like / e <= 1.25
        inside_less += 0.75 <= (like - ps) / (e - cs) <= 1.25
        lines.append(f"| {r['name']} | {r['plan']} | {e * 1e6:.2f} | {like * 1e6:.2f} | {like / e:.3f} | "
                     f"{t.get('intermediate_copies')}, {(t.get('intermediate_copy_bytes') or 0) / 1e6:.3f}, "
                     f"{cs * 1e6:.2f} | {(h.get('msa_copy_bytes') or 0) / 1e6:.3f}, {ps * 1e6:.2f} | "
                     f"{(like - ps) / (e - cs):.3f} |")
    lines.append(f"| **within 25%** | | | | **{inside} / {n}** | | | **{inside_less} / {n}** |")
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
    ap.add_argument("--chips", action="store_true",
                    help="only single-kernel probes compiled for each TPU topology (v4, v5e, v5p, v6e): the rates "
                         "optimal_seconds charges per byte and per flop on each chip")
    ap.add_argument("--tpu-python", default=TPU_PYTHON if TPU_PYTHON and pathlib.Path(TPU_PYTHON).exists() else None,
                    help="a Python with jax and libtpu (default: $HLOSHARD_TPU_PYTHON when set)")
    ap.add_argument("--no-budget", action="store_true",
                    help="solve without the device's HBM as memory budget (the MaxText step needs more than a "
                         "v5e's 16 GiB per chip)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="tpu-v5e", choices=sorted(TOPOLOGIES),
                    help="the TPU profile hloshard prices with and whose 8-chip topology the TPU compiler targets")
    ap.add_argument("--plans", nargs="*", default=["GSPMD", "solve"], choices=["GSPMD", "solve"])
    ap.add_argument("--extra", default=None, metavar="DIR",
                    help="the NAME.pre.hlo / NAME.propagated.hlo pairs of DIR (and NAME.mesh) instead of the samples")
    ap.add_argument("--pod", type=int, default=None, metavar="LAYERS",
                    help="only the LAYERS-layer train step on 256 v5e chips (v5e:16x16, mesh data=16,model=16)")
    ap.add_argument("--pod-dir", default="pod", help="where --pod writes its modules (default ./pod)")
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--pod-worker":
        return _pod_worker(int(sys.argv[2]), sys.argv[3])
    args = ap.parse_args(argv)
    out: dict = {}
    if args.pod is not None:
        out["rows"] = pod(args)
        print(table(out["rows"]))
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        return 0
    if args.chips:
        if not args.tpu_python:
            ap.error("--chips needs --tpu-python (or $HLOSHARD_TPU_PYTHON)")
        out["chips"] = chip_probe(args.tpu_python)
        print(chip_table(out["chips"]))
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        return 0
    if args.probe and args.tpu_python:
        out["probes"] = probe(args.tpu_python)
        print(probe_table(out["probes"]), flush=True)
        print()
    out["rows"] = run(args)
    print(table(out["rows"]))
    print()
    print(like_table(out["rows"]))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
