"""HS303's group size comes from counts the module states, never from a guess.

A pmap-style module (no header counts; jax writes ``replica_groups={}`` without a channel_id) runs on
as many replicas as it is compiled for, so an all-gather that multiplies dimension 0 by 8 is not an
error; with ``replica_count=4`` in the header it is (4 x f32[4] is f32[16], hand-derived).
"""

from __future__ import annotations

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text

PMAP = """HloModule m{hdr}
ENTRY e {{
  a = f32[4] parameter(0), sharding={{devices=[8]<=[8]}}
  ROOT ag = f32[32] all-gather(a), replica_groups={{}}, dimensions={{0}}
}}
"""


def _hs303(text):
    return [(f.line, f.message) for f in lint_text(text, "t.hlo", LintOptions(select=("HS303",)))]


def test_group_size_unknown_without_header_counts():
    assert _hs303(PMAP.format(hdr="")) == []


def test_group_size_from_the_stated_replica_count():
    found = _hs303(PMAP.format(hdr=", replica_count=4"))
    assert [line for line, _ in found] == [4]
    assert "expected 16 (operand 0 f32[4] gathered over 4 devices)" in found[0][1]


def test_explicit_groups_give_their_own_size():
    text = PMAP.format(hdr="").replace("replica_groups={}", "replica_groups={{0,1,2,3,4,5,6,7}}")
    assert _hs303(text) == []
    assert [line for line, _ in _hs303(text.replace("f32[32]", "f32[16]"))] == [4]
