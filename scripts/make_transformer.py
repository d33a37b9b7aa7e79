#!/usr/bin/env python3
"""Write an N-layer transformer training step as HLO text, for benchmarks.

Writes ``DIR/transformer_<N>l.pre.hlo`` (pre-optimization HLO, GSPMD mode) and
``DIR/transformer_<N>l.propagated.hlo`` (XLA's GSPMD after-sharding-propagation dump: every instruction
annotated) for a 2x4 ('data', 'model') mesh with Megatron-style parameter shardings; see
``scripts/make_samples.py``. 48 layers give 17,281 instructions / 3.4 MB after propagation.
Output is byte-identical from run to run. Needs jax/jaxlib (the ``xla`` extra).

Usage::

    python scripts/make_transformer.py --layers 48 --out DIR
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import make_samples  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="N-layer transformer training step as HLO text")
    ap.add_argument("--layers", type=int, default=48, help="number of transformer layers (default 48)")
    ap.add_argument("--out", required=True, help="output directory")
    ns = ap.parse_args(argv)
    if ns.layers < 1:
        ap.error("--layers must be >= 1")
    pre, propagated = make_samples.transformer_train_step_hlo(ns.layers)
    out = pathlib.Path(ns.out)
    make_samples._write(out / f"transformer_{ns.layers}l.pre.hlo", pre)
    make_samples._write(out / f"transformer_{ns.layers}l.propagated.hlo", propagated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
