"""Issue 26, round 33: the level branch and bound's bound on a contest instance, beside the root dual's.

python level_bb.py INSTANCE PRICES PASSES [INCUMBENT]
PRICES: 'lag:S' (the solver's own Lagrangian search, S seconds, its prices per memory point) or 'lp:PICKLE'
(round 32's lp_probe.py output: the LP's memory-row duals as prices on the excess rows) or 'none'.
PASSES: the tree's budget in dual passes (deterministic).  INCUMBENT: default the best known objective."""
import sys, time, pickle
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.api import FULL_MODEL_LIMIT
from hloshard.solver.heuristic import LocalSearch, lagrangian_search, point_penalties
from hloshard.solver.levels import level_branch_bound, excess_rows

BEST = {'V': 1617084, 'B': 532843, 'G': 217039}
name, prices, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
inc = int(sys.argv[4]) if len(sys.argv) > 4 else BEST[name]
p = load_problem(f'/work/shared/iopddl/asplos-2025-iopddl-{name}.json.gz')
red = presolve(p, dee_limit=FULL_MODEL_LIMIT)
c0 = time.process_time(); w0 = time.monotonic()
pen, const = None, 0.0
if prices.startswith('lag:'):
    ls = LocalSearch(red, seed=0)
    ls.greedy(); ls.improve(time.monotonic() + 5)
    start = (ls.s.copy(), ls.objective()) if ls.feasible() else None
    _, po, mu = lagrangian_search(ls, time.monotonic() + float(prices[4:]), incumbent=start)
    pen = point_penalties(ls, mu)
    const = -float(np.asarray(mu) @ red.memory.caps.astype(np.float64))
    print('lagrangian search best', None if po is None else po + red.offset, flush=True)
elif prices.startswith('lp:'):
    d = pickle.load(open(prices[3:], 'rb'))
    y = np.ldexp(d['duals'], d['shift'])
    mu = np.maximum(-y[np.array(d['kind']) == 1], 0.0)
    rhs, exc = excess_rows(red)
    pen = [np.zeros(len(c)) for c in red.costs]
    for i, E in exc.items():
        pen[i] = E @ mu
    const = -float(mu @ rhs)
c1 = time.process_time()
st = {}
b = level_branch_bound(red, pen, const, inc, max_passes=passes, stats=st)
print({'instance': name, 'prices': prices, 'passes_budget': passes, 'incumbent': inc, 'bound': b,
       'gap_pct': round(100 * (inc - b) / inc, 2), **st, 'prices_cpu': round(c1 - c0, 1),
       'tree_cpu': round(time.process_time() - c1, 1), 'wall': round(time.monotonic() - w0, 1)}, flush=True)
