# held-out all-to-all cases, written after the rule (round 38, helper mem)
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
S = lambda *s: NamedSharding(mesh, P(*s))
wsc = jax.lax.with_sharding_constraint
B, T, H = 8, 128, 512

def seq_to_heads(x):                 # sequence-parallel -> feature-parallel, the source a parameter
    y = wsc(x, S("data", None, "model"))
    return jnp.exp(y) + 1.0

def residual(x):                     # source read after the all-to-all (a residual)
    h = jnp.tanh(x)
    y = wsc(h, S("data", None, "model"))
    m = jnp.max(y, axis=1, keepdims=True)
    return h + wsc(m, S("data", None, None))

def dies(x, w):                      # source an intermediate that dies at the all-to-all, read by a dot
    h = jnp.tanh(x @ w)
    y = wsc(h, S("data", None, "model"))
    return jnp.sin(y)

def scan_a2a(x):                     # a scan whose body reshards its carry and back
    def body(c, _):
        y = wsc(c, S("data", None, "model"))
        y = jnp.sin(y) + 0.1
        return wsc(y, S("data", "model", None)), None
    return jax.lax.scan(body, x, None, length=3)[0]

out = sys.argv[1]
x = jnp.ones((B, T, H)) * 0.1
SQ = S("data", "model", None)
cases = {"seq_to_heads": (seq_to_heads, (x,), (SQ,), S("data", None, "model")),
         "residual": (residual, (x,), (SQ,), SQ),
         "dies": (dies, (x, jnp.eye(H)), (SQ, S(None, None)), S("data", None, "model")),
         "scan_a2a": (scan_a2a, (x,), (SQ,), SQ)}
for name, (fn, args, ins, o) in cases.items():
    f = jax.jit(fn, in_shardings=ins, out_shardings=o)
    open(f"{out}/{name}.hlo", "w").write(f.lower(*args).as_text(dialect="hlo"))
    print(name, "ok")
