"""e2e transformer_train_step's auto_shard (as tests/jax_e2e_models.run_model, budget 16,119,540 B) in the tree on
PYTHONPATH: dump the guard's plans (each re-solve's found / closest plan, the final) by (instruction, strategy name),
and price other dumps (argv[3:]) on this tree's graph, before the plan is written."""
import json, sys
from tests.jax_e2e_models import MODELS, TIME_LIMIT
import numpy as np, jax
from jax.sharding import Mesh
from hloshard.jax import auto_shard
import hloshard.jax.api as api
import hloshard.jax.guard as gmod
from hloshard.autoshard.solve import SolveFailed
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.costgraph import evaluate

name, OUT = sys.argv[1], sys.argv[2]
others = sys.argv[3:]
NEAR = []
_osolve = gmod.solve_module
def wsolve(*a, **k):
    try:
        r = _osolve(*a, **k)
        NEAR.append(("found", k.get("memory_budget"), r.graph, list(r.choice)))
        return r
    except SolveFailed as exc:
        c = getattr(exc, "closest", None)
        if c is not None:
            NEAR.append(("closest", k.get("memory_budget"), k.get("graph"), list(c[0])))
        raise
gmod.solve_module = wsolve

def dump(gg, ch, path):
    e = evaluate_choice(gg, ch)
    json.dump({"plan": {gg.nodes[v].instr.name: gg.nodes[v].strategies[int(c)].name for v, c in enumerate(ch)},
               "peak": int(e.peak_memory), "cost": float(e.total)}, open(path, "w"))
    return e

def price(sr, path):
    g = sr.graph
    idx = {g.nodes[v].instr.name: v for v in range(len(g.nodes))}
    d = json.load(open(path))
    choice, miss = list(sr.choice), 0
    for k, s in d["plan"].items():
        v = idx.get(k)
        names = [st.name for st in g.nodes[v].strategies] if v is not None else []
        if s in names:
            choice[v] = names.index(s)
        else:
            miss += 1
    e = evaluate_choice(g, choice)
    return f"{path}: there {d['peak']:,} / {d['cost']:,.0f}; here {int(e.peak_memory):,} / {float(e.total):,.0f} (missing {miss})"

_orig = api.guard_plan
def wrapped(r, *a, **k):
    out = _orig(r, *a, **k)
    res_, guard = out
    e = dump(res_.graph, res_.choice, OUT)
    print("final", int(e.peak_memory), round(float(e.total)))
    for n, (what, b, gg, ch) in enumerate(NEAR):
        e = dump(gg, ch, OUT.replace(".json", f"_step{n}.json"))
        print("step", n, what, "budget", b, "peak", int(e.peak_memory), "cost", round(float(e.total)))
    for o in others:
        print(price(res_, o))
    return out
api.guard_plan = wrapped

fn, args, manual, dp = MODELS[name]()
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
res = auto_shard(fn, *args, mesh=mesh, memory_budget=16119540, time_limit=TIME_LIMIT, deterministic=True)
print(json.dumps({k: v for k, v in (res.report.get("memory_guard") or {}).items() if k not in ("pareto", "note")}))
