"""A fixed (annotated) instruction's group built with only its written layout's strategies
(``BuildContext.only_out``: :func:`hloshard.strategy.elementwise.free_group`, the reshape handler) is
the group the whole strategy space trimmed by :func:`hloshard.strategy.registry.apply_fixed` gives:
the same strategies in the same order with the same costs, node by node and array by array, on
annotated modules priced as written (what ``cost`` and every plan's re-pricing build) and on solver
inputs with kept annotations."""

from __future__ import annotations

import pathlib

import pytest

from hloshard.autoshard.build import build_graph
from hloshard.hlo import parse_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy import handlers

from tests.test_strategy_sharing import _same_problem, _strategy_rows

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"

#: (module, mesh, as written): propagated modules priced as written (every instruction fixed), and
#: solver inputs keeping their annotations
CASES = [("transformer_train_step.propagated.hlo", "2x4", True), ("moe_layer.propagated.hlo", "2x2x2", True),
         ("embedding_lookup.propagated.hlo", "2x4", True), ("conv_layer.propagated.hlo", "2x4", True),
         ("scan_mlp_train_step.propagated.hlo", "2x2x2", True), ("fused_qkv_train_step.propagated.hlo", "2x4", True)]

#: an add of two operands in one layout written in another: XLA computes in the operands' layout and
#: reshards the result (registry._resharded_outputs), which reads the add's strategies of every layout,
#: so the fast path's partial group is rebuilt whole for that step
RESHARDED_ADD = """HloModule resharded_add, entry_computation_layout={(f32[8,16]{1,0}, f32[8,16]{1,0})->f32[8,16]{1,0}}

ENTRY main {
  x = f32[8,16]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}
  y = f32[8,16]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}
  r = f32[8,16]{1,0} reshape(x), sharding={devices=[2,4]<=[8]}
  ROOT a = f32[8,16]{1,0} add(x, y), sharding={devices=[1,8]<=[8]}
}
"""


def _whole_space(fn, instr, ctx):
    """handlers._build_fixed without the fast path: the handler's whole space, trimmed afterwards."""
    return fn(instr, ctx), None


def _build(name, mesh, as_written):
    module = parse_module(RESHARDED_ADD) if name == "RESHARDED_ADD" else load_module(str(SAMPLES / name))
    if as_written:
        return build_graph(module, DeviceMesh.parse(mesh), keep="all", as_given=True)
    return build_graph(module, DeviceMesh.parse(mesh))


def _fast_and_whole(name, mesh, as_written, monkeypatch):
    """(fast graph, whole-space graph, names of the partial groups, names of those rebuilt whole)."""
    partial = []
    rebuilt = []
    build_fixed = handlers._build_fixed

    def counting(fn, instr, ctx):
        group, full = build_fixed(fn, instr, ctx)
        if full is not None:
            partial.append(instr.name)

            def counted_full():
                rebuilt.append(instr.name)
                return full()
            return group, counted_full
        return group, full

    monkeypatch.setattr(handlers, "_build_fixed", counting)
    fast = _build(name, mesh, as_written)
    monkeypatch.setattr(handlers, "_build_fixed", _whole_space)
    whole = _build(name, mesh, as_written)
    return fast, whole, partial, rebuilt


def _same_graph(fast, whole):
    assert _strategy_rows(fast) == _strategy_rows(whole)
    _same_problem(fast.problem, whole.problem)
    _same_problem(fast.solver_problem, whole.solver_problem)


@pytest.mark.parametrize("name,mesh,as_written", CASES)
def test_fixed_fast_path_equals_whole_space_trimmed(name, mesh, as_written, monkeypatch):
    fast, whole, partial, _ = _fast_and_whole(name, mesh, as_written, monkeypatch)
    assert partial, "no fixed instruction took the fast path"
    _same_graph(fast, whole)


def test_a_step_reading_other_layouts_gets_the_whole_space(monkeypatch):
    """The add's partial group (one strategy) is rebuilt whole for ``_resharded_outputs``: its kept
    strategy computes in the operands' layout (S0) and reshards the result, as the whole space gives;
    the reshape's partial group is kept as built."""
    fast, whole, partial, rebuilt = _fast_and_whole("RESHARDED_ADD", "2x4", True, monkeypatch)
    _same_graph(fast, whole)
    assert sorted(partial) == ["a", "r"] and rebuilt == ["a"]
    (add,) = [g for g in fast.nodes if g.instr.name == "a"]
    assert [s.out for s in add.strategies] == [((), (0, 1))]
    assert [s.inputs for s in add.strategies] == [(((0, 1), ()), ((0, 1), ()))]
    assert add.strategies[0].comm > 0
