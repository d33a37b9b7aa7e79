"""The mesh a command's options describe with a device (hloshard.mesh_setup): one parser for link marks,
errors that echo the mesh as written, and the note on an axis that straddles nodes (new user 25b, findings
7 and 10)."""

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.errors import UsageError
from hloshard.hlo import parse_module
from hloshard.mesh_setup import timed_mesh_from_options
from tests.conftest import ROOT

MLP = ROOT / "samples" / "mlp_train_step.pre.hlo"
AR16 = """HloModule ar, num_partitions=16
ENTRY e {
  a = f32[1024,1024] parameter(0)
  ROOT d = f32[1024,1024] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_marks_on_an_unnamed_mesh_are_links():
    m = parse_module(AR16)
    for spec in ("2:dcnx8", "2:dcn x 8", "2 : dcn x 8:ici"):
        _, ts, _ = timed_mesh_from_options(m, spec, None, None, None, "h100-sxm")
        assert ts.links == ("dcn", "ici"), spec
    _, ts, _ = timed_mesh_from_options(m, "2x8:dcn", None, None, None, "h100-sxm")
    assert ts.links == ("dcn", "dcn")          # a mark wins over the node-size rule


def test_a_mesh_error_echoes_the_marks():
    r = CliRunner().invoke(main, ["cost", str(MLP), "--mesh", "data=2:dcn,data=4", "--device", "h100"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "'data=2:dcn,data=4': axis name listed twice" in r.output, r.output
    r = CliRunner().invoke(main, ["cost", str(MLP), "--mesh", "2:dcnx4", "--device", "h100", "--format", "json"])
    assert r.exit_code == 0, r.output


def test_an_axis_straddling_nodes_is_said_to_be_priced_as_dcn():
    m = parse_module(AR16)
    dm, ts, _ = timed_mesh_from_options(m, "4x2x2", None, None, None, "h100-sxm")
    assert ts.links == ("dcn", "ici", "ici")
    (note,) = [n for n in dm.notes if "straddles nodes" in n]
    assert "axis0 (4 devices)" in note and "2 devices of each of 2 nodes" in note and "InfiniBand" in note
    assert "2x2x2x2" in note                   # the mesh with the node boundary between axes
    dm, _, _ = timed_mesh_from_options(m, "16", None, None, None, "h100-sxm")
    assert any("each of its groups holds 8 devices of each of 2 nodes" in n for n in dm.notes)
    dm, _, _ = timed_mesh_from_options(m, "data=2:dcn,model=8", None, None, None, "h100-sxm")
    assert not any("straddles" in n for n in dm.notes)   # the cluster's own shape: nothing straddles
    r = CliRunner().invoke(main, ["cost", "-", "--mesh", "4x2x2", "--device", "h100"], input=AR16)
    assert r.exit_code == 0 and "straddles nodes" in r.output, r.output
