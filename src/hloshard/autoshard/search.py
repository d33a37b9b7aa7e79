"""Solving a cost graph: :func:`solve_graph` (the solver's problem of a :class:`~.graph.Graph`, the
choice expanded to every node).  Below :mod:`.evaluate` (``evaluate_module`` solves for the cheapest
choice consistent with the written shardings) and :mod:`.solve` (which re-exports it).
"""

from __future__ import annotations

from .graph import Graph
from .report import _failed, _name_nodes, conflict_message, minimum_memory_check
from .tiebreak import real_part
from ..costgraph import evaluate
from ..solver import solve_problem
from ..solver.followers import expand_choice
from .trivial import cheapest_trivial

__all__ = ["solve_graph"]


def solver_choice(graph: Graph, choice) -> list:
    """``choice`` (one strategy per node of ``graph.problem``) on the solver's follower- and tie-merged nodes
    (``graph.solver_problem``): each class takes its kept node's strategy (-1 for a class without one).  A choice
    that breaks a tie on ``graph.problem`` can be a feasible plan there: the tied pair is one solver node."""
    maps = getattr(graph.classes, "maps", None) or {}
    out = [-1] * graph.solver_problem.num_nodes
    for v, c in enumerate(graph.classes):
        if out[c] < 0 and v not in maps:
            out[c] = int(choice[v])
    return out


def solve_graph(graph: Graph, time_limit: float = 60.0, workers: int = 2, seed: int = 0, deterministic: bool = False,
                progress=None, hint=None):
    """Solve ``graph.solver_problem`` (memory tie-break, followers merged unless a memory budget is set)
    and expand the choice to every node of ``graph.problem``; the Solution's objective and bound are
    returned in integer cost units of ``graph.problem`` (tie-break removed).  ``hint``: a choice of
    ``graph.problem`` (one strategy per node, e.g. the coarse plan of :mod:`.coarse`) to start from;
    the answer is never costlier than it (when it is feasible), nor than the cheapest plan of
    :func:`hloshard.autoshard.trivial.trivial_plans` (replicated, data parallel) that keeps the memory
    limit.  Raises SolveFailed (exit 3) when the memory budget is
    infeasible (naming the liveness point and tensors) or when no solution is found in time."""

    if graph.problem.usage_limit is not None:
        minimum_memory_check(graph, graph.problem.usage_limit)
    k = getattr(graph, "tie_break", 1)
    report = progress
    if progress is not None:
        def report(event: dict):   # integer cost units without the tie-break, and the scale to cost units
            progress({**event, **{key: real_part(event.get(key), k) for key in ("objective", "bound")
                                  if event.get(key) is not None}, "cost_scale": graph.cost_scale})
    shint = None if hint is None else solver_choice(graph, hint)
    # the trivial plans first: their seconds come out of the solver's (wall-clock mode; deterministic:
    # the work budget is the limit as given, the search unchanged)
    import time

    t0 = time.monotonic()
    floor = _cheapest_trivial(graph)
    if not deterministic:
        time_limit = max(0.5, float(time_limit) - (time.monotonic() - t0))
    sol = solve_problem(graph.solver_problem, time_limit=time_limit, workers=workers, seed=seed,
                        deterministic=deterministic, hint=shint, progress=report)
    found = getattr(sol, "objective", None)   # (a stubbed solver may give no objective: tests)
    if shint is not None and -1 not in shint:   # the incumbent: the search may end above its hint
        h_obj, h_ok = evaluate(graph.solver_problem, shint)
        if h_ok and (not sol.strategies or sol.objective is None or h_obj < sol.objective):
            sol.strategies, sol.objective = shint, h_obj
            sol.status = "optimal" if sol.bound is not None and sol.bound >= h_obj else "feasible"
            sol.stats["hint_kept"] = True
    if k != 1:
        sol.objective = real_part(getattr(sol, "objective", None), k)
        sol.bound = real_part(getattr(sol, "bound", None), k)
    if sol.strategies:
        sol.strategies = expand_choice(graph.classes, sol.strategies)   # ties merged through a mapping
    _no_worse_than_trivial(graph, sol, floor)
    if isinstance(getattr(sol, "stats", None), dict) and sol.strategies:
        sol.stats["source"] = plan_source(sol.stats, found)
    if sol.status == "infeasible":
        msg = sol.explanation or "no feasible sharding"
        # the kept shardings and ties that leave a value no layout, in the user's terms, else the solver's words
        msg = (conflict_message(graph) if graph.problem.usage_limit is None else None) or _name_nodes(graph, msg, sol)
        raise _failed(f"no feasible solution: {msg}", "infeasible")
    if sol.status == "timeout" or not sol.strategies:
        raise _failed(f"no feasible solution found within the time limit ({time_limit:g} s)", "timeout")
    return sol


def plan_source(stats: dict, found) -> str:
    """Where :func:`solve_graph`'s plan came from, one of: ``"trivial"`` (a plan of
    :func:`hloshard.autoshard.trivial.trivial_plans`, the search found nothing cheaper), ``"hint"`` (the start
    it was given, kept: the search ended above it), ``"greedy"`` / ``"hint_local"`` (the greedy start / the
    hint after local search, which no later phase improved: :func:`hloshard.solver.api.solve_problem`'s
    ``stats["starts"]``, wall-clock mode with a hint), ``"exact"`` (presolve's exact reductions chose every node) or ``"search"`` (a later phase's plan, or a run without
    both starts).  ``stats``: the Solution's stats after the hint and trivial checks; ``found``: the
    solver's objective before them (the solver problem's integer units, as ``stats["starts"]``)."""
    trivial = stats.get("trivial")
    if isinstance(trivial, dict) and trivial.get("taken"):
        return "trivial"
    if stats.get("hint_kept"):
        return "hint"
    if (stats.get("presolve") or {}).get("nodes") == 0:
        return "exact"
    starts = stats.get("starts") or {}
    if starts.get("first") is not None and found is not None and int(found) >= int(starts["first"]):
        return "greedy" if starts.get("kept") == "greedy" else "hint_local"
    return "search"


def _cheapest_trivial(graph: Graph):
    """:func:`hloshard.autoshard.trivial.cheapest_trivial` of ``graph`` without a memory limit, else None."""

    return None if graph.problem.usage_limit is not None else cheapest_trivial(graph)


def _no_worse_than_trivial(graph: Graph, sol, best) -> None:
    """Replace ``sol``'s plan (strategies per node of ``graph.problem``, objective in its integer units)
    by ``best``, the cheapest trivial plan (:func:`_cheapest_trivial`), when that one
    costs less and keeps the problem's memory limit; ``sol.stats["trivial"]`` says which was taken.
    Without a memory limit only (a trivial plan is then always feasible; under a budget the memory
    model's buffers decide, :mod:`hloshard.autoshard.solve`), and only under a plan the solver found (a
    solve that found none stays a timeout, exit 3).  The solver's search is not changed."""

    if best is None or sol.status in ("infeasible", "timeout") or not sol.strategies:
        return   # no plan found in time stays a timeout (exit 3): the floor is under plans, not instead of them
    name, choice, obj = best
    mine, ok = evaluate(graph.problem, sol.strategies)
    mine = mine if ok else None
    stats = getattr(sol, "stats", None)
    if isinstance(stats, dict):
        stats["trivial"] = {"plan": name, "objective": obj, "taken": mine is None or obj < mine}
    if mine is not None and obj >= mine:
        return
    sol.strategies = list(choice)
    sol.objective = obj
    sol.status = "optimal" if sol.bound is not None and sol.bound >= obj else "feasible"
