"""Writes the shard_map exports of this folder (jax 0.10.2, 8 CPU devices): `python make_shard_maps.py` (Shardy, jax's
default) and `python make_shard_maps.py gspmd` (jax_use_shardy_partitioner=False); tests/test_sdy_manual.py reads them."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
gspmd = len(sys.argv) > 1 and sys.argv[1] == "gspmd"
if gspmd:
    jax.config.update("jax_use_shardy_partitioner", False)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
x = jnp.ones((16, 32)); w = jnp.ones((32, 64))
ins = (NamedSharding(mesh, P("data", "model")), NamedSharding(mesh, P("model", None)))
suf = "_gspmd" if gspmd else ""
def full(x, w):
    def body(xs, ws):
        return jax.lax.psum(xs @ ws, "model")
    y = shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))(x, w)
    return jnp.tanh(y)
def partial(x, w):
    def body(xs, ws):
        return jax.lax.psum(xs @ ws, "model")
    y = shard_map(body, mesh=mesh, in_specs=(P(None, "model"), P("model", None)), out_specs=P(None, None), axis_names={"model"})(x, w)
    return jnp.tanh(y)
def two(x, w):
    def b1(xs, ws):
        return jax.lax.psum(xs @ ws, "model")
    def b2(ys):
        return jax.lax.pmean(jnp.tanh(ys), "data")
    y = shard_map(b1, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))(x, w)
    z = shard_map(b2, mesh=mesh, in_specs=P("data", "model"), out_specs=P(None, "model"))(y * 2.0)
    return z.sum(0)
def both(x, w):
    def body(xs, ws):
        return jax.lax.psum(xs @ ws, ("data", "model"))
    y = shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P(None, None))(x, w)
    return jnp.tanh(y) @ w.T
for name, f in [("full", full), ("partial", partial), ("two", two), ("both", both)]:
    low = jax.jit(f, in_shardings=ins).lower(x, w)
    open(f"sm_{name}{suf}.hlo", "w").write(low.as_text(dialect="hlo"))
print(jax.__version__)
