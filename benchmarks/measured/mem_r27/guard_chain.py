# Round 27 (helper mem): every solve_module call of auto_shard on tests/test_jax_e2e.py transformer_train_step (memory
# budget 16,119,540, deterministic), the failed ones' nearest plans, and other runs' choices re-priced on this graph.
# usage: PYTHONPATH=src:. python guard_chain.py LABEL [OTHER_LABEL.json ...]  (writes /tmp/mem/cap_LABEL.json)
"""Capture every solve_module result of auto_shard on the e2e transformer; evaluate foreign choices on this code's graph."""
import json, sys, os
from tests.jax_e2e_models import MODELS, TIME_LIMIT
import numpy as np, jax
from jax.sharding import Mesh
import hloshard.autoshard as A
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.autoshard.build import with_memory_budget
from hloshard.costgraph import evaluate
from hloshard.jax import auto_shard
label = sys.argv[1]; foreign = sys.argv[2:]
calls = []
orig = A.solve_module
def wrapped(*a, **k):
    try:
        r = orig(*a, **k)
    except Exception as exc:
        cl = getattr(exc, 'closest', None)
        if cl is not None:
            calls.append(dict(budget=k.get('memory_budget'), failed=True, choice=[int(c) for c in cl[0]],
                              peak=int(cl[1].peak_memory), total=float(cl[1].total), graph=None))
        raise
    calls.append(dict(budget=k.get('memory_budget'), choice=[int(c) for c in r.choice],
                      peak=int(r.evaluation.peak_memory), total=float(r.evaluation.total), graph=r.graph))
    return r
A.solve_module = wrapped
fn, args, manual, dp = MODELS['transformer_train_step']()
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
res = auto_shard(fn, *args, mesh=mesh, memory_budget=16119540, time_limit=TIME_LIMIT, deterministic=True, with_constraints=False)
g0 = calls[0]['graph']
print(res.report.get('memory_guard',{}).get('note'))
out = {'calls': [{k: v for k, v in c.items() if k != 'graph'} for c in calls],
       'guard': {k: v for k, v in (res.report.get('memory_guard') or {}).items() if k != 'pareto'},
       'final_choice': None}
json.dump(out, open(f'/tmp/mem/cap_{label}.json', 'w'))
for c in calls:
    print('own', c.get('failed'), c['budget'], c['peak'], round(c['total']), 're-eval', int(evaluate_choice(g0, c['choice']).peak_memory))
for f in foreign:
    d = json.load(open(f))
    for c in d['calls']:
        ev = evaluate_choice(g0, c['choice'])
        print('foreign', f, c['budget'], 'there', c['peak'], round(c['total']), 'here', int(ev.peak_memory), round(float(ev.total)))
        for b in sorted(set(x['budget'] for x in calls if x['budget'])):
            print('   feasible under budget', b, evaluate(with_memory_budget(g0, b).problem, c['choice']))
