"""Held-out scan programs (round 32, written before the loop-state rule): residual MLPs and a transformer
scanned over stacked layers; jax on CPU, one chip (no shardings)."""
import sys, json, pathlib
sys.path.insert(0, "/work/wt/steptime/benchmarks"); sys.path.insert(0, "/work/wt/steptime/src")
import jax, jax.numpy as jnp
import tpu_real as tr
S = jax.ShapeDtypeStruct
OUT = pathlib.Path(sys.argv[1])
def sgd(loss):
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return l, jax.tree_util.tree_map(lambda a, b: a - (1e-3 * b).astype(a.dtype), p, g)
    return step
def scan_mlp(d, f, batch, layers, dt):
    def block(h, w):
        w1, w2 = w
        return h + jax.nn.relu(h @ w1) @ w2, None
    def loss(p, x, y):
        h, _ = jax.lax.scan(block, x, p)
        return jnp.mean(jnp.square(h.astype(jnp.float32) - y.astype(jnp.float32)))
    return sgd(loss), [(S((layers, d, f), dt), S((layers, f, d), dt)), S((batch, d), dt), S((batch, d), dt)]
def scan_tf(d, f, heads, batch, seq, layers, dt):
    def ln(x, g, b):
        m = jnp.mean(x, -1, keepdims=True); v = jnp.mean(jnp.square(x - m), -1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-6) * g + b
    def attn(q, k, v):
        sh = lambda t: t.reshape(batch, seq, heads, d // heads)
        s = jnp.einsum("bqhd,bkhd->bhqk", sh(q), sh(k)) / (d // heads) ** 0.5
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), sh(v)).reshape(batch, seq, d)
    def block(x, p):
        h = ln(x, p["g1"], p["b1"])
        x = x + attn(h @ p["wq"], h @ p["wk"], h @ p["wv"]) @ p["wo"]
        h = ln(x, p["g2"], p["b2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"], None
    def loss(p, x, y):
        h, _ = jax.lax.scan(block, x, p)
        return jnp.mean(jnp.square(h - y))
    L = layers
    p = {"g1": S((L, d), dt), "b1": S((L, d), dt), "wq": S((L, d, d), dt), "wk": S((L, d, d), dt), "wv": S((L, d, d), dt),
         "wo": S((L, d, d), dt), "g2": S((L, d), dt), "b2": S((L, d), dt), "w1": S((L, d, f), dt), "w2": S((L, f, d), dt)}
    return sgd(loss), [p, S((batch, seq, d), dt), S((batch, seq, d), dt)]
f32, bf = jnp.float32, jnp.bfloat16
CASES = {
 "hs_mlp_d512_f1024_b256_l8_f32": scan_mlp(512, 1024, 256, 8, f32),
 "hs_mlp_d1024_f2048_b512_l4_bf16": scan_mlp(1024, 2048, 512, 4, bf),
 "hs_mlp_d256_f1024_b1024_l16_f32": scan_mlp(256, 1024, 1024, 16, f32),
 "hs_mlp_d2048_f4096_b256_l8_f32": scan_mlp(2048, 4096, 256, 8, f32),
 "hs_tf_d256_b8_s128_l6_f32": scan_tf(256, 1024, 8, 8, 128, 6, f32),
}
OUT.mkdir(parents=True, exist_ok=True)
for name, (fn, args) in CASES.items():
    text = tr._strip(jax.jit(fn).lower(*args).as_text(dialect="hlo"))
    (OUT / f"{name}.hlo").write_text(text); print(name, len(text), flush=True)
