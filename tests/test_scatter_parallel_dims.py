"""A scatter with batching dims (``take_along_axis``' backward: the logits' gradient of a language model) whose
operand and indices come split differently on the batching (parallel) dims: XLA's scatter handler aligns both to
one parallel split and moves the operand to it, not the indices to the operand
(``gather_scatter.parallel_scatter_layouts``; raw after-spmd-partitioning HLO, jaxlib 0.10.2).

keras-hub llama's ``scatter-add.10``: operand batch over ``model`` and vocabulary over ``data``, indices batch over
``data`` and sequence over ``model``: XLA groups on the vocabulary split (indices gathered over ``data``), aligns the
operand's batch split to the indices' sequence split (an all-to-all of the operand and one of the result back),
where hloshard priced resharding the indices alone (bytes: 192 predicted before, 196,608 after, XLA 196,608 in the
operand's two all-to-alls; XLA moves the 256 B updates by a collective-permute and an all-to-all where the planner
all-to-alls them: those few hundred bytes still differ, ``llama`` below).  Held out (2x2x2, ``[16,16,512]``, not
tuned on; /tmp probe in BENCHMARKS.md round 25 gspmd): 4 of 5 cases match XLA (2 before); the miss is an operand
split on the vocabulary over two axes, whose in-group alignment this model does not follow.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import by_op, case_module, partition_only, predicted_collectives, summary, \
    xla_collectives

pytestmark = pytest.mark.oracle

PRELUDE = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
TSC = ("scatter({0}, {1}, {2}), update_window_dims={{}}, inserted_window_dims={{2}}, "
       "scatter_dims_to_operand_dims={{2}}, input_batching_dims={{0,1}}, scatter_indices_batching_dims={{0,1}}, "
       "index_vector_dim=3, to_apply=add")
L, I, U = "f32[8,32,1024]", "s32[8,32,1,1]", "f32[8,32,1]"
OP_MV = "{devices=[4,1,2]<=[2,4]T(1,0)}"         # 2x4: batch over model, vocabulary over data (llama)
IDX_BS = "{devices=[2,4,1,1]<=[8]}"               # batch over data, sequence over model
UPD_BS = "{devices=[2,4,1]<=[8]}"
UPD_MB = "{devices=[4,2,1]<=[2,4]T(1,0)}"         # batch over model, sequence over data
OP_M = "{devices=[4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
OP_D = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"
IDX_B = "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"
UPD_B = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"
IDX_M = "{devices=[4,1,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
UPD_M = "{devices=[4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
CASES_2X4 = [
    ("llama", [(L, OP_MV), (I, IDX_BS), (U, UPD_MB)], TSC, OP_MV, L),
    ("llama_updates_as_indices", [(L, OP_MV), (I, IDX_BS), (U, UPD_BS)], TSC, OP_MV, L),
    # the indices split over fewer devices and partially replicated: they take the operand's split
    ("operand_more", [(L, OP_M), (I, IDX_B), (U, UPD_B)], TSC, OP_M, L),
    # the operand split over fewer devices, but not on a sub-split of the indices': everything replicated
    ("operand_fewer_unaligned", [(L, OP_M), (I, IDX_BS), (U, UPD_BS)], TSC, OP_M, L),
    # the operand split over fewer devices and partially replicated: it takes the indices' split, and back
    ("operand_fewer", [(L, OP_D), (I, IDX_M), (U, UPD_M)], TSC, OP_D, L),
]
LH, IH, UH = "f32[16,16,512]", "s32[16,16,1,1]", "f32[16,16,1]"
CASES_2X2X2 = [
    ("h_operand_fewer", [(LH, "{devices=[2,1,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"),
                         (IH, "{devices=[4,1,1,1,2]<=[8] last_tile_dim_replicate}"),
                         (UH, "{devices=[4,1,1,2]<=[8] last_tile_dim_replicate}")], TSC,
     "{devices=[2,1,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}", LH),
    ("h_operand_replicated", [(LH, "{replicated}"), (IH, "{devices=[8,1,1,1]<=[8]}"), (UH, "{devices=[8,1,1]<=[8]}")],
     TSC, "{replicated}", LH),
    ("h_crossed", [(LH, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"),
                   (IH, "{devices=[1,2,1,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"),
                   (UH, "{devices=[1,2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}")], TSC,
     "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", LH),
]


@functools.lru_cache(maxsize=2)
def _results(mesh_spec: str):
    from tests.conftest import require_jax
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    require_jax()
    cases = CASES_2X4 if mesh_spec == "2x4" else CASES_2X2X2
    text = case_module(cases).replace("ENTRY e {", PRELUDE + "ENTRY e {")
    xla = by_op(xla_collectives(partition_only(text)))
    n = len(mesh_spec.split("x"))
    mesh = DeviceMesh.parse(mesh_spec, alpha=",".join(["0"] * n), beta=",".join(["1"] * n))
    pred = predicted_collectives(parse_module(text), mesh)
    return {c[0]: (summary(xla.get(c[0], [])), summary(pred.get(c[0], []))) for c in cases}


@pytest.mark.parametrize("mesh_spec,name", [("2x4", c[0]) for c in CASES_2X4 if c[0] != "llama"] +
                         [("2x2x2", c[0]) for c in CASES_2X2X2])
def test_parallel_scatter_matches_xla(mesh_spec, name):
    xla, pred = _results(mesh_spec)[name]
    assert pred == xla


def test_llama_scatter_moves_the_operand():
    xla, pred = _results("2x4")["llama"]
    big = [r for r in xla if r[2] > 4096]
    assert big == [("all-to-all", 4, 98304), ("all-to-all", 4, 98304)]   # the operand there and back
    assert [r for r in pred if r[2] > 4096] == big
    assert abs(sum(r[2] for r in pred) - sum(r[2] for r in xla)) < 1024


def test_parallel_scatter_expected_figures():
    a = _results("2x4")
    assert a["operand_fewer_unaligned"][0][-1] == ("all-gather", 4, 786432)   # the operand replicated
    assert sum(r[2] for r in a["operand_fewer"][0]) == 786432
    assert a["operand_more"][0] == [("collective-permute", 1, 256), ("collective-permute", 1, 256)]
