"""Depthwise and grouped convolutions against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO,
8 devices, mesh 2x4 = data x model): ``strategy.convolution._group_roles`` (issue 24, new user 36 F1).

A depthwise convolution (``feature_group_count`` = input features: Mamba's causal conv1d, ConvNeXt's 7x7) split on
its channels is partitioned with no collective, as are its input gradient (``b0f_0oi->b0f`` with the reversed
kernel) and its weight gradient (``batch_group_count`` = channels, ``f0b_i0o->0bf``), which all-reduces its kernel
tile over an axis splitting the batch.  A grouped convolution with several input features per group is not
partitioned at all by XLA (both operands gathered, even a batch split).  FITTED: the ``dw_*`` cases (the 1-D
conv1d of new user 36's Mamba step, smaller); HELD_OUT: the ``h_*`` cases, written after the rule was fixed
(a ConvNeXt-style 2-D 7x7 and grouped ones with groups < channels; the first held-out set found the
groups < channels rule, ``h_g8_*``, ``h_mult2`` and ``h_rows_chan`` were written after that one; ``h_rows_chan`` showed
that a group split combines with a spatial one, and the rule was changed to allow it).
"""

from __future__ import annotations

import pytest

from tests.handler_harness import case_results, predicted_collectives

X, W = "f32[8,32,64]", "f32[4,1,64]"
FWD = "convolution({0}, {1}), window={{size=4 pad=3_0}}, dim_labels=b0f_0io->b0f, feature_group_count=64"
BD = "convolution({0}, {1}), window={{size=4 pad=0_3}}, dim_labels=b0f_0oi->b0f, feature_group_count=64"
WG = "convolution({0}, {1}), window={{size=32 pad=3_0}}, dim_labels=f0b_i0o->0bf, batch_group_count=64"
BF = "{devices=[2,1,4]<=[8]}"                                        # batch over data, channels over model
F8 = "{devices=[1,1,8]<=[8]}"                                        # channels over all 8
B = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"              # batch over data only
WM = "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"      # kernel channels over model
RM = "{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"      # reversed kernel's channels over model
R = "{replicated}"
X2, W2 = "f32[2,16,16,64]", "f32[7,7,1,64]"
F2 = "convolution({0}, {1}), window={{size=7x7 pad=3_3x3_3}}, dim_labels=b01f_01io->b01f, feature_group_count=64"
BF4 = "{devices=[2,1,1,4]<=[8]}"
WM4 = "{devices=[1,1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
B4 = "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"
XG, WG3 = "f32[4,8,8,64]", "f32[3,3,16,64]"
GC = "convolution({0}, {1}), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, feature_group_count=4"
XC, WC = "f32[8,64,16]", "f32[3,2,16]"
GC1 = "convolution({0}, {1}), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, feature_group_count=8"

CASES = [
    ("dw_fwd", [(X, BF), (W, WM)], FWD, BF, X),
    ("dw_fwd_repw", [(X, BF), (W, R)], FWD, BF, X),                  # the kernel sliced locally
    ("dw_fwd8", [(X, F8), (W, F8)], FWD, F8, X),
    ("dw_bd", [(X, BF), ("f32[4,64,1]", RM)], BD, BF, X),
    ("dw_wg", [(X, BF), (X, BF)], WG, WM, W),                         # all-reduce of the kernel tile over data
    ("dw_wg8", [(X, F8), (X, F8)], WG, F8, W),
    ("dw_wg_batch8", [(X, "{devices=[8,1,1]<=[8]}"), (X, "{devices=[8,1,1]<=[8]}")], WG, R, W),
    ("h_dw7_fwd", [(X2, BF4), (W2, WM4)], F2, BF4, X2),
    ("h_dw7_rows", [(X2, "{devices=[2,4,1,1]<=[8]}"), (W2, R)], F2, "{devices=[2,4,1,1]<=[8]}", X2),
    ("h_g4_group", [(XG, BF4), (WG3, WM4)], GC, BF4, XG),
    ("h_g4_batch", [(XG, B4), (WG3, R)], GC, B4, XG),
    ("h_g8_rows", [(XC, "{devices=[1,8,1]<=[8]}"), (WC, R)], GC1, "{devices=[1,8,1]<=[8]}", XC),
    ("h_g8_group", [(XC, F8), (WC, F8)], GC1, F8, XC),
    # rows over data, channels over model: the group split with a spatial one, one 3-row halo each way
    ("h_rows_chan", [(X2, "{devices=[1,2,1,4]<=[8]}"), (W2, WM4)], F2, "{devices=[1,2,1,4]<=[8]}", X2),
    # depth multiplier 2 (64 groups, 128 output features), channels over model: no collective
    ("h_mult2", [(X, BF), ("f32[3,1,128]", WM)],
     "convolution({0}, {1}), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, feature_group_count=64", BF,
     "f32[8,32,128]"),
]


