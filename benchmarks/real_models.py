#!/usr/bin/env python3
"""Real models from a real library (keras-hub on jax): hloshard's ``auto_shard`` against the expert plan.

For each keras-hub causal LM (Gemma, Llama, Qwen2; small random configs built from their constructors,
float32, no download) a train step -- forward through ``model.stateless_call``, masked next-token
cross-entropy, gradients, SGD -- on 8 fake CPU devices, mesh 2x4 ``('batch', 'model')``. Plans:

* ``expert``: the backbone's own ``get_layout_map(device_mesh)`` (keras distribution API) turned into
  ``NamedSharding`` of the parameters (a variable no rule matches: replicated), tokens, mask and labels
  split over ``'batch'``; the updated parameters leave as they came in, the loss replicated.
* ``replicated``: parameters replicated, the batch over ``'batch'`` (data parallel; only its peak is used:
  the budget below).
* ``auto``: ``hloshard.jax.auto_shard`` with nothing sharded and no budget.
* ``auto_budget``: ``auto_shard`` with ``memory_budget`` halfway between the expert's and the replicated
  plan's peak per device by XLA.
* ``auto_expert``: ``auto_shard`` given the expert's shardings of the parameters and the batch (the
  example arguments carry them; ``keep_shardings="io"`` keeps them).

All figures are XLA's: collective bytes per device = ring bytes of the collectives in the raw
``after_spmd-partitioning`` HLO of the compiled step (``tests/xla_bytes.collective_bytes``: all-gather
(n-1)/n x result, reduce-scatter (n-1)/n x operand, all-reduce 2(n-1)/n, all-to-all (n-1)/n,
collective-permute bytes sent); peak per device = ``compiled.memory_analysis()`` argument + output +
temp - alias bytes. ``rel err``: the plan's compiled step on random data against the unsharded step
(one device), max over the loss and every parameter's update ``new - old`` of ||got - want|| / ||want||
(the gradient's error, stricter than the outputs' own, ``rel_err_out`` in the JSON: max over the loss and
the new parameters).  ``rel err f64``: the same plan (its shardings, and auto_shard's constraints) on the
step evaluated in float64 (:func:`hloshard.jax.jaxpr.runner` ``promote=True``: the traced program with every
float32 widened; :func:`float64_reference` says why keras-hub's own float64 build is not used) against the
unsharded float64 step, same metric: float64 rounding (~1e-13) when the plan computes the same function.
``f32 floor``: the unsharded float32 step against the unsharded float64 step (the model's own rounding).
``tied``: parameters whose output sharding of the compiled step is not equivalent to their input
sharding (each would be resharded before the next step; must be 0). ``seconds``: wall time of
``auto_shard``. ``pred``: hloshard's own prediction for its plan (ring bytes of the collectives it
predicts, :func:`hloshard.xla_compare.predicted_collectives`; peak of its liveness model).

``compile_cpu_seconds``: CPU seconds of this process tracing, lowering and compiling the plan's step
(``sharding_constraints``: the ``with_sharding_constraint``s it lowers to; auto plans: ``pins``, with
``output_constraints`` / ``outputs_left_to_xla``, :func:`hloshard.jax.jaxpr.carried_outputs`).

Each (model, plan) runs in a child process with a timeout, so one failure leaves a row saying why.
hloshard (hence OR-Tools) is imported before keras-hub (which imports tensorflow): the other order
crashes OR-Tools (a protobuf clash, google/or-tools#3230).

Usage::

    KERAS_BACKEND=jax python benchmarks/real_models.py [--models gemma,llama] [--plans expert,auto]
        [--quick] [--time-limit 20] [--timeout 900] [--json out.json] [--diff]

``--quick``: the small configs only. ``--diff``: per model, the collectives of the expert plan and of
``auto`` grouped by kind and op_name (the diagnosis of where the bytes go).  ``--device tpu-v5e`` (any
``auto_shard`` device profile): the auto plans are planned for that device (its compiler's memory model and its
seconds: ``pred_peak`` is then the TPU prediction, and each auto row gains ``step_time``, hloshard's estimated
step time of its written plan in seconds); XLA's figures are still the 8 CPU devices'
(``benchmarks/real_models_tpu.py`` compiles the plans on libtpu; ``benchmarks/tpu_real_device.py`` is the same
child with the step times appended to a file of their own).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
MB = 1e6

# name -> (keras-hub family, backbone kwargs, batch, sequence). Sizes: issue 24 item 3. Key/value heads
# are 4 everywhere: the expert layouts split the head dimension over 'model' (4 devices), so fewer heads
# do not divide it (jax refuses the expert's sharding).
CONFIGS: dict[str, tuple[str, dict, int, int]] = {
    "gemma": ("gemma", dict(vocabulary_size=8192, num_layers=4, num_query_heads=8, num_key_value_heads=4,
                            hidden_dim=512, intermediate_dim=2048, head_dim=64), 16, 128),
    "gemma_small": ("gemma", dict(vocabulary_size=2048, num_layers=2, num_query_heads=8, num_key_value_heads=4,
                                  hidden_dim=256, intermediate_dim=1024, head_dim=32), 8, 64),
    "llama": ("llama", dict(vocabulary_size=8192, num_layers=2, num_query_heads=8, num_key_value_heads=4,
                            hidden_dim=512, intermediate_dim=1024), 8, 128),
    "llama_small": ("llama", dict(vocabulary_size=2048, num_layers=2, num_query_heads=8, num_key_value_heads=4,
                                  hidden_dim=256, intermediate_dim=512), 8, 64),
    "qwen2": ("qwen2", dict(vocabulary_size=8192, num_layers=2, num_query_heads=8, num_key_value_heads=4,
                            hidden_dim=512, intermediate_dim=1024), 8, 128),
    "qwen2_small": ("qwen2", dict(vocabulary_size=2048, num_layers=2, num_query_heads=8, num_key_value_heads=4,
                                  hidden_dim=256, intermediate_dim=512), 8, 64),
}
# Mistral (held out for the plan.jit-vs-written-module check of round 17: new user 16 finding 5): keras-hub
# has no MistralBackbone.get_layout_map; its variable paths are Llama's, so the expert plan is
# LlamaBackbone.get_layout_map's (EXPERT_LAYOUT_FROM), as the new user applied it. Sliding window 32 of 64.
CONFIGS["mistral_small"] = ("mistral", dict(vocabulary_size=2048, num_layers=2, num_query_heads=8,
                                            num_key_value_heads=4, hidden_dim=256, intermediate_dim=512,
                                            sliding_window=32), 8, 64)
#: family -> the family whose get_layout_map is the expert plan (a backbone without one of its own)
EXPERT_LAYOUT_FROM = {"mistral": "llama"}
# the CI test's model (tests/test_real_models.py): seconds, not minutes
CONFIGS["gemma_tiny"] = ("gemma", dict(vocabulary_size=512, num_layers=1, num_query_heads=8, num_key_value_heads=4,
                                       hidden_dim=128, intermediate_dim=256, head_dim=16), 8, 32)
QUICK = ["gemma_small", "llama_small", "qwen2_small"]
PLANS = ["expert", "replicated", "fsdp", "auto", "auto_budget", "auto_expert"]
LEARNING_RATE = 1e-2


# ------------------------------------------------------------------------------------------------
# the model and its train step (child side: jax with 8 CPU devices, keras on the jax backend)

def setup_child_env() -> None:
    """8 fake CPU devices and keras' jax backend; must run before jax / keras are imported."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build(name: str):
    """(causal LM, backbone class whose ``get_layout_map`` is the expert plan, batch, seq) of config
    ``name``, random weights (seeded)."""
    import keras
    import keras_hub

    family, kwargs, batch, seq = CONFIGS[name]
    keras.utils.set_random_seed(0)
    backbone_cls, lm_cls = {
        "gemma": (keras_hub.models.GemmaBackbone, keras_hub.models.GemmaCausalLM),
        "llama": (keras_hub.models.LlamaBackbone, keras_hub.models.LlamaCausalLM),
        "qwen2": (keras_hub.models.QwenBackbone, keras_hub.models.QwenCausalLM),
        "mistral": (keras_hub.models.MistralBackbone, keras_hub.models.MistralCausalLM),
    }[family]
    backbone = backbone_cls(dtype="float32", **kwargs)
    lm = lm_cls(backbone=backbone, preprocessor=None)
    if family in EXPERT_LAYOUT_FROM:   # the layout map's class (expert_specs)
        backbone_cls = {"llama": keras_hub.models.LlamaBackbone}[EXPERT_LAYOUT_FROM[family]]
    return lm, backbone_cls, batch, seq


