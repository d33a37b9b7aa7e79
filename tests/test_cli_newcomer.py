"""The CLI as new user 30 and the fresh-clone check of round 30 met it (round 31, helper cli): one message for a
missing file in every command, one table of device names for --device and --memory-budget, the summary's wording
(mesh source, plurals, a figure never wrapped away from its unit), diff --complete xla."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT
from tests.patching import setattr_everywhere

SAMPLES = ROOT / "samples"
MLP_PRE = SAMPLES / "mlp_train_step.pre.hlo"


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# --------------------------------------------------------------------------- 1. one missing-file message

# every command that reads a file, with what else it needs to get as far as reading it
READERS = [
    ["solve", "{f}", "--mesh", "2x4"],
    ["cost", "{f}", "--mesh", "2x4"],
    ["explain", "{f}", "--mesh", "2x4", "--instruction", "x"],
    ["diff", "{f}", str(MLP_PRE), "--mesh", "2x4"],
    ["explain-reshape", "{f}", "--mesh", "2x4", "--instruction", "x"],
    ["lint", "{f}"],
    ["combine", "{f}"],
    ["fmt", "{f}"],
    ["solve-problem", "{f}"],
]


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_a_missing_file_gets_one_message_in_every_command(args, tmp_path, monkeypatch):
    """solve / fmt said ``cannot read: No such file or directory``, lint ``no such file or directory``
    (fresh-clone check, round 30): one function (hloshard.io.cannot_read), one message, exit 2."""
    monkeypatch.chdir(tmp_path)
    r = run([a.format(f="nope.hlo") for a in args])
    assert r.exit_code == 2, r.output
    assert r.stderr == "hloshard: error: nope.hlo: cannot read: No such file or directory\n", r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("command", ["fmt", "lint"])
def test_a_dangling_link_is_named_alike(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.hlo").symlink_to(tmp_path / "gone.hlo")
    r = run([command, "d.hlo"])
    assert r.exit_code == 2
    assert r.stderr == (f"hloshard: error: d.hlo: cannot read: No such file or directory (a symbolic link to "
                        f"{tmp_path / 'gone.hlo'}, which does not exist)\n")


# --------------------------------------------------------------------------- 2. one table of device names

def _listed(message: str) -> list[str]:
    """The device names an error lists, in its order."""
    inner = re.search(r"(?:one of|device name \()\s*([a-z0-9, .-]+?)(?: or a \.toml|;|\))", message)
    assert inner, message
    return [n.strip() for n in inner.group(1).split(",")]


def test_device_and_memory_budget_list_the_same_names():
    """--memory-budget listed h100-80gb, h200-141gb, v100-16gb ... where --device lists h100-sxm, h200 ...
    (new user 30, fresh-clone check): both now read one table and list its names in one order."""
    from hloshard import devices
    from hloshard.units import DEVICE_MEMORY, PROFILE_NAMES

    dev = run(["cost", MLP_PRE, "--mesh", "2x4", "--device", "tpu-v9"])
    mem = run(["solve", MLP_PRE, "--mesh", "2x4", "--memory-budget", "nan"])
    assert dev.exit_code == 2 and mem.exit_code == 2
    assert _listed(dev.stderr) == _listed(mem.stderr) == list(devices.PROFILES) == list(PROFILE_NAMES)
    # every profile's HBM is the table's figure, and every name either option takes is a budget
    for name, profile in devices.PROFILES.items():
        assert DEVICE_MEMORY[name] == profile.hbm_bytes
    assert list(DEVICE_MEMORY)[:len(PROFILE_NAMES)] == list(PROFILE_NAMES)


@pytest.mark.parametrize("old,new", [("h100-80gb", "h100-sxm"), ("h200-141gb", "h200"), ("b200-180gb", "b200")])
def test_older_spellings_still_read_by_both(old, new):
    from hloshard.devices import get_profile
    from hloshard.units import parse_memory_budget

    assert get_profile(old) is get_profile(new)
    assert parse_memory_budget(old) == parse_memory_budget(new) == get_profile(new).hbm_bytes


@pytest.mark.parametrize("text,words", [
    ("12XB", "unknown unit 'XB'; expected B, KiB, MiB, GiB, TiB, PiB"),
    ("99999999999999999999999PiB", "8 EiB or more"),
])
def test_a_size_with_a_unit_is_answered_as_a_size(text, words):
    """``--memory-budget 9999...PiB`` was told "expected an integer or a size like 64MiB" (it is one)."""
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "--memory-budget", text])
    assert r.exit_code == 2 and words in r.stderr, r.stderr


# --------------------------------------------------------------------------- 3. the summary's wording

def test_mesh_source_plurals_and_alignment_of_the_summary(tmp_path):
    """``mesh 2x4 from inferred`` (no --mesh), ``graph 1 nodes``, ``input``/``output`` values 4 columns left of
    the other rows and a centred title (53 spaces in a file): fresh-clone check, round 30."""
    one = tmp_path / "one.hlo"
    one.write_text("HloModule one, num_partitions=8\n\nENTRY e {\n"
                   "  ROOT p = f32[8,16] parameter(0), sharding={devices=[8,1]<=[8]}\n}\n")
    r = run(["solve", one, "-o", tmp_path / "out.hlo"])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert lines[0] == "hloshard solve"
    labels = ("input", "output", "mesh", "changed", "cost", "memory", "status", "plan", "graph", "time")
    rows = {ln.split()[0]: ln for ln in lines[1:] if ln.split() and ln.split()[0] in labels}
    assert {"input", "output", "mesh", "graph", "changed"} <= set(rows), lines
    assert re.match(r"graph +1 node, 0 edges", rows["graph"]), rows["graph"]
    assert re.match(r"changed +\d+ of 1 instruction got", rows["changed"]), rows["changed"]
    assert rows["mesh"].split(None, 1)[1].startswith("8 from the module's num_partitions"), rows["mesh"]
    column = {k: len(v) - len(v.split(None, 1)[1]) for k, v in rows.items()}
    assert len(set(column.values())) == 1, column   # input, output and the table's rows: one value column

    r = run(["solve", MLP_PRE, "-o", tmp_path / "mlp.hlo"])
    assert "mesh         2x4 inferred from the module's shardings," in r.stderr, r.stderr


def test_a_figure_is_never_wrapped_away_from_its_unit():
    """A warning wrapped at 120 columns in a file split "1.5" / "MiB" (fresh-clone check, round 30):
    textwrap wraps it, each figure held to its unit; the words and spaces are the same."""
    import io

    from hloshard.textout import print_labelled, report_console

    text = ("the written module peaks at 1.4 MiB per device (as hloshard cost evaluates it); the solver's own "
            "figure is 1.5 MiB, 22 GB/s, 60 s, 12 % and 3 TFLOP/s [data] {devices=[2,4]<=[8]}")
    for width in range(60, 125):
        buf = io.StringIO()
        con = report_console(buf, terminal=False)
        con.width = width
        print_labelled(con, "warning:", text, "yellow")   # as the summary prints its warnings
        warning = buf.getvalue()
        assert all(len(ln) <= width for ln in warning.splitlines()), (width, warning)
        assert " ".join(warning.split()) == "warning: " + text, (width, warning)   # no word lost, no markup read
        for figure in ("1.4 MiB", "1.5 MiB", "22 GB/s", "60 s", "12 %", "3 TFLOP/s"):
            assert figure in warning, (width, figure, warning)


def test_stdin_is_named_alike_when_it_is_not_utf8():
    r = run(["fmt", "-"], input=b"\xff\xfe junk")
    # as a parse error names it (it said "-:1:1"): fresh-clone check, round 30
    assert r.exit_code == 2 and r.stderr == "<stdin>:1:1: error: not UTF-8 text (byte 0: invalid start byte)\n"


# --------------------------------------------------------------------------- 5. --partition-specs in the limit

class _Child:
    """Stands for the XLA child (no jax here): what solve does with it is recorded."""

    def __init__(self):
        self.killed = False

    def poll(self):
        return 0 if self.killed else None

    def kill(self):
        self.killed = True

    def wait(self):
        return 0


def test_partition_specs_child_starts_with_the_search_and_its_seconds_are_reserved(monkeypatch, tmp_path):
    """New user 30 F7: ``solve --partition-specs --time-limit 60`` ran 102.4 s, 48.7 s of it writing (a jax child
    started after the solve, then XLA's propagation), and no reserve counted it.  The child now starts at the
    first event of a solver (the cost graph built: not beside the build, whose seconds size the re-pricing
    reserve), the solve's deadline keeps ``partition_specs_reserve`` of the start phase for the propagation, and
    a command that ends without giving the child its module ends the child."""
    import hloshard.autoshard as autoshard
    from hloshard.commands import solve as cmd

    children = []
    setattr_everywhere(monkeypatch, cmd, "start_jax_child", lambda module, n: children.append((module, n, _Child())) or
                        children[-1][2])
    monkeypatch.setattr(cmd, "partition_specs_reserve", lambda start: 10_000.0)
    deadlines, started_at = [], []

    class Stop(Exception):
        pass

    def solve_stub(*args, **kw):
        deadlines.append(kw["deadline"])
        progress = kw["progress"]
        if progress is not None:
            progress({"phase": "building"})
            started_at.append(len(children))   # not yet: the build
            progress({"phase": "greedy", "objective": 1.0})
            progress({"phase": "cpsat", "objective": 1.0})
            started_at.append(len(children))   # once, at the first solver event
        raise Stop

    setattr_everywhere(monkeypatch, autoshard, "solve_module", solve_stub)
    for specs in ([], ["--partition-specs", tmp_path / "specs.json"]):
        r = run(["solve", MLP_PRE, "--mesh", "2x4", "-o", tmp_path / "x.hlo", "--time-limit", "30", *specs])
        assert isinstance(r.exception, Stop), r.output
    plain, with_specs = deadlines
    assert 10_000.0 - 5 < plain - with_specs < 10_000.0 + 5   # the reserve, less the two parses' difference
    assert started_at == [0, 1]
    [(module, n, child)] = children
    assert (module, n) == ("hloshard.partition_specs", 8) and child.killed   # no module given: ended


def test_partition_specs_are_written_by_the_child_started_early(monkeypatch, tmp_path):
    from hloshard.commands import solve as cmd

    started, given = [], []
    setattr_everywhere(monkeypatch, cmd, "start_jax_child", lambda module, n: started.append(_Child()) or started[-1])
    monkeypatch.setattr(cmd, "write_partition_specs", lambda path, module, dmesh, child=None: given.append(child) or
                        {"parameters": [{"index": 0, "path": None}, {"index": 1, "path": None}]})
    report = tmp_path / "r.json"
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "-o", tmp_path / "x.hlo", "--partition-specs", tmp_path / "s.json",
             "--report", report, "--quiet"])
    assert r.exit_code == 0, r.output
    assert given == started and len(started) == 1
    import json
    written = json.loads(report.read_text())
    phases = written["seconds_phases"]
    assert phases["partition specs"] >= 0 and "write" in phases   # its own phase in the time line
    # F13: every path null (no source locations in the input): a warning says why and what to do
    assert any("no parameter has a JAX path" in w and "debug_info=True" in w for w in written["warnings"])
    from hloshard.partition_specs import unnamed_paths_note
    assert unnamed_paths_note({"parameters": [{"path": None}, {"path": "params['w']"}]}) is None


# --------------------------------------------------------------------------- F16: lint of a jax export

def test_lint_of_a_sparsely_annotated_module_says_what_it_did_not_check(tmp_path):
    """New user 30, F16: lint of a jax export (parameters and outputs annotated) said only "All checks passed".
    The report is unchanged; a note on stderr says how few instructions carry a sharding and what prices the rest;
    a module annotated throughout gets none."""
    r = run(["lint", MLP_PRE])
    assert r.exit_code == 0 and r.stdout == "All checks passed (1 file).\n", r.output
    assert r.stderr.startswith(f"note: {MLP_PRE}: 6 of ") and "--complete xla --xla" in r.stderr, r.stderr
    r = run(["lint", SAMPLES / "mlp_train_step.propagated.hlo"])
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    many = []
    for i in range(6):   # more files than are named one by one: one note counts them
        many.append(tmp_path / f"m{i}.hlo")
        many[-1].write_text(MLP_PRE.read_text())
    r = run(["lint", *many])
    assert r.stderr.count("note:") == 1 and r.stderr.startswith("note: 6 files write a sharding"), r.stderr


# --------------------------------------------------------------------------- a closed stdout keeps the summary

def test_a_closed_stdout_keeps_the_summary_and_says_so():
    """Fresh-clone check, round 30: ``solve ... | true`` exited 1 with an empty stderr (the summary lost, click's
    EPIPE rule).  Now the summary is printed, then one line says the module was not written; exit 1 as before."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "hloshard.cli", "solve", str(MLP_PRE), "--mesh", "2x4"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()   # the reader is gone before the first write, as `| true` leaves it
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 1, err
    assert err.startswith("hloshard solve\n") and "\ncost " in err, err
    assert err.endswith("hloshard: error: standard output was closed before the module was written to it (a pipe "
                        "whose reader left); give -o FILE to keep it\n"), err
    assert "Traceback" not in err
