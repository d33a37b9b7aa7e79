"""A memory budget sees XLA CPU's convolution copies (issue 25: a budget is a promise).

The evaluation (``autoshard.build.edge_buffers``, what a budget is checked on) counts XLA CPU's canonical
copies of convolution operands (``autoshard.conv_copies``), the resharding of a convolution operand made
where the operand is made, and a transposed result's canonical copy.  The solver's priced problem
(``autoshard.edgememory``: the nodes plus the buffers as shadow nodes, linearised at a plan) must count
at least as much at every schedule point, or the solver keeps its limit with plans the evaluation then
finds over it.  Checked on a small conv net's train step (jax's forward, input-gradient and
kernel-gradient convolutions) for the solver's plan and random plans; without the copy terms the
priced problem falls short of the evaluation (the check can fail)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from hloshard.autoshard.build import build_graph, edge_buffers
from hloshard.autoshard.edgememory import constant_bytes, edge_memory_terms, priced_problem
from hloshard.autoshard.search import solve_graph
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh

MODULE = pathlib.Path(__file__).parent / "data" / "cli" / "conv_net_dcn.pre.hlo"


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
    return build_graph(module, DeviceMesh.for_module(module, "2x4"), "io", 64 * 1024 * 1024)


def _shortfall(graph, terms, plan) -> int:
    """The most the priced problem at ``plan`` counts below the evaluation at any point (0: it covers it)."""
    p = graph.problem
    T = len(graph.schedule) + 1
    base = graph.solver_problem
    priced = priced_problem(graph, base, terms, plan)
    priced.validate()
    sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, plan)]
    for node, shadow, _allowed in priced.aliases[len(base.aliases):]:
        sizes.append(int(priced.node_usages[shadow][int(plan[node])]))
    ours = _profile(priced.intervals, sizes, T) + constant_bytes(graph)
    eiv, esz = edge_buffers(graph, plan)
    theirs = _profile(np.concatenate([np.asarray(p.intervals).reshape(-1, 2), np.asarray(eiv).reshape(-1, 2)]),
                      sizes[:p.num_nodes] + list(esz), T)
    return int((theirs - ours).max())


def test_the_priced_problem_covers_the_convolution_copies(graph):
    p = graph.problem
    assert list(graph.classes) == list(range(p.num_nodes))   # under a budget nothing is merged here
    terms = edge_memory_terms(graph)
    copies = [t for t in terms if t.share is not None and t.share[0] == "conv-copy"]
    assert copies, "no canonical copy priced: the case no longer exercises conv_copies"
    rng = np.random.default_rng(0)
    plans = [list(solve_graph(graph, time_limit=2, workers=1, deterministic=True).strategies)]
    plans += [[int(rng.integers(len(c))) for c in p.node_costs] for _ in range(4)]
    assert all(_shortfall(graph, terms, plan) <= 0 for plan in plans)
    # the same problem without the canonical copies falls short of the evaluation: the check can fail
    without = [t for t in terms if t.share is None or t.share[0] != "conv-copy"]
    assert max(_shortfall(graph, without, plan) for plan in plans) > 0


def test_the_source_credit_is_read_at_the_plan(graph):
    """A kernel gradient's copy of a forward activation stands for the activation once its last other reader
    ran (the evaluation's credit): at the plan the priced copy carries nothing over that window, so the
    solver's own plan is priced at its evaluated peak, not at the activation counted twice."""
    terms = edge_memory_terms(graph)
    plan = list(solve_graph(graph, time_limit=2, workers=1, deterministic=True).strategies)
    cut = [t for t in terms if t.cut is not None and t.cut(plan) is not None]
    assert cut, "no copy stands for its source at the solver's plan"
    p = graph.problem
    T = len(graph.schedule) + 1
    base = graph.solver_problem
    priced = priced_problem(graph, base, terms, plan)
    sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, plan)]
    for node, shadow, _allowed in priced.aliases[len(base.aliases):]:
        sizes.append(int(priced.node_usages[shadow][int(plan[node])]))
    ours = int((_profile(priced.intervals, sizes, T) + constant_bytes(graph)).max())
    eiv, esz = edge_buffers(graph, plan)
    theirs = int(_profile(np.concatenate([np.asarray(p.intervals).reshape(-1, 2), np.asarray(eiv).reshape(-1, 2)]),
                          sizes[:p.num_nodes] + list(esz), T).max())
    assert ours == theirs
