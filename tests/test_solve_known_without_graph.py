"""``solve`` when no cost graph could be built in the time (round 38, new user 37's F16: Qwen3.5 on ``--device
tpu-v5e`` exited 3 with nothing written, the coarse build cut): a plan known without a search is written -- the
input's own layout where it was priced, else every instruction replicated -- exit 0, with a warning that nothing was
searched (``autoshard.solve.known_without_graph``).  The build's stop is forced (``solve_module`` raising the
:class:`BuildStopped` a cut build raises), so the test does not depend on the machine's speed."""
from __future__ import annotations

import json

from click.testing import CliRunner

from hloshard.autoshard.build import BuildStopped
from hloshard.cli import main
from hloshard.commands import solve as solve_cmd
from hloshard.hlo import parse_module
from tests.conftest import SAMPLES

CUT = "building the cost graph passed its deadline after 9.9 s (edges: 3 of 40 done)"


def _stopped(*args, **kwargs):
    raise BuildStopped("edges", 3, 40, 9.9)


def _shardings(path):
    return {i.name: (None if i.sharding is None else str(i.sharding))
            for i in parse_module(path.read_text()).all_instructions()}


def test_unannotated_input_gets_the_replicated_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(solve_cmd, "solve_module", _stopped)
    out, report = tmp_path / "o.hlo", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "--time-limit", "30", "-o", str(out), "--report", str(report)])
    assert r.exit_code == 0, r.output
    written = _shardings(out)
    assert written and all(s is not None and "replicated" in s for s in written.values()), written
    rep = json.loads(report.read_text())
    assert any(w.startswith("nothing was searched: " + CUT) for w in rep["warnings"]), rep["warnings"]
    assert rep["gap"] is None and rep["bound"] is None
    assert "nothing was searched" in r.output and "Traceback" not in r.output


def test_annotated_input_is_written_as_given(tmp_path, monkeypatch):
    monkeypatch.setattr(solve_cmd, "solve_module", _stopped)
    src = SAMPLES / "mlp_train_step.propagated.hlo"
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(src), "--mesh", "2x4", "--time-limit", "30", "-o", str(out)])
    assert r.exit_code == 0, r.output
    given = _shardings(src)
    written = _shardings(out)
    assert {k: v for k, v in written.items() if k in given} == given
    assert "the input's own layout, as given" in r.output


def test_a_budget_the_known_plan_breaks_is_still_refused(tmp_path, monkeypatch):
    """Exit 3 and nothing written where the replicated plan peaks above the budget."""
    monkeypatch.setattr(solve_cmd, "solve_module", _stopped)
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "--memory-budget", "1KiB", "--time-limit", "30", "-o", str(out)])
    assert r.exit_code == 3, r.output
    assert not out.exists()
