"""Collective cost formulas (XLA auto-sharding model), checked against hand-computed values."""

from __future__ import annotations

import pytest

from hloshard.cost import collectives as C
from hloshard.mesh import DeviceMesh


@pytest.fixture
def mesh24():
    # the auto_sharding_test.cc convention: alpha (1,1), beta (0.01,1)
    return DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1")


@pytest.fixture
def mesh22():
    return DeviceMesh.parse("2x2", alpha="1,1", beta="0.01,1")


def test_round_half_away_from_zero():
    assert C.round_half_away(2.5) == 3.0
    assert C.round_half_away(3.5) == 4.0
    assert C.round_half_away(-2.5) == -3.0
    assert C.round_half_away(2.4999) == 2.0
    assert round(2.5) == 2  # Python's banker's rounding would differ


def test_all_gather_seed(mesh24):
    # issue #12392: gather f16[16,16,1000,256] (131,072,000 B) over mesh axis 1 (4 devices)
    # round(1 + 1 * 3/4 * 131072000) + 0.1 = 98304001.1
    assert C.all_gather_cost(mesh24, 131_072_000, 1) == pytest.approx(98_304_001.1, abs=1e-6)


def test_all_gather_chain_2x2(mesh22):
    # xla_autosharding.md section 4: f32[32,128] (16384 B) [2,2] -> replicated, gather mesh 0 then 1
    # AG(8192, 0) = round(1 + 0.01*0.5*8192) + 0.1 = round(41.96) + 0.1 = 42.1
    # AG(16384, 1) = round(1 + 0.5*16384) + 0.1 = 8193.1 ; total 8235.2
    a = C.all_gather_cost(mesh22, 8192, 0)
    b = C.all_gather_cost(mesh22, 16384, 1)
    assert a == pytest.approx(42.1)
    assert b == pytest.approx(8193.1)
    assert a + b == pytest.approx(8235.2)


def test_all_reduce(mesh22, mesh24):
    # AR(8192 B, n=2, axis 1) = round(1 + 1 * 2*1/2 * 8192) + 0.01 = 8193.01
    assert C.all_reduce_cost(mesh22, 8192, 1) == pytest.approx(8193.01)
    # 1-byte all-reduces behind the replication penalty: 2x4 axis 0: round(1 + 0.01) = 1 -> 1.01;
    # axis 1: round(1 + 2*3/4) = round(2.5) = 3 (half away from zero) -> 3.01
    assert C.all_reduce_cost(mesh24, 1, 0) == pytest.approx(1.01)
    assert C.all_reduce_cost(mesh24, 1, 1) == pytest.approx(3.01)


def test_all_reduce_two_axes(mesh24):
    # several axes: alpha = max = 1, beta = max = 1, n = 8: round(1 + 2*7/8 * 800) + 0.01 = 1401.01
    assert C.all_reduce_cost(mesh24, 800, (0, 1)) == pytest.approx(1401.01)


def test_replicated_penalty():
    assert C.replicated_penalty(DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1")) == 4.0
    assert C.replicated_penalty(DeviceMesh.parse("2x4")) == 5.0  # 2.01 + 3.01 -> round(5.02)
    assert C.replicated_penalty(DeviceMesh.parse("2x2", alpha="1,1", beta="0.01,1")) == 3.0


def test_reduce_scatter(mesh24):
    # round(1 + 1 * 3/4 * 4000) + 0.001 = 3001.001
    assert C.reduce_scatter_cost(mesh24, 4000, 1) == pytest.approx(3001.001)


def test_all_to_all(mesh24):
    # round(1 + 1 * 3/4/4 * 131072000 * 4/2) + 0.001 = 1 + 49152000 + 0.001
    assert C.all_to_all_cost(mesh24, 131_072_000, 1) == pytest.approx(49_152_001.001)
    # n = 2 on axis 0: round(1 + 0.01 * 1/2/2 * 1000 * 1) + 0.001 = round(3.5) -> 4.001
    assert C.all_to_all_cost(mesh24, 1000, 0) == pytest.approx(4.001)


def test_tie_breaks_order(mesh24):
    b = 1 << 20
    ag = C.all_gather_cost(mesh24, b, 1)
    rs = C.reduce_scatter_cost(mesh24, b, 1)
    assert ag - rs == pytest.approx(0.099)


def test_collective_permute(mesh24):
    # device 0 (0,0) -> 5 (1,1): both axes differ: (1 + 0.01*100) + (1 + 1*100) = 103
    assert C.collective_permute_cost(mesh24, 100, [(0, 5)]) == pytest.approx(103.0)
    # 0 -> 1 differs on axis 1 only: 1 + 100 = 101; max over pairs
    assert C.collective_permute_cost(mesh24, 100, [(0, 1), (0, 4)]) == pytest.approx(101.0)
    assert C.collective_permute_cost(mesh24, 100, [(3, 3)]) == 0.0
    assert C.collective_permute_cost(mesh24, 100, []) == 0.0
    with pytest.raises(ValueError):
        C.collective_permute_cost(mesh24, 100, [(0, 9)])


def test_variadic_one_alpha(mesh24):
    # a tuple all-reduce pays one alpha over the summed bytes: cheaper than two separate ones
    together = C.all_reduce_cost(mesh24, [400, 600], 1)
    assert together == C.all_reduce_cost(mesh24, 1000, 1) == pytest.approx(1501.01)
    apart = C.all_reduce_cost(mesh24, 400, 1) + C.all_reduce_cost(mesh24, 600, 1)
    assert apart == pytest.approx(601.01 + 901.01)
    assert apart - together == pytest.approx(1.01)


def test_group_size_subaxis(mesh24):
    # groups of 2 along an axis of size 4: n = 2 -> round(1 + 1/2 * 1000) + 0.1 = round(501) + 0.1
    assert C.all_gather_cost(mesh24, 1000, 1, group_size=2) == pytest.approx(501.1)


def test_errors(mesh24):
    with pytest.raises(ValueError):
        C.all_gather_cost(mesh24, 10, 2)
    with pytest.raises(ValueError):
        C.all_gather_cost(mesh24, 10, ())
    with pytest.raises(ValueError):
        C.all_gather_cost(mesh24, -1, 0)
    with pytest.raises(ValueError):
        C.collective_cost("all-everything", mesh24, 10, 0)


def test_dispatch(mesh24):
    assert C.collective_cost("all-gather", mesh24, 131_072_000, 1) == pytest.approx(98_304_001.1)
    assert C.collective_cost("dynamic-slice", mesh24, 10 ** 9) == 0.0
    assert C.collective_cost("collective-permute", mesh24, 100, pairs=[(0, 1)]) == pytest.approx(101.0)
