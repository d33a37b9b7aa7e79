"""The post-solve local moves as ``auto_shard`` runs them (``autoshard.solve.improve_applied``): at no higher
predicted peak than the written plan's (``local.improve_written(peak_limit=)``), the operand pins re-read from
the module after a move (``strategy.realize.as_written``), and the solve's kept shardings and the program's
interface left as they are."""

from __future__ import annotations

import pytest

from hloshard.autoshard import evaluate_module, solve_module
from hloshard.autoshard.local import improve_written
from hloshard.autoshard.solve import improve_applied
from hloshard.hlo import parse_module
from hloshard.hlo.sharding import HloSharding
from hloshard.strategy.realize import Pin, as_written, insert_pins

from tests.test_explain_local_moves import DETOUR, MESH   # the detour module: one definition
from tests.patching import setattr_everywhere

ROWS, COLS = "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"


def test_a_round_above_the_peak_limit_is_undone():
    """The detour's move lowers the cost; with a peak limit one byte below the moved module's peak the round
    is undone (module and figure as before, counted in ``peak_refused``); at that peak it is kept."""
    moved = parse_module(DETOUR)
    after, moves = improve_written(moved, MESH, evaluate_module(moved, MESH))
    assert [m[0] for m in moves] == ["x"]
    peak = int(after.evaluation.peak_memory)

    module = parse_module(DETOUR)
    before = evaluate_module(module, MESH)
    stats: dict = {}
    left, moves = improve_written(module, MESH, before, peak_limit=peak - 1, stats=stats)
    assert moves == [] and stats["peak_refused"] == 1
    assert str(module.entry.get("x").sharding) == COLS and left.total_cost == before.total_cost

    module = parse_module(DETOUR)
    left, moves = improve_written(module, MESH, evaluate_module(module, MESH), peak_limit=peak)
    assert [m[0] for m in moves] == ["x"] and left.total_cost == pytest.approx(after.total_cost, rel=1e-12)


def test_as_written_reads_a_moved_pin_and_its_stop():
    module = parse_module(DETOUR)
    z, x = module.entry.get("z"), module.entry.get("x")
    pin = Pin(z, 0, HloSharding.parse(ROWS), via=HloSharding.parse("{replicated}"))
    insert_pins([pin])
    cp = z.operands[0]
    assert cp.name == "x.pin" and cp.operands[0].name == "x.full.pin" and cp.operands[0].operands[0] is x
    assert as_written(pin) == pin   # nothing moved: the same layouts
    cp.sharding = HloSharding.parse(COLS)                      # a local move of the pin
    cp.operands[0].sharding = HloSharding.parse(ROWS)          # and of its stop
    got = as_written(pin)
    assert str(got.sharding) == COLS and str(got.via) == ROWS and got.user is z and got.index == 0
    plain = Pin(module.entry.root, 0, HloSharding.parse(ROWS))   # its user reads no pin: itself
    assert as_written(plain) is plain


def test_improve_applied_keeps_the_interface_and_the_peak():
    """A solve of the detour (keep io: the parameter and root kept), its written x then put back at columns
    (a written plan with a move left): improve_applied moves x, its figure is hloshard cost of the module
    left, the parameter and root are kept and the written peak is not raised."""
    module = parse_module(DETOUR)
    result = solve_module(module, MESH, keep="io", time_limit=5.0, deterministic=True, pin_operands=True)
    x = module.entry.get("x")
    x.sharding = HloSharding.parse(COLS)   # the detour, as a plan outside the moves' fixed point
    from hloshard.autoshard.solve import reevaluate_written

    reevaluate_written(result, module, MESH)
    before = result.written
    improve_applied(result, module, MESH)
    assert result.local_moves and result.written.total_cost < before.total_cost
    assert int(result.written.evaluation.peak_memory) <= int(before.evaluation.peak_memory)
    assert str(module.entry.get("a").sharding) == ROWS and str(module.entry.root.sharding) == ROWS
    assert result.written.total_cost == pytest.approx(evaluate_module(module, MESH).total_cost, rel=1e-12)


def test_improve_applied_holds_the_callers_limit_and_the_budgets(monkeypatch):
    """The peak the moves may reach: the written plan's by default; the caller's (the memory guard's) when
    higher; never above the budget's model limit (``graph.model_limit``), unless the plan is above it already
    (then its own peak: the moves never raise it)."""
    from hloshard.autoshard import local

    seen = []
    real = local.improve_written

    def spy(*a, **k):
        seen.append(k["peak_limit"])
        return real(*a, **k)

    setattr_everywhere(monkeypatch, local, "improve_written", spy)
    module = parse_module(DETOUR)
    result = solve_module(module, MESH, keep="io", time_limit=5.0, deterministic=True, pin_operands=True)
    peak = int(result.written.evaluation.peak_memory)
    improve_applied(result, module, MESH)
    improve_applied(result, module, MESH, peak_limit=peak + 1000)
    improve_applied(result, module, MESH, peak_limit=peak - 1000)
    result.graph.model_limit = peak + 10
    improve_applied(result, module, MESH, peak_limit=peak + 1000)
    result.graph.model_limit = peak - 10
    improve_applied(result, module, MESH, peak_limit=peak + 1000)
    assert seen == [peak, peak + 1000, peak, peak + 10, peak]


def test_a_pair_limit_bounds_the_moves_and_one_that_does_not_bind_changes_nothing():
    """``improve_written(pair_limit=)`` (auto_shard's deterministic moves): no candidate starts once the pass's
    resharding matrices have counted that many pairs (0: none at all, ``pair_limited``); a limit that does not
    bind takes the candidates by what they pay instead of in schedule order and finds the same moves."""
    module = parse_module(DETOUR)
    stats: dict = {}
    after, moves = improve_written(module, MESH, evaluate_module(module, MESH), stats=stats)
    assert [m[0] for m in moves] == ["x"] and stats["pairs"] > 0 and not stats.get("pair_limited")

    module = parse_module(DETOUR)
    before = evaluate_module(module, MESH)
    bound: dict = {}
    left, none = improve_written(module, MESH, before, pair_limit=0, stats=bound)
    assert none == [] and bound["candidates"] == 0 and bound["pair_limited"]
    assert left.total_cost == before.total_cost and str(module.entry.get("x").sharding) == COLS

    module = parse_module(DETOUR)
    loose: dict = {}
    left, same = improve_written(module, MESH, evaluate_module(module, MESH), pair_limit=10 ** 9, stats=loose)
    assert same == moves and left.total_cost == pytest.approx(after.total_cost, rel=1e-12)
    assert loose["pairs"] == stats["pairs"] and not loose.get("pair_limited")
