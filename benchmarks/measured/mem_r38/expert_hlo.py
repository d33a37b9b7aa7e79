# the keras-hub Gemma train step's expert layout (real_models.py's), lowered to HLO text for `hloshard cost --xla`
import sys
sys.path.insert(0, "benchmarks")
import real_models as R
R.setup_child_env()
import hloshard.jax  # noqa: F401  (before keras-hub)
import ortools.sat.python.cp_model  # noqa: F401
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
lm, bb, batch, seq = R.build("gemma")
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = R.example(lm, batch, seq)
experts = R.expert_specs(lm, bb, mesh)
step = R.make_step(lm)
named = lambda s: NamedSharding(mesh, s)
psh = {k: named(experts[k]) for k in params}
dsh = {k: named(P("batch")) for k in data}
f = jax.jit(step, in_shardings=(psh, dsh), out_shardings=(named(P()), psh))
open(sys.argv[1], "w").write(f.lower(params, data).as_text(dialect="hlo"))
print("ok")
