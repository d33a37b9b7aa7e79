#!/usr/bin/env python3
"""Round 22's held-out modules for ``benchmarks/time_truth.py --extra DIR`` (issue 27), written before any
change to the cost model that round and never tuned on.

Six 8-device GSPMD modules in the style of ``scripts/make_samples.py`` (jax 0.10.2, 8 fake CPU devices,
``NAME.pre.hlo``, ``NAME.propagated.hlo``: XLA's sharding propagation, ``NAME.mesh``), with shapes and
layers none of the samples or round 16's attention cases has:

* ``ho_swiglu_train``: a gated (SwiGLU) MLP train step, f32, column / row parallel over ``model``;
* ``ho_attn8_fwd``: self-attention forward, 8 heads over a model axis of 4 (heads divide it), d 512, s 128;
* ``ho_vocab_xent_train``: a vocabulary-parallel output layer and softmax cross-entropy, train step;
* ``ho_ln_mlp_fwd``: pre-layer-norm residual MLP block forward, GELU;
* ``ho_embed_proj_fwd``: a vocab-sharded embedding lookup followed by a column-parallel projection;
* ``ho_mlp_bf16_train``: a two-layer MLP train step with bf16 weights and activations, mesh 4x2.

Usage::

    python benchmarks/time_heldout22.py DIR
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = ["ho_swiglu_train", "ho_attn8_fwd", "ho_vocab_xent_train", "ho_ln_mlp_fwd", "ho_embed_proj_fwd",
         "ho_mlp_bf16_train"]


def _child(out: pathlib.Path) -> None:  # pragma: no cover - runs with 8 fake CPU devices
    import make_samples as ms
    import numpy as np

    jax, jnp = ms._jax()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    out.mkdir(parents=True, exist_ok=True)

    def mesh_of(rows, cols):
        return Mesh(np.array(jax.devices()[:8]).reshape(rows, cols), ("data", "model"))

    def spec(mesh, shape, *s, dtype=jnp.float32):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P(*s)))

    def sgd(loss_fn):
        def step(p, *xs):
            loss, g = jax.value_and_grad(loss_fn)(p, *xs)
            return loss, jax.tree_util.tree_map(lambda w, d: w - jnp.asarray(0.01, w.dtype) * d, p, g)
        return step

    def write(name, fn, args, mesh_text):
        fn.__name__ = name
        texts = ms.lower_texts(fn, args, shardy=False)
        (out / f"{name}.pre.hlo").write_text(texts["pre"])
        (out / f"{name}.propagated.hlo").write_text(texts["propagated"])
        (out / f"{name}.mesh").write_text(mesh_text + "\n")

    m = mesh_of(2, 4)

    def swiglu_loss(p, x, y):
        h = jax.nn.silu(x @ p["wg"]) * (x @ p["wu"])
        return jnp.mean(jnp.square(h @ p["wd"] - y))

    d, f = 384, 1536
    write("ho_swiglu_train", sgd(swiglu_loss),
          ({"wg": spec(m, (d, f), None, "model"), "wu": spec(m, (d, f), None, "model"),
            "wd": spec(m, (f, d), "model", None)}, spec(m, (32, 64, d), "data", None, None),
           spec(m, (32, 64, d), "data", None, None)), "2x4")

    def attn8(p, x):
        a = ms._attention(jax, jnp, x @ p["wq"], x @ p["wk"], x @ p["wv"], 8)
        return x + a @ p["wo"]

    d = 512
    write("ho_attn8_fwd", attn8,
          ({"wq": spec(m, (d, d), None, "model"), "wk": spec(m, (d, d), None, "model"),
            "wv": spec(m, (d, d), None, "model"), "wo": spec(m, (d, d), "model", None)},
           spec(m, (8, 128, d), "data", None, None)), "2x4")

    def xent_loss(p, x, labels):
        logits = x @ p["w"]
        lp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(lp, labels[..., None], axis=-1))

    write("ho_vocab_xent_train", sgd(xent_loss),
          ({"w": spec(m, (256, 4096), None, "model")}, spec(m, (64, 256), "data", None),
           spec(m, (64,), "data", dtype=jnp.int32)), "2x4")

    def ln_mlp(p, x):
        h = ms._layer_norm(jnp, x, p["g"], p["b"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    d, f = 256, 1024
    write("ho_ln_mlp_fwd", ln_mlp,
          ({"g": spec(m, (d,)), "b": spec(m, (d,)), "w1": spec(m, (d, f), None, "model"),
            "w2": spec(m, (f, d), "model", None)}, spec(m, (16, 128, d), "data", None, None)), "2x4")

    def embed_proj(p, ids):
        e = jnp.take(p["table"], ids, axis=0)
        return jnp.tanh(e @ p["w"])

    write("ho_embed_proj_fwd", embed_proj,
          ({"table": spec(m, (8192, 256), "model", None), "w": spec(m, (256, 512), None, "model")},
           spec(m, (16, 64), "data", None, dtype=jnp.int32)), "2x4")

    m42 = mesh_of(4, 2)
    bf = jnp.bfloat16

    def mlp_loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"])
        return jnp.mean(jnp.square((h @ p["w2"]).astype(jnp.float32) - y.astype(jnp.float32)))

    write("ho_mlp_bf16_train", sgd(mlp_loss),
          ({"w1": spec(m42, (512, 2048), None, "model", dtype=bf), "w2": spec(m42, (2048, 512), "model", None, dtype=bf)},
           spec(m42, (128, 512), "data", None, dtype=bf), spec(m42, (128, 512), "data", None, dtype=bf)), "4x2")


def write_all(out: pathlib.Path) -> list[str]:
    """Write every case into ``out`` in a child process with 8 fake CPU devices; returns the names."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "scripts"), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    code = ("import sys, pathlib; sys.path.insert(0, %r); import time_heldout22 as h; "
            "h._child(pathlib.Path(sys.argv[1]))" % str(pathlib.Path(__file__).resolve().parent))
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True)
    return NAMES


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("wrote", write_all(pathlib.Path(sys.argv[1])))
