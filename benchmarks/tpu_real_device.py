#!/usr/bin/env python3
"""``benchmarks/real_models.py``'s child with ``auto_shard(..., device=DEVICE)``: the real models' auto plans
priced in seconds of a device profile (issue 27), for ``benchmarks/real_models_tpu.py`` to compile on libtpu.

``real_models.py`` calls ``hloshard.jax.auto_shard`` without a device (its figures are the unit model's).  This
driver runs the same child (``real_models.main(["--child", MODEL, PLANS, ...])``: the same model, step, mesh
2x4 ``('batch', 'model')``, ``keep_shardings="io"``, deterministic) with ``auto_shard`` given ``device=DEVICE``
and nothing else changed, and appends per auto plan the call's ``report["step_time"]`` (hloshard's estimated
step time of its written plan, seconds) to ``--est-jsonl``.  The child's rows go to stdout as
``real_models.py --child`` writes them (JSON lines), so ``real_models_tpu.py DIR --cpu-json`` reads them.

Usage (the keras-hub interpreter, 8 fake CPU devices set up by real_models.py's child)::

    KERAS_BACKEND=jax PYTHONPATH=src:. python benchmarks/tpu_real_device.py --device tpu-v5e \\
        --est-jsonl est.jsonl -- --child qwen2_small auto,auto_expert --time-limit 10 --stablehlo-dir D \\
        --float64-plans '' --steps 0 > child.jsonl
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", required=True, help="auto_shard's device profile (e.g. tpu-v5e)")
    ap.add_argument("--est-jsonl", required=True, help="append {model, plan, step_time} per auto_shard call here")
    args = ap.parse_args(own)
    if "--child" not in rest:
        print("error: give real_models.py's child arguments after --: -- --child MODEL PLANS ...", file=sys.stderr)
        return 2
    model = rest[rest.index("--child") + 1]

    from benchmarks import real_models
    real_models.setup_child_env()   # 8 fake CPU devices before jax is imported (the child does it too)
    import hloshard.jax as hj

    orig = hj.auto_shard

    @functools.wraps(orig)
    def auto_shard(*a, **kw):
        kw.setdefault("device", args.device)
        res = orig(*a, **kw)
        rep = res.report
        with open(args.est_jsonl, "a") as fh:
            fh.write(json.dumps({"model": model, "device": args.device,
                                 "keep": "expert" if any(getattr(x, "sharding", None) is not None
                                                         for x in _leaves(a[1:])) else "none",
                                 "step_time": rep.get("step_time"),
                                 "objective": rep.get("objective"),
                                 "peak": rep.get("peak_memory_per_device"),
                                 "pred_bytes": rep.get("predicted_collective_bytes_per_device")}) + "\n")
        return res

    hj.auto_shard = auto_shard
    return real_models.main(rest)


def _leaves(tree):
    import jax

    return jax.tree_util.tree_leaves(tree)


if __name__ == "__main__":
    sys.exit(main())
