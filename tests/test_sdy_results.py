"""jax's Shardy-mode HLO writes ``out_shardings`` only as ``xla.sdy.FuncResultSharding`` custom-calls
with an ``xla.sdy.sharding`` attribute: hloshard reads them as annotations (kept like any other), and
``cost --xla`` hands XLA's GSPMD partitioner the same constraint as a ``Sharding`` custom-call (XLA
rejected the module before: "custom call named 'xla.sdy.*' which shouldn't appear in the XLA
partitioner", and the report said 0 bytes; new-user trial, round 11)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.hlo.sharding import HloSharding
from hloshard.load import load_text
from hloshard.sdy_mesh import SdyMesh, sharding_from_sdy

MODULE = r'''HloModule jit_f, entry_computation_layout={(f32[64,256]{1,0}, f32[256,512]{1,0})->f32[64,512]{1,0}}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}}

ENTRY main {
  x = f32[64,256]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"data\"}, {}]>"}
  w = f32[256,512]{1,0} parameter(1), sharding={devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{}, {\"model\"}]>"}
  d = f32[64,512]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[64,512]{1,0} custom-call(d), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{}, {\"model\"}]>]>"}
}
'''

MESHES = {"mesh": SdyMesh("mesh", ("data", "model"), (2, 4))}


@pytest.mark.parametrize("text, rank, want", [
    ('#sdy.sharding<@mesh, [{"data"}, {}]>', 2, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    ('#sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>', 2, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    ('#sdy.sharding_per_value<[<@mesh, [{"model"}, {"data"}]>]>', 2, "{devices=[4,2]<=[2,4]T(1,0)}"),
    ('#sdy.sharding_per_value<[<@mesh, [{"data", "model"}]>]>', 1, "{devices=[8]<=[8]}"),
    ('#sdy.sharding_per_value<[<@mesh, []>]>', 0, "{replicated}"),
    ('#sdy.sharding_per_value<[<@mesh, [{?}, {}]>]>', 2, "{replicated}"),
])
def test_one_value_over_whole_axes(text, rank, want):
    assert sharding_from_sdy(text, rank, MESHES) == HloSharding.parse(want)


@pytest.mark.parametrize("text, rank", [
    ('#sdy.sharding_per_value<[<@mesh, [{"data":(1)2}, {}]>]>', 2),     # a sub-axis: not read
    ('#sdy.sharding_per_value<[<@other, [{"data"}, {}]>]>', 2),         # an unknown mesh
    ('#sdy.sharding_per_value<[<@mesh, [{"data"}]>]>', 2),              # a dim count other than the rank
    ('#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>', 2),             # an unknown axis
])
def test_what_it_does_not_read_stays_unannotated(text, rank):
    assert sharding_from_sdy(text, rank, MESHES) is None


def test_the_loader_keeps_the_result_sharding():
    m = load_text(MODULE, "f.hlo")
    assert m.entry.get("r").sharding == HloSharding.parse("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    assert m.entry.get("d").sharding is None


@pytest.mark.oracle
def test_cost_xla_partitions_a_shardy_module(tmp_path, oracle):
    path = tmp_path / "f.hlo"
    path.write_text(MODULE)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--xla", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["xla_error"] is None, rep["xla_error"]
    assert rep["xla_bytes_per_device"] is not None and rep["xla_bytes_per_device"] > 0
    assert rep["xla_cost"]["xla_cost_error"] is None
