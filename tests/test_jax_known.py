"""The plans ``auto_shard`` knows before it searches (:mod:`hloshard.jax.known`): the replicated and the
data-parallel plan of the cost graph, the first solve's start (``solve_module(known=...)``: never a costlier
answer) and the memory guard's fallback when no re-solve could run (:func:`hloshard.jax.guard.guard_plan`).

The module is the sample MLP train step (``samples/mlp_train_step.pre.hlo``: four weights, a batch
``f32[64,512]`` and targets, outputs the loss and the four updated weights), its weights tied to their
updates as ``auto_shard`` ties a step's state; no jax needed.
"""

from __future__ import annotations

import pytest

from hloshard.autoshard import solve_module
from hloshard.autoshard.aliases import Tie
from hloshard.autoshard.build import build_graph
from hloshard.costgraph import evaluate
from hloshard.hlo import parse_module
from hloshard.autoshard.trivial import complete_plan
from hloshard.jax.known import known_plans
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import spec_axes
from tests.conftest import ROOT
from tests.patching import setattr_everywhere

STATE = (0, 1, 2, 3)   # the weights; parameters 4 and 5 are the batch


def _module():
    module = parse_module((ROOT / "samples" / "mlp_train_step.pre.hlo").read_text(), "<mlp>")
    for p in module.entry.parameters:   # the example as a user hands it over: nothing sharded
        p.sharding = None
    module.ties = [Tie((q + 1,), q) for q in STATE]
    return module


def _mesh():
    return DeviceMesh.parse("data=2,model=4")


def _out(graph, choice, instr):
    v = next(v for v, g in enumerate(graph.nodes) if g.instr is instr)
    return graph.nodes[v].strategies[choice[v]].out


def test_known_plans_replicated_and_data_parallel():
    module = _module()
    graph = build_graph(module, _mesh(), "io")
    plans = {p.name: p for p in known_plans(graph, STATE)}
    assert set(plans) == {"replicated", "data-parallel"}
    params = {p.parameter_number: p for p in module.entry.parameters}
    for name, p in plans.items():
        obj, ok = evaluate(graph.problem, p.choice)
        assert ok and p.feasible and obj == p.objective, name
        for q in STATE:   # the state stays replicated in both
            assert not spec_axes(_out(graph, p.choice, params[q])), (name, q)
    rep, dp = plans["replicated"], plans["data-parallel"]
    assert all(not spec_axes(g.strategies[c].out) for g, c in zip(graph.nodes, rep.choice)
               if not g.multi and any(not spec_axes(s.out) for s in g.strategies))
    for q in (4, 5):   # the batch split along its leading dim over all 8 devices
        out = _out(graph, dp.choice, params[q])
        assert out[0] and not any(out[1:]) and len(out[0]) == len(graph.ctx.minfo.axes), out
    # the batch split: no replicated copy of a [64, 1024] activation, so a lower peak; collectives paid
    assert dp.evaluation.peak_memory < rep.evaluation.peak_memory
    assert rep.evaluation.communication == 0 < dp.evaluation.communication


def test_complete_plan_keeps_ties_and_followers():
    """A tied output takes its parameter's layout even when the node it follows was chosen before it."""
    graph = build_graph(_module(), _mesh(), "io")
    prob = graph.problem
    allowed = [None] * prob.num_nodes
    choice = complete_plan(prob, allowed, graph.follows)
    assert choice is not None and evaluate(prob, choice)[1]
    for a, b in graph.follows:
        if prob.strategy_counts[a] == prob.strategy_counts[b]:
            assert choice[a] == choice[b]
    # a node with no allowed strategy that is finite: no plan
    v = next(v for v, g in enumerate(graph.nodes) if len(g.strategies) > 1)
    allowed[v] = [0]
    forced = complete_plan(prob, allowed, graph.follows)
    assert forced is None or forced[v] == 0


def test_solve_never_costlier_than_a_known_plan():
    """Given the known plans, even a search with almost no time answers no costlier than the cheapest."""
    module = _module()
    seen = {}

    def known(graph):
        seen["plans"] = plans = known_plans(graph, STATE)
        return [p.choice for p in plans]

    r = solve_module(module, _mesh(), keep="io", time_limit=0.01, deterministic=True, apply=False, known=known)
    best = min(p.objective for p in seen["plans"] if p.feasible)
    assert evaluate(r.graph.problem, r.choice)[0] <= best
    assert len(r.graph.known) == len(seen["plans"])


