"""Issue 27: a mesh axis whose devices span nodes (``--mesh 16`` or ``4x4``'s outer axis on 8-GPU nodes) carries
the links inside it (``devices.axis_pieces``, ``DeviceMesh.apply_levels``); its collectives are priced over those
levels (``cost.collectives.link_levels``) like the same devices written as two axes; ``priced_mesh`` splits it at
the node boundary; a sub-axis is priced at the links its own devices cross (a refined mesh, the coarse mesh,
``DeviceMesh.flattened``).  Checked against hand arithmetic with h100-sxm's numbers (450 GB/s and 2 us per NVLink
step, 50 GB/s and 8 us per InfiniBand step per GPU, 3.35 TB/s HBM)."""

from __future__ import annotations

import pytest

from hloshard.autoshard.evaluate import user_mesh
from hloshard.cost import collectives as C
from hloshard.devices import LinkPiece, pieces_ring_latency, sub_axis_pieces
from hloshard.mesh import DeviceMesh
from hloshard.mesh_setup import mesh_from_options, timed_mesh_from_options

B = 4 * 1024 * 1024
NV, NV_LAT = 450e9, 2e-6
IB, IB_LAT = 50e9, 8e-6
HBM = 3.35e12


def _mesh(spec):
    dmesh, scale, _ = timed_mesh_from_options(None, spec, None, None, None, "h100-sxm")
    return dmesh, scale.seconds_per_unit


def _seconds(cost, spu, tie):
    return (cost - tie) * spu


def _links(dmesh, spu):
    """Per axis (GB/s, alpha in us)."""
    return [(round(1 / (b * spu) / 1e9, 6), round(a * spu * 1e6, 6)) for a, b in zip(dmesh.alpha, dmesh.beta)]


def test_sub_axis_pieces_cut_the_levels_at_their_boundaries():
    ici, dcn = LinkPiece(8, 2.0, 1.0, "ici"), LinkPiece(2, 8.0, 9.0, "dcn")
    assert sub_axis_pieces((ici, dcn), 1, 16) == (ici, dcn)                   # the whole axis: both levels
    assert sub_axis_pieces((ici, dcn), 1, 2) == (dcn,)                        # the major 2: across nodes
    assert sub_axis_pieces((ici, dcn), 2, 8) == (ici,)                        # the minor 8: inside a node
    assert sub_axis_pieces((ici, dcn), 1, 4) == (LinkPiece(2, 2.0, 1.0, "ici"), dcn)   # stride 4: 2 per node
    assert sub_axis_pieces((ici, dcn), 4, 4) == (LinkPiece(4, 2.0, 1.0, "ici"),)
    four, three = LinkPiece(4, 2.0, 1.0), LinkPiece(3, 8.0, 9.0)
    assert sub_axis_pieces((four, three), 1, 6) == (LinkPiece(2, 2.0, 1.0), three)   # stride 2: 2 of each 4
    assert sub_axis_pieces((four, three), 2, 3) is None     # stride 2 over 3 devices: 0, 2 | 4 crosses unevenly
    with pytest.raises(ValueError):
        sub_axis_pieces((ici, dcn), 3, 4)
    # a ring of 16 through 2 nodes of 8: 14 NVLink hops and 1 InfiniBand hop
    assert pieces_ring_latency((ici, dcn)) == 14 * 2.0 + 1 * 8.0
    assert pieces_ring_latency((ici,)) == 7 * 2.0


def test_an_axis_over_two_nodes_is_split_at_the_node_and_priced_like_two_axes():
    m16, spu = _mesh("16")
    assert m16.user_shape == (16,) and m16.shape == (2, 8)           # split at the node boundary internally
    assert [m16.axis_label(k) for k in range(2)] == ["0:(1)2", "0:(2)8"]
    assert _links(m16, spu) == [(50.0, 8.0), (450.0, 14.0)]         # each sub-axis at its own link
    m2x8, _ = _mesh("data=2:dcn,model=8")
    for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        assert C.collective_cost(kind, m16, B, (0, 1)) == C.collective_cost(kind, m2x8, B, (0, 1)), kind
    # the 4 MiB all-reduce over all 16: NCCL's ring, the node's 8 NICs (400 GB/s) slower than NVLink (450)
    ring = 2 * 15 / 16 * B / (8 * IB) + 14 * NV_LAT + IB_LAT
    got = _seconds(C.all_reduce_cost(m16, B, (0, 1)), spu, C.ALL_REDUCE_TIE_BREAK)
    assert got == pytest.approx(ring + 2 * B / HBM, abs=spu)
    assert got * 1e6 == pytest.approx(58.16, abs=0.01)          # priced flat at InfiniBand before: 173.79 us
    # the all-gather (B its result): the levels, 7 NVLink + 1 InfiniBand latencies against the ring's 14 + 1
    levels = (7 / 8 * B / NV + 7 * NV_LAT) + (1 / 2 * (B / 8) / IB + IB_LAT)
    got = _seconds(C.all_gather_cost(m16, B, (0, 1)), spu, C.ALL_GATHER_TIE_BREAK)
    assert got == pytest.approx(levels + (B / 16 + B) / HBM, abs=spu)
    assert got * 1e6 == pytest.approx(36.73, abs=0.01)


