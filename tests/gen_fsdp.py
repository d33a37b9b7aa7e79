"""Generate FSDP-like HLO modules: many small per-layer all-gathers and reduce-scatters in a manual region.

The module mirrors what ``shard_map`` + FSDP produces on ``devices`` devices: every weight ``W_i``
(``[d_i, d_{i+1}]``, dim 0 sharded ``devices`` ways) and the batch-sharded input enter the manual
region through ``SPMDFullToShardShape`` custom-calls (``sharding={manual}`` inside). Per layer:

* forward: ``w_i = all-gather(shard_i)`` (dimensions={0}, one group of all devices, global ids),
  ``h_{i+1} = tanh(dot(h_i, w_i))`` plus ``pad_ops`` extra elementwise ops (to reach realistic sizes);
* "gradient": ``g_i = dot(transpose(h_i), h_{i+1}) * 2^-10``, ``rs_i = reduce-scatter(g_i)`` (sum)
  leaves the region through ``SPMDShardToFullShape`` as one tuple element of the root.

``chain_every=k`` (0 = never) makes every k-th layer's all-gather operand depend on the previous layer's
reduce-scatter (``shard + broadcast(reduce(rs))``), so those collectives must not be combined with
earlier ones. ``dtypes`` cycles element types over layers (per-layer reduce computations are typed).
All-reduces can be added with ``all_reduce=True`` (a per-layer all-reduce of ``h`` summed over
devices, scaled down). Output is deterministic for given arguments.

:func:`jax_fsdp_module` writes the same pattern with real jax (``shard_map`` over 8 devices, per-layer
``all_gather`` of the weight shards and ``psum_scatter`` of the gradients), in a child process.

Usage: ``python tests/gen_fsdp.py --layers 500 --pad-ops 8 > fsdp.hlo`` (``--jax`` for the jax form)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Sequence
from hloshard.xla_check import child_argv

_TYPES = ("f32", "bf16", "f16")


def fsdp_module(layers: int = 8, devices: int = 8, widths: Sequence[int] | None = None, batch: int = 2,
                dtypes: Sequence[str] = ("f32",), chain_every: int = 0, pad_ops: int = 0,
                all_reduce: bool = False, name: str = "fsdp") -> str:
    """HLO text of an FSDP-like training step; see the module docstring.

    ``widths``: the layer widths ``d_0..d_layers`` (each a multiple of ``devices``); default cycles
    16, 24, 32, 40 scaled by ``devices/8``. Raises ValueError on inconsistent arguments.
    """
    if layers < 1 or devices < 1:
        raise ValueError("layers and devices must be >= 1")
    if widths is None:
        base = [16, 24, 32, 40]
        widths = [base[i % 4] * max(1, devices // 8) for i in range(layers + 1)]
    widths = list(widths)
    if len(widths) != layers + 1 or any(w % devices for w in widths):
        raise ValueError(f"need {layers + 1} widths, each a multiple of {devices}")
    for t in dtypes:
        if t not in _TYPES:
            raise ValueError(f"unsupported dtype {t}")
    groups = "{{" + ",".join(map(str, range(devices))) + "}}"
    tile = f"{{devices=[{devices},1]<=[{devices}]}}"
    used_types = sorted(set(dtypes), key=_TYPES.index)
    out = [f"HloModule {name}, num_partitions={devices}", ""]
    for t in used_types:
        out += [f"%sum_{t} (a: {t}[], b: {t}[]) -> {t}[] {{",
                f"  %a = {t}[] parameter(0)", f"  %b = {t}[] parameter(1)",
                f"  ROOT %s = {t}[] add(%a, %b)", "}", ""]
    body: list[str] = []
    ch = [0]

    def chan() -> int:
        ch[0] += 1
        return ch[0]

    def dt(i: int) -> str:
        return dtypes[i % len(dtypes)]

    b0 = batch * devices
    body.append(f"%x = {dt(0)}[{b0},{widths[0]}] parameter(0), sharding={tile}")
    for i in range(layers):
        body.append(f"%w{i} = {dt(i)}[{widths[i]},{widths[i + 1]}] parameter({i + 1}), sharding={tile}")
    body.append(f"%h0 = {dt(0)}[{batch},{widths[0]}] custom-call(%x), "
                f"custom_call_target=\"SPMDFullToShardShape\", sharding={{manual}}")
    results = []
    prev_rs = None
    for i in range(layers):
        t, tn = dt(i), dt(i + 1)
        din, dout = widths[i], widths[i + 1]
        body.append(f"%shard{i} = {t}[{din // devices},{dout}] custom-call(%w{i}), "
                    f"custom_call_target=\"SPMDFullToShardShape\", sharding={{manual}}")
        ag_in = f"%shard{i}"
        if chain_every and i and i % chain_every == 0 and prev_rs is not None:
            pt = dt(i - 1)
            body.append(f"%zero{i} = {pt}[] constant(0), sharding={{manual}}")
            body.append(f"%dep{i} = {pt}[] reduce(%{prev_rs}, %zero{i}), dimensions={{0,1}}, "
                        f"to_apply=%sum_{pt}, sharding={{manual}}")
            if pt != t:
                body.append(f"%depc{i} = {t}[] convert(%dep{i}), sharding={{manual}}")
                dep = f"%depc{i}"
            else:
                dep = f"%dep{i}"
            body.append(f"%depb{i} = {t}[{din // devices},{dout}] broadcast({dep}), dimensions={{}}, "
                        f"sharding={{manual}}")
            body.append(f"%chained{i} = {t}[{din // devices},{dout}] add(%shard{i}, %depb{i}), sharding={{manual}}")
            ag_in = f"%chained{i}"
        body.append(f"%ag{i} = {t}[{din},{dout}] all-gather({ag_in}), channel_id={chan()}, "
                    f"replica_groups={groups}, dimensions={{0}}, use_global_device_ids=true, sharding={{manual}}")
        h = f"%h{i}"
        body.append(f"%dot{i} = {t}[{batch},{dout}] dot({h}, %ag{i}), lhs_contracting_dims={{1}}, "
                    f"rhs_contracting_dims={{0}}, sharding={{manual}}")
        cur = f"%tanh{i}"
        body.append(f"{cur} = {t}[{batch},{dout}] tanh(%dot{i}), sharding={{manual}}")
        for k in range(pad_ops):
            op = ("multiply", "add", "subtract", "maximum")[k % 4]
            nxt = f"%pad{i}_{k}"
            body.append(f"{nxt} = {t}[{batch},{dout}] {op}({cur}, %tanh{i}), sharding={{manual}}")
            cur = nxt
        if all_reduce:
            body.append(f"%ar{i} = {t}[{batch},{dout}] all-reduce({cur}), channel_id={chan()}, "
                        f"replica_groups={groups}, use_global_device_ids=true, to_apply=%sum_{t}, "
                        f"sharding={{manual}}")
            body.append(f"%scale{i} = {t}[] constant(0.125), sharding={{manual}}")
            body.append(f"%scaleb{i} = {t}[{batch},{dout}] broadcast(%scale{i}), dimensions={{}}, sharding={{manual}}")
            body.append(f"%arm{i} = {t}[{batch},{dout}] multiply(%ar{i}, %scaleb{i}), sharding={{manual}}")
            cur = f"%arm{i}"
        nxt_h = f"%h{i + 1}"
        if tn != t:
            body.append(f"{nxt_h} = {tn}[{batch},{dout}] convert({cur}), sharding={{manual}}")
        else:
            body.append(f"{nxt_h} = {t}[{batch},{dout}] copy({cur}), sharding={{manual}}")
        body.append(f"%ht{i} = {t}[{din},{batch}] transpose({h}), dimensions={{1,0}}, sharding={{manual}}")
        body.append(f"%gd{i} = {t}[{din},{dout}] dot(%ht{i}, {cur}), lhs_contracting_dims={{1}}, "
                    f"rhs_contracting_dims={{0}}, sharding={{manual}}")
        body.append(f"%gs{i} = {t}[] constant(0.0009765625), sharding={{manual}}")
        body.append(f"%gsb{i} = {t}[{din},{dout}] broadcast(%gs{i}), dimensions={{}}, sharding={{manual}}")
        body.append(f"%g{i} = {t}[{din},{dout}] multiply(%gd{i}, %gsb{i}), sharding={{manual}}")
        body.append(f"%rs{i} = {t}[{din // devices},{dout}] reduce-scatter(%g{i}), channel_id={chan()}, "
                    f"replica_groups={groups}, dimensions={{0}}, use_global_device_ids=true, "
                    f"to_apply=%sum_{t}, sharding={{manual}}")
        body.append(f"%grad{i} = {t}[{din},{dout}] custom-call(%rs{i}), "
                    f"custom_call_target=\"SPMDShardToFullShape\", sharding={tile}")
        results.append((f"%grad{i}", f"{t}[{din},{dout}]"))
        prev_rs = f"rs{i}"
    tl = dt(layers)
    body.append(f"%y = {tl}[{b0},{widths[-1]}] custom-call(%h{layers}), "
                f"custom_call_target=\"SPMDShardToFullShape\", sharding={tile}")
    results.append(("%y", f"{tl}[{b0},{widths[-1]}]"))
    shape = "(" + ", ".join(s for _, s in results) + ")"
    shard = "{" + ", ".join([tile] * len(results)) + "}"
    body.append(f"ROOT %out = {shape} tuple({', '.join(n for n, _ in results)}), sharding={shard}")
    out.append("ENTRY %main {")
    out += ["  " + ln for ln in body]
    out += ["}", ""]
    return "\n".join(out)


_JAX_SCRIPT = r"""
import sys
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
try:
    from jax import shard_map
