"""A while whose body passes a stacked element through is written with its whole state's sharding
(``solve``: :func:`hloshard.strategy.realize.keep_invariants`), and XLA carries out the plan as priced.

The module is tests/test_loop_captured_pin.py's loop (4 trips; the body reads layer ``i`` of the
``f32[6,8,256]`` stack ``st`` it passes through) with only the entry parameters annotated.  ``solve``
lays the stack out in the loop as it chooses (a node of the cost graph, not the init's value captured
from outside the loop), writes the while's tuple sharding and makes the body root read ``st`` through a
``Sharding`` custom-call (``st.keep``).  Without that custom-call StableHLO's while canonicalization
captures ``st`` and keeps the tuple sharding at full length, and jaxlib rejects the module (the oracle
test shows the RET_CHECK); with it XLA's collectives are hloshard's prediction of the written module.
``cost`` of a module as given (jax's export: a while without a sharding) still prices its invariants as
captured (:func:`hloshard.strategy.control_flow._captured`).
"""

from __future__ import annotations

import re

import pytest

from tests.test_loop_captured_pin import module_text


def _unsolved() -> str:
    """The loop with only the entry parameters' and the output's shardings (what ``--keep-shardings io`` keeps)."""
    return re.sub(r", sharding=\{(?:[^{}]|\{[^{}]*\})*\}(?=, metadata=\{op_name=\"(?!x\"|y\"|o\")[^\"]*\"\})",
                  "", module_text())


def _solved():
    from hloshard.autoshard import solve_module
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    mesh = DeviceMesh.parse("2x4")
    m = parse_module(_unsolved())
    res = solve_module(m, mesh, keep="io", time_limit=5, workers=1, deterministic=True)
    return m, mesh, res


def test_solve_writes_the_whole_state_and_keeps_the_invariant():
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo.loops import invariant_elements
    from hloshard.hlo.parser import parse_module
    from hloshard.hlo.printer import print_module

    m, mesh, res = _solved()
    w = m.entry.get("w")
    assert w.sharding is not None and w.sharding.is_tuple and len(w.sharding.tuple_elements) == 3
    body = m.get_computation("body")
    keep = body.root.operands[2]
    assert keep.name == "st.keep" and keep.is_sharding_constraint
    assert keep.operands[0] is body.get("st") and keep.sharding == w.sharding.tuple_elements[2]
    assert [u.name for u in keep.users] == ["t"]
    # no longer a pass-through for StableHLO's capture; still one for XLA's buffers after partitioning
    assert invariant_elements(w) == [] and invariant_elements(w, through_pins=True) == [2]
    # no captured element: no init pin
    assert not [i for i in m.entry.instructions if i.name.endswith(".init.pin")]
    # what the solver priced is what `cost` prices of the written module
    ev = evaluate_module(parse_module(print_module(m)), mesh)
    assert ev.total_cost == pytest.approx(res.evaluation.total, rel=1e-9)


def test_cost_of_a_module_as_given_still_captures():
    """The same unsolved module priced as given (``cost``'s graph): the while has no sharding, so XLA
    captures ``st`` and the loop reads the init's value; in ``solve``'s graph the element is a node."""
    from hloshard.autoshard.build import build_graph
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.strategy.base import LeafRef, StrategyGroup

    mesh = DeviceMesh.parse("2x4")
    given = build_graph(parse_module(_unsolved()), mesh, keep="all", as_given=True)
    w = next(i for i in given.ctx.groups if i.name == "w")
    child = given.ctx.groups[w].children[2]
    assert isinstance(child, LeafRef) and child.instr.name == "init"
    solving = build_graph(parse_module(_unsolved()), mesh, keep="io")
    w = next(i for i in solving.ctx.groups if i.name == "w")
    assert isinstance(solving.ctx.groups[w].children[2], StrategyGroup)


def test_trip_count_sees_through_a_kept_bound():
    """A loop bound kept in the loop state through a ``.keep`` pin is still an invariant bound."""
    from hloshard.hlo.loops import trip_count
    from hloshard.hlo.parser import parse_module
    from hloshard.strategy.realize import keep_invariants

    text = _unsolved().replace('backend_config={"known_trip_count":{"n":"4"}}, ', "")
    text = text.replace("s32[] constant(4)", "s32[] get-tuple-element(cp), index=3")
    text = text.replace("(s32[], f32[8,256]{1,0}, f32[6,8,256]{2,1,0})",
                        "(s32[], f32[8,256]{1,0}, f32[6,8,256]{2,1,0}, s32[])")
    text = text.replace("tuple(i1, a, st)", "tuple(i1, a, st, nb)").replace(
        "  ROOT t =", '  nb = s32[] get-tuple-element(p), index=3\n  ROOT t =')
    text = text.replace("tuple(c0, y, e)", "tuple(c0, y, e, c4)").replace(
        "  init =", "  c4 = s32[] constant(4)\n  init =")
    m = parse_module(text)
    w = m.entry.get("w")
    from hloshard.hlo.sharding import HloSharding

    w.sharding = HloSharding.tuple([HloSharding.replicated()] * 4)
    assert keep_invariants([w]) == 2   # the stack and the bound
    assert tuple(trip_count(w))[:2] == (4, True)


@pytest.mark.oracle
def test_xla_runs_the_solved_loop_as_priced():
    from tests.conftest import require_jax

    require_jax()
    from hloshard.hlo.printer import print_module
    from tests import xla_oracle
    from tests.handler_harness import partition_only, predicted_collectives, summary, xla_collectives
    from tests.test_handlers_control_flow import _with_trip_counts

    m, mesh, _ = _solved()
    text = print_module(m)
    xla = xla_collectives(_with_trip_counts(partition_only(text)))
    pred = predicted_collectives(m, mesh)
    assert summary(xla) == summary([c for cs in pred.values() for c in cs])
    assert summary(xla) == [("all-to-all", 2, 3072)]   # x's dim-1 split to dim 2, once, before the loop
    # the same module without the keep pin: jaxlib rejects the while's sharding
    with pytest.raises(xla_oracle.OracleError, match="leaf nodes while this sharding has"):
        partition_only(text.replace("tuple(i1, a, st.keep)", "tuple(i1, a, st)"))


def test_unmatched_collectives_in_a_renamed_body_count_its_trips():
    """XLA's partitioned module names while bodies its own way (``region_2.6_spmd``), so a collective
    ``cost --xla`` cannot match to an instruction takes the execution count of its computation in XLA's
    module itself: 4 for the body of this 4-trip loop (from its condition: the StableHLO round trip drops
    ``known_trip_count``), 1 for the entry, nothing for a text that does not parse."""
    from hloshard.xla_compare import _xla_execution_counts

    text = module_text().replace('backend_config={"known_trip_count":{"n":"4"}}, ', "")
    text = text.replace("body {", "region_0.1_spmd {").replace("body=body", "body=region_0.1_spmd")
    counts = _xla_execution_counts(text)
    assert counts["region_0.1_spmd"] == 4.0 and counts["main"] == 1.0
    assert _xla_execution_counts("HloModule broken\nENTRY {") == {}
