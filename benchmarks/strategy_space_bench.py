#!/usr/bin/env python3
"""Strategy-space size and graph-build time per module (BENCHMARKS.md "Strategy space").

For each module: parse, pick the mesh as the commands do (``DeviceMesh.for_module``; on older trees
without refinement the plain ``--mesh``), build the cost graph once (``hloshard.autoshard.build_graph``,
``--keep-shardings io``) and print, per op family (the opcode, with all elementwise opcodes as
``elementwise``), the number of strategy groups and the strategies summed over them, plus the build
time and the mesh used. Run it with ``PYTHONPATH`` on two trees to compare before / after::

    PYTHONPATH=src python benchmarks/strategy_space_bench.py --mesh 2x4 samples/*.pre.hlo
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time


def family(instr) -> str:
    from hloshard.strategy import elementwise

    ops = getattr(elementwise, "ELEMENTWISE", ())
    return "elementwise" if instr.opcode in ops else instr.opcode


def measure(path: str, mesh_spec: str | None) -> dict:
    from hloshard.autoshard import build_graph
    from hloshard.hlo import parse_file
    from hloshard.mesh import DeviceMesh

    module = parse_file(path)
    mesh = DeviceMesh.for_module(module, mesh_spec)
    t0 = time.perf_counter()
    graph = build_graph(module, mesh, keep="io")
    seconds = time.perf_counter() - t0
    groups = collections.Counter()
    strategies = collections.Counter()
    for g in graph.nodes:
        f = family(g.instr)
        groups[f] += 1
        strategies[f] += len(g.strategies)
    return {"module": path, "mesh": str(mesh), "mesh_described": getattr(mesh, "describe", lambda: str(mesh))(),
            "build_s": round(seconds, 2), "nodes": len(graph.nodes),
            "strategies": int(sum(strategies.values())),
            "edges": int(graph.problem.num_edges),
            "per_family": {k: [groups[k], strategies[k]] for k in sorted(groups)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="+")
    ap.add_argument("--mesh", default=None)
    ns = ap.parse_args(argv)
    for path in ns.modules:
        print(json.dumps(measure(path, ns.mesh), sort_keys=True))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
