import sys, glob, os, tempfile, re
sys.path.insert(0, os.environ.get("WT", ".") + "/src")
import numpy as np, jax, jax.extend
from jax._src import compiler
from jax._src.interpreters import mlir as jmlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir
from jax.experimental import topologies
from hloshard.xla_cost import copies_as_sharding_calls
path, topo_name = sys.argv[1], sys.argv[2]
topo = topologies.get_topology_desc(topo_name, "tpu"); client = topo.devices[0].client
text = open(path).read()
mod = xc.hlo.hlo_module_from_text(copies_as_sharding_calls(text))
bc = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=8, device_assignment=np.arange(8).reshape(1, 8))
b = opts.executable_build_options; b.use_shardy_partitioner = False; b.allow_spmd_sharding_propagation_to_parameters = [False]
dump = tempfile.mkdtemp(prefix="probe2_")
b.debug_options.xla_dump_to = dump; b.debug_options.xla_dump_hlo_pass_re = "algsimp|tpu-spmd-partitioning"
with jmlir.make_ir_context():
    compiler.backend_compile_and_load(client, ir.Module.parse(bc), xc.DeviceList(tuple(topo.devices[:8])), opts, [])
prev = None
for f in sorted(glob.glob(dump + "/*.txt")):
    dots = tuple(re.sub(r", metadata.*", "", l.strip())[:200] for l in open(f) if " dot(" in l)
    if dots != prev:
        print("--", os.path.basename(f)[:110]); print("\n".join(dots)); prev = dots
    if "after_tpu-spmd-partitioning" in f: break
