"""broadcast (and iota) handlers against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO,
8 devices).

Every case pins operand and result shardings (and metadata op_name = its name).  What XLA does
(measured here): the result's split on the operand's dims is the operand's, and any split of the new
(broadcast) dims is free, each device materialising its own tile; when the operand is split on dims the
result does not split, or on other devices, XLA reshards the operand (an all-gather, a
collective-permute) before broadcasting.  The same holds for layouts the 2x4 mesh's axes cannot
express (raw tile assignments).  hloshard must predict the same kinds, group sizes, ring bytes
and replica groups.
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
VEC_D = "{devices=[2,4]<=[8] last_tile_dim_replicate}"              # a vector over data
VEC_M = "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"      # a vector over model
T3 = "{devices=[2,4,1]<=[8]}"
RAW_VEC = "{devices=[4,2]<=[8] last_tile_dim_replicate}"           # a vector over {0,2,4,6} / {1,3,5,7}
BC0 = "broadcast({0}), dimensions={{0}}"

CASES = [
    # new dims replicated, the operand's split kept: local
    ("b_newdims", [("f32[64]", VEC_D)], BC0, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", "f32[64,16,32]"),
    # a new dim split over model: each device builds its own tile: local
    ("b_split_new", [("f32[64]", VEC_D)], BC0, T3, "f32[64,32,16]"),
    # the operand dim lands on result dim 1, split alike: local
    ("b_moved", [("f32[64]", VEC_D)], "broadcast({0}), dimensions={{1}}",
     "{devices=[1,2,4]<=[8] last_tile_dim_replicate}", "f32[32,64]"),
    # replicated result of a vector split 8 ways: all-gather of f32[64] over 8 (7/8*256 = 224)
    ("b_gather", [("f32[64]", "{devices=[8]<=[8]}")], "broadcast({0}), dimensions={{1}}", R, "f32[32,64]"),
    # the vector over model (f32[16] tiles, 64 B), the result's dim 0 over data: XLA permutes the tiles
    # onto the devices that gather them (64) and all-gathers device pairs {0,2}, {1,3}, ... to the f32[32]
    # half over data (1/2*128 = 64)
    ("b_reorder", [("f32[64]", VEC_M)], BC0, T, "f32[64,32]"),
    # a 2-D operand into dims 0 and 2, both splits kept, new dim 1 unsplit: local
    ("b_2d", [("f32[64,32]", T)], "broadcast({0}), dimensions={{0,2}}", "{devices=[2,1,4]<=[8]}", "f32[64,16,32]"),
    # a broadcast that transposes (dimensions={1,0}), the tile assignment transposed alike: local
    ("b_transposed", [("f32[64,32]", T)], "broadcast({0}), dimensions={{1,0}}", "{devices=[4,2]<=[2,4]T(1,0)}",
     "f32[32,64]"),
    # a replicated operand: every device slices what it needs
    ("b_rep_in", [("f32[64]", R)], BC0, T, "f32[64,32]"),
    # a broadcast of a scalar: built locally in any layout
    ("b_scalar", [("f32[]", R)], "broadcast({0}), dimensions={{}}", T, "f32[64,32]"),
    # layouts the 2x4 mesh's axes do not express (a dim over {0,2,4,6}, replicated over pairs): the
    # result keeps the operand's devices on its dim, the new dim replicated or split over the pairs: local
    ("b_raw", [("f32[64]", RAW_VEC)], BC0, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "f32[64,32]"),
    ("b_raw_new", [("f32[64]", RAW_VEC)], BC0, "{devices=[4,2]<=[8]}", "f32[64,32]"),
    # the vector split 8 ways, the result needing it over {0,2,4,6}: XLA gathers device pairs {0,1}, ...
    # from the f32[8] tiles (32 B) to f32[16] (1/2*64 = 32)
    ("b_raw_reshard", [("f32[64]", "{devices=[8]<=[8]}")], BC0, "{devices=[4,2]<=[8]}", "f32[64,32]"),
    # a transposing broadcast of a raw 2-D layout, the result's tile assignment matching: local
    ("b_raw_trans", [("f32[64,32]", "{devices=[2,4]<=[4,2]T(1,0)}")], "broadcast({0}), dimensions={{2,0}}",
     "{devices=[4,1,2]<=[8]}", "f32[32,16,64]"),
    # an iota is produced in any layout locally
    ("iota_t", [], "iota(), iota_dimension=1", "{devices=[8,1]<=[8]}", "s32[64,32]"),
]

_results, _groups, test_broadcast_collectives_match_xla, test_broadcast_replica_groups_match_xla = oracle_cases(CASES)


def test_broadcast_expected_figures():
    """XLA's figures as derived by hand in the comments above (ring bytes per device)."""
    res = _results()
    for name in ("b_newdims", "b_split_new", "b_moved", "b_2d", "b_transposed", "b_rep_in", "iota_t", "b_scalar",
                 "b_raw", "b_raw_new", "b_raw_trans"):
        assert res[name][0] == [], name
    assert res["b_gather"][0] == [("all-gather", 8, 224)]
    assert res["b_reorder"][0] == [("all-gather", 2, 64), ("collective-permute", 1, 64)]
    assert res["b_raw_reshard"][0] == [("all-gather", 2, 32)]
    assert _groups()["b_gather"][0] == [("all-gather", [[0, 1, 2, 3, 4, 5, 6, 7]])]
    assert _groups()["b_raw_reshard"][0] == [("all-gather", [[0, 1], [2, 3], [4, 5], [6, 7]])]
