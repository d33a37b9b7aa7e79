"""Round 22 (issue 27): what the TPU compiler's ``optimal_seconds`` counts for a row gather, in
``benchmarks/time_truth.py``'s like-for-like figure (not in the step-time estimate: the chip does not pay it).

Probed ahead of time on libtpu 0.0.42.1 (BENCHMARKS.md "Round 22, helper seconds"): the gather fusion's bytes
accessed are 9 x the gathered bytes -- the (8, 128) tile of 8 rows each index reads, and the row written --
whatever the table's size.  The sample ``embedding_lookup`` (GSPMD's plan, mesh 2x4) gathers f32[4,128,256] per
device (524,288 bytes) from a 1 MiB table shard: the roofline reads the table and writes the result, the
compiler counts 9 x 524,288.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import time_truth  # noqa: E402

from hloshard.autoshard import evaluate_module  # noqa: E402
from hloshard.hlo import parse_module  # noqa: E402
from hloshard.mesh_setup import timed_mesh_from_options  # noqa: E402
from hloshard.timing import plan_roofline  # noqa: E402


def test_a_row_gather_counts_nine_times_its_result_in_the_like_for_like_figure():
    module = parse_module((ROOT / "samples" / "embedding_lookup.propagated.hlo").read_text())
    gathers = [i for c in module.computations for i in c.instructions if i.opcode == "gather"]
    assert len(gathers) == 1 and time_truth._row_gather(gathers[0])
    dmesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    res = evaluate_module(module, dmesh)
    roof = plan_roofline(res, module, scale.profile)[0]
    row = next(r for r in roof.rows if r.name == gathers[0].name)
    out, table = 4 * 128 * 256 * 4, 1024 * 256 * 4
    assert row.hbm_bytes == table + out + 4 * 128 * 4          # the roofline: table shard, result, the ids
    extra = time_truth.gather_tile_seconds(res, module, roof, scale.profile) * scale.profile.sustained_hbm_bandwidth
    assert abs(extra - (time_truth.GATHER_TILE_FACTOR * out - table - out)) < 1e-3


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
    assert time_truth._row_gather(ins["rows"])
    assert not time_truth._row_gather(ins["one"])    # one element per index: not what was probed
