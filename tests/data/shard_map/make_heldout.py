"""Held-out shard_maps of round 38 (written after the Shardy reader): `python make_heldout.py [gspmd]` writes h_*.hlo;
sm_partdata.hlo and sm_tuple.hlo here are its h_partdata.hlo and h_tuple.hlo (Shardy)."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
x = jnp.ones((16, 32)); w = jnp.ones((32, 64))
ins = (NamedSharding(mesh, P("data", None)), NamedSharding(mesh, P(None, "model")))

# h1: partly manual over "data": each data shard's mean removed (psum over data), model left to the partitioner
def h_partdata(x, w):
    def body(xs, ws):
        m = jax.lax.pmean(xs.mean(0, keepdims=True), "data")
        return (xs - m) @ ws
    y = shard_map(body, mesh=mesh, in_specs=(P("data", None), P(None, None)), out_specs=P("data", None),
                  axis_names={"data"})(x, w)
    return jnp.tanh(y).sum(1)

# h2: two results from one body (tuple out), then a second body reading both
def h_tuple(x, w):
    def b1(xs, ws):
        y = xs @ ws
        return jax.lax.psum(y, "model"), jax.lax.psum(xs.sum(1), "model")
    y, s = shard_map(b1, mesh=mesh, in_specs=(P("data", "model"), P("model", None)),
                     out_specs=(P("data", None), P("data")))(x, w)
    def b2(ys, ss):
        return jax.lax.pmax(ys * ss[:, None], "data")
    z = shard_map(b2, mesh=mesh, in_specs=(P("data", "model"), P("data")), out_specs=P(None, "model"))(y, s)
    return z + 1.0

# h3: a collective over both axes (all_gather) and a scan inside the body
def h_both_scan(x, w):
    def body(xs, ws):
        g = jax.lax.all_gather(xs, ("data", "model"), tiled=True)      # [16*8? ...] gathered rows
        def step(h, _):
            return jnp.tanh(h @ ws[:, :32] + h), None
        h, _ = jax.lax.scan(step, g[:, :32], None, length=3)
        return jax.lax.psum(h.sum(0), ("data", "model"))
    y = shard_map(body, mesh=mesh, in_specs=(P("data", None), P(None, None)), out_specs=P(None))(x, w)
    return y * 2.0

# h4: a gradient through a shard_map (jax transposes it into another)
def h_grad(x, w):
    def f(w):
        def body(xs, ws):
            return jax.lax.psum(xs @ ws, "model")
        y = shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))(x, w)
        return jnp.mean(jnp.tanh(y) ** 2)
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

FUNCS = {"h_partdata": h_partdata, "h_tuple": h_tuple, "h_both_scan": h_both_scan, "h_grad": h_grad}
if __name__ == "__main__":
    gspmd = len(sys.argv) > 1 and sys.argv[1] == "gspmd"
    if gspmd:
        jax.config.update("jax_use_shardy_partitioner", False)
    for name, f in FUNCS.items():
        low = jax.jit(f, in_shardings=ins).lower(x, w)
        open(f"{name}{'_gspmd' if gspmd else ''}.hlo", "w").write(low.as_text(dialect="hlo"))
        print(name, "ok", jax.jit(f, in_shardings=ins)(x, w) is not None)
