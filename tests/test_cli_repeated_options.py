"""An option that takes one value, given twice, is refused (new user 31, F12: ``--mesh 2x4 --mesh 4x2`` was taken
silently, click's last-one-wins); options meant to repeat (``--tie``) and flags are not."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from hloshard.cli import main

ROOT = Path(__file__).resolve().parent.parent
MLP = str(ROOT / "samples" / "mlp_train_step.pre.hlo")


@pytest.mark.parametrize("args, flag", [
    (["cost", MLP, "--mesh", "2x4", "--mesh", "4x2"], "--mesh"),
    (["cost", MLP, "--mesh=2x4", "--mesh", "4x2"], "--mesh"),
    (["solve", MLP, "--mesh", "2x4", "--time-limit", "5", "--time-limit", "9"], "--time-limit"),
    (["solve", MLP, "--mesh", "2x4", "-o", "a.hlo", "--output", "b.hlo"], "--output"),
    (["diff", MLP, MLP, "--mesh", "2x4", "--device", "h100-sxm", "--device", "tpu-v5e"], "--device"),
])
def test_a_single_value_option_given_twice_is_a_usage_error(tmp_path, args, flag):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert f"hloshard: error: {flag} is given more than once: give it once" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "a.hlo").exists()


def test_repeatable_options_and_flags_still_repeat():
    r = CliRunner().invoke(main, ["cost", MLP, "--mesh", "2x4", "--tie", "1=0", "--tie", "2=1", "--quiet", "--quiet"])
    assert r.exit_code == 0, r.output
    assert "total cost" in r.output


def test_an_options_own_parse_error_points_at_the_commands_help():
    """``--mesh`` with no value: click's error names no context, and the pointer named the group's help
    (``see `hloshard --help```), which does not list ``--mesh``; now the command's."""
    r = CliRunner().invoke(main, ["cost", MLP, "--mesh"])
    assert r.exit_code == 2 and "requires an argument" in r.output
    assert r.output.rstrip().endswith("cost --help`)"), r.output
