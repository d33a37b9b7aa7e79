#!/usr/bin/env python3
"""Parse-speed benchmark: hloshard's HLO parser beside XLA's C++ parser on the same text.

By default the module is a 48-layer transformer training step after GSPMD sharding propagation
(about 3.4 MB, 17k instructions), generated with jax by ``scripts/make_transformer.py`` and cached in
the temp directory; ``--file`` takes any HLO text instead. XLA's time is jaxlib's
``hlo_module_from_text`` (``ParseAndReturnUnverifiedModule``, no verifier) in this process.
Times are the best of ``--repeat`` runs (CPU seconds of this process); the ratio is ours / XLA's.

Usage::

    python benchmarks/parse_bench.py                   # 48 layers, propagated dump
    python benchmarks/parse_bench.py --layers 12 --form pre
    python benchmarks/parse_bench.py --file samples/transformer_train_step.propagated.hlo
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def generated_module(layers: int, form: str) -> pathlib.Path:
    """Path of the cached ``transformer_<layers>l.<form>.hlo`` (generated with jax on first use)."""
    cache = pathlib.Path(tempfile.gettempdir()) / "hloshard-bench"
    path = cache / f"transformer_{layers}l.{form}.hlo"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "scripts"))
        import make_transformer  # noqa: E402  (needs jax: the 'xla' extra)

        print(f"generating a {layers}-layer transformer training step with jax ...", file=sys.stderr)
        make_transformer.main(["--layers", str(layers), "--out", str(cache)])
    return path


def best_time(fn, repeat: int) -> float:
    """Best CPU time (process time, seconds) of ``repeat`` runs: robust to other processes on the
    machine; both parsers are single-threaded, so CPU time is their cost."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", help="HLO text file to parse (default: a generated transformer)")
    ap.add_argument("--layers", type=int, default=48, help="layers of the generated transformer (default 48)")
    ap.add_argument("--form", choices=["propagated", "pre"], default="propagated",
                    help="which dump of the generated transformer (default propagated)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per parser; the best counts (default 3)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ns = ap.parse_args(argv)

    path = pathlib.Path(ns.file) if ns.file else generated_module(ns.layers, ns.form)
    text = path.read_text()

    from hloshard.hlo import parse_module, print_module
    from hloshard.hlo.parser import _parser

    t0 = time.perf_counter()
    _parser()  # grammar load + LALR table construction, once per process
    load = time.perf_counter() - t0
    module = parse_module(text, str(path))
    n_instr = sum(1 for _ in module.all_instructions())
    try:
        from jax._src.lib import xla_client as xc

        xla_parse = xc.hlo.hlo_module_from_text
        xla_parse(text)
    except ImportError:
        xla_parse = None
    # interleave the runs so that both parsers see the same machine load; keep the best of each
    ours = xla = printing = float("inf")
    for _ in range(ns.repeat):
        ours = min(ours, best_time(lambda: parse_module(text, str(path)), 1))
        if xla_parse is not None:
            xla = min(xla, best_time(lambda: xla_parse(text), 1))
        printing = min(printing, best_time(lambda: print_module(module), 1))
    if xla_parse is None:
        xla = None

    result = {"file": str(path), "bytes": len(text.encode()), "instructions": n_instr,
              "hloshard_parse_s": round(ours, 4), "hloshard_print_s": round(printing, 4),
              "grammar_load_s": round(load, 4), "xla_parse_s": None if xla is None else round(xla, 4),
              "ratio": None if xla is None else round(ours / xla, 2)}
    if ns.json:
        print(json.dumps(result))
        return 0
    print(f"module        {path.name}: {result['bytes'] / 1e6:.2f} MB, {n_instr} instructions")
    print(f"hloshard      parse {ours:.3f} s   ({n_instr / ours:,.0f} instructions/s; print {printing:.3f} s; "
          f"grammar load {load:.3f} s once)")
    if xla is None:
        print("XLA           jax/jaxlib not installed (pip install '.[xla]'): no comparison")
    else:
        print(f"XLA (C++)     parse {xla:.3f} s")
        print(f"ratio         {ours / xla:.1f}x XLA's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
