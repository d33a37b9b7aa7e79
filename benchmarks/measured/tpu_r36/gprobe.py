"""Probe libtpu's bytes accessed for row gathers: slope over the id count -> bytes per gathered row.
usage: gprobe.py TOPO OUT.json  (configs in CONFIGS)"""
import sys, json, os
import numpy as np, jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
topo_name, out = sys.argv[1], sys.argv[2]
configs = json.loads(sys.argv[3])
topo = topologies.get_topology_desc(topo_name, "tpu")
mesh = Mesh(np.array(topo.devices[:1]).reshape(1), ("x",))
DT = {"f32": jnp.float32, "bf16": jnp.bfloat16, "s8": jnp.int8, "s32": jnp.int32, "f16": jnp.float16}
rows = []
for rws, width, dt, nids, idshape in configs:
    res = {}
    for mult in (1, 2):
        n = nids * mult
        ish = (n,) if idshape == "1d" else (n // 8, 8)
        def f(t, i):
            return jnp.take(t, i, axis=0, mode="clip")
        args = (jax.ShapeDtypeStruct((rws, width), DT[dt], sharding=NamedSharding(mesh, P())),
                jax.ShapeDtypeStruct(ish, jnp.int32, sharding=NamedSharding(mesh, P())))
        c = jax.jit(f).lower(*args).compile()
        ca = c.cost_analysis()
        ca = ca[0] if isinstance(ca, list) else ca
        res[mult] = dict(bytes=float(ca["bytes accessed"]), sec=float(ca.get("optimal_seconds", -1)))
        if mult == 1:
            open(os.path.join(os.path.dirname(out), f"g_{rws}_{width}_{dt}_{nids}_{idshape}.opt.txt"), "w").write(c.as_text())
    isz = jnp.dtype(DT[dt]).itemsize
    slope = (res[2]["bytes"] - res[1]["bytes"]) / nids
    r = dict(rows=rws, width=width, dtype=dt, nids=nids, idshape=idshape, b1=res[1]["bytes"], b2=res[2]["bytes"],
             per_id=slope, row_bytes=width * isz, factor=slope / (width * isz), sec1=res[1]["sec"], sec2=res[2]["sec"])
    rows.append(r); print(json.dumps(r), flush=True)
json.dump(rows, open(out, "w"), indent=1)
