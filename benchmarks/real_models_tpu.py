#!/usr/bin/env python3
"""The real-model plans on the real TPU compiler (ahead of time for ``v5e:2x4``, no TPU needed).

``benchmarks/real_models.py --stablehlo-dir DIR`` (keras-hub) and ``benchmarks/real_models_tunix.py
--stablehlo-dir DIR`` (tunix) write, per (model, plan), the StableHLO that ``jax.jit(fn, in_shardings,
out_shardings).lower(...)`` gives on the 8 fake CPU devices (``DIR/MODEL.PLAN.mlir``: the plan's parameter,
batch and output shardings, and for ``auto*`` plans hloshard's ``with_sharding_constraint``s; Shardy's
``sdy.sharding`` attributes, jax's default). This script compiles each of them for 8 chips of a ``v5e:2x4``
topology with libtpu, as ``jax.jit`` would on a TPU (Shardy; :func:`tests.tpu_oracle.compile_for_tpu`,
``../shared/reference/tpu_aot.md``). For the ``auto*`` plans they also write hloshard's written module
(``DIR/MODEL.PLAN.solved.hlo``, ``AutoShardResult.hlo_text``: what ``hloshard solve`` writes, every
instruction annotated, operand pins as ``Sharding`` custom-calls), compiled with GSPMD as row
``PLAN.solved``. Reported per plan:

* ``raw MB``: ring bytes per device of the collectives in the TPU pipeline's HLO right after its SPMD
  partitioner (``after_tpu-spmd-partitioning``; :func:`tests.xla_bytes.collective_bytes`, the formulas of
  the CPU figures of ``real_models.py``);
* ``final MB``: the same formulas on the optimized HLO the TPU runs (after its collective combiners and
  async conversion; a collective split into async start / continue / done fusions appears there once per
  piece with one ``channel_id``, so each ``channel_id`` counts once, and a ``collective-permute-start``
  counts its result element, not its (operand, result, context) tuple). The TPU compiler may gather
  float32 operands of a DEFAULT-precision dot as bfloat16, which this column shows and ``raw`` does not;
* ``peak MB``: ``memory_analysis`` (``get_compiled_memory_stats``) argument + output + temp - alias bytes
  per device. Compiled ahead of time its temp is not the HBM temporary: 0 on modules whose buffer
  assignment holds a 2.5 MB temporary buffer in HBM, 3.8 MB on one whose HBM temporary is 1.9 MB;
* ``HBM MB``: the TPU buffer assignment's whole HBM (memory space 0) per device, from its memory-usage
  report: arguments, outputs and the preallocated temporary buffer, as laid out (what the compiler keeps
  in on-chip VMEM is not in it);
* ``heap MB (slots)``: what of that HBM is libtpu's temp heap (the buffer assignment's color-0
  ``preallocated-temp`` allocation, :func:`tests.tpu_oracle.compile_for_tpu`'s ``hbm_heap``): its bytes and its
  async tuple headers (one 16 KiB-aligned slot each, :mod:`hloshard.cost.tpu_layout`), with ``+N values`` where it
  holds N values that are not headers (spilled scalars, data temporaries beyond the VMEM); the JSON row keeps the
  whole record (``hbm_heap``) and ``hbm_beyond_io`` = HBM - (argument + output - alias), what a memory budget on a
  TPU must leave room for beyond the model's entry parameters and outputs;
* ``TPU us``: the TPU cost model's ``optimal_seconds`` with the -1 s of each ``ConcatBitcast`` custom-call of the
  optimized program added back (:attr:`hloshard.xla_cost.XlaCost.estimate_seconds`'s rule; the JSON row keeps
  ``concat_bitcasts``); "-" where it is still negative or absent;
* with ``--cpu-json``: the CPU backend's figures for the same plan (``comm_bytes``, ``peak_bytes`` of the
  benchmark's JSON) beside them.

Run it with an interpreter that has jax 0.10.2 and libtpu 0.0.42.* (not the keras-hub / tunix one).

Usage::

    python benchmarks/real_models_tpu.py DIR [--models a,b] [--cpu-json real.json ...] [--json out.json]
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
from hloshard.textout import tuple_elements  # noqa: E402  (after the path set-up)

MB = 1e6
PLAN_ORDER = ["expert", "expert_params", "replicated", "auto", "auto_budget", "auto_expert"]

_COLLECTIVE = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(-start)?\(")
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")
_START = re.compile(r"^(\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*)(.*?)(\s+collective-permute-start\()")


def final_once(text: str) -> str:
    """The optimized TPU HLO ``text`` with each collective kept once: lines of a collective whose
    ``channel_id`` appeared earlier are dropped (the async pieces of one collective), and a
    ``collective-permute-start``'s tuple shape (operand, result, contexts) replaced by its result element."""
    seen: set = set()
    out = []
    for line in text.splitlines():
        m = _COLLECTIVE.search(line)
        if m and "-done(" not in line:
            ch = _CHANNEL.search(line)
            if ch:
                if ch.group(1) in seen:
                    continue
                seen.add(ch.group(1))
            s = _START.match(line)
            if s and s.group(2).startswith("("):
                elems = tuple_elements(s.group(2).strip()) or [s.group(2).strip()]
                line = s.group(1) + elems[min(1, len(elems) - 1)] + line[s.start(3):]
        out.append(line)
    return "\n".join(out)


