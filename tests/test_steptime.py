"""Model flops (cost.flops) and the step time in seconds (cost.steptime)."""

import pytest

from hloshard import devices
from hloshard.cost.flops import matmul_flops, model_flops
from hloshard.cost.steptime import step_time
from hloshard.hlo import parse_module
from hloshard.strategy.base import COMPUTE_COST_PER_FLOP

LOOP = """HloModule loop, num_partitions=8

body {
  p = (s32[], f32[32,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[32,64] get-tuple-element(p), index=1
  c1 = f32[] constant(1)
  w = f32[64,64] broadcast(c1), dimensions={}
  d = f32[32,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s32[] constant(1)
  n = s32[] add(i, one)
  ROOT t = (s32[], f32[32,64]) tuple(n, d)
}

cond {
  p = (s32[], f32[32,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(5)
  ROOT lt = pred[] compare(i, k), direction=LT
}

ENTRY e {
  x = f32[32,64] parameter(0)
  img = f32[8,16,16,3] parameter(1)
  ker = f32[3,3,3,4] parameter(2)
  conv = f32[8,16,16,4] convolution(img, ker), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = s32[] constant(0)
  init = (s32[], f32[32,64]) tuple(zero, x)
  w = (s32[], f32[32,64]) while(init), condition=cond, body=body
  ROOT r = f32[32,64] get-tuple-element(w), index=1
}
"""


def test_model_flops_counts_loops_per_trip_and_convolutions():
    m = parse_module(LOOP)
    dot = 2 * 32 * 64 * 64
    # batch x output features x input features x the (output position, tap) pairs that read an input
    # element: 16 positions x 3 taps less the 2 that fall on the padding, per spatial dimension
    conv = 2 * (8 * 4) * 3 * (16 * 3 - 2) ** 2
    assert model_flops(m) == pytest.approx(5 * dot + conv)
    by_name = {i.name: i for i in m.all_instructions()}
    assert matmul_flops(by_name["conv"]) == conv
    assert matmul_flops(by_name["r"]) == 0


def test_convolution_flops_count_only_taps_that_read_input():
    """A tap on padding or between the elements of a dilated input is no work (XLA's HloCostAnalysis):
    checked against counting every (output, tap) pair one by one."""
    from hloshard.cost.flops import valid_taps

    def brute(size, stride, pad, lhs_d, rhs_d, n_in, n_out):
        span = (n_in - 1) * lhs_d
        return sum(1 for o in range(n_out) for k in range(size)
                   if 0 <= o * stride + k * rhs_d - pad <= span and (o * stride + k * rhs_d - pad) % lhs_d == 0)

    cases = [(3, 1, 1, 1, 1, 32, 32), (3, 2, 1, 1, 1, 32, 16), (3, 1, 1, 2, 1, 4, 7), (4, 1, 3, 1, 2, 8, 10),
             (5, 3, 4, 2, 3, 9, 6), (1, 1, 0, 1, 1, 7, 7), (7, 1, 0, 1, 1, 3, 0)]
    for c in cases:
        assert valid_taps(*c) == brute(*c), c
    assert valid_taps(3, 1, 1, 1, 1, 32, 32) == 94
    m = parse_module(LOOP.replace("pad=1_1x1_1", "pad=0_2x1_1 lhs_dilate=2x1").replace(
        "conv = f32[8,16,16,4]", "conv = f32[8,31,16,4]"))
    conv = next(i for i in m.all_instructions() if i.name == "conv")
    assert matmul_flops(conv) == 2 * (8 * 4) * 3 * brute(3, 1, 0, 2, 1, 16, 31) * brute(3, 1, 1, 1, 1, 16, 16)


def test_step_time_breakdown_overlap_and_mfu():
    prof = devices.get_profile("h100-sxm")
    scale = devices.time_scale(prof, (8,), ("ici",), "bf16", COMPUTE_COST_PER_FLOP)
    flops = 1e12                                  # per device
    compute = flops * COMPUTE_COST_PER_FLOP       # cost units
    comm = scale.beta[0] * 4.5e9                  # 4.5 GB over NVLink: 10 ms
    st = step_time(scale, compute, comm, 0.0, model_flops=8e12, devices=8,
                   compute_cost_per_flop=COMPUTE_COST_PER_FLOP)
    assert st.compute_s == pytest.approx(1e12 / 989.5e12)
    assert st.communication_s == pytest.approx(0.01)
    assert st.estimated_step_time_s == pytest.approx(st.compute_s + 0.01)
    assert st.overlapped_step_time_s == pytest.approx(0.01)
    assert st.exposed_communication_s == pytest.approx(st.compute_s)
    assert st.flops_per_device == pytest.approx(1e12)
    assert st.mfu == pytest.approx(8e12 / (st.estimated_step_time_s * 989.5e12 * 8))
    assert 0 < st.mfu < 1
    assert step_time(scale, 0, 0, 0, 0, 8, COMPUTE_COST_PER_FLOP).mfu is None
