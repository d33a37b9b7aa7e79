"""(run from the repository root, the tree on PYTHONPATH) rule_toggles.py MODEL PLAN DUMP... : a keras-hub model's
first-solve graph (benchmarks/real_models.py's child, deterministic, tl 10); each recorded plan (benchmarks/plan_map.py
--dump) mapped onto it by layouts and priced with each of round 32's XLA CPU memory rules switched off in turn -- the
graph's figure (evaluate_choice) and the written module's (apply_solution + evaluate_module) -- then exit before the
guard.  Rules: early (liveness.early_reshard in build.edge_buffers / edgememory), combined
(build.combined_all_reduces), staging (build.a2a_staging), overlap (build.early_collective_overlap); the sliced rule
(liveness.slice_fused_into_readers) sizes nodes when the graph is built: its bytes in the plan are listed instead."""
import json
import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
model, plan, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
import real_models  # noqa: E402
import plan_map  # noqa: E402

real_models.setup_child_env()
import hloshard.jax  # noqa: E402,F401  - before keras-hub
import hloshard.jax.api as api  # noqa: E402
import hloshard.autoshard.build as B  # noqa: E402
from hloshard.autoshard.evaluate import evaluate_choice, evaluate_module  # noqa: E402
from hloshard.autoshard.solve import apply_solution, _Unwritten  # noqa: E402
from hloshard.cost import liveness  # noqa: E402

OFF = {
    "early": [(B, "early_reshard", lambda *a, **k: False)],
    "combined": [(B, "combined_all_reduces", lambda *a, **k: [])],
    "staging": [(B, "a2a_staging", lambda *a, **k: 0)],
    "overlap": [(B, "early_collective_overlap", lambda *a, **k: [])],
}


def patched(name):
    class Ctx:
        def __enter__(self):
            self.saved = [(m, a, getattr(m, a)) for m, a, _ in OFF.get(name, [])]
            for m, a, f in OFF.get(name, []):
                setattr(m, a, f)

        def __exit__(self, *exc):
            for m, a, f in self.saved:
                setattr(m, a, f)
    return Ctx()


def peak_nodes(g, choice, k=8):
    ev = evaluate_choice(g, choice)
    t = int(ev.peak_time)
    p = g.problem
    rows = []
    for v in range(p.num_nodes):
        lo, hi = int(p.intervals[v][0]), int(p.intervals[v][1])
        if lo <= t < hi:
            b = int(p.node_usages[v][int(choice[v])])
            if b:
                rows.append((b, g.nodes[v].instr.name, g.nodes[v].strategies[int(choice[v])].name))
    rows.sort(reverse=True)
    ivs, sizes = B.edge_buffers(g, choice)
    edge_at = sum(int(s) for (lo, hi), s in zip(ivs, sizes) if lo <= t < hi)
    return {"peak": int(ev.peak_memory), "at": t, "nodes_at_peak": sum(r[0] for r in rows), "edge_at_peak": edge_at,
            "top": rows[:k]}


def hook(result, module, dmesh, *a, **k):
    g = result.graph
    out = {}
    for path in dumps:
        rec = json.load(open(path))
        choice, stats = plan_map.map_plan(g, rec, result.choice)
        row = {"recorded": {x: rec.get(x) for x in ("cost", "graph_peak", "written_peak")},
               "unmatched": len(stats["unmatched"]), "missing": len(stats["missing"]),
               "cost_here": float(evaluate_choice(g, choice).total)}
        sliced = 0
        for v, c in enumerate(choice):
            gg = g.nodes[v]
            st = gg.strategies[int(c)]
            if not gg.multi and liveness.slice_fused_into_readers(gg.instr):
                sliced += max(0, B.sliced_reduce_bytes(st) - int(st.memory))
        row["sliced_extra_bytes_in_plan"] = sliced
        for name in ["all"] + list(OFF):
            with patched(None if name == "all" else name):
                row[f"graph_{name}"] = peak_nodes(g, choice) if name == "all" else int(evaluate_choice(g, choice).peak_memory)
        import dataclasses
        from hloshard.costgraph import evaluate
        obj, _ = evaluate(g.problem, choice)
        sol = dataclasses.replace(result.solution, strategies=list(choice), objective=int(obj), status="feasible")
        r2 = dataclasses.replace(result, solution=sol, choice=list(choice), evaluation=evaluate_choice(g, choice))
        r2.written = None
        keep = _Unwritten(module)
        warns = list(g.warnings)
        apply_solution(r2, module, dmesh, pin_operands=bool(getattr(g, "pin_operands", False)))
        row["written_all"] = int(r2.written.evaluation.peak_memory) if r2.written is not None else None
        for name in OFF:
            with patched(name):
                try:
                    row[f"written_{name}"] = int(evaluate_module(module, dmesh, deterministic=True).evaluation.peak_memory)
                except Exception as exc:  # noqa: BLE001
                    row[f"written_{name}"] = f"{type(exc).__name__}: {exc}"[:200]
        keep.restore()
        g.warnings[:] = warns
        out[path] = row
        print(path, json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(out), flush=True)
    raise SystemExit(0)


api.guard_plan = hook
for row in real_models.child(model, [plan], None, 10.0, None, float64_plans=[], steps=0):
    print(json.dumps(row))
