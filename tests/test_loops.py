"""Trip counts and execution counts (hloshard.hlo.loops): hand-built loops with hand-derived counts,
some also run in XLA (the loop counts its own iterations in a second state element)."""

from __future__ import annotations

import numpy as np
import pytest

from hloshard.hlo import parse_module
from hloshard.hlo.loops import DEFAULT_TRIP_COUNT, count_iterations, execution_counts, trip_count


def loop_module(init: int, step: int, direction: str, bound: int, iv_left: bool = True,
                backend_config: str = "", init_from_param: bool = False) -> str:
    """while (i DIRECTION bound) { i += step; n += 1 }; returns n (s32).  The entry parameter is the
    initial n (0 when run).  ``iv_left=False`` writes the compare as ``bound FLIPPED i``."""
    flip = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}
    cmp = (f"compare(%i, %b), direction={direction}" if iv_left
           else f"compare(%b, %i), direction={flip[direction]}")
    op = "add" if step >= 0 else "subtract"
    init_i = "%p0" if init_from_param else "%i0"
    bc = f", backend_config={backend_config}" if backend_config else ""
    return f"""HloModule loop_{direction.lower()}_{abs(step)}, num_partitions=8

%cond (s: (s32[], s32[])) -> pred[] {{
  %s = (s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %b = s32[] constant({bound})
  ROOT %c = pred[] {cmp}
}}

%body (s: (s32[], s32[])) -> (s32[], s32[]) {{
  %s = (s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] get-tuple-element(%s), index=1
  %d = s32[] constant({abs(step)})
  %one = s32[] constant(1)
  %i2 = s32[] {op}(%i, %d)
  %n2 = s32[] add(%n, %one)
  ROOT %t = (s32[], s32[]) tuple(%i2, %n2)
}}

ENTRY %main (p0: s32[]) -> s32[] {{
  %p0 = s32[] parameter(0), sharding={{replicated}}
  %i0 = s32[] constant({init})
  %t0 = (s32[], s32[]) tuple({init_i}, %p0)
  %w = (s32[], s32[]) while(%t0), condition=%cond, body=%body{bc}
  ROOT %r = s32[] get-tuple-element(%w), index=1, sharding={{replicated}}
}}
"""


def while_of(text: str):
    m = parse_module(text)
    return next(i for i in m.entry.instructions if i.opcode == "while")


# (init, step, direction, bound, expected): expected counts derived by hand, values of i listed
CASES = [
    (0, 2, "LT", 10, 5),    # i = 0, 2, 4, 6, 8
    (0, 2, "LT", 9, 5),     # i = 0, 2, 4, 6, 8 (8 < 9; 10 is not)
    (1, 3, "LE", 10, 4),    # i = 1, 4, 7, 10
    (10, -3, "GT", 0, 4),   # i = 10, 7, 4, 1
    (9, -2, "GE", 3, 4),    # i = 9, 7, 5, 3
    (0, 2, "NE", 8, 4),     # i = 0, 2, 4, 6
    (5, 1, "LT", 5, 0),     # never runs
    (0, 1, "LT", 7, 7),     # the usual fori_loop
]


@pytest.mark.parametrize("init,step,direction,bound,expected", CASES)
@pytest.mark.parametrize("iv_left", [True, False])
def test_trip_count_from_condition_and_body(init, step, direction, bound, expected, iv_left):
    tc = trip_count(while_of(loop_module(init, step, direction, bound, iv_left=iv_left)))
    assert tc.exact, tc.reason
    assert tc.count == expected, tc.reason


def test_known_trip_count_backend_config_wins():
    text = loop_module(0, 1, "LT", 7, backend_config='{"known_trip_count":{"n":"3"}}')
    assert tuple(trip_count(while_of(text))) == (3, True, "known_trip_count backend config")


def test_unknown_counts_are_guesses_with_a_reason():
    # the init comes from a parameter: unknown
    tc = trip_count(while_of(loop_module(0, 1, "LT", 7, init_from_param=True)))
    assert (tc.count, tc.exact) == (DEFAULT_TRIP_COUNT, False) and "initial value" in tc.reason
    # i < 10 with a negative step never ends: a guess, not a negative count
    tc = trip_count(while_of(loop_module(0, -1, "LT", 10)))
    assert (tc.count, tc.exact) == (DEFAULT_TRIP_COUNT, False) and "does not terminate" in tc.reason
    # NE that steps over the bound
    assert count_iterations(0, 3, "NE", 8) is None


