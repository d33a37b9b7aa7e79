"""A dot whose contracting dims are split over axes of several dims: XLA's dot handler reduces the partial
sums one contracting dim at a time (one all-reduce over each dim's axes, ``strategy.dot._contracting_reduces``),
except for the all-reduce-then-slice variant whose scattered output dim no other axis splits (one all-reduce
over all the contracting axes).  Operands and result are written in the strategy's own layouts, so XLA has
nothing to choose but how it reduces (raw after-spmd-partitioning HLO, 8 devices, jaxlib 0.10.2).

The tied-embedding gradient of a language model, ``[B,S,V] x [B,S,H]`` contracting B and S: on 2x4 and on
the refined 2x2x2.  Found by giving XLA every strategy of this dot and of ``[64,512] x [512,256]``
(2x2x2: 30 of 324 priced below XLA's bytes, 0 after; 2x4: 2 of 64, 0 after; held out, ``[4,8,32,64]``
attention scores and ``[16,8,128] x [16,8,64]``: 36 of 473, 6 after -- those six are the variant on the
tiny 32 KiB output, where XLA reduces over one axis and exchanges the rest by collective-permutes).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import by_op, case_module, partition_only, predicted_collectives, summary, \
    xla_collectives

pytestmark = pytest.mark.oracle

DOT = "dot({0}, {1}), lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}"
L, R, O = "f32[8,32,1024]", "f32[8,32,256]", "f32[1024,256]"
BS = "{devices=[2,4,1]<=[8]}"                                           # B over axis 0, S over axis 1 (2x4)
B1S2 = "{devices=[2,2,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"      # 2x2x2: B over axis 1, S over axis 2
B1S2V0 = "{devices=[2,2,2]<=[2,4]T(1,0)}"                               # ... and V over axis 0

CASES_2X4 = [
    # B over one axis, S over the other, result replicated: two all-reduces of the 1 MiB result (2, then 4 devices)
    ("two_dims", [(L, BS), (R, BS)], DOT, "{replicated}", O),
    # the same, result scattered over both axes on V (unsplit before): one all-reduce over the 8 devices
    ("two_dims_scattered", [(L, BS), (R, BS)], DOT, "{devices=[8,1]<=[8]}", O),
]
CASES_2X2X2 = [
    ("two_dims_v_split", [(L, B1S2V0), (R, B1S2)], DOT, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", O),
    # V split over axis 0 already, then scattered over 1 and 2: still one all-reduce per contracting dim
    ("two_dims_v_split_scattered", [(L, B1S2V0), (R, B1S2)], DOT, "{devices=[8,1]<=[8]}", O),
    # V unsplit, scattered over 1 and 2: one all-reduce over 4
    ("two_dims_scattered_4", [(L, B1S2), (R, B1S2)], DOT, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
     O),
]


@functools.lru_cache(maxsize=2)
def _results(mesh_spec: str):
    from tests.conftest import require_jax

    require_jax()
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    cases = CASES_2X4 if mesh_spec == "2x4" else CASES_2X2X2
    text = case_module(cases)
    xla = by_op(xla_collectives(partition_only(text)))
    n = len(mesh_spec.split("x"))
    mesh = DeviceMesh.parse(mesh_spec, alpha=",".join(["0"] * n), beta=",".join(["1"] * n))
    pred = predicted_collectives(parse_module(text), mesh)
    return {c[0]: (summary(xla.get(c[0], [])), summary(pred.get(c[0], []))) for c in cases}


@pytest.mark.parametrize("mesh_spec,name", [("2x4", c[0]) for c in CASES_2X4] +
                         [("2x2x2", c[0]) for c in CASES_2X2X2])
def test_contracting_reduces_match_xla(mesh_spec, name):
    xla, pred = _results(mesh_spec)[name]
    assert pred == xla


def test_contracting_reduces_expected_figures():
    a = _results("2x4")
    assert a["two_dims"][0] == [("all-reduce", 2, 1048576), ("all-reduce", 4, 1572864)]
    assert a["two_dims_scattered"][0] == [("all-reduce", 8, 1835008)]
    b = _results("2x2x2")
    assert b["two_dims_v_split"][0] == [("all-reduce", 2, 524288), ("all-reduce", 2, 524288)]
    assert b["two_dims_v_split_scattered"][0] == [("all-reduce", 2, 524288), ("all-reduce", 2, 524288)]
    assert b["two_dims_scattered_4"][0] == [("all-reduce", 4, 1572864)]
