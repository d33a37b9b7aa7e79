"""sort handler against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices): a split
sort dim is moved to another dim for the local sort and back (all-to-alls); a result unsplit on the sort
dim makes XLA gather the operand first.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
D0 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"              # dim 0 over data

PRELUDE = ("lt {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
           "  ROOT s = pred[] compare(x, y), direction=LT\n}\n\n")
SORT = "sort({0}), dimensions={{1}}, to_apply=lt"
CASES = [
    # the f32[8,256] tile's split moves to dim 0 and back: 2 all-to-alls of 3/4*8192
    ("sort_split", [("f32[16,1024]", T)], SORT, T, "f32[16,1024]"),
    # result replicated along model: all-gather of the operand over model (3/4*32768)
    ("sort_gathered", [("f32[16,1024]", T)], SORT, D0, "f32[16,1024]"),
    ("sort_local", [("f32[16,1024]", D0)], SORT, D0, "f32[16,1024]"),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES, PRELUDE))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_sort_expected_figures():
    res = _results()
    assert res["sort_split"][0] == [("all-to-all", 4, 6144)] * 2
    assert res["sort_gathered"][0] == [("all-gather", 4, 24576)]
