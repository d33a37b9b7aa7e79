"""``cost --xla`` of a Shardy-mode jax export says which partitioner XLA's figures are (GSPMD's) and that jax.jit
partitions such a module with Shardy by default (new user 30, F2: keras-hub GPT-2's layout map moved 14.78 MB per
device by GSPMD, 28.40 MB by Shardy); a plain HLO module gets no such note."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.commands.cost import SHARDY_NOTE
from tests.conftest import ROOT, require_jax

pytestmark = [pytest.mark.oracle]


@pytest.mark.parametrize("name, noted", [("attention_6heads.shardy.pre.hlo", True), ("attention_6heads.pre.hlo", False)])
def test_the_note_names_the_partitioner_of_a_shardy_export(name, noted):
    require_jax()
    r = CliRunner().invoke(main, ["cost", str(ROOT / "samples" / name), "--mesh", "2x4", "--xla", "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report.get("xla_partitioner_note") == (SHARDY_NOTE if noted else None)