def _first_with_known(time_limit: float):
    """(module, mesh, the first solve's result, {"plans": its known plans}) of the MLP, deterministic."""
    module, mesh, holder = _module(), _mesh(), {}

    def known(graph):
        holder["plans"] = plans = known_plans(graph, STATE)
        return [p.choice for p in plans]

    first = solve_module(module, mesh, keep="io", time_limit=time_limit, deterministic=True, apply=False, known=known)
    return module, mesh, first, holder


def test_guard_falls_back_to_a_known_plan(monkeypatch):
    """When no re-solve finds a plan within the baseline's peak, the guard returns the cheapest known plan
    that keeps it instead of the unguarded plan."""
    import hloshard.autoshard as autoshard
    import hloshard.jax.guard as guard
    from hloshard.errors import SolveFailed

    module, mesh, first, holder = _first_with_known(2)
    plans = {p.name: p for p in holder["plans"]}
    # the first plan as the replicated one (the highest peak), the baseline at the data-parallel plan's peak
    rep, dp = plans["replicated"], plans["data-parallel"]
    first.choice, first.evaluation = list(rep.choice), rep.evaluation
    limit = int(dp.evaluation.peak_memory)
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd", "peak_bytes": limit,
                                                                  "collective_cost": 0.0})

    def refuse(*a, **k):
        raise SolveFailed("no feasible solution (test)")

    setattr_everywhere(monkeypatch, autoshard, "solve_module", refuse)
    # the fallback step alone: the guard's last rule (cheapest_found over every plan the call knows) is
    # checked below, where it may take a cheaper plan than the fallback's within the same limit
    real_cheapest = guard.cheapest_found
    monkeypatch.setattr(guard, "cheapest_found", lambda *a, **k: None)
    out, g = guard.guard_plan(first, module, mesh, "io", 2.0, 0, True, known_plans=holder["plans"], pareto=False)
    assert g["applied"] and g["fallback"] == "data-parallel", g
    assert out.choice == dp.choice and out.evaluation.peak_memory <= limit
    assert "known before the search" in g["note"]
    # nothing known keeps the limit: the unguarded plan is kept, as before
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd", "peak_bytes": 1,
                                                                  "collective_cost": 0.0})
    out, g = guard.guard_plan(first, module, mesh, "io", 2.0, 0, True, known_plans=holder["plans"], pareto=False)
    assert not g["applied"] and out is first and "plan is kept" in g["note"]
    # with the guard's last rule (round 25): the plan returned is never dearer than the fallback's, within the
    # same limit (the baseline's peak)
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd", "peak_bytes": limit,
                                                                  "collective_cost": 0.0})
    monkeypatch.setattr(guard, "cheapest_found", real_cheapest)
    out2, g2 = guard.guard_plan(first, module, mesh, "io", 2.0, 0, True, known_plans=holder["plans"], pareto=False)
    assert g2["applied"] and out2.evaluation.peak_memory <= limit
    assert out2.evaluation.total <= dp.evaluation.total + 1e-9
    if out2.choice != dp.choice:
        assert g2["cheapest"]["taken"] and g2["cheapest"]["peak_bytes"] <= limit, g2


def test_data_parallel_completed_from_xla_layouts():
    """The data-parallel plan completed from given layouts (XLA's propagation of its entry shardings, here
    a solved plan's own layouts standing in for XLA's): every node named takes that layout, the entry stays
    the plan's, and :func:`xla_refined` keeps the cheaper of the two completions."""
    from hloshard.autoshard.apply import instruction_sharding
    from hloshard.jax.known import propagated_choice, xla_refined

    module = _module()
    graph = build_graph(module, _mesh(), "io")
    dp = {p.name: p for p in known_plans(graph, STATE)}["data-parallel"]
    solved = solve_module(module, _mesh(), keep="io", time_limit=2, deterministic=True, apply=False,
                          graph=graph, hint=dp.choice)
    entry = set(module.entry.parameters) | {module.entry.root}
    found = {g.instr.name: instruction_sharding(graph, g.instr, solved.choice) for g in graph.nodes
             if not g.multi and not g.instr.shape.is_tuple}
    # from the solved plan's entry: every node takes the layout named for it
    choice = propagated_choice(graph, solved.choice, found)
    assert choice is not None and evaluate(graph.problem, choice)[1]
    for v, g in enumerate(graph.nodes):
        if g.instr in entry:
            assert choice[v] == solved.choice[v]
        elif g.instr.name in found:   # this layout (the strategy may differ in its operands' layouts)
            assert instruction_sharding(graph, g.instr, choice) == found[g.instr.name], g.instr.name
    # from the data-parallel entry, layouts that contradict its ties are dropped, not made a failure
    assert propagated_choice(graph, dp.choice, found) is not None
    refined = xla_refined(graph, dp, lambda e: found)
    assert refined.objective <= dp.objective and refined.feasible
    xla = propagated_choice(graph, dp.choice, found)
    assert (refined.completion == "xla") == (evaluate(graph.problem, xla)[0] < dp.objective)
    # a propagation that fails leaves the greedy plan
    from hloshard.errors import InputError

    def broken(e):
        raise InputError("no jax (test)")
    assert xla_refined(graph, dp, broken) is dp


