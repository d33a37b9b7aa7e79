"""A scalar broadcast that several values read ties none of their layouts (issue 24; new user 31 F20).

jax's CSE shares one ``broadcast`` of a scalar between updates of differently split tensors (Adam's
``b2 * v`` of every parameter) and between the zeros a ``lax.scan`` stacks its per-step results into (one
broadcast, two elements of the while's init tuple).  XLA's partitioner rebuilds such a value in each
reader's layout (``strategy.registry.rematerialized``), so a plan that keeps the user's layouts needs
no collective at all here.  Before round 32 the readers followed the broadcast (one layout for all of them)
or the while's init edge required the broadcast's one layout for both elements, and ``solve`` with the
user's io shardings kept was "proven optimal" at a resharding XLA never does -- on the GN-ResNet at
30,142,065 cost units where XLA's own completion of the same kept shardings costs 15,445,215.

No jax: the plan's cost is the solver's and ``cost``'s, both from the one cost model.  About 1 s.
"""

from __future__ import annotations

import pytest

#: dim 0 / dim 1 split over the 8 devices of --mesh 8
D0 = "{devices=[8,1]<=[8]}"
D1 = "{devices=[1,8]<=[8]}"
R = "{replicated}"

#: two users of one scalar broadcast in the entry, in the kept layouts of their other operand
ENTRY_ONLY = f"""HloModule shared_broadcast, num_partitions=8

ENTRY main {{
  p0 = f32[64,32]{{1,0}} parameter(0), sharding={D0}
  p1 = f32[64,32]{{1,0}} parameter(1), sharding={D1}
  c = f32[] constant(0.9)
  b = f32[64,32]{{1,0}} broadcast(c), dimensions={{}}
  m0 = f32[64,32]{{1,0}} multiply(b, p0)
  m1 = f32[64,32]{{1,0}} multiply(b, p1)
  ROOT t = (f32[64,32]{{1,0}}, f32[64,32]{{1,0}}) tuple(m0, m1), sharding={{{D0}, {D1}}}
}}
"""

STATE = "(s32[], f32[64,32]{1,0}, f32[64,32]{1,0}, f32[64,32]{1,0}, f32[64,32]{1,0})"

#: a scan: two accumulators initialised by one broadcast of zeros (the init tuple reads it twice), each
#: adding a loop-invariant weight kept in its own layout
SCAN = f"""HloModule scan_shared_zeros, num_partitions=8

cond {{
  cp = {STATE} parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT
}}

body {{
  p = {STATE} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  a0 = f32[64,32]{{1,0}} get-tuple-element(p), index=1
  a1 = f32[64,32]{{1,0}} get-tuple-element(p), index=2
  w0 = f32[64,32]{{1,0}} get-tuple-element(p), index=3
  w1 = f32[64,32]{{1,0}} get-tuple-element(p), index=4
  sum0 = f32[64,32]{{1,0}} add(a0, w0)
  sum1 = f32[64,32]{{1,0}} add(a1, w1)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = {STATE} tuple(i1, sum0, sum1, w0, w1)
}}

ENTRY main {{
  x0 = f32[64,32]{{1,0}} parameter(0), sharding={D0}
  x1 = f32[64,32]{{1,0}} parameter(1), sharding={D1}
  c0 = s32[] constant(0)
  z = f32[] constant(0)
  zeros = f32[64,32]{{1,0}} broadcast(z), dimensions={{}}
  init = {STATE} tuple(c0, zeros, zeros, x0, x1)
  w = {STATE} while(init), condition=cond, body=body, backend_config={{"known_trip_count":{{"n":"4"}}}}
  g0 = f32[64,32]{{1,0}} get-tuple-element(w), index=1
  g1 = f32[64,32]{{1,0}} get-tuple-element(w), index=2
  ROOT o = (f32[64,32]{{1,0}}, f32[64,32]{{1,0}}) tuple(g0, g1), sharding={{{D0}, {D1}}}
}}
"""


def _solve(text: str):
    from hloshard.autoshard import solve_module
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    module = parse_module(text)
    return module, solve_module(module, DeviceMesh.parse("8"), keep="io", time_limit=5, workers=1,
                                deterministic=True)


@pytest.mark.parametrize("text", [ENTRY_ONLY, SCAN], ids=["entry", "scan"])
def test_kept_layouts_need_no_collective(text):
    """Every value can be computed in its kept operand's layout and the broadcast rebuilt per reader:
    nothing to communicate, so the solver's plan pays no resharding (main: one reader's layout forced
    onto the other, an all-to-all of the f32[64,32] priced per step)."""
    module, res = _solve(text)
    ev = res.evaluation
    assert ev.resharding == 0.0 and ev.communication == 0.0, (ev.resharding, ev.communication)


def test_readers_of_a_shared_broadcast_do_not_follow_it():
    """The multiplies do not follow the broadcast (strategy.elementwise.choose_followee; their kept operand
    has one layout, so they enumerate their own) and require nothing of it (registry._free_rematerialized:
    read_anywhere)."""
    from hloshard.autoshard.build import build_graph
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.strategy.registry import read_anywhere

    module = parse_module(ENTRY_ONLY)
    assert read_anywhere(module.entry.get("b")) and not read_anywhere(module.entry.get("p0"))
    graph = build_graph(module, DeviceMesh.parse("8"), keep="io")
    for name in ("m0", "m1"):
        g = graph.ctx.groups[module.entry.get(name)]
        assert g.follow is None or g.follow[0].name != "b"
        assert len(g.strategies) > 1 and all(st.inputs[0] is None for st in g.strategies)


def test_while_init_of_shared_zeros_is_free():
    """The loop-state leaves initialised by the shared zeros require nothing of them
    (control_flow._rebuilt_init); the invariant weights' leaves still require their init's layout."""
    from hloshard.autoshard.build import build_graph
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    module = parse_module(SCAN)
    graph = build_graph(module, DeviceMesh.parse("8"), keep="io")
    group = graph.ctx.groups[module.entry.get("w")]
    for leaf in (1, 2):
        assert all(st.inputs[0] is None for st in group.children[leaf].strategies)
    for leaf in (3, 4):
        assert all(st.inputs[0] is not None for st in group.children[leaf].strategies)


def test_cost_of_pinned_zeros_in_the_loop_state_is_free():
    """``cost`` of the scan with the zeros written in one layout (as XLA's propagation names a CSE'd
    broadcast: ``cost --complete xla``) prices no resharding at the while: XLA rebuilds the zeros in each
    accumulator's layout (new user 31 F15: 1,769,472 B of all-to-all predicted at the backward scan's
    while where XLA moves nothing; main: 3,585 units here)."""
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    text = SCAN.replace("broadcast(z), dimensions={}", "broadcast(z), dimensions={}, sharding=" + D0)
    res = evaluate_module(parse_module(text), DeviceMesh.parse("8"))
    assert res.evaluation.resharding == 0.0 and res.evaluation.communication == 0.0
