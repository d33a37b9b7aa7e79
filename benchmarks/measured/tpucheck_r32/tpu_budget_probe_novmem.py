"""One-off: gemma's auto_shard priced for the TPU (device='tpu-v5e'), budget = the expert plan's TPU HBM;
writes the lowered StableHLO and the written module for real_models_tpu.py."""
import os, sys, time, json, pathlib
sys.path.insert(0, "/work/wt/tpucheck/benchmarks")
import real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa - before keras-hub
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh
from hloshard.jax import auto_shard
import hloshard.cost.memory as _mem
from fractions import Fraction as _F
_orig = _mem._tpu_margin
def _probe_margin(device):
    u, add = _orig(device)
    fits = bool(getattr(device, "temporaries_fit_vmem", False))
    return (u, add if fits else add - _mem.vmem_bytes(str(device)))
_mem._tpu_margin = _probe_margin   # PROBE: the VMEM credit not taken back in model_limit / budget_for_model_limit (not a fix)
import hloshard.autoshard.solve as _solve
def _spilled(hb, device):   # unchanged semantics (original margin)
    if not _mem._is_tpu(device) or hb <= 0:
        return 0
    fits = bool(getattr(device, "temporaries_fit_vmem", False))
    return max(0, int(hb) - _orig(device)[1] + (0 if fits else _mem.vmem_bytes(str(device))))
def _allow(device):
    if not _mem._is_tpu(device):
        return 0
    fits = bool(getattr(device, "temporaries_fit_vmem", False))
    return _orig(device)[1] - (0 if fits else _mem.vmem_bytes(str(device)))
_mem.spilled_heap_excess = _solve.spilled_heap_excess = _spilled
_mem.heap_allowance = _allow
name, budget, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lm, backbone_cls, batch, seq = rm.build(name)
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, batch, seq)
ab = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
t0 = time.monotonic(); c0 = time.process_time()
res = auto_shard(step, {k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()}, mesh=mesh,
                 memory_budget=budget, device="tpu-v5e", keep_shardings="io", time_limit=10, with_constraints=False,
                 deterministic=True)
wall, cpu = time.monotonic() - t0, time.process_time() - c0
rep = res.report
lowered = jax.jit(res.fn, in_shardings=res.in_shardings, out_shardings=res.out_shardings).lower(
    {k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
stem = os.path.join(out, f"{name}.auto_tpu_novmem")
pathlib.Path(stem + ".mlir").write_text(lowered.as_text(debug_info=True))
pathlib.Path(stem + ".solved.hlo").write_text(res.hlo_text)
compiled, raw = rm._spmd_text(lowered)
row = {"model": name, "plan": "auto_tpu_novmem", "budget": budget, "seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
       "load": os.getloadavg()[0], "status": rep.get("status"), "objective": rep.get("objective"),
       "pred_peak": rep.get("peak_memory_per_device"), "guard": str(rep.get("memory_guard"))[:400],
       **rm.xla_figures(compiled, raw)}
print(json.dumps(row, default=str))
