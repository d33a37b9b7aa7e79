"""Issue 27: the all-gathers of resharding edges from values that depend on no collective (an FSDP-style
plan's gathered parameters) share latency as XLA's all-gather combiner merges them
(:func:`hloshard.cost.combiner.edge_savings`, priced in ``autoshard.build.in_edges``), with ``--device``
only."""

from __future__ import annotations

import numpy as np
import pytest

from hloshard.cost.collectives import latency_saving
from hloshard.cost.combiner import edge_savings, independent_values, latency_share
from hloshard.hlo import parse_module
from hloshard.hlo.shape import parse_shape

#: two layers whose bf16 weights are converted from f32 parameters; the second layer's input depends on
#: the first dot (a collective may sit there), its weight does not
TWO_LAYERS = """HloModule two, num_partitions=8

ENTRY e {
  x = f32[64,256] parameter(0)
  w0 = f32[256,256] parameter(1)
  w1 = f32[256,256] parameter(2)
  c0 = bf16[256,256] convert(w0)
  c1 = bf16[256,256] convert(w1)
  xb = bf16[64,256] convert(x)
  d0 = bf16[64,256] dot(xb, c0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r0 = bf16[64,256] tanh(d0)
  ROOT d1 = bf16[64,256] dot(r0, c1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _mesh(device):
    from hloshard.mesh_setup import timed_mesh_from_options

    m = parse_module(TWO_LAYERS)
    mesh, _, _ = timed_mesh_from_options(m, "2x4", None, None, None, device)
    return m, mesh


def test_independent_values_are_upstream_of_every_collective():
    """Parameters and the converts of parameters depend on no barrier; the dot and what follows it do.
    The class counts the array uses of those values: xb, c0, c1 by the dots, and the three converts'
    operands."""
    comp = parse_module(TWO_LAYERS).entry
    free, k = independent_values(comp)
    names = {i.name for i in comp.instructions if id(i) in free}
    assert names == {"x", "w0", "w1", "c0", "c1", "xb"}
    assert k == 6


def test_edge_saving_is_alpha_times_the_rest_of_the_share_per_gather():
    """Gathering a weight split over the mesh's second axis (S1@1 -> replicated) is one all-gather over
    axis 1: in a class of 6 it saves alpha x (1 - 1/6); a pair that moves nothing, a class of one and a
    mesh without device prices save nothing."""
    from hloshard.cost.reshard import plan

    m, mesh = _mesh("tpu-v5e")
    from hloshard.strategy.base import MeshInfo

    minfo = MeshInfo(mesh)
    shape = parse_shape("bf16[256,256]")
    split, rep = ((), (1,)), ((), ())
    cols = plan(shape, minfo.to_sharding(split, 2), minfo.to_sharding(rep, 2), mesh).predicted_collectives()
    assert [c.kind for c in cols] == ["all-gather"]
    want = latency_saving(mesh, cols[0], latency_share(cols[0].nbytes, 6))
    assert want > 0
    s = edge_savings(mesh, shape, [split, rep], [rep, split], minfo.to_sharding, 6, {})
    assert s[0, 0] == pytest.approx(want)
    assert s[1, 1] == 0.0 and s[0, 1] == 0.0       # the same spec; replicated -> split slices locally
    assert edge_savings(mesh, shape, [split], [rep], minfo.to_sharding, 1, {}) is None
    # one build's cache holds a pair's collectives for every class size: a class of 3 after one of 6
    # saves what a fresh cache says for 3, not the 6's saving
    cache: dict = {}
    edge_savings(mesh, shape, [split, rep], [rep, split], minfo.to_sharding, 6, cache)
    s3 = edge_savings(mesh, shape, [split, rep], [rep, split], minfo.to_sharding, 3, cache)
    assert s3[0, 0] == latency_saving(mesh, cols[0], latency_share(cols[0].nbytes, 3)) < s[0, 0]
    np.testing.assert_array_equal(s3, edge_savings(mesh, shape, [split, rep], [rep, split], minfo.to_sharding, 3, {}))
    # a pair whose resharding costs nothing (or is not allowed) saves nothing
    costs = np.array([[0.0, 1.0], [np.inf, 0.0]])
    assert edge_savings(mesh, shape, [split, rep], [rep, split], minfo.to_sharding, 6, {}, costs=costs) is None
    _, bare = _mesh(None)
    assert edge_savings(bare, shape, [split], [rep], MeshInfo(bare).to_sharding, 6, {}) is None


def _edge(graph, src_name, dst_name):
    for (u, v), m, contribs in zip(graph.problem.edges.tolist(), graph.edge_float, graph.edge_info):
        if graph.nodes[u].instr.name == src_name and graph.nodes[v].instr.name == dst_name:
            return u, v, m
    raise AssertionError(f"no edge {src_name} -> {dst_name}")


def test_build_lowers_edges_from_independent_values_only():
    """In the cost graph with a device, the edge c1 -> d1 (a converted weight) is its resharding cost less
    the saving, entry by entry; the edge r0 -> d1 (after a dot) is the resharding cost as it was; without
    a device every edge is the resharding cost."""
    from hloshard.autoshard.build import build_graph
    from hloshard.autoshard.resharder import _Resharder

    for device in ("tpu-v5e", None):
        m, mesh = _mesh(device)
        g = build_graph(m, mesh, "none")
        resh = _Resharder(g.ctx)
        for src, lowered in (("c1", device is not None), ("r0", False)):
            u, v, got = _edge(g, src, "d1")
            a, b = g.nodes[u], g.nodes[v]
            shape = a.instr.shape
            srcs = [s.out for s in a.strategies]
            dsts = [s.inputs[1 if src == "c1" else 0] for s in b.strategies]
            full = resh.matrix(shape, srcs, dsts)
            if not lowered:
                np.testing.assert_allclose(got, full)
                continue
            k = independent_values(m.entry)[1]
            saved = edge_savings(mesh, shape, srcs, dsts, g.ctx.minfo.to_sharding, k, {}, costs=full)
            assert saved is not None and saved.max() > 0
            np.testing.assert_allclose(got, np.maximum(full - saved, 0.0))
            assert (got < full).sum() > 0