def make_step(lm):
    """``step(params, batch) -> (loss, new_params)``: params a dict variable path -> array (the
    trainable variables), batch a dict token_ids / padding_mask / labels ([B, S] int32, int32, int32);
    masked mean next-token cross-entropy, SGD with LEARNING_RATE."""
    import jax
    import jax.numpy as jnp

    paths = [v.path for v in lm.trainable_variables]
    non_trainable = [v.value for v in lm.non_trainable_variables]

    def loss_fn(params, batch):
        trainable = [params[p] for p in paths]
        logits, _ = lm.stateless_call(trainable, non_trainable,
                                      {"token_ids": batch["token_ids"], "padding_mask": batch["padding_mask"]},
                                      training=True)
        # in the parameters' float type: float32, or float64 for the float64 step (``build(..., "float64")``)
        ftype = params[paths[0]].dtype
        logp = jax.nn.log_softmax(logits.astype(ftype), axis=-1)
        nll = -jnp.take_along_axis(logp, batch["labels"][..., None], axis=-1)[..., 0]
        mask = batch["padding_mask"].astype(ftype)
        return jnp.sum(nll * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    def train_step(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return loss, jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)

    return train_step


def example(lm, batch: int, seq: int):
    """(params, batch) concrete arrays: the model's random weights; tokens seeded, the last quarter of
    every other row padded."""
    import numpy as np

    params = {v.path: np.asarray(v.value) for v in lm.trainable_variables}
    vocab = lm.backbone.vocabulary_size
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, size=(batch, seq + 1)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[::2, seq - seq // 4:] = 0
    data = {"token_ids": tokens[:, :-1], "padding_mask": mask, "labels": tokens[:, 1:].copy()}
    return params, data


def expert_specs(lm, backbone_cls, jmesh):
    """PartitionSpec per parameter path from ``backbone_cls.get_layout_map`` (None where no rule matches)."""
    import keras
    from jax.sharding import PartitionSpec as P

    kmesh = keras.distribution.DeviceMesh(shape=tuple(jmesh.devices.shape), axis_names=list(jmesh.axis_names),
                                          devices=list(jmesh.devices.flat))
    layout_map = backbone_cls.get_layout_map(kmesh, model_parallel_dim_name="model", data_parallel_dim_name="batch")
    out = {}
    for v in lm.trainable_variables:
        layout = layout_map[v.path]
        out[v.path] = P() if layout is None else P(*layout.axes)
    return out


def _spmd_text(lowered, compile_options=None):
    """(compiled, raw after_spmd-partitioning HLO text) of ``lowered``."""
    import glob
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hloshard-real-") as dump:
        compiled = lowered.compile(compiler_options={"xla_dump_to": dump,
                                                     "xla_dump_hlo_pass_re": "spmd-partitioning"})
        files = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
        raw = open(files[-1]).read() if files else ""
    return compiled, raw


def xla_figures(compiled, raw: str) -> dict:
    """XLA's collective ring bytes per device and memory_analysis peak per device of a compiled step."""
    sys.path.insert(0, str(ROOT))
    from tests.xla_bytes import collective_bytes

    counted = collective_bytes(raw)
    m = compiled.memory_analysis()
    peak = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes
    kinds: dict = {}
    for c in counted:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    return {"comm_bytes": float(sum(c["bytes"] for c in counted)), "peak_bytes": int(peak), "collectives": kinds}


def collectives_by_op(raw: str) -> list[dict]:
    """The partitioned HLO's collectives with kind, shape, ring bytes and op_name (for ``--diff``)."""
    import re

    sys.path.insert(0, str(ROOT))
    from tests.xla_bytes import collective_bytes

    meta = {}
    for line in raw.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\S+(?:\[[^\]]*\])?(?:\{[^}]*\})?)", line)
        if m:
            op = re.search(r'op_name="([^"]*)"', line)
            meta[m.group(1)] = (m.group(2), op.group(1) if op else "")
    out = []
    for c in collective_bytes(raw):
        shape, op = meta.get(c["name"], ("", ""))
        out.append({"name": c["name"], "kind": c["kind"], "bytes": c["bytes"], "shape": shape, "op_name": op})
    return out


