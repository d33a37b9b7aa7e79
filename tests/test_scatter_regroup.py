"""Scatter-add into a table split on its rows (the indexed dim) with updates split on their window dim over some
of the same mesh axes: XLA groups the devices by the table's row split, permutes the updates' tiles into the
groups and gathers them there (``gather_scatter._regrouped_updates``): one collective-permute of the updates'
tile more than resharding the updates directly.  Raw after-spmd-partitioning HLO, 8 devices, jaxlib 0.10.2.

BART's embedding gradient (new user 24, ``scatter-add.11``: ``f32[4096,256]`` rows over ``data``, updates'
hidden dim over ``data``): XLA 1 MiB, predicted 512 KiB before.  The ``no_room_*`` cases (another shape; first
run as held-out, where the rule without its "room inside a group" condition added a permute XLA does not make)
shaped that condition; the ``held_*`` cases were run only after it.  Known gap: ``rows_d_upd_all`` (XLA
permutes 128 KiB more than predicted).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_results

pytestmark = pytest.mark.oracle

PRELUDE = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
SC = ("scatter({0}, {1}, {2}), update_window_dims={{2}}, inserted_window_dims={{0}}, "
      "scatter_dims_to_operand_dims={{0}}, index_vector_dim=2, to_apply=add")
O, I, U = "f32[1024,256]", "s32[16,64,1]", "f32[16,64,256]"
OH, IH, UH = "f32[512,128]", "s32[8,32,1]", "f32[8,32,128]"
R = "{replicated}"
RD = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"            # rows over data
RM = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"    # rows over model
UHD = "{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}"         # updates' hidden over data
UHM = "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"  # hidden over model
CASES = [
    ("bart", [(O, RD), (I, R), (U, UHD)], SC, RD, O),
    ("rows_m_upd_hm", [(O, RM), (I, R), (U, UHM)], SC, RM, O),
    ("rows_d_upd_all", [(O, RD), (I, R), (U, "{devices=[1,1,8]<=[8]}")], SC, RD, O),
    ("rows_d_upd_hm", [(O, RD), (I, R), (U, UHM)], SC, RD, O),        # no shared axis: a gather only
    ("no_room_rows_all_upd_hd", [(OH, "{devices=[8,1]<=[8]}"), (IH, R), (UH, UHD)], SC, "{devices=[8,1]<=[8]}", OH),
    ("no_room_rows_m_upd_all", [(OH, RM), (IH, R), (UH, "{devices=[1,1,8]<=[8]}")], SC, RM, OH),
    ("held_bart_shape2", [(OH, RD), (IH, R), (UH, UHD)], SC, RD, OH),
    ("held_rows_m_upd_hm2", [(OH, RM), (IH, R), (UH, "{devices=[1,1,2,4]<=[2,4]T(1,0) last_tile_dim_replicate}")],
     SC, RM, OH),
]
KNOWN_GAP = ("rows_d_upd_all",)

_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES, PRELUDE))


@pytest.mark.parametrize("name", [c[0] for c in CASES if c[0] not in KNOWN_GAP])
def test_regrouped_updates_bytes_match_xla(name):
    xla, pred, _ = _results()[name]
    assert sum(r[2] for r in pred) == sum(r[2] for r in xla)
    assert sorted(r[0] for r in pred if r[0] == "collective-permute") == \
        sorted(r[0] for r in xla if r[0] == "collective-permute")


def test_known_gap_is_the_permute():
    xla, pred, _ = _results()["rows_d_upd_all"]
    assert sum(r[2] for r in xla) - sum(r[2] for r in pred) == 131072


def test_bart_layout_exact():
    xla, pred, _ = _results()["bart"]
    assert xla == pred == [("all-gather", 2, 524288), ("collective-permute", 1, 524288)]
