"""Dump the module after simplification-1's algsimp for a given HLO file and topology; print its entry."""
import sys, glob, os, tempfile, re
import numpy as np, jax, jax.extend
from jax._src import compiler
from jax._src.interpreters import mlir as jmlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir
from jax.experimental import topologies
path, topo_name = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 8
topo = topologies.get_topology_desc(topo_name, "tpu"); client = topo.devices[0].client
mod = xc.hlo.hlo_module_from_text(open(path).read())
bc = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=n, device_assignment=np.arange(n).reshape(1, n))
b = opts.executable_build_options; b.use_shardy_partitioner = False
dump = tempfile.mkdtemp(prefix="probe4_")
b.debug_options.xla_dump_to = dump; b.debug_options.xla_dump_hlo_pass_re = "algsimp"
with jmlir.make_ir_context():
    compiler.backend_compile_and_load(client, ir.Module.parse(bc), xc.DeviceList(tuple(topo.devices[:n])), opts, [])
f = sorted(glob.glob(dump + "/*simplification-1.after_algsimp*.txt"))[0]
t = open(f).read(); e = t[t.index("\nENTRY"):]
for l in e.splitlines():
    print(re.sub(r", metadata=\{[^}]*\}", "", l)[:230])
