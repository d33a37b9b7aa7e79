"""``solve`` and ``cost`` refuse a user sharding whose tile assignment lists a device twice, as XLA does
(found by a fresh-user pass: solve used to price it and write it back unchanged)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import require_jax

DUP = """HloModule m, num_partitions=8

ENTRY e {
  p0 = f32[16,4] parameter(0), sharding={devices=[4,2]0,1,2,3,4,5,6,6}
  ROOT c = f32[16,4] negate(p0)
}
"""


@pytest.mark.parametrize("command", [["solve", "--mesh", "2x4"], ["cost", "--mesh", "2x4"]])
def test_duplicate_device_in_tile_assignment_is_refused(tmp_path, command):
    src, out = tmp_path / "dup.hlo", tmp_path / "out"
    src.write_text(DUP)
    r = CliRunner().invoke(main, [command[0], str(src), *command[1:], "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert f"{src}:4:3: error: p0: sharding" in r.output and "device 6 more than once" in r.output
    assert not out.exists()


@pytest.mark.oracle
def test_xla_refuses_it_too():
    require_jax()
    from tests import xla_oracle

    ok, msg = xla_oracle.compile_spmd(DUP, 8)
    assert not ok, "XLA accepted a tile assignment that names device 6 twice"
    ok, _ = xla_oracle.compile_spmd(DUP.replace("6,6}", "6,7}"), 8)
    assert ok
