"""benchmarks/real_models_tpu.py: jax's StableHLO on the real TPU compiler, and the final HLO's collectives.

* :func:`real_models_tpu.final_once` (text only, always runs): in the TPU's optimized HLO one async
  collective appears once per piece (start / continue / done fusions) under one ``channel_id``, and a
  ``collective-permute-start`` has an (operand, result, context, context) tuple shape; each collective must
  be counted once, at its result's bytes.
* :func:`tests.tpu_oracle.compile_for_tpu` on StableHLO text as ``jax.jit(...).lower(...)`` writes it
  (``sdy.sharding``: Shardy, as jax compiles it): a parameter split over ``model`` returned replicated must
  be all-gathered, 3/4 of its 512 KiB per device, in the raw partitioned and in the final HLO. Needs libtpu
  (skipped with the reason where it is not installed, as tests/test_pins_tpu.py).
"""

from __future__ import annotations

import pathlib
import sys

import pytest

from tests.conftest import require_jax
from tests.tpu_oracle import compile_for_tpu, tpu_available, with_trip_counts
from tests.xla_bytes import collective_bytes

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import real_models_tpu  # noqa: E402

FINAL = """HloModule m, entry_computation_layout={(f32[64,16]{1,0})->f32[64,64]{1,0}}

%fused_computation.1 (param_0.1: f32[64,16]) -> f32[64,64] {
  %param_0.1 = f32[64,16]{1,0:T(8,128)} parameter(0)
  ROOT %all-gather.1 = f32[64,64]{1,0:T(8,128)} all-gather(%param_0.1), channel_id=7, replica_groups=[2,4]<=[8], dimensions={1}, use_global_device_ids=true
}

%async_collective_fusion.1 (param_0.2: f32[64,16]) -> f32[64,64] {
  %param_0.2 = f32[64,16]{1,0:T(8,128)} parameter(0)
  ROOT %all-gather.2 = f32[64,64]{1,0:T(8,128)S(1)} all-gather(%param_0.2), channel_id=7, replica_groups=[2,4]<=[8], dimensions={1}, use_global_device_ids=true
}

ENTRY %main (p0: f32[64,16]) -> f32[64,64] {
  %p0 = f32[64,16]{1,0:T(8,128)} parameter(0)
  %collective-permute-start = (f32[64,16]{1,0:T(8,128)S(1)}, f32[64,16]{1,0:T(8,128)S(1)}, u32[]{:S(2)}, u32[]{:S(2)}) collective-permute-start(%p0), channel_id=3, source_target_pairs={{0,1},{1,0}}
  %collective-permute-done = f32[64,16]{1,0:T(8,128)S(1)} collective-permute-done(%collective-permute-start)
  %fusion.1 = f32[64,64]{1,0:T(8,128)} fusion(%collective-permute-done), kind=kCustom, calls=%fused_computation.1
  ROOT %fusion.2 = f32[64,64]{1,0:T(8,128)} fusion(%fusion.1), kind=kCustom, calls=%async_collective_fusion.1
}
"""


def test_final_once_counts_each_collective_once_at_its_result():
    counted = collective_bytes(real_models_tpu.final_once(FINAL))
    kinds = sorted(c["kind"] for c in counted)
    assert kinds == ["all-gather", "collective-permute"], counted
    by = {c["kind"]: c["bytes"] for c in counted}
    assert by["all-gather"] == 3 / 4 * 64 * 64 * 4           # once, not once per async piece
    assert by["collective-permute"] == 64 * 16 * 4           # the result, not (operand, result, contexts)
    # the text as it is would count the gather twice and the permute's whole tuple
    raw = {c["name"]: c["bytes"] for c in collective_bytes(FINAL)}
    assert sum(raw.values()) > sum(by.values())


STABLEHLO = """module @jit_f attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["batch"=2, "model"=4]>
  func.func public @main(%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<256x512xf32>
    return %0 : tensor<256x512xf32>
  }
}
"""


