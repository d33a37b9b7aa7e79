"""End-to-end JAX check of ``hloshard.jax.auto_shard`` (run as a script: it needs 8 fake CPU devices,
set before jax is imported, so ``tests/test_jax_e2e.py`` runs it in a child process).

For each model (an MLP train step, a transformer train step, an MoE layer; small sizes) on a 2x4 mesh
``('data', 'model')`` it measures three plans **by XLA**: hloshard's (``auto_shard`` with nothing
sharded and a memory budget replication does not fit), the manual plan (Megatron: column- then
row-parallel weights on 'model', batch on 'data'; MoE: experts on 'model', batch on 'data') and data
parallel (weights replicated, batch on 'data'). Per plan: the collectives of the raw
``after_spmd-partitioning`` HLO, as ring bytes per device (``tests/xla_bytes.collective_bytes``), and ``compiled.memory_analysis()``
(argument + output + temp - alias bytes per device); hloshard's plan is ``jax.jit(res.fn,
in_shardings=res.in_shardings, out_shardings=res.out_shardings)`` (``res.fn`` carries the intermediate
shardings as constraints; ``hloshard_io_only`` is ``fn`` with only the parameter / output shardings,
for comparison); the outputs of hloshard's plan against the
unsharded function on random data. Prints one JSON object (``{"models": {name: {...}}}``);
``--bench`` adds the "io only" plan and the constraint count (``python tests/jax_e2e_models.py
--bench``, the BENCHMARKS.md run).

The budget rule (the same for every model, nothing tuned per model): half way between the manual
plan's and the data-parallel plan's peak memory per device by XLA, so replication does not fit and
the manual plan does.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

TIME_LIMIT = 15.0  # solver seconds; with the cost-graph build each solve stays within 20 s


# ------------------------------------------------------------------------------------------------
# models: (fn, example args, manual plan specs (in, out), data-parallel specs (in, out))

def _ln(x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True) + 1e-5)


def mlp():
    d, f, b = 512, 2048, 64

    def loss(params, x, y):
        w1, w2 = params
        return jnp.mean(jnp.square(jax.nn.relu(x @ w1) @ w2 - y))

    def mlp_train_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    args = ((jax.ShapeDtypeStruct((d, f), jnp.float32), jax.ShapeDtypeStruct((f, d), jnp.float32)),
            jax.ShapeDtypeStruct((b, d), jnp.float32), jax.ShapeDtypeStruct((b, d), jnp.float32))
    wspec = (P(None, "model"), P("model", None))
    manual = (((wspec), P("data"), P("data")), (P(), wspec))
    dp = (((P(), P()), P("data"), P("data")), (P(), (P(), P())))
    return mlp_train_step, args, manual, dp


def transformer():
    d, f, heads, b, s, layers = 256, 1024, 8, 8, 64, 2

    def attn(p, h):
        q, k, v = (jnp.reshape(h @ p[n], (b, s, heads, d // heads)) for n in ("wq", "wk", "wv"))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(d // heads))
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v).reshape(b, s, d)
        return o @ p["wo"]

    def forward(params, x):
        for p in params:
            x = x + attn(p, _ln(x))
            x = x + jax.nn.gelu(_ln(x) @ p["w1"]) @ p["w2"]
        return x

    def loss(params, x, y):
        return jnp.mean(jnp.square(forward(params, x) - y))

    def transformer_train_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)

    shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d), "w1": (d, f), "w2": (f, d)}
    layer = {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in shapes.items()}
    args = ([dict(layer) for _ in range(layers)], jax.ShapeDtypeStruct((b, s, d), jnp.float32),
            jax.ShapeDtypeStruct((b, s, d), jnp.float32))
    meg = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"), "wo": P("model", None),
           "w1": P(None, "model"), "w2": P("model", None)}
    rep = {k: P() for k in shapes}
    manual = (([dict(meg) for _ in range(layers)], P("data"), P("data")), (P(), [dict(meg) for _ in range(layers)]))
    dp = (([dict(rep) for _ in range(layers)], P("data"), P("data")), (P(), [dict(rep) for _ in range(layers)]))
    return transformer_train_step, args, manual, dp


def moe():
    t, d, f, e = 512, 256, 1024, 8

    def moe_layer(params, x):
        wg, w_in, w_out = params
        gates = jax.nn.softmax(x @ wg, axis=-1)                        # [t, e]
        mask = jax.nn.one_hot(jnp.argmax(gates, axis=-1), e)           # top-1 routing
        xe = jnp.einsum("te,td->etd", mask, x)                         # dense dispatch (capacity t)
        h = jax.nn.relu(jnp.einsum("etd,edf->etf", xe, w_in))
        ye = jnp.einsum("etf,efd->etd", h, w_out)
        return jnp.einsum("te,etd->td", gates * mask, ye)

    args = ((jax.ShapeDtypeStruct((d, e), jnp.float32), jax.ShapeDtypeStruct((e, d, f), jnp.float32),
             jax.ShapeDtypeStruct((e, f, d), jnp.float32)), jax.ShapeDtypeStruct((t, d), jnp.float32))
    manual = (((P(), P("model"), P("model")), P("data")), P("data"))
    dp = (((P(), P(), P()), P("data")), P("data"))
    return moe_layer, args, manual, dp


MODELS = {"mlp_train_step": mlp, "transformer_train_step": transformer, "moe_layer": moe}


# ------------------------------------------------------------------------------------------------
# measuring a plan with XLA

def _named(mesh, specs):
    return jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), specs,
                                  is_leaf=lambda x: isinstance(x, P))


def measure(fn, args, in_sh, out_sh) -> dict:
    """XLA's figures for ``jax.jit(fn, in_shardings, out_shardings)``: ring bytes per device of the raw
    SPMD partitioner output's collectives, and memory_analysis bytes per device."""
    from tests.xla_bytes import collective_bytes

    lowered = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh).lower(*args)
    with tempfile.TemporaryDirectory(prefix="hloshard-e2e-") as dump:
        compiled = lowered.compile(compiler_options={"xla_dump_to": dump,
                                                     "xla_dump_hlo_pass_re": "spmd-partitioning"})
        raw = open(sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))[-1]).read()
    counted = collective_bytes(raw)
    total = sum(c["bytes"] for c in counted)
    kinds: dict = {}
    for c in counted:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    m = compiled.memory_analysis()
    peak = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes
    return {"comm_bytes": int(round(total)), "peak_bytes": int(peak), "collectives": kinds,
            "compiled": compiled}


