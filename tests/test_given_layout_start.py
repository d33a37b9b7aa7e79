"""``solve`` of an input that carries a layout never writes an answer that costs more than that layout as given
(round 37, new user 36's F6): the input, priced for the report (``input_cost``), is also the solver's start
(``hloshard.autoshard.coarse.given_plan`` as ``solve_module``'s ``known``).  A starved search is simulated by a
solver that returns its greedy completion from the hint it is given (or from nothing): what a 0.5-s search on a
loaded machine ends at (the fused-QKV sample's 2x4 plan given to ``--mesh data=2:dcn,model=4 --device h100-sxm
--time-limit 3`` at load 24: 124,922,145 as given, 183,774,737 written)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import hloshard.autoshard.search as search
from hloshard.autoshard import solve_module
from hloshard.autoshard.trivial import complete
from hloshard.cli import main
from hloshard.costgraph import evaluate
from hloshard.hlo import parse_module
from hloshard.hlo.printer import print_module
from hloshard.mesh import DeviceMesh
from hloshard.solver.api import Solution
from tests.conftest import SAMPLES


def _starved(problem, time_limit=None, workers=1, seed=0, deterministic=False, hint=None, progress=None, **kw):
    """A search that ends at once: the hint completed greedily (or the greedy plan), nothing improved."""
    choice = [-1] * problem.num_nodes if hint is None else [int(h) for h in hint]
    complete(problem, choice)
    obj, ok = evaluate(problem, choice)
    return Solution(strategies=choice if ok else [], objective=int(obj) if ok else None, bound=None,
                    status="feasible" if ok else "timeout", seconds=0.0)


@pytest.fixture(scope="module")
def given(tmp_path_factory):
    """The transformer train step sample's own 2x4 plan (a deterministic solve), written: the user's layout."""
    module = parse_module((SAMPLES / "transformer_train_step.pre.hlo").read_text())
    solve_module(module, DeviceMesh((2, 4)), time_limit=5, deterministic=True)
    path = tmp_path_factory.mktemp("given") / "given.hlo"
    path.write_text(print_module(module))
    return path


def _solve(path, tmp_path, *extra):
    out, rep = tmp_path / "out.hlo", tmp_path / "rep.json"
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "2x4", "--deterministic", "--time-limit", "5",
                                  "-o", str(out), "--report", str(rep), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(rep.read_text())


def test_a_starved_search_writes_no_worse_than_the_input_as_given(given, tmp_path, monkeypatch):
    monkeypatch.setattr(search, "solve_problem", _starved)
    rep = _solve(given, tmp_path)
    assert rep["input_cost"] is not None
    # the same starved search from the unannotated step costs more than the layout given (so the rule is needed)
    blank = _solve(SAMPLES / "transformer_train_step.pre.hlo", tmp_path)
    assert blank["objective"] > rep["input_cost"] * 1.01
    assert rep["objective"] <= rep["input_cost"] * (1 + 1e-9)
