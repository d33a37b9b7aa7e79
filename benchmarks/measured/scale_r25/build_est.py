"""Builds MODULE on each MESH (one process, in order) and prints per build: wall and CPU seconds, strategies,
edges, the groups shared / built, the layouts sum (coarse.layout_counts), RSS, and the 12 largest inclusive
sampled hloshard functions.  usage: build_est.py MODULE MESH [MESH ...]"""
import sys, time, threading, os, collections, json
from hloshard.hlo.parser import parse_file
from hloshard.mesh_setup import mesh_from_options
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.coarse import layout_counts, build_work
def rss():
    for l in open('/proc/self/status'):
        if l.startswith('VmRSS'): return int(l.split()[1])//1024
main = threading.get_ident(); samples = []; on = [False]
def watch():
    while True:
        if on[0]:
            fr = sys._current_frames().get(main); names = set()
            while fr is not None:
                co = fr.f_code
                if 'hloshard' in co.co_filename:
                    names.add(f"{os.path.basename(co.co_filename)}:{co.co_name}")
                fr = fr.f_back
            samples.append(names)
        time.sleep(0.05)
threading.Thread(target=watch, daemon=True).start()
m = parse_file(sys.argv[1])
for spec in sys.argv[2:]:
    mesh = mesh_from_options(m, spec, None, None, None)
    lay = build_work(layout_counts(m, mesh))
    samples.clear(); on[0] = True
    t0 = time.monotonic(); c0 = time.process_time()
    g = build_graph(m, mesh)
    w, c = time.monotonic() - t0, time.process_time() - c0
    on[0] = False
    inc = collections.Counter()
    for s in samples:
        for n in s: inc[n] += 0.05
    row = dict(module=os.path.basename(sys.argv[1]), mesh=spec, wall=round(w, 2), cpu=round(c, 2), layouts=lay,
               strategies=int(g.problem.strategy_counts.sum()), edges=int(g.problem.num_edges),
               distinct_matrices=len({id(x) for x in g.problem.edge_costs}),
               distinct_entries=int(sum(x.size for x in {id(x): x for x in g.problem.edge_costs}.values())),
               shared_groups=getattr(g, "shared_groups", None), rss=rss(),
               top=[(n, round(s, 2)) for n, s in inc.most_common(14)])
    print(json.dumps(row), flush=True)
    del g