except ImportError:  # older jax
    from jax.experimental.shard_map import shard_map
jax.config.update("jax_use_shardy_partitioner", False)
widths = [int(w) for w in sys.argv[1].split(",")]
layers = len(widths) - 1
mesh = Mesh(np.array(jax.devices()[:8]), ("d",))

def fsdp_step(ws, x):
    def body(ws, x):
        h, hs = x, []
        for w in ws:
            hs.append(h)
            h = jnp.tanh(h @ jax.lax.all_gather(w, "d", tiled=True))      # FSDP: gather the layer's weights
        grads = [jax.lax.psum_scatter(hs[i].T @ jnp.ones((h.shape[0], widths[i + 1]), h.dtype), "d",
                                      scatter_dimension=0, tiled=True)    # and scatter its gradient
                 for i in range(layers)]
        return grads, h
    return shard_map(body, mesh=mesh, in_specs=([P("d")] * layers, P("d")),
                     out_specs=([P("d")] * layers, P("d")))(ws, x)

ns = lambda: NamedSharding(mesh, P("d"))
args = ([jax.ShapeDtypeStruct((widths[i], widths[i + 1]), jnp.float32, sharding=ns()) for i in range(layers)],
        jax.ShapeDtypeStruct((16, widths[0]), jnp.float32, sharding=ns()))
