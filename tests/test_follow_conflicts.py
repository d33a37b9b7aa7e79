"""Follow edges the kept shardings and ties cannot all keep (:func:`hloshard.solver.followers.follow_conflicts`,
applied by :func:`hloshard.autoshard.build.build_graph`) and the message of a kept layout that truly has no plan
(:func:`hloshard.autoshard.report.conflict_message`).

New user 31 (F1): a GroupNorm ResNet's Adam step, every argument placed with the user's layout and the state
tied, was refused ("node 399: every strategy is forbidden"): one CSE'd broadcast of beta1 was followed by the
``m`` updates of a replicated and of a sharded scale, each output tied to its argument.  ``SHARED`` is that
step in eight instructions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.autoshard import build_graph, solve_module
from hloshard.autoshard.aliases import Tie
from hloshard.costgraph import INFINITY, Problem, evaluate
from hloshard.errors import SolveFailed
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.solver.followers import allowed_strategies, follow_conflicts, forbidden_chains
from tests.test_solver import random_problem

#: p0 kept replicated, p1 kept split on dim 0; both updates multiply by one broadcast (b), which m0 and m1
#: follow, a0 / a1 following them; output k is tied to parameter k.  The broadcast is of a vector: since round
#: 32 a *scalar* broadcast read several times (the user's beta1) ties no reader's layout at all (XLA rebuilds
#: it per reader, strategy.registry.read_anywhere), so that case no longer conflicts; this one still does.
SHARED = """HloModule step
ENTRY e {
  p0 = f32[8,16]{1,0} parameter(0), sharding={replicated}
  p1 = f32[8,16]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}
  g0 = f32[8,16]{1,0} parameter(2)
  g1 = f32[8,16]{1,0} parameter(3)
  c = f32[16]{0} parameter(4)
  b = f32[8,16]{1,0} broadcast(c), dimensions={1}
  m0 = f32[8,16]{1,0} multiply(g0, b)
  a0 = f32[8,16]{1,0} add(p0, m0)
  m1 = f32[8,16]{1,0} multiply(g1, b)
  a1 = f32[8,16]{1,0} add(p1, m1)
  ROOT t = (f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(a0, a1)
}
"""
TIES = [Tie((0,), 0, source="--tie"), Tie((1,), 1, source="--tie")]
MESH = DeviceMesh((4,))


def _module(ties=TIES):
    m = parse_module(SHARED)
    m.ties = list(ties)
    return m


def _node(graph, name):
    return next(v for v, g in enumerate(graph.nodes) if g.instr.name == name)


def test_a_followee_shared_by_two_tied_outputs_kept_apart_has_a_plan():
    m = _module()
    solve_module(m, MESH, keep="io", time_limit=5, deterministic=True)   # (main: SolveFailed, every strategy forbidden)
    by = {i.name: i for i in m.entry.instructions}
    assert str(by["a0"].sharding) == "{replicated}"
    assert str(by["a1"].sharding) == str(by["p1"].sharding) == "{devices=[4,1]<=[4]}"


def test_only_the_follow_that_cannot_hold_is_priced_in_full():
    g = build_graph(_module(), MESH, "io")
    cut = getattr(g, "cut_follows", [])
    assert len(cut) == 1
    u, v = cut[0]
    assert (u, v) not in g.follows and g.nodes[v].instr.name in ("m1", "a1")
    k = next(k for k, (a, b) in enumerate(g.problem.edges.tolist()) if {a, b} == {u, v})
    assert (np.asarray(g.problem.edge_costs[k]) < INFINITY).all()   # any pair, at its resharding cost
    assert follow_conflicts(g.problem, g.follows) == []
    # without the ties nothing conflicts: every follow stays, none is cut
    free = build_graph(_module(ties=()), MESH, "io")
    assert not getattr(free, "cut_follows", None)
    assert len(free.follows) == len(g.follows) + 1


def _chain_problem(second: int) -> Problem:
    """Node 0 followed by 1 and 2 (diagonal edges), 1 tied to node 3 (one strategy: index 0), 2 to node 4
    (index ``second``)."""
    n3 = np.zeros(3, dtype=np.int64)
    diag = np.where(np.eye(3, dtype=bool), 0, INFINITY).astype(np.int64)
    p = Problem(name="chain", intervals=np.zeros((5, 2), dtype=np.int64),
                node_costs=[n3, n3.copy(), n3.copy(), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)],
                node_usages=[np.zeros(3, dtype=np.int64)] * 3 + [np.zeros(1, dtype=np.int64)] * 2,
                edges=np.array([(0, 1), (0, 2)], dtype=np.int64), edge_costs=[diag, diag])
    one = np.zeros((3, 1), dtype=bool)
    one[0, 0] = True
    other = np.zeros((3, 1), dtype=bool)
    other[second, 0] = True
    p.aliases = [(1, 3, one), (2, 4, other)]
    return p


def test_follow_conflicts_and_the_chain_that_explains_them():
    assert follow_conflicts(_chain_problem(0), [(0, 1), (0, 2)]) == []
    assert follow_conflicts(_chain_problem(2), [(0, 1), (0, 2)]) == [(0, 2)]
    node, chains = forbidden_chains(_chain_problem(2))
    visited = {v for ch in chains for v, _c in ch}
    kinds = {c[2] for ch in chains for _v, c in ch if c is not None}
    assert {3, 4} <= visited and kinds == {"alias", "edge"}
    assert forbidden_chains(_chain_problem(0)) is None


@pytest.mark.parametrize("seed", range(6))
def test_a_strategy_arc_consistency_closes_is_in_no_feasible_choice(seed):
    p = random_problem(500 + seed, n=6, memory=False, follow=True)
    rng = np.random.default_rng(seed)
    u, v = (int(x) for x in rng.choice(6, size=2, replace=False))
    p.aliases = [(u, v, rng.random((len(p.node_costs[u]), len(p.node_costs[v]))) < 0.5)]
    masks = allowed_strategies(p)
    feasible = [x for x in itertools.product(*[range(len(c)) for c in p.node_costs]) if evaluate(p, list(x))[1]]
    for x in feasible:
        assert all(masks[w][x[w]] for w in range(6))
    if any(not m.any() for m in masks):
        assert not feasible


def test_a_kept_layout_with_no_plan_names_the_argument_the_tie_and_what_to_change():
    # p0 kept split 4 ways on a dim of 6 (uneven); its tied output must leave evenly split (divisible_io)
    text = SHARED.replace("f32[8,16]", "f32[6,16]").replace("sharding={replicated}", "sharding={devices=[4,1]<=[4]}")
    m = parse_module(text)
    m.ties = [Tie((0,), 0, source="--tie")]
    mesh = DeviceMesh((4,))
    mesh.divisible_io = True
    with pytest.raises(SolveFailed) as err:
        solve_module(m, mesh, keep="io", time_limit=5, deterministic=True)
    msg = str(err.value)
    assert "parameter 0 (p0)" in msg and "kept as given" in msg and "tied to parameter 0" in msg
    assert "split its dims evenly" in msg and "--tie" in msg and "node " not in msg
