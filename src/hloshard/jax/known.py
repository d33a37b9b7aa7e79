"""Plans :func:`hloshard.jax.auto_shard` knows before it searches, as choices of the cost graph: the
replicated plan and the data-parallel plan (:func:`known_plans`).  They are the first solve's starting
points (``solve_module(known=...)``: the search starts from the cheapest of them and the coarse plan, and
its answer is never costlier than the one it started from), the bar a memory-guard re-solve's plan must
beat within its limit, and the guard's fallback when the time ends before a re-solve
(:mod:`hloshard.jax.guard`).

A new user's ConvNeXt-style train step (``auto_shard(time_limit=20)``, round 13) came back with an
objective of 1.36 M cost units where leaving everything replicated costs 1.12 M, and a peak of 20.0 MB
by XLA where splitting the batch peaks at 9.9 MB: a short or loaded search had not reached either.
"""

from __future__ import annotations

import numpy as np

from ..autoshard.trivial import complete_plan, follower_classes
from ..autoshard.apply import instruction_sharding
from ..autoshard.build import _budgeted
from ..autoshard.evaluate import complete_choice, evaluate_choice
from ..costgraph import INFINITY, evaluate
from ..errors import HloshardError
from ..strategy.base import TOKEN, is_array, is_mesh_spec, leaf_shapes, spec_axes

__all__ = ["known_plans", "KnownPlan"]


class KnownPlan:
    """One known plan of a cost graph: ``name`` (``"replicated"``, ``"data-parallel"``), ``choice`` (one
    strategy index per node of ``graph.problem``), ``objective`` (integer units of ``graph.problem``, the
    solver's), ``feasible`` (finite costs, tied pairs consistent, the problem's memory limit kept:
    :func:`hloshard.costgraph.evaluate`) and ``evaluation`` (:func:`hloshard.autoshard.evaluate.evaluate_choice`:
    cost units, predicted peak bytes per device)."""

    def __init__(self, name: str, choice: list, objective: int, feasible: bool, evaluation):
        self.name, self.choice, self.objective, self.feasible = name, choice, objective, feasible
        self.evaluation = evaluation

    #: how the nodes past the entry were chosen: ``"greedy"`` (:func:`complete_plan`), ``"fast"`` (the
    #: fast completion of ``hloshard cost`` from the plan's entry, :func:`fast_refined`) or ``"xla"`` (XLA's
    #: propagation of the plan's entry shardings, :func:`propagated_choice`)
    completion = "greedy"
    #: the greedy plan a ``"fast"`` one refined (None otherwise)
    greedy = None

    def row(self) -> dict:
        """``report["known_plans"]`` row: name, objective (cost units), peak_bytes, feasible, completion."""
        return {"name": self.name, "objective": round(float(self.evaluation.total), 6),
                "peak_bytes": int(self.evaluation.peak_memory), "feasible": self.feasible,
                "completion": self.completion}

    def __repr__(self) -> str:
        return f"KnownPlan({self.name!r}, objective={self.objective}, feasible={self.feasible})"


def _split_devices(minfo, spec) -> int:
    """Devices the spec's dims split over (the product of its mesh axes' sizes)."""
    return int(np.prod([minfo.shape[a] for axes in spec for a in axes])) if spec else 1


def _replicated(minfo, st) -> bool:
    out = st.out
    return is_mesh_spec(out) and not spec_axes(out)


def _leading_split(minfo, st) -> int:
    """Devices ``st`` splits its output's leading dim over when that is the only dim split (else 0)."""
    out = st.out
    if not is_mesh_spec(out) or not out or any(out[1:]) or not out[0]:
        return 0
    return _split_devices(minfo, out)


def choice_entry(graph, choice, module) -> dict:
    """Instruction name -> HloSharding a choice of ``graph`` (one strategy index per node of the graph
    built from ``module``) gives each entry parameter and the entry root: the ``in_shardings`` /
    ``out_shardings`` it hands to ``jax.jit`` (:func:`hloshard.jax.guard.plan_entry` of a plan)."""
    scheduled = set(graph.schedule)
    return {i.name: instruction_sharding(graph, i, choice)
            for i in list(module.entry.parameters) + [module.entry.root] if i in scheduled}


