"""``cost`` / ``diff`` / ``explain`` on modules without (or with partial) shardings: the fast default
completion (greedy + local search + one message-passing round, no CP-SAT), ``--time-limit`` for the full
solver, and ``solve``'s written objective equal to ``cost`` of the written file (issue 28, items 2 and 5)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES

PRE = SAMPLES / "mlp_train_step.pre.hlo"          # 6 of 82 instructions annotated
PROP = SAMPLES / "mlp_train_step.propagated.hlo"  # XLA's propagation: every instruction annotated


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def _cost(path, *extra):
    return json.loads(_run("cost", path, "--mesh", "2x4", "--format", "json", *extra))


def test_fast_default_says_what_it_did_and_its_gap():
    rep = _cost(PRE)
    c = rep["completion"]
    # the mlp's open choices form a tree: presolve's exact reductions choose them all
    assert c["method"] == "exact" and c["status"] == "optimal" and c["gap"] == 0
    assert "exact presolve reductions" in c["description"] and "no CP-SAT" in c["description"]
    assert c["bound"] is not None and c["bound"] <= rep["total_cost"] + 1e-6
    assert c["gap"] == pytest.approx((rep["total_cost"] - c["bound"]) / rep["total_cost"], abs=1e-6)
    text = " ".join(_run("cost", PRE, "--mesh", "2x4").split())
    n = rep["instructions_counted"]
    assert f"{len(rep['unannotated'])} of {n} instructions carried no sharding" in text
    assert "(the fast default; no CP-SAT)" in text


def test_fast_heuristic_on_a_module_presolve_does_not_finish():
    # attention_6heads: presolve leaves choices open (transformer_block's closes since round 32: its shared
    # scalar broadcasts tie no reader's layout, and presolve finishes there)
    rep = _cost(SAMPLES / "attention_6heads.pre.hlo")
    c = rep["completion"]
    assert c["method"] == "heuristic"
    assert "greedy + local search + one message-passing round" in c["description"]
    assert c["bound"] <= rep["total_cost"] + 1e-6


def test_fast_default_against_the_full_solver():
    """The fast completion's bound is a proven lower bound: CP-SAT's completion cannot beat it, and the
    fast total is within the gap it reports of the solver's."""
    fast = _cost(PRE)
    full = _cost(PRE, "--time-limit", "20")
    assert full["completion"]["method"] == "solver"
    assert full["total_cost"] >= fast["completion"]["bound"] - 1e-3
    assert fast["total_cost"] <= full["total_cost"] / (1 - fast["completion"]["gap"]) + 1e-3


def test_fast_default_is_deterministic():
    """The JSON reports carry no wall time and the completion reads no clock: byte-identical reruns."""
    big = SAMPLES / "attention_6heads.pre.hlo"   # the heuristics run here (presolve does not finish)
    assert _run("cost", big, "--mesh", "2x4", "--format", "json") == \
        _run("cost", big, "--mesh", "2x4", "--format", "json")
    assert _run("diff", big, PROP.with_name("attention_6heads.propagated.hlo"), "--mesh", "2x4", "--format",
                "json") == _run("diff", big, PROP.with_name("attention_6heads.propagated.hlo"), "--mesh", "2x4",
                                "--format", "json")


def test_annotated_module_leaves_little_open():
    """On XLA's propagated module the open choices are few: the fast completion and the full solver agree."""
    fast = _cost(PROP)
    full = _cost(PROP, "--time-limit", "20")
    assert len(fast["unannotated"]) < 0.05 * fast["instructions_counted"]
    assert fast["total_cost"] == pytest.approx(full["total_cost"], rel=1e-9)


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_time_limit_must_be_positive(bad):
    r = CliRunner().invoke(main, ["cost", str(PRE), "--mesh", "2x4", "--time-limit", bad])
    assert r.exit_code == 2
    assert "--time-limit must be a positive finite number" in r.output