def test_the_unsplit_axis_carries_its_levels():
    """The user's mesh of the split one (``evaluate.user_mesh``: the coarse fallback's unrefined mesh) keeps the
    links inside the axis: one axis of 16, priced as the two-level group."""
    m16, spu = _mesh("16")
    whole = user_mesh(m16)
    assert whole.shape == (16,) and whole.axis_levels is not None
    assert [(p.size, p.link) for p in whole.axis_levels[0]] == [(8, "ici"), (2, "dcn")]
    assert _links(whole, spu) == [(50.0, 36.0)]     # flat fallback at the slow link; alpha the ring's 14 x 2 + 8
    assert C.all_reduce_cost(whole, B, 0) == C.all_reduce_cost(m16, B, (0, 1))
    assert C.all_gather_cost(whole, B, 0) == C.all_gather_cost(m16, B, (0, 1))
    assert C.collective_latency(whole, "all-gather", 0, nbytes=B) * spu == pytest.approx(7 * NV_LAT + IB_LAT)


def test_4x4_outer_axis_holds_two_gpus_of_each_node():
    """4x4 on 8-GPU nodes: the outer axis' groups {0, 4, 8, 12} hold 2 GPUs of each of 2 nodes; it is split
    into (1)2 across the nodes and (2)2 inside; a 4 MiB all-reduce over it: the levels (an all-reduce of
    the half shard across, at one NIC per GPU) beat the ring, whose boundary passes only 2 NICs per node."""
    m, spu = _mesh("4x4")
    assert m.shape == (2, 2, 4) and _links(m, spu) == [(50.0, 8.0), (450.0, 2.0), (450.0, 6.0)]
    levels = 2 * (1 / 2 * B / NV + NV_LAT) + 2 * (1 / 2) * (B / 2) / IB + IB_LAT
    ring = 2 * 3 / 4 * B / (2 * IB) + 2 * NV_LAT + IB_LAT
    assert levels < ring
    got = _seconds(C.all_reduce_cost(m, B, (0, 1)), spu, C.ALL_REDUCE_TIE_BREAK)
    assert got == pytest.approx(levels + 2 * B / HBM, abs=spu)
    assert got * 1e6 == pytest.approx(65.77, abs=0.01)


def test_a_flattened_mesh_refined_prices_each_sub_axis_at_its_links():
    """The coarse mesh (``autoshard.coarse.coarse_mesh``) is the 1-D mesh of the devices refined at the
    module's cuts; round 26 priced every sub-axis of it at InfiniBand (the largest beta)."""
    m, spu = _mesh("data=2:dcn,model=8")
    flat = m.flattened()
    assert flat.shape == (16,) and [(p.size, round(1 / (p.beta * spu) / 1e9, 6)) for p in flat.axis_levels[0]] \
        == [(8, 450.0), (2, 50.0)]
    coarse = flat.refine((2, 2, 4))
    assert _links(coarse, spu) == [(50.0, 8.0), (450.0, 2.0), (450.0, 6.0)]
    assert coarse.axis_levels is None
    assert C.all_reduce_cost(flat, B, 0) == C.all_reduce_cost(m, B, (0, 1))
    # one link only (2x4 inside a node): the old 1-D mesh, max alpha and beta, no levels
    one, _ = _mesh("2x4")
    f = one.flattened()
    assert f.axis_levels is None and f.alpha == (max(one.alpha),) and f.beta == (max(one.beta),)


def test_the_unit_model_has_no_levels_and_no_split():
    dm = mesh_from_options(None, "16", None, None, None)
    assert dm.shape == (16,) and dm.axis_levels is None and dm.user_levels is None
    f = DeviceMesh.parse("2x4", alpha="1,3", beta="0.01,1").flattened()
    assert (f.shape, f.alpha, f.beta, f.axis_levels) == ((8,), (3.0,), (1.0,), None)


def test_a_tpu_keeps_the_level_by_level_schedule():
    """On a TPU no ring through slices: an all-reduce over ``2:dcn x 64`` (two slices of 64 chips) on tpu-v5e is
    the levels' reduce-scatter in the slice, all-reduce of the 1/64 shard across, all-gather back, though a ring
    paced by ICI (64 chips' DCN shares, 64 x 3.125 = 200 GB/s, outrun ICI's 100) would be cheaper."""
    from hloshard.devices import get_profile
    p = get_profile("tpu-v5e")
    dm, scale, _ = timed_mesh_from_options(None, "2:dcn x 64", None, None, None, "tpu-v5e")
    spu = scale.seconds_per_unit
    ici, dcn = p.ici, p.dcn
    levels = (2 * 63 / 64 * B / ici.bandwidth + 2 * 63 * ici.latency
              + 2 * (1 / 2) * (B / 64) / dcn.bandwidth + dcn.latency)
    ring = 2 * 127 / 128 * B / min(ici.bandwidth, 64 * dcn.bandwidth) + 2 * 63 * ici.latency + dcn.latency
    assert ring < levels
    lv = C.link_levels(dm, (0, 1))
    assert C.ring_link_cost("all-reduce", lv, B)[0] * spu == pytest.approx(ring)
    hbm = 2 * B / p.sustained_hbm_bandwidth
    got = _seconds(C.all_reduce_cost(dm, B, (0, 1)), spu, C.ALL_REDUCE_TIE_BREAK)
    assert got == pytest.approx(levels + hbm, abs=spu)
    assert not C.ring_schedules(dm) and C.ring_schedules(_mesh("data=2:dcn,model=8")[0])
