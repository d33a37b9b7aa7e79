#!/usr/bin/env python3
"""How long ``auto_shard``'s main thread waits on XLA children (round 27, helper speed).

Runs ``benchmarks/real_models.py --child MODEL PLAN ...`` in this process with the main thread's blocking calls on
XLA's sharding propagation timed -- :func:`hloshard.partition_specs.xla_propagate` (a child run to its end) and
:meth:`hloshard.partition_specs.PendingPropagation.result` (a child started before, read) -- and prints, after the
row, ``WAITS {"waits": [[call, seconds], ...], "total": seconds, "load": 1-minute load}``.  Those seconds are the
memory guard's critical path through its XLA children (wall seconds: noisy under load).

Usage (from the repository root, hloshard importable)::

    KERAS_BACKEND=jax python benchmarks/guard_waits.py --child gemma auto --time-limit 10 --float64-plans '' --steps 0
"""

import atexit
import json
import os
import pathlib
import runpy
import sys
import threading
import time

import hloshard.partition_specs as ps

ROOT = pathlib.Path(__file__).resolve().parent.parent
WAITS: list = []


def _timed(name, f):
    def call(*a, **k):
        t = time.monotonic()
        try:
            return f(*a, **k)
        finally:
            if threading.current_thread() is threading.main_thread():
                WAITS.append((name, round(time.monotonic() - t, 2)))
    return call


def _report() -> None:
    print("WAITS " + json.dumps({"waits": WAITS, "total": round(sum(w for _, w in WAITS), 2),
                                 "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    ps.xla_propagate = _timed("xla_propagate", ps.xla_propagate)
    ps.PendingPropagation.result = _timed("pending.result", ps.PendingPropagation.result)
    atexit.register(_report)
    sys.argv = [str(ROOT / "benchmarks" / "real_models.py")] + sys.argv[1:]
    sys.path.insert(0, str(ROOT))
    runpy.run_path(str(ROOT / "benchmarks" / "real_models.py"), run_name="__main__")
