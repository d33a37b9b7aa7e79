"""The report JSON of a solved plan: ``hloshard solve --report`` and ``hloshard.jax.auto_shard``'s
``report`` start from :func:`build_report`; each adds its own fields (phases' seconds, known plans, ties).
"""

from __future__ import annotations

from ..cost.memory import tpu_reported_peak
from .evaluate import top_edges

__all__ = ["build_report"]


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
        "bound": None if bound is None else round(bound, 6),
        # the bound and gap are of the solver's own figure; the written module's (objective) can differ
        "bound_of": "solver_objective",
        "gap": None if gap is None else round(gap, 6),
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
        "top_edges": top_edges(eg, echoice, ev),
        "warnings": list(g.warnings),
    }