def figures(rec: dict) -> dict:
    """TPU figures of one :func:`tests.tpu_oracle.compile_for_tpu` record (module docstring)."""
    from tests.tpu_oracle import with_trip_counts
    from tests.xla_bytes import collective_bytes

    if not rec["ok"]:
        return {"compiles": False, "error": (rec["error"] or "").splitlines()[0][:300]}
    m = rec["memory"]
    secs = rec["cost"].get("optimal_seconds")
    # each ConcatBitcast of the optimized program adds -1 s to optimal_seconds (hloshard.xla_cost's docstring)
    concat = len(re.findall(r'custom_call_target="ConcatBitcast"', rec.get("final") or ""))
    if secs is not None:
        secs += concat
    row = {"compiles": True, "peak_bytes": m["argument"] + m["output"] + m["temp"] - m["alias"], "memory": m,
           "hbm_bytes": rec.get("hbm_bytes"), "flops": rec["cost"].get("flops"),
           "optimal_seconds": secs if secs is not None and secs >= 0 else None,   # < 0: the model has no estimate
           "concat_bitcasts": concat,
           "hbm_heap": rec.get("hbm_heap"),
           "hbm_beyond_io": None if rec.get("hbm_bytes") is None else
           int(rec["hbm_bytes"]) - (m["argument"] + m["output"] - m["alias"])}
    if rec["partitioned"]:
        counted = collective_bytes(with_trip_counts(rec["partitioned"]))
        row["raw_bytes"] = float(sum(c["bytes"] for c in counted))
        row["raw_kinds"] = _kinds(counted)
    if rec.get("final"):
        try:
            # a scan's final while carries no known_trip_count (the wide / sunk loop): the trip count is
            # read off its induction variable, as for the raw column
            counted = collective_bytes(final_once(with_trip_counts(rec["final"])))
            row["final_bytes"] = float(sum(c["bytes"] for c in counted))
            row["final_kinds"] = _kinds(counted)
        except ValueError as exc:   # a loop without a trip count: not counted rather than miscounted
            row["final_error"] = str(exc)[:200]
    return row


