#!/usr/bin/env python3
"""A second library's expert rules: Google's tunix (flax nnx) Llama 3 against hloshard's ``auto_shard``.

tunix (PyPI ``google-tunix``, 0.1.7; its models are flax ``nnx`` modules) ships, per model, a hand-written
``ShardingConfig`` (``tunix.models.llama3.model.ShardingConfig.get_default_sharding()``): a partition
spec over the mesh axes ``('fsdp', 'tp')`` for every weight (stored as each ``nnx.Param``'s ``sharding``
metadata, read back with ``nnx.get_partition_spec``) and for the activations (``act_btd``, ``act_btf``,
``act_btnh``: ``with_sharding_constraint`` inside the forward pass through the model module's ``shard``
helper, which tunix skips on the CPU platform). Its trainer splits the batch over ``('fsdp',)``
(``tunix.sft.peft_trainer.TrainingConfig.data_sharding_axis``).

The model: ``tunix.models.llama3.model.Llama3`` from a small random ``ModelConfig`` (GQA, float32, weights
re-drawn from a seeded normal: tunix initialises the MLP to zeros, which would make its gradients zero);
the train step: tunix's own SFT loss (``tunix.sft.peft_trainer._default_loss_fn``: masked next-token
cross-entropy; positions and the causal mask from ``tunix.sft.utils``), gradients, SGD. 8 fake CPU
devices, mesh 2x4 named ``('batch', 'model')``: tunix's ``'fsdp'`` is mapped onto ``'batch'`` (size 2),
``'tp'`` onto ``'model'`` (size 4). Plans:

* ``expert``: tunix's rules as it runs them on TPU: the weights' specs, the batch over ``'batch'``, and
  its activation constraints (the model module's ``shard`` made to apply them on CPU too);
* ``expert_params``: the weights' specs and the batch only (what tunix does on the CPU platform);
* ``replicated``: parameters replicated, the batch over ``'batch'``;
* ``auto``: ``auto_shard`` with nothing sharded, no budget;
* ``auto_budget``: ``auto_shard`` with nothing sharded and ``memory_budget`` halfway between the
  ``expert`` and ``replicated`` plans' peaks by XLA (as ``real_models.py``'s; needs both rows first);
* ``auto_expert``: ``auto_shard`` given the expert's weight and batch shardings (``keep_shardings="io"``).

Every figure comes from :func:`real_models.measure_plan` (imported, not copied): XLA's collective ring
bytes and ``memory_analysis`` peak per device, rel err of the compiled step against the unsharded one,
tied-state mismatches, ``auto_shard``'s wall time. Each (model, plan) runs in its own child process.
``--stablehlo-dir DIR`` also writes each plan's lowered StableHLO (``DIR/MODEL.PLAN.mlir``) for
``benchmarks/real_models_tpu.py`` (the TPU compiler, ahead of time).

Needs an interpreter with ``google-tunix`` (see BENCHMARKS.md "A second library: tunix"); elsewhere it
exits 2 saying so.

Usage::

    python benchmarks/real_models_tunix.py [--models llama3_small] [--plans expert,auto]
        [--time-limit 20] [--timeout 900] [--json out.json] [--stablehlo-dir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import real_models  # noqa: E402  - the measuring functions (one place)

MB = 1e6
# tunix mesh axis -> this benchmark's mesh axis (real_models.measure_plan splits the batch over 'batch')
AXES = {"fsdp": "batch", "tp": "model"}
# name -> (ModelConfig kwargs, batch, seq). Sizes: issue 24 item 3. Key/value heads 4: tunix's rules split
# them over 'tp' (4 devices).
CONFIGS: dict[str, tuple[dict, int, int]] = {
    "llama3_small": (dict(num_layers=2, vocab_size=2048, embed_dim=256, hidden_dim=512, num_heads=8, head_dim=32,
                          num_kv_heads=4, rope_theta=500_000, norm_eps=1e-5), 8, 64),
    "llama3": (dict(num_layers=4, vocab_size=8192, embed_dim=512, hidden_dim=1024, num_heads=8, head_dim=64,
                    num_kv_heads=4, rope_theta=500_000, norm_eps=1e-5), 16, 128),
    # the test's model (tests/test_real_models_tunix.py): seconds
    "llama3_tiny": (dict(num_layers=1, vocab_size=512, embed_dim=128, hidden_dim=256, num_heads=8, head_dim=16,
                         num_kv_heads=4, rope_theta=500_000, norm_eps=1e-5), 8, 32),
}
PLANS = ["expert", "expert_params", "replicated", "fsdp", "auto", "auto_budget", "auto_expert"]
WEIGHT_STD = 0.02


def tunix_missing() -> str | None:
    """None when tunix and flax import here, else why not (for a skip or exit-2 message)."""
    for mod in ("tunix", "flax"):
        if importlib.util.find_spec(mod) is None:
            return (f"{mod} is not installed in {sys.executable} (pip install google-tunix==0.1.7 "
                    f"jax==0.10.2 jaxlib==0.10.2; BENCHMARKS.md 'A second library: tunix')")
    return None


def _spec(axes):
    """PartitionSpec of a tunix axis tuple (e.g. ``('tp', 'fsdp')``), its axis names mapped by AXES."""
    from jax.sharding import PartitionSpec as P

    return P(*[None if a is None else AXES.get(a, a) for a in axes])


def build(name: str):
    """(tunix's llama3 model module, nnx graphdef, parameter paths (nnx state paths), params: dict
    "a/b/c" -> np.ndarray, expert specs: dict "a/b/c" -> PartitionSpec, batch, seq) of config ``name``: weights drawn from a seeded normal (std WEIGHT_STD; norm scales 1 +
    normal * 0.1), the expert specs from the Params' ``sharding`` metadata (``nnx.get_partition_spec``)."""
    import numpy as np
    from flax import nnx
    from tunix.models.llama3 import model as llama

    kwargs, batch, seq = CONFIGS[name]
    cfg = llama.ModelConfig(**kwargs, shd_config=llama.ShardingConfig.get_default_sharding())
    model = llama.Llama3(cfg, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    specs_state = nnx.get_partition_spec(state)
    flat = nnx.to_flat_state(state)
    flat_specs = dict(nnx.to_flat_state(specs_state))
    rng = np.random.default_rng(0)
    params, experts = {}, {}
    for path, var in flat:
        key = "/".join(str(p) for p in path)
        value = np.asarray(var.get_value() if hasattr(var, "get_value") else var.value)
        if value.ndim == 1:
            value = (1.0 + 0.1 * rng.standard_normal(value.shape)).astype(value.dtype)
        else:
            value = (WEIGHT_STD * rng.standard_normal(value.shape)).astype(value.dtype)
        params[key] = value
        spec = flat_specs[path]
        spec = spec.get_value() if hasattr(spec, "get_value") else getattr(spec, "value", spec)
        experts[key] = _spec(tuple(spec))
    return llama, graphdef, [p for p, _ in flat], params, experts, batch, seq


def make_step(llama, graphdef, paths, mesh=None):
    """``step(params, batch) -> (loss, new_params)``: params a dict path -> array, batch a dict input_tokens
    ([B, S] int32) / input_mask ([B, S] bool); tunix's SFT loss, SGD with real_models.LEARNING_RATE. With
    ``mesh``, tunix's activation constraints apply (its ``shard`` helper, axis names mapped by AXES)."""
    import jax
    from flax import nnx
    from jax.sharding import NamedSharding
    from tunix.sft import peft_trainer
    from tunix.sft import utils as sft_utils

    keys = ["/".join(str(p) for p in path) for path in paths]

    def loss_fn(params, batch):
        state = nnx.from_flat_state([(path, params[k]) for path, k in zip(paths, keys)])
        model = nnx.merge(graphdef, state)
        mask = batch["input_mask"]
        positions = sft_utils.build_positions_from_mask(mask)
        attention_mask = sft_utils.make_causal_attn_mask(mask)
        return peft_trainer._default_loss_fn(model, batch["input_tokens"], mask, positions, attention_mask)

    def train_step(params, batch):
        if mesh is not None:   # tunix's activation rules, as on TPU
            saved = llama.shard
            llama.shard = lambda x, s: jax.lax.with_sharding_constraint(x, NamedSharding(mesh, _spec(s)))
            try:
                loss, grads = jax.value_and_grad(loss_fn)(params, batch)
            finally:
                llama.shard = saved
        else:
            loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return loss, jax.tree_util.tree_map(lambda p, g: p - real_models.LEARNING_RATE * g, params, grads)

    return train_step


def example_batch(vocab: int, batch: int, seq: int) -> dict:
    """input_tokens seeded; the last quarter of every other row padded (input_mask False)."""
    import numpy as np

    rng = np.random.default_rng(1)
    tokens = rng.integers(0, vocab, size=(batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), bool)
    mask[::2, seq - seq // 4:] = False
    return {"input_tokens": tokens, "input_mask": mask}


def child(name: str, plans: list[str], time_limit: float, stablehlo_dir: str | None, budget: int | None = None,
          steps: int = 0):
    """Measure ``plans`` of ``name`` in this process; yields one row dict per plan (``auto_budget`` under
    ``budget`` bytes per device, else halfway between the ``expert`` and ``replicated`` rows measured before
    it here; ``steps``: each ``auto*`` plan also runs that many steps of ``plan.jit()``, real_models.loop_steps)."""
    real_models.setup_child_env()
    import hloshard.jax  # noqa: F401
    import ortools.sat.python.cp_model  # noqa: F401

    import jax
    import numpy as np
    from jax.sharding import Mesh

    llama, graphdef, paths, params, experts, batch, seq = build(name)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
    data = example_batch(CONFIGS[name][0]["vocab_size"], batch, seq)
    plain = make_step(llama, graphdef, paths)
    ctx = {"step": plain, "mesh": mesh, "params": params, "data": data, "experts": experts,
           "model_name": name, "stablehlo_dir": stablehlo_dir, "steps": steps}
    ctx["want"] = jax.jit(plain)(params, data)   # the unsharded step (one device)
    done: dict = {}
    for plan in plans:
        c = dict(ctx)
        inner = plan
        b = budget if plan == "auto_budget" else None
        if plan == "auto_budget" and b is None and "peak_bytes" in done.get("expert", {}) \
                and "peak_bytes" in done.get("replicated", {}):
            b = (done["expert"]["peak_bytes"] + done["replicated"]["peak_bytes"]) // 2
        if plan == "expert":
            c["step"] = make_step(llama, graphdef, paths, mesh)
        elif plan == "expert_params":
            inner = "expert"
        c["plan_label"] = plan
        try:
            row = real_models.measure_plan(c, inner, b, time_limit, None)
        except Exception as exc:  # noqa: BLE001 - one plan's failure is its row
            row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        row.update(plan=plan, model=name, batch=batch, seq=seq, params=int(sum(v.size for v in params.values())))
        done[plan] = row
        yield row


def run_one(name: str, plan: str, args, budget: int | None = None) -> dict:
    extra = ["--stablehlo-dir", os.path.abspath(args.stablehlo_dir)] if args.stablehlo_dir else []
    if budget is not None:
        extra += ["--budget", str(int(budget))]
    extra += ["--steps", str(int(args.steps))]
    return real_models.run_child(pathlib.Path(__file__).resolve(), name, plan, args.time_limit, args.timeout, extra)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="llama3_small", help=f"comma list of {', '.join(CONFIGS)}")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--time-limit", type=float, default=20.0, help="auto_shard's solver seconds")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (model, plan) child")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--stablehlo-dir", default=None, help="write each plan's lowered StableHLO here")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "PLAN"), help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=10, help="steps of plan.jit() each auto* plan runs in a loop (0: none)")
    args = ap.parse_args(argv)
    why = tunix_missing()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    if args.child:
        for row in child(args.child[0], args.child[1].split(","), args.time_limit, args.stablehlo_dir, args.budget,
                         args.steps):
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()
        return 0
    names, plans = args.models.split(","), args.plans.split(",")
    for n in names:
        if n not in CONFIGS:
            print(f"error: unknown model {n!r} (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    for p in plans:
        if p not in PLANS:
            print(f"error: unknown plan {p!r} (known: {', '.join(PLANS)})", file=sys.stderr)
            return 2
    if args.stablehlo_dir:
        os.makedirs(args.stablehlo_dir, exist_ok=True)
    rows = []
    for name in names:
        got: dict = {}
        for plan in plans:
            budget = None
            if plan == "auto_budget":
                e, r = got.get("expert"), got.get("replicated")
                if not e or not r or "error" in e or "error" in r:
                    rows.append({"model": name, "plan": plan, "error": "needs the expert and replicated peaks"})
                    continue
                budget = (e["peak_bytes"] + r["peak_bytes"]) // 2
            got[plan] = r = run_one(name, plan, args, budget)
            rows.append(r)
            print(f"[{name} {plan}] " + (r.get("error") or f"bytes {r['comm_bytes'] / MB:.2f} MB peak "
                  f"{r['peak_bytes'] / MB:.2f} MB err {r['rel_err']:.1e} tied {r['tied_mismatches']} "
                  f"s {r.get('seconds', '-')} wall {r['wall']}"), file=sys.stderr, flush=True)
    print(real_models.table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "time_limit": args.time_limit, "library": "google-tunix"}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
