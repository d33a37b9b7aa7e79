"""Gemma's refined (2x2x2) and coarse (2x4) solver problems: how many of the edge matrices (and their entries) are
distinct by content -- what sharing structurally equal edges (issue 26's "a cost graph that fits") would keep."""
import sys, hashlib, collections
import numpy as np
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.coarse import coarse_mesh
m = parse_module(open("gemma.hlo").read(), "gemma.hlo")
mesh = DeviceMesh.for_module(m, "batch=2,model=4")
for which, mm in (("coarse 2x4", coarse_mesh(mesh, m)), ("refined 2x2x2", mesh)):
    g = build_graph(m, mm, "io", None)
    p = g.solver_problem
    seen = {}
    total = 0
    for e in p.edge_costs:
        a = np.ascontiguousarray(e)
        h = hashlib.blake2b(a.tobytes() + str(a.shape).encode() + str(a.dtype).encode(), digest_size=16).hexdigest()
        seen.setdefault(h, a.size)
        total += a.size
    nodes = collections.Counter()
    for i, c in enumerate(p.node_costs):
        a = np.ascontiguousarray(c)
        nodes[hashlib.blake2b(a.tobytes(), digest_size=16).hexdigest()] += 1
    print(which, "nodes", p.num_nodes, "distinct node-cost vectors", len(nodes), "edges", len(p.edge_costs),
          "distinct matrices", len(seen), "entries", total, "distinct entries", sum(seen.values()),
          f"({sum(seen.values()) / total:.3f})", flush=True)
