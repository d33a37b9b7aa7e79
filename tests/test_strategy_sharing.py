"""Strategy lists shared between structurally equal instructions (hloshard.strategy.sharing): the
shared build is the unshared build, strategy by strategy and array by array, and it does share."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from hloshard.autoshard.build import build_graph
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"

CASES = [("transformer_train_step.pre.hlo", "2x2x2"), ("transformer_train_step.pre.hlo", "2x4"),
         ("scan_mlp_train_step.pre.hlo", "2x2x2"), ("moe_layer.pre.hlo", "4x2"),
         ("attention_6heads.propagated.hlo", "2x4"), ("fused_qkv_train_step.pre.hlo", "2x2x2")]


def _strategy_rows(graph):
    rows = []
    for g in graph.nodes:
        follow = None if g.follow is None else (g.follow[0].name, g.follow[1])
        rows.append((g.instr.name, follow, g.fixed, g.multi,
                     [(s.name, s.out, s.inputs, s.compute, s.comm, s.memory, s.collectives, s.flops)
                      for s in g.strategies]))
    return rows


def _same_problem(a, b):
    assert np.array_equal(a.intervals, b.intervals)
    assert np.array_equal(a.edges, b.edges)
    assert a.cost_scale == b.cost_scale
    for x, y in zip(a.node_costs, b.node_costs, strict=True):
        assert np.array_equal(x, y)
    for x, y in zip(a.node_usages, b.node_usages, strict=True):
        assert np.array_equal(x, y)
    for x, y in zip(a.edge_costs, b.edge_costs, strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("name,mesh", CASES)
def test_shared_build_equals_unshared(name, mesh):
    plain = build_graph(load_module(str(SAMPLES / name)), DeviceMesh.parse(mesh), share=False)
    shared = build_graph(load_module(str(SAMPLES / name)), DeviceMesh.parse(mesh))
    assert plain.shared_groups["shared"] == plain.shared_groups["interned"] == 0
    assert _strategy_rows(shared) == _strategy_rows(plain)
    _same_problem(shared.problem, plain.problem)
    _same_problem(shared.solver_problem, plain.solver_problem)
    assert list(shared.classes) == list(plain.classes)


def test_repeated_layers_share_strategy_lists():
    """The two layers of the sample transformer: most groups reuse a list built for an earlier
    instruction, so the graph holds fewer distinct strategy lists than nodes."""
    graph = build_graph(load_module(str(SAMPLES / "transformer_train_step.pre.hlo")), DeviceMesh.parse("2x2x2"))
    stats = graph.shared_groups
    assert stats["shared"] > stats["built"] // 4, stats
    distinct = {id(g.strategies) for g in graph.nodes}
    assert len(distinct) < len(graph.nodes) // 2, (len(distinct), len(graph.nodes))
