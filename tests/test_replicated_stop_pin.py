"""An operand pin whose resharding goes through the replicated layout is written as two constraints
(``strategy.realize.replicated_stop``): GSPMD's partitioner finds no direct route from a dim-0 split over
the mesh's 4-axis to a dim-1 split over its 2-axis and takes its last resort with the warning
"Involuntary full rematerialization" (new user 17's GNN, ``dot_general.58``'s operand); constrained first
to ``{replicated}`` and then to the target, XLA does an all-gather and a local slice: what hloshard
plans for the one pin, with the same bytes."""

from __future__ import annotations

import pytest

from hloshard.hlo import print_module
from hloshard.hlo.parser import parse_module
from hloshard.hlo.shape import parse_shape
from hloshard.hlo.sharding import HloSharding
from hloshard.mesh import DeviceMesh
from hloshard.strategy.realize import Pin, insert_pins, replicated_stop
from tests.handler_harness import chain_module, predicted_collectives, summary

MESH = DeviceMesh.parse("2x4", alpha="0,0", beta="1,1")
A = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"   # dim 0 over the 4-axis
B = "{devices=[1,2,4]<=[8] last_tile_dim_replicate}"            # dim 1 over the 2-axis
C = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"   # dim 1 over the 4-axis (an all-to-all from A)
R = "{replicated}"


def _written(target: str) -> str:
    """``x`` (layout A) read by a dot contracting its dim 0, the dot's operand pinned to ``target``."""
    text = chain_module([("c", [("f32[16,256]", A), ("f32[16,64]", R)],
                          [("d", "f32[256,64]", "dot($0, $1), lhs_contracting_dims={0}, "
                            "rhs_contracting_dims={0}", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")])])
    module = parse_module(text)
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    x = dot.operands[0]
    want = HloSharding.parse(target)
    insert_pins([Pin(dot, 0, want, replicated_stop(x.shape, x.sharding, want, MESH))])
    return print_module(module)


def test_replicated_stop_only_where_the_plan_passes_through_replicated():
    shape = parse_shape("f32[16,256]")
    assert replicated_stop(shape, HloSharding.parse(A), HloSharding.parse(B), MESH) == HloSharding.replicated()
    assert replicated_stop(shape, HloSharding.parse(A), HloSharding.parse(C), MESH) is None   # all-to-all
    assert replicated_stop(shape, HloSharding.parse(R), HloSharding.parse(B), MESH) is None   # a local slice
    assert replicated_stop(shape, HloSharding.parse(A), HloSharding.parse(R), MESH) is None   # one gather


def test_the_stop_is_written_between_the_operand_and_its_pin():
    lines = [ln.strip() for ln in _written(B).splitlines()]
    stop = next(k for k, ln in enumerate(lines) if ".full.pin = " in ln)
    pin = next(k for k, ln in enumerate(lines) if ".pin = " in ln and ".full.pin = " not in ln)
    dot = next(k for k, ln in enumerate(lines) if " dot(" in ln)
    assert stop < pin < dot
    assert "sharding={replicated}" in lines[stop] and lines[pin].split("custom-call(")[1].startswith(
        lines[stop].split(" = ")[0])
    assert ".full.pin" not in _written(C)   # a direct route: one pin as before


@pytest.mark.oracle
def test_the_two_constraints_move_what_hloshard_predicts():
    from tests.conftest import require_jax
    from tests.handler_harness import partition_only, xla_collectives

    require_jax()
    text = _written(B)
    xla = xla_collectives(partition_only(text))
    pred = predicted_collectives(parse_module(text), MESH)
    # one all-gather of x's dim 0 over the 4-axis (3/4 of 16 KiB per device), then a local slice
    assert summary(xla) == summary([c for cs in pred.values() for c in cs]) == [("all-gather", 4, 12288)]
