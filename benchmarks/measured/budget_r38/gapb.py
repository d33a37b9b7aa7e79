# gap B: the priced problem's rows (all terms, at the plan) vs the evaluation's profile, and the written figure
import sys, numpy as np
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.solve import solve_module, apply_solution
from hloshard.autoshard.edgememory import edge_memory_terms, priced_problem
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.cost.liveness import peak_usage

def rows_peak(graph, choice):
    from hloshard.autoshard.edgememory import shadow_pieces
    terms = edge_memory_terms(graph)
    p = graph.problem
    ivs = [tuple(x) for x in np.asarray(p.intervals)]
    sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, choice)]
    for node, lo, hi, part in shadow_pieces(graph, terms, choice):
        ivs.append((lo, hi)); sizes.append(int(part[int(choice[node])]))
    return peak_usage(np.array(ivs), sizes)[0]
for path in sys.argv[1:]:
    m = parse_file(path); mesh = DeviceMesh.for_module(m, "2x4")
    r = solve_module(m, mesh, deterministic=True, time_limit=5, pin_operands=True, apply=False, reevaluate=False)
    g, c = r.graph, r.choice
    # graph.classes must be identity for priced_problem over graph.problem
    from hloshard.autoshard.edgememory import constant_bytes
    rp = rows_peak(g, c) + constant_bytes(g)
    ev = evaluate_choice(g, c).peak_memory
    apply_solution(r, m, mesh, pin_operands=True)
    print(path.split("/")[-1], "rows", rp, "eval", ev, "written", r.written.evaluation.peak_memory, flush=True)