def propagated_choice(graph, choice, found: dict) -> list | None:
    """The choice of ``graph`` that keeps ``choice``'s entry parameters and root and takes, at every other
    node, a strategy whose output layout is ``found``'s (instruction name -> HloSharding: XLA's propagation
    from ``choice``'s entry shardings, :func:`hloshard.jax.guard.entry_propagation`); a node XLA names no
    layout for, or whose strategies hold none equal to it, is left open, and :func:`complete_plan` settles
    it and the operands' layouts.  None when that cannot be completed (e.g. XLA's layouts and a tied
    pair's constraint disagree)."""
    minfo = graph.ctx.minfo
    entry = graph.module.entry
    fixed = set(id(p) for p in entry.parameters) | {id(entry.root)}
    memo: dict = {}
    allowed: list = [None] * len(graph.nodes)
    for v, g in enumerate(graph.nodes):
        if id(g.instr) in fixed:
            allowed[v] = [int(choice[v])]
            continue
        want = found.get(g.instr.name)
        if g.multi or want is None or g.instr.shape.is_tuple:
            continue
        rank = len(g.instr.shape.dims)
        key = (id(g.strategies), rank)
        if key not in memo:   # strategy lists shared between nodes are converted once
            memo[key] = (g.strategies, [None if st.out is None else minfo.to_sharding(st.out, rank)
                                        for st in g.strategies])
        shs = memo[key][1]
        allowed[v] = [q for q, sh in enumerate(shs) if sh is not None and sh == want] or None
    # a follower class takes one index, and a tied member the index its fixed partner allows: where XLA's
    # layouts leave a class none (a layout against a tie or a followee fixed at the entry), the class is
    # left to the completion but for what is fixed
    tied: dict = {}
    for u, w, ok in graph.problem.aliases:
        u, w, ok = int(u), int(w), np.asarray(ok, dtype=bool)
        if w < len(allowed) and id(graph.nodes[w].instr) in fixed:
            tied.setdefault(u, []).append(set(np.nonzero(ok[:, int(choice[w])])[0].tolist()))
        if u < len(allowed) and id(graph.nodes[u].instr) in fixed:
            tied.setdefault(w, []).append(set(np.nonzero(ok[int(choice[u]), :])[0].tolist()))
    for members in follower_classes(graph):
        common = None
        for v in members:
            for part in ([set(allowed[v])] if allowed[v] is not None else []) + tied.get(v, []):
                common = part if common is None else common & part
        if common is not None and not common:
            for v in members:
                if id(graph.nodes[v].instr) not in fixed:
                    allowed[v] = None
    # None where XLA's layouts and a tie or an infinite edge disagree (the caller keeps the greedy plan)
    return complete_plan(graph.problem, allowed, getattr(graph, "follows", ()))


def entry_choice(graph, choice, found: dict) -> list:
    """``choice`` (one strategy index per node of ``graph``) with each entry node (:func:`entry_nodes`: the
    entry parameters' and the values the root returns) whose instruction ``found`` names a layout for
    (instruction name -> HloSharding, e.g. a baseline's entry shardings and XLA's propagation from them,
    :func:`hloshard.jax.guard.entry_propagation`) at the first of its strategies with that output layout; an
    entry node with none keeps ``choice``'s.  The start :func:`propagated_choice` keeps at the entry, for a
    baseline whose entry shardings are not a plan's own (the data-parallel and FSDP baselines)."""
    minfo = graph.ctx.minfo
    out = [int(x) for x in choice]
    for v in entry_nodes(graph):
        g = graph.nodes[v]
        want = found.get(g.instr.name)
        if g.multi or want is None or g.instr.shape.is_tuple:
            continue
        rank = len(g.instr.shape.dims)
        for q, st in enumerate(g.strategies):
            if st.out is not None and minfo.to_sharding(st.out, rank) == want:
                out[v] = q
                break
    return out


def known_plans(graph, state_params=(), propagate=None, fast: bool = True) -> list[KnownPlan]:
    """The plans of ``graph`` (a :class:`hloshard.autoshard.build.Graph`) known without a search:

    * ``"replicated"``: every node whose strategies include an unsplit output takes one (the operands'
      layouts completed as :func:`complete_plan` does; kept shardings stay kept) -- no collective but
      what the module writes itself;
    * ``"data-parallel"``: every entry parameter that is not state (``state_params``: parameter numbers
      of tied state, :attr:`module.ties`) split along its leading dim only, over the most devices its
      strategies offer (the batch, as a jax step takes it first); the state and every other node as
      :func:`complete_plan` continues from there (state replicated where its strategies allow).  Not
      listed when no parameter has such a strategy.  Its other nodes are the cheaper of :func:`complete_plan`'s
      greedy pass and the fast completion of ``hloshard cost`` from the same entry (:func:`fast_refined`;
      ``fast=False``: the greedy pass alone -- :func:`hloshard.jax.auto_shard`'s wall-clock mode, where the
      completion's CPU, 1.12 s on keras-hub's 4-layer Gemma at load 11.8, would come out of the first solve's
      seconds).

    ``propagate`` (instruction name -> HloSharding of entry parameters and root -> instruction name ->
    HloSharding: XLA's propagation from them, :func:`hloshard.jax.guard.entry_propagation`): the
    data-parallel plan is also completed from XLA's propagation of its entry shardings
    (:func:`propagated_choice`), and the cheaper completion of the two is the plan (``completion``:
    ``"greedy"`` / ``"xla"``), so it is never costlier than what XLA makes of the same entry shardings
    (in the objective); a propagation that fails (``HloshardError``) leaves the greedy one.

    Each is evaluated on ``graph.problem`` (:class:`KnownPlan`); a plan :func:`complete_plan` cannot
    finish is left out.  Costs one pass over the nodes and edges per plan, with ``propagate`` one XLA run."""
    minfo = graph.ctx.minfo
    entry = graph.module.entry
    params = set(id(p) for p in entry.parameters)
    state = set(int(q) for q in state_params)
    n = len(graph.nodes)
    rep = [None] * n
    dp = [None] * n
    split_any = False
    for v, g in enumerate(graph.nodes):
        if g.multi:
            continue
        keep = [q for q, st in enumerate(g.strategies) if _replicated(minfo, st)]
        rep[v] = keep or None
        if id(g.instr) in params and g.instr.parameter_number not in state:
            ways = [_leading_split(minfo, st) for st in g.strategies]
            most = max(ways, default=0)
            if most > 1:
                dp[v] = [q for q, w in enumerate(ways) if w == most]
                split_any = True
                continue
        if id(g.instr) in params:
            dp[v] = rep[v]
    out = []
    for name, allowed in (("replicated", rep), ("data-parallel", dp if split_any else None)):
        if allowed is None:
            continue
        choice = complete_plan(graph.problem, allowed, getattr(graph, "follows", ()))
        if choice is None:
            continue
        obj, ok = evaluate(graph.problem, choice)
        plan = KnownPlan(name, choice, int(obj), bool(ok), evaluate_choice(graph, choice))
        if name == "data-parallel" and fast:
            plan = fast_refined(graph, plan)
        out.append(xla_refined(graph, plan, propagate) if name == "data-parallel" and propagate else plan)
    return out


