"""A fixed dot prices only its own layout's strategies (strategy.dot.dot_strategies with registry.only_output):
the graph of a module whose dots are all annotated (XLA's propagated samples: what the memory guard's baselines and
the written plan price) is the one the whole strategy space trimmed by apply_fixed gives, strategy by strategy."""

from pathlib import Path

import numpy as np
import pytest

import hloshard.strategy.dot as dot
from hloshard.autoshard.build import build_graph
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import StrategyGroup
from hloshard.strategy.registry import ALL_OUTPUTS

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _groups(graph):
    out = []
    for g in graph.nodes:
        if isinstance(g, StrategyGroup):
            out.append((g.instr.name, [(s.name, s.out, s.inputs, s.compute, s.comm, s.memory, s.collectives)
                                       for s in g.strategies]))
    return out


@pytest.mark.parametrize("name,spec", [("transformer_train_step", "2x2x2"), ("fused_qkv_train_step", "4x2"),
                                       ("attention_6heads", "2x4")])
def test_fixed_dots_build_what_the_whole_space_trimmed_gives(name, spec, monkeypatch):
    module = load_module(str(SAMPLES / f"{name}.propagated.hlo"))
    mesh = DeviceMesh.for_module(module, spec)
    dots = [i for c in module.computations for i in c.instructions if i.opcode == "dot" and i.sharding is not None]
    assert dots   # XLA annotated its dots: each is built fixed
    calls = {"lazy": 0, "built": 0}
    real = dot._dot_strategies

    def counted(*args, **kw):
        want = args[10] if len(args) > 10 else kw.get("want", ALL_OUTPUTS)
        calls["lazy"] += want is not ALL_OUTPUTS
        out = real(*args, **kw)
        calls["built"] += len(out)
        return out

    monkeypatch.setattr(dot, "_dot_strategies", counted)
    lazy = build_graph(module, mesh, "all")
    assert calls["lazy"] > 0   # the fixed dots took the lazy path
    lazy_built, calls["built"] = calls["built"], 0
    monkeypatch.setattr(dot, "only_output", lambda instr, ctx: ALL_OUTPUTS)   # the whole space, then trimmed
    whole = build_graph(module, mesh, "all")
    assert lazy_built < calls["built"]   # fewer strategies priced
    assert _groups(lazy) == _groups(whole)
    assert len(lazy.problem.node_costs) == len(whole.problem.node_costs)
    for a, b in zip(lazy.problem.node_costs, whole.problem.node_costs):
        assert np.array_equal(a, b)
    for a, b in zip(lazy.problem.edge_costs, whole.problem.edge_costs):
        assert np.array_equal(a, b)
