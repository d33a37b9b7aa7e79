"""solve's post-solve local moves (``autoshard.local.improve_written``, ``solve --local-moves``): explain's
kept re-solve around each instruction that pays communication, written where ``hloshard cost`` of the
module falls; the figure returned is ``hloshard cost`` of the module as left."""

from __future__ import annotations

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.autoshard.local import improve_written, paid_nodes
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh

MESH = DeviceMesh.parse("4")

# x goes to columns and z back to rows: two all-to-alls that x in rows (z's layout kept) removes
DETOUR = """HloModule detour
ENTRY e {
  a = f32[64,64] parameter(0), sharding={devices=[4,1]<=[4]}
  x = f32[64,64] negate(a), sharding={devices=[1,4]<=[4]}
  z = f32[64,64] exponential(x), sharding={devices=[4,1]<=[4]}
  ROOT w = f32[64,64] negate(z), sharding={devices=[4,1]<=[4]}
}
"""


def test_a_detour_is_removed_and_the_figure_is_hloshard_cost_of_the_module_left():
    module = parse_module(DETOUR)
    before = evaluate_module(module, MESH)
    assert paid_nodes(before.graph, before.choice)   # the two reshardings are paid
    after, moves = improve_written(module, MESH, before)
    assert after.total_cost < before.total_cost
    assert [m[0] for m in moves] == ["x"] and moves[0][2] == "{devices=[4,1]<=[4]}"
    assert str(module.entry.get("x").sharding) == "{devices=[4,1]<=[4]}"
    again = evaluate_module(parse_module(DETOUR.replace("x = f32[64,64] negate(a), sharding={devices=[1,4]<=[4]}",
                                                        "x = f32[64,64] negate(a), sharding={devices=[4,1]<=[4]}")),
                            MESH)
    assert after.total_cost == pytest.approx(again.total_cost, rel=1e-12)
    # nothing left to move: a second pass writes nothing and keeps the figure
    third, moves2 = improve_written(module, MESH, after)
    assert moves2 == [] and third.total_cost == after.total_cost


def test_the_interface_and_a_users_constraint_are_kept():
    """Entry parameters, the root and a user's Sharding custom-call are never moved: with the detour
    written as a user's constraint, nothing moves."""
    text = DETOUR.replace("x = f32[64,64] negate(a), sharding={devices=[1,4]<=[4]}",
                          "x = f32[64,64] custom-call(a), custom_call_target=\"Sharding\", "
                          "sharding={devices=[1,4]<=[4]}")
    module = parse_module(text)
    before = evaluate_module(module, MESH)
    after, moves = improve_written(module, MESH, before)
    assert moves == [] and after.total_cost == before.total_cost
    assert str(module.entry.get("x").sharding) == "{devices=[1,4]<=[4]}"


def test_solve_local_moves_keep_the_written_figure():
    """Wired into solve: an optimal solve of the unannotated detour leaves nothing to move, and the
    written figure is the module's hloshard cost."""
    from hloshard.autoshard import solve_module

    text = "\n".join(line.split(", sharding=")[0] if (" x = " in line or " z = " in line) else line
                     for line in DETOUR.splitlines())
    module = parse_module(text)
    result = solve_module(module, MESH, time_limit=5.0, deterministic=True, local_moves=True)
    assert result.local_moves == []
    assert result.objective == pytest.approx(evaluate_module(module, MESH).total_cost, rel=1e-12)
