"""a2a_probe.py TOPOLOGY OUT.json CONFIGS_JSON : small jax programs, each one resharding all-to-all of a value
produced by ROOT (fusion: x*2+1 of a parameter; param: the parameter itself; allreduce: a dot whose contracting
dim is sharded over the other axis), per-device minor width W (lanes), dtype; compiled ahead of time with libtpu;
per program the all-to-alls, the relayout kernels around them (a2a_obs.analyse) and cost_analysis."""
import sys, json, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np, jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from a2a_obs import analyse
topo = topologies.get_topology_desc(sys.argv[1], "tpu")
out = []
for cfg in json.loads(sys.argv[3]):
    root, W, dt = cfg["root"], cfg["W"], cfg["dtype"]
    k = cfg.get("k", 4); B = cfg.get("B", 0)
    R = cfg["R"] if "R" in cfg else k * cfg["rows"]
    mesh = Mesh(np.array(topo.devices[:8]).reshape(8 // k, k), ("d", "m"))
    dtype = getattr(jnp, dt)
    C = k * W   # per-device minor before the exchange: C/k = W
    if root == "allreduce":
        K = 256
        a = jax.ShapeDtypeStruct((R, K), dtype, sharding=NamedSharding(mesh, P(None, "d")))
        b = jax.ShapeDtypeStruct((K, C), dtype, sharding=NamedSharding(mesh, P("d", "m")))
        def f(a, b):
            y = jnp.dot(a, b, preferred_element_type=dtype)
            y = jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P(None, "m")))
            return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("m", None))) * 3
        args = (a, b)
    else:
        shp, src, dst = ((R, C), P(None, "m"), P("m", None)) if not B else ((B, R, C), P(None, None, "m"), P(None, "m", None))
        a = jax.ShapeDtypeStruct(shp, dtype, sharding=NamedSharding(mesh, src))
        def f(a):
            y = a * 2 + 1 if root == "fusion" else a
            return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, dst)) * 3
        args = (a,)
    try:
        c = jax.jit(f).lower(*args).compile()
        ca = c.cost_analysis(); ca = ca[0] if isinstance(ca, list) else ca
        rows = analyse(c.as_text())
        if os.environ.get("TXT"): open(os.environ["TXT"] + "_" + "_".join(f"{k}{v}" for k, v in cfg.items()) + ".txt", "w").write(c.as_text())
        out.append(dict(cfg=cfg, a2a=rows, bytes=ca.get("bytes accessed"), optimal_seconds=ca.get("optimal_seconds")))
        r = rows[0] if rows else {}
        print(cfg, len(rows), r.get("shape"), r.get("root"), [p["op"] for p in r.get("pre", [])], [p["op"] for p in r.get("post", [])], flush=True)
    except Exception as exc:
        out.append(dict(cfg=cfg, error=str(exc)[:300])); print(cfg, "ERR", str(exc)[:200], flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
