#!/usr/bin/env python3
"""The weight updates whose gradient the TPU delivers in another layout than the weight's (issue 27), beside
the TPU compiler's own programs: ``cost.tpu_partitioner.update_layout_conflicts`` checked against libtpu.

For each written plan ``X.hlo`` with libtpu's optimised program ``X.opt.txt`` beside it (``DIR/tpu-v5e/...``:
the device is the path's ``tpu-*`` part, or ``--device``), every update ``subtract(P, g)`` that
``resharded_updates`` finds, with the predicted layouts and what libtpu's program does: ``param`` -- a
``copy`` carrying ``P``'s op_name (the weight copied into the gradient's layout; its result copied back),
``gradient`` -- a ``copy`` of ``P``'s per-device shape carrying the update operand's op_name (the gradient
copied into the weight's layout), ``none``.  A row agrees when a copy is there exactly where the layouts
differ.  Attribution is by op_name and shape: two weights of one shape whose gradients share an op_name
are told apart only by the weight copies.

Usage (the optimised programs written by ``benchmarks/measured/tpurows_r33/tpu.py``)::

    PYTHONPATH=src:. python benchmarks/tpu_update_layouts.py '/work/notes/tpurows33/plans_br/tpu-v5e/*/*.hlo'
"""

from __future__ import annotations

import argparse
import collections
import glob
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hloshard.cost.tpu_partitioner import resharded_updates  # noqa: E402
from hloshard.hlo import parse_module  # noqa: E402

_COPY = re.compile(r'= (\w+)\[([0-9,]*)\]\{[^}]*\} copy\(.*?op_name="((?:[^"\\]|\\.)*)"')


def observed(opt_text: str, param, grad) -> str:
    """``param``, ``gradient`` or ``none``: libtpu's copy around the update (module docstring)."""
    pname = (param.op_name or param.name).replace("'", "\\'")
    gname = (grad.op_name or "").replace("'", "\\'")
    local = param.sharding.tile_shape(param.shape.dims)
    kinds = set()
    for dt, dims, name in _COPY.findall(opt_text):
        shape = tuple(int(x) for x in dims.split(",") if x)
        if name == pname:
            kinds.add("param")
        elif gname and name == gname and shape == tuple(local):
            kinds.add("gradient")
    return "param" if "param" in kinds else "gradient" if "gradient" in kinds else "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("glob", help="written plans X.hlo, each with X.opt.txt beside it")
    ap.add_argument("--device", default=None, help="the TPU profile (default: the path's tpu-* part)")
    ap.add_argument("--rows", action="store_true", help="print every update, not only the totals")
    args = ap.parse_args(argv)
    tally = collections.Counter()
    files = sorted(glob.glob(args.glob))
    if not files:
        print(f"error: no file matches {args.glob}", file=sys.stderr)
        return 2
    for f in files:
        opt = pathlib.Path(f[: -len(".hlo")] + ".opt.txt")
        if not opt.exists():
            continue
        dev = args.device or next((p for p in pathlib.Path(f).parts if p.startswith("tpu-")), None)
        text = opt.read_text()
        for p, u, gs, es in resharded_updates(parse_module(pathlib.Path(f).read_text()), dev):
            obs = observed(text, p, u.operands[1])
            conflict = gs != es
            ok = conflict == (obs != "none")
            tally[(conflict, obs)] += 1
            tally["agree" if ok else "disagree"] += 1
            if args.rows or not ok:
                print(f"{'ok ' if ok else 'BAD'} {pathlib.Path(f).name} {p.name} local "
                      f"{list(p.sharding.tile_shape(p.shape.dims))} gradient {'{0,1}' if gs else '{1,0}'} "
                      f"entry {'{0,1}' if es else '{1,0}'} libtpu copies: {obs}")
    print("agree", tally["agree"], "of", tally["agree"] + tally["disagree"],
          "| conflict predicted -> copied:", {k[1]: v for k, v in tally.items() if isinstance(k, tuple) and k[0]},
          "| no conflict ->", {k[1]: v for k, v in tally.items() if isinstance(k, tuple) and not k[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
