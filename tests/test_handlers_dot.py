"""dot handler against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices).

Every case pins operand and result shardings, so XLA has no freedom; hloshard's prediction for the same
shardings (chosen strategy's ``Strategy.collectives`` plus the resharding plans of its operand edges)
must name the same collectives: kind, group size and ring bytes.  Also checked: the predicted replica
groups of the contracting all-reduce are XLA's.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
D0 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"                 # dim 0 over 'data' (mesh axis 0)
M1 = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"       # dim 1 over 'model' (mesh axis 1)
M0 = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"       # dim 0 over 'model'
DOT = "dot({0}, {1}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
BDOT = ("dot({0}, {1}), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
        "rhs_contracting_dims={{1}}")
X, W, Y = "f32[64,512]", "f32[512,256]", "f32[64,256]"

CASES = [
    # contracting dim on 'model' in both operands, result replicated along 'model': all-reduce of the
    # f32[32,256] tile over groups of 4 (ring 2*3/4*32768 = 49152)
    ("contract_ar", [(X, T), (W, M0)], DOT, D0, Y),
    # the same with the result split on 'model' too: GSPMD's raw output still all-reduces the unsplit
    # tile and slices it (no reduce-scatter): 49152
    ("contract_split_out", [(X, T), (W, M0)], DOT, T, Y),
    # both free dims split (lhs rows on data, rhs cols on model): local
    ("free_free", [(X, D0), (W, M1)], DOT, T, Y),
    # contracting dim over all 8 devices, replicated result: all-reduce of f32[64,256] over 8 (114688)
    ("contract_8", [(X, "{devices=[1,8]<=[8]}"), (W, "{devices=[8,1]<=[8]}")], DOT, R, Y),
    # replicated lhs is sliced locally
    ("rep_lhs", [(X, R), (W, M1)], DOT, T, Y),
    # replicated result: gather lhs rows over data (16384) then all-reduce f32[64,256] over model (98304)
    ("contract_to_rep", [(X, T), (W, M0)], DOT, R, Y),
    # lhs split on the contracting dim, rhs replicated, result [2,4]: XLA gathers lhs (49152) rather
    # than all-reducing the partial sums (the same bytes)
    ("gather_lhs", [(X, T), (W, R)], DOT, T, Y),
    # batch dim on data, contracting on model: all-reduce of f32[4,64,256] over model (393216)
    ("batch_contract", [("f32[8,64,512]", "{devices=[2,1,4]<=[8]}"), ("f32[8,512,256]", "{devices=[2,4,1]<=[8]}")],
     BDOT, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[8,64,256]"),
    # result in another device order: the all-reduce in the natural order, then a collective-permute
    # of the f32[32,64] tile (8192)
    ("other_order", [(X, T), (W, M0)], DOT, "{devices=[2,4]<=[4,2]T(1,0)}", Y),
    # contracting on model, result rows over all 8 devices: all-reduce (98304) then a local slice
    ("contract_then_slice", [(X, M1), (W, M0)], DOT, "{devices=[8,1]<=[8]}", Y),
    # lhs in another device order (rows over model, columns over data): XLA permutes it into the order
    # the contraction needs (16384) and all-reduces (49152)
    ("lhs_other_order", [(X, "{devices=[2,4]<=[4,2]T(1,0)}"), (W, M0)], DOT, D0, Y),
    # batch on data in both, lhs rows on model, rhs columns on model: the result keeps lhs rows on model,
    # so rhs is gathered over model (3/4 * f32[4,512,256])
    ("batch_2d", [("f32[8,64,512]", "{devices=[2,4,1]<=[8]}"), ("f32[8,512,256]", "{devices=[2,1,4]<=[8]}")], BDOT,
     "{devices=[2,4,1]<=[8]}", "f32[8,64,256]"),
    # the Llama weight-gradient pattern: contracting dims {0,1} with dim 0 (size 2) split 8 ways (padded:
    # 6 devices hold an empty tile): all-reduce of the f32[32,48] result over all 8 (2*7/8*6144)
    ("contract_padded", [("f32[2,64,32]", "{devices=[8,1,1]<=[8]}"), ("f32[2,64,48]", "{devices=[8,1,1]<=[8]}")],
     "dot({0}, {1}), lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}", R, "f32[32,48]"),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_dot_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_dot_expected_figures():
    """The XLA figures the cases document (hand derivation in the comments above)."""
    res = _results()
    assert res["contract_ar"][0] == [("all-reduce", 4, 49152)]
    assert res["contract_split_out"][0] == [("all-reduce", 4, 49152)]
    assert res["free_free"][0] == []
    assert res["contract_8"][0] == [("all-reduce", 8, 114688)]
    assert res["contract_to_rep"][0] == [("all-gather", 2, 16384), ("all-reduce", 4, 98304)]
    assert res["contract_padded"][0] == [("all-reduce", 8, 10752)]


def test_dot_replica_groups_match_xla():
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests.handler_harness import case_module, predicted_collectives

    _, _, raw = _results()["contract_ar"]
    pred = predicted_collectives(parse_module(case_module(CASES)), DeviceMesh.parse("2x4"))["contract_ar"]
    assert [sorted(sorted(g) for g in c.replica_groups) for c in pred] == [c["replica_groups"] for c in raw]
