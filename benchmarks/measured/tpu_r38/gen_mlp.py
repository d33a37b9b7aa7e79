"""Held-out set (round 38, written after rule W was fixed): MLP train steps (make_samples.mlp_train_step's form,
Megatron shardings on a 2x4 data x model mesh) at sizes whose w2 all-to-all piece is non-square, a non-square lane
tie, or a square tie.  Writes OUT/tpu-{v5e,v5p}/ho38/NAME.GSPMD.hlo + NAME.mesh.  python gen_mlp.py OUT"""
import os, sys, pathlib
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path[:0] = ["/work/wt/tpu/scripts", "/work/wt/tpu/src", "/work/wt/tpu"]
import make_samples as ms
#: (din, ff, dout); batch 64
CASES = [(320, 1280, 320), (320, 640, 320), (192, 768, 192), (512, 1024, 512), (384, 1536, 384), (256, 384, 256),
         (384, 1024, 384), (640, 640, 640)]
def mlp(din, ff, dout):
    jax, jnp = ms._jax(); mesh = ms._mesh(); sp = ms._spec
    def loss_fn(params, x, y):
        w1, b1, w2, b2 = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean(jnp.square(h @ w2 + b2 - y))
    def mlp_train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    args = ((sp(mesh, (din, ff), None, "model"), sp(mesh, (ff,), "model"), sp(mesh, (ff, dout), "model", None),
             sp(mesh, (dout,))), sp(mesh, (64, din), "data", None), sp(mesh, (64, dout), "data", None))
    return mlp_train_step, args
out = pathlib.Path(sys.argv[1])
for din, ff, dout in CASES:
    name = f"mlp_d{din}_f{ff}_o{dout}"
    fn, args = mlp(din, ff, dout)
    t = ms.lower_texts(fn, args, shardy=False)["propagated"]
    for dev in ("tpu-v5e", "tpu-v5p"):
        d = out / dev / "ho38"; d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.GSPMD.hlo").write_text(t); (d / f"{name}.mesh").write_text("2x4")
    print(name, flush=True)
