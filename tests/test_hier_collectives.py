"""Hierarchical collectives (issue 27): a collective whose replica groups span a fast (NVLink / ICI) and a
slow (InfiniBand / DCN) mesh axis is priced over its link levels (``cost.collectives.link_levels``) as the
faster of a ring through the nodes (``ring_link_cost``) and the level-by-level schedule
(``hierarchical_link_cost``), ``level_schedule``; checked here against the arithmetic of the README's "Device profiles" lines
with the h100-sxm profile's numbers (450 GB/s and 2 us per NVLink step, 50 GB/s and 8 us per InfiniBand
step per GPU, 3.35 TB/s HBM); the unit model (no ``--device``) keeps XLA's flat formulas."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost import collectives as C
from hloshard.devices import get_profile
from hloshard.mesh import DeviceMesh
from hloshard.mesh_setup import timed_mesh_from_options

B = 4 * 1024 * 1024          # one 4 MiB f32 buffer per device
NV, NV_LAT = 450e9, 2e-6     # h100-sxm ici: bytes/s per GPU one way, seconds per ring step
IB, IB_LAT = 50e9, 8e-6      # h100-sxm dcn: one 400 Gb/s NIC per GPU
HBM = 3.35e12


@pytest.fixture(scope="module")
def two_nodes():
    """16 GPUs as data=2 (InfiniBand) x model=8 (NVLink), priced on h100-sxm."""
    dmesh, scale, _ = timed_mesh_from_options(None, "data=2:dcn,model=8", None, None, None, "h100-sxm")
    return dmesh, scale.seconds_per_unit


def _seconds(cost, spu, tie):
    return (cost - tie) * spu


def test_h100_profile_is_the_one_the_arithmetic_uses():
    p = get_profile("h100-sxm")
    assert (p.ici.bandwidth, p.ici.latency, p.dcn.bandwidth, p.dcn.latency) == (NV, NV_LAT, IB, IB_LAT)
    assert p.sustained_hbm_bandwidth == HBM


def test_levels_of_a_two_node_group(two_nodes):
    mesh, spu = two_nodes
    levels = C.link_levels(mesh, (0, 1))
    assert [(lv.n, lv.axes) for lv in levels] == [(8, (1,)), (2, (0,))]          # fastest first
    assert levels[0].alpha * spu == pytest.approx(7 * NV_LAT) and levels[1].alpha * spu == pytest.approx(IB_LAT)
    assert levels[0].beta * spu == pytest.approx(1 / NV) and levels[1].beta * spu == pytest.approx(1 / IB)
    assert C.link_levels(mesh, (1,)) is None and C.link_levels(mesh, 0) is None   # one link: flat ring
    part = C.link_levels(mesh, (0, 1), group_size=4)   # groups of 4 spanning both: 2 nodes x 2 GPUs
    assert [(lv.n, lv.axes) for lv in part] == [(2, (1,)), (2, (0,))]
    assert part[0].alpha * spu == pytest.approx(NV_LAT)


def test_all_reduce_levels_schedule_is_reduce_scatter_in_node_all_reduce_across_all_gather_in_node(two_nodes):
    mesh, spu = two_nodes
    levels = C.link_levels(mesh, (0, 1))
    link = 2 * (7 / 8 * B / NV + 7 * NV_LAT) + (2 * (1 / 2) * (B / 8) / IB + IB_LAT)
    assert C.hierarchical_link_cost("all-reduce", levels, B) * spu == pytest.approx(link)
    assert link * 1e6 == pytest.approx(62.80, abs=0.01)   # + 2.50 us HBM = round 26's 65.30 us


def test_all_reduce_ring_through_the_nodes_is_paced_by_the_nodes_nics(two_nodes):
    """NCCL's ring over 2 nodes of 8: 8 rings (channels) leave each node, one per GPU's NIC, so the boundary
    passes 8 x 50 = 400 GB/s against NVLink's 450 per GPU; 14 NVLink hops and 1 InfiniBand hop of latency."""
    mesh, spu = two_nodes
    levels = C.link_levels(mesh, (0, 1))
    link = 2 * 15 / 16 * B / min(NV, 8 * IB) + 14 * NV_LAT + IB_LAT
    ring, latency = C.ring_link_cost("all-reduce", levels, B)
    assert ring * spu == pytest.approx(link) and latency * spu == pytest.approx(14 * NV_LAT + IB_LAT)
    assert link * 1e6 == pytest.approx(55.66, abs=0.01)
    hbm = 2 * B / HBM
    got = _seconds(C.all_reduce_cost(mesh, B, (0, 1)), spu, C.ALL_REDUCE_TIE_BREAK)
    assert got == pytest.approx(link + hbm, abs=spu)          # the faster schedule: the ring
    assert got * 1e6 == pytest.approx(58.16, abs=0.01)    # new user 25b's ar2.hlo: 173.79 flat, 65.30 in round 26
    assert C.level_schedule("all-reduce", levels, B)[2] == "ring"
    # an all-reduce's ring pays the levels' latency (14 + 1 hops = 2 x 7 + 1) and fewer bytes per second: the
    # ring at every size here; an all-gather's ring pays 14 NVLink hops against the levels' 7: the levels
    assert C.level_schedule("all-reduce", levels, 4096)[2] == "ring"
    assert C.level_schedule("all-gather", levels, B)[2] == "levels"
    flat_ib = 2 * 15 / 16 * B / IB
    assert got < flat_ib / 2


