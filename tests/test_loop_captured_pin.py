"""A captured loop invariant reaches XLA in the planned layout (realize's ``NAME.init.pin``).

The module: a while of 4 trips whose body passes the stacked ``f32[6,8,256]`` element ``st`` through
unchanged (a loop invariant, so the while is written without a sharding and StableHLO's while
canonicalization captures the value from outside the loop) and reads layer ``i`` of it with a
``dynamic-slice`` in ``{replicated}``.  The init tuple is written ``{replicated}`` for ``st`` (the plan's
layout) but its operand ``e`` is split on dim 1 over pairs: what XLA sees when the operand's written
sharding is lost on the way in (a ``get-tuple-element`` of another while's result, a broadcast of a
scalar constant: new user 25's scan LM, where the stack was all-gathered whole on each of 24 trips).  The test
reuses tests/test_handlers_control_flow.py's trip-count restorer (its loops run 4 trips too).
XLA keeps no tuple sharding, so without a pin it captures ``e`` split and all-gathers the whole stack in
the body on every trip (4 x 24 KiB ring bytes per device); with the pin
(:func:`hloshard.strategy.realize.insert_loop_state_pins`) it all-gathers once, before the loop
(f32[6,8,256] = 49152 B, (2-1)/2 of it = 24576 B), which is what hloshard predicts for the pinned module.
"""

from __future__ import annotations

import pytest

S = "{devices=[1,2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"   # dim 1 split over pairs {0,1}, ...
R = "{replicated}"
STATE = "(s32[], f32[8,256]{1,0}, f32[6,8,256]{2,1,0})"
TSH = f"{{{R}, {R}, {R}}}"


def _md(name):
    return f', metadata={{op_name="{name}"}}'


def module_text(init_sharding: str = S) -> str:
    """The loop; ``init_sharding``: the layout of ``e``, the init tuple's operand for ``st``."""
    L = lambda n, rest: f"  {n} = {rest}{_md(n)}"   # noqa: E731
    return "\n".join([
        "HloModule captured, num_partitions=8", "",
        "cond {", L("cp", f"{STATE} parameter(0), sharding={TSH}"),
        L("ci", f"s32[] get-tuple-element(cp), index=0, sharding={R}"),
        L("c6", f"s32[] constant(4), sharding={R}"),
        "  ROOT " + L("lt", f"pred[] compare(ci, c6), direction=LT, sharding={R}").lstrip(), "}", "",
        "body {", L("p", f"{STATE} parameter(0), sharding={TSH}"),
        L("i", f"s32[] get-tuple-element(p), index=0, sharding={R}"),
        L("acc", f"f32[8,256]{{1,0}} get-tuple-element(p), index=1, sharding={R}"),
        L("st", f"f32[6,8,256]{{2,1,0}} get-tuple-element(p), index=2, sharding={R}"),
        L("z", f"s32[] constant(0), sharding={R}"),
        L("ds", f"f32[1,8,256]{{2,1,0}} dynamic-slice(st, i, z, z), dynamic_slice_sizes={{1,8,256}}, sharding={R}"),
        L("r", f"f32[8,256]{{1,0}} reshape(ds), sharding={R}"),
        L("a", f"f32[8,256]{{1,0}} add(acc, r), sharding={R}"),
        L("one", f"s32[] constant(1), sharding={R}"),
        L("i1", f"s32[] add(i, one), sharding={R}"),
        "  ROOT " + L("t", f"{STATE} tuple(i1, a, st), sharding={TSH}").lstrip(), "}", "",
        "ENTRY main {",
        L("x", f"f32[6,8,256]{{2,1,0}} parameter(0), sharding={init_sharding}"),
        L("y", f"f32[8,256]{{1,0}} parameter(1), sharding={R}"),
        L("e", f"f32[6,8,256]{{2,1,0}} exponential(x), sharding={init_sharding}"),
        L("c0", f"s32[] constant(0), sharding={R}"),
        L("init", f"{STATE} tuple(c0, y, e), sharding={TSH}"),
        L("w", f"{STATE} while(init), condition=cond, body=body, "
                 + 'backend_config={"known_trip_count":{"n":"4"}}'),
        "  ROOT " + L("o", f"f32[8,256]{{1,0}} get-tuple-element(w), index=1, sharding={R}").lstrip(), "}", ""])


def _pinned(text):
    from hloshard.hlo.parser import parse_module
    from hloshard.strategy.realize import insert_loop_state_pins

    m = parse_module(text)
    loops = [i for i in m.all_instructions() if i.opcode == "while"]
    return m, insert_loop_state_pins(loops)


def test_captured_init_is_pinned_in_the_tuple_layout():
    from hloshard.hlo.sharding import HloSharding

    m, n = _pinned(module_text())
    init = m.entry.get("init")
    pin = init.operands[2]
    assert pin.name == "e.init.pin" and pin.is_sharding_constraint and pin.operands[0].name == "e"
    assert pin.sharding == HloSharding.parse(R)
    # the captured element gets no read pin in the body (it is the init's value), only the init pin;
    # the carried accumulator's read gets its ``.sh`` pin
    body = m.get_computation("body")
    assert [i.name for i in body.instructions if i.is_sharding_constraint] == ["acc.sh"]
    assert n == 2
    # the scalar counter and the parameter ``y`` (kept by XLA in its layout) get none
    assert init.operands[0].name == "c0" and init.operands[1].name == "y"


def test_no_pin_when_the_init_already_has_the_layout():
    """An entry parameter in the tuple's layout reaches XLA as written: no pin."""
    text = module_text(R).replace("tuple(c0, y, e)", "tuple(c0, y, x)")
    m, n = _pinned(text)
    assert m.entry.get("init").operands[2].name == "x"
    assert n == 1   # acc.sh only


@pytest.mark.oracle
def test_xla_gathers_once_before_the_loop_as_predicted():
    from tests.conftest import require_jax

    require_jax()
    from hloshard.hlo.printer import print_module
    from hloshard.mesh import DeviceMesh
    from tests.handler_harness import partition_only, predicted_collectives, summary, xla_collectives

    from tests.test_handlers_control_flow import TRIPS, _with_trip_counts

    assert TRIPS == 4
    before = xla_collectives(_with_trip_counts(partition_only(module_text())))
    # unpinned: XLA gathers the whole captured stack inside the body (attributed to ``ds``), every trip
    assert summary([c for c in before if c["op_name"] == "ds"]) == [("all-gather", 2, 4 * 24576)]
    m, _ = _pinned(module_text())
    after = xla_collectives(_with_trip_counts(partition_only(print_module(m))))
    assert summary(after) == [("all-gather", 2, 24576)]
    assert not [c for c in after if c["op_name"] in ("ds", "st", "r", "a")]
    pred = predicted_collectives(m, DeviceMesh.parse("2x4"))
    assert summary([c for cs in pred.values() for c in cs]) == summary(after)
    assert list(pred) == ["e.init.pin"]