def _by_type(rec: dict) -> dict:
    """Final-HLO collective ring bytes per element type (f32 / bf16 / ...), each collective once."""
    from tests.xla_bytes import collective_bytes

    if not rec.get("final"):
        return {}
    text = final_once(rec["final"])
    types = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\(?([a-z]+[0-9a-z]*)\[", line)
        if m:
            types[m.group(1)] = m.group(2)
    out: dict = {}
    try:
        for c in collective_bytes(text):
            t = types.get(c["name"], "?")
            out[t] = out.get(t, 0.0) + c["bytes"]
    except ValueError:
        return {}
    return out


def _kinds(counted: list[dict]) -> dict:
    out: dict = {}
    for c in counted:
        out[c["kind"]] = out.get(c["kind"], 0) + 1
    return out


def _mb(x) -> str:
    return "-" if x is None else f"{x / MB:.2f}"


def heap_cell(heap: dict | None) -> str:
    """The ``heap MB (slots)`` cell of a row's ``hbm_heap`` record (module docstring); '-' without one."""
    if not heap:
        return "-"
    extra = f" +{heap['other_values']} values" if heap.get("other_values") else ""
    return f"{heap['bytes'] / MB:.2f} ({heap['headers']}{extra})"


def table(rows: list[dict]) -> str:
    head = ("| model | plan | TPU raw MB | TPU final MB | TPU peak MB | TPU HBM MB | heap MB (slots) | TPU us "
            "| CPU bytes MB | CPU peak MB | vs expert on TPU (final bytes, HBM) |")
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    expert = {r["model"]: r for r in rows if r["plan"] == "expert" and r.get("compiles")}
    for r in rows:
        if not r.get("compiles"):
            out.append(f"| {r['model']} | {r['plan']} | does not compile: {r.get('error')} |" + " |" * 8)
            continue
        e = expert.get(r["model"])
        vs = "-"
        if e and r["plan"] != "expert" and r.get("final_bytes") is not None and e.get("final_bytes"):
            vs = f"{r['final_bytes'] / e['final_bytes']:.2f}x, " + (
                f"{r['hbm_bytes'] / e['hbm_bytes']:.2f}x" if r.get("hbm_bytes") and e.get("hbm_bytes") else "-")
        us = r.get("optimal_seconds")
        out.append(f"| {r['model']} | {r['plan']} | {_mb(r.get('raw_bytes'))} | {_mb(r.get('final_bytes'))} | "
                   f"{_mb(r['peak_bytes'])} | {_mb(r.get('hbm_bytes'))} | {heap_cell(r.get('hbm_heap'))} | "
                   f"{'-' if us is None else f'{us * 1e6:.1f}'} | "
                   f"{_mb(r.get('cpu_comm_bytes'))} | {_mb(r.get('cpu_peak_bytes'))} | {vs} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the MODEL.PLAN.mlir files (--stablehlo-dir of real_models*.py)")
    ap.add_argument("--models", default=None, help="comma list (default: every model in DIR)")
    ap.add_argument("--cpu-json", action="append", default=[], help="a real_models*.py --json file, or real_models.py's row-by-row JSONL (repeatable)")
    ap.add_argument("--topology", default="v5e:2x4")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--hlo-out", default=None,
                    help="write the TPU's partitioned and final HLO here (MODEL.PLAN.tpu-partitioned.hlo / .tpu-final.hlo)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per model's compile child")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    d = pathlib.Path(args.dir)
    if not d.is_dir():
        print(f"error: {d}: no such directory", file=sys.stderr)
        return 2
    files: dict = {}
    for p in sorted(d.glob("*.mlir")) + sorted(d.glob("*.solved.hlo")):
        model, _, plan = p.name[: -len(p.suffix)].partition(".")
        files.setdefault(model, {})[plan] = p
    models = args.models.split(",") if args.models else sorted(files)
    cpu = {}
    for path in args.cpu_json:
        text = pathlib.Path(path).read_text()
        for r in ([json.loads(ln) for ln in text.splitlines() if ln.strip()] if path.endswith(".jsonl")
                  else json.loads(text)["rows"]):
            if "error" not in r:
                cpu[(r["model"], r["plan"])] = r
    rows = []
    for model in models:
        plans = sorted(files.get(model, {}), key=lambda p: (PLAN_ORDER.index(p.split(".")[0])
                                                             if p.split(".")[0] in PLAN_ORDER else 99, p))
        if not plans:
            print(f"error: no {model}.*.mlir in {d}", file=sys.stderr)
            return 2
        t0 = time.monotonic()
        recs = compile_for_tpu([files[model][p].read_text() for p in plans], topology=args.topology,
                               timeout=args.timeout)
        print(f"[{model}] {len(plans)} plans compiled for {args.topology} in {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)
        for plan, rec in zip(plans, recs):
            row = {"model": model, "plan": plan, "topology": args.topology, **figures(rec)}
            if args.hlo_out and rec["ok"]:
                out = pathlib.Path(args.hlo_out)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{model}.{plan}.tpu-partitioned.hlo").write_text(rec["partitioned"] or "")
                (out / f"{model}.{plan}.tpu-final.hlo").write_text(rec["final"] or "")
            row["final_bytes_by_type"] = _by_type(rec) if rec["ok"] else None
            c = cpu.get((model, plan))
            if c:
                row["cpu_comm_bytes"], row["cpu_peak_bytes"] = c["comm_bytes"], c["peak_bytes"]
            rows.append(row)
    print(table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