def _predicted_by_op(module, predicted: dict) -> list[dict]:
    """hloshard's predicted collectives (instruction name -> records) with the instruction's op_name."""
    import re

    ops = {}
    for comp in module.computations:
        for instr in comp.instructions:
            m = re.search(r'op_name="([^"]*)"', str(instr.attrs.get("metadata") or ""))
            ops[instr.name] = m.group(1) if m else ""
    return [{"name": n, "kind": r.kind, "bytes": r.total_bytes, "shape": r.source, "op_name": ops.get(n, "")}
            for n, rs in predicted.items() for r in rs]


def rel_err(got, want, params) -> float:
    """max over the loss and each parameter's update (new - old) of ||got - want|| / ||want||."""
    import numpy as np

    (gl, gp), (wl, wp) = got, want
    errs = [abs(float(gl) - float(wl)) / max(abs(float(wl)), 1e-30)]
    for k in wp:
        du_w = np.asarray(wp[k], np.float64) - params[k]
        du_g = np.asarray(gp[k], np.float64) - params[k]
        errs.append(float(np.linalg.norm(du_g - du_w) / max(np.linalg.norm(du_w), 1e-30)))
    return max(errs)


def child(name: str, plans: list[str], budget: int | None, time_limit: float, diff_dir: str | None,
          stablehlo_dir: str | None = None, deterministic: bool = True, float64_plans=None, written: bool = False,
          steps: int = 0, device: str | None = None):
    """Measure ``plans`` of model ``name`` in this process (the model is built once); yields one row dict
    per plan (the plans in ``float64_plans``, all when None, with ``rel_err_f64`` / ``rel_err_f32_floor``). ``auto_budget`` without ``budget`` takes it from the ``expert`` and ``replicated`` rows
    measured before it in ``plans``. ``steps``: each ``auto*`` plan also runs that many steps of
    ``plan.jit()`` in a loop (:func:`loop_steps`). ``device``: ``auto_shard``'s device profile (``--device``;
    None: the unit model). A plan that raises gives a row with ``error``."""
    setup_child_env()
    import hloshard.jax  # noqa: F401  - before keras-hub (tensorflow): google/or-tools#3230
    import ortools.sat.python.cp_model  # noqa: F401

    import jax
    import numpy as np
    from jax.sharding import Mesh

    lm, backbone_cls, batch, seq = build(name)
    ctx = {"step": make_step(lm), "mesh": Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))}
    ctx["params"], ctx["data"] = example(lm, batch, seq)
    ctx["experts"] = expert_specs(lm, backbone_cls, ctx["mesh"])
    ctx["model_name"], ctx["stablehlo_dir"] = name, stablehlo_dir
    ctx["deterministic"] = deterministic   # auto_shard's mode (--wall-clock: False, auto_shard's default)
    ctx["want"] = jax.jit(ctx["step"])(ctx["params"], ctx["data"])   # the unsharded step (one device)
    ctx["float64_plans"] = float64_plans
    ctx["written"] = written
    ctx["steps"] = steps
    ctx["device"] = device
    if float64_plans is None or any(p in float64_plans for p in plans):
        float64_reference(ctx)
    done: dict = {}
    for plan in plans:
        b = budget if plan == "auto_budget" else None
        if plan == "auto_budget" and b is None and "peak_bytes" in done.get("expert", {}) \
                and "peak_bytes" in done.get("replicated", {}):
            b = (done["expert"]["peak_bytes"] + done["replicated"]["peak_bytes"]) // 2
        try:
            row = measure_plan(ctx, plan, b, time_limit,
                               os.path.join(diff_dir, f"{name}.{plan}.json") if diff_dir else None)
        except Exception as exc:  # noqa: BLE001 - one plan's failure is its row
            traceback.print_exc()
            row = {"plan": plan, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        row.update(model=name, batch=batch, seq=seq, params=int(sum(v.size for v in ctx["params"].values())))
        done[plan] = row
        yield row


def measure_plan(ctx: dict, plan: str, budget: int | None, time_limit: float, diff_path: str | None) -> dict:
    """One plan of the model in ``ctx`` (step, mesh, params, data, experts, want), measured by XLA."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    from hloshard.jax import auto_shard

    step, mesh, params, data, experts = ctx["step"], ctx["mesh"], ctx["params"], ctx["data"], ctx["experts"]
    paths = list(params)
    row: dict = {"plan": plan}
    named = lambda spec: NamedSharding(mesh, spec)  # noqa: E731
    data_sh = {k: named(P("batch")) for k in data}

    abstract = lambda x, sh=None: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh)  # noqa: E731
    res = None
    if plan == "expert":
        psh = {k: named(experts[k]) for k in paths}
        fn, in_sh, out_sh = step, (psh, data_sh), (named(P()), psh)
    elif plan == "replicated":
        psh = {k: named(P()) for k in paths}
        fn, in_sh, out_sh = step, (psh, data_sh), (named(P()), psh)
    elif plan == "fsdp":
        # the memory guard's FSDP baseline as jax.jit runs it (hloshard.jax.guard.fsdp_entry: one rule for the
        # dim, fsdp_dim): every weight and the batch split over every device, the intermediates left to XLA
        from hloshard.jax.guard import fsdp_dim

        every = tuple(mesh.axis_names)
        n = int(mesh.devices.size)

        def fsdp_spec(shape, dim):
            return P(*([None] * dim + [every])) if dim is not None else P()

        psh = {k: named(fsdp_spec(params[k].shape, fsdp_dim(params[k].shape, n))) for k in paths}
        dsh = {k: named(fsdp_spec(v.shape, 0 if v.ndim and v.shape[0] % n == 0 else None)) for k, v in data.items()}
        fn, in_sh, out_sh = step, (psh, dsh), (named(P()), psh)
    elif plan in ("auto", "auto_budget", "auto_expert"):
        if plan == "auto_expert":
            args = ({k: abstract(v, named(experts[k])) for k, v in params.items()},
                    {k: abstract(v, data_sh[k]) for k, v in data.items()})
        else:
            args = ({k: abstract(v) for k, v in params.items()}, {k: abstract(v) for k, v in data.items()})
        t0, c0, k0 = time.monotonic(), time.process_time(), os.times()
        dev = {"device": ctx["device"]} if ctx.get("device") else {}   # --device: auto_shard's profile
        res = auto_shard(step, *args, mesh=mesh, memory_budget=budget if plan == "auto_budget" else None,
                         keep_shardings="io", time_limit=time_limit, with_constraints=False,
                         deterministic=ctx.get("deterministic", True), **dev)
        row["seconds"] = round(time.monotonic() - t0, 1)
        # this process's CPU seconds in the call (less noisy than wall under load; child processes not counted)
        row["cpu_seconds"] = round(time.process_time() - c0, 1)
        # the CPU seconds of its XLA children (ended and reaped inside the call; round 27)
        k1 = os.times()
        row["children_cpu_seconds"] = round(k1.children_user + k1.children_system - k0.children_user
                                            - k0.children_system, 1)
        row["load"] = os.getloadavg()[0]   # the 1-minute load average as the call ended
        row["time"] = res.report.get("time")
        fn, in_sh, out_sh = res.fn, res.in_shardings, res.out_shardings
        rep = res.report
        row.update(pred_peak=rep.get("peak_memory_per_device"), status=rep.get("status"), gap=rep.get("gap"),
                   objective=rep.get("objective"), solver_objective=rep.get("solver_objective"),
                   budget=budget, guard=rep.get("memory_guard"), known_plans=rep.get("known_plans"),
                   pins=rep.get("pins"))
        if ctx.get("device"):   # hloshard's estimated step time of its written plan (seconds) under the profile
            row.update(device=ctx["device"], step_time=rep.get("step_time"))
        try:
            from hloshard.xla_compare import predicted_collectives

            sr = res.solve_result
            src = sr.written if getattr(sr, "written", None) is not None else sr
            predicted = predicted_collectives(src)
            row["pred_bytes"] = float(sum(r.total_bytes for rs in predicted.values() for r in rs))
            if diff_path:
                with open(diff_path.replace(".json", ".pred.json"), "w") as fh:
                    json.dump(_predicted_by_op(res.module, predicted), fh)
        except Exception as exc:  # noqa: BLE001 - the prediction is a side figure
            row["pred_bytes_error"] = f"{type(exc).__name__}: {exc}"
    else:
        raise ValueError(f"unknown plan {plan!r} (known: {', '.join(PLANS)})")

    c0 = time.process_time()   # the plan's compile: CPU seconds of tracing, lowering and XLA (round 25, jitfast)
    lowered = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh).lower(
        {k: abstract(v) for k, v in params.items()}, {k: abstract(v) for k, v in data.items()})
    # the with_sharding_constraints XLA compiles (plan.fn's; none for a plan given as in/out shardings alone)
    row["sharding_constraints"] = lowered.as_text().count("sdy.sharding_constraint")
    if ctx.get("stablehlo_dir"):   # for benchmarks/real_models_tpu.py (the TPU compiler, ahead of time);
        # with its locations, so the TPU's HLO keeps each instruction's op_name (hloshard_eqnN) for diagnosis
        stem = os.path.join(ctx["stablehlo_dir"], f"{ctx['model_name']}.{ctx.get('plan_label', plan)}")
        pathlib.Path(stem + ".mlir").write_text(lowered.as_text(debug_info=True))
        if res is not None:   # and hloshard's written module (what `hloshard solve` writes)
            pathlib.Path(stem + ".solved.hlo").write_text(res.hlo_text)
    compiled, raw = _spmd_text(lowered)
    row["compile_cpu_seconds"] = round(time.process_time() - c0, 2)   # noisy too, less than wall under load
    row.update(xla_figures(compiled, raw))
    if res is not None and ctx.get("written"):
        row["written_bytes"] = written_module_bytes(res.hlo_text, mesh.devices.size)
    if diff_path:
        with open(diff_path, "w") as fh:
            json.dump(collectives_by_op(raw), fh)

    # tied state: each parameter's output sharding vs its input sharding, as compiled
    ins = compiled.input_shardings[0][0]
    outs = compiled.output_shardings[1]
    bad = []
    for k in paths:
        si, so = ins[k], outs[k]
        if not si.is_equivalent_to(so, params[k].ndim):
            bad.append(f"{k}: in {getattr(si, 'spec', si)} out {getattr(so, 'spec', so)}")
    row["tied_mismatches"] = len(bad)
    row["tied_examples"] = bad[:4]
    row["param_specs_in"] = {k: str(getattr(ins[k], "spec", ins[k])) for k in paths}
    row["param_specs_out"] = {k: str(getattr(outs[k], "spec", outs[k])) for k in paths}
    row["data_specs_in"] = {k: str(getattr(s, "spec", s)) for k, s in compiled.input_shardings[0][1].items()}

    # numerics: the plan's compiled step against the unsharded step (one device)
    want = ctx["want"]
    placed_p = {k: jax.device_put(v, ins[k]) for k, v in params.items()}
    placed_d = {k: jax.device_put(v, compiled.input_shardings[0][1][k]) for k, v in data.items()}
    got = compiled(placed_p, placed_d)
    row["rel_err"] = rel_err(got, want, {k: np.asarray(v, np.float64) for k, v in params.items()})
    row["rel_err_out"] = max(float(np.linalg.norm(np.asarray(g, np.float64) - np.asarray(w, np.float64))
                                   / max(np.linalg.norm(np.asarray(w, np.float64)), 1e-30))
                             for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)))
    row["loss"] = float(want[0])
    if res is not None and ctx.get("steps"):
        row.update(loop_steps(res, params, data, ctx["steps"]))

    # float64 (hloshard.jax.jaxpr.runner promote=True: the same program, every float32 widened): the plan's
    # shardings (and auto_shard's constraints) against the unsharded float64 step.  A correct partitioning
    # agrees to float64 rounding; a plan that computes another function does not (the test: > 1e-9)
    from hloshard.jax.check import program

    if ctx.get("float64_plans") is not None and plan not in ctx["float64_plans"]:
        return row
    if "want64" not in ctx:   # a caller that built no float64 reference (real_models_tunix): float32 only
        return row
    with jax.enable_x64(True):
        if res is not None:
            closed, _, out_tree, pinned, operands, bodies = res.program
            fn64 = program(closed, out_tree, pinned, operands, bodies, promote=True)
        else:
            fn64 = program(*ctx["step_jaxpr"], promote=True)
        got64 = jax.jit(fn64, in_shardings=in_sh, out_shardings=out_sh)(placed_p, placed_d)
        row["rel_err_f64"] = rel_err(got64, ctx["want64"], {k: np.asarray(v, np.float64) for k, v in params.items()})
    row["rel_err_f32_floor"] = ctx["rel_err_f32_floor"]
    return row


def loop_steps(res, params: dict, data: dict, steps: int) -> dict:
    """Issue 24's loop: ``steps`` calls of ``res.jit()`` (``AutoShardResult.jit``: the plan's shardings and
    donation), each step's new parameters fed back as the next step's parameters, the batch the same.
    Returns ``steps``; ``step_compiles``: how many executables the jitted step holds after them (jax's cache
    of the one ``jit`` object: 1 when every step's arguments came in the layouts of the first -- a
    parameter that left in another layout would compile, or fail, again); ``step_resharded``: parameters
    whose sharding after the last step is not equivalent to the plan's input sharding; ``loss_first`` /
    ``loss_last`` (float)."""
    import jax

    jitted = res.jit()
    p_sh, d_sh = res.in_shardings[0], res.in_shardings[1]
    p = {k: jax.device_put(v, p_sh[k]) for k, v in params.items()}
    d = {k: jax.device_put(v, d_sh[k]) for k, v in data.items()}
    losses = []
    for _ in range(steps):
        loss, p = jitted(p, d)
        losses.append(float(loss))
    resharded = [k for k, v in p.items() if not v.sharding.is_equivalent_to(p_sh[k], v.ndim)]
    return {"steps": steps, "step_compiles": int(jitted._cache_size()), "step_resharded": len(resharded),
            "step_resharded_examples": resharded[:4], "loss_first": losses[0], "loss_last": losses[-1]}


def written_module_bytes(hlo_text: str, num_devices: int) -> float:
    """XLA's collective ring bytes per device for hloshard's written module (what ``hloshard solve``
    writes, every instruction's sharding and the operand pins), compiled in this process as ``hloshard
    cost --xla`` compiles it (:func:`hloshard.xla_check.compile_with_dump`: GSPMD): what ``plan.jit()``
    should move too (issue 24, "the plan XLA runs is the plan that was priced")."""
    import glob
    import tempfile

    from hloshard.xla_check import compile_with_dump

    sys.path.insert(0, str(ROOT))
    from tests.xla_bytes import collective_bytes

    with tempfile.TemporaryDirectory(prefix="hloshard-written-") as dump:
        compile_with_dump(hlo_text, num_devices, dump, "spmd-partitioning")
        files = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
        raw = open(files[0]).read() if files else ""
    return float(sum(c["bytes"] for c in collective_bytes(raw)))


def float64_reference(ctx: dict) -> None:
    """The unsharded float64 step of ``ctx`` (``want64``: :func:`hloshard.jax.jaxpr.runner` ``promote=True``
    of the step's jaxpr, one device; ``step_jaxpr``: (ClosedJaxpr, result treedef)) and the model's own
    float32 rounding floor (``rel_err_f32_floor``: the unsharded float32 step ``want`` against it, the
    ``rel_err`` metric).  keras-hub's models are not built in float64 for this: with ``dtype="float64"``
    their RMS norms still cast to ``"float32"`` (``gemma/rms_normalization.py`` "Always compute
    normalization in float32", ``llama_layernorm.py``, ``qwen_layernorm.py``), the attention softmax
    layers are built with ``dtype="float32"`` and keras' RoPE ``sin`` / ``cos`` of integer positions are
    ``floatx()``: 76 of gemma_small's 681 float values stay float32 (measured, round 15)."""
    import jax
    import numpy as np

    from hloshard.jax.check import program

    closed, out_struct = jax.make_jaxpr(ctx["step"], return_shape=True)(ctx["params"], ctx["data"])
    ctx["step_jaxpr"] = (closed, jax.tree_util.tree_structure(out_struct))
    with jax.enable_x64(True):
        ctx["want64"] = jax.jit(program(*ctx["step_jaxpr"], promote=True))(ctx["params"], ctx["data"])
        ctx["want64"] = jax.tree_util.tree_map(np.asarray, ctx["want64"])
    ctx["rel_err_f32_floor"] = rel_err(ctx["want"], ctx["want64"],
                                       {k: np.asarray(v, np.float64) for k, v in ctx["params"].items()})


# ------------------------------------------------------------------------------------------------
# parent: one child per (model, plan), the table

def run_one(name: str, plan: str, budget, args, diff_dir=None) -> dict:
    extra = []
    if budget is not None:
        extra += ["--budget", str(int(budget))]
    if diff_dir:
        extra += ["--diff-dir", diff_dir]
    if getattr(args, "stablehlo_dir", None):
        extra += ["--stablehlo-dir", os.path.abspath(args.stablehlo_dir)]
    if getattr(args, "wall_clock", False):
        extra += ["--wall-clock"]
    if getattr(args, "float64_plans", None) is not None:
        extra += ["--float64-plans", args.float64_plans]
    if getattr(args, "written", False):
        extra += ["--written"]
    if getattr(args, "steps", 0):
        extra += ["--steps", str(int(args.steps))]
    if getattr(args, "device", None):
        extra += ["--device", args.device]
    return run_child(pathlib.Path(__file__).resolve(), name, plan, args.time_limit, args.timeout, extra)


def run_child(script, name: str, plan: str, time_limit: float, timeout: float, extra=()) -> dict:
    """Run ``script --child NAME PLAN --time-limit T [extra]`` (this benchmark or one built on it) in a
    child process with this checkout's ``src`` first on PYTHONPATH; its last JSON line is the row, plus
    ``wall`` (seconds).  A timeout or a failed child gives a row with ``error``."""
    cmd = [sys.executable, str(script), "--child", name, plan, "--time-limit", str(time_limit), *extra]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"model": name, "plan": plan, "error": f"timeout after {timeout} s"}
    wall = round(time.monotonic() - t0, 1)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"model": name, "plan": plan, "error": f"exit {p.returncode}: {tail[:200]}", "wall": wall}
    row = json.loads(lines[-1])
    row["wall"] = wall
    return row


def _mb(x) -> str:
    return "-" if x is None else f"{x / MB:.2f}"


def table(rows: list[dict]) -> str:
    head = ("| model | plan | XLA bytes/dev (MB) | pred (MB) | XLA peak/dev (MB) | pred peak (MB) | budget (MB) "
            "| rel err | rel err f64 | f32 floor | tied mismatches | loop (steps, compiles, resharded) | auto_shard s (CPU-s) "
            "| vs expert (bytes, peak) |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    expert = {r["model"]: r for r in rows if r.get("plan") == "expert" and "error" not in r}
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['plan']} | error: {r['error']} |" + " |" * 12)
            continue
        e = expert.get(r["model"])
        vs = "-"
        if e and r["plan"] != "expert":
            vs = f"{r['comm_bytes'] / max(e['comm_bytes'], 1):.2f}x, {r['peak_bytes'] / max(e['peak_bytes'], 1):.2f}x"
        loop = f"{r['steps']}, {r['step_compiles']}, {r['step_resharded']}" if r.get("steps") else "-"
        err, e64, floor = (f"{r[k]:.1e}" if r.get(k) is not None else "-"
                           for k in ("rel_err", "rel_err_f64", "rel_err_f32_floor"))
        out.append(f"| {r['model']} | {r['plan']} | {_mb(r['comm_bytes'])} | {_mb(r.get('pred_bytes'))} | "
                   f"{_mb(r['peak_bytes'])} | {_mb(r.get('pred_peak'))} | {_mb(r.get('budget'))} | {err} | {e64} | {floor} | "
                   f"{r['tied_mismatches']} | {loop} | {r.get('seconds', '-')} ({r.get('cpu_seconds', '-')}) | {vs} |")
    return "\n".join(out)


def _op_key(op_name: str) -> str:
    """op_name without the jit(...) prefix and auto_shard's hloshard_eqnN scopes (so plans compare)."""
    import re

    return re.sub(r"^jit\([^/]*\)/", "", re.sub(r"hloshard_eqn\d+/?|\(hloshard_eqn\d+\)", "", op_name))


def by_op_table(title: str, columns: list[tuple[str, str]], k: int = 15) -> str:
    """Collective bytes per device grouped by op_name (``_op_key``) for several sources (label, JSON of
    ``collectives_by_op`` / ``_predicted_by_op``); the k rows where the last column differs most from the
    first, in MB per device."""
    sums = []
    for _, path in columns:
        g: dict = {}
        for c in json.load(open(path)):
            key = _op_key(c["op_name"]) or c["name"]
            n, b, kinds = g.get(key, (0, 0.0, set()))
            g[key] = (n + 1, b + c["bytes"], kinds | {c["kind"]})
        sums.append(g)
    keys = sorted(set().union(*sums), key=lambda x: -abs(sums[-1].get(x, (0, 0.0))[1] - sums[0].get(x, (0, 0.0))[1]))
    labels = [lab for lab, _ in columns]
    out = [f"#### {title}", "", "| op_name | " + " | ".join(f"{lab} MB (n, kinds)" for lab in labels) + " |",
           "|---|" + "---|" * len(labels)]
    for key in keys[:k]:
        cells = []
        for g in sums:
            n, b, kinds = g.get(key, (0, 0.0, set()))
            cells.append(f"{b / MB:.3f} ({n}{', ' + '/'.join(sorted(kinds)) if kinds else ''})")
        out.append(f"| `{key[-100:]}` | " + " | ".join(cells) + " |")
    totals = [sum(v[1] for v in g.values()) / MB for g in sums]
    out.append("| **total** | " + " | ".join(f"**{t:.3f}**" for t in totals) + " |")
    return "\n".join(out)


def diff_reports(name: str, d: str) -> list[str]:
    """The --diff tables of model ``name`` from the JSON files in ``d``."""
    f = lambda plan, suffix="json": os.path.join(d, f"{name}.{plan}.{suffix}")  # noqa: E731
    out = []
    for plan in ("auto", "auto_expert", "auto_budget"):
        if os.path.exists(f("expert")) and os.path.exists(f(plan)):
            out.append(by_op_table(f"{name}: XLA's collectives, expert vs {plan}", [("expert", f("expert")), (plan, f(plan))]))
        if os.path.exists(f(plan, "pred.json")) and os.path.exists(f(plan)):
            out.append(by_op_table(f"{name} {plan}: hloshard's prediction vs XLA", [("predicted", f(plan, "pred.json")),
                                                                                     ("XLA", f(plan))]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help=f"comma list of {', '.join(CONFIGS)}")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--quick", action="store_true", help="the small configs only")
    ap.add_argument("--time-limit", type=float, default=20.0,
                    help="auto_shard's time_limit (a work budget; with --wall-clock seconds for the whole call)")
    ap.add_argument("--wall-clock", action="store_true",
                    help="auto_shard in wall-clock mode (deterministic=False, its default); without it "
                         "deterministic=True, the same plans on every run")
    ap.add_argument("--float64-plans", default=None,
                    help="comma list of the plans measured in float64 too (rel_err_f64; one more compile each); "
                         "default all, '' none")
    ap.add_argument("--written", action="store_true",
                    help="also compile each auto plan's written module (GSPMD, as `hloshard cost --xla`): "
                         "written_bytes, what plan.jit() should move")
    ap.add_argument("--steps", type=int, default=10,
                    help="each auto* plan also runs this many steps of plan.jit() in a loop, its new parameters "
                         "fed back (step_compiles: executables jax compiled; step_resharded: parameters that left "
                         "in another layout); 0: none")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (model, plan) child")
    ap.add_argument("--json", default=None, help="write the rows here (and each as it comes to JSON + 'l')")
    ap.add_argument("--diff", action="store_true", help="collectives by op_name: expert vs auto, predicted vs XLA")
    ap.add_argument("--diff-keep", default=None, help="with --diff: keep the per-plan collective JSON files here")
    ap.add_argument("--stablehlo-dir", default=None,
                    help="write each plan's lowered StableHLO here (MODEL.PLAN.mlir; benchmarks/real_models_tpu.py)")
    ap.add_argument("--device", default=None,
                    help="auto_shard's device profile for the auto plans (e.g. tpu-v5e: memory and seconds as that "
                         "device's compiler; the row gains step_time); XLA's figures stay the 8 CPU devices'")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "PLAN"), help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--diff-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        for row in child(args.child[0], args.child[1].split(","), args.budget, args.time_limit, args.diff_dir,
                         args.stablehlo_dir, deterministic=not args.wall_clock, float64_plans=None if args.float64_plans is None else
                         [p for p in args.float64_plans.split(",") if p], written=args.written, steps=args.steps,
                         device=args.device):
            row.pop("expert_specs", None)
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()
        return 0
    names = args.models.split(",") if args.models else (QUICK if args.quick else list(CONFIGS))
    plans = args.plans.split(",")
    import tempfile

    if args.stablehlo_dir:
        os.makedirs(args.stablehlo_dir, exist_ok=True)
    tmp = args.diff_keep or tempfile.mkdtemp(prefix="hloshard-real-diff-")
    os.makedirs(tmp, exist_ok=True)
    rows, diffs = [], []
    for name in names:
        if name not in CONFIGS:
            print(f"error: unknown model {name!r} (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
        got: dict = {}
        for plan in plans:
            budget = None
            if plan == "auto_budget":
                e, r = got.get("expert"), got.get("replicated")
                if not e or not r or "error" in e or "error" in r:
                    got[plan] = {"model": name, "plan": plan, "error": "needs the expert and replicated peaks"}
                    rows.append(got[plan])
                    continue
                budget = (e["peak_bytes"] + r["peak_bytes"]) // 2
            got[plan] = run_one(name, plan, budget, args, tmp if args.diff else None)
            rows.append(got[plan])
            if args.json:   # row by row, so an interrupted run keeps what it measured
                with open(args.json + "l", "a") as fh:
                    fh.write(json.dumps(got[plan]) + "\n")
            r = got[plan]
            print(f"[{name} {plan}] " + (r.get("error") or f"bytes {_mb(r['comm_bytes'])} MB (written {_mb(r.get('written_bytes'))}) peak {_mb(r['peak_bytes'])} MB "
                  f"err {r['rel_err']:.1e} f64 {r.get('rel_err_f64') or float('nan'):.1e} tied {r['tied_mismatches']} s {r.get('seconds', '-')} wall {r['wall']}"),
                  file=sys.stderr, flush=True)
        if args.diff:
            diffs += diff_reports(name, tmp)
    print(table(rows))
    if args.diff:
        print(f"\n(collectives per plan: {tmp})")
    for d in diffs:
        print()
        print(d)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "time_limit": args.time_limit}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
