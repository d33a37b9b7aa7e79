"""One validity rule for the shardings a module carries (issue 28 part 4).

An invalid sharding anywhere in the input -- a tile assignment naming a device twice, tiling more
dimensions than the shape has, naming 4 or 16 devices in an 8-device module, naming a device the
module does not have, or a tuple sharding on an array -- is exit 2 with
``FILE:LINE:COL: error:`` at that instruction in every command that reads shardings (solve, cost,
explain, diff, explain-reshape, combine), with nothing written; ``lint`` reports it as a finding.
The invalid sharding sits on an intermediate instruction (``add.11``) that ``solve``'s default
``--keep-shardings io`` does not keep: ``solve`` used to accept it with exit 0.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hloshard.autoshard import build_graph
from hloshard.cli import main
from hloshard.errors import InputError
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "mlp_train_step.propagated.hlo"
GOOD = "sharding={devices=[2,4]<=[8]}"
TARGET = "%add.11 = "

CASES = {  # name: (the invalid sharding, what the message says, lint's codes)
    "duplicate_device": ("sharding={devices=[2,4]0,1,2,3,4,5,6,6}", "lists device 6 more than once", {"HS103"}),
    "wrong_rank": ("sharding={devices=[2,2,2]<=[8]}", "tiles 3 dims but the shape", {"HS105"}),
    "four_devices": ("sharding={devices=[2,2]<=[4]}", "uses 4 devices but the mesh", {"HS101"}),
    "sixteen_devices": ("sharding={devices=[4,4]<=[16]}", "uses 16 devices but the mesh", {"HS101", "HS104"}),
    # a new user's: the mesh inference indexed device 99 and crashed (IndexError) before the rule ran
    "device_out_of_range": ("sharding={devices=[2,4]0,1,2,3,4,5,6,99}", "names device 99, which is not in the mesh",
                            {"HS104"}),
    "tuple_on_array": ("sharding={{devices=[2,4]<=[8]}}", "tuple sharding", {"HS106"}),
}


def _bad_module(tmp_path, case: str):
    """The sample with ``add.11``'s sharding replaced; returns (path, line, column) of ``add.11``."""
    bad, _, _ = CASES[case]
    lines = SAMPLE.read_text().splitlines(keepends=True)
    idx = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(TARGET))
    assert GOOD in lines[idx]
    lines[idx] = lines[idx].replace(GOOD, bad, 1)
    path = tmp_path / f"{case}.hlo"
    path.write_text("".join(lines))
    return path, idx + 1, lines[idx].index(TARGET) + 1


def _commands(path, out):
    s = str(SAMPLE)
    p = str(path)
    return {
        "solve": ["solve", p, "--mesh", "2x4", "-o", str(out), "--time-limit", "5"],
        "solve_default_mesh": ["solve", p, "-o", str(out), "--time-limit", "5"],
        "solve_keep_none": ["solve", p, "--mesh", "2x4", "--keep-shardings", "none", "-o", str(out)],
        "cost": ["cost", p, "--mesh", "2x4"],
        "cost_default_mesh": ["cost", p],
        "explain": ["explain", p, "--instruction", "dot_general.6", "--mesh", "2x4"],
        "diff_b": ["diff", s, p, "--mesh", "2x4", "-o", str(out)],
        "diff_a": ["diff", p, s, "-o", str(out)],
        "explain_reshape": ["explain-reshape", p, "--instruction", "add.9", "--mesh", "2x4"],
        "combine": ["combine", p, "--mesh", "2x4", "-o", str(out)],
        "combine_default_mesh": ["combine", p, "-o", str(out)],
    }


COMMANDS = list(_commands("x", "y"))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_rejects_an_invalid_sharding_at_its_location(tmp_path, case, command):
    path, line, col = _bad_module(tmp_path, case)
    out = tmp_path / "out.txt"
    r = CliRunner().invoke(main, _commands(path, out)[command])
    assert r.exit_code == 2, (command, r.output)
    first = r.stderr.strip().splitlines()[0]
    assert first.startswith(f"{path}:{line}:{col}: error: add.11: "), first
    assert CASES[case][1] in first
    assert "Traceback" not in r.output
    assert not out.exists()          # no partial output
    assert r.stdout == ""


def test_the_valid_sample_passes_the_same_commands(tmp_path):
    """The control: without the edit every one of those commands succeeds (so the rule, not the
    command line, makes them fail)."""
    for command, args in _commands(SAMPLE, tmp_path / "out.txt").items():
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, (command, r.output[-2000:])


@pytest.mark.parametrize("case", list(CASES))
def test_lint_reports_it_as_a_finding(tmp_path, case):
    path, line, _ = _bad_module(tmp_path, case)
    r = CliRunner().invoke(main, ["lint", str(path), "--format", "json"])
    assert r.exit_code == 1, r.output
    findings = json.loads(r.stdout)
    findings = findings if isinstance(findings, list) else findings.get("findings", findings)
    codes = {f.get("code") or f.get("rule") for f in findings if f.get("line") == line}
    assert CASES[case][2] <= codes, (codes, findings)


@pytest.mark.parametrize("keep", ["all", "io", "none"])
def test_the_builder_applies_the_rule_whatever_is_kept(tmp_path, keep):
    """Library users get the rule too: ``build_graph`` checks every sharding, kept or not."""
    path, line, _ = _bad_module(tmp_path, "duplicate_device")
    module = parse_module(path.read_text(), str(path))
    with pytest.raises(InputError, match=rf"^add\.11 \(line {line}\): sharding .* lists device 6 more than once"):
        build_graph(module, DeviceMesh.parse("2x4"), keep=keep)


def test_solve_mesh_auto_rejects_it_too(tmp_path):
    path, line, col = _bad_module(tmp_path, "four_devices")
    out = tmp_path / "out.hlo"
    r = subprocess.run([sys.executable, "-m", "hloshard.cli", "solve", str(path), "--mesh", "auto", "--devices", "8",
                        "--time-limit", "5", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert re.match(rf"^{re.escape(str(path))}:{line}:{col}: error: add\.11: ", r.stderr), r.stderr
    assert not out.exists()
