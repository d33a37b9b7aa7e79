import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("KERAS_BACKEND", "jax")
import importlib, numpy as np, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mod = importlib.import_module(sys.argv[1]); variant = sys.argv[2]
step, args, names = mod.build()
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
specs = mod.expert_specs(names, [p.shape for p in args[0]])
sh = [NamedSharding(mesh, s) for s in specs]
def batch_spec(a): return P("data") if a.ndim >= 1 else P()
ins = (sh, sh, sh, NamedSharding(mesh, P())) + tuple(NamedSharding(mesh, batch_spec(a)) for a in args[4:])
kw = {}
if variant == "full": a = jax.device_put(args, ins)
elif variant == "params_only": a = (jax.device_put(args[0], sh),) + tuple(args[1:])
elif variant == "nostate": a = jax.device_put(args, ins); kw["state"] = {}
elif variant == "blank": a = args
import hloshard.autoshard as api
from hloshard.autoshard.build import build_graph
def spy(module, dmesh, **k):
    g = build_graph(module, dmesh, k.get("keep"))
    print("RESULT", sys.argv[1], variant, "nodes", g.problem.num_nodes, "follows", len(g.follows), "ties", len(g.ties), "cut", len(getattr(g, "cut_follows", []) or []))
    raise SystemExit(0)
api.solve_module = spy
from hloshard.jax import auto_shard
auto_shard(step, *a, mesh=mesh, time_limit=20, deterministic=True, **kw)
