"""slice, pad, concatenate, reverse and dynamic-slice handlers against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices).

XLA keeps a slice's operand layout, sliced dim included, and exchanges halos with collective-permutes
(the fused-QKV split of ``samples/transformer_block``); hloshard must predict the same kinds and ring
bytes.  The "compact" halo exchange (a shard needing data from more than one neighbour) is predicted
with the bytes each target needs, one permute per distinct piece, where XLA sometimes merges pieces
into wider permutes (here "q": XLA 64 + 128 columns, hloshard 3 x 64: the same bytes); such cases
compare kinds and total bytes only.  Pads (a window like a slice) and concatenates (all-to-alls moving
the split away and back) are checked the same way.
"""

from __future__ import annotations

import functools

import pytest

from hloshard.strategy.slicing import slice_halo
from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

S = "{devices=[2,1,4]<=[8]}"           # batch on data, the sliced dim on model (4 shards of 192)
QKV = "f32[8,128,768]"


def _slice(spec: str) -> str:
    return "slice({0}), slice={{" + spec + "}}"


CASES = [
    # q of the fused QKV: shard i needs [64i, 64i+64): 64-column pieces from shards 0, 0, 1 (a column
    # of the f32[4,128,192] tile is 2048 bytes: 131072 per piece)
    ("q", [(QKV, S)], _slice("[0:8], [0:128], [0:256]"), S, "f32[8,128,256]"),
    # k: every shard's halo fits in one neighbour: one left and one right halo of 128 columns (262144)
    ("k", [(QKV, S)], _slice("[0:8], [0:128], [256:512]"), S, "f32[8,128,256]"),
    # v: three 64-column pieces
    ("v", [(QKV, S)], _slice("[0:8], [0:128], [512:768]"), S, "f32[8,128,256]"),
    # a trim of 8 at each end: halos of 4 columns both ways (8192 each)
    ("trim", [(QKV, S)], _slice("[0:8], [0:128], [8:760]"), S, "f32[8,128,752]"),
    # a stride-2 slice keeps every element local
    ("stride", [(QKV, S)], _slice("[0:8], [0:128], [0:768:2]"), S, "f32[8,128,384]"),
    # 100 columns from shard 0 to all: three 25-column pieces (51200 each)
    ("head", [(QKV, S)], _slice("[0:8], [0:128], [0:100]"), S, "f32[8,128,100]"),
    # result replicated on the sliced dim: halo in the operand layout, then an all-gather of the result
    ("to_rep", [(QKV, S)], _slice("[0:8], [0:128], [0:256]"),
     "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[8,128,256]"),
    # slicing an unsplit dim is local
    ("unsplit", [(QKV, S)], _slice("[0:8], [0:64], [0:768]"), S, "f32[8,64,768]"),
    # half of the columns: pieces of 96 columns from shards 0, 1, 1 (XLA packs two into one permute of
    # 192: the same 288 columns)
    ("half", [(QKV, S)], _slice("[0:8], [0:128], [0:384]"), S, "f32[8,128,384]"),
    # pad 4 on both ends of 256 columns over 4 shards (64 -> 66): halos of 2 columns both ways (4096)
    ("pad_both", [("f32[8,128,256]", S), ("f32[]", "{replicated}")], "pad({0}, {1}), padding=0_0x0_0x4_4", S,
     "f32[8,128,264]"),
    # pad to twice the size: shards 0 and 1 take 64 columns from shards 1, 2, 3 (3 x 131072)
    ("pad_high", [("f32[8,128,256]", S), ("f32[]", "{replicated}")], "pad({0}, {1}), padding=0_0x0_0x0_256", S,
     "f32[8,128,512]"),
    # interior padding (jax's average-pool gradient, new user 34 F1): 16 columns over 8 shards of 2, padded
    # 1_1_1 to 33 (5 per shard): shard i holds dilated positions 5i-1 .. 5i+3, the right halos reach 3 columns
    # (on shards 5, 6): 2 columns from the neighbour and 1 from the next (32 B a column); no low padding: local
    ("pad_interior", [("f32[8,16]", "{devices=[1,8]<=[8]}"), ("f32[]", "{replicated}")],
     "pad({0}, {1}), padding=0_0x1_1_1", "{devices=[1,8]<=[8]}", "f32[8,33]"),
    ("pad_interior_local", [("f32[8,16]", "{devices=[1,8]<=[8]}"), ("f32[]", "{replicated}")],
     "pad({0}, {1}), padding=0_0x0_1_1", "{devices=[1,8]<=[8]}", "f32[8,32]"),
    # concatenate along the split dim: each operand's split moves to another dim (all-to-all of its
    # f32[4,128,64] tile, ring 3/4*131072), the result's moves back (3/4*262144)
    ("concat_split", [("f32[8,128,256]", S), ("f32[8,128,256]", S)], "concatenate({0}, {1}), dimensions={{2}}", S,
     "f32[8,128,512]"),
    ("concat_uneven", [("f32[8,128,256]", S), ("f32[8,128,512]", S)], "concatenate({0}, {1}), dimensions={{2}}", S,
     "f32[8,128,768]"),
    # concatenate along an unsplit dim: local
    ("concat_unsplit", [("f32[8,128,256]", S), ("f32[8,128,256]", S)], "concatenate({0}, {1}), dimensions={{1}}", S,
     "f32[8,256,256]"),
    # reverse of the split dim: every tile moves to its mirror device (f32[32,8] tile, 1024 bytes)
    ("reverse", [("f32[64,32]", "{devices=[2,4]<=[8]}")], "reverse({0}), dimensions={{1}}", "{devices=[2,4]<=[8]}",
     "f32[64,32]"),
    # dynamic-slice with a runtime offset on a split dim: XLA gathers the operand (both dims)
    ("dynamic_slice", [("f32[64,32]", "{devices=[2,4]<=[8]}"), ("s32[]", "{replicated}"), ("s32[]", "{replicated}")],
     "dynamic-slice({0}, {1}, {2}), dynamic_slice_sizes={{8,32}}", "{devices=[2,4]<=[8]}", "f32[8,32]"),
    ("dynamic_update_slice", [("f32[64,32]", "{devices=[2,4]<=[8]}"), ("f32[8,32]", "{devices=[2,4]<=[8]}"),
                              ("s32[]", "{replicated}"), ("s32[]", "{replicated}")],
     "dynamic-update-slice({0}, {1}, {2}, {3})", "{devices=[2,4]<=[8]}", "f32[64,32]"),
]