def test_pareto_step_trades_within_the_share():
    """Without a budget the Pareto step keeps a plan only when it peaks lower by more than the memory
    model's over-estimate and costs at most (1 + PARETO_SHARE) x the cheapest, or when it is cheaper at no
    higher peak; under a user's budget it does nothing."""
    import dataclasses

    from hloshard.autoshard.build import with_memory_budget
    from hloshard.autoshard.solve import PARETO_SHARE, pareto_step
    from hloshard.cost.memory import xla_lower_bound

    module = _module()
    first = solve_module(module, _mesh(), keep="io", time_limit=1, deterministic=True, apply=False)
    out, info = pareto_step(first, 1.0, deterministic=True)
    assert info["tried"] and info["floor_bytes"] <= int(first.evaluation.peak_memory)
    assert info["cost_bound"] == pytest.approx((1 + PARETO_SHARE) * first.evaluation.total, rel=1e-9)
    taken = [t for t in info["tried"] if t.get("taken")]
    assert info["applied"] == bool(taken) == (out is not first)
    # a saving is taken only beyond the memory model's measured over-estimate of XLA
    worth = xla_lower_bound(int(first.evaluation.peak_memory))
    p0, c0 = int(first.evaluation.peak_memory), first.evaluation.total
    if info["applied"]:   # a vouched-for saving within the share, or cheaper at no higher peak (new user 20)
        assert (out.evaluation.peak_memory <= worth and out.evaluation.total <= info["cost_bound"] + 1e-6) or \
            (out.evaluation.total < c0 and out.evaluation.peak_memory <= p0)
        assert evaluate(first.graph.problem, out.choice)[1]
    for t in info["tried"]:   # until one is taken, a refused plan is over the share or not low enough, and
        if t.get("taken"):    # not cheaper at no higher peak
            break
        if "cost" in t:
            assert t["cost"] > info["cost_bound"] or t["peak_bytes"] > worth, t
            assert not (t["cost"] < c0 and t["peak_bytes"] <= p0), t
        assert t["limit_bytes"] <= worth
    budgeted = dataclasses.replace(first, graph=with_memory_budget(first.graph, 1 << 30))   # the user's budget
    same, binfo = pareto_step(budgeted, 1.0, deterministic=True)
    assert same is budgeted and not binfo["tried"] and "budget" in binfo["note"]
    # a limit at or above the step's highest ask that the search just before found nothing within: none asked
    skip, sinfo = pareto_step(first, 1.0, deterministic=True, searched_within=worth)
    assert skip is first and not sinfo["tried"] and not sinfo["applied"] and "found no plan within" in sinfo["note"]


def test_with_memory_budget_is_the_budgeted_build():
    """The guard's re-solve takes the first solve's graph with its limit (``with_memory_budget``) instead of
    building again: the same problem as a build with that budget, and the same deterministic answer."""
    from hloshard.autoshard.build import with_memory_budget

    mesh = _mesh()
    module = _module()
    g0 = build_graph(module, mesh, "io")
    budget = 3 << 20
    g1 = with_memory_budget(g0, budget)
    g2 = build_graph(_module(), mesh, "io", budget)
    assert g0.problem.usage_limit is None and g0.memory_budget is None   # left as it was
    assert g1.problem.usage_limit == g2.problem.usage_limit is not None
    assert (g1.memory_budget, g1.model_limit) == (g2.memory_budget, g2.model_limit)
    assert g1.solver_problem.num_nodes == g2.solver_problem.num_nodes > g0.solver_problem.num_nodes
    a = solve_module(module, mesh, keep="io", memory_budget=budget, time_limit=1, deterministic=True, apply=False,
                     graph=g1)
    b = solve_module(_module(), mesh, keep="io", memory_budget=budget, time_limit=1, deterministic=True,
                     apply=False)
    assert a.graph is g1 and a.choice == b.choice and a.evaluation.total == b.evaluation.total


