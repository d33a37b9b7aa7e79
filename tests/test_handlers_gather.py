"""gather and scatter handlers against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices): an
embedding lookup from a table split on its hidden dim is local; from a table split on its vocabulary
(the indexed dim) XLA gathers the rows each device holds and all-reduces the output; a scatter-add of
split updates into a replicated table all-reduces the table.  Known gap, not among these cases: with
the result split on the window dim too, XLA gathers the updates' window dim and all-reduces the whole
table before slicing, where hloshard gathers the updates' scatter dim (fewer bytes than XLA moves).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
D0 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"              # dim 0 over data

PRELUDE = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
GATHER = ("gather({0}, {1}), offset_dims={{2}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, "
          "index_vector_dim=2, slice_sizes={{1,256}}")
HIDDEN = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
VOCAB = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
SCATTER = ("scatter({0}, {1}, {2}), update_window_dims={{1}}, inserted_window_dims={{0}}, "
           "scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add")
CASES = [
    # scatter-add of replicated updates into a table split on its rows: each device applies those in
    # its rows, nothing moves
    ("scatter_rows", [("f32[1000,256]", VOCAB), ("s32[16,1]", "{replicated}"), ("f32[16,256]", "{replicated}")],
     SCATTER, VOCAB, "f32[1000,256]"),
    ("scatter_hidden", [("f32[1000,256]", HIDDEN), ("s32[16,1]", "{replicated}"), ("f32[16,256]", HIDDEN)],
     SCATTER, HIDDEN, "f32[1000,256]"),
    # scatter-add of updates split 8 ways on their scatter dim into a replicated table (the MaxText
    # embedding gradient): local scatter, all-reduce of the whole f32[1000,256] table (2*7/8*1024000)
    ("scatter_parallel", [("f32[1000,256]", "{replicated}"), ("s32[64,1]", "{devices=[8,1]<=[8]}"),
                          ("f32[64,256]", "{devices=[8,1]<=[8]}")], SCATTER, "{replicated}", "f32[1000,256]"),
    ("embed_hidden", [("f32[1000,256]", HIDDEN), ("s32[16,8]", D0)], GATHER, "{devices=[2,1,4]<=[8]}",
     "f32[16,8,256]"),
    # masked local gather, all-reduce of the f32[8,8,256] output tile over model (2*3/4*65536)
    ("embed_vocab", [("f32[1000,256]", VOCAB), ("s32[16,8]", D0)], GATHER,
     "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[16,8,256]"),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES, PRELUDE))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_gather_expected_figures():
    res = _results()
    assert res["embed_hidden"][0] == []
    assert res["embed_vocab"][0] == [("all-reduce", 4, 98304)]
    assert res["scatter_parallel"][0] == [("all-reduce", 8, 1792000)]
