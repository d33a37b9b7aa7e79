"""``solve --partition-specs``: PartitionSpecs of entry parameters / outputs over the named mesh axes with
JAX paths, and the intermediate shardings XLA's propagation does not reach from those alone."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.partition_specs import partition_specs, spec_json, xla_propagate
from hloshard.hlo.sharding import HloSharding
from hloshard.sdy import SdyMesh
from tests.conftest import SAMPLES, require_jax


def test_spec_json_forms():
    mesh = SdyMesh("mesh", ("data", "model"), (2, 4))
    assert spec_json(HloSharding.parse("{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), 2, mesh) == ["data", None]
    assert spec_json(HloSharding.parse("{devices=[8,1]<=[8]}"), 2, mesh) == [["data", "model"], None]
    assert spec_json(HloSharding.replicated(), 1, mesh) == [None]
    assert spec_json(HloSharding.parse("{maximal device=0}"), 1, mesh) is None


def test_io_specs_of_the_hlo_sample_without_xla():
    # the user's jax shardings of mlp_train_step (scripts/make_samples.py) are kept by --keep-shardings io
    from hloshard.autoshard import solve_module

    module = parse_file(str(SAMPLES / "mlp_train_step.shardy.pre.hlo"))
    solve_module(module, DeviceMesh.parse("2x4"), time_limit=10.0, deterministic=True)
    ps = partition_specs(module, DeviceMesh.parse("2x4"), propagate=False)
    assert ps["mesh"]["axes"] == ["data", "model"]
    want = {0: [None, "model"], 1: ["model"], 2: ["model", None], 3: [None], 4: ["data", None], 5: ["data", None]}
    assert {p["index"]: p["partition_spec"] for p in ps["parameters"]} == want
    assert len(ps["outputs"]) == 5 and "intermediates" not in ps


@pytest.mark.oracle
def test_partition_specs_cli_on_mlir(tmp_path):
    require_jax()
    out, spec = tmp_path / "o.hlo", tmp_path / "ps.json"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "mlp_train_step.stablehlo.mlir"), "--mesh", "2x4",
                                  "-o", str(out), "--partition-specs", str(spec), "--quiet", "--deterministic",
                                  "--no-pin-operands"])   # jax constraints come from the plan, not hloshard's copies
    assert r.exit_code == 0, r.output
    ps = json.loads(spec.read_text())
    assert [p["path"] for p in ps["parameters"]] == ["params[0]", "params[1]", "params[2]", "params[3]", "x", "y"]
    assert [o["path"] for o in ps["outputs"]] == ["result[0]", "result[1][0]", "result[1][1]", "result[1][2]",
                                                  "result[1][3]"]
    assert ps["parameters"][0]["partition_spec"] == [None, "model"]
    inter = ps["intermediates"]
    assert inter and all(x["source"] and x["source"].startswith("scripts/make_samples.py:") for x in inter)
    # pinning the listed intermediates: XLA's propagation then disagrees with hloshard on fewer
    # instructions, and only on listed ones (GSPMD may still refine a partially replicated sharding)
    module = parse_file(str(out))
    listed = {x["instruction"] for x in inter}
    xla = xla_propagate(module, 8, keep=listed)
    still = {i.name for i in module.entry.instructions
             if i.name in xla and i.sharding is not None and not i.shape.is_tuple and xla[i.name] != i.sharding}
    assert still <= listed and len(still) < len(listed), (still, listed)


def test_io_specs_name_the_users_axes_on_a_refined_mesh():
    """On a mesh refined internally (attention_6heads at data=2,model=4 becomes 2x2x2), the specs are
    over the user's axes, a split over part of one as its Shardy sub-axis, never 'axis_0..2' of the
    refinement (new user 15); every parameter and output splits evenly (what jax.jit takes)."""
    from hloshard.autoshard import solve_module
    from hloshard.mesh import DeviceMesh as DM

    module = parse_file(str(SAMPLES / "attention_6heads.pre.hlo"))
    mesh = DM.for_module(module, "data=2,model=4")
    mesh.divisible_io = True
    res = solve_module(module, mesh, time_limit=2.0, deterministic=True)
    assert res.graph.mesh.is_refined
    ps = partition_specs(module, res.graph.mesh, propagate=False)
    assert ps["mesh"]["axes"] == ["data", "model"] and ps["mesh"]["sizes"] == [2, 4]
    names = {a for side in ("parameters", "outputs") for p in ps[side] for d in p["partition_spec"] or []
             for a in ([d] if isinstance(d, str) else d or [])}
    assert names and all(a.split(":")[0] in ("data", "model") for a in names), names
