"""The report JSON of a solved plan: ``hloshard solve --report`` and ``hloshard.jax.auto_shard``'s
``report`` start from :func:`build_report`; each adds its own fields (phases' seconds, known plans, ties).
"""

from __future__ import annotations

from ..cost.memory import tpu_reported_peak
from .evaluate import top_edges
from .tiebreak import real_part

__all__ = ["build_report", "bound_source"]


def bound_source(sol, tie_break: int = 1) -> str | None:
    """Which of the solver's lower bounds is ``sol.bound`` (a :class:`hloshard.solver.api.Solution` of
    :func:`hloshard.autoshard.search.solve_graph`: its ``bound`` in the problem's integer units, its ``stats`` as
    :func:`hloshard.solver.api.solve_problem` records them, in the solver problem's units with the presolve
    offset, ``tie_break`` times the problem's: :func:`hloshard.autoshard.tiebreak.real_part`), in words, or None
    when none of the recorded ones is it (or there is no bound).  The gap the report states
    is measured against this bound, so a weak one (the trivial bound, a dual of a few passes) makes a good plan
    read "far from optimal" (new user 24's BART: "within 57% of optimal" for a plan 1.0% above the one a
    longer solve proved within 0.01%).  Checked in order: proven optimal, CP-SAT, the LP relaxation, the LP or
    dual of the problem pruned at the incumbent, the converged dual, the dual's passes, the trivial bound."""
    if sol is None or sol.bound is None:
        return None
    if sol.status == "optimal":
        return "proven optimal (the bound equals the plan's cost)"
    st = getattr(sol, "stats", None) or {}
    b = int(sol.bound)

    def _close(value) -> bool:   # a recorded bound, in the problem's units, is the one reported
        try:
            return value is not None and real_part(int(value), int(tie_break or 1)) == b
        except (TypeError, ValueError, OverflowError):
            return False
    lp = st.get("lp") or {}
    if _close(lp.get("bound")):
        return "the LP relaxation (GLOP, certified from its dual)"
    prune = st.get("prune") or {}
    if _close(prune.get("bound")):
        return "the problem pruned at the plan's cost by reduced costs, bounded by its LP or dual sweeps"
    dual = st.get("bound") or {}
    conv = dual.get("converge") or {}
    if _close(conv.get("bound")):
        return f"a dual (message-passing) bound after {int(conv.get('passes') or 0)} more passes"
    if _close(dual.get("dual")):
        return f"a dual (message-passing) bound after {int(dual.get('passes') or 0)} passes, not converged"
    if _close(dual.get("trivial")):
        return "the trivial bound (every instruction and every resharding at its cheapest, each chosen apart)"
    if st.get("cpsat"):
        return "CP-SAT's bound"
    return None


def reprice_reserve(graph) -> dict | None:
    """The re-pricing reserve of ``graph``'s solve beside the phase it is kept for (wall seconds; None when no
    reserve was computed): ``kept`` (what the solve kept before its deadline, :func:`hloshard.autoshard.solve.
    _solve_module`: an estimate from a build, or 1.5 x a re-pricing measured before) and ``repriced`` (the longest
    re-pricing of a written module made on the graph, ``graph.reprice_measured``; None when none was made).  Wall
    seconds depend on the machine's load (round 32: T5 with ``--device tpu-v5e``, 163.3 s kept, 39.7 s re-priced)."""
    kept = getattr(graph, "reprice_seconds", None)
    if kept is None:
        return None
    done = getattr(graph, "reprice_measured", None)
    return {"kept": round(float(kept), 3), "repriced": None if done is None else round(float(done), 3)}


