import os, sys
os.environ["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
import numpy as np, jax
from jax.experimental import topologies
from jax.sharding import Mesh
topo = topologies.get_topology_desc("v5e:2x4", "tpu")
import heldout_models as hm
hm.mesh = Mesh(np.array(topo.devices).reshape(2, 4), ("data", "model"))
fn, args = hm.MODELS[sys.argv[1]]()
jax.config.update("jax_use_shardy_partitioner", False)
c = jax.jit(fn).lower(*args).compile({"xla_dump_to": sys.argv[2], "xla_dump_hlo_pass_re": ".*"})
m = c.memory_analysis()
print("argument", m.argument_size_in_bytes, "output", m.output_size_in_bytes, "temp", m.temp_size_in_bytes, "alias", m.alias_size_in_bytes)