def entry_nodes(graph) -> list:
    """The nodes of ``graph`` whose layouts are the entry shardings ``jax.jit`` is handed: the entry
    parameters' and the values the entry root returns (:func:`choice_entry`), in node order."""
    entry = graph.module.entry
    ctx = graph.ctx
    out = set()
    for instr in list(entry.parameters) + [entry.root]:
        if instr not in ctx.groups:
            continue
        for leaf, shape in enumerate(leaf_shapes(instr.shape)):
            if is_array(shape):
                r = ctx.resolve(instr, leaf)
                if r is not TOKEN:
                    out.add(int(r[0].node))
    return sorted(out)


def fast_refined(graph, plan: KnownPlan) -> KnownPlan:
    """``plan`` (a greedy :class:`KnownPlan` of ``graph``) or, when cheaper in ``graph.problem``'s objective
    and feasible, the plan of the same entry shardings (:func:`entry_nodes` keep ``plan``'s strategies)
    with every other node chosen by ``hloshard cost``'s fast completion
    (:func:`hloshard.autoshard.evaluate.complete_choice`: greedy, local search, one message-passing round;
    work-limited, so deterministic; no lower bound) instead of :func:`complete_plan`'s one greedy pass
    (``completion`` ``"fast"``; ``greedy``: ``plan``, which can peak lower, for the memory guard's fallback,
    :func:`hloshard.jax.guard._fallback`).  The greedy pass is myopic: on new user 17's GNN train step it priced the
    data-parallel plan at 11.9 M cost units where ``hloshard cost`` of the same entry shardings says 5.2 M
    (finding 8).  One more presolve and local search of the graph, no build and no XLA run."""
    import copy
    import dataclasses

    costs = list(graph.problem.node_costs)
    for v in entry_nodes(graph):
        c = np.full(len(costs[v]), INFINITY, dtype=np.int64)
        c[int(plan.choice[v])] = min(int(costs[v][int(plan.choice[v])]), INFINITY - 1)
        costs[v] = c
    fixed = copy.copy(graph)
    fixed.problem = dataclasses.replace(graph.problem, node_costs=costs)
    _budgeted(fixed, getattr(graph, "memory_budget", None))   # its solver's problem (followers and ties merged)
    done = complete_choice(fixed, with_bound=False)
    if done is None:
        return plan
    obj, ok = evaluate(graph.problem, done.strategies)
    if not ok or (plan.feasible and obj >= plan.objective):
        return plan
    out = KnownPlan(plan.name, list(done.strategies), int(obj), True, evaluate_choice(graph, done.strategies))
    out.completion = "fast"
    out.greedy = plan   # the completion costs less, not always memory: the guard's fallback weighs both
    return out


def xla_refined(graph, plan: KnownPlan, propagate) -> KnownPlan:
    """``plan`` (a greedy or fast :class:`KnownPlan` of ``graph``) or, when cheaper in ``graph.problem``'s
    objective and feasible, the plan of the same entry shardings completed from XLA's propagation of them
    (:func:`propagated_choice`; ``propagate`` as :func:`known_plans` takes it; ``completion`` ``"xla"``).
    A propagation that fails (``HloshardError``) or cannot be completed leaves ``plan``.  One XLA run."""
    if plan.completion == "xla":
        return plan
    try:
        found = propagate(choice_entry(graph, plan.choice, graph.module))
    except HloshardError:
        return plan
    xla = propagated_choice(graph, plan.choice, found)
    if xla is None:
        return plan
    obj, ok = evaluate(graph.problem, xla)
    if not ok or (plan.feasible and obj >= plan.objective):
        return plan
    out = KnownPlan(plan.name, xla, int(obj), True, evaluate_choice(graph, xla))
    out.completion = "xla"
    out.greedy = plan.greedy if plan.greedy is not None else plan
    return out
