import glob, sys
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.coarse import coarse_mesh
for path in sorted(glob.glob("samples/*.hlo")) + sys.argv[1:]:
    try:
        m = parse_module(open(path).read(), path)
        out = []
        for s in ["8", "2x4", "4x2", "2x2x2"]:
            mesh = DeviceMesh.for_module(m, s)
            out.append((s, str(mesh), coarse_mesh(mesh, m) is not None))
        reps = {}
        changed = False
        for s, internal, has in out:
            if internal in reps:
                if not reps[internal][1] and has:
                    changed = True
            else:
                reps[internal] = (s, has)
        print(path, "CHANGES" if changed else "-", out)
    except Exception as e:
        print(path, "ERR", type(e).__name__, str(e)[:100])