def test_complete_plan_looks_ahead_to_a_later_alias_partner():
    """A class chosen before its alias partner keeps only indices the partner can still pair with (a new
    user's ViT with Adam, round 15: a tied output chosen with its follower class first left its parameter
    no option, and the data-parallel plan was missing).  Node 0 (the output, first) is cheapest at index 0,
    which pairs with no strategy of node 1 (the parameter); index 1 pairs with node 1's index 0."""
    import numpy as np

    from hloshard.costgraph import Problem

    ok = np.array([[False, False], [True, False]])
    prob = Problem(name="alias", intervals=np.array([[0, 1], [0, 1]]),
                   node_costs=[np.array([0, 5]), np.array([0, 0])], node_usages=[np.zeros(2, int), np.zeros(2, int)],
                   edges=np.zeros((0, 2), dtype=np.int64), edge_costs=[], aliases=[(0, 1, ok)])
    assert complete_plan(prob, [None, None]) == [1, 0]
    assert complete_plan(prob, [None, [1]]) is None          # the partner allows only an index none pairs with
    # the partner first (transposed side): it takes an index the output can pair with
    prob2 = Problem(name="alias2", intervals=prob.intervals, node_costs=[np.array([0, 5]), np.array([0, 0])],
                    node_usages=prob.node_usages, edges=prob.edges, edge_costs=[], aliases=[(1, 0, ok.T)])
    assert complete_plan(prob2, [None, None]) == [1, 0]


def test_data_parallel_fast_completion():
    """The data-parallel plan's other nodes by ``hloshard cost``'s fast completion when that is cheaper than
    the greedy pass (new user 17, finding 8: the GNN's at 2.3x a data-parallel completion): on the MLP the
    greedy pass prices it at 882,883 cost units; the completion from the same entry is cheaper, keeps every
    entry node's strategy and is feasible."""
    from hloshard.jax import known as K

    graph = build_graph(_module(), _mesh(), "io")
    dp = {p.name: p for p in known_plans(graph, STATE)}["data-parallel"]
    # the greedy pass alone from the same entry strategies (what known_plans gave before)
    fixed = K.entry_nodes(graph)
    allowed = [None] * len(graph.nodes)
    for v in fixed:
        allowed[v] = [dp.choice[v]]
    alone = complete_plan(graph.problem, allowed, graph.follows)
    obj_alone, ok = evaluate(graph.problem, alone)
    assert ok
    assert dp.completion == "fast" and dp.feasible and dp.row()["completion"] == "fast"
    assert dp.objective < obj_alone
    assert evaluate(graph.problem, dp.choice) == (dp.objective, True)
    params = {id(p) for p in graph.module.entry.parameters}
    assert any(id(graph.nodes[v].instr) in params for v in fixed)
    assert all(dp.choice[v] == alone[v] for v in fixed)


