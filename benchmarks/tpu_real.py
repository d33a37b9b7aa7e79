#!/usr/bin/env python3
"""Single-chip HLO modules timed on a real TPU v5e chip, beside hloshard's estimate and libtpu's own (issue 27).

Three figures per module, all for ONE chip (``--mesh 1``: no collectives, so only the compute / HBM part
of the step-time model is checked):

* **measured**: the wall time of the module compiled by the real TPU client and run on the chip
  (median of >= 20 calls with ``block_until_ready`` each, their spread, and the time per call of calls
  queued back to back with one wait at the end -- the host's round trip taken out);
* **hloshard**: ``hloshard cost FILE --mesh 1 --device tpu-v5e --format json`` (``estimated_step_time_s``
  and its breakdown, :mod:`hloshard.timing`);
* **TPU AOT**: libtpu's own cost model, ``cost_analysis()['optimal_seconds']`` of the same text compiled
  ahead of time for one chip of ``v5e:2x2`` (libtpu refuses ``v5e:1x1``; :func:`hloshard.xla_cost.tpu_cost`),
  and the ``optimal_seconds`` the chip's own compile reports (``--device-run`` records it, with its
  ``ConcatBitcast`` count: libtpu counts -1 s for each).

What differs from ``benchmarks/tpu_measured.py`` (whose helpers this reuses: the one-chip compile of an
HLO text, the entry parameters, the profiler's device time): the chip runs the HLO *text* hloshard reads
(not a jax function re-lowered on the TPU machine), so the three figures are of one byte-identical
module; and the modules include the calibration pair (a compute-bound bf16 matmul, HBM-bound
elementwise passes: peak FLOP/s and HBM bandwidth as achieved), train steps in float32 and bfloat16 at
1-50 ms sizes, ``scripts/make_samples.py``'s transformer train step (the generator behind
``scripts/make_transformer.py``) at 12 and 48 layers, and the samples with their shardings stripped
(microseconds: launch-bound, shown for completeness).

Modes::

    # here (jax on CPU): write the modules, DIR/NAME.hlo (and DIR/modules.json: what each one is)
    python benchmarks/tpu_real.py --write tmp/tpureal
    # on the TPU machine (jax, jaxlib, libtpu, numpy only): compile, run, time -> OUT (JSON); 172 s for the
    # 22 modules on a v5e chip (13 cores), compiles included
    python benchmarks/tpu_real.py --device-run tmp/tpureal $OUT/tpu_real.json [--budget-s 200]
    # here: hloshard's estimate and libtpu-AOT's for each module -> DIR/predicted.json
    python benchmarks/tpu_real.py --predict tmp/tpureal --tpu-python /work/venv-pins/bin/python
    # here: the join: measured beside both predictions, a table (and --json OUT for the joined rows)
    python benchmarks/tpu_real.py --join tmp/tpureal/predicted.json benchmarks/measured/tpu_real/tpu_real.json

Round 32 (per kernel)::

    python benchmarks/tpu_real.py --write tmp/held --held          # the held-out programs (jax on CPU)
    python benchmarks/tpu_real.py --device-run DIR $OUT/k.json --per-kernel   # + each kernel's row
    python benchmarks/tpu_real.py --kernels benchmarks/measured/tpu_real/perkernel_v5e_r32.json [--names a,b]

``--device-run`` also runs on jax's CPU backend (``JAX_PLATFORMS=cpu``): the same code path but the
platform, which is how it is tested without a chip.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import tpu_measured as tm  # noqa: E402  (stdlib-only at import: safe on the TPU machine)

#: Calls before timing (the first one also transfers), timed calls at least / at most; the timed calls
#: are raised from the minimum until they add up to about TARGET_S of chip time.
WARMUP, MIN_CALLS, MAX_CALLS, TARGET_S = 3, 20, 200, 0.25
#: The device run stops starting new modules after this many seconds (the lead's run has 4 minutes).
BUDGET_S = 200.0


# -------------------------------------------------------------------------------------------------
# the modules (written here, with jax on CPU)

def _functions() -> dict:
    """``{name: (fn, [ShapeDtypeStruct...], kind, note)}`` for the jax functions written as modules; kind is
    ``calibration`` or ``program``.  Sizes: a v5e chip's datasheet gives 197 TFLOP/s bf16 and 819 GB/s
    HBM (``hloshard.devices``), so each is meant to take 1-50 ms there."""
    import jax
    import jax.numpy as jnp

    S = jax.ShapeDtypeStruct
    bf, f32 = jnp.bfloat16, jnp.float32
    out = {}

    def matmul(a, b):
        return a @ b

    out["calib_matmul_bf16_8192"] = (matmul, [S((8192, 8192), bf), S((8192, 8192), bf)], "calibration",
                                     "8192^3 bf16 dot: 1.10 TFLOP, compute-bound")
    out["calib_matmul_f32_4096"] = (matmul, [S((4096, 4096), f32), S((4096, 4096), f32)], "calibration",
                                    "4096^3 f32 dot (default precision): 137 GFLOP")

    def chain(x):   # one fused pass: reads x once, writes once
        return (x * 1.5 + 0.25) * x - 0.125

    out["calib_ew_f32_256mib"] = (chain, [S((8192, 8192), f32)], "calibration",
                                  "elementwise chain over 256 MiB f32: 512 MiB through HBM")
    out["calib_ew_bf16_256mib"] = (chain, [S((16384, 8192), bf)], "calibration",
                                   "elementwise chain over 256 MiB bf16: 512 MiB through HBM")

    def rowsum(x):
        return jnp.sum(x, axis=1)

    out["calib_reduce_f32_256mib"] = (rowsum, [S((8192, 8192), f32)], "calibration",
                                      "row sums of 256 MiB f32: 256 MiB read")

    for dt, tag in ((f32, "f32"), (bf, "bf16")):
        out[f"mlp_train_{tag}"] = _mlp(jax, jnp, dt) + ("program", f"4-layer MLP 4096 wide, batch 2048, SGD, {tag}")
        out[f"transformer_train_{tag}"] = _transformer(jax, jnp, dt) + (
            "program", f"4-layer pre-LN transformer d=1024 f=4096 16 heads, batch 8 x seq 512, SGD, {tag}")
        out[f"convnet_train_{tag}"] = _convnet(jax, jnp, dt) + (
            "program", f"3 conv 3x3 layers, 128 channels, batch 32 x 64x64, SGD, {tag}")
    return out


def _mlp(jax, jnp, dt, width=4096, batch=2048, layers=4):
    S = jax.ShapeDtypeStruct

    def loss(ws, x, y):
        h = x
        for w in ws[:-1]:
            h = jax.nn.relu(h @ w)
        return jnp.mean(jnp.square((h @ ws[-1]).astype(jnp.float32) - y.astype(jnp.float32)))

    def step(ws, x, y):
        l, g = jax.value_and_grad(loss)(ws, x, y)
        return l, [w - (1e-3 * gw).astype(w.dtype) for w, gw in zip(ws, g)]

    return step, [[S((width, width), dt) for _ in range(layers)], S((batch, width), dt), S((batch, width), dt)]


def _transformer(jax, jnp, dt, d=1024, f=4096, heads=16, batch=8, seq=512, layers=4):
    S = jax.ShapeDtypeStruct

    def ln(x, g, b):
        x32 = x.astype(jnp.float32)
        m = jnp.mean(x32, -1, keepdims=True)
        v = jnp.mean(jnp.square(x32 - m), -1, keepdims=True)
        return ((x32 - m) * jax.lax.rsqrt(v + 1e-6)).astype(x.dtype) * g + b

    def attn(q, k, v):
        sh = lambda t: t.reshape(batch, seq, heads, d // heads)  # noqa: E731
        s = jnp.einsum("bqhd,bkhd->bhqk", sh(q), sh(k)) / (d // heads) ** 0.5
        p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", p, sh(v)).reshape(batch, seq, d)

    def forward(params, x):
        for p in params:
            h = ln(x, p["g1"], p["b1"])
            x = x + attn(h @ p["wq"], h @ p["wk"], h @ p["wv"]) @ p["wo"]
            h = ln(x, p["g2"], p["b2"])
            x = x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
        return x

    def loss(params, x, y):
        return jnp.mean(jnp.square(forward(params, x).astype(jnp.float32) - y.astype(jnp.float32)))

    def step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        return l, jax.tree_util.tree_map(lambda p, gp: p - (1e-3 * gp).astype(p.dtype), params, g)

    layer = {"g1": S((d,), dt), "b1": S((d,), dt), "wq": S((d, d), dt), "wk": S((d, d), dt), "wv": S((d, d), dt),
             "wo": S((d, d), dt), "g2": S((d,), dt), "b2": S((d,), dt), "w1": S((d, f), dt), "w2": S((f, d), dt)}
    return step, [[dict(layer) for _ in range(layers)], S((batch, seq, d), dt), S((batch, seq, d), dt)]


#: the held-out programs of round 32 (``--write --held``): transformer train steps (d, f, heads, batch, seq,
#: layers, dtype) and MLP train steps (width, batch, layers, dtype) of other widths than the tuned-on ones,
#: named before the per-kernel rule (``hloshard.cost.roofline.vmem_intermediates``) was built
HELD_TRANSFORMERS = ((256, 1024, 8, 32, 128, 4, "f32"), (512, 2048, 8, 8, 256, 4, "f32"),
                     (384, 1536, 6, 16, 128, 6, "bf16"), (768, 3072, 12, 8, 256, 4, "bf16"),
                     (1024, 4096, 16, 4, 256, 2, "f32"), (128, 512, 4, 16, 256, 8, "f32"))
HELD_MLPS = ((1024, 512, 6, "f32"), (2048, 1024, 4, "bf16"))


def _held_functions() -> dict:
    """``{name: (fn, args, 'heldout', note)}`` for :data:`HELD_TRANSFORMERS` and :data:`HELD_MLPS`."""
    import jax
    import jax.numpy as jnp

    dts = {"f32": jnp.float32, "bf16": jnp.bfloat16}
    out = {}
    for d, f, h, b, sq, n, t in HELD_TRANSFORMERS:
        out[f"ho_tf_d{d}_b{b}_s{sq}_l{n}_{t}"] = _transformer(jax, jnp, dts[t], d, f, h, b, sq, n) + (
            "heldout", f"{n}-layer pre-LN transformer d={d} f={f} {h} heads, batch {b} x seq {sq}, SGD, {t}")
    for w, b, n, t in HELD_MLPS:
        out[f"ho_mlp_w{w}_b{b}_l{n}_{t}"] = _mlp(jax, jnp, dts[t], w, b, n) + (
            "heldout", f"{n}-layer MLP {w} wide, batch {b}, SGD, {t}")
    return out


def _convnet(jax, jnp, dt):
    S = jax.ShapeDtypeStruct
    batch, hw, c, layers = 32, 64, 128, 3

    def loss(ws, x, y):
        h = x
        for w in ws:
            h = jax.nn.relu(jax.lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                                         dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return jnp.mean(jnp.square(h.astype(jnp.float32) - y.astype(jnp.float32)))

    def step(ws, x, y):
        l, g = jax.value_and_grad(loss)(ws, x, y)
        return l, [w - (1e-3 * gw).astype(w.dtype) for w, gw in zip(ws, g)]

    return step, [[S((3, 3, c, c), dt) for _ in range(layers)], S((batch, hw, hw, c), dt), S((batch, hw, hw, c), dt)]


def _strip(text: str) -> str:
    """A module's text for one chip: shardings and the module's partition attributes dropped
    (:func:`tpu_measured.local_program`; a module without collectives keeps every instruction), and the
    ``metadata={...}`` attributes dropped (size only: neither compiler nor hloshard prices them)."""
    tm._index_shapes(text)
    return "\n".join(tm._strip_attr(line, "metadata") for line in tm.local_program(text).splitlines()) + "\n"


def write_modules(out: pathlib.Path, layers=(12, 48), samples: pathlib.Path | None = None, held: bool = False) -> dict:
    """Write ``out/NAME.hlo`` for every module and ``out/modules.json`` (``{name: {kind, note, bytes}}``).
    Needs jax (CPU) with 8 devices for the sample transformer (its specs name a 2x4 mesh; the shardings
    are stripped).  ``held``: the held-out programs of :func:`_held_functions` only.  Returns the
    modules.json dict."""
    import jax

    jax.config.update("jax_use_shardy_partitioner", False)
    out.mkdir(parents=True, exist_ok=True)
    meta = {}

    def put(name, text, kind, note):
        text = _strip(text)
        (out / f"{name}.hlo").write_text(text)
        meta[name] = {"kind": kind, "note": note, "bytes": len(text)}
        print("wrote", out / f"{name}.hlo", len(text), "bytes", flush=True)

    if held:
        for name, (fn, args, kind, note) in _held_functions().items():
            put(name, jax.jit(fn).lower(*args).as_text(dialect="hlo"), kind, note)
        (out / "modules.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
        return meta
    for name, (fn, args, kind, note) in _functions().items():
        put(name, jax.jit(fn).lower(*args).as_text(dialect="hlo"), kind, note)
    scripts = pathlib.Path(__file__).resolve().parent.parent / "scripts"
    sys.path.insert(0, str(scripts))
    import make_samples

    for n in layers:
        fn, args = make_samples.transformer_train_step(n)
        put(f"sample_transformer_{n}l_f32", jax.jit(fn).lower(*args).as_text(dialect="hlo"), "program",
            f"scripts/make_samples.transformer_train_step({n}) (make_transformer.py's step: d=256 f=1024 "
            f"8 heads, batch 8 x seq 128, f32), shardings stripped")
    for f in sorted((samples or scripts.parent / "samples").glob("*.pre.hlo")):
        if ".shardy." in f.name:
            continue
        put("sample_" + f.name[: -len(".pre.hlo")], f.read_text(), "sample",
            f"samples/{f.name}, shardings stripped (microseconds: launch-bound)")
    (out / "modules.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return meta


# -------------------------------------------------------------------------------------------------
# the device run (jax, jaxlib, libtpu, numpy only)

def _order(names: list, meta: dict) -> list:
    """Calibration first, then programs, then samples (what matters most is timed first under the budget)."""
    rank = {"calibration": 0, "program": 1, "sample": 2}
    return sorted(names, key=lambda n: (rank.get(meta.get(n, {}).get("kind"), 3), n))


def _inputs(text: str, dev, seed: int = 0) -> list:
    """Random device arrays for the entry parameters of ``text``: floats normal x 0.02, integers 0 (valid
    indices for any gather), on ``dev``."""
    import jax
    import numpy as np

    rng = np.random.default_rng(seed)
    return [jax.device_put((rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(tm._NP[t]), dev)
            for t, dims in tm._entry_params(text)]


def time_one(text: str, profile: bool = True, per_kernel: bool = False) -> dict:
    """Compile ``text`` for this process's first device (one partition), run it on random inputs and time
    it.  Returns ``compile_s``; ``median_s`` / ``min_s`` / ``max_s`` / ``p10_s`` / ``p90_s`` / ``stdev_s`` of
    ``calls`` calls each waited for (``block_until_ready``); ``pipelined_s``: the same number of calls
    queued back to back, one wait at the end, per call; ``device_s``: the profiler's ``XLA Modules`` time per
    call when the platform's trace has a device plane (TPU), else None; the compiler's ``cost_analysis()``
    (``flops``, ``bytes_accessed``, ``transcendentals``, ``optimal_seconds``), ``concat_bitcasts`` (the
    optimised program's ``ConcatBitcast`` custom-calls, each counted -1 s in ``optimal_seconds``) and memory
    stats (bytes).
    Raises whatever the compile or the run raises."""
    import jax

    t0 = time.perf_counter()
    exe, dev = tm._compile_text_one_chip(text)
    row: dict = {"compile_s": time.perf_counter() - t0}
    args = _inputs(text, dev)

    def call():
        return exe.execute_sharded(args).disassemble_into_single_device_arrays()

    for _ in range(WARMUP):
        jax.block_until_ready(call())
    t0 = time.perf_counter()
    jax.block_until_ready(call())
    first = time.perf_counter() - t0
    n = max(MIN_CALLS, min(MAX_CALLS, int(TARGET_S / max(first, 1e-6))))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(call())
        ts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    last = None
    for _ in range(n):
        last = call()   # the previous call's outputs are dropped: freed once it has run
    jax.block_until_ready(last)
    pipelined = (time.perf_counter() - t0) / n
    del last
    q = statistics.quantiles(ts, n=10)
    row.update(calls=n, median_s=statistics.median(ts), min_s=min(ts), max_s=max(ts), p10_s=q[0], p90_s=q[-1],
               stdev_s=statistics.pstdev(ts), pipelined_s=pipelined, device_s=None)
    if profile:
        try:
            prof = tm.device_profile(call)
            lines = prof.get("lines") or {}
            if "XLA Modules" in lines:
                row["device_s"] = lines["XLA Modules"][1]
            if per_kernel:   # each kernel's device time and bytes by memory space (kernel_rows)
                row["kernels"] = kernel_rows(prof.get("ops") or {})
        except Exception as e:  # noqa: BLE001 - the wall times stand without it
            row["profile_error"] = f"{type(e).__name__}: {e}"[:300]
    ca = exe.cost_analysis()
    ca = dict((ca[0] if ca else {}) if isinstance(ca, (list, tuple)) else (ca or {}))
    row.update(flops=ca.get("flops"), bytes_accessed=ca.get("bytes accessed"),
               transcendentals=ca.get("transcendentals"), optimal_seconds=ca.get("optimal_seconds"))
    try:   # libtpu's optimal_seconds counts -1 per ConcatBitcast custom-call (hloshard.xla_cost.XlaCost)
        row["concat_bitcasts"] = sum(m.to_string().count('custom_call_target="ConcatBitcast"')
                                     for m in exe.hlo_modules())
    except Exception as e:  # noqa: BLE001
        row["concat_bitcasts_error"] = f"{type(e).__name__}: {e}"[:300]
    try:
        ms = exe.get_compiled_memory_stats()
        row.update(argument_bytes=int(ms.argument_size_in_bytes), output_bytes=int(ms.output_size_in_bytes),
                   temp_bytes=int(ms.temp_size_in_bytes), alias_bytes=int(ms.alias_size_in_bytes),
                   code_bytes=int(ms.generated_code_size_in_bytes))
    except Exception as e:  # noqa: BLE001
        row["memory_error"] = f"{type(e).__name__}: {e}"[:300]
    del args
    return row


def device_run(mod_dir: pathlib.Path, out: pathlib.Path, budget_s: float = BUDGET_S, only=None,
               profile: bool = True, per_kernel: bool = False) -> dict:
    """Time every ``mod_dir/*.hlo`` on this process's first device (calibration modules first); write
    ``out`` (JSON ``{"meta": ..., "rows": {name: row}}``, :func:`time_one`'s rows, or ``{"error": ...}`` for a
    module that failed, ``{"skipped": "budget"}`` past ``budget_s`` seconds) after every module, so what
    was timed survives a later failure or a kill.  Returns the dict written."""
    import platform

    import jax

    start = time.perf_counter()
    meta_path = mod_dir / "modules.json"
    mods = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    names = _order([f.stem for f in mod_dir.glob("*.hlo")], mods)
    if only:
        names = [n for n in names if any(o in n for o in only)]
    dev = jax.devices()[0]
    try:
        import libtpu  # noqa: F401
        libtpu_version = getattr(libtpu, "__version__", "present")
    except Exception:  # noqa: BLE001
        libtpu_version = None
    data = {"meta": {"platform": dev.platform, "device_kind": str(dev.device_kind), "devices": len(jax.devices()),
                     "jax": jax.__version__, "libtpu": libtpu_version, "python": platform.python_version(),
                     "cpus": os.cpu_count(), "warmup": WARMUP, "min_calls": MIN_CALLS, "budget_s": budget_s,
                     "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())},
            "rows": {}}
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        if time.perf_counter() - start > budget_s:
            data["rows"][name] = {"skipped": "budget"}
            continue
        try:
            row = time_one((mod_dir / f"{name}.hlo").read_text(), profile=profile, per_kernel=per_kernel)
        except Exception as e:  # noqa: BLE001 - one module that fails on the chip does not lose the others
            row = {"error": f"{type(e).__name__}: {e}"[:400]}
        data["rows"][name] = row
        print(name, json.dumps({k: row.get(k) for k in ("error", "compile_s", "median_s", "pipelined_s", "device_s",
                                                        "optimal_seconds") if k in row}), flush=True)
        data["meta"]["elapsed_s"] = time.perf_counter() - start
        out.write_text(json.dumps(data, indent=1, sort_keys=True))
    data["meta"]["elapsed_s"] = time.perf_counter() - start
    out.write_text(json.dumps(data, indent=1, sort_keys=True))
    return data


# -------------------------------------------------------------------------------------------------
# per kernel: the profiler's op line, each op's memory spaces (round 32)

#: element sizes of the profiler's op texts (bytes)
_ELEM = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1, "f64": 8, "s64": 8}
#: ops of the profiler's ``XLA Ops`` line that are no kernel: asynchronous copies and slices (their
#: starts and the waits on them), the ConcatBitcast custom-call, aliases
_NOT_KERNELS = ("copy-start", "copy-done", "async-start", "async-done", "slice-start", "slice-done",
                "custom-call", "bitcast", "get-tuple-element", "tuple", "parameter", "constant")


def _arrays(text: str) -> list:
    """``[(bytes, in_vmem)]`` of every array shape in ``text`` (``f32[8,128]{1,0:T(8,128)S(1)}``: a layout
    with ``S(1)`` is on-chip memory, VMEM)."""
    import re

    out = []
    for t, dims, layout in re.findall(r"(\w+)\[([\d,]*)\]\{([^}]*)\}", text):
        n = 1
        for x in dims.split(","):
            if x:
                n *= int(x)
        out.append((_ELEM.get(t, 4) * n, "S(1)" in layout))
    return out


def kernel_rows(ops: dict) -> list:
    """``[[name, op, seconds, hbm_bytes, vmem_bytes]]`` of the kernels in a profile's op line (``ops``:
    ``{event text: seconds per call}``, :func:`tpu_measured.device_profile`; the TPU's event text is the
    optimised instruction with its operands' shapes): ``op`` the opcode, ``opcode:kind`` for a fusion;
    the bytes of its result and operands by memory space (``S(1)`` in a layout: VMEM, else HBM), each
    counted once per appearance.  Ops that are no kernel (:data:`_NOT_KERNELS`) are left out."""
    import re

    rows = []
    for ev, sec in ops.items():
        m = re.match(r"%([\w.\-]+) = (.*?) ([a-z][\w\-]*)\((.*)$", ev)
        if m is None or m.group(3) in _NOT_KERNELS:
            continue
        name, shape, op, rest = m.groups()
        kind = re.search(r"kind=(k\w+)", rest)
        depth, i = 1, 0
        while i < len(rest) and depth:
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            i += 1
        arrs = _arrays(shape) + _arrays(rest[:i - 1])
        rows.append([name, op + (":" + kind.group(1) if kind else ""), float(sec),
                     sum(b for b, v in arrs if not v), sum(b for b, v in arrs if v)])
    return rows


def fit_loop_kernels(kernels: list, hbm_floor: float = 1e4) -> dict:
    """Least squares ``seconds = overhead + vmem_bytes / bandwidth`` over the loop kernels of ``kernels``
    (:func:`kernel_rows` rows: ``kLoop`` fusions, ``reduce``) that touch under ``hbm_floor`` bytes of HBM:
    ``{"overhead_s", "vmem_bandwidth", "kernels", "rms_s"}``.  Raises ValueError with fewer than two."""
    import numpy as np

    pts = [(r[4], r[2]) for r in kernels if r[1] in ("fusion:kLoop", "reduce") and r[3] < hbm_floor]
    if len(pts) < 2:
        raise ValueError(f"{len(pts)} loop kernels without HBM traffic: need two or more")
    x, y = np.array(pts, dtype=float).T
    a = np.c_[np.ones_like(x), x]
    c = np.linalg.lstsq(a, y, rcond=None)[0]
    return {"overhead_s": float(c[0]), "vmem_bandwidth": float(1.0 / c[1]), "kernels": len(pts),
            "rms_s": float(np.sqrt(np.mean((a @ c - y) ** 2)))}


def kernels_summary(measured: dict, names=None) -> str:
    """Per module of a ``--device-run --per-kernel`` JSON (``measured``; ``names``: these modules only): the
    kernels' seconds and bytes by op and memory space, then :func:`fit_loop_kernels` over them all."""
    lines, every = [], []
    for name, row in sorted(measured["rows"].items()):
        if "kernels" not in row or (names and name not in names):
            continue
        ks = row["kernels"]
        every.extend(ks)
        agg: dict = {}
        for k in ks:
            a = agg.setdefault(k[1], [0, 0.0, 0.0, 0.0])
            a[0] += 1
            a[1] += k[2]
            a[2] += k[3]
            a[3] += k[4]
        lines.append(f"{name}: device {row.get('device_s', 0) * 1e6:.1f} us")
        for op, (n, sec, h, v) in sorted(agg.items(), key=lambda x: -x[1][1])[:6]:
            lines.append(f"  {op:20} {n:5} kernels {sec * 1e6:9.1f} us  HBM {h / 1e6:9.2f} MB  VMEM {v / 1e6:9.2f} MB")
    fit = fit_loop_kernels(every)
    lines.append(f"loop kernels without HBM traffic: {fit['kernels']}; seconds = {fit['overhead_s'] * 1e6:.3f} us + "
                 f"VMEM bytes / {fit['vmem_bandwidth'] / 1e12:.2f} TB/s (rms {fit['rms_s'] * 1e6:.2f} us)")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------
# predictions and the join (here, where hloshard is installed)

def hloshard_estimate(path: pathlib.Path, device: str = "tpu-v5e") -> dict:
    """``hloshard cost PATH --mesh 1 --device DEVICE --format json`` (the CLI, in this process): its
    ``estimated_step_time_s``, ``flops_per_device``, ``hbm_bytes_per_device`` and step-time breakdown
    (seconds).  Returns ``{"error": ...}`` when the CLI exits non-zero."""
    import contextlib
    import io

    from hloshard.cli import main as cli_main

    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            rc = cli_main(["cost", str(path), "--mesh", "1", "--device", device, "--format", "json"])
        except SystemExit as e:
            rc = e.code
    if rc:
        return {"error": (err.getvalue().strip().splitlines() or [f"exit {rc}"])[-1][:300]}
    return _cost_fields(json.loads(buf.getvalue()))


def _cost_fields(doc: dict) -> dict:
    """The step-time fields of ``cost --format json``'s document (top level, or under ``step_time``)."""
    st = doc.get("step_time") or {}
    pick = lambda k: doc.get(k, st.get(k))  # noqa: E731
    return {"seconds": pick("estimated_step_time_s"), "flops": pick("flops_per_device"),
            "hbm_bytes": pick("hbm_bytes_per_device"), "breakdown_s": st.get("breakdown_s") or doc.get("breakdown_s"),
            "peak_flops": st.get("peak_flops"), "peak_dtype": st.get("peak_dtype"),
            "hbm_bandwidth": st.get("hbm_bandwidth")}


def predict(mod_dir: pathlib.Path, tpu_python: str | None, device: str = "tpu-v5e",
            topology: str = "v5e:2x2", reuse: bool = False) -> dict:
    """``mod_dir/predicted.json``: per module, hloshard's estimate (:func:`hloshard_estimate`; with ``reuse``,
    the one an earlier ``predicted.json`` holds) and, with ``tpu_python`` (an interpreter with libtpu), the TPU
    compiler's ahead-of-time ``cost_analysis()`` for the first chip of ``topology``
    (:func:`hloshard.xla_cost.tpu_cost`, one partition; libtpu 0.0.42.1 refuses ``v5e:1x1``: "not divisible by
    the given (or default) chips_per_host_bounds 2x2x1", so the smallest v5e topology it takes is used)."""
    from hloshard.errors import InputError
    from hloshard.xla_cost import tpu_cost

    names = sorted(f.stem for f in mod_dir.glob("*.hlo"))
    old = json.loads((mod_dir / "predicted.json").read_text())["rows"] if reuse else {}
    rows = {n: {"hloshard": (old.get(n) or {}).get("hloshard") or hloshard_estimate(mod_dir / f"{n}.hlo", device)}
            for n in names}
    if tpu_python:
        try:
            costs = tpu_cost([(mod_dir / f"{n}.hlo").read_text() for n in names], 1, topology, tpu_python)
            for n, c in zip(names, costs):
                rows[n]["aot"] = c.to_json()
        except InputError as e:
            for n in names:
                rows[n]["aot"] = {"error": str(e)}
    doc = {"meta": {"device": device, "topology": topology}, "rows": rows}
    (mod_dir / "predicted.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    return doc


def join(predicted: dict, measured: dict, modules: dict | None = None) -> list[dict]:
    """One row per module in either input, sorted as the device run orders them: ``name``, ``kind``;
    ``measured_s`` (the chip's time per call: the profiler's device time when there is one, else the
    back-to-back wall time per call), ``median_s`` and ``spread`` ((p90 - p10) / median) of the waited calls;
    ``hloshard_s``, ``aot_s`` (libtpu ahead of time), ``chip_opt_s`` (the chip compile's ``optimal_seconds``);
    the ratios ``hloshard_ratio`` / ``aot_ratio`` (prediction / measured); ``flops_ratio`` (hloshard's flops /
    the chip compiler's); the achieved ``tflops`` (the chip compiler's flops / measured, 1e12 FLOP/s) and
    ``hbm_gbs`` (its bytes accessed / measured, 1e9 B/s); ``bound`` (hloshard's roofline side); ``status``:
    ``ok``, or why a figure is missing.  A missing figure is None, never 0."""
    prow, mrow = predicted.get("rows", {}), measured.get("rows", {})
    modules = modules or {}
    out = []
    for name in _order(sorted(set(prow) | set(mrow)), modules):
        p, m = prow.get(name, {}), mrow.get(name, {})
        h, a = p.get("hloshard") or {}, p.get("aot") or {}
        meas = m.get("device_s") or m.get("pipelined_s")
        why = [w for w in (m.get("error") and "chip: " + m["error"], m.get("skipped") and "skipped: " + m["skipped"],
                           h.get("error") and "hloshard: " + h["error"], a.get("error") and "aot: " + a["error"],
                           not m and "not run on the chip", not p and "not predicted") if w]
        hs, aot = h.get("seconds"), a.get("estimate_seconds", a.get("optimal_seconds"))
        chip_opt = m.get("optimal_seconds")
        if chip_opt is not None and "concat_bitcasts" in m:   # libtpu's -1 per ConcatBitcast added back
            chip_opt += m["concat_bitcasts"]
        elif chip_opt is not None and chip_opt < 0:   # a negative sentinel whose count was not recorded: unknown
            chip_opt = None
        bd = h.get("breakdown_s") or {}
        cb, mb = bd.get("compute_bound_s"), bd.get("memory_bound_s")
        ratio = lambda x, y: (x / y) if (x is not None and y) else None  # noqa: E731
        flops, nbytes = m.get("flops"), m.get("bytes_accessed")
        out.append({
            "name": name, "kind": (modules.get(name) or {}).get("kind"), "measured_s": meas,
            "median_s": m.get("median_s"), "spread": ratio((m["p90_s"] - m["p10_s"]) if "p90_s" in m else None,
                                                           m.get("median_s")),
            "hloshard_s": hs, "aot_s": aot, "chip_opt_s": chip_opt,
            "hloshard_ratio": ratio(hs, meas), "aot_ratio": ratio(aot, meas),
            "flops_ratio": ratio(h.get("flops"), flops),
            "tflops": ratio(flops, meas) and ratio(flops, meas) / 1e12,
            "hbm_gbs": ratio(nbytes, meas) and ratio(nbytes, meas) / 1e9,
            "bound": None if cb is None or mb is None else ("compute" if cb >= mb else "memory"),
            "status": "; ".join(why) or "ok"})
    return out


def _f(x, scale=1.0, fmt="{:.1f}") -> str:
    return "--" if x is None else fmt.format(x * scale)


def table(rows: list[dict], meta: dict | None = None) -> str:
    """The joined rows as a fixed-width text table (microseconds and ratios); a module without a figure
    shows ``--`` and its status."""
    lines = []
    if meta:
        lines.append(f"chip: {meta.get('device_kind')} ({meta.get('platform')}), jax {meta.get('jax')}, "
                     f"libtpu {meta.get('libtpu')}; measured = profiler device time per call, else back-to-back "
                     f"wall time per call")
    lines.append(f"{'module':34s} {'kind':>11s} {'meas us':>10s} {'spread':>6s} {'hloshard us':>11s} {'h/m':>6s} "
                 f"{'AOT us':>10s} {'AOT/m':>6s} {'chip opt us':>11s} {'TFLOP/s':>7s} {'GB/s':>6s} {'flops h/x':>9s} "
                 f"{'bound':>7s}  status")
    for r in rows:
        lines.append(
            f"{r['name']:34s} {r['kind'] or '?':>11s} {_f(r['measured_s'], 1e6):>10s} {_f(r['spread'], 1, '{:.2f}'):>6s} "
            f"{_f(r['hloshard_s'], 1e6):>11s} {_f(r['hloshard_ratio'], 1, '{:.2f}'):>6s} {_f(r['aot_s'], 1e6):>10s} "
            f"{_f(r['aot_ratio'], 1, '{:.2f}'):>6s} {_f(r['chip_opt_s'], 1e6):>11s} {_f(r['tflops']):>7s} "
            f"{_f(r['hbm_gbs'], 1, '{:.0f}'):>6s} {_f(r['flops_ratio'], 1, '{:.3f}'):>9s} {r['bound'] or '--':>7s}  "
            f"{r['status']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="DIR", help="write the modules (jax on CPU, 8 host devices)")
    g.add_argument("--device-run", nargs=2, metavar=("DIR", "OUT"), help="time DIR/*.hlo on this machine's chip")
    g.add_argument("--predict", metavar="DIR", help="hloshard's and libtpu-AOT's predictions -> DIR/predicted.json")
    g.add_argument("--join", nargs=2, metavar=("PREDICTED", "MEASURED"), help="the table of both beside measured")
    g.add_argument("--kernels", metavar="MEASURED", help="a --per-kernel run: kernels by memory space, the loop-kernel fit")
    ap.add_argument("--held", action="store_true", help="write: the held-out programs of round 32 only")
    ap.add_argument("--per-kernel", action="store_true", help="device run: each kernel's time and bytes by memory space")
    ap.add_argument("--names", help="kernels: these modules only (comma-separated)")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="device run: no new module after this")
    ap.add_argument("--only", action="append", help="device run: modules whose name contains this (repeatable)")
    ap.add_argument("--no-profile", action="store_true", help="device run: no profiler trace (wall times only)")
    ap.add_argument("--tpu-python", help="predict: an interpreter with libtpu for the ahead-of-time analysis")
    ap.add_argument("--device", default="tpu-v5e", help="predict: hloshard's device profile (default tpu-v5e)")
    ap.add_argument("--topology", default="v5e:2x2", help="predict: libtpu's topology (its first chip is used)")
    ap.add_argument("--reuse-hloshard", action="store_true", help="predict: keep DIR/predicted.json's hloshard rows")
    ap.add_argument("--json", metavar="OUT", help="join: also write the joined rows as JSON")
    ns = ap.parse_args(argv)
    if ns.write:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        flags = os.environ.get("XLA_FLAGS", "")
        if "device_count" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
        write_modules(pathlib.Path(ns.write), held=ns.held)
    elif ns.device_run:
        device_run(pathlib.Path(ns.device_run[0]), pathlib.Path(ns.device_run[1]), ns.budget_s, ns.only,
                   not ns.no_profile, ns.per_kernel)
    elif ns.kernels:
        print(kernels_summary(json.loads(pathlib.Path(ns.kernels).read_text()),
                              ns.names.split(",") if ns.names else None))
    elif ns.predict:
        predict(pathlib.Path(ns.predict), ns.tpu_python, ns.device, ns.topology, ns.reuse_hloshard)
    else:
        pred, meas = (json.loads(pathlib.Path(p).read_text()) for p in ns.join)
        mpath = pathlib.Path(ns.join[0]).parent / "modules.json"
        mods = json.loads(mpath.read_text()) if mpath.exists() else {}
        rows = join(pred, meas, mods)
        print(table(rows, meas.get("meta")))
        if ns.json:
            pathlib.Path(ns.json).write_text(json.dumps({"meta": meas.get("meta"), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