def build_report(result, mesh, keep: str, memory_budget) -> dict:
    """The ``--report`` JSON (cost units; memory in bytes per device; seconds wall time)."""
    g, sol = result.graph, result.solution
    # objective, breakdown, memory and top edges of the shardings as written (= hloshard cost of the output)
    w = result.written
    eg, echoice, ev = (w.graph, w.choice, w.evaluation) if w is not None else (g, result.choice, result.evaluation)
    gap, bound, status = result.gap, result.bound, sol.status
    coarse = getattr(g, "coarse_fallback", None)
    if coarse:   # the coarse mesh's plan, written because the given mesh's graph was not built in time: its
        # status and bound are of the coarse space, which the given mesh's contains; of the given mesh's
        # space nothing is known but this plan (new user 19: "proven optimal" beside that warning)
        gap, bound, status = None, None, "feasible"
    return {
        "status": status,
        # the mesh whose strategy space was searched, when not the given one (the coarse fallback)
        "searched_mesh": "x".join(map(str, g.mesh.shape)) if coarse else None,
        "objective": round(ev.total, 6),
        "solver_objective": round(result.solver_objective, 6),
        # the part of solver_objective the pairwise edges charge for reshardings XLA's reshard cache serves (an
        # earlier user's identical one): the figures of that warning, beside it (autoshard.report.reshard_cache_warning)
        "reshard_cache_cost": round(result.evaluation.cached, 6),
        "bound": None if bound is None else round(bound, 6),
        # the bound and gap are of the solver's own figure; the written module's (objective) can differ
        "bound_of": "solver_objective",
        "gap": None if gap is None else round(gap, 6),
        # what the bound is (the gap's other end), in words: a weak one makes the gap an upper limit far above
        # the plan's distance to the optimum (bound_source)
        "bound_source": None if bound is None else bound_source(sol, getattr(g, "tie_break", 1)),
        "seconds": round(result.seconds_build + result.seconds_solve, 3),
        "seconds_build": round(result.seconds_build, 3),
        "seconds_solve": round(result.seconds_solve, 3),
        # the solver's own time (every solve of the budget loop): what the status line states
        "seconds_solver": round(float(getattr(result.solution, "seconds", 0.0) or 0.0), 3),
        "breakdown": {"compute": round(ev.compute, 6), "communication": round(ev.communication, 6),
                      "resharding": round(ev.resharding, 6)},
        "peak_memory_per_device": int(ev.peak_memory),
        "peak_memory_at": eg.schedule[ev.peak_time].name if ev.peak_time < len(eg.schedule) else None,
        # planned for a TPU: libtpu's reported peak (data + predicted spilled heap), which figure a budget checks
        **tpu_reported_peak(ev.peak_memory, ev.tpu_heap, getattr(mesh, "memory_device", None)),
        "memory_budget": memory_budget,
        # the predicted peak a plan may have under the budget (the budget less the memory model's measured
        # under-estimate of XLA: hloshard.cost.memory.model_limit; the written plan's own where it is looser,
        # autoshard.solve.reevaluate_written)
        "memory_model_limit": getattr(result, "written_model_limit", None) or getattr(g, "model_limit", None),
        "keep_shardings": keep,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
        "mesh_description": mesh.describe() if hasattr(mesh, "describe") else str(mesh),
        # the mesh `hloshard cost` prices the written module on (its own refinement of the user's mesh)
        "written_mesh": str(w.graph.mesh) if w is not None else None,
        "nodes": g.problem.num_nodes,
        "edges": g.problem.num_edges,
        "solver_nodes": g.solver_problem.num_nodes,
        "solver_edges": g.solver_problem.num_edges,
        "strategies": int(sum(len(c) for c in g.problem.node_costs)),
        "cost_scale": g.cost_scale,
        "objective_int": sol.objective,
        # which plan the solver's answer is (the search's, the greedy start, the coarse mesh's plan, a trivial plan)
        "plan_source": getattr(result, "source", None),
        # the re-pricing reserve the deadline kept, beside the phase it is kept for (issue 24/26, round 32)
        "reprice_reserve": reprice_reserve(g),
        "top_edges": top_edges(eg, echoice, ev),
        "warnings": list(g.warnings),
    }
