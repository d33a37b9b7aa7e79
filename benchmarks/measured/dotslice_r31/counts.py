import sys, glob, os, json
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.autoshard import build_graph
from hloshard.mesh_setup import mesh_from_options
out = {}
for f in sorted(glob.glob("/work/wt/dotslice/samples/*.pre.hlo")):
    for ms in ("2x4", "2x2x2"):
        m = parse_file(f)
        mesh = mesh_from_options(m, ms, None, None, None)
        g = build_graph(m, mesh, "io", None)
        out[f"{os.path.basename(f)} {ms}"] = sum(len(n.strategies) for n in g.nodes)
print(json.dumps(out))
