"""A computation called from several sites is costed and sharded per site (hlo.callgraph), as XLA
partitions each call site on its own (CallInliner / FlattenCallGraph)."""

from __future__ import annotations

import numpy as np
import pytest

from hloshard.autoshard import build_graph, solve_module
from hloshard.hlo import parse_module
from hloshard.hlo.callgraph import flatten_call_graph
from hloshard.hlo.printer import print_module
from hloshard.mesh import DeviceMesh

TWO_CALLS = """HloModule twocall, num_partitions=8

%f (a: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64] parameter(0)
  %e = f32[64,64] exponential(%a)
  ROOT %n = f32[64,64] negate(%e)
}

ENTRY %main (x: f32[64,64], y: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %x = f32[64,64] parameter(0), sharding={devices=[8,1]<=[8]}
  %y = f32[64,64] parameter(1), sharding={devices=[1,8]<=[8]}
  %c1 = f32[64,64] call(%x), to_apply=%f
  %c2 = f32[64,64] call(%y), to_apply=%f
  ROOT %t = (f32[64,64], f32[64,64]) tuple(%c1, %c2), sharding={{devices=[8,1]<=[8]}, {devices=[1,8]<=[8]}}
}
"""

SHARED_BODY = """HloModule shared_body, num_partitions=8

%cond3 (s: (s32[], f32[64])) -> pred[] {
  %s = (s32[], f32[64]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %c = pred[] compare(%i, %n), direction=LT
}

%cond5 (s: (s32[], f32[64])) -> pred[] {
  %s = (s32[], f32[64]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(5)
  ROOT %c = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], f32[64])) -> (s32[], f32[64]) {
  %s = (s32[], f32[64]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[64] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %y = f32[64] sine(%x)
  ROOT %r = (s32[], f32[64]) tuple(%i2, %y)
}

ENTRY %main (p: f32[64]) -> f32[64] {
  %p = f32[64] parameter(0)
  %z = s32[] constant(0)
  %t = (s32[], f32[64]) tuple(%z, %p)
  %w1 = (s32[], f32[64]) while(%t), condition=%cond3, body=%body
  %a = f32[64] get-tuple-element(%w1), index=1
  %t2 = (s32[], f32[64]) tuple(%z, %a)
  %w2 = (s32[], f32[64]) while(%t2), condition=%cond5, body=%body
  ROOT %b = f32[64] get-tuple-element(%w2), index=1
}
"""

#: main calls %g twice, %g calls %f
NESTED_CALLS = """HloModule nested
%f (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  ROOT %n = f32[8] negate(%a)
}
%g (b: f32[8]) -> f32[8] {
  %b = f32[8] parameter(0)
  ROOT %c = f32[8] call(%b), to_apply=%f
}
ENTRY %main (p: f32[8]) -> (f32[8], f32[8]) {
  %p = f32[8] parameter(0)
  %x = f32[8] call(%p), to_apply=%g
  %y = f32[8] call(%x), to_apply=%g
  ROOT %t = (f32[8], f32[8]) tuple(%x, %y)
}
"""


def test_flatten_clones_each_extra_site():
    m = parse_module(TWO_CALLS)
    assert flatten_call_graph(m) == [("f", "f.clone1")]
    c1, c2 = m.entry.get("c1"), m.entry.get("c2")
    assert c1.attrs["to_apply"].name == "f" and c2.attrs["to_apply"].name == "f.clone1"
    # the clone is printed right after the original and reparses
    text = print_module(m)
    assert text.index("%f.clone1 (") > text.index("%f (")
    assert [c.name for c in parse_module(text).computations] == ["f", "f.clone1", "main"]
    assert flatten_call_graph(m) == []          # already flat


def test_a_body_shared_by_two_loops_is_weighted_per_loop():
    """The body runs 3 times under %w1 and 5 times under %w2: its sine costs 3x in one copy and 5x in
    the other (the old builder gave the one body a single weight)."""
    m = parse_module(SHARED_BODY)
    g = build_graph(m, DeviceMesh.parse("8"))
    w1, w2 = m.entry.get("w1"), m.entry.get("w2")
    s1 = next(i for i in w1.attrs["body"].instructions if i.opcode == "sine")
    s2 = next(i for i in w2.attrs["body"].instructions if i.opcode == "sine")
    assert w1.attrs["body"] is not w2.attrs["body"]
    assert g.ctx.weight(s1) == 3.0 and g.ctx.weight(s2) == 5.0


def test_two_calls_get_their_own_shardings():
    """x arrives split [8,1], y split [1,8], and each result leaves the way it came: with one
    computation per site nothing moves (objective = the element-wise compute only); with one shared
    computation one of the calls had to be resharded (two all-to-alls under XLA)."""
    m = parse_module(TWO_CALLS)
    res = solve_module(m, DeviceMesh.parse("8"), time_limit=5, deterministic=True)
    # both calls are inlined (hlo.inline, XLA's CallInliner): one copy of %f's body per site
    first, second = m.entry.get("n"), m.entry.get("n.1")
    assert str(first.sharding) == "{devices=[8,1]<=[8]}"
    assert str(second.sharding) == "{devices=[1,8]<=[8]}"
    assert res.evaluation.communication == 0 and res.evaluation.resharding == 0


@pytest.mark.oracle
def test_two_calls_partition_without_collectives_in_xla():
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle

    m = parse_module(TWO_CALLS)
    solve_module(m, DeviceMesh.parse("8"), time_limit=5, deterministic=True)
    text = print_module(m)
    raw = xla_oracle.spmd_partition(text, 8)
    assert xla_oracle.collectives(raw) == []
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    a, b = xla_oracle.run_sharded(text, [x, y])
    np.testing.assert_allclose(a, -np.exp(x), rtol=1e-5)
    np.testing.assert_allclose(b, -np.exp(y), rtol=1e-5)


def test_nested_sharing_is_flattened_and_prints_in_definition_order():
    """main calls %g twice and %g calls %f: after flattening, %g, %g.clone1, %f and %f.clone1 each have
    one call site, and every computation is printed before its first use (the text reparses)."""
    m = parse_module(NESTED_CALLS)
    assert flatten_call_graph(m) == [("g", "g.clone1"), ("f", "f.clone1")]
    again = parse_module(print_module(m))
    sites: dict = {}
    for i in again.all_instructions():
        for c in i.called_computations:
            sites[c.name] = sites.get(c.name, 0) + 1
    assert sites == {"f": 1, "f.clone1": 1, "g": 1, "g.clone1": 1}
    assert again.entry.get("y").attrs["to_apply"].root.attrs["to_apply"].name == "f.clone1"


def test_cloning_is_capped_and_said():
    """Sharing nested 3 deep doubles at each level; with a budget of 2 instructions only the first
    level is cloned (2 instructions) and the rest stays shared, with a warning naming it."""
    m = parse_module(NESTED_CALLS)
    warnings: list = []
    assert flatten_call_graph(m, warnings, max_instructions=2) == [("g", "g.clone1")]
    assert len(warnings) == 1 and "computation f is called from 2 sites" in warnings[0]
    parse_module(print_module(m))
