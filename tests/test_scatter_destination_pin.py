"""A scatter into a shared broadcast of zeros (``segment_sum``'s init) against XLA's partitioner (GSPMD,
raw after-spmd-partitioning HLO, 8 CPU devices, 2x4 mesh; new user 17, finding 4).

The zeros ``o`` are split ``[4,1,1,2] last_tile_dim_replicate`` (dim 0 over the mesh's 4-axis,
replicated over its 2-axis); a forward scatter ``s`` adds into them in that layout, a backward scatter
``b`` into them split ``[4,1,2]`` (dim 2 over the 2-axis too), so the written module pins ``o`` for ``b``.
XLA merges identical broadcasts and refines the partial one to that pin's layout, and its scatter
handler partitions in the operand's layout: unpinned, ``s`` scatters ``[4,1,2]`` tiles and all-gathers
the result over the 2-axis (measured below, the ``control`` copy).  ``strategy.realize`` therefore pins
a scatter's destination that is a broadcast of a scalar in the planned layout too; then XLA moves what
hloshard predicts, instruction by instruction."""

from __future__ import annotations

import functools

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.hlo import print_module
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.realize import insert_pins, operand_pins
from tests.handler_harness import by_op, chain_module, predicted_collectives, summary, xla_collectives

MESH = DeviceMesh.parse("2x4", alpha="0,0", beta="1,1")
S = "{devices=[4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"   # dim 0 over the 4-axis, replicated over the 2-axis
F = "{devices=[4,1,2]<=[2,4]T(1,0)}"                              # and dim 2 over the 2-axis
R = "{replicated}"
PRELUDE = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
SCATTER = ("scatter({}, $1, {}), update_window_dims={{0,2}}, inserted_window_dims={{1}}, "
           "scatter_dims_to_operand_dims={{1}}, index_vector_dim=1, to_apply=add")
TABLE, UPD = "f32[16,64,32]", "f32[16,128,32]"


def _case(tag: str, zero: int):
    """``jax.vmap(segment_sum)``-shaped forward scatter ``s_<tag>`` (layout S) and backward scatter
    ``b_<tag>`` (layout F) into one broadcast of ``zero`` (distinct per case: XLA merges equal ones),
    summed in layout S."""
    return (tag, [(UPD, S), ("s32[128,1]", R), (UPD, F)],
            [(f"z_{tag}", "f32[]", f"constant({zero})", R),
             (f"o_{tag}", TABLE, f"broadcast(z_{tag}), dimensions={{}}", S),
             (f"b_{tag}", TABLE, SCATTER.format(f"o_{tag}", "$2"), F),
             (f"s_{tag}", TABLE, SCATTER.format(f"o_{tag}", "$0"), S),
             (f"t_{tag}", TABLE, f"add(s_{tag}, b_{tag})", S)])


@functools.lru_cache(maxsize=1)
def _written():
    """The module as hloshard writes it (``operand_pins`` + ``insert_pins`` of its annotated plan), the
    ``control`` case with the pre-fix pins only (none on ``s_control``'s destination), and its pins."""
    module = parse_module(chain_module([_case("fixed", 2), _case("control", 3)], PRELUDE))
    res = evaluate_module(module, MESH)
    pins = operand_pins(res.graph.nodes, res.choice, res.graph.ctx)
    kept = [p for p in pins if p.user.name != "s_control"]
    insert_pins(kept)
    return print_module(module), pins


def test_scatter_destination_broadcast_is_pinned_in_the_planned_layout():
    _, pins = _written()
    got = sorted((p.user.name, p.index, str(p.sharding)) for p in pins if p.user.name.endswith("fixed"))
    # b's destination differs from o's layout (pinned before the fix too); s's equals it, pinned now
    assert [(u, k) for u, k, _ in got] == [("b_fixed", 0), ("s_fixed", 0)]
    assert got[0][2] == F and got[1][2] == S


@pytest.mark.oracle
def test_pinned_scatter_moves_what_hloshard_predicts():
    from tests.conftest import require_jax
    from tests.handler_harness import partition_only

    require_jax()
    text, _ = _written()
    xla = by_op(xla_collectives(partition_only(text)))
    pred = predicted_collectives(parse_module(text), MESH)
    # without the pin XLA scatters into [4,1,2] tiles and all-gathers the f32[4,64,32] result over the
    # 2-axis: (2-1)/2 x 32 KiB per device, replica groups {0,4},{1,5},{2,6},{3,7}
    ctrl = xla.get("s_control", [])
    assert summary(ctrl) == [("all-gather", 2, 16384)]
    assert ctrl[0]["replica_groups"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # pinned: every instruction of the fixed case moves what hloshard predicts (t gathers b's F result)
    for name in [f"{p}_fixed" for p in ("z", "o", "b", "s", "t")]:
        assert summary(xla.get(name, [])) == summary(pred.get(name, [])), name
    assert xla.get(None, []) == []   # the pins (no op_name) move nothing: XLA rebuilds the zeros in their layout
    assert summary(xla.get("s_fixed", [])) == []
    assert summary(xla.get("t_fixed", [])) == [("all-gather", 2, 16384)]
