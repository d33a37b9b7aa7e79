"""Round 38, helper proof (issue 26): branch.lp_branch_and_bound with strong branching (``strong=K``) on one IOPDDL
instance, root cover cuts and reduced-cost fixing as round 37's runs.  Usage:
PYTHONPATH=<tree>/src:<tree> python strong_run.py NAME SECONDS STRONG ROOT_CUTS FIXING [INCUMBENT_PICKLE]
(NAME: an instance letter, or a pickle of (problem, reduced problem); INCUMBENT_PICKLE: original strategies, a numpy
array, e.g. what solve_problem returned).  Prints the bound over time with CPU-s and load, then the result."""
import os, pickle, sys, time
from hloshard.costgraph import evaluate, load_problem
from hloshard.solver.api import FULL_MODEL_LIMIT
from hloshard.solver.branch import lp_branch_and_bound
from hloshard.solver.presolve import presolve

name, seconds, strong = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
root_cuts, fixing = int(sys.argv[4]), sys.argv[5] == "1"
shared = os.environ.get("HLOSHARD_SHARED", "/work/shared")
print("load before", os.getloadavg()[0], "args", sys.argv[1:], flush=True)
t0 = time.monotonic()
if name.endswith(".pkl"):
    p, red = pickle.load(open(name, "rb"))
else:
    p = load_problem(f"{shared}/iopddl/asplos-2025-iopddl-{name}.json.gz")
    red = presolve(p, dee_limit=FULL_MODEL_LIMIT)
inc = red.reduce_choice(pickle.load(open(sys.argv[6], "rb"))) if len(sys.argv) > 6 else None
print(name, "reduced nodes", red.num_nodes, "presolve s", round(time.monotonic() - t0, 1), flush=True)
t0, c0 = time.monotonic(), time.process_time()


def prog(s, b, o):
    print(f"  t={s:.1f} s bound={b} objective={o} cpu={time.process_time() - c0:.1f} load={os.getloadavg()[0]:.0f}",
          flush=True)


r = lp_branch_and_bound(red, seconds, incumbent=inc, progress=prog, root_cuts=root_cuts, fixing=fixing,
                        strong=strong)
print("RESULT", r.status, "bound", r.bound, "objective", r.objective, "LPs", r.nodes, "branched", r.items,
      "root fixed", r.fixed, "wall", round(time.monotonic() - t0, 1), "cpu", round(time.process_time() - c0, 1),
      flush=True)
if r.positions is not None:
    print("checked", evaluate(p, red.expand(r.positions)))
print("load after", os.getloadavg()[0], flush=True)
