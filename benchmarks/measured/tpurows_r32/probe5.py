"""For each HLO file: the dots v6e's simplification-1 algsimp swaps and v5e's does not (or the reverse), with the
operands' producers in the written module. Usage: probe5.py FILE... (each compiled at 8 partitions, GSPMD)."""
import sys, glob, os, tempfile, re, json
sys.path.insert(0, os.environ.get("WT", "/work/wt/tpurows") + "/src")
import numpy as np, jax, jax.extend
from jax._src import compiler
from jax._src.interpreters import mlir as jmlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir
from jax.experimental import topologies
from hloshard.xla_cost import copies_as_sharding_calls
DOT = re.compile(r"%([\w.\-]+) = (\S+) dot\(%([\w.\-]+), %([\w.\-]+)\)")
OPN = re.compile(r'op_name="([^"]*)"')
def after_algsimp(text, topo_name):
    topo = topologies.get_topology_desc(topo_name, "tpu"); client = topo.devices[0].client
    mod = xc.hlo.hlo_module_from_text(copies_as_sharding_calls(text))
    bc = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=8, device_assignment=np.arange(8).reshape(1, 8))
    b = opts.executable_build_options; b.use_shardy_partitioner = False; b.allow_spmd_sharding_propagation_to_parameters = [False]
    dump = tempfile.mkdtemp(prefix="probe5_")
    b.debug_options.xla_dump_to = dump; b.debug_options.xla_dump_hlo_pass_re = "algsimp"
    with jmlir.make_ir_context():
        compiler.backend_compile_and_load(client, ir.Module.parse(bc), xc.DeviceList(tuple(topo.devices[:8])), opts, [])
    fs = sorted(glob.glob(dump + "/*simplification-1.after_algsimp*.txt"))
    before = sorted(glob.glob(dump + "/*simplification-1.*before_algsimp*.txt"))
    return open(before[0]).read() if before else "", open(fs[0]).read()
def dots(t):
    out = {}
    for l in t.splitlines():
        m = DOT.search(l)
        if m:
            n = OPN.search(l)
            out.setdefault((n.group(1) if n else m.group(1)) + "|" + m.group(2).split("{")[0] if False else (n.group(1) if n else m.group(1)), []).append((m.group(1), m.group(3), m.group(4), m.group(2)))
    return out
def producers(t):
    p = {}
    for l in t.splitlines():
        m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (?:\(.*?\)|\S+) ([\w\-]+)\(", l)
        if m: p[m.group(1)] = m.group(2)
    return p
for f in sys.argv[1:]:
    text = open(f).read()
    b6, a6 = after_algsimp(text, "v6e:2x4"); _, a5 = after_algsimp(text, "v5e:2x4")
    d6, d5, pb = dots(a6), dots(a5), producers(b6)
    d0 = dots(b6)
    for k in d0:
      for j, o in enumerate(d0[k]):
        s6 = d6.get(k, [])[j:j+1]; s5 = d5.get(k, [])[j:j+1]
        sw6 = bool(s6) and (s6[0][1], s6[0][2]) != (o[1], o[2]) and s6[0][1] == o[2]
        sw5 = bool(s5) and (s5[0][1], s5[0][2]) != (o[1], o[2]) and s5[0][1] == o[2]
        print(f"{os.path.basename(f)[:34]:34} {o[0][-22:]:22} v6e {'SWAP' if sw6 else 'keep' if s6 else 'gone'} v5e {'SWAP' if sw5 else 'keep' if s5 else 'gone'} lhs {pb.get(o[1],'?')}:{o[1][:18]} rhs {pb.get(o[2],'?')}:{o[2][:18]} {o[3]}", flush=True)