def test_pareto_step_keeps_the_repricing_reserve(monkeypatch):
    """In wall-clock mode the Pareto step ends before the deadline by the first graph's re-pricing reserve
    (the plan is applied and re-priced after it), as the solves do; its share is of the plan the guard
    returns, and it is told the limit a guard re-solve found nothing within."""
    import dataclasses
    import time

    import hloshard.autoshard.solve as solve
    import hloshard.jax.guard as guard

    module = _module()
    first = solve_module(module, _mesh(), keep="io", time_limit=0.5, deterministic=True, apply=False)
    first.graph.reprice_seconds = 7.0
    monkeypatch.setattr(guard, "_guard", lambda result, *a, **k: (result, {"applied": False}))
    seen = {}

    def step(result, budget, **k):
        seen.update(budget=budget, deadline=k["deadline"], best_cost=k.get("best_cost"),
                    searched_within=k.get("searched_within"), result=result)
        return result, {"applied": False}

    setattr_everywhere(monkeypatch, solve, "pareto_step", step)
    deadline = time.monotonic() + 100.0
    guard.guard_plan(first, module, _mesh(), "io", 1.0, 0, False, deadline=deadline)
    assert seen["deadline"] == pytest.approx(deadline - 7.0)
    assert seen["budget"] <= 93.0
    guard.guard_plan(first, module, _mesh(), "io", 1.0, 0, True)   # deterministic: no clock, no reserve
    assert seen["deadline"] is None
    # a guarded plan: the step's share is of that plan (no cost of the rejected first plan is passed), and it
    # is told the highest limit a re-solve found nothing within
    guarded = dataclasses.replace(first, choice=list(first.choice))
    monkeypatch.setattr(guard, "_guard", lambda result, *a, **k: (guarded, {"applied": True,
                                                                           "failed_limit_bytes": 12345}))
    guard.guard_plan(first, module, _mesh(), "io", 1.0, 0, True)
    assert seen["result"] is guarded and seen["best_cost"] is None and seen["searched_within"] == 12345


def test_baseline_priced_in_place_leaves_the_module():
    """The guard's baseline is priced on the module itself (its entry shardings replaced, then restored; no
    printed copy): the same figures as the copy gave, and the module, its shardings and ties as they were."""
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import print_module
    from hloshard.jax.guard import baseline_peak

    module = _module()
    mesh = _mesh()
    build_graph(module, mesh, "io")   # as auto_shard's first build leaves it
    before = print_module(module)
    ties = list(module.ties)
    got = baseline_peak(module, mesh)   # nothing sharded: the replicated baseline, no XLA run
    assert print_module(module) == before and module.ties == ties
    copy = parse_module(before, "<copy>")
    for ins in copy.entry.instructions:
        if not ins.shape.is_tuple or ins is copy.entry.root:
            from hloshard.hlo.sharding import HloSharding
            ins.sharding = HloSharding.replicated() if not ins.shape.is_tuple else \
                HloSharding.tuple([HloSharding.replicated()] * len(ins.shape.leaves()))
        else:
            ins.sharding = None
    want = evaluate_module(copy, mesh)
    assert got["plan"] == "replicated"
    assert got["peak_bytes"] == int(want.evaluation.peak_memory)
    assert got["collective_cost"] == pytest.approx(float(want.total_cost), rel=1e-12)
    assert got["all_replicated"]
    # the same all-replicated shardings given as a plan's own entry shardings: named for what they are (the
    # plan's entry, XLA's intermediates: gspmd_from_plan; no XLA run), priced the same
    from hloshard.hlo.sharding import HloSharding
    root = module.entry.root
    entry = {p.name: HloSharding.replicated() for p in module.entry.parameters}
    entry[root.name] = HloSharding.tuple([HloSharding.replicated()] * len(root.shape.tuple_shapes))
    mine = baseline_peak(module, mesh, entry=entry)
    assert mine["plan"] == "gspmd_from_plan" and mine["all_replicated"], mine
    assert mine["peak_bytes"] == got["peak_bytes"] and print_module(module) == before


def test_meet_spec():
    """The layout between two of a value's layouts that XLA reaches from both without replicating the
    value whole: only where axes come off and others go on and none moves (new user 17's GNN mean,
    ``P('model')`` -> ``P(None, 'data')``)."""
    from hloshard.jax.jaxpr import meet_spec

    assert meet_spec(("model",), (None, "data"), 2) == []                    # through replicated
    assert meet_spec((None, "data"), ("model", None), 2) == []
    assert meet_spec((("data", "model"),), ("data", "x"), 2) == ["data"]     # the common first axis kept
    assert meet_spec(("model",), ("model", None, "data"), 3) is None          # a slice only
    assert meet_spec(("model", "data"), ("model",), 2) is None                # an all-gather only
    assert meet_spec(("model",), (None, "model"), 2) is None                  # an axis moves: all-to-all
    assert meet_spec((("data", "model"),), (("model", "data"),), 1) is None   # the same axes, reordered
    assert meet_spec(("model",), ("model",), 1) is None


