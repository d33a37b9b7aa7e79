"""Where the Gemma cost graph's build CPU-s and bytes go, coarse (2x4 unrefined / 1-D) and refined (2x2x2) spaces."""
import sys, time, pickle, json, resource, hashlib, cProfile, pstats, io
import numpy as np
import ortools.sat.python.cp_model  # noqa
sys.setrecursionlimit(100000)
d = pickle.load(open("/work/notes/tying35/gemma.pkl", "rb"))
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.coarse import coarse_mesh
m, mesh = d["module"], d["mesh"]
which = sys.argv[1]
msh = coarse_mesh(mesh, m) if which == "coarse" else mesh
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
pr = cProfile.Profile(time.process_time) if len(sys.argv) > 2 else None
c0 = time.process_time()
if pr: pr.enable()
g = build_graph(m, msh, d.get("keep") or "io", None)
if pr: pr.disable()
cpu = time.process_time() - c0
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ef = g.edge_float
ent = sum(int(np.asarray(a).size) for a in ef)
by_id = {id(a): a for a in ef}
ent_id = sum(int(np.asarray(a).size) for a in by_id.values())
by_c = {}
for a in by_id.values():
    a = np.ascontiguousarray(a); by_c.setdefault((a.shape, hashlib.blake2b(a.tobytes(), digest_size=16).digest()), a)
ent_c = sum(a.size for a in by_c.values())
p = g.problem
pe = getattr(p, "edge_costs", None)
out = {"mesh": "x".join(map(str, msh.shape)), "cpu": round(cpu, 3), "phases_wall": {k: round(v, 3) for k, v in g.build_phases.items()},
       "nodes": len(g.nodes), "strategies": int(sum(len(x.strategies) for x in g.nodes)), "edges": len(ef),
       "entries": ent, "entries_distinct_objects": ent_id, "entries_distinct_content": ent_c, "distinct_objects": len(by_id), "distinct_content": len(by_c),
       "maxrss_mb_before": rss0 // 1024, "maxrss_mb_after": rss1 // 1024,
       "problem_edge_arrays": None if pe is None else [len(pe), len({id(x) for x in pe})]}
print(json.dumps(out))
if pr:
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(40); open(f"build_{which}.prof.txt", "w").write(s.getvalue())
