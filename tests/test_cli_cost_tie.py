"""``hloshard cost --tie`` (issue 27, new user 25b, finding 5): a blank training step's completion keeps its
state layouts with ``--tie matching`` (in = out), and leaves some in another layout without; MFU names its peak
(finding 4)."""

import json
import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT

MLP = ROOT / "samples" / "mlp_train_step.pre.hlo"


def blank_mlp(tmp_path):
    """samples/mlp_train_step.pre.hlo with no sharding at all: a blank training step (4 parameters, their 4 new
    values in the root tuple, a loss)."""
    text = re.sub(r", sharding=\{[^\n]*", "", MLP.read_text())
    path = tmp_path / "blank_mlp.hlo"
    path.write_text(text)
    assert "sharding" not in text
    return path


def state_layouts(report):
    rows = {r["name"]: r for r in report["instructions"]}
    root = next(r for r in report["instructions"] if r["opcode"] == "tuple" and r["name"].startswith("tuple"))
    outs = re.findall(r"\{(?:devices=[^{}]*|replicated)\}", root["sharding"][1:-1])
    params = [rows[f"params_{i}_.1"]["sharding"] for i in range(4)]
    return params, outs[1:5]       # output 0 is the loss; outputs 1-4 the new params, in order


def test_cost_tie_matching_keeps_the_state_layouts_of_a_blank_train_step(tmp_path):
    path = blank_mlp(tmp_path)
    untied = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--format", "json"])
    tied = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--format", "json", "--tie", "matching"])
    assert untied.exit_code == 0 and tied.exit_code == 0, (untied.output, tied.output)
    u, t = json.loads(untied.stdout), json.loads(tied.stdout)
    assert (u["ties"], t["ties"]) == ("untied", "--tie matching")
    params, outs = state_layouts(u)
    assert any(p != o for p, o in zip(params, outs)), (params, outs)   # the untied completion moves some state
    params, outs = state_layouts(t)
    assert params == outs, (params, outs)                              # tied: each leaves as it came in
    # the tie is a constraint: the tied completion costs no less than the untied one
    assert t["total_cost"] >= u["total_cost"] - 1e-6
    # one pair by hand, and a bad value: exit 2, no traceback
    one = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--format", "json", "--tie", "1=0"])
    assert one.exit_code == 0 and json.loads(one.stdout)["ties"] == "--tie 1=0"
    bad = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--tie", "x=0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output and "OUTPUT_INDEX" in bad.output


def test_mfu_names_the_peak_it_is_against():
    r = CliRunner().invoke(main, ["cost", str(MLP), "--mesh", "2x4", "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert re.search(r"MFU [0-9.]+% of TF32 peak 494\.5 TFLOP/s x 8;", r.stdout), r.stdout[:600]
    r = CliRunner().invoke(main, ["cost", str(MLP), "--mesh", "2x4", "--device", "tpu-v5e"])
    assert re.search(r"MFU [0-9.]+% of BF16 peak 197 TFLOP/s x 8;", r.stdout), r.stdout[:600]


def test_cost_with_a_profile_without_an_f32_peak_exits_2(tmp_path):
    f = tmp_path / "bad2.toml"
    f.write_text("devices_per_node = 8\nhbm_gib = 80\nhbm_bandwidth_gbps = 3350\n[peak_tflops]\nbf16 = 989.5\n"
                 "[ici]\nbandwidth_gbps = 450\nlatency_us = 2\n[dcn]\nbandwidth_gbps = 50\nlatency_us = 8\n")
    r = CliRunner().invoke(main, ["cost", str(MLP), "--mesh", "2x4", "--device", str(f)])
    assert r.exit_code == 2 and "Traceback" not in r.output and r.stdout == ""
    assert "no f32 peak" in r.output and "tf32 = ..." in r.output


def test_explain_takes_the_tie_and_totals_as_cost(tmp_path):
    # round 30, new user 30 F11: explain had no --tie, so a training step's module total was priced untied while
    # cost / diff / solve tie it
    path = blank_mlp(tmp_path)
    args = ["--mesh", "2x4", "--format", "json", "--tie", "matching"]
    cost = CliRunner().invoke(main, ["cost", str(path)] + args)
    tied = CliRunner().invoke(main, ["explain", str(path), "--instruction", "dot_general.5", "--quiet"] + args)
    untied = CliRunner().invoke(main, ["explain", str(path), "--instruction", "dot_general.5", "--quiet",
                                       "--mesh", "2x4", "--format", "json"])
    assert cost.exit_code == tied.exit_code == untied.exit_code == 0, (cost.output, tied.output, untied.output)
    c, t, u = json.loads(cost.stdout), json.loads(tied.stdout), json.loads(untied.stdout)
    # explain's total is cost's less what XLA's reshard cache shares (none on this step)
    assert c["completion"]["cached_resharding"] == 0.0
    assert t["module_cost"]["total"] == pytest.approx(c["total_cost"], rel=1e-9)
    assert u["module_cost"]["total"] != pytest.approx(t["module_cost"]["total"], rel=1e-6)
    bad = CliRunner().invoke(main, ["explain", str(path), "--instruction", "dot_general.5", "--mesh", "2x4",
                                    "--tie", "9=0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output, bad.output
