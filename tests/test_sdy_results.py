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


#: jax's Shardy-mode HLO of ``jit(lambda x, w: tanh(x @ w), out_shardings=P("data", None))``: the output
#: sharding is a FuncResultSharding custom-call feeding a tuple whose get-tuple-element is the root
#: (new user 17: solve changed the output to 8-way and --partition-specs failed in XLA)
RESULT_VIA_TUPLE = r'''HloModule jit_f, entry_computation_layout={(f32[64,128]{1,0}, f32[128,128]{1,0})->f32[64,128]{1,0}}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}}

ENTRY main.1 {
  x.1 = f32[64,128]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"data\"}, {}]>"}
  w.1 = f32[128,128]{1,0} parameter(1), sharding={replicated}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{}, {}]>"}
  dot_general.1 = f32[64,128]{1,0} dot(x.1, w.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tanh.2 = f32[64,128]{1,0} tanh(dot_general.1)
  tanh.3 = f32[64,128]{1,0} custom-call(tanh.2), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\"data\"}, {}]>]>"}
  tuple.1 = (f32[64,128]{1,0}) tuple(tanh.3)
  ROOT get-tuple-element.1 = f32[64,128]{1,0} get-tuple-element(tuple.1), index=0, sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
}
'''
DATA_ONLY = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"


def test_solve_keeps_jax_out_shardings(tmp_path):
    """``--keep-shardings io`` keeps jax's out_shardings when they are FuncResultSharding custom-calls (the
    root get-tuple-element's own sharding pins nothing: tuple_ops): the written output leaves as the user
    asked, at the cost the solver reports."""
    from hloshard.hlo import parse_module

    path, out = tmp_path / "f.hlo", tmp_path / "o.hlo"
    path.write_text(RESULT_VIA_TUPLE)
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "2x4", "--deterministic", "-o", str(out)])
    assert r.exit_code == 0, r.output
    written = parse_module(out.read_text(), "o.hlo").entry
    for name in ("tanh.3", "get-tuple-element.1"):
        assert str(written.get(name).sharding) == DATA_ONLY, (name, written.get(name).sharding)
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "2x4", "--deterministic", "--keep-shardings",
                                  "none", "-o", str(out)])
    assert r.exit_code == 0, r.output   # free to choose: the cheaper 8-way output (what io used to write)
    assert str(parse_module(out.read_text(), "o.hlo").entry.get("tanh.3").sharding) != DATA_ONLY


@pytest.mark.oracle
def test_partition_specs_of_a_module_with_jax_out_shardings(tmp_path, oracle):
    """``--partition-specs`` runs XLA's propagation on the solved module: its FuncResultSharding
    custom-calls go to XLA as ``Sharding`` custom-calls (XLA's partitioner refuses ``xla.sdy.*``)."""
    path, out, specs = tmp_path / "f.hlo", tmp_path / "o.hlo", tmp_path / "specs.json"
    path.write_text(RESULT_VIA_TUPLE)
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "2x4", "--deterministic", "-o", str(out),
                                  "--partition-specs", str(specs)])
    assert r.exit_code == 0, r.output
    data = json.loads(specs.read_text())
    assert [o["partition_spec"] for o in data["outputs"]] == [["data", None]], data["outputs"]
    assert [p["partition_spec"] for p in data["parameters"]] == [["data", None], [None, None]]
