#!/usr/bin/env python3
"""Issue 27: what the TPU compiler's cost model charges a convolution, by per-device batch (round 17).

For each (batch, H, C) a chain of 2 and of 6 ``3x3 SAME`` convolutions (f32, C -> C channels on H x H
activations, a ReLU after each) is compiled for one chip of ``v5e:2x4`` (``--topology``) by libtpu ahead of time
(:func:`tests.tpu_oracle.compile_for_tpu`); the marginal ``bytes accessed`` and ``optimal_seconds`` of one
convolution are (6-chain - 2-chain) / 4, so that the entry layout copies and the first kernel's
parameter reads cancel.  ``--filter-gradient`` probes weight-gradient convolutions instead
(``f01b_i01o->01bf``, x[B,H,H,C] with dy[B,H,H,C] -> w[3,3,C,C], 2 and 6 of them on scaled copies of dy).
hloshard's rule built on it: :func:`hloshard.cost.tpu_fusion.conv_batch_factor`.

Needs the interpreter with jax 0.10.2 and libtpu 0.0.42.* (``../shared/reference/tpu_aot.md``)::

    python benchmarks/tpu_conv_probe.py --batch 1 2 4 8 16 --shape 32x16 16x64 8x256
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def chain(b: int, h: int, c: int, n: int) -> str:
    """HLO text: ``n`` forward convolutions in a chain, a ReLU after each."""
    lines = ["HloModule chain", "", "ENTRY e {", f"  x0 = f32[{b},{h},{h},{c}] parameter(0)",
             "  zero = f32[] constant(0)", f"  z = f32[{b},{h},{h},{c}] broadcast(zero), dimensions={{}}"]
    lines += [f"  w{i} = f32[3,3,{c},{c}] parameter({i + 1})" for i in range(n)]
    cur = "x0"
    for i in range(n):
        lines.append(f"  c{i} = f32[{b},{h},{h},{c}] convolution({cur}, w{i}), window={{size=3x3 pad=1_1x1_1}}, "
                     "dim_labels=b01f_01io->b01f")
        lines.append(f"  {'ROOT ' if i == n - 1 else ''}r{i} = f32[{b},{h},{h},{c}] maximum(c{i}, z)")
        cur = f"r{i}"
    return "\n".join(lines + ["}", ""])


def filter_gradients(b: int, h: int, c: int, n: int) -> str:
    """HLO text: ``n`` weight-gradient convolutions of x against scaled copies of dy."""
    lines = ["HloModule wgrad", "", "ENTRY e {", f"  x = f32[{b},{h},{h},{c}] parameter(0)",
             f"  dy = f32[{b},{h},{h},{c}] parameter(1)"]
    for i in range(n):
        lines += [f"  k{i} = f32[] constant({i + 1})", f"  bk{i} = f32[{b},{h},{h},{c}] broadcast(k{i}), dimensions={{}}",
                  f"  d{i} = f32[{b},{h},{h},{c}] multiply(dy, bk{i})",
                  f"  g{i} = f32[3,3,{c},{c}] convolution(x, d{i}), window={{size={h}x{h} pad=1_1x1_1}}, "
                  "dim_labels=f01b_i01o->01bf"]
    shapes = ", ".join([f"f32[3,3,{c},{c}]"] * n)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(f'g{i}' for i in range(n))})")
    return "\n".join(lines + ["}", ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--shape", nargs="+", default=["32x16", "16x64", "8x256"], help="HxC (square H x H activations)")
    ap.add_argument("--filter-gradient", action="store_true")
    ap.add_argument("--topology", default="v5e:2x4", help="libtpu topology (one chip of it is used)")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import compile_for_tpu

    make = filter_gradients if args.filter_gradient else chain
    cases = []
    for shape in args.shape:
        try:
            h, c = (int(x) for x in shape.lower().split("x"))
        except ValueError:
            ap.error(f"--shape expects HxC, e.g. 32x16, got {shape!r}")
        cases += [(b, h, c) for b in args.batch]
    recs = compile_for_tpu([make(b, h, c, n) for b, h, c in cases for n in (2, 6)], topology=args.topology,
                           partitions=1)
    print("| batch | activations | bytes per convolution (MB) | optimal_seconds per convolution (us) |")
    print("|---:|---|---:|---:|")
    for k, (b, h, c) in enumerate(cases):
        two, six = recs[2 * k], recs[2 * k + 1]
        if not (two["ok"] and six["ok"]):
            print(f"| {b} | {h}x{h}x{c} | error: {(two['error'] or six['error']).splitlines()[0][:60]} | - |")
            continue
        nbytes = (six["cost"]["bytes accessed"] - two["cost"]["bytes accessed"]) / 4
        t2, t6 = two["cost"]["optimal_seconds"], six["cost"]["optimal_seconds"]
        # a negative optimal_seconds carries -1 per ConcatBitcast (hloshard.xla_cost.XlaCost): not shown
        shown = f"{(t6 - t2) / 4 * 1e6:.2f}" if t2 > 0 and t6 > 0 else "- (ConcatBitcast sentinel)"
        print(f"| {b} | {h}x{h}x{c} | {nbytes / 1e6:.2f} | {shown} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