def run_model(name: str, bench: bool = False) -> dict:
    import time

    from hloshard.jax import auto_shard

    fn, args, manual, dp = MODELS[name]()
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    man = measure(fn, args, _named(mesh, manual[0]), _named(mesh, manual[1]))
    rep = measure(fn, args, _named(mesh, dp[0]), _named(mesh, dp[1]))
    budget = (man["peak_bytes"] + rep["peak_bytes"]) // 2
    t0 = time.monotonic()
    res = auto_shard(fn, *args, mesh=mesh, memory_budget=budget, time_limit=TIME_LIMIT, deterministic=True,
                     with_constraints=bench)
    seconds = time.monotonic() - t0
    # jax.jit(res.fn, in_shardings=..., out_shardings=...): the whole plan (intermediates as constraints)
    ours = measure(res.fn, args, res.in_shardings, res.out_shardings)
    io_only = None
    if bench:  # what XLA's propagation reaches from the parameter / output shardings alone
        io_only = measure(fn, args, res.in_shardings, res.out_shardings)
        io_only.pop("compiled")
    # numerics: hloshard's plan against the unsharded function on random data
    rng = np.random.default_rng(0)
    leaves, tree = jax.tree_util.tree_flatten(args)
    data = [rng.standard_normal(a.shape).astype(np.float32) * np.float32(0.05) for a in leaves]
    real = jax.tree_util.tree_unflatten(tree, data)
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*real))
    placed = jax.tree_util.tree_unflatten(tree, [jax.device_put(x, s) for x, s in
                                                 zip(data, jax.tree_util.tree_leaves(res.in_shardings))])
    got = jax.tree_util.tree_leaves(ours["compiled"](*placed))
    err = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)) / (np.abs(np.asarray(w)) + 1e-3)))
              for g, w in zip(got, want))
    specs = [str(s.spec) for s in jax.tree_util.tree_leaves(res.in_shardings)]
    for d in (man, rep, ours):
        d.pop("compiled")
    return {"budget": int(budget), "hloshard": ours, "hloshard_io_only": io_only, "manual": man,
            "data_parallel": rep, "constraints": len(res.constraints),
            "max_rel_err": err, "in_specs": specs, "solve_seconds": round(seconds, 2),
            "solver_status": res.report["status"], "predicted_peak": res.report["peak_memory_per_device"],
            "guard": {k: v for k, v in (res.report.get("memory_guard") or {}).items() if k != "pareto"},
            "replicated_fits": rep["peak_bytes"] <= budget}


def main(argv) -> int:
    bench = "--bench" in argv     # BENCHMARKS.md figures: also "io only" and the constraint count
    names = [a for a in argv if a != "--bench"] or list(MODELS)
    out = {"models": {n: run_model(n, bench) for n in names}}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
