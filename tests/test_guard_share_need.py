"""The memory guard's share of a wall-clock ``auto_shard`` call keeps the time the guard is estimated to need
(round 38, issue 24): where half of what the deadline leaves is below the need, the share is raised to the need as
long as the first solve keeps its own least (a build, the solver's minimum, a pricing: ``later_phase_seconds`` of the
tracing seconds); before, the half alone decided and keras-hub's 4-layer Gemma ran with the guard off at
``time_limit=10`` and 15 although the guard's phase took 4.2 s in the deterministic call."""
from __future__ import annotations

import pytest

from hloshard.autoshard.solve import MIN_SOLVE_SECONDS, later_phase_seconds
from hloshard.jax import guard


def test_share_raised_to_the_need_where_the_first_solve_keeps_its_least():
    # Gemma at time_limit=10 on two idle cores of the shared machine (round 38): 1.37 s of tracing
    deadline, now, traced = 10.0, 1.37, 1.37
    left = deadline - now
    share, need = guard.guard_share_figures(deadline, now, traced)
    assert need == pytest.approx(later_phase_seconds(traced) + traced)
    assert 0.5 * left < need   # the half alone would not hold it (the rule before)
    assert share == pytest.approx(need) and guard.guard_share_holds(deadline, now, traced)
    # the first solve then ends by the deadline less the need, not less the half
    assert guard.first_solve_deadline(deadline, now, need) == pytest.approx(deadline - need)
    assert left - need >= later_phase_seconds(traced)


def test_share_not_raised_where_the_first_solve_would_lose_its_least():
    # 2.4 s of tracing at time_limit=10 (the device machine's CPU, round 37): the need (7.7 s) leaves the first
    # solve less than its least: the half stands and the guard's share is not kept
    deadline, now, traced = 10.0, 2.4, 2.4
    share, need = guard.guard_share_figures(deadline, now, traced)
    assert share == pytest.approx(0.5 * (deadline - now)) and share < need
    assert not guard.guard_share_holds(deadline, now, traced)


def test_half_kept_where_it_is_more_than_the_need():
    share, need = guard.guard_share_figures(60.0, 1.0, 1.0)
    assert share == pytest.approx(29.5) and need < share
    assert guard.first_solve_deadline(60.0, 1.0, need) == pytest.approx(60.0 - 29.5)
    # without a need given: the half, as before
    assert guard.first_solve_deadline(60.0, 1.0) == pytest.approx(60.0 - 29.5)


def test_read_early_need_is_one_pricing():
    share, need = guard.guard_share_figures(10.0, 2.0, 2.0, read_early=True)
    assert need == pytest.approx(MIN_SOLVE_SECONDS + 2.0) and share == pytest.approx(4.0)