def test_fallback_weighs_the_greedy_plan_a_fast_one_refined(monkeypatch):
    """The fast completion costs less, not always memory: where only the greedy data-parallel plan keeps the
    baseline's peak, the guard's fallback still returns it."""
    import hloshard.autoshard as autoshard
    import hloshard.jax.guard as guard
    from hloshard.errors import SolveFailed

    module, mesh, first, holder = _first_with_known(1)
    dp = {p.name: p for p in holder["plans"]}["data-parallel"]
    assert dp.completion == "fast" and dp.greedy is not None
    fast, greedy = dp, dp.greedy
    # the fast plan made to peak above the limit, the greedy one within it
    limit = int(greedy.evaluation.peak_memory)
    import dataclasses
    fast.evaluation = dataclasses.replace(fast.evaluation, peak_memory=limit + 1)
    plans = [p for p in holder["plans"] if p.name != "replicated"]
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd", "peak_bytes": limit,
                                                                  "collective_cost": 0.0})
    setattr_everywhere(monkeypatch, autoshard, "solve_module", lambda *a, **k: (_ for _ in ()).throw(SolveFailed("test")))
    # the fallback step alone (the guard's last rule, cheapest_found, is test_guard_falls_back_to_a_known_plan's)
    monkeypatch.setattr(guard, "cheapest_found", lambda *a, **k: None)
    first.evaluation = dataclasses.replace(first.evaluation, peak_memory=limit + 10)
    out, g = guard.guard_plan(first, module, mesh, "io", 1.0, 0, True, known_plans=plans, pareto=False)
    assert g.get("fallback") == "data-parallel", g
    assert out.choice == greedy.choice



def test_data_parallel_entry_splits_the_batch_not_the_state():
    """The guard's second baseline with nothing sharded (issue 24, round 24): the batch (parameters 4, 5) split
    along its leading dim over all 8 devices in mesh order, the tied weights and the outputs replicated; none
    without a tie (which arguments are the batch is then unknown), without a batch argument, or when the
    untied arguments outweigh the tied ones (weights, not a batch)."""
    from hloshard.jax.guard import data_parallel_entry

    module = _module()
    mesh = _mesh()
    entry = data_parallel_entry(module, mesh)
    params = {p.parameter_number: p for p in module.entry.parameters}
    root = module.entry.root
    assert set(entry) == {params[4].name, params[5].name, root.name}
    for q in (4, 5):
        sh = entry[params[q].name]
        assert sh.tile_assignment_dims == (8, 1) and list(sh.tile_assignment.ravel()) == list(range(8)), sh
    assert entry[root.name].is_tuple and all(e.is_replicated for e in entry[root.name].tuple_elements)
    module.ties = []   # no state known: no batch known either
    assert data_parallel_entry(module, mesh) is None
    module.ties = [Tie((q + 1,), q) for q in range(6) if q < 4] + [Tie((), 4), Tie((), 5)]   # no batch left
    assert data_parallel_entry(module, mesh) is None
    module.ties = [Tie((1,), 4)]   # the batch x tied (as a forward layer's output by shape): the weights outweigh it
    assert data_parallel_entry(module, mesh) is None


def test_data_parallel_baseline_peaks_below_the_replicated_one():
    """XLA's propagation from the data-parallel entry (a child process), priced by the memory model: the batch
    split, the tied weights whole (in and out on every device: above the least node-memory peak, at least
    twice the weights), the gradients all-reduced (cost above twice the replicated baseline's, which
    prices compute alone); the module is left as it was.  On this MLP the weights dominate (2.2 MB against a
    64-row batch), so the data-parallel peak, its gradients' all-reduce buffers in, is above the replicated
    one (8.46 vs 7.09 MB predicted): the guard takes the lower of its two baselines, never this one alone."""
    from tests.conftest import require_jax

    require_jax()
    from hloshard.hlo import print_module
    from hloshard.jax.guard import DATA_PARALLEL_BASELINE, baseline_peak, data_parallel_baseline
    from hloshard.autoshard.report import minimum_peak

    module = _module()
    mesh = _mesh()
    graph = build_graph(module, mesh, "io")
    before = print_module(module)
    rep = baseline_peak(module, mesh)
    dp = data_parallel_baseline(module, mesh)
    assert print_module(module) == before
    assert dp["plan"] == DATA_PARALLEL_BASELINE and not dp["all_replicated"], dp
    weights = sum(p.shape.byte_size for p in module.entry.parameters if p.parameter_number in STATE)
    assert minimum_peak(graph.problem)[0] < dp["peak_bytes"], dp
    assert dp["peak_bytes"] >= 2 * weights, dp   # the weights in and out, whole on every device
    assert rep["collective_cost"] * 2 < dp["collective_cost"], (dp, rep)   # the gradients' all-reduces


