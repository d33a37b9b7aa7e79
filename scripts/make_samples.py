#!/usr/bin/env python3
"""Generate the sample HLO modules in ``samples/`` with real jax/XLA (jax 0.10.2) on 8 fake CPU devices.

Every model runs on a 2x4 device mesh with axes ('data', 'model') and Megatron-style parameter
shardings (column-parallel first matmul ``P(None, 'model')``, row-parallel second matmul
``P('model', None)``, batch on 'data'). For each model NAME three files are written:

* ``NAME.pre.hlo`` -- pre-optimization HLO (``lowered.as_text(dialect="hlo")``) in GSPMD mode
  (``jax_use_shardy_partitioner=False``): plain ``sharding={...}`` on parameters (and outputs), no sdy attributes.
* ``NAME.propagated.hlo`` -- XLA's GSPMD dump ``after_sharding-propagation.before_spmd-partitioning``:
  every instruction carries a sharding. Obtained with the compile options ``xla_dump_to`` +
  ``xla_dump_hlo_pass_re=sharding-propagation``. Absolute paths in its stack-frame table are made
  relative to the repository, so the files are identical from run to run and machine to machine.
* ``NAME.shardy.pre.hlo`` -- the same pre-optimization HLO in Shardy mode (``xla.sdy.sharding`` /
  ``xla.sdy.meshes`` frontend attributes).

Models: ``mlp_train_step`` (value_and_grad + SGD), ``transformer_block`` (forward, fused QKV),
``transformer_train_step`` (3 pre-LN layers, separate Q/K/V, value_and_grad + SGD) and ``conv_layer``
(NHWC conv + bias + relu). ``samples/reshape_seed.hlo`` is the reshape module of
``shared/seeds/000_b639b7df27fa914f.txt`` (openxla/xla issue 12392), copied as the seed shows it
(no header attributes, no ROOT: XLA takes the last instruction as the root).

:func:`transformer_train_step_hlo` (and ``scripts/make_transformer.py``) builds the N-layer transformer
training step for benchmarks; 48 layers give 17,281 instructions / 3.4 MB after propagation.

Usage::

    python scripts/make_samples.py [--out samples]
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import re
import sys
import tempfile

if "jax" not in sys.modules:
    _flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in _flags:
        os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=8").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seeds" / "000_b639b7df27fa914f.txt"

#: the reshape module of the seed (issue 12392 discussion), exactly as written there
RESHAPE_SEED = """HloModule module
ENTRY %entry {
  %parameter1 = f16[32,16,1000,256]{3,1,2,0} parameter(0), sharding={devices=[2,4,1,1]0,1,2,3,4,5,6,7}
  %reshape = f16[512,1000,256] reshape(parameter1), sharding={devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}
}
"""


def _jax():
    import jax
    import jax.numpy as jnp

    if len(jax.devices()) < 8:
        raise SystemExit("make_samples: needs 8 devices; run it as a script (it sets "
                         "XLA_FLAGS=--xla_force_host_platform_device_count=8 before importing jax)")
    jax.config.update("jax_use_shardy_partitioner", False)
    return jax, jnp


def _mesh():
    jax, _ = _jax()
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))


def _spec(mesh, shape, *spec):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------

def _layer_norm(jnp, x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * (1.0 / jnp.sqrt(var + 1e-5)) * g + b


def mlp_train_step():
    jax, jnp = _jax()
    mesh = _mesh()

    def loss_fn(params, x, y):
        w1, b1, w2, b2 = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean(jnp.square(h @ w2 + b2 - y))

    def mlp_train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    args = ((_spec(mesh, (512, 1024), None, "model"), _spec(mesh, (1024,), "model"),
             _spec(mesh, (1024, 256), "model", None), _spec(mesh, (256,))),
            _spec(mesh, (64, 512), "data", None), _spec(mesh, (64, 256), "data", None))
    return mlp_train_step, args


def _attention(jax, jnp, q, k, v, heads):
    b, s, d = q.shape
    dh = d // heads
    q = q.reshape(b, s, heads, dh)
    k = k.reshape(b, s, heads, dh)
    v = v.reshape(b, s, heads, dh)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh).astype(np.float32)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, d)


def transformer_block():
    jax, jnp = _jax()
    mesh = _mesh()
    d, f, heads = 256, 1024, 8

    def transformer_block(p, x):
        h = _layer_norm(jnp, x, p["ln1_g"], p["ln1_b"])
        q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
        x = x + _attention(jax, jnp, q, k, v, heads) @ p["wo"]
        h = _layer_norm(jnp, x, p["ln2_g"], p["ln2_b"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    p = {"ln1_g": _spec(mesh, (d,)), "ln1_b": _spec(mesh, (d,)),
         "wqkv": _spec(mesh, (d, 3 * d), None, "model"), "wo": _spec(mesh, (d, d), "model", None),
         "ln2_g": _spec(mesh, (d,)), "ln2_b": _spec(mesh, (d,)),
         "w1": _spec(mesh, (d, f), None, "model"), "w2": _spec(mesh, (f, d), "model", None)}
    return transformer_block, (p, _spec(mesh, (8, 128, d), "data", None, None))


def transformer_train_step(layers: int = 3):
    """Pre-LN transformer with ``layers`` layers (separate Q/K/V, heads on 'model'), MSE loss, SGD."""
    jax, jnp = _jax()
    mesh = _mesh()
    d, f, heads, batch, seq = 256, 1024, 8, 8, 128

    def forward(params, x):
        for p in params:
            h = _layer_norm(jnp, x, p["ln1_g"], p["ln1_b"])
            a = _attention(jax, jnp, h @ p["wq"], h @ p["wk"], h @ p["wv"], heads)
            x = x + a @ p["wo"]
            h = _layer_norm(jnp, x, p["ln2_g"], p["ln2_b"])
            x = x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
        return x

    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(forward(params, x) - y))

    def transformer_train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)

    def layer():
        return {"ln1_g": _spec(mesh, (d,)), "ln1_b": _spec(mesh, (d,)),
                "wq": _spec(mesh, (d, d), None, "model"), "wk": _spec(mesh, (d, d), None, "model"),
                "wv": _spec(mesh, (d, d), None, "model"), "wo": _spec(mesh, (d, d), "model", None),
                "ln2_g": _spec(mesh, (d,)), "ln2_b": _spec(mesh, (d,)),
                "w1": _spec(mesh, (d, f), None, "model"), "w2": _spec(mesh, (f, d), "model", None)}

    args = ([layer() for _ in range(layers)], _spec(mesh, (batch, seq, d), "data", None, None),
            _spec(mesh, (batch, seq, d), "data", None, None))
    return transformer_train_step, args


def conv_layer():
    jax, jnp = _jax()
    mesh = _mesh()

    def conv_layer(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + b)

    args = (_spec(mesh, (16, 32, 32, 64), "data", None, None, None),
            _spec(mesh, (3, 3, 64, 128), None, None, None, "model"), _spec(mesh, (128,), "model"))
    return conv_layer, args


MODELS = {
    "mlp_train_step": mlp_train_step,
    "transformer_block": transformer_block,
    "transformer_train_step": transformer_train_step,
    "conv_layer": conv_layer,
}


# --------------------------------------------------------------------------------------------------
# lowering and dumps
# --------------------------------------------------------------------------------------------------

_ABS_PATH = re.compile(r'"(/[^"]*?/)((?:scripts|src|tests|benchmarks)/[^"]*)"')


def _canonical(text: str) -> str:
    """Make absolute file paths in the stack-frame table repository-relative (determinism)."""
    return _ABS_PATH.sub(r'"\2"', text)


def lower_texts(fn, args, shardy: bool = True, propagated: bool = True) -> dict[str, str]:
    """HLO texts of ``jax.jit(fn)`` on ``args``: ``pre`` (GSPMD), ``propagated`` and ``shardy_pre``.

    ``propagated`` is read from XLA's ``after_sharding-propagation.before_spmd-partitioning`` dump of a
    GSPMD compile. Raises RuntimeError when XLA writes no such dump.
    """
    jax, _ = _jax()
    out: dict[str, str] = {}
    jax.config.update("jax_use_shardy_partitioner", False)
    lowered = jax.jit(fn).lower(*args)
    out["pre"] = lowered.as_text(dialect="hlo")
    if propagated:
        with tempfile.TemporaryDirectory(prefix="hloshard-samples-") as dump:
            # only the partitioner's passes matter here: keep the CPU backend cheap (large modules)
            lowered.compile(compiler_options={"xla_dump_to": dump,
                                              "xla_dump_hlo_pass_re": "sharding-propagation",
                                              "xla_backend_optimization_level": 0,
                                              "xla_llvm_disable_expensive_passes": True})
            files = sorted(glob.glob(os.path.join(dump, "*after_sharding-propagation*.txt")))
            if not files:
                raise RuntimeError("XLA wrote no after_sharding-propagation dump")
            out["propagated"] = _canonical(pathlib.Path(files[-1]).read_text())
    if shardy:
        jax.config.update("jax_use_shardy_partitioner", True)
        try:
            out["shardy_pre"] = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        finally:
            jax.config.update("jax_use_shardy_partitioner", False)
    return out


def transformer_train_step_hlo(layers: int, timeout: float = 600.0) -> tuple[str, str]:
    """(pre-optimization HLO, GSPMD-propagated HLO) of an ``layers``-layer transformer training step.

    About 360 instructions and 71 KB of propagated text per layer (48 layers: about 17k instructions,
    3.4 MB). Runs jax in a child process (so the caller needs neither jax nor 8 devices) and stops that
    child as soon as XLA has written the after-sharding-propagation dump: the rest of a CPU compile of
    a 48-layer step (LLVM codegen) takes minutes and several GB and is not needed. Raises RuntimeError
    when the child fails or no dump appears within ``timeout`` seconds.
    """
    import subprocess
    import time

    if layers < 1:
        raise ValueError("layers must be >= 1")
    with tempfile.TemporaryDirectory(prefix="hloshard-transformer-") as tmp:
        dump = os.path.join(tmp, "dump")
        pre_path = os.path.join(tmp, "pre.hlo")
        env = dict(os.environ)
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        env.setdefault("JAX_PLATFORMS", "cpu")
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--worker-transformer",
                                 str(layers), "--dump", dump, "--pre", pre_path],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + timeout
        prop = None
        try:
            while time.monotonic() < deadline:
                # XLA writes one file per pass, in order: once a later spmd-partitioner pass (or the
                # compile's end) has been dumped, the after-sharding-propagation file is complete.
                names = sorted(os.listdir(dump)) if os.path.isdir(dump) else []
                props = [n for n in names if "after_sharding-propagation" in n and n.endswith(".txt")]
                later = [n for n in names if "after_spmd-partitioning" in n or "after_optimizations" in n]
                if props and (later or proc.poll() is not None):
                    prop = os.path.join(dump, props[-1])
                    break
                if proc.poll() is not None:
                    err = proc.stderr.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"transformer worker failed (exit {proc.returncode}): {err}")
                time.sleep(0.05)
            else:
                raise RuntimeError(f"no sharding-propagation dump within {timeout:.0f} s")
            pre = pathlib.Path(pre_path).read_text()
            propagated = _canonical(pathlib.Path(prop).read_text())
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
    return pre, propagated


def _worker_transformer(layers: int, dump: str, pre_path: str) -> None:
    """Child side of :func:`transformer_train_step_hlo`: lower, write the pre HLO, compile with dumps."""
    jax, _ = _jax()
    fn, args = transformer_train_step(layers)
    lowered = jax.jit(fn).lower(*args)
    pathlib.Path(pre_path).write_text(lowered.as_text(dialect="hlo"))
    lowered.compile(compiler_options={"xla_dump_to": dump,
                                      "xla_dump_hlo_pass_re": "sharding-propagation|spmd-partitioning",
                                      "xla_backend_optimization_level": 0,
                                      "xla_llvm_disable_expensive_passes": True})


def _write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    print(f"{path}: {len(text)} bytes, {text.count(chr(10))} lines")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "samples"), help="output directory (default: samples/)")
    ap.add_argument("--only", action="append", choices=sorted(MODELS), help="generate only these models")
    ap.add_argument("--worker-transformer", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    ap.add_argument("--pre", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.worker_transformer:
        _worker_transformer(ns.worker_transformer, ns.dump, ns.pre)
        return 0
    out = pathlib.Path(ns.out)
    for name in ns.only or MODELS:
        fn, args = MODELS[name]()
        texts = lower_texts(fn, args)
        _write(out / f"{name}.pre.hlo", texts["pre"])
        _write(out / f"{name}.propagated.hlo", texts["propagated"])
        _write(out / f"{name}.shardy.pre.hlo", texts["shardy_pre"])
        _write(out / f"{name}.stablehlo.mlir", stablehlo_text(fn, args))
    _write(out / "reshape_seed.hlo", RESHAPE_SEED)
    return 0



def stablehlo_text(fn, args) -> str:
    """StableHLO text of ``jax.jit(fn)`` on ``args`` in Shardy mode (``NAME.stablehlo.mlir``), printed
    with locations (``as_text(debug_info=True)``: argument paths and instruction names survive the
    conversion to HLO), file paths repository-relative."""
    jax, _ = _jax()
    jax.config.update("jax_use_shardy_partitioner", True)
    try:
        return _canonical(jax.jit(fn).lower(*args).as_text(debug_info=True))
    finally:
        jax.config.update("jax_use_shardy_partitioner", False)


if __name__ == "__main__":
    sys.exit(main())
