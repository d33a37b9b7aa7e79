"""Resharding uneven (padded) dims against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO,
8 devices): when a dim that does not divide evenly is re-tiled by a gather or a local slice, GSPMD shifts
the misplaced padding with a collective-permute (``ReshardStep`` "uneven dim" permute).  Each case is a
``copy`` from one sharding to another; predicted = the resharding plan of the copy's operand edge.

Known gap, not among these cases: ``f32[10,6]`` from ``[2,4]`` to ``[4,2]`` (XLA: an all-to-all and three
halo permutes, 80 bytes in all; the plan gathers and slices, 240 bytes).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

CASES = [
    # 10 rows in 4 padded tiles of 3 -> 2 tiles of 5: all-gather (1/2*1536) and a one-row shift (256)
    ("rows_4_to_2", [("f32[10,64]", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}")], "copy({0})",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "f32[10,64]"),
    # to replicated: the padding is simply dropped
    ("rows_to_rep", [("f32[10,64]", "{devices=[4,2]<=[8]}")], "copy({0})", "{replicated}", "f32[10,64]"),
    ("rows_to_cols", [("f32[10,64]", "{devices=[8,1]<=[8]}")], "copy({0})", "{devices=[1,8]<=[8]}", "f32[10,64]"),
    ("rows_8_to_4x2", [("f32[12,64]", "{devices=[8,1]<=[8]}")], "copy({0})", "{devices=[4,2]<=[8]}", "f32[12,64]"),
    # a single factor moved between a whole dim and an uneven one: XLA replicates and slices (no all-to-all)
    ("rows10_8_to_4x2", [("f32[10,64]", "{devices=[8,1]<=[8]}")], "copy({0})", "{devices=[4,2]<=[8]}", "f32[10,64]"),
    ("rows_4x2_to_8", [("f32[12,64]", "{devices=[4,2]<=[8]}")], "copy({0})", "{devices=[8,1]<=[8]}", "f32[12,64]"),
    ("rows_8_to_2x4", [("f32[12,8]", "{devices=[8,1]<=[8]}")], "copy({0})", "{devices=[2,4]<=[8]}", "f32[12,8]"),
    ("cols_8_to_2x4", [("f32[64,12]", "{devices=[1,8]<=[8]}")], "copy({0})", "{devices=[2,4]<=[8]}", "f32[64,12]"),
    # 6 rows in 2 tiles of 3 -> 8 tiles of 1: a local slice, but rows 3 and 4 sit one row off (256)
    ("rows_2_to_8", [("f32[6,64]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")], "copy({0})",
     "{devices=[8,1]<=[8]}", "f32[6,64]"),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_uneven_resharding_matches_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_uneven_figures():
    res = _results()
    assert res["rows_4_to_2"][0] == [("all-gather", 2, 768), ("collective-permute", 1, 256)]
    assert res["rows_2_to_8"][0] == [("collective-permute", 1, 256)]
