"""Elementwise-like handlers against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8
devices): bitcast-convert (equal and changing element sizes), transposes, reduces, broadcasts of
scalars (which XLA rebuilds in any layout) and of vectors (which it reshards).
"""

from __future__ import annotations

import functools

import pytest

from tests.conftest import require_jax
from tests.handler_harness import compare_cases

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
COLS = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"    # dim 1 over model
ROWS = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"    # dim 0 over model
VEC = "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"       # a vector over model
ADD = "to_apply=add"

CASES = [
    ("bcv_same", [("f32[64,32]", T)], "bitcast-convert({0})", T, "s32[64,32]"),
    ("bcv_wider", [("f32[64,32]", T)], "bitcast-convert({0})", "{devices=[2,4,1]<=[8]}", "bf16[64,32,2]"),
    ("bcv_narrower", [("bf16[64,32,2]", "{devices=[2,4,1]<=[8]}")], "bitcast-convert({0})", T, "f32[64,32]"),
    # a transpose of a dim split 8 ways onto the other dim: all-to-all of the f32[8,32] tile (7/8*1024)
    ("transpose_move", [("f32[64,32]", "{devices=[8,1]<=[8]}")], "transpose({0}), dimensions={{1,0}}",
     "{devices=[8,1]<=[8]}", "f32[32,64]"),
    ("transpose_local", [("f32[64,32]", T)], "transpose({0}), dimensions={{1,0}}", "{devices=[4,2]<=[2,4]T(1,0)}",
     "f32[32,64]"),
    # reduce of the dim split over model: local partial sums, all-reduce of the f32[32] tile (2*3/4*128)
    ("reduce_split", [("f32[64,32]", T), ("f32[]", R)], "reduce({0}, {1}), dimensions={{1}}, " + ADD,
     "{devices=[2,4]<=[8] last_tile_dim_replicate}", "f32[64]"),
    # reduce of both dims: one all-reduce of the scalar per split dim (groups of 4, then of 2)
    ("reduce_all", [("f32[64,32]", T), ("f32[]", R)], "reduce({0}, {1}), dimensions={{0,1}}, " + ADD, R, "f32[]"),
    # XLA's spelling of the trigonometric opcodes (cosine, sine): elementwise
    ("cosine", [("f32[64,256]", T)], "cosine({0})", T, "f32[64,256]"),
    # broadcasts and iotas are produced in the written layout locally
    ("bcast_vec", [("f32[256]", VEC)], "broadcast({0}), dimensions={{1}}", T, "f32[64,256]"),
    ("iota", [], "iota(), iota_dimension=0", T, "s32[64,256]"),
    # a reduce-window along the split dim: halos of one column each way (f32[32,1] = 128 bytes)
    ("reduce_window", [("f32[64,256]", T), ("f32[]", R)], "reduce-window({0}, {1}), window={{size=1x3 pad=0_0x1_1}}, "
     + ADD, T, "f32[64,256]"),
    # elementwise with a broadcast of a scalar laid out differently: XLA rebuilds the broadcast
    ("scalar_bcast", [("f32[256,256]", ROWS), ("f32[]", R)],
     "multiply({0}, {0})", ROWS, "f32[256,256]"),
]


@functools.lru_cache(maxsize=1)
def _results():
    require_jax()
    from tests import handler_harness, xla_oracle

    text = handler_harness.case_module(CASES)
    text = text.replace("ENTRY e {", "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                                     "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {")
    # scalar_bcast: multiply the parameter by a broadcast of the scalar laid out on the other dim
    import re

    m = re.search(r"  scalar_bcast = f32\[256,256\] multiply\((p\d+), p\d+\)", text)
    scalar = f"p{int(m.group(1)[1:]) + 1}"
    text = text.replace(m.group(0), f"  b_s = f32[256,256] broadcast({scalar}), dimensions={{}}, sharding={COLS}\n"
                                    f"  scalar_bcast = f32[256,256] multiply({m.group(1)}, b_s)")
    raw = xla_oracle.spmd_partition(text, 8)
    orig = handler_harness.case_module
    handler_harness.case_module = lambda cases: text
    try:
        return handler_harness.compare_cases(CASES, raw=raw)
    finally:
        handler_harness.case_module = orig


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_expected_figures():
    res = _results()
    assert res["bcv_wider"][0] == [] and res["bcv_narrower"][0] == []
    assert res["transpose_move"][0] == [("all-to-all", 8, 896)]
    assert res["reduce_split"][0] == [("all-reduce", 4, 192)]
    assert res["scalar_bcast"][0] == []


def test_opt_barrier_passes_layouts_through():
    """An optimization barrier (``opt-barrier``, as in the Llama step's rematerialization) keeps its
    operand's layouts: XLA inserts nothing, and hloshard predicts nothing either."""
    require_jax()
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests import xla_oracle
    from tests.handler_harness import predicted_collectives, xla_collectives

    text = f"""HloModule barrier, num_partitions=8

ENTRY e {{
  p0 = f32[64,32] parameter(0), sharding={T}
  p1 = f32[64] parameter(1), sharding={{devices=[8]<=[8]}}
  t = (f32[64,32], f32[64]) tuple(p0, p1), sharding={{{T}, {{devices=[8]<=[8]}}}}
  b = (f32[64,32], f32[64]) opt-barrier(t), sharding={{{T}, {{devices=[8]<=[8]}}}}, metadata={{op_name="b"}}
  g0 = f32[64,32] get-tuple-element(b), index=0, sharding={T}
  ROOT n = f32[64,32] negate(g0), sharding={T}
}}
"""
    assert xla_collectives(xla_oracle.spmd_partition(text, 8)) == []
    assert predicted_collectives(parse_module(text), DeviceMesh.parse("2x4")) == {}


def test_copy_keeping_its_layout_is_removed_by_xla_and_priced_free():
    """A ``copy`` between two shardings (as ``solve``'s operand pins are): XLA's final per-device HLO
    keeps the all-gather and drops the copy (algebraic simplifier), so hloshard prices the resharding
    on the copy's operand edge and no compute for the copy itself; a copy that changes the memory
    layout ({0,1} from {1,0}) is a real transpose in memory and keeps its compute."""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests import xla_oracle

    def module(layout: str) -> str:
        return f"""HloModule cp, num_partitions=8

ENTRY e {{
  a = f32[64,32] parameter(0), sharding={{devices=[8,1]<=[8]}}
  b = f32[64,32] add(a, a), sharding={{devices=[8,1]<=[8]}}
  c = f32[64,32]{layout} copy(b), sharding={{replicated}}
  ROOT d = f32[64,32]{layout} multiply(c, c), sharding={{replicated}}
}}
"""
    ok, final = xla_oracle.compile_spmd(module("{1,0}"), 8)
    assert ok, final
    assert " copy(" not in final and "all-gather(" in final
    mesh = DeviceMesh.parse("8")
    for layout, removed in (("{1,0}", True), ("{0,1}", False)):
        res = evaluate_module(parse_module(module(layout)), mesh)
        st = {g.instr.name: g.strategies[int(res.choice[v])] for v, g in enumerate(res.graph.nodes)}
        assert (st["c"].compute == 0.0) is removed
        assert st["d"].compute > 0.0
