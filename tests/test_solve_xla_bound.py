"""``solve --xla`` (round 38, new user 37's F6 / F11): XLA runs after the module and the report are written, within
``commands.solve.xla_bound``, booked as the ``xla`` phase; a child that runs past the bound is stopped, the files
are kept and a warning says so (before: the plan was lost with an XLA run killed after 15 minutes, and XLA's
seconds were booked as ``write``)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.commands import solve as solve_cmd
from tests.conftest import SAMPLES, require_jax


def test_bound_is_stated_and_grows_with_the_limit():
    """The bound is the larger of the floor and the multiple of --time-limit (what the help and warning say)."""
    assert solve_cmd.xla_bound(1.0) == solve_cmd.XLA_BOUND_FLOOR
    assert solve_cmd.xla_bound(600.0) == solve_cmd.XLA_BOUND_MULTIPLE * 600.0
    assert f"{solve_cmd.XLA_BOUND_FLOOR:.0f} s" in solve_cmd.XLA_BOUND_WORDS


@pytest.mark.oracle
def test_xla_past_its_bound_is_stopped_and_the_plan_is_written(tmp_path, monkeypatch):
    """With a bound shorter than a jax child's start, the XLA child is stopped: exit 0, the module and the report
    written, the report's ``xla`` says why, its time line has the ``xla`` phase, and stderr warns."""
    require_jax()
    monkeypatch.setattr(solve_cmd, "xla_bound", lambda time_limit: 0.2)
    out, report = tmp_path / "o.hlo", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "2x4", "--xla",
                                  "--time-limit", "8", "-o", str(out), "--report", str(report)])
    assert r.exit_code == 0, r.output
    assert out.exists() and "sharding=" in out.read_text()
    rep = json.loads(report.read_text())
    assert "timed out" in rep["xla"]["xla_error"], rep["xla"]
    assert "xla" in rep["seconds_phases"] and rep["seconds_phases"]["xla"] < 30.0
    assert "the plan is written without XLA's figures" in r.output
    assert "Traceback" not in r.output