def test_fsdp_entry_splits_the_state_along_its_leading_divisible_dim_and_the_batch():
    """The guard's third baseline with nothing sharded (issue 24, round 26): the batch as data parallelism splits it,
    and each tied weight along the largest dim the device count divides, over all 8 devices in mesh order; the root's
    tied values leave in their weights' layouts (the loss replicated).  None where data parallelism's entry is None
    (no state known); a dim 8 does not divide is never split (fsdp_dim)."""
    from hloshard.jax.guard import data_parallel_entry, fsdp_dim, fsdp_entry

    assert fsdp_dim((512, 1024), 8) == 1 and fsdp_dim((1024, 6), 8) == 0 and fsdp_dim((6, 7), 8) is None
    assert fsdp_dim((4, 8), 8) == 1 and fsdp_dim((64,), 1) is None and fsdp_dim((256, 8, 256), 8) == 0
    module = _module()
    mesh = _mesh()
    entry = fsdp_entry(module, mesh)
    dp = data_parallel_entry(module, mesh)
    params = {p.parameter_number: p for p in module.entry.parameters}
    root = module.entry.root
    for q in (4, 5):   # the batch: as data parallelism splits it
        assert entry[params[q].name] == dp[params[q].name]
    for q in STATE:
        sh, dims = entry[params[q].name], params[q].shape.dims
        want = [1] * len(dims)
        want[fsdp_dim(dims, 8)] = 8
        assert tuple(sh.tile_assignment_dims) == tuple(want) and list(sh.tile_assignment.ravel()) == list(range(8)), \
            (q, sh)
    outs = entry[root.name].tuple_elements
    assert outs[0].is_replicated   # the loss
    for q in STATE:   # the tied outputs (Tie((q + 1,), q)) in their weights' layouts
        assert outs[q + 1] == entry[params[q].name], q
    module.ties = []
    assert fsdp_entry(module, mesh) is None


def test_the_guard_takes_the_lowest_baseline_of_the_plan_data_parallel_and_fsdp(monkeypatch):
    """choose_baseline, the one rule: of the baselines priced (the plan's own entry, data parallelism, FSDP) the
    guard's limit is the lowest peak; every one's peak is reported.  Stubs: no XLA."""
    import types

    from hloshard.jax import guard

    assert guard.choose_baseline([{"peak_bytes": 5}, {"peak_bytes": 3}, {"peak_bytes": 3, "x": 1}]) == \
        {"peak_bytes": 3}
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd_from_plan", "peak_bytes": 9_000_000})
    monkeypatch.setattr(guard, "data_parallel_baseline",
                        lambda *a, **k: {"plan": guard.DATA_PARALLEL_BASELINE, "peak_bytes": 7_000_000})
    monkeypatch.setattr(guard, "fsdp_baseline", lambda *a, **k: {"plan": guard.FSDP_BASELINE, "peak_bytes": 4_000_000})
    monkeypatch.setattr(guard, "plan_entry", lambda *a: {})
    monkeypatch.setattr(guard, "plan_shardings", lambda *a: {})
    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    first = types.SimpleNamespace(evaluation=types.SimpleNamespace(peak_memory=3_000_000, total=1.0), choice=[0],
                                  graph=types.SimpleNamespace(pin_operands=False, memory_budget=None))
    out, g = guard._guard(first, module, types.SimpleNamespace(), "io", 1.0, 0, True)
    assert out is first and not g["applied"]   # 3 MB within the lowest, FSDP's 4 MB
    assert g["baseline"] == guard.FSDP_BASELINE and g["limit_bytes"] == 4_000_000, g
    assert (g["baseline_plan_peak_bytes"], g["baseline_data_parallel_peak_bytes"], g["baseline_fsdp_peak_bytes"]) \
        == (9_000_000, 7_000_000, 4_000_000), g
    # under a user's budget neither data parallelism nor FSDP is priced (the budget states the memory owed)
    first.graph.memory_budget = 1 << 30
    _, g = guard._guard(first, module, types.SimpleNamespace(), "io", 1.0, 0, True)
    assert g["baseline"] == "gspmd_from_plan" and "baseline_fsdp_peak_bytes" not in g, g