@pytest.fixture(scope="module")
def results():
    return case_results(CASES)


@pytest.mark.oracle
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_grouped_convolution_collectives_match_xla(results, name):
    xla, pred, _ = results[name]
    assert pred == xla


@pytest.mark.oracle
def test_grouped_convolution_expected_figures(results):
    """XLA's figures (ring bytes per device): the depthwise forms move nothing but the weight gradient's all-reduce
    of its f32[4,1,16] kernel tile over data (2 x 1/2 x 256 B) or of the whole f32[4,1,64] over 8 devices; the
    grouped 3x3 with 16 features per group gathers its batch over data (1/2 x 64 KiB)."""
    assert results["dw_fwd"][0] == [] and results["dw_bd"][0] == [] and results["h_dw7_fwd"][0] == []
    assert results["dw_wg"][0] == [("all-reduce", 2, 256)]
    assert results["dw_wg_batch8"][0] == [("all-reduce", 8, 1792)]
    assert results["h_g4_batch"][0] == [("all-gather", 2, 32768)]


def test_depthwise_channel_split_is_priced_without_collectives():
    """No XLA: new user 36's repro (a depthwise conv1d, batch over data, channels over model, the kernel's channels
    over model) is priced with no collective and no resharding (before round 36: 198 KiB of all-gathers)."""
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests.handler_harness import case_module

    text = case_module(CASES[:1])
    pred = predicted_collectives(parse_module(text), DeviceMesh.parse("2x4", alpha="0,0", beta="1,1"))
    assert pred.get("dw_fwd", []) == []
    # the grouped conv with 16 features per group keeps no batch split: XLA's gather is priced
    text = case_module([c for c in CASES if c[0] == "h_g4_batch"])
    pred = predicted_collectives(parse_module(text), DeviceMesh.parse("2x4", alpha="0,0", beta="1,1"))
    assert [(c.kind, round(c.ring_bytes)) for c in pred.get("h_g4_batch", [])] == [("all-gather", 32768)]


def test_weight_gradient_expansion_counts_the_groups_of_one_device():
    """XLA CPU expands a batch-grouped convolution after partitioning: the per-device convolution has G / k groups
    (``cost.group_conv.expansion_bytes``; measured on the Mamba weight gradient split 8 ways on its channels: XLA's
    dense ``convolution.2`` temp is 64 groups x the 1 KiB tile)."""
    from hloshard.cost.group_conv import expansion_bytes
    from hloshard.hlo.parser import parse_module
    from tests.handler_harness import case_module

    conv = next(i for c in parse_module(case_module([CASES[4]])).computations for i in c.instructions
                if i.opcode == "convolution")
    assert expansion_bytes(conv, 256) == 2 * 64 * 256                       # unsplit: every group
    assert expansion_bytes(conv, 256, ((), (), (1,)), (2, 4)) == 2 * 16 * 256   # channels over model (4)
    assert expansion_bytes(conv, 256, ((), (), (0, 1)), (2, 4)) == 2 * 8 * 256
