"""The reminder that a size without a unit is in bytes is given for a bare number only (new user 30 F10:
``--memory-budget 12`` meant 12 GiB), not for a small budget written with its unit (fresh-clone check 32:
``400KiB`` was told what ``409600GiB`` means)."""

from __future__ import annotations

from click.testing import CliRunner

from hloshard.cli import main
from hloshard.units import GivenBytes, parse_memory_budget
from tests.conftest import SAMPLES


def test_parse_memory_budget_remembers_a_written_unit():
    assert parse_memory_budget("400KiB") == 409600 and isinstance(parse_memory_budget("400KiB"), GivenBytes)
    assert isinstance(parse_memory_budget("tpu-v5e"), GivenBytes)
    bare = parse_memory_budget("409600")
    assert bare == 409600 and not isinstance(bare, GivenBytes)


def _refusal(budget: str, tmp_path) -> str:
    out = tmp_path / "x.hlo"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "transformer_block.pre.hlo"), "--mesh", "2x4",
                                  "--memory-budget", budget, "-o", str(out)])
    assert r.exit_code == 3 and not out.exists(), r.output
    return r.output


def test_the_unit_reminder_only_for_a_bare_number(tmp_path):
    assert "a size without a unit is in bytes: 409600 means 409,600 B" in _refusal("409600", tmp_path)
    given = _refusal("400KiB", tmp_path)
    assert "infeasible" in given and "without a unit" not in given, given
