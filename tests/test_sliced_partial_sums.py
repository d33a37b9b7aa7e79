"""A split result of a dot whose operands share a contracting split over every device, and of a gather whose table
is split over every device on its gathered dim: the search graph offers "compute in the operands' layouts,
all-reduce the whole partial result, slice it to the result tile" (``strategy.dot._sliced_variants``,
``strategy.gather_scatter._sliced_rows``; issue 24, tunix Llama 3's FSDP ``dot_general.77`` / ``gather.1``).

The module: the FSDP layouts of a language model's output-projection gradient (``[B,S,V] x [D,V] -> [B,S,D]``,
both operands split on V over all 8 devices) and of its embedding lookup (table ``[V,D]`` split on V, token ids
split on B), both results written split on B, as XLA's propagation writes them.  Before, the search graph could
only gather the 2 MiB weight / table whole (1,835,008 B each) for that result, so XLA's layouts as a plan of the graph
cost 8.5x their own price (4,161,544 vs 492,032 cost units); now they cost it, and XLA's partitioner (raw
after-spmd-partitioning HLO, jaxlib 0.10.2, 8 devices) moves exactly the new strategies' bytes for the two
instructions (checked: all three tests fail on main's strategies).  One XLA child."""

from __future__ import annotations

import pytest

from hloshard.autoshard import build_graph, evaluate_choice, evaluate_module
from hloshard.autoshard.trivial import complete_plan
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh
from tests.conftest import require_jax
from tests.handler_harness import predicted_collectives, total_ring, xla_collectives

MESH = DeviceMesh.parse("2x4", alpha="0,0", beta="1,1")

MODULE = """HloModule fsdp_head

ENTRY main {
  dlogits = f32[8,16,2048] parameter(0), sharding={devices=[1,1,8]<=[8]}
  w = f32[256,2048] parameter(1), sharding={devices=[1,8]<=[8]}
  table = f32[2048,256] parameter(2), sharding={devices=[8,1]<=[8]}
  ids = s32[8,16,1] parameter(3), sharding={devices=[8,1,1]<=[8]}
  dx = f32[8,16,256] dot(dlogits, w), lhs_contracting_dims={2}, rhs_contracting_dims={1}, sharding={devices=[8,1,1]<=[8]}, metadata={op_name="dx"}
  emb = f32[8,16,256] gather(table, ids), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,256}, sharding={devices=[8,1,1]<=[8]}, metadata={op_name="emb"}
  ROOT out = (f32[8,16,256], f32[8,16,256]) tuple(dx, emb), sharding={{devices=[8,1,1]<=[8]}, {devices=[8,1,1]<=[8]}}
}
"""

#: the all-reduce of the whole f32[8,16,256] partial result over 8 devices: 2 x 7/8 x 131,072 B
ALL_REDUCE = 229376
#: the token ids s32[8,16,1] gathered to every device for the masked local gathers: 7/8 x 512 B
IDS = 448


def _bare_graph():
    module = parse_module(MODULE)
    for i in module.entry.instructions:
        if i.name in ("dx", "emb"):
            i.sharding = None
    return build_graph(module, MESH, "io", None)


@pytest.fixture(scope="module")
def graph():
    return _bare_graph()


def _node(graph, name):
    for v, g in enumerate(graph.nodes):
        if g.instr.name == name:
            return v, g
    raise AssertionError(name)


def _xla_layout_plan(graph):
    """XLA's layouts (the written module's) as a plan of ``graph``: each node held to its strategies of that output
    layout, the rest (which of them, the operands' layouts) completed greedily."""
    written = parse_module(MODULE)
    found = {i.name: i.sharding for i in written.entry.instructions if i.sharding is not None and not i.shape.is_tuple}
    minfo = graph.ctx.minfo
    allowed = [None] * len(graph.nodes)
    for v, g in enumerate(graph.nodes):
        want = found.get(g.instr.name)
        if want is None or g.multi or g.instr.shape.is_tuple:
            continue
        allowed[v] = [q for q, st in enumerate(g.strategies)
                      if st.out is not None and minfo.to_sharding(st.out, len(g.instr.shape.dims)) == want] or None
    return complete_plan(graph.problem, allowed, getattr(graph, "follows", ()))


def _sliced(graph, name):
    _, g = _node(graph, name)
    return [st for st in g.strategies if st.name.endswith("+slice") and st.out[0] and not any(st.out[1:])]


def test_graph_offers_the_sliced_strategies(graph):
    minfo = graph.ctx.minfo
    every = tuple(minfo.axes)
    dx = [st for st in _sliced(graph, "dx") if st.inputs[0][2] == every and st.inputs[1][1] == every]
    emb = [st for st in _sliced(graph, "emb") if st.inputs[0][0] == every and not any(st.inputs[1])]
    assert len(dx) == 1 and len(emb) == 1, ([s.name for s in _sliced(graph, "dx")], [s.name for s in _sliced(graph, "emb")])
    for st in dx + emb:
        assert st.out[0] == every
        assert [c.ring_bytes for c in st.collectives] == [ALL_REDUCE]
        # the whole partial sums are live beside the sliced result (build.scratch_bytes reads the collective)
        assert st.memory == 131072 // 8 and sum(c.nbytes for c in st.collectives) == 131072


def test_xla_layouts_cost_their_own_price_as_a_plan_of_the_graph(graph):
    choice = _xla_layout_plan(graph)
    assert choice is not None
    plan = evaluate_choice(graph, choice)
    own = evaluate_module(parse_module(MODULE), MESH)
    # before: the weight and the table gathered whole for the batch-split results (8.5x the own price)
    assert plan.total == pytest.approx(own.total_cost, rel=1e-4)
    v, g = _node(graph, "dx")
    assert g.strategies[int(choice[v])].name.endswith("|allreduce+slice")
    v, g = _node(graph, "emb")
    assert g.strategies[int(choice[v])].name.endswith("+slice")


@pytest.mark.oracle
def test_sliced_strategies_match_xla(graph):
    require_jax()
    from tests import xla_oracle

    xla = xla_collectives(xla_oracle.spmd_partition(MODULE, 8))
    got: dict = {}
    for c in xla:
        got[c["op_name"]] = got.get(c["op_name"], 0) + c["ring"]
    choice = _xla_layout_plan(graph)
    v, g = _node(graph, "dx")
    dx = g.strategies[int(choice[v])]
    v, g = _node(graph, "emb")
    emb = g.strategies[int(choice[v])]
    # XLA: the dot's partial sums all-reduced whole and sliced; the gather's ids gathered, the masked result
    # all-reduced whole and sliced (the ids' all-gather is the edge's, priced by the resharding planner)
    assert got.get("dx", 0) == total_ring(dx.collectives) == ALL_REDUCE
    assert got.get("emb", 0) == total_ring(emb.collectives) + IDS == ALL_REDUCE + IDS
    assert total_ring(predicted_collectives(parse_module(MODULE), MESH).get("emb", [])) == ALL_REDUCE + IDS
