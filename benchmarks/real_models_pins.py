"""Experiment behind BENCHMARKS.md "Real models", finding 1: ``auto_shard`` with its equation -> instruction
match (``hloshard.jax.api._equation_outputs``) replaced by one that takes output j of a multi-output equation
(a nested jit under jvp: a ``call`` + ``get-tuple-element``s) from the get-tuple-element with index j, and
checks the dtype; then the same measurement as ``benchmarks/real_models.py`` (one JSON row per plan).

Not a fix (``src/hloshard/jax/api.py`` belongs to its owner): it shows how much of the gap to the expert plan
the mismatched pins cause.

Usage::

    KERAS_BACKEND=jax python benchmarks/real_models_pins.py MODEL PLAN[,PLAN] [DIFF_DIR [BUDGET_BYTES]]
"""
import sys, json, os, re
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_models as rm
rm.setup_child_env()
import hloshard.jax, ortools.sat.python.cp_model  # noqa
from hloshard.jax import api
from hloshard.hlo.attributes import parse_metadata

_DT = {"float32": "f32", "int32": "s32", "bool": "pred", "bfloat16": "bf16", "float16": "f16", "int64": "s64", "uint32": "u32"}

def fixed(module, closed):
    by_eqn = {}
    for instr in module.entry.instructions:
        raw = instr.attrs.get("metadata")
        if not raw:
            continue
        m = api._EQN.search(str(parse_metadata(str(raw)).get("op_name", "")))
        if m:
            by_eqn.setdefault(int(m.group(1)), []).append(instr)
    out = {}
    for k, eqn in enumerate(closed.jaxpr.eqns):
        cands = by_eqn.get(k, [])
        multi = len(eqn.outvars) > 1
        for j, v in enumerate(eqn.outvars):
            shape = tuple(getattr(v.aval, "shape", ()))
            dt = _DT.get(str(getattr(v.aval, "dtype", "")), None)
            ok = lambda i: (not i.shape.is_tuple and tuple(i.shape.dims) == shape
                            and (dt is None or i.shape.element_type == dt))
            hits = []
            if multi:
                hits = [i for i in cands if i.opcode == "get-tuple-element" and int(str(i.attrs.get("index"))) == j and ok(i)]
            if not hits and not multi:
                hits = [i for i in cands if ok(i)]
            if hits:
                out[(k, j)] = hits[-1]
    return out

api._equation_outputs = fixed
name, plans = sys.argv[1], sys.argv[2].split(",")
d = sys.argv[3] if len(sys.argv) > 3 else None
budget = int(sys.argv[4]) if len(sys.argv) > 4 else None
for row in rm.child(name, plans, budget, 20.0, d):
    for key in ("param_specs_in", "param_specs_out"):
        row.pop(key, None)
    print(json.dumps(row), flush=True)
