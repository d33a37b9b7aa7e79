"""On the tree on PYTHONPATH: keras-hub mistral_small auto_expert's first-solve graph (real_models --child, tl 10); map
a dumped plan (argv[1], round 33's mi_main.json: main's kept plan by (instruction, strategy name)) onto it and list every
node / edge cost that is infinite, then stop (SystemExit) before the guard."""
import json, os, sys
sys.path.insert(0, os.getcwd())
DUMP = sys.argv[1]
import hloshard.jax  # before keras-hub
import hloshard.jax.api as api
from hloshard.costgraph import INFINITY
def diag(r, *a, **k):
    g = r.graph
    p = g.problem
    idx = {g.nodes[v].instr.name: v for v in range(len(g.nodes))}
    d = json.load(open(DUMP))
    choice, miss = list(r.choice), []
    for name, sname in d["plan"].items():
        v = idx.get(name)
        names = [st.name for st in g.nodes[v].strategies] if v is not None else []
        if sname in names:
            choice[v] = names.index(sname)
        else:
            miss.append((name, sname))
    print("missing", len(miss), miss[:10], file=sys.stderr)
    # follow{p} names the followed operand's strategy INDEX p (strategy/elementwise.py): re-map them through the
    # operand's mapped choice (graph.follows: (operand node, follower node)), to a fixed point
    fol = [(int(a), int(b)) for a, b in getattr(g, "follows", ())]
    by_name = [{st.name: q for q, st in enumerate(g.nodes[v].strategies)} for v in range(len(g.nodes))]
    # the dump's source-graph indices are unknown: map each follower to "follow<operand's index here>"
    for _ in range(50):
        changed = 0
        for a, b in fol:
            want = by_name[b].get(f"follow{choice[a]}")
            if want is not None and want != choice[b]:
                choice[b] = want; changed += 1
        if not changed:
            break
    print("follows", len(fol), file=sys.stderr)
    from hloshard.autoshard.evaluate import evaluate_choice
    from hloshard.costgraph import evaluate
    e = evaluate_choice(g, choice)
    print("main's plan re-mapped: graph peak", int(e.peak_memory), "cost", float(e.total), "feasible", evaluate(p, choice)[1], file=sys.stderr)
    json.dump({"choice": [int(x) for x in choice]}, open(DUMP + ".remapped_s2.json", "w"))
    for v, (c, k) in enumerate(zip(p.node_costs, choice)):
        if int(c[k]) >= INFINITY:
            print("INF node", v, g.nodes[v].instr.name, g.nodes[v].instr.opcode, g.nodes[v].strategies[k].name, file=sys.stderr)
    n = 0
    for (u, w), m in zip(p.edges, p.edge_costs):
        if int(m[choice[u], choice[w]]) >= INFINITY:
            n += 1
            if n <= 15:
                fin = int((m[choice[u]] < INFINITY).sum())
                print("INF edge", g.nodes[u].instr.name, g.nodes[u].strategies[choice[u]].name, "->",
                      g.nodes[w].instr.name, g.nodes[w].instr.opcode, g.nodes[w].strategies[choice[w]].name,
                      f"(finite targets for that source: {fin})", file=sys.stderr)
    print("inf edges", n, file=sys.stderr)
    from hloshard.costgraph import aliases_kept
    print("aliases kept", aliases_kept(p, __import__('numpy').asarray(choice)), file=sys.stderr)
    raise SystemExit(0)
api.guard_plan = diag
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import real_models
real_models.main(["--child", "mistral_small", "auto_expert", "--time-limit", "10", "--float64-plans", "", "--steps", "0"])
