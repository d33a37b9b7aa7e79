import sys, os, pathlib
sys.path[:0] = ["/work/wt/tpurows/src", "/work/wt/tpurows"]
from hloshard.hlo import parse_module
from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.xla_compare import predicted_collectives
dev, g, name, plan = sys.argv[1:5]
d = pathlib.Path("/work/notes/steptime31/plans", dev, g)
m = parse_module((d / f"{name}.{plan}.hlo").read_text())
mesh = (d / f"{name}.mesh").read_text().strip()
dm, scale, _ = timed_mesh_from_options(m, mesh, None, None, None, dev)
for label, dv in (("view(v5e rule)", None), ("view(" + dev + ")", dev)):
    v, f = tpu_partitioned_view(m, dv)
    out = {}
    for recs in predicted_collectives(evaluate_module(v, dm)).values():
        for r in recs:
            k = r.kind; c = out.setdefault(k, [0, 0.0]); c[0] += r.executions; c[1] += r.ring_bytes * r.executions
    print(label, f, {k: (round(n, 1), int(b)) for k, (n, b) in sorted(out.items())})
