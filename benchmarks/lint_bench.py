#!/usr/bin/env python3
"""Benchmark: ``hloshard lint`` on the 48-layer transformer training step vs. parsing it.

The issue's budget: linting the ~3 MB propagated dump takes no more than 2x its parse time. Lint
time includes its own parse (lint = scan + parse + every rule), so the ratio is
``lint_seconds / parse_seconds`` and the rules' share is ``ratio - 1``.

The dump is written by ``scripts/make_transformer.py`` (needs jax/jaxlib) unless ``--hlo`` names
an existing file. Parse and lint run alternately ``--repeat`` times and the best time of each is
kept, as CPU time of this process (what the code costs; the verdict) and as wall-clock time (which
on a shared machine also counts other jobs). Per-rule CPU times are printed too.

Usage::

    python benchmarks/lint_bench.py [--layers 48] [--hlo FILE] [--repeat 3] [--mesh 2x4]
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _time(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call, after a gc.collect() so
    that no run pays for the previous run's garbage."""
    gc.collect()
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def _best_interleaved(fns, repeat: int):
    """Run the functions alternately ``repeat`` times; per function the best wall and best CPU
    time (alternating spreads the machine's load changes evenly over them)."""
    best = [[float("inf"), float("inf"), None] for _ in fns]
    for _ in range(repeat):
        for b, fn in zip(best, fns):
            w, c, out = _time(fn)
            b[0], b[1], b[2] = min(b[0], w), min(b[1], c), out
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--hlo", help="lint this file instead of generating the transformer dump")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mesh", default=None, help="mesh for the cost rule (default: num_partitions, 1-D)")
    ns = ap.parse_args(argv)

    from hloshard.hlo import parse_module
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import build_context, lint_text
    from hloshard.lint.registry import all_rules
    from hloshard.lint.source import scan

    if ns.hlo:
        path = pathlib.Path(ns.hlo)
    else:
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="hloshard-lint-bench-"))
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_transformer.py"), "--layers",
                        str(ns.layers), "--out", str(tmp)], check=True, stdout=subprocess.DEVNULL)
        path = tmp / f"transformer_{ns.layers}l.propagated.hlo"
    text = path.read_text()
    options = LintOptions(mesh=ns.mesh)
    parse_module(text, str(path))  # build the grammar once (cached for the process)

    (w_parse, c_parse, module), (w_lint, c_lint, findings) = _best_interleaved(
        [lambda: parse_module(text, str(path)), lambda: lint_text(text, str(path), options)], ns.repeat)
    w_scan, c_scan, _ = _best_interleaved([lambda: scan(text)], ns.repeat)[0]
    n_instr = sum(1 for _ in module.all_instructions())
    print(f"file: {path.name}  {len(text) / 2**20:.2f} MiB  {n_instr} instructions  cpus={os.cpu_count()}  "
          f"load={os.getloadavg()[0]:.1f}")
    print(f"CPU:  parse {c_parse:.3f} s   lint (incl. parse) {c_lint:.3f} s   ratio {c_lint / c_parse:.2f} "
          f"(budget 2.00)   findings: {len(findings)}")
    print(f"wall: parse {w_parse:.3f} s   lint (incl. parse) {w_lint:.3f} s   ratio {w_lint / w_parse:.2f}")
    print(f"  text scan (sharding sites, suppressions): {c_scan:.3f} s CPU")
    ctx = build_context(text, str(path), options)
    for rule in all_rules():  # first run on a fresh context: includes the caches the rule fills
        _, t, n = _time(lambda: sum(1 for _ in rule().evaluate(ctx)) if ctx.module is not None or rule.text_only else 0)
        if t >= 0.01:
            print(f"  {rule.code} {rule.name}: {t:.3f} s CPU ({n} findings)")
    return 0 if c_lint <= 2 * c_parse else 1


if __name__ == "__main__":
    sys.exit(main())
