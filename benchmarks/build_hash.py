#!/usr/bin/env python3
"""The cost graph's fingerprint and build CPU seconds, to check that a faster build builds the same graph.

For each module (``samples/NAME.pre.hlo`` and any paths given) and each device (none, ``h100-sxm``,
``tpu-v5e``), the mesh of ``hloshard solve --mesh M [--device D]`` (:func:`hloshard.mesh_setup.timed_mesh_from_options`,
memory budget defaulted as the CLI does) and :func:`hloshard.autoshard.build.build_graph` on it
(keep 'io', no deadline).  The fingerprint is SHA-256 over, in node order: each node's strategies'
``(name, compute, comm, memory, flops)`` (floats by ``float.hex``), then the integer problem's arrays
(intervals, node costs, node usages, edge list, edge cost matrices: dtype, shape and raw bytes of each),
``cost_scale`` (hex), then each float edge matrix (``graph.edge_float``: dtype, shape, bytes).  Equal
fingerprints: the solver sees the same problem, and every value a report prints from the strategies is the
same.  ``--seconds``: the build's ``time.process_time()`` (CPU seconds, parse excluded), ``--repeat`` runs
per (module, device), alternated over devices.

Usage::

    python benchmarks/build_hash.py [--mesh 2x4] [--devices none,h100-sxm,tpu-v5e] [--only NAME] [--seconds]
                                    [--repeat 3] [--no-samples] [extra.hlo ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _arr(h, a) -> None:
    import numpy as np

    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def fingerprint(graph) -> str:
    """SHA-256 hex of ``graph``'s strategies, integer problem and float edge matrices (module docstring)."""
    h = hashlib.sha256()
    for g in graph.nodes:
        h.update(f"node {len(g.strategies)}".encode())
        for s in g.strategies:
            fl = "None" if s.flops is None else float(s.flops).hex()
            h.update(f"{s.name}|{float(s.compute).hex()}|{float(s.comm).hex()}|{s.memory}|{fl};".encode())
    p = graph.problem
    _arr(h, p.intervals)
    for a in p.node_costs:
        _arr(h, a)
    for a in p.node_usages:
        _arr(h, a)
    _arr(h, p.edges)
    for a in p.edge_costs:
        _arr(h, a)
    h.update(float(p.cost_scale).hex().encode())
    h.update(str(p.usage_limit).encode())
    for a in graph.edge_float:
        _arr(h, a)
    return h.hexdigest()


def build(path: pathlib.Path, mesh: str, device: str | None):
    """``(graph, cpu_seconds)``: the module parsed, its mesh made, then the build timed."""
    from hloshard.autoshard.build import build_graph
    from hloshard.load import load_module
    from hloshard.mesh_setup import timed_mesh_from_options

    module = load_module(str(path))
    dmesh, _scale, budget = timed_mesh_from_options(module, mesh, None, None, None, device)
    t0 = time.process_time()
    graph = build_graph(module, dmesh, "io", budget)
    return graph, time.process_time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--devices", default="none,h100-sxm,tpu-v5e")
    ap.add_argument("--only")
    ap.add_argument("--no-samples", action="store_true")
    ap.add_argument("--seconds", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    paths = [] if args.no_samples else sorted((ROOT / "samples").glob("*.pre.hlo"))
    paths = [p for p in paths if ".shardy." not in p.name]
    if args.only:
        paths = [p for p in paths if p.name.startswith(args.only + ".")]
    paths += [pathlib.Path(p) for p in args.paths]
    devices = [None if d == "none" else d for d in args.devices.split(",")]
    for path in paths:
        secs: dict = {d: [] for d in devices}
        prints: dict = {}
        for _ in range(args.repeat):
            for d in devices:
                graph, s = build(path, args.mesh, d)
                secs[d].append(s)
                prints[d] = fingerprint(graph)
        for d in devices:
            line = f"{path.name:36s} {d or 'none':9s} {prints[d][:16]}"
            if args.seconds:
                line += "  cpu " + " ".join(f"{s:.2f}" for s in secs[d])
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
