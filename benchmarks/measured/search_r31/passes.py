# the dual bound after 1, 2, 4, ... 32 passes (CPU seconds each block) of a saved problem, presolved: python passes.py PROBLEM.json.gz
import sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.bounds import DualBound
from hloshard.solver.api import sweep_seconds, _trivial_bound
p = load_problem(sys.argv[1]); red = presolve(p, dee_limit=1_500_000)
c = time.process_time(); d = DualBound(red); ci = time.process_time() - c
print("modelled pass", round(sweep_seconds(red), 4), "init cpu", round(ci, 3), "trivial", _trivial_bound(red))
done = 0
for k in (1, 1, 2, 4, 8, 16):
    c = time.process_time(); d.sweep(k); done += k
    print(done, d.proven() + int(red.offset), round(time.process_time() - c, 3))
