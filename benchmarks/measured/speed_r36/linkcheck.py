import sys
from hloshard.load import load_module
from hloshard.mesh_setup import priced_mesh
from hloshard.devices import get_profile
from hloshard.mesh import refine_for_module
from hloshard.autoshard.coarse import coarse_mesh, rung_mesh
for name in sys.argv[1:]:
    m = load_module(f"samples/{name}.pre.hlo") if not name.startswith("/") else load_module(name)
    for spec, marks in (("2x4", ["dcn", None]), ("2x4", None), ("2x2x2", ["dcn", None, None])):
        dm, _ = priced_mesh(m, spec, get_profile("h100-sxm"), marks=marks)
        dm = refine_for_module(dm, m) if not dm.is_refined else dm
        c = coarse_mesh(dm, m)
        r = rung_mesh(dm, m)
        print(name, spec, marks, "fine", dm.shape, dm.beta, "coarse", None if c is None else (c.shape, c.beta),
              "rung", None if r is None else r.shape)