sys.stdout.write(jax.jit(fsdp_step).lower(*args).as_text(dialect="hlo"))
"""


def jax_fsdp_module(widths: Sequence[int] = (16, 24, 32, 40, 16), timeout: float = 300.0) -> str:
    """Pre-optimization HLO (GSPMD mode) of a jax ``shard_map`` FSDP step on 8 devices: one all-gather
    of each layer's weight shard (``widths[i] x widths[i+1]``, dim 0 split 8 ways) and one
    ``psum_scatter`` (reduce-scatter) of each gradient, inside the shard_map body computation; batch 16.
    Runs jax in a child process (needs the ``xla`` extra). Raises RuntimeError when jax fails."""
    if any(w % 8 for w in widths) or len(widths) < 2:
        raise ValueError("need at least two widths, each a multiple of 8")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(child_argv(["-c", _JAX_SCRIPT, ",".join(map(str, widths))], env), capture_output=True,
                          text=True, env=env, timeout=timeout)
    if proc.returncode != 0 or not proc.stdout.startswith("HloModule"):
        raise RuntimeError(f"jax shard_map FSDP generation failed: {proc.stderr[-2000:]}")
    return proc.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="FSDP-like HLO module generator")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--dtypes", default="f32", help="comma-separated element types cycled over layers")
    ap.add_argument("--chain-every", type=int, default=0)
    ap.add_argument("--pad-ops", type=int, default=0)
    ap.add_argument("--all-reduce", action="store_true")
    ap.add_argument("--jax", action="store_true", help="write the jax shard_map form (layers widths 16,24,...)")
    ns = ap.parse_args(argv)
    if ns.jax:
        sys.stdout.write(jax_fsdp_module([(16, 24, 32, 40)[i % 4] for i in range(ns.layers + 1)]))
        return 0
    sys.stdout.write(fsdp_module(ns.layers, ns.devices, dtypes=ns.dtypes.split(","), chain_every=ns.chain_every,
                                 pad_ops=ns.pad_ops, all_reduce=ns.all_reduce))
    return 0


if __name__ == "__main__":
    sys.exit(main())
