"""Buffers of a scan-heavy training step that XLA's CPU backend allocates (hloshard.cost.liveness):
``HloCSE`` of the backward's recomputed broadcasts, a reduce's fusion that keeps a broadcast read outside
it, and a ``while`` state copy made as soon as its init exists.  Found in XLA's buffer assignment of new
user 19's Mamba-style LM (BENCHMARKS.md, round 19 scanmem); the hand modules below are small cases of the
same rules, their figures read in XLA's memory_analysis() (8 CPU devices, jaxlib 0.10.2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost.liveness import cse_representative, is_fused
from hloshard.hlo import parse_module

_R = ", sharding={replicated}"


def _reduce_module(merged: bool) -> str:
    """``y = exp(x) * broadcast(p)`` is an output; ``reduce(y * broadcast(p))`` another: the second read
    of the broadcast is a second, identical ``broadcast`` instruction (``merged``) or the same one."""
    second = "b2" if merged else "b1"
    b2 = f"  b2 = f32[64,256] broadcast(p), dimensions={{1}}{_R}\n" if merged else ""
    return f"""HloModule cse_hand, num_partitions=8

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  p = f32[256] parameter(0){_R}
  x = f32[64,256] parameter(1){_R}
  b1 = f32[64,256] broadcast(p), dimensions={{1}}{_R}
  e = f32[64,256] exponential(x){_R}
  y = f32[64,256] multiply(e, b1){_R}
{b2}  m = f32[64,256] multiply(y, {second}){_R}
  z = f32[] constant(0){_R}
  s = f32[64] reduce(m, z), dimensions={{1}}, to_apply=add{_R}
  ROOT t = (f32[64,256], f32[64]) tuple(y, s), sharding={{{{replicated}}, {{replicated}}}}
}}
"""


# XLA (buffer assignment of both modules): p 1,024 + x 65,536 arguments, y 65,536 + s 256 outputs
# (+16 B of the output tuple), and one 65,536 B temp: the broadcast (``wrapped_broadcast``), which the
# reduce's XNNPACK fusion reads from a buffer since y's fusion reads it too; HloCSE made b1 and b2 one
# instruction first.  memory_analysis(): 66,560 + 65,808 + 65,536 = 197,904 for both modules.  The model
# before round 19: 132,368 for both (the broadcast fused everywhere).
XLA_TOTAL = 197_904


@pytest.mark.parametrize("merged", [True, False], ids=["two_identical_broadcasts", "one_broadcast"])
def test_a_broadcast_read_by_a_reduce_and_outside_keeps_a_buffer(tmp_path, merged):
    src = tmp_path / "m.hlo"
    src.write_text(_reduce_module(merged))
    r = CliRunner().invoke(main, ["cost", str(src), "--mesh", "8", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["peak_memory_per_device"] == XLA_TOTAL


def test_cse_merges_identical_broadcasts_only():
    m = parse_module(_reduce_module(True))
    get = m.entry.get
    assert cse_representative(get("b2")) is get("b1")
    assert cse_representative(get("b1")) is get("b1")
    assert is_fused(get("b2")) and not is_fused(get("b1"))
    # another sharding written on one of them: two instructions for the partitioned module, not merged
    other = parse_module(_reduce_module(True).replace(
        "  b2 = f32[64,256] broadcast(p), dimensions={1}, sharding={replicated}",
        "  b2 = f32[64,256] broadcast(p), dimensions={1}, sharding={devices=[8,1]<=[8]}"))
    assert cse_representative(other.entry.get("b2")) is other.entry.get("b2")
    # read by the reduce's multiply only: fused into it (no buffer), as before
    alone = parse_module(_reduce_module(False).replace("multiply(e, b1)", "multiply(e, x)"))
    assert is_fused(alone.entry.get("b1"))


def _three_loops() -> str:
    def loop(k: int, op: str) -> str:
        return f"""
cond{k} {{
  c = (s32[], f32[1024]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(4){_R}
  ROOT lt = pred[] compare(ci, n), direction=LT{_R}
}}

body{k} {{
  b = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  x = f32[1024] get-tuple-element(b), index=1
  one = s32[] constant(1){_R}
  i2 = s32[] add(i, one){_R}
  y = f32[1024] {op}(x){_R}
  ROOT r = (s32[], f32[1024]) tuple(i2, y)
}}
"""
    return ("HloModule three_loops, num_partitions=8\n" + loop(1, "exponential") + loop(2, "sine")
            + loop(3, "cosine") + f"""
ENTRY main {{
  p = f32[1024] parameter(0){_R}
  zero = f32[] constant(0){_R}
  zb = f32[1024] broadcast(zero), dimensions={{}}{_R}
  c0 = s32[] constant(0){_R}
  t1 = (s32[], f32[1024]) tuple(c0, zb)
  w1 = (s32[], f32[1024]) while(t1), condition=cond1, body=body1
  g1 = f32[1024] get-tuple-element(w1), index=1
  e1 = f32[1024] exponential(g1){_R}
  t2 = (s32[], f32[1024]) tuple(c0, zb)
  w2 = (s32[], f32[1024]) while(t2), condition=cond2, body=body2
  g2 = f32[1024] get-tuple-element(w2), index=1
  t3 = (s32[], f32[1024]) tuple(c0, zb)
  w3 = (s32[], f32[1024]) while(t3), condition=cond3, body=body3
  g3 = f32[1024] get-tuple-element(w3), index=1
  h = f32[1024] add(g2, g3){_R}
  h2 = f32[1024] add(h, e1){_R}
  ROOT o = f32[1024] add(h2, p){_R}
}}
""")


def test_a_while_state_copy_is_live_from_its_init():
    """One zero ``broadcast`` initialises three loops' states.  XLA (dump of this module) makes
    ``wrapped_broadcast`` and three copies of it (``CopyInsertion``) before the first loop, so every loop's
    state is live from the broadcast on.  The model: the loop that reads the broadcast last (w1 in its
    breadth-first schedule w2, w3, w1) takes its buffer over; w3's state is a copy, live from the broadcast
    on (before round 19: from w3).  Not the whole of XLA's figure: memory_analysis() 4,096 + 4,096 +
    12,612 = 20,804 B, the model 16,397 (w2's state is computed in place into the output ``o`` in the
    model, XLA keeps a copy per loop; 16,393 before)."""
    from hloshard.autoshard import evaluate_as_written
    from hloshard.mesh import DeviceMesh

    r = evaluate_as_written(parse_module(_three_loops()), DeviceMesh((8,)), deterministic=False)
    g, p = r.graph, r.graph.problem
    at = {i.name: t for t, i in enumerate(g.schedule)}
    state_starts = {}
    for v, node in enumerate(g.nodes):
        if node.instr.name in ("w1", "w2", "w3") and int(p.node_usages[v][int(r.choice[v])]) == 4096:
            lo, hi = (int(x) for x in p.intervals[v])
            if hi > lo:
                state_starts[node.instr.name] = lo
    assert at["w2"] < at["w3"] < at["w1"], at
    assert state_starts.get("w3") == at["zb"] < at["w3"], (state_starts, at)
