"""Untrusted input cannot make the cost-graph build run away: the layouts enumerated per array shape
are bounded (:data:`hloshard.strategy.base.LAYOUT_ASSIGNMENT_LIMIT`), and a deadline stops the build
inside one large resharding matrix, not only between matrices (a 4-instruction module on a 4x4x4x4
mesh ran 76 s past a 10 s ``--time-limit``; new-user trial, round 11)."""
from __future__ import annotations

import time

import pytest

from hloshard.autoshard.build import BuildStopped, build_graph
from hloshard.autoshard.resharder import DEADLINE_ROWS, PastDeadline, _Resharder
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import LAYOUT_ASSIGNMENT_LIMIT, MeshInfo, layout_dims

RANK12 = """HloModule m

ENTRY e {
  p = f32[2,2,2,2,2,2,2,2,2,2,2,2] parameter(0)
  ROOT n = f32[2,2,2,2,2,2,2,2,2,2,2,2] negate(p)
}
"""

RANK4 = """HloModule m

ENTRY e {
  p = f32[64,64,64,64] parameter(0)
  t = f32[64,64,64,64] transpose(p), dimensions={3,2,1,0}
  ROOT n = f32[64,64,64,64] negate(t)
}
"""


def test_every_dim_is_a_candidate_below_the_limit():
    assert layout_dims([8, 128, 256], 3) == [0, 1, 2]
    assert layout_dims([2] * 6, 3) == list(range(6))        # 7 ** 3 <= limit


def test_large_rank_on_many_axes_keeps_the_largest_dims():
    dims = [2, 2, 64, 2, 2, 2, 32, 2, 2, 2, 2, 128]
    kept = layout_dims(dims, 6)
    assert (len(kept) + 1) ** 6 <= LAYOUT_ASSIGNMENT_LIMIT < (len(kept) + 2) ** 6
    assert kept == [2, 6, 11]                               # the three largest, in dim order


def test_enumeration_is_bounded_on_a_six_axis_mesh():
    minfo = MeshInfo(DeviceMesh.parse("2x2x2x2x2x2"))
    specs = minfo.enumerate([2] * 12)
    assert 1 < len(specs) <= LAYOUT_ASSIGNMENT_LIMIT
    assert all(len(spec) == 12 for spec in specs)


def test_deadline_stops_inside_an_edge_matrix():
    """A matrix of more rows than are priced between two reads of the clock raises PastDeadline once
    the deadline has passed (the build turns it into BuildStopped, exit 3); without one it is priced."""
    g = build_graph(parse_module(RANK4), DeviceMesh.parse("2x2x2"))
    shape = g.schedule[0].shape
    specs = g.ctx.minfo.enumerate(list(shape.dims))
    assert len(specs) > DEADLINE_ROWS
    with pytest.raises(PastDeadline):
        _Resharder(g.ctx, deadline=time.monotonic() - 1.0).matrix(shape, specs, specs)
    m = _Resharder(g.ctx).matrix(shape, specs, specs)
    assert m.shape == (len(specs), len(specs)) and (m.diagonal() == 0).all() and m.max() > 0


def test_build_deadline_reports_a_timeout():
    with pytest.raises(BuildStopped) as info:
        build_graph(parse_module(RANK4), DeviceMesh.parse("4x4x4x4"), deadline=time.monotonic())
    assert info.value.status == "timeout"


def test_no_deadline_builds_the_rank12_module_on_three_axes():
    g = build_graph(parse_module(RANK12), DeviceMesh.parse("2x2x2"))
    assert len(g.nodes) == 2 and all(len(n.strategies) > 1 for n in g.nodes)


def test_the_table_reads_the_check_inside_a_row():
    """``resharding_cost_table(check=...)`` calls ``check`` before every row and while it plans pairs, and
    what ``check`` raises propagates (it is not a pair left NaN): one row of a 6-axis matrix on a rank-6
    tensor planned for 22 s past a 10 s ``--time-limit`` (new user 14, finding 3)."""
    from hloshard.cost.reshard import CHECK_PLANS, clear_cache, resharding_cost_table

    mesh = DeviceMesh.parse("2x2x2x2")
    minfo = MeshInfo(mesh)
    shape = parse_module(RANK4).entry.instructions[0].shape
    shardings = [minfo.to_sharding(s, 4) for s in minfo.enumerate(list(shape.dims))]
    clear_cache()
    calls = []
    resharding_cost_table(shape, shardings[:2], shardings, mesh, check=lambda: calls.append(1))
    assert len(shardings) > CHECK_PLANS and len(calls) > 2   # the rows, and inside them
    clear_cache()

    class Stop(Exception):
        pass

    def stop():
        raise Stop

    with pytest.raises(Stop):
        resharding_cost_table(shape, shardings[:1], shardings, mesh, check=stop)
