"""benchmarks/real_models.py --child MODEL PLAN (time limit argv[3]) with the guard's plans dumped (OUT, OUT_stepN)
and other dumps (argv[4:]) priced on this tree's graph before the plan is written (tt_plans.py's hooks)."""
import json, os, sys
sys.path.insert(0, os.getcwd())
model, plan, OUT, tl = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
others = sys.argv[5:]
import hloshard.jax  # before keras-hub
import hloshard.jax.api as api
import hloshard.jax.guard as gmod
from hloshard.autoshard.solve import SolveFailed
from hloshard.autoshard.evaluate import evaluate_choice
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
    print("final", int(e.peak_memory), round(float(e.total)), file=sys.stderr)
    for n, (what, b, gg, ch) in enumerate(NEAR):
        e = dump(gg, ch, OUT.replace(".json", f"_step{n}.json"))
        print("step", n, what, "budget", b, "peak", int(e.peak_memory), "cost", round(float(e.total)), file=sys.stderr)
    for o in others:
        print(price(res_, o), file=sys.stderr)
    return out
api.guard_plan = wrapped
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import real_models
real_models.main(["--child", model, plan, "--time-limit", tl, "--float64-plans", "", "--steps", "0"])
