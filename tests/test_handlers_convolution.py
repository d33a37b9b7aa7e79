"""convolution handler against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices):
batch and output-feature splits are local, an input-feature split all-reduces the output tile, and a
spatial split exchanges halos (one row each way for a 3x3 window with padding 1, as for a slice).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

CONV = "convolution({0}, {1}), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f"
CONV_S2 = "convolution({0}, {1}), window={{size=3x3 stride=2x2 pad=0_1x0_1}}, dim_labels=b01f_01io->b01f"
X, W, Y = "f32[16,32,32,64]", "f32[3,3,64,128]", "f32[16,32,32,128]"
BATCH = "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"        # batch over data
BATCH_OUT = "{devices=[2,1,1,4]<=[8]}"                              # batch over data, features over model
W_OUT = "{devices=[1,1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"  # kernel output features over model
W_IN = "{devices=[1,1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"   # kernel input features over model
ROWS = "{devices=[2,4,1,1]<=[8]}"                                   # batch over data, rows over model
R = "{replicated}"
WG = "convolution({0}, {1}), window={{size=32x32 pad=1_1x1_1}}, dim_labels=f01b_i01o->01bf"
XG, DY, KG = "f32[16,32,32,192]", "f32[16,32,32,64]", "f32[3,3,192,64]"
H8 = "{devices=[1,8,1,1]<=[8]}"                                     # rows over every device
HW = "{devices=[1,2,4,1]<=[8]}"                                     # rows over data, columns over model
BD = "convolution({{0}}, {{1}}), window={{{{size={} lhs_dilate=2x2}}}}, dim_labels=b01f_01oi->b01f"
GY, GX = "f32[8,16,16,48]", "f32[8,32,32,24]"

CASES = [
    ("conv_batch_out", [(X, BATCH), (W, W_OUT)], CONV, BATCH_OUT, Y),
    # input features split: all-reduce of the f32[8,32,32,128] output tile over model (2*3/4*4 MiB)
    ("conv_in_features", [(X, BATCH_OUT), (W, W_IN)], CONV, BATCH, Y),
    # rows split 4 ways (8 rows per shard): one halo row each way, f32[8,1,32,64] = 65536 bytes each
    ("conv_rows", [(X, ROWS), (W, R)], CONV, ROWS, Y),
    # stride 2 with padding 0_1: shard i (8 input rows) produces 4 output rows reading rows 8i..8i+8:
    # one halo row from the right neighbour (the last shard reads padding)
    ("conv_rows_stride2", [(X, ROWS), (W, R)], CONV_S2, ROWS, "f32[16,16,16,128]"),
    ("conv_replicated_kernel", [(X, BATCH), (W, R)], CONV, BATCH_OUT, Y),
    # kernel gradients (the window is the activation's size, the batch contracted): activations and output
    # gradients split alike on a spatial dim -- XLA exchanges lhs halos (one row each way: f32[16,1,32,192])
    # and all-reduces the whole f32[3,3,192,64] over every device (role "w")
    ("wg_h8", [(XG, H8), (DY, H8)], WG, R, KG),
    # split on H over data and W over model: rows of the lhs tile, then columns of the tile widened by them
    ("wg_h2x4", [(XG, HW), (DY, HW)], WG, R, KG),
    # the result split on its output features: the same, then a local slice of the all-reduced kernel gradient
    ("wg_h8_out", [(XG, H8), (DY, H8)], WG, "{devices=[1,1,1,8]<=[8]}", KG),
    # the output gradient split on its batch: all-to-all to the activations' spatial split first
    ("wg_h8_misal", [(XG, H8), (DY, "{devices=[8,1,1,1]<=[8]}")], WG, R, KG),
    # new user 34 F12: images batch over data, output gradient batch over all 8 devices (contracting splits of
    # different part counts): XLA gathers both rather than slicing the images further
    ("wg_mismatched", [("f32[16,32,32,3]", BATCH), (DY, "{devices=[8,1,1,1]<=[8]}")], WG, R, "f32[3,3,3,64]"),
    # input features split in the activations only (new user 34's Megatron U-Net conv_general_dilated.40): with the
    # kernel split on its output features XLA gathers the activations (3/4 x 6 MiB); with the kernel replicated and
    # the result replicated over model it slices the kernel and all-reduces the result tile (2*3/4 x 2 MiB)
    ("fwd_one_sided", [("f32[16,32,32,192]", BATCH_OUT), ("f32[3,3,192,64]", W_OUT)], CONV, BATCH_OUT,
     "f32[16,32,32,64]"),
    ("fwd_one_sided_rep", [("f32[16,32,32,192]", BATCH_OUT), ("f32[3,3,192,64]", R)], CONV, BATCH,
     "f32[16,32,32,64]"),
    # activations split on their rows, the kernel on its input features: the kernel gathered, the rows' halos
    ("fwd_rows_kernel_in", [("f32[16,32,32,64]", H8), ("f32[3,3,64,64]", "{devices=[1,1,8,1]<=[8]}")], CONV, H8,
     "f32[16,32,32,64]"),
    # backward-data convolutions of stride-2 convolutions (input dilation 2) with the rows split: the base-dilated
    # windowed-input halo -- none for a 1x1, one row of f32[8,1,16,48] (24,576 B) for a 3x3 padded 2_1, one row each
    # way for a 4x4 padded 2_2
    ("bd1x1", [(GY, H8), ("f32[1,1,24,48]", R)], BD.format("1x1 pad=0_1x0_1"), H8, GX),
    ("bd3x3", [(GY, H8), ("f32[3,3,24,48]", R)], BD.format("3x3 pad=2_1x2_1"), H8, GX),
    ("bd3x3_2x4", [(GY, "{devices=[2,4,1,1]<=[8]}"), ("f32[3,3,24,48]", R)], BD.format("3x3 pad=2_1x2_1"),
     "{devices=[2,4,1,1]<=[8]}", GX),
    ("bd4x4", [(GY, H8), ("f32[4,4,24,48]", R)], BD.format("4x4 pad=2_2x2_2"), H8, GX),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_convolution_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_convolution_expected_figures():
    res = _results()
    assert res["conv_in_features"][0] == [("all-reduce", 4, 6291456)]
    assert res["conv_rows"][0] == [("collective-permute", 1, 65536)] * 2


def test_kernel_gradient_expected_figures():
    """XLA's figures (ring bytes per device) for the kernel gradients: the lhs halo rows are 16*32*192*4 =
    393,216 B; 2x4: 16*8*192*4 = 98,304 B rows, then columns of the 18-row tile, 16*18*192*4 = 221,184 B; the
    all-reduce 2*(7/8)*442,368 B; F12's mismatched splits all-gather both operands (3,768,320 B in all)."""
    res = _results()
    cp = "collective-permute"
    assert res["wg_h8"][0] == [("all-reduce", 8, 774144), (cp, 1, 393216), (cp, 1, 393216)]
    assert res["wg_h2x4"][0] == [("all-reduce", 8, 774144), (cp, 1, 98304), (cp, 1, 98304), (cp, 1, 221184),
                                 (cp, 1, 221184)]
    assert sum(b for _, _, b in res["wg_mismatched"][0]) == 3768320
    assert res["fwd_one_sided"][0] == [("all-gather", 4, 4718592)]
    assert res["fwd_one_sided_rep"][0] == [("all-reduce", 4, 3145728)]
    assert res["bd1x1"][0] == []
    assert res["bd3x3"][0] == [("collective-permute", 1, 24576)]
