"""transpose handler against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices).

Every case pins operand and result shardings (and metadata op_name = its name).  What XLA does
(measured here): a result laid out as the operand's tile assignment permuted like the data costs
nothing (also for partially replicated and uneven layouts, and for layouts the 2x4 mesh's axes cannot
express); any other result layout makes XLA reshard the operand to the inverse-permuted result layout
first: all-to-alls for a split moved to another dim, a collective-permute for tiles on other devices,
all-gathers for a replicated result.  hloshard must predict the same kinds, group sizes, ring bytes and
replica groups.
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"             # f32[64,32]: tiles of f32[32,8] (1024 B)
R = "{replicated}"
T3 = "{devices=[2,4,1]<=[8]}"          # f32[8,16,32]: tiles of f32[4,4,32] (2048 B)
TR = "transpose({0}), dimensions={{1,0}}"
T201 = "transpose({0}), dimensions={{2,0,1}}"

CASES = [
    # the tile assignment transposed with the data: local
    ("t_local", [("f32[64,32]", T)], TR, "{devices=[4,2]<=[2,4]T(1,0)}", "f32[32,64]"),
    # the same tile assignment kept for the transposed shape: XLA reshards the operand to the
    # inverse-permuted result layout (dim 0 over model, dim 1 over data): an all-to-all over device
    # pairs (1/2*1024 = 512), then a collective-permute of the 1024 B tile
    ("t_same_tile", [("f32[64,32]", T)], TR, T, "f32[32,64]"),
    # replicated result: the operand is gathered, over model (3/4*4096 = 3072) then data (1/2*8192)
    ("t_to_rep", [("f32[64,32]", T)], TR, R, "f32[32,64]"),
    # partially replicated: dim 0 on data becomes dim 1 on data: local
    ("t_partial", [("f32[64,32]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")], TR,
     "{devices=[1,2,4]<=[8] last_tile_dim_replicate}", "f32[32,64]"),
    # the data split kept on dim 0 of the result: an all-to-all over data of the f32[32,32] tile
    # (1/2*4096 = 2048)
    ("t_partial_move", [("f32[64,32]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")], TR,
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "f32[32,64]"),
    # 3-D permutation with the tile assignment permuted alike: local
    ("t3_local", [("f32[8,16,32]", T3)], T201, "{devices=[1,2,4]<=[8]}", "f32[32,8,16]"),
    # 3-D, result keeps the operand's [2,4,1]: both splits move: all-to-all over data (1/2*2048 = 1024)
    # and over model (3/4*2048 = 1536)
    ("t3_move", [("f32[8,16,32]", T3)], T201, "{devices=[2,4,1]<=[8]}", "f32[32,8,16]"),
    # swap of the two split dims, layout kept: all-to-all over device pairs (1/2*2048 = 1024) and a
    # collective-permute of the tile (2048)
    ("t3_swap", [("f32[8,16,32]", T3)], "transpose({0}), dimensions={{1,0,2}}", "{devices=[2,4,1]<=[8]}",
     "f32[16,8,32]"),
    # replicated operand: every device slices its tile locally
    ("t_rep_in", [("f32[64,32]", R)], TR, T, "f32[32,64]"),
    # a layout the 2x4 mesh's axes do not express (dim 1 over {0,2,4,6}): its transpose is local
    ("t_raw", [("f32[64,32]", "{devices=[2,4]<=[4,2]T(1,0)}")], TR, "{devices=[4,2]<=[8]}", "f32[32,64]"),
    ("t_raw_partial", [("f32[64,32]", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}")], TR,
     "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "f32[32,64]"),
    # a raw result layout (result dim 1 over {0,2,4,6}, pairs replicated) that is not the permuted
    # operand layout: XLA reshards the operand to the inverse-permuted result layout: an all-to-all of
    # the f32[8,16,8] tile (4096 B) in groups {0,2,4,6}, {1,3,5,7}: 3/4*4096 = 3072
    ("t3_raw_move", [("f32[8,16,32]", "{devices=[1,1,4,2]<=[8] last_tile_dim_replicate}")], T201,
     "{devices=[1,4,1,2]<=[8] last_tile_dim_replicate}", "f32[32,8,16]"),
    # 6 rows over 8 devices (uneven, padded), transposed alike: local
    ("t_uneven", [("f32[6,32]", "{devices=[8,1]<=[8]}")], TR, "{devices=[1,8]<=[8]}", "f32[32,6]"),
    # the same, result split on its dim 0: all-to-all over 8 of the padded f32[1,32] tile (7/8*128 = 112)
    ("t_uneven_move", [("f32[6,32]", "{devices=[8,1]<=[8]}")], TR, "{devices=[8,1]<=[8]}", "f32[32,6]"),
]

_results, _groups, test_transpose_collectives_match_xla, test_transpose_replica_groups_match_xla = oracle_cases(CASES)


def test_transpose_expected_figures():
    """XLA's figures as derived by hand in the comments above (ring bytes per device)."""
    res = _results()
    for name in ("t_local", "t_partial", "t3_local", "t_rep_in", "t_raw", "t_raw_partial", "t_uneven"):
        assert res[name][0] == [], name
    assert res["t_same_tile"][0] == [("all-to-all", 2, 512), ("collective-permute", 1, 1024)]
    assert res["t_to_rep"][0] == [("all-gather", 2, 4096), ("all-gather", 4, 3072)]
    assert res["t_partial_move"][0] == [("all-to-all", 2, 2048)]
    assert res["t3_move"][0] == [("all-to-all", 2, 1024), ("all-to-all", 4, 1536)]
    assert res["t3_swap"][0] == [("all-to-all", 2, 1024), ("collective-permute", 1, 2048)]
    assert res["t_uneven_move"][0] == [("all-to-all", 8, 112)]
    assert res["t3_raw_move"][0] == [("all-to-all", 4, 3072)]
    assert _groups()["t3_raw_move"][0] == [("all-to-all", [[0, 2, 4, 6], [1, 3, 5, 7]])]
    assert _groups()["t3_move"][0] == [("all-to-all", [[0, 1, 2, 3], [4, 5, 6, 7]]),
                                       ("all-to-all", [[0, 4], [1, 5], [2, 6], [3, 7]])]
