"""Round 33, issue 24 (the CLI's default run and the newcomer's paper cuts): a starved default-limit search gets as long
as its build took (new user 32 F4), solve's output states num_partitions (F5), a closed standard output is one line
and exit 1 with no file written (fresh-clone check 32), an option given no value before the next option is said so,
and ``cost --complete xla``'s two count lines add up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from hloshard.autoshard import solve_module
from hloshard.autoshard.solve import MIN_SOLVE_SECONDS
from hloshard.cli import main
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from tests.conftest import ROOT, require_jax

MLP = ROOT / "samples" / "mlp_train_step.pre.hlo"
SCAN = ROOT / "samples" / "scan_mlp_train_step.pre.hlo"

#: a module whose kept input and output are replicated: its plan is the replicated one (F5's case)
TINY = """HloModule tiny, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0), sharding={replicated}
  ROOT %a = f32[4]{0} add(%p, %p), sharding={replicated}
}
"""


def test_a_starved_search_under_the_default_limit_gets_the_builds_seconds():
    """The deadline already spent: with ``starved_floor`` the solver gets that multiple of the build's seconds (at
    most its limit) and the warning says the command ends late by it; without, its 0.5 s minimum (F4: at the
    default limit a 0.5 s solve of SigLIP wrote the replicated plan)."""
    said = []
    res = solve_module(parse_module(MLP.read_text(), str(MLP)), DeviceMesh.parse("2x4"), time_limit=3.0,
                       deadline=time.monotonic(), on_overrun=said.append, starved_floor=1000.0)
    floor = 1000.0 * res.graph.build_seconds
    assert floor > MIN_SOLVE_SECONDS
    assert res.solver_time_limit == pytest.approx(min(3.0, floor))
    assert len(said) == 1 and "as long as the build took" in said[0] and "ends late" in said[0]
    plain = solve_module(parse_module(MLP.read_text(), str(MLP)), DeviceMesh.parse("2x4"), time_limit=3.0,
                         deadline=time.monotonic())
    assert plain.solver_time_limit == MIN_SOLVE_SECONDS


def test_solve_writes_num_partitions_and_cost_reads_it(tmp_path):
    src, out = tmp_path / "tiny.hlo", tmp_path / "tiny.solved.hlo"
    src.write_text(TINY)
    r = CliRunner().invoke(main, ["solve", str(src), "--mesh", "2x4", "--deterministic", "--time-limit", "2",
                                  "-o", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    header = out.read_text().splitlines()[0]
    assert header.endswith(", num_partitions=8"), header
    assert "replicated" in out.read_text() and "devices=" not in out.read_text()   # nothing split: F5's case
    c = CliRunner().invoke(main, ["cost", str(out)])   # no --mesh: the header says the devices
    assert c.exit_code == 0, c.output
    assert "mesh 8 from the module's num_partitions" in c.output


def test_a_value_forgotten_before_the_next_option_is_named():
    r = CliRunner().invoke(main, ["solve", str(MLP), "--mesh", "-o", "out.hlo"])
    assert r.exit_code == 2
    assert "--mesh needs a value, but the next argument is the option -o" in r.output
    assert "unexpected extra argument" not in r.output and not os.path.exists("out.hlo")


def _closed_stdout(args, cwd):
    """Run ``python -m hloshard.cli ARGS`` with standard output a pipe whose reader has left."""
    rd, wr = os.pipe()
    os.close(rd)
    try:
        return subprocess.run([sys.executable, "-m", "hloshard.cli", *args], stdout=wr, stderr=subprocess.PIPE,
                              text=True, timeout=300, cwd=cwd)
    finally:
        os.close(wr)


def test_a_closed_stdout_is_one_line_and_exit_1(tmp_path):
    r = _closed_stdout(["fmt", str(MLP)], tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "hloshard: error: standard output was closed before the output was written to it (a pipe whose reader "
        "left); give -o FILE to keep it"]
    j = _closed_stdout(["solve", str(MLP), "--mesh", "2x4", "--format", "json", "-o", "m.hlo", "--report", "r.json",
                        "--deterministic", "--time-limit", "2"], tmp_path)
    assert j.returncode == 1 and "Traceback" not in j.stderr
    assert "standard output was closed before the report JSON was written to it" in j.stderr
    assert not (tmp_path / "m.hlo").exists() and not (tmp_path / "r.json").exists()   # no file: the run failed


@pytest.mark.oracle
def test_complete_xla_counts_add_up():
    """``cost --complete xla``: the instructions XLA's propagation named and those it left open are counted on one
    base, the array instructions the module left open (fresh-clone check 32: 63 of 138, then 86 of 153)."""
    require_jax()
    r = CliRunner().invoke(main, ["cost", str(SCAN), "--mesh", "2x4", "--complete", "xla"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    named = re.search(r"chose the shardings of ([\d,]+) of the ([\d,]+) array instructions", text)
    left = re.search(r"([\d,]+) of those ([\d,]+) got no sharding from XLA's propagation", text)
    assert named and left, text[:2000]
    n = int(named.group(2).replace(",", ""))
    assert int(left.group(2).replace(",", "")) == n
    assert int(named.group(1).replace(",", "")) + int(left.group(1).replace(",", "")) == n
    assert text.count("chosen by exact presolve reductions") <= 1   # the completion's words said once
