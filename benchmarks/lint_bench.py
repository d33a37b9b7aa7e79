#!/usr/bin/env python3
"""Benchmark: ``hloshard lint`` on the 48-layer transformer training step vs. parsing it.

The issue's budget: linting the ~3 MB propagated dump takes no more than 2x its parse time. Lint
time includes its own parse (lint = scan + parse + every rule), so the ratio is
``lint_seconds / parse_seconds`` and the rules' share is ``ratio - 1``.

The dump is written by ``scripts/make_transformer.py`` (needs jax/jaxlib) unless ``--hlo`` names
an existing file. Timings are the best of ``--repeat`` runs (the machine is shared; the minimum is
the least noisy estimate). Per-rule times are printed too.

Usage::

    python benchmarks/lint_bench.py [--layers 48] [--hlo FILE] [--repeat 3] [--mesh 2x4]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


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

    t_parse, module = _best(lambda: parse_module(text, str(path)), ns.repeat)
    t_lint, findings = _best(lambda: lint_text(text, str(path), options), ns.repeat)
    t_scan, _ = _best(lambda: scan(text), ns.repeat)
    n_instr = sum(1 for _ in module.all_instructions())
    print(f"file: {path.name}  {len(text) / 2**20:.2f} MiB  {n_instr} instructions  cpus={os.cpu_count()}")
    print(f"parse: {t_parse:.3f} s   lint (incl. parse): {t_lint:.3f} s   ratio: {t_lint / t_parse:.2f} "
          f"(budget 2.00)   findings: {len(findings)}")
    print(f"  text scan (sharding sites, suppressions): {t_scan:.3f} s")
    ctx = build_context(text, str(path), options)
    for rule in all_rules():
        t, n = _best(lambda: sum(1 for _ in rule().evaluate(ctx)) if ctx.module is not None or rule.text_only else 0, 1)
        if t >= 0.01:
            print(f"  {rule.code} {rule.name}: {t:.3f} s ({n} findings)")
    return 0 if t_lint <= 2 * t_parse else 1


if __name__ == "__main__":
    sys.exit(main())