@pytest.mark.oracle
def test_stablehlo_with_shardy_shardings_compiles_for_tpu():
    require_jax()
    why = tpu_available()
    if why:
        pytest.skip(why)
    (rec,) = compile_for_tpu([STABLEHLO])
    assert rec["ok"], rec["error"]
    want = 3 / 4 * 256 * 512 * 4
    raw = collective_bytes(with_trip_counts(rec["partitioned"]))
    assert [c["kind"] for c in raw] == ["all-gather"] and raw[0]["bytes"] == want, raw
    final = collective_bytes(real_models_tpu.final_once(rec["final"]))
    assert sum(c["bytes"] for c in final) == want, final
    # the argument is the split parameter (256 x 128 floats), the result the whole array
    assert rec["memory"]["argument"] == 256 * 128 * 4 and rec["memory"]["output"] == 256 * 512 * 4, rec["memory"]
    # the buffer assignment's HBM holds at least both (its report read from the dump)
    assert rec["hbm_bytes"] is not None and rec["hbm_bytes"] >= 256 * 128 * 4 + 256 * 512 * 4, rec
    # the row keeps libtpu's temp heap and what HBM holds beyond the arguments and outputs (round 33: a budget
    # on a TPU must leave room for it); on this one-gather program the heap holds async headers only
    row = real_models_tpu.figures(rec)
    heap = row["hbm_heap"]
    assert heap is not None and heap["bytes"] >= 0 and heap["other_values"] == 0, heap
    assert row["hbm_beyond_io"] == rec["hbm_bytes"] - 256 * 128 * 4 - 256 * 512 * 4 >= heap["bytes"], row


def test_heap_cell_names_the_headers_and_any_other_values():
    assert real_models_tpu.heap_cell(None) == "-"
    # 134 headers in 16 KiB slots: (134 - 1) * 16 KiB + 512 B (qwen2_small's expert plan, round 33)
    assert real_models_tpu.heap_cell({"bytes": 2179584, "headers": 134, "other_values": 0}) == "2.18 (134)"
    assert real_models_tpu.heap_cell({"bytes": 20807680, "headers": 200, "other_values": 3}) == "20.81 (200 +3 values)"
    rows = [{"model": "m", "plan": "expert", "compiles": True, "peak_bytes": 10 ** 6, "hbm_bytes": 4 * 10 ** 6,
             "hbm_heap": {"bytes": 2179584, "headers": 134, "other_values": 0}, "final_bytes": 1.0}]
    lines = real_models_tpu.table(rows).splitlines()
    assert len({ln.count("|") for ln in lines}) == 1, lines     # every line has the header's columns
    assert "| 2.18 (134) |" in lines[-1], lines[-1]


def test_tpu_time_adds_each_concat_bitcast_back():
    """libtpu's ``optimal_seconds`` carries -1 s per ``ConcatBitcast`` custom-call of the optimized program
    (``hloshard.xla_cost``); the TPU us column adds them back, as ``XlaCost.estimate_seconds`` does, instead of
    showing "-" (round 34: the real models' written modules, e.g. qwen2_small auto -0.99987 with one)."""
    final = FINAL.replace("  ROOT %fusion.2",
                          '  %cb = f32[64,16]{1,0:T(8,128)} custom-call(%p0), custom_call_target="ConcatBitcast"\n'
                          "  ROOT %fusion.2")
    mem = {"argument": 4096, "output": 4096, "temp": 0, "alias": 0}
    rec = {"ok": True, "memory": mem, "cost": {"optimal_seconds": -0.9998, "flops": 1.0}, "partitioned": None,
           "final": final}
    row = real_models_tpu.figures(rec)
    assert row["concat_bitcasts"] == 1
    assert row["optimal_seconds"] == pytest.approx(0.0002)
    row = real_models_tpu.figures(dict(rec, final=FINAL))     # none to add back: no estimate
    assert row["concat_bitcasts"] == 0 and row["optimal_seconds"] is None
