"""Held-out remat models (written for round 34, not tuned on): lowered with Megatron-style layouts on 2x4.
Writes heldout/NAME.pre.hlo (GSPMD pre-opt), NAME.propagated.hlo (GSPMD's plan), NAME.shardy.pre.hlo."""
import os, sys, pathlib
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, "/work/wt/remat/scripts"); sys.path.insert(0, "/work/wt/remat/src")
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
try:
    import make_samples
except Exception:
    make_samples = None

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
ns = lambda *s: NamedSharding(mesh, P(*s))
cp = jax.checkpoint_policies

def sds(shape, *spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=ns(*spec))

# ---- 1. transformer, each layer jax.checkpoint(policy=checkpoint_dots), SGD ----
def tfm(L, policy, B=8, T=64, D=128, H=4, F=512, scan=False):
    def ln(x):
        m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5)
    def layer(x, p):
        h = ln(x)
        q, k, v = (jnp.einsum("btd,de->bte", h, p[n]).reshape(B, T, H, D // H) for n in ("wq", "wk", "wv"))
        a = jax.nn.softmax(jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(D // H), -1)
        o = jnp.einsum("bhts,bshd->bthd", a, v).reshape(B, T, D)
        x = x + o @ p["wo"]
        return x + jax.nn.gelu(ln(x) @ p["w1"]) @ p["w2"]
    blk = jax.checkpoint(layer, policy=policy) if policy is not None else layer
    def loss(ps, x, y):
        if scan:
            x, _ = jax.lax.scan(lambda c, p: (blk(c, p), None), x, ps)
        else:
            for p in ps:
                x = blk(x, p)
        return jnp.mean((x - y) ** 2)
    def step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return l, jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, ps, g)
    spec = {"wq": (D, D, None, "model"), "wk": (D, D, None, "model"), "wv": (D, D, None, "model"),
            "wo": (D, D, "model", None), "w1": (D, F, None, "model"), "w2": (F, D, "model", None)}
    if scan:
        ps = {n: sds((L,) + s[:2], None, *s[2:]) for n, s in spec.items()}
    else:
        ps = [{n: sds(s[:2], *s[2:]) for n, s in spec.items()} for _ in range(L)]
    return step, (ps, sds((B, T, D), "data"), sds((B, T, D), "data"))

# ---- 2. MLP stack, each layer jax.checkpoint (default policy: nothing saved), Adam-free momentum ----
def mlp(L, B=64, D=512, F=1024, policy=None):
    def layer(x, p):
        return x + jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]
    blk = jax.checkpoint(layer, policy=policy)
    def loss(ps, x):
        for p in ps:
            x = blk(x, p)
        return jnp.mean(x ** 2)
    def step(ps, mom, x):
        l, g = jax.value_and_grad(loss)(ps, x)
        mom = jax.tree_util.tree_map(lambda m, gg: 0.9 * m + gg, mom, g)
        return l, jax.tree_util.tree_map(lambda a, m: a - 0.01 * m, ps, mom), mom
    ps = [{"w1": sds((D, F), None, "model"), "b1": sds((F,), "model"), "w2": sds((F, D), "model", None)}
          for _ in range(L)]
    return step, (ps, ps, sds((B, D), "data"))

MODELS = {
    "tfm_dots": lambda: tfm(3, cp.checkpoint_dots),
    "tfm_nothing": lambda: tfm(3, cp.nothing_saveable),
    "tfm_scan_dots": lambda: tfm(3, cp.checkpoint_dots, scan=True),
    "mlp_remat": lambda: mlp(4),
    "mlp_dots_nobatch": lambda: mlp(4, policy=cp.dots_with_no_batch_dims_saveable),
}

if __name__ == "__main__":
    out = pathlib.Path(__file__).parent / "heldout"
    for name in (sys.argv[1:] or MODELS):
        fn, args = MODELS[name]()
        texts = make_samples.lower_texts(fn, args)
        for k, suf in (("pre", "pre"), ("propagated", "propagated"), ("shardy_pre", "shardy.pre")):
            (out / f"{name}.{suf}.hlo").write_text(texts[k])
        print(name, {k: len(v) for k, v in texts.items()}, texts["pre"].count("opt-barrier"))
