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
