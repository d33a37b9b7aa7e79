import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import gnconv_model as mod, xlacount
jax.config.update("jax_use_shardy_partitioner", False)
step, args, names = mod.build()
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
specs = mod.expert_specs(names, [p.shape for p in args[0]])
sh = [NamedSharding(mesh, s) for s in specs]
ins = (sh, sh, sh, NamedSharding(mesh, P()), NamedSharding(mesh, P("data")), NamedSharding(mesh, P("data")))
outs = (NamedSharding(mesh, P()), sh, sh, sh, NamedSharding(mesh, P()))
comp = jax.jit(step, in_shardings=ins, out_shardings=outs).lower(*args).compile()
txt = comp.as_text()
print("GSPMD expert", xlacount.count(txt), xlacount.mem(comp))
