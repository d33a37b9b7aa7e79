"""Round 23 (issue 27): the TPU compiler's v5p programs hold copies of intermediates between HBM and on-chip
memory that its v5e / v6e programs do not, and its estimate counts them (BENCHMARKS.md "Round 23, helper
seconds").  ``hloshard.xla_cost.intermediate_copies`` reads them off an optimised program;
``benchmarks/time_truth.py`` shows each plan's estimate with and without them (``msa_copy_seconds``).
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import time_truth  # noqa: E402

from hloshard.cost.roofline import PREFETCH_COPY_FACTOR  # noqa: E402
from hloshard.cost.tpu_layout import padded_bytes  # noqa: E402
from hloshard.devices import get_profile  # noqa: E402
from hloshard.xla_cost import intermediate_copies  # noqa: E402

#: the forms of libtpu 0.0.42.1's optimised v5p text (moe_layer's program, names shortened): a prefetch of
#: an entry parameter and of a constant (not counted), copies of a fusion's and a tuple element's results
#: (counted), and one inside a non-entry computation (counted: every computation is read)
OPTIMISED = """HloModule jit_moe, entry_computation_layout={(f32[2,256,128]{2,1,0})->f32[4,32,128]{2,1,0}}

%body (p: (s32[], f32[4,32])) -> (s32[], f32[4,32]) {
  %p = (s32[], f32[4,32]{1,0:T(4,128)}) parameter(0)
  %gte = f32[4,32]{1,0:T(4,128)} get-tuple-element(%p), index=1
  %copy-start.9 = (f32[4,32]{1,0:T(4,128)S(1)}, f32[4,32]{1,0:T(4,128)}, u32[]{:S(2)}) copy-start(%gte)
  ROOT %t = (s32[], f32[4,32]{1,0:T(4,128)}) tuple(%c, %gte)
}

ENTRY %main.1 (param: f32[2,256,128]) -> f32[4,32,128] {
  %param = f32[2,256,128]{2,1,0:T(8,128)} parameter(0), metadata={op_name="x"}
  %constant.158 = s32[8]{0:T(128)} constant({0, 1, 2, 3, 4, 5, 6, 7})
  %copy-start = (f32[2,256,128]{2,1,0:T(8,128)S(1)}, f32[2,256,128]{2,1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%param)
  %copy-start.6 = (s32[8]{0:T(128)S(1)}, s32[8]{0:T(128)}, u32[]{:S(2)}) copy-start(%constant.158)
  %fusion.157 = bf16[4,64,192]{2,1,0:T(8,128)(2,1)} fusion(%param), kind=kLoop, calls=%fused
  %copy-start.3 = (bf16[4,64,192]{2,1,0:T(8,128)(2,1)S(1)}, bf16[4,64,192]{2,1,0:T(8,128)(2,1)}, u32[]{:S(2)}) copy-start(%fusion.157)
  %get-tuple-element.90 = f32[4,2,64,64]{3,2,1,0:T(8,128)} get-tuple-element(%w), index=0
  ROOT %copy-start.1 = (f32[4,2,64,64]{3,2,1,0:T(8,128)S(1)}, f32[4,2,64,64]{3,2,1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%get-tuple-element.90)
}
"""


def test_copies_of_intermediates_are_counted_and_prefetches_of_parameters_and_constants_are_not():
    count, total = intermediate_copies(OPTIMISED)
    assert count == 3
    # bf16[4,64,192]: rows in 16-row tiles (64), lanes padded 192 -> 256; f32[4,2,64,64]: lanes 64 -> 128;
    # f32[4,32]: a (4, 128) tile (the T(4,128) the compiler wrote), 32 lanes padded to 128
    assert total == 4 * 64 * 256 * 2 + 4 * 2 * 64 * 128 * 4 + 4 * 128 * 4
    assert total == (padded_bytes("bf16", [4, 64, 192]) + padded_bytes("f32", [4, 2, 64, 64])
                     + padded_bytes("f32", [4, 32]))
    assert intermediate_copies(OPTIMISED.replace("copy-start(%fusion.157)", "copy-start(%param)")) == (
        2, total - 4 * 64 * 256 * 2)


def test_msa_copy_seconds_counts_each_copy_as_a_prefetch_at_the_profiles_rate():
    tpu = {"intermediate_copies": 3, "intermediate_copy_bytes": 1_000_000.0}
    for device in ("tpu-v5e", "tpu-v5p"):
        bw = get_profile(device).sustained_hbm_bandwidth
        assert time_truth.msa_copy_seconds(tpu, device) == pytest.approx(PREFETCH_COPY_FACTOR * 1e6 / bw)
    assert time_truth.msa_copy_seconds({"bytes_accessed": 1.0}, "tpu-v5e") is None


def test_v5p_programs_copy_intermediates_and_v5e_programs_do_not():
    """libtpu ahead of time: the sample moe_layer's GSPMD plan compiled for v5p:2x2x2 holds copies of
    intermediates (3 measured, libtpu 0.0.42.1), for v5e:2x4 none; the estimate's bytes differ by about
    PREFETCH_COPY_FACTOR x their size."""
    from tests.conftest import require_jax

    require_jax()
    from tests.tpu_oracle import tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    from hloshard.xla_cost import _analysis, _compile_tpu   # in this process: one libtpu start, not two

    text = (ROOT / "samples" / "moe_layer.propagated.hlo").read_text()
    v5e, v5p = (_analysis(_compile_tpu(text, 8, topology), tpu=True) for topology in ("v5e:2x4", "v5p:2x2x2"))
    assert v5e["intermediate_copies"] == 0 and v5p["intermediate_copies"] > 0
    extra = v5p["bytes_accessed"] - v5e["bytes_accessed"]
    assert 2 * v5p["intermediate_copy_bytes"] <= extra <= 6 * v5p["intermediate_copy_bytes"]


def test_op_bytes_splits_a_traced_op_by_memory_space():
    """benchmarks/tpu_measured.py kernel-rates reads each traced op's arrays: S(1) is VMEM, the rest HBM."""
    import tpu_measured

    line = ("%add_add_fusion = bf16[4,64,256]{2,1,0:T(8,128)(2,1)S(1)} fusion(f32[4,64,256]{2,1,0:T(8,128)S(1)} "
            "%a, f32[4,64,256]{2,1,0:T(8,128)} %b, f32[4,64]{1,0:T(4,128)S(1)} %c), kind=kLoop, calls=%f")
    op, hbm, vmem = tpu_measured.op_bytes(line)
    assert op == "fusion"
    assert hbm == 4 * 64 * 256 * 4
    assert vmem == 4 * 64 * 256 * 2 + 4 * 64 * 256 * 4 + 4 * 128 * 4
    assert tpu_measured.op_bytes("not an op") == ("", 0, 0)


def test_kernel_rates_of_round_22s_per_device_traces():
    """The committed round-22 traces (17 per-device sample programs on one v5e chip, every op): the
    conv_layer programs and async copies left out, 897 ops of 15 programs, 747 touching VMEM only."""
    import tpu_measured

    out = tpu_measured.kernel_rates(ROOT / "benchmarks" / "measured" / "tpu_v5e_per_device_ops_r22.json")
    assert (out["ops"], out["programs"], out["vmem_only_ops"]) == (897, 15, 747)
    assert out["vmem_bytes_per_s"] > out["hbm_bytes_per_s"] > 0 and out["fixed_s"] > 0
