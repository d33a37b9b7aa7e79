"""The README's command examples run as written (paths under /tmp are redirected to a temp dir)."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from hloshard.hlo import parse_module
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _commands() -> list[str]:
    """Lines of the bash blocks under '## Commands' that run hloshard or one of our scripts."""
    section = README[README.index("## Commands"):]
    nxt = re.search(r"^## (?!Commands)", section, re.M)
    section = section[:nxt.start()] if nxt else section
    out = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(("hloshard ", "python ")):
                out.append(line)
    return out


COMMANDS = _commands()

_WRITES = re.compile(r"(?:-o|--output|--html|--report|--export-problem|>)\s+(/tmp/\S+)")


def _producers(line: str) -> list[str]:
    """Earlier README commands that write the /tmp files ``line`` reads (so each example runs alone)."""
    written = set(_WRITES.findall(line))
    needed = [p for p in re.findall(r"/tmp/\S+", line) if p not in written]
    out = []
    for path in needed:
        for cmd in COMMANDS:
            if cmd == line:
                break
            if path in _WRITES.findall(cmd):
                out.append(cmd)
                break
    return out


def test_readme_has_command_examples():
    assert len(COMMANDS) >= 8
    for cmd in ("fmt", "solve", "cost", "explain-reshape", "combine", "explain", "diff"):
        assert any(c.startswith(f"hloshard {cmd} ") for c in COMMANDS), cmd


def test_readme_setup_commands_are_the_ci_ones():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]'" in README and "pip install -q -e '.[test]'" in ci
    test_cmd = ".venv/bin/python -m pytest -q -n 2 --dist loadfile"
    assert test_cmd in README and test_cmd in ci
    main_job = ".venv/bin/hloshard solve samples/mlp_train_step.pre.hlo --mesh 2x4 -o mlp.solved.hlo"
    assert main_job in README
    assert main_job.replace("-o mlp.solved.hlo", "-o") in ci


def _shorter(line: str) -> str:
    """The example with a shorter time limit: 3 s for the solver of ``solve-problem``; 10 s for ``solve``,
    whose limit is the whole command's (start, parse and build included: the README's 40 MiB budget
    needs a few seconds of solver after a build of about 2 s on a loaded machine)."""
    short = "10" if line.startswith("hloshard solve ") else "3"
    return re.sub(r"--time-limit \d+", f"--time-limit {short}", line)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_readme_command_runs(cmd, tmp_path):
    line = _shorter(cmd.replace("/tmp/", f"{tmp_path}/"))
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    # an example that reads what an earlier one writes (the combine examples read gen_fsdp's module,
    # diff reads solve's output) runs after that one
    for earlier in _producers(cmd):
        pre = _shorter(earlier.replace("/tmp/", f"{tmp_path}/"))
        subprocess.run(pre, shell=True, cwd=ROOT, env=env, check=True, capture_output=True)
    proc = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    allowed = {0, 1} if ("--check" in line or " lint " in f" {line} ") else {0}
    assert proc.returncode in allowed, (line, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    # not only "it ran": every file the example says it writes is there and is what it says it is
    if "--format json" in line:
        json.loads(proc.stdout)
    for path in _WRITES.findall(cmd):
        out = pathlib.Path(path.replace("/tmp/", f"{tmp_path}/"))
        assert out.is_file() and out.stat().st_size > 0, (line, path)
        if out.suffix == ".json":
            json.loads(out.read_text())
        elif out.suffix == ".hlo":
            parse_module(out.read_text(), str(out))
        elif out.suffix == ".html":
            assert out.read_text().lstrip().lower().startswith("<!doctype html"), (line, path)


def test_bundled_problem_is_what_the_readme_export_writes(tmp_path):
    """samples/transformer_block.2x4.problem.json.gz (the README's solve-problem input) is exactly the
    cost graph the README's ``solve --export-problem`` command writes today, not a stale copy."""
    bundled = ROOT / "samples" / "transformer_block.2x4.problem.json.gz"
    export = next(c for c in COMMANDS if "--export-problem" in c and "transformer_block" in c)
    assert any(bundled.name in c for c in COMMANDS if c.startswith("hloshard solve-problem "))
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run(export.replace("/tmp/", f"{tmp_path}/"), shell=True, cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    written = tmp_path / "tb.problem.json.gz"
    want, got = gzip.decompress(bundled.read_bytes()), gzip.decompress(written.read_bytes())
    # compared as a flag, not bytes: pytest's diff of two ~MB byte strings runs for many minutes
    same = got == want
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))) if not same else -1
    assert same, (f"the bundled problem is stale: re-run the README's export command and copy its output to "
                  f"{bundled.name} (lengths {len(got)} vs {len(want)}, first difference at byte {at}: "
                  f"{got[max(0, at - 40):at + 40]!r} vs {want[max(0, at - 40):at + 40]!r})")


def test_readme_figures_of_the_propagated_solve_are_what_it_prints(tmp_path):
    """The figures the README quotes for solving ``samples/mlp_train_step.propagated.hlo`` are the ones the command
    prints (the fresh-clone check of round 30 found them two rounds stale: nothing compared them)."""
    from click.testing import CliRunner

    from hloshard.cli import main

    m = re.search(r"solving `samples/mlp_train_step\.propagated\.hlo` prints `([0-9,.]+) \.\.\. vs ([0-9,.]+)\s+"
                  r"for the input as given \((-[0-9.]+%)\)`, (proven optimal)", README)
    assert m, "the README's sentence on the propagated solve changed: update this test with it"
    r = CliRunner().invoke(main, ["solve", str(ROOT / "samples" / "mlp_train_step.propagated.hlo"), "--mesh", "2x4",
                                  "-o", str(tmp_path / "out.hlo")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    cost, given, change, status = m.groups()
    assert f"cost {cost} " in text and f"vs {given} for the input as given ({change})" in text, text[:800]
    assert f"status {status}" in text, text[:800]


def test_readme_quick_start_summary_is_what_solve_prints(tmp_path):
    """The summary block the README shows for its first ``solve`` is the one the command prints, line by line,
    but for the load-dependent seconds (``status``, ``graph``'s build, ``time``) and the paths (the fresh-clone
    check of round 31: nothing compared this block, and its peak tensor had gone stale)."""
    from click.testing import CliRunner

    from hloshard.cli import main

    m = re.search(r"The summary says what a user needs first:\n\n```\n(hloshard solve\n.*?)```", README, re.S)
    assert m, "the README's summary block moved: update this test with it"
    labels = ("mesh", "changed", "cost", "memory", "plan", "collectives", "graph")

    def lines(text: str) -> list:
        out, last = [], None
        for line in text.splitlines():
            head = line.split(" ", 1)[0]
            if head in labels or (line.startswith("             ") and last in labels):
                last = head if head in labels else last
                out.append(" ".join(line.split("; build")[0].split()))
            elif head:
                last = head
        return out

    r = CliRunner().invoke(main, ["solve", str(ROOT / "samples" / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "-o", str(tmp_path / "mlp.solved.hlo"), "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    peak = re.search(r"\(`peak_memory_per_device` ([0-9,]+) in the `--report` JSON\)", README)
    assert peak, "the README's sentence on the report's peak changed: update this test with it"
    assert f"{json.loads((tmp_path / 'r.json').read_text())['peak_memory_per_device']:,}" == peak.group(1)
    want = lines(m.group(1))
    assert len(want) >= len(labels)
    assert lines(r.output)[:len(want)] == want
