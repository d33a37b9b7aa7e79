"""reduce-window and select-and-scatter handlers against XLA's SPMD partitioner (GSPMD, raw
after-spmd-partitioning HLO, 8 devices).

Every case pins operand and result shardings (and metadata op_name = its name).  What XLA does
(measured here): a window over a split dim keeps the split and exchanges halos with the neighbours
(collective-permutes); a window over unsplit dims, or one whose windows do not overlap the shard
boundaries (stride = size), is local; with several split window dims the halos are exchanged dim after
dim, each on the tile already widened by the dims before it (also for layouts the 2x4 mesh's axes cannot
express); a result replicated on the window dim makes XLA gather the operand first.  Select-and-scatter (max-pool gradient) exchanges halos of both the
operand and the source.  hloshard must predict the same kinds and ring bytes.
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"             # f32[64,256]: tiles of f32[32,64] (a column 128 B, a row 256 B)
R = "{replicated}"
RAW = "{devices=[2,4]<=[4,2]T(1,0)}"    # dim 0 over {0,1}, dim 1 over {0,2,4,6}: not 2x4 mesh axes
A = "f32[64,256]"
PRELUDE = ("add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
           "mx {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] maximum(x, y)\n}\n\n"
           "ge {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = pred[] compare(x, y), direction=GE\n}\n\n"
           "add2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n"
           "  d = f32[] parameter(3)\n  x = f32[] add(a, c)\n  y = f32[] add(b, d)\n  ROOT r = (f32[], f32[]) tuple(x, y)\n}\n\n"
           "addi {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\n\n"
           "gei {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = pred[] compare(x, y), direction=GE\n}\n\n")


def _rw(window: str, reducer: str = "add") -> str:
    return "reduce-window({0}, {1}), window={{" + window + "}}, to_apply=" + reducer


def _sas(window: str) -> str:
    return "select-and-scatter({0}, {1}, {2}), window={{" + window + "}}, select=ge, scatter=add"


CASES = [
    # the window over the unsplit dim 2: local
    ("w_unsplit", [("f32[64,256,16]", "{devices=[2,4,1]<=[8]}"), ("f32[]", R)], _rw("size=1x1x3 pad=0_0x0_0x1_1"),
     "{devices=[2,4,1]<=[8]}", "f32[64,256,16]"),
    # size 3 padded 2 on the left: every shard needs the last 2 columns of its left neighbour (256 B)
    ("w_halo_left", [(A, T), ("f32[]", R)], _rw("size=1x3 pad=0_0x2_0"), T, A),
    # a valid (unpadded) size-5 window, 252 outputs over 4 shards of 63: shard i reads columns
    # [63i, 63i+67): left halos of 1, 2, 3 columns and right halos of 3, 2, 1: XLA exchanges the largest,
    # 3 columns each way (384 B each)
    ("w_valid", [(A, T), ("f32[]", R)], _rw("size=1x5"), T, "f32[64,252]"),
    # non-overlapping 2-wide max-pool: local
    ("w_stride", [(A, T), ("f32[]", R)], _rw("size=1x2 stride=1x2", "mx"), T, "f32[64,128]"),
    # size 3 stride 2 padded 1 on the left: one column from the left neighbour (128 B)
    ("w_stride_over", [(A, T), ("f32[]", R)], _rw("size=1x3 stride=1x2 pad=0_0x1_0", "mx"), T, "f32[64,128]"),
    # 3x3 padded on both split dims: rows first (f32[1,64] = 256 B each way), then columns of the tile
    # widened to 34 rows (f32[34,1] = 136 B each way)
    ("w_both", [(A, T), ("f32[]", R)], _rw("size=3x3 pad=1_1x1_1", "mx"), T, A),
    # 3x5 valid window: rows (256 B each way), then columns of 3 on a tile widened to the 33 rows its
    # 31 output rows read (f32[33,3] = 396 B each way)
    ("w_2d_valid", [(A, T), ("f32[]", R)], _rw("size=3x5", "mx"), T, "f32[62,252]"),
    # 3x3x3 over a [2,2,2] split (a layout the 2x4 mesh's axes only express with sub-axes; tiles of
    # f32[8,32,128]): rows of f32[1,32,128] (16384 B each way), then f32[10,1,128] (5120 B), then
    # f32[10,34,1] (1360 B)
    ("w_3d", [("f32[16,64,256]", "{devices=[2,2,2]<=[8]}"), ("f32[]", R)], _rw("size=3x3x3 pad=1_1x1_1x1_1", "mx"),
     "{devices=[2,2,2]<=[8]}", "f32[16,64,256]"),
    # a raw layout (dim 1 over {0,2,4,6}): the same halo of one column each way (128 B)
    ("w_raw", [(A, RAW), ("f32[]", R)], _rw("size=1x3 pad=0_0x1_1"), RAW, A),
    # a raw layout with the window on an unsplit dim: local
    ("w_raw_unsplit", [("f32[64,256,16]", "{devices=[2,4,1]<=[4,2]T(1,0)}"), ("f32[]", R)],
     _rw("size=1x1x3 pad=0_0x0_0x1_1"), "{devices=[2,4,1]<=[4,2]T(1,0)}", "f32[64,256,16]"),
    # a variadic reduce-window: the halo of each operand, one column each way (4 x 128 B)
    ("w_tuple", [(A, T), (A, T), ("f32[]", R), ("f32[]", R)],
     "reduce-window({0}, {1}, {2}, {3}), window={{size=1x3 pad=0_0x1_1}}, to_apply=add2", "{%s, %s}" % (T, T),
     "(f32[64,256], f32[64,256])"),
    # 250 columns over 4 (tiles of 63, the last one 61): one column each way (128 B)
    ("w_uneven", [("f32[64,250]", T), ("f32[]", R)], _rw("size=1x3 pad=0_0x1_1"), T, "f32[64,250]"),
    # replicated result: the operand is gathered first, no halo: over model to f32[32,256]
    # (3/4*32768 = 24576), then over data to f32[64,256] (1/2*65536 = 32768)
    ("w_to_rep", [(A, T), ("f32[]", R)], _rw("size=1x3 pad=0_0x1_1"), R, A),
    # max-pool gradient with non-overlapping windows: local
    ("sas", [(A, T), ("f32[64,128]", T), ("f32[]", R)], _sas("size=1x2 stride=1x2"), T, A),
    # size 3 stride 2 padded 1 on the left (operand tile 64 columns, source tile 32): source right halo
    # of 1 column (f32[32,1] = 128 B), operand left halo of 1 (128 B) and right halo of 2 (256 B)
    ("sas_halo", [(A, T), ("f32[64,128]", T), ("f32[]", R)], _sas("size=1x3 stride=1x2 pad=0_0x1_0"), T, A),
    # windows over the unsplit dim only: local
    ("sas_unsplit", [(A, "{devices=[8,1]<=[8]}"), ("f32[64,128]", "{devices=[8,1]<=[8]}"), ("f32[]", R)],
     _sas("size=1x2 stride=1x2"), "{devices=[8,1]<=[8]}", A),
    # 3x3 stride 2 padded 1 on the left of both split dims (source f32[32,128], tiles [16,32]): dim 0
    # first: source right halo 1 row (f32[1,32] = 128 B), operand left 1 row (256 B) and right 2 rows
    # (512 B); then dim 1 on the widened tiles (source 17 rows: 68 B; operand 35 rows: 140 B and 280 B)
    ("sas_2d", [(A, T), ("f32[32,128]", T), ("f32[]", R)], _sas("size=3x3 stride=2x2 pad=1_0x1_0"), T, A),
    # s32 (XLA's handler pads with -inf / +inf, so only f32 and bf16 are partitioned): XLA replicates
    # the operand (over model 3/4*32768 = 24576, over data 1/2*65536 = 32768) and the source (12288,
    # 16384)
    ("sas_s32", [("s32[64,256]", T), ("s32[64,128]", T), ("s32[]", R)],
     "select-and-scatter({0}, {1}, {2}), window={{size=1x3 stride=1x2 pad=0_0x1_0}}, select=gei, scatter=addi", T,
     "s32[64,256]"),
    # windows of 4 with stride 4: local
    ("sas_wide", [(A, T), ("f32[64,64]", T), ("f32[]", R)], _sas("size=1x4 stride=1x4"), T, A),
    # stride 1, size 3, no padding (source f32[64,254], tiles of 64 columns): shard i's windows start at
    # 64i - 2, so a source left halo of 2 columns and operand halos of 2 columns each way (256 B each)
    ("sas_overlap", [(A, T), ("f32[64,254]", T), ("f32[]", R)], _sas("size=1x3"), T, A),
    # halos wider than a shard (the U-Net's average-pool gradient, new user 34 F1): 33 columns over 8 shards of
    # 5, 32 outputs (4 per shard), a size-2 window: shard i reads [4i, 4i+5), left halos up to 7 columns (on the
    # padded shards): XLA's ExchangeHalo takes 5 columns from the neighbour and 2 from the next one (64 B a column)
    ("w_far", [("f32[16,33]", "{devices=[1,8]<=[8]}"), ("f32[]", R)], _rw("size=1x2"), "{devices=[1,8]<=[8]}",
     "f32[16,32]"),
]

_results, _groups, test_window_collectives_match_xla, test_window_device_pairs_and_groups_match_xla = oracle_cases(CASES, PRELUDE)


def test_window_expected_figures():
    """XLA's figures as derived by hand in the comments above (ring bytes per device)."""
    res = _results()
    for name in ("w_unsplit", "w_stride", "sas", "sas_unsplit", "sas_wide", "w_raw_unsplit"):
        assert res[name][0] == [], name
    cp = "collective-permute"
    assert res["w_halo_left"][0] == [(cp, 1, 256)]
    assert res["w_valid"][0] == [(cp, 1, 384)] * 2
    assert res["w_stride_over"][0] == [(cp, 1, 128)]
    assert res["w_both"][0] == [(cp, 1, 136)] * 2 + [(cp, 1, 256)] * 2
    assert res["w_2d_valid"][0] == [(cp, 1, 256)] * 2 + [(cp, 1, 396)] * 2
    assert res["w_3d"][0] == [(cp, 1, 1360)] * 2 + [(cp, 1, 5120)] * 2 + [(cp, 1, 16384)] * 2
    assert res["w_raw"][0] == [(cp, 1, 128)] * 2
    assert res["w_tuple"][0] == [(cp, 1, 128)] * 4
    assert res["w_uneven"][0] == [(cp, 1, 128)] * 2
    assert res["w_to_rep"][0] == [("all-gather", 2, 32768), ("all-gather", 4, 24576)]
    assert res["w_far"][0] == [(cp, 1, 128), (cp, 1, 320)]
    assert res["sas_halo"][0] == [(cp, 1, 128), (cp, 1, 128), (cp, 1, 256)]
    assert res["sas_2d"][0] == [(cp, 1, 68), (cp, 1, 128), (cp, 1, 140), (cp, 1, 256), (cp, 1, 280), (cp, 1, 512)]
    assert res["sas_overlap"][0] == [(cp, 1, 256)] * 3
    assert res["sas_s32"][0] == [("all-gather", 2, 16384), ("all-gather", 2, 32768), ("all-gather", 4, 12288),
                                 ("all-gather", 4, 24576)]