_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_slice_collective_kinds_and_bytes_match_xla(name):
    xla, pred, _ = _results()[name]
    assert sorted({k for k, _, _ in pred}) == sorted({k for k, _, _ in xla})
    assert sum(b for _, _, b in pred) == sum(b for _, _, b in xla)


@pytest.mark.parametrize("name", ["k", "v", "trim", "stride", "head", "unsplit", "pad_both", "pad_high",
                                  "pad_interior", "pad_interior_local",
                                  "concat_split", "concat_uneven", "concat_unsplit", "reverse", "dynamic_slice",
                                  "dynamic_update_slice"])
def test_slice_collectives_exact(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_qkv_figures():
    """Hand derivation: 768 columns over 4 shards (192 each), each q/k/v output shard 64 columns; a
    column of the f32[4,128,192] tile is 4*128*4 = 2048 bytes.  k: left and right halo of 128 columns
    -> 2 permutes of 262144 bytes; v: 3 pieces of 64 -> 3 x 131072."""
    res = _results()
    assert res["k"][0] == [("collective-permute", 1, 262144)] * 2
    assert res["v"][0] == [("collective-permute", 1, 131072)] * 3
    assert res["stride"][0] == []
    assert res["concat_split"][0] == [("all-to-all", 4, 98304)] * 2 + [("all-to-all", 4, 196608)]
    assert res["pad_interior"][0] == [("collective-permute", 1, 32), ("collective-permute", 1, 64)]
    assert res["pad_interior_local"][0] == []


def test_slice_halo_pure():
    """slice_halo on the QKV split (no XLA): elements per permute and the shard pairs."""
    assert slice_halo(768, 256, 512, 1, 4) == [(128, [(0, 1), (1, 2), (2, 3)]), (128, [(1, 0), (2, 1), (3, 2)])]
    assert sum(n for n, _ in slice_halo(768, 0, 256, 1, 4)) == 192
    assert slice_halo(768, 0, 768, 2, 4) == []
