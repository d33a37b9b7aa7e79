"""Dump the module auto_shard solves for keras-hub Gemma (real_models' config), with its mesh and ties, then stop."""
import sys, os, time, json, pickle
sys.path.insert(0, "/work/wt/tying")
import benchmarks.real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh
import hloshard.jax.api as A
from hloshard.hlo import print_module
OUT = sys.argv[1]
class Stop(Exception):
    pass
def grab(module, dmesh, **kw):
    open(OUT + ".hlo", "w").write(print_module(module))
    import sys as _s; _s.setrecursionlimit(100000); pickle.dump({"module": module, "mesh": dmesh, "keep": kw.get("keep")}, open(OUT + ".pkl", "wb"))
    raise Stop()
A.solve_module = grab
name = sys.argv[2] if len(sys.argv) > 2 else "gemma"
lm, bcls, batch, seq = rm.build(name)
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, batch, seq)
ab = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
args = ({k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
try:
    A.auto_shard(step, *args, mesh=mesh, keep_shardings="io", time_limit=10, with_constraints=False, deterministic=True, memory_guard=False)
except Stop:
    print("dumped")
