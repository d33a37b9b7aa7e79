"""Strategy engine: hand-checked handler behaviour on small modules (no solver)."""

from __future__ import annotations

import math

import pytest

from hloshard.autoshard import build_graph
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import COMPUTE_COST_PER_FLOP, MeshInfo, is_mesh_spec

MESH22 = DeviceMesh.parse("2x2", alpha="1,1", beta="0.01,1")
MESH24 = DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1")


def _groups(text, mesh, keep="io"):
    m = parse_module(text)
    g = build_graph(m, mesh, keep)
    return m, g, {n.instr.name: n for n in g.nodes}


def test_enumeration_covers_1d_nd_flattened_and_replicated():
    mi = MeshInfo(MESH24)
    specs = mi.enumerate((16, 32))
    assert ((), ()) in specs                       # replicated
    assert ((0,), ()) in specs and ((), (1,)) in specs   # 1-D splits with partial replication
    assert ((0,), (1,)) in specs and ((1,), (0,)) in specs  # 2-D splits
    assert ((0, 1), ()) in specs                   # flattened mesh: dim 0 over all 8 devices
    assert ((1, 0), ()) in specs                   # ... with the axes in the other order (issue 14)
    # (rank + 1) ** axes = 9 assignments; the 2 that put both axes on one dim come in 2 orders: 11
    assert len(specs) == len(set(specs)) == 11
    # a dim of size 2 cannot take the 4-way axis
    small = mi.enumerate((2, 32))
    assert ((1,), ()) not in small and ((0, 1), ()) not in small and ((0,), (1,)) in small


def test_dot_strategies_cost_allreduce_only_when_contracting_dim_split():
    text = """HloModule m
ENTRY e {
  a = f32[32,64] parameter(0)
  b = f32[64,128] parameter(1)
  ROOT d = f32[32,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    _, g, nodes = _groups(text, MESH22)
    dot = nodes["d"]
    seen_rs = False
    for st in dot.strategies:
        lhs, rhs = st.inputs[0], st.inputs[1]
        assert lhs[1] == rhs[0]                    # contracting dims split alike
        split_contract = bool(lhs[1])
        assert (st.comm > 0) == split_contract, st.name
        assert st.memory == 32 * 128 * 4 // MeshInfo(MESH22).split(a for d in st.out for a in d)
        seen_rs |= "allreduce+slice" in st.name
    names = {st.name: st for st in dot.strategies}
    # the all-reduce variant over mesh axis 1 of the per-device f32[16,128] output: AR(8192 B, n=2)
    ar = [st for st in dot.strategies if st.inputs[0] == ((0,), (1,)) and st.out == ((0,), ())]
    assert len(ar) == 1 and ar[0].comm == pytest.approx(round(1 + 1 * 2 * 0.5 * 8192) + 0.01)
    assert seen_rs
    # the scattered variant is GSPMD's all-reduce of the unscattered tile then a local slice
    # (tests/test_handlers_dot.py): the same all-reduce, plus the dot handler's tie-break
    sc = [st for st in dot.strategies if "allreduce+slice" in st.name]
    assert all(len(st.collectives) == 1 and st.collectives[0].kind == "all-reduce" for st in sc)
    full = [st for st in dot.strategies if st.out == ((0,), (1,))][0]
    assert full.compute == pytest.approx(2 * 32 * 64 * 128 / 4 * COMPUTE_COST_PER_FLOP)
    assert names  # every strategy named


def test_reduce_never_splits_reduced_dim_for_free():
    text = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[1,16,128] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1,16] reduce(p, z), dimensions={2}, to_apply=add
}"""
    _, g, nodes = _groups(text, MESH22)
    red = nodes["r"]
    assert red.follow is not None                  # follows its operand
    for st in red.strategies:
        if st.inputs[0][2]:
            assert st.comm > 0 and st.out[1] == st.inputs[0][1]
        else:
            assert st.comm == 0


def test_reshape_charges_the_seed_allgather_on_the_operand_edge():
    # shared/seeds/000: [2,4,1,1] -> reshape annotated [2,1,1,4] last_tile_dim_replicate on 2x4
    text = open(__file__.replace("test_strategy.py", "../samples/reshape_seed.hlo")).read()
    m, g, nodes = _groups(text, DeviceMesh.parse("2x4"), keep="all")
    assert g.problem.num_edges == 1
    cost = float(g.edge_float[0].min())
    # by hand: the all-gather's result is f16[32,16,1000,256] / 2 per device = 131,072,000 B; over the
    # 4-way axis (alpha = beta = 1): round(1 + 3/4 * 131,072,000) + 0.1 = 98,304,001.1
    assert cost == pytest.approx(98_304_001.1)


def test_followers_align_with_their_operand():
    text = """HloModule m
ENTRY e {
  a = f32[16,32] parameter(0)
  b = f32[16,32] parameter(1)
  t = f32[32,16] transpose(a), dimensions={1,0}
  c = f32[16,32] add(a, b)
  ROOT n = f32[16,32] negate(c)
}"""
    _, g, nodes = _groups(text, MESH24)
    a, t, n = nodes["a"], nodes["t"], nodes["n"]
    assert t.follow is not None and len(t.strategies) == len(a.strategies)
    for sa, st in zip(a.strategies, t.strategies):
        assert st.out == (sa.out[1], sa.out[0])
    assert n.follow is not None
    # followers share one decision in the solver problem
    assert g.solver_problem.num_nodes < g.problem.num_nodes


def test_unknown_opcode_gets_replicated_strategy_and_every_instruction_a_node_or_alias():
    text = """HloModule m
ENTRY e {
  a = f32[16,32] parameter(0)
  c = f32[16,32] custom-call(a), custom_call_target="my_kernel"
  ROOT t = (f32[16,32], f32[16,32]) tuple(a, c)
}"""
    m, g, nodes = _groups(text, MESH24)
    cc = nodes["c"]
    assert len(cc.strategies) == 1 and cc.strategies[0].out == ((), ())
    for instr in m.entry.instructions:
        assert instr in g.ctx.groups


def test_while_body_parameters_follow_the_loop_tuple():
    text = """HloModule m
cond {
  p = (s32[], f32[16,32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[16,32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x = f32[16,32] get-tuple-element(p), index=1
  y = f32[16,32] exponential(x)
  ROOT t = (s32[], f32[16,32]) tuple(i2, y)
}
ENTRY e {
  z = s32[] constant(0)
  a = f32[16,32] parameter(0)
  t0 = (s32[], f32[16,32]) tuple(z, a)
  w = (s32[], f32[16,32]) while(t0), condition=cond, body=body
  ROOT r = f32[16,32] get-tuple-element(w), index=1
}"""
    m, g, nodes = _groups(text, MESH24)
    ctx = g.ctx
    body = m.get_computation("body")
    w = m.entry.get("w")
    # the body parameter's leaf 1 is the while's leaf-1 node
    assert ctx.resolve(body.parameters[0], 1)[0] is ctx.resolve(w, 1)[0]
    # the body's exponential is weighted by the trip count (5, from the condition)
    y = [n for n in g.nodes if n.instr.name == "y"][0]
    assert ctx.weight(y.instr) == 5
