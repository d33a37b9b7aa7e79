"""Round 22 (issue 27): what the TPU compiler's ``optimal_seconds`` counts for a row gather, in
``benchmarks/time_truth.py``'s like-for-like figure (not in the step-time estimate: the chip does not pay it).
Round 36: the same count is the roofline's ``gather-tiles`` row (``timing.plan_roofline``), so the report's
bytes accessed under ``--device tpu-*`` carry it; rows are counted at 128 lanes (probed: f32 8 / 64 / 100 /
1,000-wide rows, bf16 64 / 1,000, s8, s32, f16).

Probed ahead of time on libtpu 0.0.42.1 (BENCHMARKS.md "Round 22, helper seconds"): the gather fusion's bytes
accessed are 9 x the gathered bytes -- the (8, 128) tile of 8 rows each index reads, and the row written --
whatever the table's size.  The sample ``embedding_lookup`` (GSPMD's plan, mesh 2x4) gathers f32[4,128,256] per
device (524,288 bytes) from a 1 MiB table shard: the roofline reads the table and writes the result, the
compiler counts 9 x 524,288.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import time_truth  # noqa: E402

from hloshard.cost.tpu_fusion import gather_counted_bytes, row_gather  # noqa: E402

from hloshard.autoshard import evaluate_module  # noqa: E402
from hloshard.hlo import parse_module  # noqa: E402
from hloshard.mesh_setup import timed_mesh_from_options  # noqa: E402
from hloshard.timing import plan_roofline  # noqa: E402


def test_a_row_gather_counts_nine_times_its_result_in_the_like_for_like_figure():
    module = parse_module((ROOT / "samples" / "embedding_lookup.propagated.hlo").read_text())
    gathers = [i for c in module.computations for i in c.instructions if i.opcode == "gather"]
    assert len(gathers) == 1 and row_gather(gathers[0])
    dmesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    res = evaluate_module(module, dmesh)
    roof = plan_roofline(res, module, scale.profile)[0]
    row = next(r for r in roof.rows if r.name == gathers[0].name)
    out, table = 4 * 128 * 256 * 4, 1024 * 256 * 4
    assert row.hbm_bytes == table + out + 4 * 128 * 4          # the roofline: table shard, result, the ids
    tiles = [r for r in roof.rows if r.opcode == "gather-tiles"]
    assert [r.name for r in tiles] == [gathers[0].name] and tiles[0].seconds == 0.0
    assert abs(tiles[0].hbm_bytes - (9 * out - table - out)) < 1e-3     # 8 tile rows read, the row written
    extra = time_truth.gather_tile_seconds(roof, scale.profile) * scale.profile.sustained_hbm_bandwidth
    assert abs(extra - (9 * out - table - out)) < 1e-3
    # without --device tpu-* (the CPU rule) no such row, and the bytes are the kernels' own
    cpu = plan_roofline(evaluate_module(module, dmesh), module, None)[0]
    assert not [r for r in cpu.rows if r.opcode == "gather-tiles"]


def test_the_tile_rows_do_not_move_the_step_time_only_the_bytes(monkeypatch):
    import dataclasses

    from hloshard import timing
    from hloshard.cost import tpu_fusion

    module = parse_module((ROOT / "samples" / "embedding_lookup.propagated.hlo").read_text())
    dmesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    res = evaluate_module(module, dmesh)
    with_tiles = timing.plan_timing(res, module, scale)
    roof = plan_roofline(res, module, scale.profile)[0]
    tiles = sum(r.hbm_bytes for r in roof.rows if r.opcode == "gather-tiles")
    off = dataclasses.replace(tpu_fusion.TPU_FUSION, gather_tiles=False)
    monkeypatch.setattr(timing, "fusion_rule", lambda profile: off)
    without = timing.plan_timing(res, module, scale)
    assert tiles > 0
    assert with_tiles["estimated_step_time_s"] == without["estimated_step_time_s"]
    assert abs(with_tiles["hbm_bytes_per_device"] - without["hbm_bytes_per_device"] - tiles) < 1.0


def test_a_narrow_row_is_counted_at_128_lanes():
    text = """HloModule g

ENTRY main {
  t = f32[4096,64] parameter(0)
  i = s32[512,1] parameter(1)
  ROOT rows = f32[512,64] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
}
"""
    g = parse_module(text).entry.root
    # probed (libtpu 0.0.42.1, v5e): 4,608 bytes per index = 9 x 128 lanes x 4 bytes, not 9 x 256
    assert gather_counted_bytes(g, (512, 64)) == 512 * 4608
    assert gather_counted_bytes(g, (256, 64)) == 256 * 4608            # the per-device result's indices
    assert gather_counted_bytes(g, (512, 32)) == 512 * 4608            # a row split 2 ways: still 128 lanes
    assert gather_counted_bytes(g, (512, 200)) == 512 * 9 * 256 * 4    # 200 -> 256 lanes
    bf = parse_module(text.replace("f32", "bf16")).entry.root
    assert gather_counted_bytes(bf, (512, 64)) == 512 * 9 * 128 * 2     # 8 rows, not bf16's 16-row tile
    assert gather_counted_bytes(g, None) is None


def test_only_whole_row_gathers_take_the_tile_count():
    text = """HloModule g

ENTRY main {
  t = f32[64,32] parameter(0)
  i = s32[16,1] parameter(1)
  rows = f32[16,32] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,32}
  j = s32[16,2] parameter(2)
  one = f32[16] gather(t, j), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
  ROOT r = (f32[16,32], f32[16]) tuple(rows, one)
}
"""
    ins = {i.name: i for i in parse_module(text).entry.instructions}
    assert row_gather(ins["rows"])
    assert not row_gather(ins["one"])    # one element per index: not what was probed
    assert gather_counted_bytes(ins["one"], (16,)) is None


_GATHER = """HloModule g

ENTRY main {{
  t = {dt}[4096,{w}] parameter(0)
  i = s32[{n},1] parameter(1)
  ROOT rows = {dt}[{n},{w}] gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{w}}}
}}
"""


def test_the_tpu_compiler_counts_the_tile_rows_per_index():
    """libtpu ahead of time (one compile child): bytes accessed per index, the slope from 256 to 512 indices
    (the table's prefetch and every fixed cost drop out), against :func:`gather_counted_bytes`' per index.
    Rows a multiple of 128 lanes wide: the rule to within the index's own bytes; a 64-wide f32 row: the rule
    (9 x 128 lanes, not 9 x 64) plus at most the result's layout copy (read and written, <= 2 rows)."""
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    cases = [("f32", 384), ("bf16", 256), ("s8", 512), ("f32", 64)]
    texts = [_GATHER.format(dt=dt, w=w, n=n) for dt, w in cases for n in (256, 512)]
    out = compile_for_tpu(texts, partitions=1, topology="v5e:2x2")
    assert all(o["ok"] for o in out), [o["error"] for o in out if not o["ok"]]
    for k, (dt, w) in enumerate(cases):
        slope = (out[2 * k + 1]["cost"]["bytes accessed"] - out[2 * k]["cost"]["bytes accessed"]) / 256
        g = parse_module(_GATHER.format(dt=dt, w=w, n=512)).entry.root
        rule = gather_counted_bytes(g, (512, w)) / 512
        row = rule / 9
        if w % 128 == 0:
            assert rule <= slope <= rule + 16, (dt, w, slope, rule)
        else:
            assert rule <= slope <= rule + 2 * row, (dt, w, slope, rule)
