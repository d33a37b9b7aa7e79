"""solve's post-solve local moves (``autoshard.local.improve_written``, ``solve --local-moves``): explain's
kept re-solve around each instruction that pays communication, written where ``hloshard cost`` of the
module falls; the figure returned is ``hloshard cost`` of the module as left."""

from __future__ import annotations

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.autoshard.local import improve_written, paid_nodes
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from tests.patching import setattr_everywhere

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


def test_solves_own_pins_are_re_solved():
    """A Sharding custom-call named as solve writes its operand pins (``NAME.pin``) is solve's, not the
    user's: the pass moves it by default (round 20) and keeps it with ``pins=False``."""
    text = DETOUR.replace("x = f32[64,64] negate(a), sharding={devices=[1,4]<=[4]}",
                          "x.pin = f32[64,64] custom-call(a), custom_call_target=\"Sharding\", "
                          "sharding={devices=[1,4]<=[4]}").replace("exponential(x)", "exponential(x.pin)")
    kept = parse_module(text)
    before = evaluate_module(kept, MESH)
    _, moves = improve_written(kept, MESH, before, pins=False)
    assert moves == [] and str(kept.entry.get("x.pin").sharding) == "{devices=[1,4]<=[4]}"
    module = parse_module(text)
    after, moves = improve_written(module, MESH, evaluate_module(module, MESH))
    assert [m[0] for m in moves] == ["x.pin"] and after.total_cost < before.total_cost
    assert str(module.entry.get("x.pin").sharding) == "{devices=[4,1]<=[4]}"


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


def test_elimination_is_the_brute_force_minimum():
    """local.eliminate (bucket elimination) on a small graph with a cycle and forbidden entries: the
    minimum of all assignments, its pick attaining it; an all-forbidden variable gives None; a table
    past the limit gives TOO_LARGE."""
    import itertools

    import numpy as np

    from hloshard.autoshard.local import TOO_LARGE, eliminate

    rng = np.random.default_rng(0)
    sizes = [3, 4, 2, 3, 4]
    unary = [rng.uniform(0, 10, n) for n in sizes]
    unary[2][1] = np.inf
    pairs = {(j, k): rng.uniform(0, 10, (sizes[j], sizes[k])) for j, k in [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (1, 4)]}
    pairs[(0, 1)][0, :] = np.inf

    def value(p):
        return sum(unary[k][p[k]] for k in range(len(sizes))) + sum(m[p[j], p[k]] for (j, k), m in pairs.items())

    best = min(value(p) for p in itertools.product(*[range(n) for n in sizes]))
    pick = eliminate(unary, pairs, 1 << 20)
    assert value(pick) == pytest.approx(best, rel=1e-12)
    assert eliminate(unary, pairs, 8) is TOO_LARGE          # every bucket of the cycle needs more than 8 entries
    unary[3][:] = np.inf
    assert eliminate(unary, pairs, 1 << 20) is None


def test_kept_annotations_and_the_cli_default(monkeypatch):
    """solve keeps what --keep keeps: with keep='all' the detour's x stays (the pass would move it,
    above); and `solve` runs the pass unless --no-local-moves."""
    from click.testing import CliRunner

    from hloshard.autoshard import local, solve_module
    from hloshard.cli import main

    module = parse_module(DETOUR)
    result = solve_module(module, MESH, keep="all", time_limit=5.0, deterministic=True, local_moves=True)
    assert result.local_moves == [] and str(module.entry.get("x").sharding) == "{devices=[1,4]<=[4]}"

    calls = []
    real = local.improve_written

    def spy(*a, **k):
        calls.append(k.get("keep_ids"))
        return real(*a, **k)

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "detour.hlo"
        path.write_text(DETOUR)
        setattr_everywhere(monkeypatch, local, "improve_written", spy)
        for extra, n in (([], 1), (["--no-local-moves"], 1), (["--local-moves"], 2)):
            r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "4", "--deterministic", "--time-limit", "5",
                                          "-o", str(Path(d) / "out.hlo"), "--quiet", *extra])
            assert r.exit_code == 0, r.output
            assert len(calls) == n
