#!/usr/bin/env python3
"""``plan.jit()`` against the plan hloshard priced, on ``lax.scan`` models (issue 24, round 33; new user 32 F1/F8/F18).

Per model: ``auto_shard(step, *args, mesh=2x4 ('data','model'), deterministic=True, time_limit=TL)``, then

* ``predicted``: ``report["predicted_collective_bytes_per_device"]`` and ``peak_memory_per_device``;
* ``xla``: ``plan.xla().xla_bytes`` -- the written module (``plan.hlo_text``) partitioned by GSPMD;
* ``jit_shardy`` / ``jit_gspmd``: ``plan.jit().lower(*args).compile()`` with jax's default partitioner (Shardy) and
  with ``jax_use_shardy_partitioner=False``: ring bytes of the compiled program's collectives per device (each
  ``while`` body once per trip; hloshard's parser, :meth:`hloshard.jax.AutoShardResult.jit_bytes`' formulas) and
  ``memory_analysis()`` argument + output + temp - alias.

Models: the new user's repros (``scan1_*``: ``repro_scan.py``, ``scan3_*``: ``repro_scan3.py`` -- an RNN cell
``tanh(x + h @ w)`` under ``jax.checkpoint`` or not, 32 steps, batch 16, hidden 256, ``scan3`` with the sequence kept
on ``data``), the new user's LSTM (``--lstm DIR``: ``lstm_model.py`` of /work/notes/nu32_models, 2 layers, hidden
512, 64 steps, remat cell, Adam) and, held out (written for this benchmark, not tuned on): ``gru`` / ``gru_batch``
(a GRU, 24 steps, batch 16, input 128, hidden 256, no remat; ``gru_batch`` keeps the sequences on ``data``) and
``layers_remat`` (a scan over 4 MLP blocks 256 -> 1024 -> 256 under ``jax.checkpoint``, batch 64).

Usage: ``python benchmarks/scan_jit.py MODEL [MODEL...] [--tl SECONDS] [--lstm DIR]``; one JSON line per model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"


def rnn(T=32, B=16, H=256, remat=True):
    import jax
    import jax.numpy as jnp

    def loss(w, xs):
        def cell(h, x):
            h = jnp.tanh(x + h @ w)
            return h, h
        _, hs = jax.lax.scan(jax.checkpoint(cell) if remat else cell, jnp.zeros((B, H)), xs)
        return jnp.mean(hs ** 2)

    def step(w, xs):
        l, g = jax.value_and_grad(loss)(w, xs)
        return l, w - 0.01 * g
    w = jax.random.normal(jax.random.PRNGKey(0), (H, H)) / 16
    return step, (w, jax.random.normal(jax.random.PRNGKey(1), (T, B, H)))


def gru(T=24, B=16, D=128, H=256):
    import jax
    import jax.numpy as jnp
    import numpy as np

    def loss(p, xs, ys):
        gx = jnp.einsum("tbd,dg->tbg", xs, p["wx"])

        def cell(h, g):
            zr = jax.nn.sigmoid(g[:, :2 * H] + h @ p["wzr"])
            z, r = zr[:, :H], zr[:, H:]
            n = jnp.tanh(g[:, 2 * H:] + (r * h) @ p["wn"])
            h = (1 - z) * n + z * h
            return h, h
        _, hs = jax.lax.scan(cell, jnp.zeros((B, H)), gx)
        return jnp.mean((hs @ p["wo"] - ys) ** 2)

    def step(p, xs, ys):
        l, g = jax.value_and_grad(loss)(p, xs, ys)
        return l, jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)
    k = jax.random.split(jax.random.PRNGKey(3), 6)
    p = {"wx": jax.random.normal(k[0], (D, 3 * H)) / np.sqrt(D), "wzr": jax.random.normal(k[1], (H, 2 * H)) / 16,
         "wn": jax.random.normal(k[2], (H, H)) / 16, "wo": jax.random.normal(k[3], (H, D)) / 16}
    return step, (p, jax.random.normal(k[4], (T, B, D)), jax.random.normal(k[5], (T, B, D)))


def layers_remat(L=4, B=64, D=256, F=1024):
    import jax
    import jax.numpy as jnp

    def loss(w, x, y):
        @jax.checkpoint
        def block(h, wl):
            w1, w2 = wl
            return h + jax.nn.gelu(h @ w1) @ w2, None
        h, _ = jax.lax.scan(block, x, w)
        return jnp.mean((h - y) ** 2)

    def step(w, x, y):
        l, g = jax.value_and_grad(loss)(w, x, y)
        return l, jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, w, g)
    k = jax.random.split(jax.random.PRNGKey(4), 4)
    w = (jax.random.normal(k[0], (L, D, F)) * 0.03, jax.random.normal(k[1], (L, F, D)) * 0.03)
    return step, (w, jax.random.normal(k[2], (B, D)), jax.random.normal(k[3], (B, D)))


def model(name: str, mesh, lstm_dir: str | None):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    on_data = lambda a: jax.device_put(a, NamedSharding(mesh, P(None, "data")))  # noqa: E731
    if name.startswith("scan1_") or name.startswith("scan3_"):
        step, (w, xs) = rnn(remat=name.endswith("_remat"))
        return step, (w, on_data(xs) if name.startswith("scan3_") else xs)
    if name in ("gru", "gru_batch"):
        step, (p, xs, ys) = gru()
        return step, ((p, on_data(xs), on_data(ys)) if name == "gru_batch" else (p, xs, ys))
    if name == "layers_remat":
        return layers_remat()
    if name in ("lstm", "lstm_noremat"):
        os.environ["REMAT"] = "1" if name == "lstm" else "0"
        sys.path.insert(0, lstm_dir or "/work/notes/nu32_models")
        import lstm_model
        return lstm_model.build()
    raise SystemExit(f"unknown model {name!r}")


def measure(name: str, tl: float, lstm_dir: str | None) -> dict:
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from hloshard.jax import auto_shard
    from hloshard.xla_check import parse_collectives
    from hloshard.xla_compare import _xla_execution_counts, xla_ring_bytes

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    step, args = model(name, mesh, lstm_dir)
    t = time.time()
    plan = auto_shard(step, *args, mesh=mesh, time_limit=tl, deterministic=True)
    out = {"model": name, "auto_shard_s": round(time.time() - t, 1), "load": round(os.getloadavg()[0], 1),
           "predicted": plan.report["predicted_collective_bytes_per_device"],
           "predicted_peak": plan.report.get("peak_memory_per_device"), "pins": plan.report["pins"]}
    out["xla"] = plan.xla().xla_bytes
    placed = jax.device_put(args, plan.in_shardings)
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        compiled = plan.jit().lower(*placed).compile()
        text = compiled.as_text()
        counts = _xla_execution_counts(text)
        key = "shardy" if shardy else "gspmd"
        out["jit_" + key] = sum(xla_ring_bytes(c, 8) * counts.get(c.computation, 1.0) for c in parse_collectives(text))
        m = compiled.memory_analysis()
        out["jit_peak_" + key] = (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
                                  - m.alias_size_in_bytes)
    jax.config.update("jax_use_shardy_partitioner", True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--tl", type=float, default=30.0)
    ap.add_argument("--lstm", default=None, help="directory of the new user's lstm_model.py")
    a = ap.parse_args()
    for name in a.models:
        print(json.dumps(measure(name, a.tl, a.lstm)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
