"""dynamic-update-slice against XLA's partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 CPU devices,
one XLA child for the file): which layouts XLA keeps, and what it makes of a write into zeros that
several writes share (new user 35's RWKV-7, F7).

XLA (``HandleDynamicUpdateSlice`` / ``AnalyzeDynamicUpdateSlice``, jaxlib 0.10.2):

* the result splits a slice dim (a dim where the update is smaller) and on every such dim the update
  lands in one shard (1 long, or a constant start within one shard): the buffer keeps its layout, the
  update comes replicated along the slice dims, nothing else moves (``t1_*``, ``const_in``);
* otherwise ("default"): buffer, update and result are replicated along the slice dims, in the buffer's
  layout when that has more tiles than the result's, and the result is resharded (``t4_*``,
  ``const_across``, ``more_tiles``);
* a buffer that is a broadcast of a scalar arrives without its written sharding (jax's StableHLO route),
  and GSPMD's propagation gives zeros that several writes share the most-tiled of their layouts: a
  write laid out with fewer tiles is computed in the zeros' layout and its whole result all-gathered
  (``zeros_control``: what hloshard now predicts of such a module as given); ``solve`` pins the zeros
  in each write's layout (``strategy.realize.update_into_shared_broadcast``), and XLA then moves only the
  update (``zeros_pinned``).
"""

from __future__ import annotations

import functools

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.hlo import print_module
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import MeshInfo
from hloshard.strategy.realize import insert_pins, operand_pins
from hloshard.strategy.slicing import dus_update_in_one_shard
from tests.handler_harness import by_op, chain_module, partition_only, predicted_collectives, summary, \
    xla_collectives

R = "{replicated}"
B = "f32[8,64,32]"                       # batch, time, features
T8 = "{devices=[1,8,1]<=[8]}"            # time split 8 ways
B8 = "{devices=[8,1,1]<=[8]}"            # batch split 8 ways
BT = "{devices=[2,4,1]<=[8]}"            # batch 2, time 4
B4 = "{devices=[4,1,1,2]<=[8] last_tile_dim_replicate}"
I = ("s32[]", R)


def _dus(name, buffer, update, ushape, out, consts=None):
    """One case: ``dynamic-update-slice(buffer, update, 0|$2, $3|c, 0|$4)`` written ``out``; ``consts``:
    (batch, time, feature) start constants instead of index parameters."""
    if consts is None:
        return (name, [(B, buffer), (ushape, update), I, I, I],
                [(name, B, "dynamic-update-slice($0, $1, $2, $3, $4)", out)])
    steps = [(f"{name}_c{k}", "s32[]", f"constant({c})", R) for k, c in enumerate(consts)]
    idx = ", ".join(f"{name}_c{k}" for k in range(3))
    return (name, [(B, buffer), (ushape, update)], steps + [(name, B, f"dynamic-update-slice($0, $1, {idx})", out)])


def _zeros(tag: str, zero: int):
    """Two writes of a step into one broadcast of ``zero`` (distinct per case: XLA merges equal ones),
    ``w4_<tag>`` laid out ``[4,1,1,2]`` (4 tiles) and ``w8_<tag>`` ``[8,1,1]``, each update split
    8 ways on the batch; their sum in ``[4,1,1,2]`` (both writes live, as a loop's accumulators are)."""
    return (tag, [("f32[8,1,32]", B8), ("f32[8,1,32]", B8), I],
            [(f"z_{tag}", "f32[]", f"constant({zero})", R),
             (f"k_{tag}", "s32[]", "constant(0)", R),
             (f"o_{tag}", B, f"broadcast(z_{tag}), dimensions={{}}", "{devices=[1,1,8]<=[8]}"),
             (f"w8_{tag}", B, f"dynamic-update-slice(o_{tag}, $1, k_{tag}, $2, k_{tag})", B8),
             (f"w4_{tag}", B, f"dynamic-update-slice(o_{tag}, $0, k_{tag}, $2, k_{tag})", B4),
             (f"s_{tag}", B, f"add(w4_{tag}, w8_{tag})", B4)])


