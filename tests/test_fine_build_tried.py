"""Coarse to fine under a wall-clock deadline (round 38, new user 37's F5: ``--mesh auto`` on a DiT ended with 61 s of
its 150 s unused, the fine 2x2x2 build estimated at 92 s against 78.5 s and never started): where the fine build was
left out only by its estimate and the coarse solve proved its plan (optimal, or within the solver's gap limit), the
fine build is tried in the time left, stopped at the same deadline and by the pairs that time prices
(``coarse.coarse_first``).  The estimate is forced far above the time (``fine_build_estimate``), so the test does not
depend on the machine's speed: before, the coarse plan was the answer with the "not started" warning; now the fine
graph is built and searched."""
from __future__ import annotations

import time

import hloshard.autoshard.coarse as coarse
from hloshard.autoshard import solve_module
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from tests.conftest import SAMPLES


def _solve(monkeypatch, seconds: float):
    real = coarse.fine_build_estimate
    monkeypatch.setattr(coarse, "fine_build_estimate",
                        lambda module, cmesh, built, mesh: (1000.0, real(module, cmesh, built, mesh)[1]))
    module = parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text())
    mesh = DeviceMesh.for_module(module, "2x2x2")
    return solve_module(module, mesh, time_limit=seconds, deadline=time.monotonic() + seconds, stop_build=True,
                        apply=False)


def test_fine_build_tried_when_the_coarse_plan_is_proven(monkeypatch):
    r = _solve(monkeypatch, 30.0)
    assert tuple(r.graph.mesh.shape) == (2, 2, 2), r.graph.warnings
    assert not any("could not be built" in w for w in r.graph.warnings), r.graph.warnings


def test_not_tried_without_the_time(monkeypatch):
    """Less than the two solves' minimum left before the fine build's deadline: the coarse plan, as before."""
    r = _solve(monkeypatch, 1.0)
    assert tuple(r.graph.mesh.shape) != (2, 2, 2)
