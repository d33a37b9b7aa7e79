"""A dot whose operands both split one contracting dim pair, over different mesh axes: XLA's dot handler gathers
both operands' contracting splits and contracts whole (``strategy.dot.gathers_mismatched_contracting``), where
slicing the less split operand and all-reducing the partial sums was priced.  Raw after-spmd-partitioning HLO,
8 devices, jaxlib 0.10.2.

Mixtral's router-weight gradient (new user 28's F7, ``dot_general.100`` / ``.120`` of the plan auto_shard wrote):
lhs f32[512,8] over all 8 devices, rhs f32[512,128] over ``data``, result f32[8,128] over the minor half of
``model`` (a refined mesh): XLA all-gathers f32[512,8] over 8 and f32[512,128] over 2 (145,408 B) where 4,096 B
(an all-to-all and an all-reduce over 4) was priced.  The rule was written from ``det30`` and ``l4_r2`` (and their
result variants); ``l4f2_r2``, ``l8_rtiled``, ``l2_r8`` and ``l8_rmodel`` were measured after it (held out).
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

DOT = "dot({0}, {1}), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"
L, R, O = "f32[512,8]", "f32[512,128]", "f32[8,128]"
L8 = "{devices=[8,1]<=[8]}"                                         # contracting dim over all 8 devices
R2 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"               # contracting dim over 'data'
OT = "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"       # result rows over model's minor half
CASES = [
    ("det30", [(L, L8), (R, R2)], DOT, OT, O),
    ("rep_out", [(L, L8), (R, R2)], DOT, "{replicated}", O),
    ("out_data", [(L, L8), (R, R2)], DOT, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", O),
    ("out_model4", [(L, L8), (R, R2)], DOT, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", O),
    ("l4_r2", [(L, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"), (R, R2)], DOT, OT, O),
    ("l4_r2_rep", [(L, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"), (R, R2)], DOT, "{replicated}", O),
    # held out: a free split kept, the rhs tiled, the rhs the more split one, the rhs over 'model'
    ("l4f2_r2", [(L, "{devices=[4,2]<=[8]}"), (R, R2)], DOT, OT, O),
    ("l8_rtiled", [(L, L8), (R, "{devices=[2,4]<=[8]}")], DOT, "{replicated}", O),
    ("l2_r8", [(L, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (R, L8)], DOT, OT, O),
    ("l8_rmodel", [(L, L8), (R, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}")], DOT, "{replicated}", O),
    # control: equal splits keep the contraction (one all-reduce over 'data')
    ("l_data_r2", [(L, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), (R, R2)], DOT, OT, O),
]

_results, _groups, test_mismatched_contracting_matches_xla, test_mismatched_contracting_groups_match_xla = \
    oracle_cases(CASES)


def test_mismatched_contracting_figures():
    res = _results()
    # XLA's bytes for the Mixtral router-weight gradient: 14,336 (f32[512,8] over 8) + 131,072 (f32[512,128] over 2)
    assert res["det30"][0] == [("all-gather", 2, 131072), ("all-gather", 8, 14336)]
    assert res["l_data_r2"][0] == [("all-reduce", 2, 2048)]
