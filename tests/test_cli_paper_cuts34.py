"""Issue 24's paper cuts in the CLI and its reports (round 34, helper cli): new user 33's F11, F14, F15, F20, F21,
F6, F7 and the fresh-clone check 33's items 3 and 4.  Each test reads a message or a figure the command gives and
fails on the round-33 main."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hloshard import autoshard
from hloshard.commands import cost as _cost, explain as _explain, solve as _solve  # noqa: F401  (bound before a patch)
from hloshard.cli import main
from tests.conftest import ROOT
from tests.patching import setattr_everywhere

SAMPLES = ROOT / "samples"
MLP_PRE = SAMPLES / "mlp_train_step.pre.hlo"


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# --------------------------------------------------------------------------- F11: options checked before any work

@pytest.mark.parametrize("command", ["solve", "cost"])
@pytest.mark.parametrize("tie, message", [
    ("1=5", "a tie needs the same shape and type"),
    ("0=999", "the entry computation has no parameter 999"),
    ("7=0", "index {7} does not exist"),
])
def test_a_bad_tie_is_refused_before_any_work(command, tie, message, monkeypatch, tmp_path):
    """New user 33 F11: ``--tie 1=5`` (different shapes) was found only after the cost graph's build (85-119 s on
    NeoX), or never when the build ran out of time (exit 3).  Checked on the parsed module: the build is never
    reached."""
    def reached(*a, **k):
        raise AssertionError("the cost graph was built before the --tie was checked")

    for name in ("solve_module", "evaluate_module", "evaluate_as_written", "build_graph"):
        if hasattr(autoshard, name):
            setattr_everywhere(monkeypatch, autoshard, name, reached)
    r = run([command, MLP_PRE, "--mesh", "2x4", "--tie", tie, "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output, r.stderr
    assert not (tmp_path / "o.hlo").exists()
