"""Which dots does libtpu's algebraic simplifier swap (dot(a,b) -> transpose(dot(b,a))) on v6e vs v5e? one device."""
import sys, os, glob, re, tempfile, json
import numpy as np, jax, jax.extend
from jax._src import compiler
from jax._src.interpreters import mlir as jmlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir
from jax.experimental import topologies
CASES = {
 # name: (lhs shape, rhs shape, dnums, transpose perm or None)
 "moe_w2x": ("f32[8,256,128]", "f32[8,32,8,256]", "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={2}, rhs_contracting_dims={3}", [2,3,0,1]),
 "moe_w2x_not": ("f32[8,256,128]", "f32[8,32,8,256]", "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={2}, rhs_contracting_dims={3}", None),
 "mm_wx": ("f32[256,128]", "f32[32,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", None),
 "mm_xw": ("f32[32,256]", "f32[256,128]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}", None),
 "mm_wx_big": ("f32[256,512]", "f32[64,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", None),
 "mm_wx_t": ("f32[256,128]", "f32[32,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", [1,0]),
 "bmm_wx": ("f32[8,256,128]", "f32[8,32,256]", "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}", None),
 "bmm_xw": ("f32[8,32,256]", "f32[8,256,128]", "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}", None),
 "mm_wx_d64": ("f32[256,64]", "f32[32,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", None),
 "mm_wx_n512": ("f32[256,128]", "f32[512,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", None),
 "mm_wx_bf16": ("bf16[256,128]", "bf16[32,256]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}", None),
 "moe_x_w1": ("f32[8,32,128]", "f32[8,128,256]", "lhs_contracting_dims={2}, rhs_contracting_dims={1}", None),
}
def shp(s):
    dt, d = re.match(r"(\w+)\[([\d,]*)\]", s).groups(); return dt, [int(x) for x in d.split(",")]
def out_shape(l, r, dn):
    ld, ls = shp(l); rd, rs = shp(r)
    g = lambda k: [int(x) for x in (re.search(k + r"=\{([\d,]*)\}", dn).group(1).split(",") if re.search(k + r"=\{([\d,]*)\}", dn) else [])]
    lb, lc, rb, rc = g("lhs_batch_dims"), g("lhs_contracting_dims"), g("rhs_batch_dims"), g("rhs_contracting_dims")
    o = [ls[i] for i in lb] + [ls[i] for i in range(len(ls)) if i not in lb + lc] + [rs[i] for i in range(len(rs)) if i not in rb + rc]
    return ld, o
def module(l, r, dn, perm):
    dt, o = out_shape(l, r, dn)
    os_ = f"{dt}[{','.join(map(str, o))}]"
    body = f"  a = {l} parameter(0)\n  b = {r} parameter(1)\n  d = {os_} dot(a, b), {dn}\n"
    if perm:
        t = [o[p] for p in perm]
        body += f"  ROOT t = {dt}[{','.join(map(str, t))}] transpose(d), dimensions={{{','.join(map(str, perm))}}}\n"
        res = f"{dt}[{','.join(map(str, t))}]"
    else:
        body = body.replace("  d = ", "  ROOT d = "); res = os_
    return f"HloModule m, entry_computation_layout={{({l}, {r})->{res}}}\n\nENTRY e {{\n{body}}}\n"
topo_name = sys.argv[1]
topo = topologies.get_topology_desc(topo_name, "tpu")
client = topo.devices[0].client
for name, (l, r, dn, perm) in CASES.items():
    text = module(l, r, dn, perm)
    dump = tempfile.mkdtemp(prefix=f"probe_{name}_")
    mod = xc.hlo.hlo_module_from_text(text)
    bc = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=1, device_assignment=np.arange(1).reshape(1, 1))
    opts.executable_build_options.debug_options.xla_dump_to = dump
    opts.executable_build_options.debug_options.xla_dump_hlo_pass_re = "algsimp"
    try:
        with jmlir.make_ir_context():
            exe = compiler.backend_compile_and_load(client, ir.Module.parse(bc), xc.DeviceList(tuple(topo.devices[:1])), opts, [])
    except Exception as e:
        print(name, "ERR", str(e)[:200]); continue
    fs = sorted(glob.glob(dump + "/*after_algsimp*.txt")) or sorted(glob.glob(dump + "/*algsimp*"))
    first = None
    for f in fs:
        t = open(f).read()
        dots = [ln.strip() for ln in t.splitlines() if " dot(" in ln]
        if dots:
            first = (os.path.basename(f), dots[0][:220]); break
    print(name, len(fs), first, flush=True)
