"""The communication buffers priced as solver memory (hloshard.autoshard.edgememory, issue 25 item 1).

A plan's usage in the priced problem (its nodes plus the shadow nodes of the buffers, linearised at
that plan) must be, at every schedule point, at least what the evaluation counts there (its nodes plus
``edge_buffers``): then a plan that keeps the priced problem's limit keeps the evaluated limit.  Checked
on the new user's block train step (the case whose budget loop used to prove infeasible where plans
fit) for several plans: the solver's own and plans with one strategy per node drawn at random.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from hloshard.autoshard.build import build_graph, edge_buffers
from hloshard.autoshard.edgememory import constant_bytes, edge_memory_terms, priced_problem, shared_spans, terms_at
from hloshard.autoshard.search import solve_graph
from hloshard.cost.liveness import peak_usage
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh

MODULE = pathlib.Path(__file__).parent / "data" / "hlo" / "newuser_block_train_step.pre.hlo"


def _profile(intervals, sizes, T: int) -> np.ndarray:
    """Usage at every point 0..T-1: the sizes of the half-open intervals covering it, summed."""
    diff = np.zeros(T + 1, dtype=np.int64)
    for (lo, hi), size in zip(np.asarray(intervals, dtype=np.int64).reshape(-1, 2), sizes):
        if hi > lo:
            diff[lo] += size
            diff[min(hi, T)] -= size
    return np.cumsum(diff)[:T]


@pytest.fixture(scope="module")
def graph():
    module = parse_file(str(MODULE))
    return build_graph(module, DeviceMesh.for_module(module, "2x4"), "io", 3 * 1024 * 1024)


def test_priced_usage_covers_the_evaluated_buffers(graph):
    p = graph.problem
    T = len(graph.schedule) + 1
    terms = edge_memory_terms(graph)
    assert any(len(t.nodes) == 2 for t in terms), "no resharded operand: the case no longer exercises pricing"
    rng = np.random.default_rng(0)
    plans = [list(solve_graph(graph, time_limit=2, workers=1, deterministic=True).strategies)]
    plans += [[int(rng.integers(len(c))) for c in p.node_costs] for _ in range(3)]
    base = graph.solver_problem
    assert list(graph.classes) == list(range(p.num_nodes))   # under a budget nothing is merged here
    checked = 0
    for plan in plans:
        priced = priced_problem(graph, base, terms, plan)
        assert priced.usage_limit == base.usage_limit - constant_bytes(graph)
        priced.validate()
        n = p.num_nodes
        # every shadow is tied to its node strategy for strategy: read its usage at the node's strategy
        sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, plan)]
        for node, shadow, allowed in priced.aliases[len(base.aliases):]:
            assert shadow >= n and allowed.shape == (len(p.node_costs[node]), len(priced.node_costs[shadow]))
            sizes.append(int(priced.node_usages[shadow][int(plan[node])]))
        ours = _profile(priced.intervals, sizes, T) + constant_bytes(graph)
        eiv, esz = edge_buffers(graph, plan)
        theirs = _profile(np.concatenate([np.asarray(p.intervals).reshape(-1, 2), np.asarray(eiv).reshape(-1, 2)]),
                          [int(u[int(c)]) for u, c in zip(p.node_usages, plan)] + list(esz), T)
        assert (ours >= theirs).all(), int(np.argmax(theirs - ours))
        assert int(theirs.max()) == peak_usage(np.concatenate([np.asarray(p.intervals).reshape(-1, 2),
                                                               np.asarray(eiv).reshape(-1, 2)]),
                                               [int(u[int(c)]) for u, c in zip(p.node_usages, plan)] + list(esz))[0]
        checked += int((ours > _profile(p.intervals, sizes[:n], T)).sum())
    assert checked > 0, "no buffer was priced anywhere"


def test_terms_at_picks_live_terms(graph):
    terms = edge_memory_terms(graph)
    t = terms[0].lo
    picked = terms_at(terms, [t])
    assert 0 in picked
    assert all(terms[k].lo <= t < terms[k].hi for k in picked)
    assert len(picked) == sum(1 for x in terms if x.lo <= t < x.hi)
    assert terms_at(terms, []) == []


def test_a_value_resharded_for_several_consumers_is_one_buffer(graph):
    """Consumers (dots, ...) of one computation reading one value in one new layout share one of solve's
    pins, one buffer from the first to the last: for a plan written with pins the evaluation counts it
    once over the hull, and the priced problem carries it on one copy of the group over the same interval
    (the others carry nothing for that layout); a graph priced as it is keeps one copy per consumer."""
    assert not getattr(graph, "pin_operands", False)
    # not a plan written with pins: only the copies XLA's reshard cache shares (reshard_cache.cache_layout)
    assert all(t.share is None or t.share[0] == "reshard-cache" for t in edge_memory_terms(graph))
    _check_shared(graph)
    graph.pin_operands = True   # as solve_module sets it for a plan it writes with pins (build.pin_key)
    try:
        _check_shared(graph)
    finally:
        graph.pin_operands = False


def _check_shared(graph):
    terms = edge_memory_terms(graph)
    rng = np.random.default_rng(1)
    p = graph.problem
    groups = 0
    for plan in [[int(rng.integers(len(c))) for c in p.node_costs] for _ in range(4)]:
        spans, shared = shared_spans(terms, plan)
        eiv, _esz = edge_buffers(graph, plan)
        made = {tuple(int(x) for x in iv) for iv in eiv}
        for k, (lo, hi) in spans.items():
            layout = terms[k].layout(plan[terms[k].nodes[1]])
            members = [terms[k]] + [terms[m] for m, lay in shared.items()
                                    if terms[m].share == terms[k].share and lay == layout]
            assert len(members) > 1
            assert lo == min(t.lo for t in members) and hi == max(t.hi for t in members)
            assert (lo, hi) in made   # the evaluation's one buffer of the group
        priced = priced_problem(graph, graph.solver_problem, terms, plan)
        extra = [tuple(int(x) for x in iv) for iv in priced.intervals[p.num_nodes:]]
        assert all(span in extra for span in spans.values())
        groups += len(spans)
    assert groups > 0, "no value resharded twice into one layout: the case no longer exercises sharing"
