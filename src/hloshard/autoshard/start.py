"""A start for the solver under a memory budget: a plan that keeps the model's limit with its communication
buffers (:func:`budget_start`), for when the trivial plans do not (new user 18's finding 3).  Above
:mod:`.evaluate` (it prices plans with their buffers) and :mod:`.trivial`; :mod:`.solve` gives it to the
solver as its hint and falls back on it when the search ends without a plan within the limit.
"""

from __future__ import annotations

from ..costgraph import evaluate
from .evaluate import peak_memory
from .graph import Graph
from .trivial import complete_plan, trivial_plans

__all__ = ["budget_start", "fits"]


def fits(graph: Graph, choice) -> bool:
    """Whether ``choice`` (one strategy per node of ``graph.problem``) is feasible there and its peak with
    its communication buffers (:func:`hloshard.autoshard.evaluate.peak_memory`) keeps the model's limit
    (``graph.model_limit``, else the problem's node limit)."""
    p = graph.problem
    if choice is None or len(choice) != p.num_nodes or not evaluate(p, choice)[1]:
        return False
    limit = getattr(graph, "model_limit", None) or p.usage_limit
    return limit is None or peak_memory(p, choice, graph)[0] <= limit


def budget_start(graph: Graph):
    """A plan of ``graph.problem`` whose peak with its communication buffers keeps the model's limit for the
    memory budget (``graph.model_limit``, else the problem's node limit), or None: the cheapest feasible
    one (objective of ``graph.problem``) of the trivial plans (:func:`hloshard.autoshard.trivial.trivial_plans`:
    replicated, data parallel) and the greedy plan (:func:`hloshard.autoshard.trivial.complete_plan`, no
    preference: per follower class in build order the strategy of least node cost plus edge cost to the
    classes chosen before) that keeps it, by :func:`hloshard.autoshard.evaluate.peak_memory`.  A start for
    the solver, not a search: new user 18's encoder-decoder at 2x4 with a 16 MiB budget (model limit
    15,114,609 B): replicated 58.6 MiB and data parallel 19,659,876 B do not fit, the greedy plan does at
    11,970,340 B (cost 23,991,846; unbudgeted optimum about 5.79 M); the search's plans needed 17.2 MiB with
    their buffers and the command exited 3.  Cached on the graph per limit."""
    p = graph.problem
    key = (p.usage_limit, getattr(graph, "model_limit", None))
    cached = getattr(graph, "_budget_start", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    limit = getattr(graph, "model_limit", None) or p.usage_limit
    greedy = complete_plan(p, [None] * p.num_nodes, getattr(graph, "follows", ()))
    best = None
    for c in [c for _name, c in trivial_plans(graph)] + ([greedy] if greedy is not None else []):
        obj, ok = evaluate(p, c)
        if ok and (best is None or obj < best[0]) and peak_memory(p, c, graph)[0] <= limit:
            best = (obj, list(c))
    out = None if best is None else best[1]
    graph._budget_start = (key, out)
    return out
