"""A gather from a table split on its indexed dim only (an embedding table split over its vocabulary) into a
written result that does not come out of that table layout as it is: XLA keeps the table split, gathers the rows
each device holds, all-reduces the result tile over the table's axes and reshards it to the written layout
(``strategy.gather_scatter.gather_preference``), where re-splitting the table to the axes the result leaves idle
was priced.  Raw after-spmd-partitioning HLO, 8 devices, jaxlib 0.10.2.

Mixtral's token-embedding lookup (new user 28's F4 / F7, ``gather.1`` of ``mixtral_hand_solved.hlo``): table
f32[1024,128] over ``model``, result f32[8,64,128] over ``data`` (dim 0) and ``model``'s minor half (dim 2):
XLA moves 327,936 B (all-reduce of f32[8,64,64] over 4, all-to-all, collective-permute, the pred mask
all-gathered), where 131,072 B was priced.  The rule was fitted on the cases of ``FITTED`` (the last two of them
first held out, failed, and the rule re-fitted); ``HELD_OUT`` were measured after it was written.
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

PRELUDE = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
G = ("gather({0}, {1}), offset_dims={{2}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, "
     "index_vector_dim=2, slice_sizes={{1,128}}")
TB, IX, O = "f32[1024,128]", "s32[8,64,1]", "f32[8,64,128]"
R = "{replicated}"
VOCAB = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"    # the table's vocabulary over 'model'
HAND = "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}"  # dim 0 over data, dim 2 over model's minor half
FITTED = [
    ("hand", [(TB, VOCAB), (IX, R)], G, HAND, O),
    ("hand_ix_d0", [(TB, VOCAB), (IX, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}")], G, HAND, O),
    ("rep", [(TB, VOCAB), (IX, R)], G, R, O),
    ("d0", [(TB, VOCAB), (IX, R)], G, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", O),
    ("lo2", [(TB, VOCAB), (IX, R)], G, "{devices=[1,1,2,4]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}", O),
    ("m2", [(TB, VOCAB), (IX, R)], G, "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", O),
    ("lo0_hi2", [(TB, VOCAB), (IX, R)], G, "{devices=[2,1,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}", O),
    ("d1", [(TB, VOCAB), (IX, R)], G, "{devices=[1,2,1,4]<=[8] last_tile_dim_replicate}", O),
    ("lo1", [(TB, VOCAB), (IX, R)], G, "{devices=[1,2,1,4]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}", O),
    ("d0_lo1", [(TB, VOCAB), (IX, R)], G, "{devices=[2,2,1,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}", O),
    ("v_data", [(TB, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (IX, R)], G,
     "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", O),
    ("v_data_m0", [(TB, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (IX, R)], G,
     "{devices=[4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", O),
]
# first held out, then fitted on: the free axes are shared out over two written dims, minor dims first
FITTED.append(("vdata_m1_d2", [("f32[512,64]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
                               ("s32[16,8,1]", R)],
               G.replace("slice_sizes={{1,128}}", "slice_sizes={{1,64}}"), "{devices=[1,4,2]<=[2,4]T(1,0)}",
               "f32[16,8,64]"))
G2 = ("gather({0}, {1}), offset_dims={{2}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, "
      "index_vector_dim=2, slice_sizes={{1,64}}")
TB2, IX2, O2 = "f32[512,64]", "s32[16,8,1]", "f32[16,8,64]"
HELD_OUT = [
    ("h_m0_d2", [(TB2, VOCAB), (IX2, R)], G2, "{devices=[4,1,2]<=[2,4]T(1,0)}", O2),
    ("h_v8_d0", [(TB2, "{devices=[8,1]<=[8]}"), (IX2, R)], G2, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", O2),
    ("h_d0_m2", [(TB2, VOCAB), (IX2, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}")], G2,
     "{devices=[2,1,4]<=[8]}", O2),
    ("h_three", [(TB2, VOCAB), (IX2, R)], G2, "{devices=[2,2,2]<=[8]}", O2),
    ("h_vdata_d0_m1", [(TB2, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (IX2, R)], G2,
     "{devices=[2,4,1]<=[8]}", O2),
    ("h_vhi_m1_d2", [(TB2, "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"), (IX2, R)], G2,
     "{devices=[1,4,2]<=[2,4]T(1,0)}", O2),
    ("h_vlo_d0_hi1", [(TB2, "{devices=[2,1,4]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}"), (IX2, R)], G2,
     "{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}", O2),
    ("h_m1", [(TB2, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (IX2, R)], G2,
     "{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", O2),
]
# held out at first too, failed (no all-to-all when every index dim gets its written parts), rule re-fitted
FITTED.append(("vhi_d0_hi2", [(TB2, "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"), (IX2, R)], G2,
               "{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}", O2))
# the table's hidden (window) dim split too (Mixtral's table under ``cost --complete xla``, ``{devices=[4,2]...}``):
# kept on the result's offset dim (fitted on these, measured before the rule was extended)
TW = "{devices=[4,2]<=[2,4]T(1,0)}"
WINDOW = [
    ("w_rep", [(TB, TW), (IX, R)], G, R, O),
    ("w_d2", [(TB, TW), (IX, R)], G, "{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}", O),
    ("w_d0", [(TB, TW), (IX, R)], G, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", O),
]
#: F4's own ``gather.1``: XLA also collective-permutes the indices (1,024 B), not priced (a known gap)
W_F4 = ("w_f4", [(TB, TW), (IX, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}")], G, "{devices=[2,1,4]<=[8]}", O)
CASES = FITTED + WINDOW + HELD_OUT

_results, _groups, test_gather_kept_table_matches_xla, test_gather_kept_table_groups_match_xla = \
    oracle_cases(CASES, PRELUDE)


def test_gather_f4_within_the_index_permute():
    from tests.handler_harness import case_results

    xla, pred, _ = case_results([W_F4], PRELUDE)["w_f4"]
    assert sum(r[2] for r in xla) == 231424                      # new user 28's F4 figure for gather.1
    assert sorted(set(xla) - set(pred)) == [("collective-permute", 1, 1024)]
    assert sum(r[2] for r in pred) == 231424 - 1024               # before: 163,840


def test_gather_kept_table_figures():
    res = _results()
    # XLA's bytes for Mixtral's token-embedding lookup: 196,608 + 65,536 + 65,536 + 256
    assert sum(r[2] for r in res["hand"][0]) == 327936
    assert res["d0"][0] == [("all-reduce", 4, 196608)]
