"""``hloshard cost``: evaluating the shardings a module carries."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES


def _cost_json(path, *extra):
    mesh = [] if "--mesh" in extra else ["--mesh", "2x4"]
    r = CliRunner().invoke(main, ["cost", str(path), *mesh, "--format", "json", *extra])
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
    # operand tile f16[16,4,1000,256] (32.768 MB) + output tile f16[256,1000,256] (131.072 MB), both live,
    # + the all-gathered operand, the resharding temporary at the reshape (131.072 MB).  XLA's
    # memory_analysis() of this module on 8 CPU devices: argument 32,768,000 + output 131,072,000 +
    # temp 131,072,000 (its all-gather) = 294,912,000, the same
    assert rep["peak_memory_per_device"] == 32_768_000 + 131_072_000 + 131_072_000


GATHER = """HloModule g, num_partitions=8

ENTRY %main {
  %a = f32[64,32] parameter(0), sharding={devices=[8,1]<=[8]}
  ROOT %c = f32[64,32] copy(%a), sharding={replicated}
}
"""


def test_instruction_costs_by_hand(tmp_path):
    """A row split 8 ways copied to replicated, priced by hand (mesh 8, alpha 1, beta 1):
    resharding = the all-gather of the 8192-byte result, XLA auto-sharding formula
    round(1 + 7/8 * 8192) + 0.1 = 7169.1; compute 0: a copy keeping its operand's memory layout is
    removed by XLA after partitioning (tests/test_handlers_elementwise.py checks XLA's final HLO has no
    copy left); predicted ring bytes 7/8 * 8192 = 7168
    (what XLA's partitioner moves for this module: tests/test_xla_bytes.py measures 7168)."""
    src = tmp_path / "g.hlo"
    src.write_text(GATHER)
    rep = _cost_json(src, "--mesh", "8")
    assert rep["breakdown"] == pytest.approx({"compute": 0.0, "communication": 0.0, "resharding": 7169.1})
    assert rep["total_cost"] == pytest.approx(7169.1)
    rows = {r["name"]: r for r in rep["instructions"]}
    assert rows["a"]["cost"] == 0.0 and rows["c"]["cost"] == pytest.approx(7169.1)
    assert rows["c"]["predicted_bytes_per_device"] == pytest.approx(7168.0)
    assert rep["predicted_bytes_per_device"] == pytest.approx(7168.0)


def test_cost_text_output_and_file(tmp_path):
    out = tmp_path / "c.txt"
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "conv_layer.propagated.hlo"), "--mesh", "2x4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("total cost ")


def test_cost_bad_mesh_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "conv_layer.propagated.hlo"), "--mesh", "3x3"])
    assert r.exit_code == 2 and "Traceback" not in r.output


@pytest.mark.parametrize("src,pins", [("tests/data/solve/ops.hlo", "--no-pin-operands"),
                                      ("tests/data/solve/ops.hlo", "--pin-operands"),
                                      ("samples/mlp_train_step.pre.hlo", "--pin-operands")])
def test_cost_of_a_solved_module_equals_the_solve_objective(tmp_path, src, pins):
    """``cost`` prices ``solve``'s own output at exactly the objective ``solve`` reported (same model,
    loops included: ops.hlo has a while loop, a call and a conditional), with and without the operand
    pin copies (the MLP sample gets 4: their resharding is the plan's own and the copies are free)."""
    src = SAMPLES.parent / src
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(src), "--mesh", "2x4", "-o", str(out), "--report", str(rep),
                                  "--time-limit", "10", "--deterministic", "--quiet", pins])
    assert r.exit_code == 0, r.output
    report = json.loads(rep.read_text())
    # the solver's own figure (its integer problem, scaled back) against `hloshard cost` of the written
    # file, parsed again and priced from scratch: two code paths that must agree (issue 10)
    # (to the integer rounding: half a unit of cost_scale per priced term at most)
    assert report["objective_int"] * report["cost_scale"] == pytest.approx(report["solver_objective"], rel=1e-7)
    cost = _cost_json(out)
    if pins == "--no-pin-operands":
        # without pins the written module is priced as XLA carries it out (README): a dynamic-update-slice into
        # zeros other instructions read (ops.hlo's `dus`) is computed in the zeros' layout where the plan would
        # pin its own (round 36, helper dus: strategy.realize.update_into_shared_broadcast); the report's
        # objective is the written module's, and the warning names both
        assert cost["total_cost"] == pytest.approx(report["objective"], rel=1e-6)
        if abs(report["objective"] - report["solver_objective"]) > 1e-6 * report["objective"]:
            assert any("the solver's own figure" in w for w in report["warnings"]), report["warnings"]
    else:
        assert cost["total_cost"] == pytest.approx(report["solver_objective"], rel=1e-6)
    assert cost["unannotated"] == []
    if src.name.startswith("mlp"):
        assert report["pins"] == 4 and out.read_text().count(".pin = ") == 4