def test_time_limit_bounds_the_build_too(tmp_path):
    """A build that cannot finish within ``--time-limit`` stops at it (exit 3, saying how far it got), not
    minutes later (a new user's 919-instruction module on a 4x4x4x4 mesh built for over 300 s under
    ``--time-limit 30``); nothing is written."""
    import time

    out = tmp_path / "cost.txt"
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["cost", str(PRE), "--mesh", "2x2x2", "--time-limit", "0.001", "-o", str(out)])
    took = time.monotonic() - t0
    assert r.exit_code == 3, r.output
    assert "building the cost graph passed its deadline" in r.output and " done)" in r.output
    assert not out.exists()
    assert took < 60, took   # the deadline, not a timing test: the build would take seconds on 2x2x2


def test_diff_marks_the_shardings_cost_chose():
    solved = PROP   # XLA's propagation of PRE: a sharding on every instruction
    rep = json.loads(_run("diff", PRE, solved, "--mesh", "2x4", "--format", "json"))
    assert rep["differences"], "cost's completion of the pre-optimization module and XLA's should differ"
    pre_sharded = {line.split("=")[0].strip() for line in PRE.read_text().splitlines()
                   if "sharding=" in line and "=" in line}
    for d in rep["differences"]:
        assert d["chosen_a"] == (d["instruction"] not in pre_sharded), d["instruction"]
        assert d["chosen_b"] == (d["instruction"] in json.loads(_run("cost", PROP, "--mesh", "2x4", "--format",
                                                                         "json"))["unannotated"])
    assert any(d["chosen_a"] for d in rep["differences"])
    text = _run("diff", PRE, solved, "--mesh", "2x4", "--top", "50")
    chosen = [d for d in rep["differences"][:50] if d["chosen_a"]]
    row = next(line for line in text.splitlines() if line.startswith("│ " + chosen[0]["instruction"] + " "))
    assert chosen[0]["sharding_a"] + " *" in row
    assert "* sharding A: not in A, chosen by hloshard cost" in text


def test_explain_takes_time_limit_and_says_how_open_choices_were_made():
    data = json.loads(_run("explain", PRE, "--instruction", "dot_general.9", "--mesh", "2x4", "--format", "json",
                           "--alternatives", "1"))
    assert data["completion"]["method"] in ("exact", "heuristic")
    assert any("no CP-SAT" in n for n in data["notes"])
    data = json.loads(_run("explain", PRE, "--instruction", "dot_general.9", "--mesh", "2x4", "--format", "json",
                           "--alternatives", "1", "--time-limit", "10"))
    assert data["completion"]["method"] == "solver"


def test_module_mesh_refines_for_the_module_itself():
    """A mesh refined for one module (conv_layer at --mesh 8: 2x4) prices another on that module's own
    refinement (attention_6heads at --mesh 8: 2x2x2), as ``cost`` of the other module's file derives it."""
    from hloshard.autoshard.evaluate import module_mesh
    from hloshard.mesh_setup import mesh_from_options
    from hloshard.load import load_module

    conv = load_module(str(SAMPLES / "conv_layer.pre.hlo"))
    attn = load_module(str(SAMPLES / "attention_6heads.pre.hlo"))
    m_conv = mesh_from_options(conv, "8", None, None, None)
    m_attn = mesh_from_options(attn, "8", None, None, None)
    assert str(m_conv) == "2x4" and str(m_attn) == "2x2x2"
    assert module_mesh(attn, m_conv) == m_attn
    assert module_mesh(conv, m_conv) is m_conv


@pytest.mark.parametrize("sample", ["attention_6heads.pre.hlo", "conv_layer.pre.hlo"])
def test_solve_objective_equals_cost_of_the_written_file(tmp_path, sample):
    out, report = tmp_path / "out.hlo", tmp_path / "report.json"
    _run("solve", SAMPLES / sample, "--mesh", "8", "--time-limit", "1", "--deterministic", "--quiet",
         "-o", out, "--report", report)
    solved = json.loads(report.read_text())
    cost = json.loads(_run("cost", out, "--mesh", "8", "--format", "json"))
    assert cost["total_cost"] == pytest.approx(solved["objective"], abs=1e-6)
