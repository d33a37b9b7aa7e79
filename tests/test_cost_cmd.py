"""``hloshard cost``: evaluating the shardings a module carries."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES


def _cost_json(path, *extra):
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_seed_reshape_implicit_allgather_is_reported():
    rep = _cost_json(SAMPLES / "reshape_seed.hlo")
    assert set(rep) >= {"total_cost", "instructions", "peak_memory_per_device"}
    assert rep["total_cost"] == pytest.approx(98_304_001.1)
    rows = {r["name"]: r for r in rep["instructions"]}
    rs = rows["reshape"]["reshardings"]
    assert len(rs) == 1 and rs[0]["operand"] == "parameter1"
    steps = rs[0]["steps"]
    assert [s["kind"] for s in steps] == ["all-gather"]
    assert rows["parameter1"]["reshardings"] == []
    # operand tile f16[16,4,1000,256] (32.768 MB) + output tile f16[256,1000,256] (131.072 MB), both live
    assert rep["peak_memory_per_device"] == 32_768_000 + 131_072_000


def test_instruction_costs_add_up_to_the_total():
    rep = _cost_json(SAMPLES / "mlp_train_step.propagated.hlo")
    total = sum(r["cost"] for r in rep["instructions"])
    assert total == pytest.approx(rep["total_cost"], rel=1e-6)
    b = rep["breakdown"]
    assert rep["total_cost"] == pytest.approx(b["compute"] + b["communication"] + b["resharding"], rel=1e-9)
    names = [r["name"] for r in rep["instructions"]]
    assert len(names) == len(set(names))


def test_cost_text_output_and_file(tmp_path):
    out = tmp_path / "c.txt"
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "conv_layer.propagated.hlo"), "--mesh", "2x4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("total cost ")


def test_cost_bad_mesh_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "conv_layer.propagated.hlo"), "--mesh", "3x3"])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_cost_of_a_solved_module_equals_the_solve_objective(tmp_path):
    """``cost`` prices ``solve``'s own output at exactly the objective ``solve`` reported (same model,
    loops included: ops.hlo has a while loop, a call and a conditional)."""
    src = SAMPLES.parent / "tests" / "data" / "solve" / "ops.hlo"
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(src), "--mesh", "2x4", "-o", str(out), "--report", str(rep),
                                  "--time-limit", "10", "--deterministic", "--quiet"])
    assert r.exit_code == 0, r.output
    objective = json.loads(rep.read_text())["objective"]
    cost = _cost_json(out)
    assert cost["total_cost"] == pytest.approx(objective, rel=1e-9)
    assert cost["unannotated"] == []