def test_loop_invariant_bound_from_the_tuple():
    """jax's fori_loop with a bound carried in the loop state: compare(i, gte(s, 2)) with the third
    element passed through the body unchanged and initialised by a constant 6; step 2: i = 0, 2, 4."""
    text = """HloModule inv
%cond (s: (s32[], s32[], s32[])) -> pred[] {
  %s = (s32[], s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %b = s32[] get-tuple-element(%s), index=2
  ROOT %c = pred[] compare(%i, %b), direction=LT
}
%body (s: (s32[], s32[], s32[])) -> (s32[], s32[], s32[]) {
  %s = (s32[], s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] get-tuple-element(%s), index=1
  %b = s32[] get-tuple-element(%s), index=2
  %two = s32[] constant(2)
  %i2 = s32[] add(%two, %i)
  ROOT %t = (s32[], s32[], s32[]) tuple(%i2, %n, %b)
}
ENTRY %main (p0: s32[]) -> (s32[], s32[], s32[]) {
  %p0 = s32[] parameter(0)
  %z = s32[] constant(0)
  %six = s32[] constant(6)
  %t0 = (s32[], s32[], s32[]) tuple(%z, %p0, %six)
  ROOT %w = (s32[], s32[], s32[]) while(%t0), condition=%cond, body=%body
}
"""
    tc = trip_count(while_of(text))
    assert (tc.count, tc.exact) == (3, True), tc.reason


NESTED = """HloModule nested
%f (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  ROOT %n = f32[8] negate(%a)
}
%icond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %b = s32[] constant(4)
  ROOT %c = pred[] compare(%i, %b), direction=LT
}
%ibody (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[8] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %y = f32[8] call(%x), to_apply=%f
  ROOT %t = (s32[], f32[8]) tuple(%i2, %y)
}
%ocond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %b = s32[] constant(2)
  ROOT %c = pred[] compare(%i, %b), direction=LE
}
%obody (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[8] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %z = s32[] constant(0)
  %t = (s32[], f32[8]) tuple(%z, %x)
  %w = (s32[], f32[8]) while(%t), condition=%icond, body=%ibody
  %y = f32[8] get-tuple-element(%w), index=1
  ROOT %r = (s32[], f32[8]) tuple(%i2, %y)
}
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8] parameter(0)
  %z = s32[] constant(0)
  %t = (s32[], f32[8]) tuple(%z, %p)
  %w = (s32[], f32[8]) while(%t), condition=%ocond, body=%obody
  %y = f32[8] get-tuple-element(%w), index=1
  ROOT %r = f32[8] call(%y), to_apply=%f
}
"""


def test_execution_counts_nested_loops_and_two_call_sites():
    """outer: i = 0, 1, 2 (LE 2) -> 3 trips; inner: 0..3 -> 4 trips per outer trip, 12 in all.  %f is
    called once per inner trip (12) and once from the entry (1): 13 executions."""
    m = parse_module(NESTED)
    c = execution_counts(m)
    by = {comp.name: c.get(id(comp)) for comp in m.computations}
    assert by == {"main": 1.0, "obody": 3.0, "ocond": 3.0, "ibody": 12.0, "icond": 12.0, "f": 13.0}


def test_guessed_counts_are_reported_by_build_graph():
    from hloshard.autoshard import build_graph
    from hloshard.mesh import DeviceMesh

    text = loop_module(0, 1, "LT", 7, init_from_param=True)
    g = build_graph(parse_module(text), DeviceMesh.parse("8"))
    assert any("while w" in w and "trip count unknown" in w and "assumed 100" in w for w in g.warnings), g.warnings
    g = build_graph(parse_module(loop_module(0, 2, "LT", 10)), DeviceMesh.parse("8"))
    assert not any("trip count" in w for w in g.warnings)


@pytest.mark.oracle
def test_trip_counts_agree_with_xla_running_the_loops():
    """XLA runs each loop; its second state element counts the iterations."""
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle

    for init, step, direction, bound, expected in [CASES[0], CASES[2], CASES[3]]:
        text = loop_module(init, step, direction, bound)
        assert trip_count(while_of(text)).count == expected
        (out,) = xla_oracle.run_sharded(text, [np.array(0, dtype=np.int32)])
        assert int(out) == expected, (init, step, direction, bound)


def test_solve_and_cost_results_carry_the_loop_warning():
    from hloshard.autoshard import evaluate_module, solve_module
    from hloshard.mesh import DeviceMesh

    text = loop_module(0, 1, "LT", 7, init_from_param=True)
    res = solve_module(parse_module(text), DeviceMesh.parse("8"), time_limit=5, deterministic=True)
    assert any("while w (line" in w and "assumed 100 iterations" in w for w in res.warnings), res.warnings
    cost = evaluate_module(parse_module(text), DeviceMesh.parse("8"))
    assert any("trip count unknown" in w for w in cost.warnings), cost.warnings