def test_all_gather_slow_step_moves_the_fast_levels_shard(two_nodes):
    mesh, spu = two_nodes
    link = (1 / 2 * (B / 8) / IB + IB_LAT) + (7 / 8 * B / NV + 7 * NV_LAT)
    ring = 15 / 16 * B / (8 * IB) + 14 * NV_LAT + IB_LAT     # 45.83 us: more latency than the levels' 35.40
    assert C.ring_link_cost("all-gather", C.link_levels(mesh, (0, 1)), B)[0] * spu == pytest.approx(ring)
    assert link < ring
    hbm = (B / 16 + B) / HBM
    got = _seconds(C.all_gather_cost(mesh, B, (0, 1)), spu, C.ALL_GATHER_TIE_BREAK)
    assert got == pytest.approx(link + hbm, abs=spu)


def test_reduce_scatter_fast_step_then_slow_step_on_a_shard(two_nodes):
    mesh, spu = two_nodes
    link = (7 / 8 * B / NV + 7 * NV_LAT) + (1 / 2 * (B / 8) / IB + IB_LAT)
    hbm = (B + B / 16) / HBM
    got = _seconds(C.reduce_scatter_cost(mesh, B, (0, 1)), spu, C.REDUCE_SCATTER_TIE_BREAK)
    assert got == pytest.approx(link + hbm, abs=spu)


def test_all_to_all_one_level_after_the_other_on_the_whole_buffer(two_nodes):
    mesh, spu = two_nodes
    group = 16 * B                       # the resharding convention: the bytes the group holds together
    b = group / 16                       # per device
    link = (7 / 8 * b * (8 / 2) / NV + 7 * NV_LAT) + (1 / 2 * b * (2 / 2) / IB + IB_LAT)
    hbm = 2 * b / HBM
    got = _seconds(C.all_to_all_cost(mesh, group, (0, 1)), spu, C.ALL_TO_ALL_TIE_BREAK)
    assert got == pytest.approx(link + hbm, abs=spu)


def test_one_link_class_keeps_the_flat_ring(two_nodes):
    mesh, spu = two_nodes
    got = _seconds(C.all_reduce_cost(mesh, B, 1), spu, C.ALL_REDUCE_TIE_BREAK)
    assert got == pytest.approx(2 * 7 / 8 * B / NV + 7 * NV_LAT + 2 * B / HBM, abs=spu)
    got = _seconds(C.all_gather_cost(mesh, B, 0), spu, C.ALL_GATHER_TIE_BREAK)
    assert got == pytest.approx(1 / 2 * B / IB + IB_LAT + (B / 2 + B) / HBM, abs=spu)


def test_latency_the_combiner_shares_is_the_levels_latency(two_nodes):
    mesh, spu = two_nodes
    assert C.collective_latency(mesh, "all-reduce", (0, 1)) * spu == pytest.approx(2 * 7 * NV_LAT + IB_LAT)
    assert C.collective_latency(mesh, "all-gather", (0, 1)) * spu == pytest.approx(7 * NV_LAT + IB_LAT)
    assert C.collective_latency(mesh, "all-reduce", (1,)) * spu == pytest.approx(7 * NV_LAT)
    # with the bytes: the latency of the schedule the cost function picks (a 4 MiB all-reduce: the ring's)
    assert C.collective_latency(mesh, "all-reduce", (0, 1), nbytes=B) * spu == pytest.approx(14 * NV_LAT + IB_LAT)
    col = C.PredictedCollective("all-reduce", (0, 1), 16, B)
    assert C.latency_saving(mesh, col, 0.25) * spu == pytest.approx(0.75 * (14 * NV_LAT + IB_LAT))
    col = C.PredictedCollective("all-reduce", (0, 1), 16, 4096)
    assert C.latency_saving(mesh, col, 0.25) * spu == pytest.approx(0.75 * (2 * 7 * NV_LAT + IB_LAT))


def test_unit_model_stays_flat_with_per_axis_prices():
    """Without a device the formulas are XLA auto-sharding's, whatever the per-axis alpha / beta: max alpha,
    max beta, n = product (the values below are the formula's, computed by hand)."""
    mesh = DeviceMesh.parse("2x4", alpha="1,3", beta="0.01,1")
    assert C.link_levels(mesh, (0, 1)) is None
    assert C.all_reduce_cost(mesh, 1000, (0, 1)) == 3 + 1750 + 0.01                 # round(3 + 2*7/8*1000)
    assert C.all_gather_cost(mesh, 1000, (0, 1)) == 3 + 875 + 0.1
    assert C.reduce_scatter_cost(mesh, 1000, (0, 1)) == 3 + 875 + 0.001
    assert C.all_to_all_cost(mesh, 8000, (0, 1)) == 3 + 3500 + 0.001               # 7/8/8 * 8000 * 8/2
    assert C.collective_latency(mesh, "all-reduce", (0, 1)) == 3.0


def test_ar2_module_communication_seconds(tmp_path):
    """The new user's one-collective module: a dot contracting over 16 devices' shards, its result
    replicated: one all-reduce of 4 MiB over data=2:dcn x model=8."""
    path = tmp_path / "ar2.hlo"
    path.write_text("""HloModule ar2, num_partitions=16

ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0), sharding={devices=[1,16]<=[16]}
  b = f32[1024,1024]{1,0} parameter(1), sharding={devices=[16,1]<=[16]}
  ROOT d = f32[1024,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
""")
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "data=2:dcn,model=8", "--device", "h100-sxm",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    comm = json.loads(r.stdout)["step_time"]["breakdown_s"]["communication_s"]
    want = 2 * 15 / 16 * B / (8 * IB) + 14 * NV_LAT + IB_LAT + 2 * B / HBM     # the ring (58.16 us)
    assert comm == pytest.approx(want, rel=1e-4)
