"""Where XLA caches a dot's operand resharding: the value's own cache or a per-device-group one.

openxla ``spmd/dot_handler.cc`` (read): a dot grouped on one operand's non-contracting dims (``may_group_on_
{lhs,rhs}_non_contracting``; with both possible the lhs when ``lhs_parts * bytes(rhs tile) < rhs_parts *
bytes(lhs tile)``) reshards the *other* operand at the top level, through the value's own cache, to its layout
with the group's devices replicated; whatever is resharded inside the groups goes to
``reshard_cache->groupd_caches[<device groups>]`` (``CreatePerGroupPartitioningState``), one cache per grouping.
So one gather of one value is shared between a dot's top-level resharding and an elementwise user, but not
between a top-level resharding and the same gather made inside another dot's groups
(``autoshard.reshard_cache.dot_top_level_layout``).  Cases are new user 28's Mixtral pairs (F4), cut down:
``p`` is ``dot_general.103`` (lhs matched on ``data``: its model gather is made in the groups), ``q`` is
``.102`` (rhs matched on ``model``: the lhs's model gather is top level).  XLA's figures (GSPMD, 8 fake CPU
devices) are asserted beside hloshard's.  The last case is a strict xfail: two dots gathering one value inside
the same device groups share it in XLA (Mixtral's ``.108`` / ``.109``: 32,768 B each, made once), which the
rule does not model (it would need XLA's full grouping order)."""

from __future__ import annotations

import pytest

from tests.conftest import predicted_beside_xla

pytestmark = [pytest.mark.oracle]

_HEAD = "HloModule m, num_partitions=8\n\nENTRY main {\n"
_A = "{devices=[2,1,4]<=[8]}"                              # tokens over data, hidden over model
_AG = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"   # hidden gathered
_P = "  p = f32[8,64,4,32]{3,2,1,0} dot(a, w), lhs_contracting_dims={2}, rhs_contracting_dims={2}, " \
     "sharding={devices=[2,1,4,1]<=[8]}\n"
_Q = "  q = f32[128,4,32]{2,1,0} dot(a, t), lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}, " \
     "sharding={devices=[2,4,1]<=[8]}\n"
_E = f"  e = f32[8,64,128]{{2,1,0}} exponential(a), sharding={_AG}\n"
_SHAPE = {"p": "f32[8,64,4,32]{3,2,1,0}", "q": "f32[128,4,32]{2,1,0}", "e": "f32[8,64,128]{2,1,0}"}
_OUT = {"p": "{devices=[2,1,4,1]<=[8]}", "q": "{devices=[2,4,1]<=[8]}", "e": _AG}
_LINE = {"p": _P, "q": _Q, "e": _E}


def _module(users):
    body = f"""  x = f32[8,64,128]{{2,1,0}} parameter(0), sharding={_A}
  a = f32[8,64,128]{{2,1,0}} negate(x), sharding={_A}
  w = f32[4,32,128]{{2,1,0}} parameter(1), sharding={{devices=[4,1,2]<=[2,4]T(1,0)}}
  t = f32[8,64,4,32]{{3,2,1,0}} parameter(2), sharding={{devices=[2,1,4,1]<=[8]}}
"""
    body += "".join(_LINE[u] for u in users)
    return body + (f"  ROOT r = ({', '.join(_SHAPE[u] for u in users)}) tuple({', '.join(users)}), "
                   f"sharding={{{', '.join(_OUT[u] for u in users)}}}\n")


_R = "{devices=[2,1,2,1,2]<=[8] last_tile_dim_replicate}"   # Mixtral's reduce_sum.620: half of model
_SAME_GROUPS = f"""  x = f32[8,64,2,32]{{3,2,1,0}} parameter(0), sharding={_R}
  a = f32[8,64,2,32]{{3,2,1,0}} negate(x), sharding={_R}
  w = f32[128,2,32]{{2,1,0}} parameter(1), sharding={{devices=[4,2,1]<=[2,4]T(1,0)}}
  t = f32[8,64,128]{{2,1,0}} parameter(2), sharding={{devices=[2,1,4]<=[8]}}
  p = f32[8,64,128]{{2,1,0}} dot(a, w), lhs_contracting_dims={{2,3}}, rhs_contracting_dims={{1,2}}, sharding={{devices=[2,1,4]<=[8]}}
  q = f32[2,32,128]{{2,1,0}} dot(a, t), lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}, sharding={{devices=[2,1,4]<=[8]}}
  ROOT r = (f32[8,64,128]{{2,1,0}}, f32[2,32,128]{{2,1,0}}) tuple(p, q), sharding={{{{devices=[2,1,4]<=[8]}}, {{devices=[2,1,4]<=[8]}}}}
"""

CASES = {
    # q's top-level gather of a, then an elementwise user needing a in that layout: one gather (q's)
    "top_level_then_elementwise": _module(["q", "e"]),
    # p gathers a inside its data groups: the elementwise user gathers again
    "in_group_then_elementwise": _module(["p", "e"]),
    # p (in its groups) and q (top level) gather a alike: two gathers, in either order
    "in_group_and_top_level": _module(["p", "q"]),
    "top_level_and_in_group": _module(["q", "p"]),
    "same_groups": _SAME_GROUPS,
}

# XLA's ring bytes per device, by instruction tag (measured, jax 0.10.2 CPU, 8 devices)
XLA = {
    "top_level_then_elementwise": {"q": 114688},                # 98,304 gather + 16,384 all-reduce
    "in_group_then_elementwise": {"p": 106496, "e": 98304},     # p: 98,304 + w's 8,192
    "in_group_and_top_level": {"p": 106496, "q": 114688},
    "top_level_and_in_group": {"q": 114688, "p": 106496},
    "same_groups": {"p": 36864, "q": 8192},                     # one 32,768 gather, p's
}


@pytest.fixture(scope="module")
def compared():
    return predicted_beside_xla(_HEAD, CASES)


_GAP = pytest.mark.xfail(strict=True, reason="known gap: a gather two dots make inside the same device groups "
                                             "is shared by XLA's per-group cache; not modelled")
_CASES = [pytest.param(c, marks=_GAP) if c == "same_groups" else c for c in sorted(CASES)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_xla_figures(compared, case):
    c = compared[case]
    assert c.xla_error is None, c.xla_error
    assert {r.name: r.xla_bytes for r in c.instructions if r.xla_bytes} == pytest.approx(XLA[case]), case


@pytest.mark.parametrize("case", _CASES)
def test_predicted_equals_xla(compared, case):
    c = compared[case]
    assert c.predicted_bytes == pytest.approx(c.xla_bytes, rel=1e-9), (case, c.predicted_bytes, c.xla_bytes)
    for r in c.instructions:
        assert r.predicted_bytes == pytest.approx(r.xla_bytes, rel=1e-9, abs=1e-6), (case, r.name)
