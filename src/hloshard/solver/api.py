"""``solve_problem``: presolve, heuristic, CP-SAT and LNS polishing under one time limit.

Pipeline (all phases share the wall-clock budget ``time_limit``, checked before each step):

1. :func:`~hloshard.solver.presolve.presolve` (exact reductions; proves some infeasibilities);
2. :class:`~hloshard.solver.heuristic.LocalSearch`: greedy first solution + local search (or the
   caller's ``hint`` when it is feasible and better);
3. CP-SAT on the whole reduced model, hinted with the best solution so far; it gives the bound;
4. large-neighbourhood search: CP-SAT on subgraphs (breadth-first balls around random nodes, the
   rest fixed) while time remains, then local search again.

The reported objective is always re-evaluated on the original problem (:func:`costgraph.evaluate`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..costgraph import Problem, evaluate
from . import cpsat
from .heuristic import LocalSearch, penalty_search
from .presolve import Infeasible, presolve, tightest_point

PENALTY_ROUNDS = 40  # memory-penalty rounds (each: min-sum, repair, local search)
FULL_MODEL_LIMIT = 1_500_000  # edge entries + memory terms; larger models only get LNS
DET_FULL = 0.2   # deterministic mode: full-model CP-SAT budget, deterministic seconds per second of limit
DET_LNS = 0.2    # deterministic mode: LNS budget, likewise
LNS_SHARE = 0.5  # fraction of the time after the full CP-SAT model's start given to LNS


@dataclass
class Solution:
    """Result of :func:`solve_problem`.

    ``strategies``: one strategy index per original node (empty when no solution); ``objective``: its
    exact cost (integer units of the problem; multiply by ``Problem.cost_scale`` for cost units), None
    without a solution; ``bound``: a proven lower bound on the optimum (None when unknown);
    ``status``: 'optimal' (proven), 'feasible' (a solution, not proven optimal), 'infeasible'
    (proven: ``explanation`` says why), 'timeout' (no solution found in time); ``seconds``: wall time.
    """

    strategies: list
    objective: int | None
    bound: int | None
    status: str
    seconds: float
    explanation: str | None = None
    detail: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"strategies": [int(s) for s in self.strategies], "objective": self.objective,
               "bound": self.bound, "status": self.status, "seconds": round(self.seconds, 3)}
        if self.explanation:
            out["explanation"] = self.explanation
        return out


def _emit(progress, **event):
    if progress is not None:
        progress(event)


def solve_problem(problem: Problem, time_limit: float = 60.0, workers: int = 2, seed: int = 0,
                  deterministic: bool = False, hint=None, progress=None) -> Solution:
    """Choose one strategy per node minimising node + edge costs under the memory limit.

    ``time_limit``: wall seconds for this call (honoured with a small margin); ``workers``: CP-SAT
    threads; ``seed``: random seed (CP-SAT and LNS); ``deterministic``: reproducible result for a
    given seed and worker count (CP-SAT deterministic time limits, interleaved search); ``hint``:
    optional original strategies to start from; ``progress(event: dict)``: called with
    ``{"phase", "objective", "bound", "elapsed"}`` as the search advances.
    Never raises for an infeasible problem: returns status 'infeasible' with an explanation.
    """
    t0 = time.monotonic()
    time_limit = max(0.5, float(time_limit))
    deadline = t0 + time_limit - min(1.0, 0.03 * time_limit) - 0.2
    rng = np.random.default_rng(seed)

    def elapsed():
        return time.monotonic() - t0

    # 1. presolve
    try:
        red = presolve(problem, deadline=t0 + 0.45 * time_limit)
    except Infeasible as exc:
        return Solution([], None, None, "infeasible", elapsed(), explanation=exc.explanation, detail=exc.detail)
    stats = {"presolve": red.stats}
    _emit(progress, phase="presolve", elapsed=elapsed(), nodes=red.num_nodes, edges=len(red.edge_costs))

    if red.num_nodes == 0:
        strategies = red.expand([])
        obj, feas = evaluate(problem, strategies)
        status = "optimal" if feas else "infeasible"
        return Solution(strategies.tolist(), obj if feas else None, obj if feas else None, status, elapsed(),
                        stats=stats)

    # 2. heuristics: greedy + local search, then memory penalties (min-sum + repair + local search)
    ls = LocalSearch(red, seed=seed)
    ls.greedy()
    # the local search stops at a local optimum; it may use the whole budget if it must
    heur_deadline = max(t0 + 0.5 * time_limit, time.monotonic() + 0.15 * time_limit)
    ls.improve(min(deadline, heur_deadline), pairs=red.num_nodes < 2000)
    best, best_obj = None, None
    if ls.feasible():
        best, best_obj = ls.s.copy(), ls.objective()
    if hint is not None:
        hp = red.reduce_choice(hint)
        if hp is not None and ls.feasible(hp):
            ls.set_solution(hp)
            ls.improve(min(deadline, heur_deadline))
            if best_obj is None or ls.objective() < best_obj:
                best, best_obj = ls.s.copy(), ls.objective()
    pen_deadline = min(deadline, max(t0 + 0.5 * time_limit, time.monotonic() + 0.2 * time_limit))

    def pen_progress(o):
        _emit(progress, phase="penalty", objective=o + red.offset, elapsed=elapsed())

    ps, po = penalty_search(ls, pen_deadline, rng, max_rounds=PENALTY_ROUNDS, progress=pen_progress)
    if po is not None and (best_obj is None or po < best_obj):
        best, best_obj = ps, po
    model_size = red.stats["edge_entries"] + (red.memory.num_terms if red.memory is not None else 0)
    if best is None and model_size > FULL_MODEL_LIMIT:  # no CP-SAT model to fall back on: keep trying
        ps, po = penalty_search(ls, deadline, rng, progress=pen_progress)
        if po is not None:
            best, best_obj = ps, po
    if best is not None:
        ls.set_solution(best)
    stats["heuristic"] = {"objective": None if best_obj is None else best_obj + red.offset,
                          "seconds": round(elapsed(), 3)}
    if best_obj is not None:
        _emit(progress, phase="heuristic", objective=best_obj + red.offset, elapsed=elapsed())

    # 3. CP-SAT on the whole reduced problem
    bound = None
    cp_status = "unknown"
    remaining = deadline - time.monotonic()
    if remaining > 0.2 and model_size <= FULL_MODEL_LIMIT:
        mdl = cpsat.build_model(red)
        stats["model"] = {"variables": mdl.num_vars, "constraints": len(mdl.model.proto.constraints),
                          "build_seconds": round(elapsed(), 3)}
        remaining = deadline - time.monotonic()
        lns_share = 0.0 if red.num_nodes < 50 else LNS_SHARE
        full_time = max(0.1, remaining * (1.0 - lns_share))
        if remaining > 0.1:
            res = cpsat.solve(mdl, full_time, workers=workers, seed=seed, deterministic=deterministic,
                              deterministic_limit=DET_FULL * time_limit,
                              hint=best if best_obj is not None else None,
                              progress=progress, offset=red.offset, t0=t0)
            cp_status = res.status
            if res.status == "infeasible":
                why = tightest_point(problem)
                if why is None:
                    return Solution([], None, None, "infeasible", elapsed(), stats=stats,
                                    explanation="no combination of allowed (finite-cost) strategies exists "
                                                "(CP-SAT proved it)")
                return Solution([], None, None, "infeasible", elapsed(), explanation=why.explanation,
                                detail=why.detail, stats=stats)
            if res.positions is not None:
                if ls.feasible(res.positions):
                    o = ls.objective(res.positions)
                    if best_obj is None or o < best_obj:
                        best, best_obj = res.positions, o
            if res.bound is not None:
                bound = res.bound + red.offset
            stats["cpsat"] = {"status": res.status, "wall": round(res.wall, 3),
                              "deterministic_time": round(res.deterministic_time, 3)}

    # 4. LNS polish
    if best_obj is not None and cp_status != "optimal":
        best, best_obj = _lns(red, ls, best, best_obj, deadline, rng, workers, seed, deterministic,
                              progress, t0, stats, det_budget=DET_LNS * time_limit)

    # a bound that needs no solver: every edge matrix is normalised (minimum 0), so the presolve
    # offset plus each node's cheapest strategy is a valid lower bound
    trivial = red.offset + sum(int(c.min()) for c in red.costs)
    bound = trivial if bound is None else max(bound, trivial)
    if best_obj is None:
        return Solution([], None, bound, "timeout", elapsed(), stats=stats)
    strategies = red.expand(best)
    obj, feas = evaluate(problem, strategies)
    if not feas:  # cannot happen unless a reduction is wrong; never report an infeasible answer
        raise AssertionError("internal error: solver produced an infeasible solution")
    status = "optimal" if cp_status == "optimal" or (bound is not None and bound >= obj) else "feasible"
    if status == "optimal":
        bound = obj
    return Solution(strategies.tolist(), obj, bound, status, elapsed(), stats=stats)


def _neighbourhood(red, ls, rng, size):
    """LNS neighbourhood (reduced node ids): a breadth-first ball around a random node, or -- when
    memory binds -- the nodes live at a tight liveness point plus their graph neighbours (so that
    memory can be traded between the nodes that compete for it)."""
    n = red.num_nodes
    nbrs = ls.nbrs
    mem = red.memory
    if mem is not None and mem.num_points and rng.random() < 0.6:
        slack = mem.caps - ls.load
        tight = np.argsort(slack, kind="stable")[:max(1, min(len(slack), 8))]
        p = int(tight[rng.integers(len(tight))])
        start = mem.nodes_at(p).tolist()
        rng.shuffle(start)
        start = start[:max(1, size // 2)]
    else:
        start = [int(rng.integers(n))]
    seen = set(start)
    order = list(start)
    frontier = list(start)
    while frontier and len(order) < size:
        nxt = []
        for i in frontier:
            for j, _ in nbrs[i]:
                if j not in seen:
                    seen.add(j)
                    nxt.append(j)
        rng.shuffle(nxt)
        for j in nxt:
            if len(order) >= size:
                break
            order.append(j)
        frontier = nxt
    return np.array(sorted(order), dtype=np.int64)


def _lns(red, ls, best, best_obj, deadline, rng, workers, seed, deterministic, progress, t0, stats,
         sub_time=2.0, det_budget=0.0):
    """Large-neighbourhood search with CP-SAT on subgraphs; returns (best, best_obj).

    In deterministic mode every sub-solve is limited by deterministic time and the search stops
    after ``det_budget`` deterministic seconds in total (the wall-clock deadline stays a safety net),
    so the sequence of neighbourhoods and answers is reproducible."""
    used = 0.0
    overhead = 0.0
    n = red.num_nodes
    size = min(n, 60)
    rounds = improved = 0
    ls.set_solution(best)
    while True:
        remaining = deadline - time.monotonic()
        if remaining < 0.3 + overhead or (deterministic and used >= det_budget):
            break
        rounds += 1
        round_start = time.monotonic()
        subset = _neighbourhood(red, ls, rng, size)
        mdl = cpsat.build_model(red, subset=subset, current=best)
        sub_limit = max(0.05, min(remaining - 0.2 - overhead, sub_time))
        res = cpsat.solve(mdl, sub_limit if not deterministic else remaining - 0.2, workers=1,
                          seed=seed + rounds, deterministic=deterministic,
                          deterministic_limit=0.5 * sub_time, hint=best[subset])
        used += res.deterministic_time
        overhead = max(overhead, time.monotonic() - round_start - res.wall)  # model build etc.
        if res.positions is not None:
            cand = best.copy()
            cand[subset] = res.positions
            if ls.feasible(cand):
                o = ls.objective(cand)
                if o < best_obj:
                    best, best_obj = cand, o
                    ls.set_solution(best)
                    improved += 1
                    _emit(progress, phase="lns", objective=best_obj + red.offset, elapsed=time.monotonic() - t0)
        # adapt the neighbourhood size: grow when solved to optimality quickly, shrink otherwise
        quick = (res.deterministic_time < 0.25 * sub_time) if deterministic else (res.wall < 0.5 * sub_limit)
        if res.status == "optimal" and quick:
            size = min(n, int(size * 1.15) + 1)
        elif res.status != "optimal":
            size = max(10, int(size * 0.85))
    stats["lns"] = {"rounds": rounds, "improved": improved, "final_size": size}
    return best, best_obj
