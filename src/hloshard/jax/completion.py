"""hloshard's own completion of a known entry (issue 24, round 27): the entry shardings of a plan the user gets
without a search (the fully sharded data-parallel plan, :func:`hloshard.jax.guard.fsdp_entry`) pinned on the first
solve's cost graph, every other node chosen by hloshard's solver, the peak lowered first, then the bytes.

Why: the memory guard's FSDP baseline leaves the intermediates to XLA's propagation from the entry
(:func:`hloshard.jax.guard.fsdp_baseline`), and that propagation does not split the activations over the batch:
on tunix's Llama 3 (``llama3_small``, 8 devices) its plan peaks at 12.85 MB by XLA where tunix's expert plan,
whose activation constraints do split them, peaks at 9.98 MB (round 26).  Choosing the intermediates is what
hloshard's solver does: given the same entry and asked for the lowest peak, it is a baseline XLA's propagation
is not, and a plan of the guard's own graph, which the guard can return as it is (:func:`completion_baseline`).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from ..autoshard.build import _budgeted, with_memory_budget
from ..autoshard.evaluate import evaluate_choice
from ..autoshard.report import minimum_peak
from ..autoshard.solve import MIN_SOLVE_SECONDS, _hold, _Unwritten, apply_solution, solve_module
from ..autoshard.trivial import complete_plan
from ..cost.memory import budget_for_model_limit, xla_lower_bound
from ..costgraph import INFINITY, evaluate
from ..errors import SolveFailed
from ..strategy.base import TOKEN, is_array, leaf_shapes
from .known import KnownPlan

__all__ = ["COMPLETION_BASELINE", "COMPLETION_SHARE", "COMPLETION_STEPS", "Completion", "completion_seconds",
           "pinned_allowed", "pinned_graph", "complete_entry", "completion_baseline"]

#: :func:`completion_baseline`'s ``"plan"`` (``report["memory_guard"]["baseline"]`` when it is the limit)
COMPLETION_BASELINE = "fsdp_completion"
#: solves of :func:`complete_entry` at most: the cheapest plan of the pinned entry, then limits bisected between
#: the least node-memory peak and the lowest peak found.  The count is the bound's, not tuned (the Pareto step's
#: :data:`hloshard.autoshard.solve.PARETO_STEPS` plus one for the unlimited solve)
COMPLETION_STEPS = 4
#: the share of the memory guard's budget (its ``time_limit``) the completion's solves get: one bisection step's
#: (:data:`hloshard.jax.guard.RESOLVE_SHARES`' last), as the Pareto step and the local moves get one.  Not tuned
COMPLETION_SHARE = 0.25


def completion_seconds(time_limit: float, timeout: float | None = None) -> float:
    """Seconds (deterministic mode: work) of the guard's budget ``time_limit`` that :func:`complete_entry`'s solves
    get: :data:`COMPLETION_SHARE` of it, at most ``timeout`` (wall-clock mode: what the deadline leaves less the
    guard's re-solve reserve, as the XLA baselines' ``timeout``)."""
    seconds = COMPLETION_SHARE * float(time_limit)
    return seconds if timeout is None else max(0.0, min(seconds, float(timeout)))


def pinned_allowed(graph, entry: dict) -> list | None:
    """Per node of ``graph`` (a :class:`hloshard.autoshard.build.Graph`), the strategy indices that give the
    entry shardings ``entry`` (instruction name -> HloSharding of entry parameters and the entry root, e.g.
    :func:`hloshard.jax.guard.fsdp_entry`), None for a node ``entry`` does not name (free).  A tuple root's
    leaves pin the nodes that own them (a tied output's value: the update computed in the step).  None when a
    named node has no strategy with its layout (the graph's mesh cannot express it), or when two leaves owned
    by one node ask for different layouts."""
    ctx = graph.ctx
    minfo = ctx.minfo
    module = graph.module
    node_of = {id(g): v for v, g in enumerate(graph.nodes)}
    allowed: list = [None] * len(graph.nodes)
    for instr in list(module.entry.parameters) + [module.entry.root]:
        want = entry.get(instr.name)
        if want is None or instr not in ctx.groups:
            continue
        shapes = leaf_shapes(instr.shape)
        wants = list(want.tuple_elements) if want.is_tuple else [want] * len(shapes)
        for leaf, shape in enumerate(shapes):
            if not is_array(shape) or leaf >= len(wants):
                continue
            r = ctx.resolve(instr, leaf)
            if r is TOKEN:
                continue
            g, k = r
            v = node_of.get(id(g))
            if v is None:
                continue
            rank = len(shape.dims)
            specs = [s.out if k is None else s.out[k] for s in g.strategies]
            ok = [q for q, spec in enumerate(specs)
                  if spec is not None and _same(minfo.to_sharding(spec, rank), wants[leaf], rank)]
            ok = ok if allowed[v] is None else [q for q in allowed[v] if q in ok]
            if not ok:
                return None
            allowed[v] = ok
    return allowed


def _same(a, b, rank: int) -> bool:
    """Whether HloShardings ``a`` and ``b`` place an array of ``rank`` dims alike (replicated either way or
    equal)."""
    if a is None or b is None:
        return a is b
    if a.is_replicated or b.is_replicated:
        return a.is_replicated and b.is_replicated
    return a == b


def pinned_graph(graph, allowed: list):
    """A shallow copy of ``graph`` whose nodes with ``allowed`` indices (:func:`pinned_allowed`) cost
    :data:`hloshard.costgraph.INFINITY` at every other strategy (the solver's way of pinning, as
    :func:`hloshard.jax.known.fast_refined` fixes an entry), its solver's problem built for no budget.
    ``graph`` is left as it was."""
    costs = list(graph.problem.node_costs)
    for v, ok in enumerate(allowed):
        if ok is None:
            continue
        c = np.full(len(costs[v]), INFINITY, dtype=np.int64)
        keep = np.asarray(ok, dtype=np.int64)
        c[keep] = np.minimum(np.asarray(costs[v], dtype=np.int64)[keep], INFINITY - 1)
        costs[v] = c
    out = copy.copy(graph)
    out.warnings = list(graph.warnings)
    out.problem = dataclasses.replace(graph.problem, node_costs=costs, usage_limit=None)
    out.held_plans = []   # its searches' plans its own (solve.held): the first solve's list is the guard's
    if hasattr(graph, "known"):
        out.known = []   # the known plans do not keep the pinned entry
    _budgeted(out, None)
    return out


@dataclasses.dataclass
class Completion:
    """:func:`complete_entry`'s answer: ``plan`` (a :class:`hloshard.jax.known.KnownPlan` of the graph given,
    named ``"fsdp-completion"``, completion ``"solver"``), ``lowest_peak`` (bytes per device, predicted: the
    lowest peak of the plans found), ``tried`` (one dict per solve: ``limit_bytes`` (None: unlimited),
    ``peak_bytes`` and ``cost`` (cost units) or ``failed``)."""
    plan: KnownPlan
    lowest_peak: int
    tried: list


def complete_entry(graph, module, mesh, keep: str, entry: dict, time_limit: float, seed: int = 0,
                   deterministic: bool = False, name: str = "fsdp-completion") -> Completion | None:
    """The plan of ``graph`` that keeps the entry shardings ``entry`` (:func:`pinned_allowed`) and chooses every
    other node with hloshard's solver: the lowest peak first, then the least cost within the memory model's
    error band above it.

    The solves (at most :data:`COMPLETION_STEPS`, each on :func:`pinned_graph` of ``graph``, no build): the
    cheapest plan of the pinned entry, started from :func:`complete_plan`'s greedy one; then limits
    (:func:`hloshard.autoshard.build.with_memory_budget` of the limit's budget,
    :func:`hloshard.cost.memory.budget_for_model_limit`) bisected between the least node-memory peak
    (:func:`hloshard.autoshard.report.minimum_peak`) and the lowest peak found so far, each started from the
    plan of that peak; a limit nothing is found within raises the bisection's floor.  Of the plans found (peaks
    evaluated with their communication buffers, :func:`hloshard.autoshard.evaluate.evaluate_choice`), the
    cheapest whose peak read at the model's measured worst over-estimate of XLA
    (:func:`hloshard.cost.memory.xla_lower_bound`) is at most the lowest peak: a higher predicted peak within
    that band is no evidence of a higher peak by XLA (the memory guard's rule, :func:`hloshard.jax.guard.band_limit`).

    ``time_limit``: seconds (a work budget with ``deterministic``) for all the solves, each half of what is
    left (the last all of it), at least :data:`hloshard.autoshard.solve.MIN_SOLVE_SECONDS`.  None when the
    entry cannot be pinned on ``graph`` (:func:`pinned_allowed`), the greedy start cannot be completed, or no
    solve finds a feasible plan.  Raises nothing else (a solve that fails is a row of ``tried``)."""
    allowed = pinned_allowed(graph, entry)
    if allowed is None:
        return None
    start = complete_plan(graph.problem, allowed, getattr(graph, "follows", ()))
    if start is None:
        return None
    pinned = pinned_graph(graph, allowed)
    device = getattr(graph, "memory_device", None)
    found = []   # (choice, evaluation)
    obj, ok = evaluate(pinned.problem, start)
    if ok:
        found.append((list(start), evaluate_choice(graph, start)))
    tried: list = []
    floor = int(minimum_peak(pinned.problem)[0])
    lo = floor
    left = float(time_limit)
    at = None   # the first solve: no limit
    for k in range(COMPLETION_STEPS):
        if left < MIN_SOLVE_SECONDS:
            break
        give = left if k == COMPLETION_STEPS - 1 else max(MIN_SOLVE_SECONDS, left / 2)
        left -= give
        best = min(found, key=lambda f: (int(f[1].peak_memory), float(f[1].total))) if found else None
        hint = best[0] if best is not None else list(start)
        budget = None if at is None else budget_for_model_limit(at, device)
        g = pinned if at is None else with_memory_budget(pinned, budget)
        try:
            sol = solve_module(module, mesh, keep=keep, memory_budget=budget, graph=g, time_limit=give, seed=seed,
                               deterministic=deterministic, apply=False, hint=hint, reevaluate=False,
                               pin_operands=bool(getattr(graph, "pin_operands", False)))
        except SolveFailed as exc:
            tried.append({"limit_bytes": at, "failed": str(exc)[:200]})
            lo = at if at is not None else lo
            closest = getattr(exc, "closest", None)   # the plan nearest the limit the search found
            if closest is not None and evaluate(pinned.problem, list(closest[0]))[1]:
                found.append((list(closest[0]), closest[1]))
        else:
            choice = list(sol.choice)
            ev = sol.evaluation
            if evaluate(pinned.problem, choice)[1]:
                found.append((choice, ev))
            tried.append({"limit_bytes": at, "peak_bytes": int(ev.peak_memory), "cost": round(float(ev.total), 6)})
            if at is not None and int(ev.peak_memory) > at:
                # within the limit in node memory, above it with its communication buffers (outside the solver's
                # node memory): no plan within it was found, the bisection's floor rises
                lo = at
        if not found:
            return None
        hi = min(int(f[1].peak_memory) for f in found)
        if hi <= lo + 1:
            break
        at = (lo + hi) // 2
    if not found:
        return None
    lowest = min(int(f[1].peak_memory) for f in found)
    band = [f for f in found if xla_lower_bound(int(f[1].peak_memory), device) <= lowest]
    choice, ev = min(band, key=lambda f: (float(f[1].total), int(f[1].peak_memory)))
    obj, ok = evaluate(graph.problem, choice)
    plan = KnownPlan(name, list(choice), int(obj), bool(ok), ev)
    plan.completion = "solver"
    return Completion(plan, lowest, tried)


def completion_baseline(result, module, dmesh, keep: str, entry: dict | None, time_limit: float, seed: int = 0,
                        deterministic: bool = False) -> dict | None:
    """The memory guard's baseline of hloshard's own completion of ``entry`` (instruction name -> HloSharding,
    :func:`hloshard.jax.guard.fsdp_entry`) on the first solve's graph ``result.graph`` (:func:`complete_entry`):
    ``{"plan": COMPLETION_BASELINE, "peak_bytes": int, "collective_cost": float (cost units), "all_replicated":
    False, "known": the KnownPlan, "tried": complete_entry's rows, "written_peak_bytes": int}``.

    ``peak_bytes`` (bytes per device, predicted) is the plan's written module's peak (``module`` with the plan
    written and its pins, priced by :func:`hloshard.autoshard.evaluate_module`; ``module`` is put back): the
    figure the guard judges a plan by (:func:`hloshard.jax.guard._written_peak`) and the other baselines' model
    (a module with shardings written, priced by ``evaluate_module``).  Its evaluation on the graph, with the
    communication buffers of every resharding edge, is ``graph_peak_bytes``; it can be far above (tunix's
    ``llama3_small``: 13.43 MB by the graph, 11.31 MB written, 11.16 MB by XLA, round 27).  ``known``, the plan
    the guard's fallback may return, carries the written peak as its evaluation's, so the fallback, which weighs
    plans by their evaluations, finds it within the limit it sets; the guard's first re-solve asks for the graph's
    figure, starting from the plan, which is added to the graph's held plans (:func:`hloshard.autoshard.solve.held`:
    a search that ends over that limit returns the cheapest held plan within it).  None where :func:`complete_entry` is (or
    ``entry`` is None).  ``time_limit``: :func:`complete_entry`'s."""
    if entry is None:
        return None
    done = complete_entry(result.graph, module, dmesh, keep, entry, time_limit, seed=seed, deterministic=deterministic)
    if done is None or not done.plan.feasible:
        return None
    plan = done.plan
    sol = dataclasses.replace(result.solution, strategies=list(plan.choice), objective=int(plan.objective),
                              status="feasible")
    as_result = dataclasses.replace(result, solution=sol, choice=list(plan.choice), evaluation=plan.evaluation,
                                    written=None, operand_pins=[], local_moves=[])
    state, warnings = _Unwritten(module), list(result.graph.warnings)
    try:
        apply_solution(as_result, module, dmesh, pin_operands=bool(getattr(result.graph, "pin_operands", False)))
        written = as_result.written
        written_peak = int((written if written is not None else as_result).evaluation.peak_memory)
    finally:
        state.restore()
        result.graph.warnings[:] = warnings
    graph_peak = int(plan.evaluation.peak_memory)
    _hold(result.graph, plan.choice)   # a plan the guard's re-solves know within its own peak (solve.held)
    # the plan as the guard's fallback weighs it (hloshard.autoshard.solve.cheapest_within reads its evaluation's
    # peak): at its written module's peak, the figure the guard judges a plan by and this baseline's
    judged = KnownPlan(plan.name, plan.choice, plan.objective, plan.feasible,
                       dataclasses.replace(plan.evaluation, peak_memory=written_peak))
    judged.completion = plan.completion
    return {"plan": COMPLETION_BASELINE, "peak_bytes": written_peak,
            "collective_cost": float(plan.evaluation.total), "all_replicated": False, "known": judged,
            "tried": done.tried, "graph_peak_bytes": graph_peak, "lowest_peak_bytes": int(done.lowest_peak)}
