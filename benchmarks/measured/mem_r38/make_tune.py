# all-to-all reshards in four contexts (tuning set for the CPU all-to-all rule)
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
S = lambda *s: NamedSharding(mesh, P(*s))
wsc = jax.lax.with_sharding_constraint
N, D = 256, 1024

def a_dies(x):                       # source dies at the all-to-all
    y = wsc(jnp.tanh(x), S(None, ("data", "model")))
    return jnp.exp(y) * 2.0

def b_lives(x):                      # source read after the all-to-all
    h = jnp.tanh(x)
    y = wsc(h, S(None, ("data", "model")))
    s = jnp.sum(jnp.exp(y), axis=1, keepdims=True)   # rows whole per device: a local reduce
    s = wsc(s, S(("data", "model"), None))
    return h * s

def c_output(x):                     # the all-to-all's result is the output
    return wsc(jnp.tanh(x) * 3.0, S(None, ("data", "model")))

def d_loop(x, w):                    # an all-to-all each trip, the state resharded back
    def body(i, c):
        y = wsc(c, S(None, ("data", "model")))
        y = jnp.tanh(y) * 0.5
        return wsc(y, S(("data", "model"), None))
    return jax.lax.fori_loop(0, 4, body, x) @ w

out = sys.argv[1]
x = jnp.ones((N, D)) * 0.1
R, C = S(("data", "model"), None), S(None, ("data", "model"))
cases = {"a_dies": (a_dies, (x,), (R,), C),
         "b_lives": (b_lives, (x,), (R,), R),
         "c_output": (c_output, (x,), (R,), C),
         "d_loop": (d_loop, (x, jnp.ones((D, 128))), (R, S(None, None)), R)}
for name, (fn, args, ins, o) in cases.items():
    f = jax.jit(fn, in_shardings=ins, out_shardings=o)
    open(f"{out}/{name}.hlo", "w").write(f.lower(*args).as_text(dialect="hlo"))
    print(name, "ok")
