# held-out check of AutoShardResult.check: the new user's T5 (round 14) under the plan's argument shardings
import os, sys, pickle, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, numpy as np, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
sys.path.insert(0, "/tmp/nu14"); import t5model as M
from hloshard.jax.api import AutoShardResult
from hloshard.jax.check import program
params = M.init_params(); b = M.batch()
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
f = lambda p, s, ti, to: jax.value_and_grad(M.loss_fn)(p, s, ti, to)
args = (params, *b)
leaves, in_tree = jax.tree_util.tree_flatten(args)
specs = pickle.load(open("/tmp/lead14/in_specs.pkl", "rb"))
in_sh = jax.tree_util.tree_unflatten(in_tree, [NamedSharding(mesh, P(*s)) for s in specs])
closed, out_struct = jax.make_jaxpr(f, return_shape=True)(*args)
out_tree = jax.tree_util.tree_structure(out_struct)
out_sh = jax.tree_util.tree_unflatten(out_tree, [NamedSharding(mesh, P())] * out_tree.num_leaves)
res = AutoShardResult(in_shardings=tuple(in_sh), out_shardings=out_sh, fn=program(closed, out_tree), constraints=[],
                      report={}, module=None, source_fn=f, program=(closed, in_tree, out_tree, {}, {}, {}))
t0 = time.monotonic()
rep = res.check(*args, float64=True)
print(rep)

print("seconds", round(time.monotonic() - t0, 1))

import numpy as np
from hloshard.jax.check import relative_error
with jax.enable_x64(True):
    fl = lambda fn: (lambda *a: tuple(jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_unflatten(in_tree, a)))))
    bare = jax.jit(fl(program(closed, out_tree, promote=True)))(*leaves)
    ref = jax.jit(fl(program(jax.make_jaxpr(fl(f))(*leaves), out_tree, promote=True)))(*leaves)
    direct = jax.jit(fl(f))(*[np.asarray(x, np.float64) if np.asarray(x).dtype == np.float32 else x for x in leaves])
    in_flat = jax.tree_util.tree_leaves(res.in_shardings)
    sh = jax.jit(fl(program(closed, out_tree, promote=True)), in_shardings=tuple(in_flat))(*[jax.device_put(x, s) for x, s in zip(leaves, in_flat)])
print("bare vs ref", max(relative_error(a, b) for a, b in zip(bare, ref)))
print("bare vs direct f64", max(relative_error(a, b) for a, b in zip(bare, direct)))
print("sharded promoted vs bare", max(relative_error(a, b) for a, b in zip(sh, bare)))