CASES = [
    _dus("t1_time8", T8, "{devices=[1,1,1,8]<=[8] last_tile_dim_replicate}", "f32[8,1,32]", T8),
    _dus("t1_time8_upd_split", T8, B8, "f32[8,1,32]", T8),
    _dus("t1_batch8", B8, B8, "f32[8,1,32]", B8),
    _dus("t1_bt", BT, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[8,1,32]", BT),
    _dus("t1_bt_upd_b8", BT, B8, "f32[8,1,32]", BT),
    _dus("t4_time8", T8, R, "f32[8,4,32]", T8),
    _dus("t4_bt", BT, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[8,4,32]", BT),
    _dus("feat8", "{devices=[1,1,8]<=[8]}", B8, "f32[8,1,32]", "{devices=[1,1,8]<=[8]}"),
    _dus("buffer_t8_out_b8", T8, B8, "f32[8,1,32]", B8),
    _dus("buffer_b8_out_t8", B8, B8, "f32[8,1,32]", T8),
    _dus("more_tiles", B8, B8, "f32[8,1,32]", B4),
    _dus("const_in", T8, R, "f32[8,4,32]", T8, consts=(0, 8, 0)),
    _dus("const_across", T8, R, "f32[8,4,32]", T8, consts=(0, 6, 0)),
    _zeros("zeros_control", 0),
    _zeros("zeros_pinned", 1),
]
SINGLE = [c[0] for c in CASES if not c[0].startswith("zeros")]
ZEROS = [f"{w}_{t}" for t in ("zeros_control", "zeros_pinned") for w in ("w4", "w8", "s")]


@functools.lru_cache(maxsize=1)
def _results():
    """``(per instruction (XLA summary, hloshard summary), pins written)`` of the module as ``solve``
    would write it for ``zeros_pinned`` (its pins) and as given for every other case."""
    from tests.conftest import require_jax

    require_jax()
    module = parse_module(chain_module(CASES))
    mesh = DeviceMesh.for_module(module, "2x4", alpha="0,0", beta="1,1")
    res = evaluate_module(module, mesh)
    pins = [p for p in operand_pins(res.graph.nodes, res.choice, res.graph.ctx)
            if p.user.name.endswith("zeros_pinned")]
    insert_pins(pins)
    text = print_module(module)
    xla = by_op(xla_collectives(partition_only(text)))
    written = parse_module(text)
    pred = predicted_collectives(written, DeviceMesh.for_module(written, "2x4", alpha="0,0", beta="1,1"))
    names = SINGLE + ZEROS
    return {n: (summary(xla.get(n, [])), summary(pred.get(n, []))) for n in names}, pins


pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("name", SINGLE + ZEROS)
def test_dus_collectives_match_xla(name):
    xla, pred = _results()[0][name]
    assert pred == xla


def test_measured_figures():
    """The hand derivation of four cases (f32[8,64,32] = 64 KiB; a 1/8 tile 8 KiB): a 1-long write into
    a time-split buffer moves nothing; a 4-long one at a runtime index gathers the buffer over the 8
    devices (7/8 x 64 KiB = 57,344); a buffer with more tiles than the result: the result's f32[1,64,32]
    tile gathered over pairs (8,192); the shared zeros: the 4-tile write is computed 8-way and gathered
    whole, unless pinned (then the update's f32[1,1,32] tile is gathered over pairs: 128)."""
    res = _results()[0]
    assert res["t1_time8"][0] == []
    assert res["t4_time8"][0] == [("all-gather", 8, 57344)]
    assert res["more_tiles"][0] == [("all-gather", 2, 8192)]
    assert res["w4_zeros_control"][0] == [("all-gather", 2, 8192)]
    assert res["w4_zeros_pinned"][0] == [("all-gather", 2, 128)]


def test_only_the_shared_zeros_are_pinned():
    """``solve``'s pins for the zeros case: one per write, on operand 0 (the zeros), each in its write's
    layout."""
    pins = _results()[1]
    assert sorted((p.user.name, p.index) for p in pins) == [("w4_zeros_pinned", 0), ("w8_zeros_pinned", 0)]
    assert {p.user.name: str(p.sharding) for p in pins}["w4_zeros_pinned"] == B4


def test_update_in_one_shard_rule():
    """:func:`dus_update_in_one_shard` without XLA: the slice dim split, a 1-long update or a constant
    start within one shard of 8 rows keeps the split; a 4-long runtime write, a constant write across
    two shards, or no split slice dim does not."""
    text = chain_module([c for c in CASES if c[0] in ("t1_time8", "t4_time8", "const_in", "const_across",
                                                      "t1_batch8")])
    module = parse_module(text)
    mesh = DeviceMesh.parse("8")
    minfo = MeshInfo(mesh)
    ins = {i.name: i for i in module.entry.instructions}
    time8 = ((), (0,), ())
    assert dus_update_in_one_shard(ins["t1_time8"], time8, minfo)
    assert dus_update_in_one_shard(ins["const_in"], time8, minfo)
    assert not dus_update_in_one_shard(ins["t4_time8"], time8, minfo)
    assert not dus_update_in_one_shard(ins["const_across"], time8, minfo)
    assert not dus_update_in_one_shard(ins["t1_batch8"], ((0,), (), ()), minfo)
