"""One value all-gathered once for every user that needs it whole (issue 27 / 24, new user 25b's FSDP plan).

XLA's SPMD partitioner makes a replicated operand with ``PartitionedHlo::Replicate()`` or
``Reshard(Replicate())``; both first look in the value's reshard cache for a replicated entry
(``cache_all_gather``), whatever the user's handler.  So an FSDP weight read by the forward dot and by the
backward's input-gradient dot is all-gathered once (new user 25b's GPT-2 FSDP plan: hloshard predicted an
all-gather at each of 24 backward dots, 26.5 MB per device that XLA never moves).  Each module here is
measured by XLA (GSPMD, 8 fake CPU devices) beside ``hloshard cost``'s prediction of the same written
module; the controls check that nothing but a whole-value gather is shared across handlers."""

from __future__ import annotations

import pytest

from tests.conftest import predicted_beside_xla, require_jax

pytestmark = [pytest.mark.oracle]

_HEAD = "HloModule m, num_partitions=8\n\nENTRY main {\n"
_ROWS = "{devices=[8,1]<=[8]}"

CASES = {
    # FSDP: the weight split 8 ways, the batch split 8 ways; the forward dot and the backward dx dot both
    # need the weight whole (one all-gather by XLA; two predicted before)
    "forward_and_backward_dot": f"""
  x = f32[64,256]{{1,0}} parameter(0), sharding={_ROWS}
  w = f32[256,128]{{1,0}} parameter(1), sharding={_ROWS}
  g = f32[64,128]{{1,0}} parameter(2), sharding={_ROWS}
  y = f32[64,128]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={_ROWS}
  dx = f32[64,256]{{1,0}} dot(g, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}, sharding={_ROWS}
  ROOT t = (f32[64,128]{{1,0}}, f32[64,256]{{1,0}}) tuple(y, dx), sharding={{{_ROWS}, {_ROWS}}}
""",
    # a dot and an elementwise user of the same weight, both needing it whole (one all-gather)
    "dot_and_elementwise": f"""
  x = f32[64,256]{{1,0}} parameter(0), sharding={_ROWS}
  w = f32[256,128]{{1,0}} parameter(1), sharding={_ROWS}
  y = f32[64,128]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={_ROWS}
  n = f32[256,128]{{1,0}} negate(w), sharding={{replicated}}
  ROOT t = (f32[64,128]{{1,0}}, f32[256,128]{{1,0}}) tuple(y, n), sharding={{{_ROWS}, {{replicated}}}}
""",
    # control: the dot needs the weight whole, the elementwise user in another split layout -- two
    # collectives (only the whole-value gather is looked up across handlers)
    "whole_and_other_layout": f"""
  x = f32[64,256]{{1,0}} parameter(0), sharding={_ROWS}
  w = f32[256,128]{{1,0}} parameter(1), sharding={_ROWS}
  y = f32[64,128]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={_ROWS}
  n = f32[256,128]{{1,0}} negate(w), sharding={{devices=[1,8]<=[8]}}
  ROOT t = (f32[64,128]{{1,0}}, f32[256,128]{{1,0}}) tuple(y, n), sharding={{{_ROWS}, {{devices=[1,8]<=[8]}}}}
""",
}

#: what the code before the change predicted (bytes per device): each case with a shared gather was 2x XLA
BEFORE = {"forward_and_backward_dot": 229376, "dot_and_elementwise": 229376}


@pytest.fixture(scope="module")
def compared():
    """``{case: Comparison}``: hloshard's prediction beside XLA's collectives, XLA run once (one child)."""
    return predicted_beside_xla(_HEAD, CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_predicted_bytes_equal_xlas(compared, case):
    c = compared[case]
    assert c.xla_error is None, c.xla_error
    assert c.xla_bytes > 0, case
    assert c.predicted_bytes == pytest.approx(c.xla_bytes, rel=1e-9), (case, c.predicted_bytes, c.xla_bytes)
    for row in c.instructions:   # and attributed to the instruction XLA tags (the first user pays)
        assert row.predicted_bytes == pytest.approx(row.xla_bytes, rel=1e-9, abs=1e-6), (case, row.name)
    if case in BEFORE:
        assert BEFORE[case] >= 1.9 * c.xla_bytes


def test_whole_value_gather_is_shared_across_handlers():
    """The pure part, no XLA: the backward dot's gather is served by the forward dot's, the objective of
    ``hloshard cost`` counts it once, and a split-layout user shares nothing."""
    from hloshard.autoshard import evaluate_module
    from hloshard.autoshard.reshard_cache import cached_reshards
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh

    m = parse_module(_HEAD + CASES["forward_and_backward_dot"] + "}\n")
    r = evaluate_module(m, DeviceMesh.for_module(m, "8"))
    cached = cached_reshards(r.graph, r.choice)
    assert [(r.graph.nodes[c.node].instr.name, c.served_by, c.operand.name) for c in cached] == [("dx", "y", "w")]
    assert r.evaluation.cached == pytest.approx(cached[0].saved) and cached[0].saved > 0
    assert r.evaluation.resharding == pytest.approx(float(r.evaluation.edge_cost.sum()))
    m2 = parse_module(_HEAD + CASES["whole_and_other_layout"] + "}\n")
    r2 = evaluate_module(m2, DeviceMesh.for_module(m2, "8"))
    assert cached_reshards(r2.graph, r2.choice) == []


def test_shared_gather_is_one_buffer_as_xlas_memory():
    """Memory: the weight gathered once is one buffer, live from the forward dot to the backward dot (an
    entry parameter's gather is made at the program's start), so the predicted peak equals XLA's
    ``memory_analysis()`` (172,048 B per device); the code before priced one gathered copy per dot
    (303,120 B)."""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.xla_memory import xla_memory

    text = _HEAD + CASES["forward_and_backward_dot"] + "}\n"
    m = parse_module(text)
    r = evaluate_module(m, DeviceMesh.for_module(m, "8"))
    (xm,) = xla_memory([text], 8)
    assert xm.error is None, xm.error
    assert r.evaluation.peak_memory == xm.total == 172048
