"""Solution merging: the best combination of several feasible solutions, found by CP-SAT.

Independent searches (other seeds) end in different local optima, each good in other parts of the
graph.  The *merged* problem keeps every node where all the solutions agree fixed at that choice and
lets each other node take only the strategies some solution gave it (two or three, against ~15 in
the full problem), with the memory limit and all edge costs as in the full problem.  It is small
enough for CP-SAT to solve well in seconds, and its optimum is never worse than the best solution
given (that solution is one of its assignments, and the search is hinted with it).  The idea is the
"merge" step of Construct, Merge, Solve & Adapt (Blum, Pinacho, Lopez-Ibanez, Lozano 2016), here on
the pairwise cost graph.

Measured (contest instance N, two independent full runs at 1.0234x and 1.0238x of the best contest
entry, 1,187 nodes differing): the merge of the two gave 1.0206x, followed by the local search 1.0200x.
Merging the solutions *of one* search (its successive incumbents) gave nothing: they are one another's
descendants and differ in ~200 nodes that CP-SAT proved already optimal.
"""

from __future__ import annotations

import numpy as np

from . import cpsat
from .presolve import Reduced


RESTARTS = 3  # CP-SAT runs on the merged model, each with its share of the time, another seed and the best so far as hint


def merge_solutions(red: Reduced, solutions, time_limit: float, workers: int = 1, seed: int = 0,
                    deterministic: bool = False, deterministic_limit: float | None = None, feasible=None,
                    objective=None, restarts: int = RESTARTS):
    """The best feasible combination of ``solutions`` (position vectors over the reduced nodes, each
    feasible; the first is the hint and the fallback: pass the best first), by CP-SAT on the merged
    problem (module docstring).

    The time is split over ``restarts`` CP-SAT runs with seeds ``seed, seed + 1, ...``, each hinted
    with the best combination found so far, stopping once one proves its answer optimal (for the
    merged problem).  CP-SAT's search on a merged model is erratic: on contest instance N the same
    two solutions merged within 6 s to 1.0121x of the best contest entry with one seed and stayed at
    1.0206x with another, and a restart from the better one's answer went on to 1.0121x.

    ``time_limit``: wall seconds in all (``math.inf`` for none: the portfolio passes it in
    deterministic mode, where ``deterministic_limit`` CP-SAT deterministic seconds in all decide); ``feasible(positions) ->
    bool`` re-checks each answer (the caller's exact checker; the merged model is exact, so this
    guards against a model bug only); ``objective(positions)``: the exact objective, to keep a run's
    answer only when it is no worse than the best so far (CP-SAT need not end at or below its hint).
    Returns ``(positions, status, free_nodes)``: the positions are
    ``solutions[0]`` when CP-SAT finds nothing; ``status`` is 'optimal' (for the merged problem),
    'feasible' or 'unknown' (CP-SAT's, over the runs), or 'identical' when the solutions do not
    differ.  Raises ``ValueError`` for an empty list."""
    if not len(solutions):
        raise ValueError("merge_solutions needs at least one solution")
    S = np.stack([np.asarray(x, dtype=np.int64) for x in solutions])
    base = S[0]
    differ = np.nonzero((S != base[None, :]).any(axis=0))[0]
    if not len(differ):
        return base.copy(), "identical", 0
    allowed = [None] * red.num_nodes
    for i in differ.tolist():
        mask = np.zeros(len(red.costs[i]), dtype=bool)
        mask[S[:, i]] = True
        allowed[i] = mask
    mdl = cpsat.build_model(red, subset=differ, current=base, allowed=allowed)
    runs = max(1, int(restarts))
    best = base.copy()
    status = "unknown"
    for k in range(runs):
        res = cpsat.solve(mdl, time_limit / runs, workers=workers, seed=seed + k, deterministic=deterministic,
                          deterministic_limit=None if deterministic_limit is None else deterministic_limit / runs,
                          hint=best[mdl.nodes])
        accepted = False
        if res.positions is not None:
            cand = best.copy()
            cand[mdl.nodes] = res.positions
            if (feasible is None or feasible(cand)) and (objective is None or objective(cand) <= objective(best)):
                best, accepted = cand, True
                status = "feasible"
        if res.status == "optimal" and accepted:
            status = "optimal"
            break
        if res.status == "infeasible":  # cannot happen (solutions[0] is feasible) unless the model is wrong
            break
    return best, status, len(differ)
