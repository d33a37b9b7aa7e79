"""Which contest instances keep a memory model after presolve (step 4a, and so the restricted dual, runs only on a
problem without one)."""
import sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
for name in sys.argv[1:]:
    p = load_problem(f'/work/shared/iopddl/asplos-2025-iopddl-{name}.json.gz')
    c = time.process_time()
    red = presolve(p, dee_limit=1_500_000)
    print(name, 'memory model', red.memory is not None, 'points', None if red.memory is None else red.memory.num_points,
          'entries', red.stats['edge_entries'], 'cpu', round(time.process_time() - c, 1), flush=True)
