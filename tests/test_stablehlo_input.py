"""StableHLO ``.mlir`` input (``samples/NAME.stablehlo.mlir``, jax's ``as_text(debug_info=True)``): it
converts (jaxlib, child process) to the same module as the HLO form, gives the same shardings and
objective, reads the JAX argument / result paths, and bad input is one clear error with exit 2."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from hloshard.autoshard import solve_module
from hloshard.cli import main
from hloshard.hlo import parse_file
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.stablehlo import mlir_signature
from tests.conftest import SAMPLES, require_jax

NAMES = ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer"]


def _instrs(m):
    return [(i.name, i.opcode, str(i.shape), str(i.sharding)) for c in m.computations for i in c.instructions]


def test_mlir_signature_reads_jax_paths():
    text = (SAMPLES / "mlp_train_step.stablehlo.mlir").read_text()
    sig = mlir_signature(text)
    # mlp_train_step(params=(w1, b1, w2, b2), x, y) -> (loss, new params)
    assert sig["args"] == ["params[0]", "params[1]", "params[2]", "params[3]", "x", "y"]
    assert sig["results"] == ["result[0]", "result[1][0]", "result[1][1]", "result[1][2]", "result[1][3]"]
    assert mlir_signature("module {}") == {"args": [], "results": []}


@pytest.mark.oracle
def test_mlir_samples_convert_to_the_hlo_form():
    require_jax()
    for name in NAMES:
        a = load_module(str(SAMPLES / f"{name}.stablehlo.mlir"))
        b = parse_file(str(SAMPLES / f"{name}.shardy.pre.hlo"))
        assert a.source_info.format == "stablehlo"
        assert _instrs(a) == _instrs(b), name


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["mlp_train_step", "transformer_block", "conv_layer"])
def test_mlir_gives_same_shardings_and_objective(name):
    require_jax()
    mesh = DeviceMesh.parse("2x4")
    a = load_module(str(SAMPLES / f"{name}.stablehlo.mlir"))
    b = parse_file(str(SAMPLES / f"{name}.shardy.pre.hlo"))
    ra = solve_module(a, mesh, time_limit=10.0, deterministic=True)
    rb = solve_module(b, mesh, time_limit=10.0, deterministic=True)
    assert ra.objective == pytest.approx(rb.objective, rel=1e-12, abs=1e-9)
    assert _instrs(a) == _instrs(b)


@pytest.mark.oracle
def test_cli_solve_reads_mlir(tmp_path):
    require_jax()
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "conv_layer.stablehlo.mlir"), "--mesh", "2x4", "-o", str(out),
                                  "--report", str(rep), "--quiet", "--deterministic"])
    assert r.exit_code == 0, r.output
    assert "xla.sdy.sharding" in out.read_text()
    assert json.loads(rep.read_text())["status"] in ("optimal", "feasible")


@pytest.mark.oracle
def test_not_stablehlo_is_one_error(tmp_path):
    require_jax()
    bad = tmp_path / "bad.mlir"
    bad.write_text("module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                   "    %0 = stablehlo.add %a, %b : tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}\n")
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(bad), "--mesh", "2x4", "-o", str(out)])
    assert r.exit_code == 2
    assert f"{bad}:3:28: error: not StableHLO: use of undeclared SSA value name" in r.output
    assert "Traceback" not in r.output and not out.exists()
    hlo = tmp_path / "h.mlir"
    hlo.write_text((SAMPLES / "conv_layer.pre.hlo").read_text())
    r = CliRunner().invoke(main, ["cost", str(hlo), "--mesh", "2x4"])
    assert r.exit_code == 2 and "not StableHLO: this is HLO text" in r.output


def test_mlir_without_jax_names_the_extra(tmp_path, monkeypatch):
    fake = tmp_path / "nojax"
    (fake / "jax").mkdir(parents=True)
    (fake / "jax" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'jax'\")\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "conv_layer.stablehlo.mlir"), "--mesh", "2x4", "-o", str(out)])
    assert r.exit_code == 2
    assert "hloshard[xla]" in r.output and not out.exists()
