"""Round 36, helper proof (issue 26): the LP's duals, then solver.branch's tree, on one IOPDDL instance.

Usage: PYTHONPATH=<tree>/src:<tree> python tree_bound.py NAME TREE_SECONDS [LP_PICKLE] [INCUMBENT_PICKLE]

Presolves the instance (as solve_problem does: dee_limit=FULL_MODEL_LIMIT), solves its LP (lp.lp_potentials) or
reads (bound, prow, pcol, rows) from LP_PICKLE when that file exists (writes it otherwise), then runs
branch.branch_and_bound for TREE_SECONDS wall seconds from the LP's duals; INCUMBENT_PICKLE: original strategies
(a numpy array) of a solution to start from.  Prints the LP's bound and seconds, the tree's bound over time
(wall, CPU), the result and the load before and after.  Instances from $HLOSHARD_SHARED/iopddl (default
/work/shared)."""
import os, pickle, sys, time

import numpy as np

from hloshard.costgraph import evaluate, load_problem
from hloshard.solver.api import FULL_MODEL_LIMIT
from hloshard.solver.branch import branch_and_bound
from hloshard.solver.lp import lp_potentials, lp_size
from hloshard.solver.presolve import presolve

name, tree_s = sys.argv[1], float(sys.argv[2])
lp_pickle = sys.argv[3] if len(sys.argv) > 3 else None
inc_pickle = sys.argv[4] if len(sys.argv) > 4 else None
shared = os.environ.get("HLOSHARD_SHARED", "/work/shared")
print("load before", os.getloadavg()[0], flush=True)
t0, c0 = time.monotonic(), time.process_time()
p = load_problem(f"{shared}/iopddl/asplos-2025-iopddl-{name}.json.gz")
red = presolve(p, dee_limit=FULL_MODEL_LIMIT)
print(name, "reduced nodes", red.num_nodes, "entries", red.stats.get("edge_entries"), "lp vars", lp_size(red),
      "memory rows", red.memory is not None, "presolve s", round(time.monotonic() - t0, 1), flush=True)
if lp_pickle and os.path.exists(lp_pickle):
    lpb, prow, pcol, rows = pickle.load(open(lp_pickle, "rb"))
    print("LP (read)", lpb, flush=True)
else:
    t1, c1 = time.monotonic(), time.process_time()
    lpb, prow, pcol, rows = lp_potentials(red, 3600)
    print("LP", lpb, "wall", round(time.monotonic() - t1, 1), "cpu", round(time.process_time() - c1, 1), flush=True)
    if lp_pickle:
        pickle.dump((lpb, prow, pcol, rows), open(lp_pickle, "wb"))
inc = None
if inc_pickle:
    inc = red.reduce_choice(pickle.load(open(inc_pickle, "rb")))
t2, c2 = time.monotonic(), time.process_time()


def prog(s, b, o):
    print(f"  tree t={s:.1f} s bound={b} objective={o} cpu={time.process_time() - c2:.1f}", flush=True)


r = branch_and_bound(red, tree_s, incumbent=inc, progress=prog, start=(prow, pcol, rows))
print("RESULT", r.status, "bound", r.bound, "objective", r.objective, "nodes", r.nodes, "items", len(r.items),
      "tree wall", round(time.monotonic() - t2, 1), "tree cpu", round(time.process_time() - c2, 1), flush=True)
if r.positions is not None:
    print("checked", evaluate(p, red.expand(r.positions)))
print("load after", os.getloadavg()[0], flush=True)
