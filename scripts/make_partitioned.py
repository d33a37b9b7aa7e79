"""Write a per-device program: a Llama-style train step partitioned by XLA for many devices.

Usage::

    python scripts/make_partitioned.py OUT.hlo [--devices 128] [--mesh 16x8] [--layers 4]
        [--d-model 1024] [--heads 16] [--ffn 4096] [--vocab 32768] [--batch 32] [--seq 256]

The model (decoder layers in a ``jax.lax.scan``: RMSNorm, attention with rotary-free causal softmax,
SwiGLU MLP; embedding and tied output projection; mean cross-entropy; gradients; SGD) is jitted with
MaxText-style shardings on a ``('data', 'model')`` mesh -- every weight split over ``'data'`` (FSDP) and
``'model'`` (tensor parallel), the batch over ``'data'`` -- and compiled for ``--devices`` fake CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set here before jax is imported).
``OUT.hlo`` is XLA's module right after its SPMD partitioner (the ``spmd-partitioning`` pass dump):
per-device shapes, ``num_partitions=N``, and the collectives with their replica groups, the form of a
program that is already partitioned (``--logical``: jax's module before partitioning instead) (issue 26's 128-partition scale check: ``hloshard cost OUT.hlo
--mesh 16x8``).  Only shapes and dtypes are used: nothing runs, no weights are allocated.

Raises SystemExit(2) with a message when the mesh does not multiply to ``--devices`` or a size does
not divide its mesh axis; needs jax (the ``xla`` extra).
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--devices", type=int, default=128)
    p.add_argument("--mesh", default="16x8", help="DATAxMODEL, e.g. 16x8")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--logical", action="store_true",
                   help="write the module before partitioning instead (jax's lowering: the parameters' "
                        "shardings, no collectives), the input `solve` takes")
    a = p.parse_args(argv)
    try:
        data, model = (int(x) for x in a.mesh.lower().split("x"))
    except ValueError:
        p.error(f"--mesh {a.mesh!r}: expected DATAxMODEL, e.g. 16x8")
    if data * model != a.devices:
        p.error(f"--mesh {a.mesh} has {data * model} devices, --devices is {a.devices}")
    for name, size, by in (("--batch", a.batch, data), ("--d-model", a.d_model, data * model),
                           ("--heads", a.heads, model), ("--ffn", a.ffn, data * model),
                           ("--vocab", a.vocab, data * model)):
        if size % by:
            p.error(f"{name} {size} does not divide by {by}")
    a.mesh_shape = (data, model)
    return a


def main(argv=None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    dump = tempfile.mkdtemp(prefix="hloshard-partitioned-")
    os.environ["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count={a.devices} --xla_dump_to={dump} "
                               "--xla_dump_hlo_pass_re=spmd-partitioning")
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[: a.devices]).reshape(a.mesh_shape), ("data", "model"))
    d, h, f, L, V = a.d_model, a.heads, a.ffn, a.layers, a.vocab
    hd = d // h
    f32 = jnp.float32
    shapes = {"embed": ((V, d), P("model", "data")),
              "wq": ((L, d, d), P(None, "data", "model")), "wk": ((L, d, d), P(None, "data", "model")),
              "wv": ((L, d, d), P(None, "data", "model")), "wo": ((L, d, d), P(None, "model", "data")),
              "w1": ((L, d, f), P(None, "data", "model")), "w3": ((L, d, f), P(None, "data", "model")),
              "w2": ((L, f, d), P(None, "model", "data")),
              "n1": ((L, d), P(None, None)), "n2": ((L, d), P(None, None)), "nf": ((d,), P(None))}
    params = {k: jax.ShapeDtypeStruct(s, f32, sharding=NamedSharding(mesh, spec)) for k, (s, spec) in shapes.items()}
    tokens = jax.ShapeDtypeStruct((a.batch, a.seq), jnp.int32, sharding=NamedSharding(mesh, P("data", None)))

    def rms(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    def layer(x, p):
        b, s, _ = x.shape
        y = rms(x, p["n1"])
        q = (y @ p["wq"]).reshape(b, s, h, hd)
        k = (y @ p["wk"]).reshape(b, s, h, hd)
        v = (y @ p["wv"]).reshape(b, s, h, hd)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd)
        mask = jnp.tril(jnp.ones((s, s), bool))
        att = jax.nn.softmax(jnp.where(mask, logits, -1e9), axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d) @ p["wo"]
        y = rms(x, p["n2"])
        return x + (jax.nn.silu(y @ p["w1"]) * (y @ p["w3"])) @ p["w2"], None

    def loss_fn(params, tokens):
        x = params["embed"][tokens]
        stacked = {k: params[k] for k in ("wq", "wk", "wv", "wo", "w1", "w3", "w2", "n1", "n2")}
        x, _ = jax.lax.scan(layer, x, stacked)
        logits = rms(x, params["nf"]) @ params["embed"].T
        logp = jax.nn.log_softmax(logits[:, :-1])
        return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))

    def train_step(params, tokens):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        return loss, jax.tree.map(lambda w, g: w - 1e-3 * g, params, grads)

    out_sh = (NamedSharding(mesh, P()), {k: v.sharding for k, v in params.items()})
    lowered = jax.jit(train_step, out_shardings=out_sh, donate_argnums=0).lower(params, tokens)
    if a.logical:
        with open(a.out, "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
        shutil.rmtree(dump, ignore_errors=True)
        print(f"wrote {a.out}: {a.layers} layers, logical module for {a.devices} devices, mesh {a.mesh}")
        return 0
    lowered.compile()
    found = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
    if not found:
        print(f"make_partitioned: XLA wrote no after_spmd-partitioning dump in {dump}", file=sys.stderr)
        return 2
    shutil.copyfile(found[-1], a.out)
    shutil.rmtree(dump, ignore_errors=True)
    print(f"wrote {a.out}: {a.layers} layers, {a.devices} partitions, mesh {a.mesh}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
