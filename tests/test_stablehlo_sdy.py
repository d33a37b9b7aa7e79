"""Shardy-mode output of ``hloshard solve``: its ``xla.sdy.sharding`` attributes name the same shardings as
its ``sharding={...}``, checked through XLA.

For each Shardy-mode sample (``samples/NAME.shardy.pre.hlo``, written by jax) every ``xla.sdy.sharding``
of the solved module is converted by XLA itself (a StableHLO function argument carrying it, turned into
HLO by jaxlib) and must equal the ``sharding={...}`` beside it by ``xla_client.HloSharding`` equality;
XLA's **Shardy** partitioner compiles the module from the ``xla.sdy.*`` attributes alone (the
``sharding={...}`` fields removed, else XLA falls back to GSPMD) and takes the same parameter shardings.
(Shardy's HLO import reads ``xla.sdy.sharding`` only on parameters and custom-calls, not on ordinary
instructions: ``test_shardy_ignores_attributes_on_ordinary_instructions`` shows it.)
"""

from __future__ import annotations

import re

import pytest

from hloshard.autoshard import solve_module
from hloshard.hlo import parse_file, parse_module, print_module
from hloshard.mesh import DeviceMesh
from hloshard.sdy import SdyMesh, annotate_module, dim_axes, module_mesh, module_meshes, module_sdy_mesh, to_sdy
from hloshard.hlo.sharding import HloSharding
from tests.conftest import SAMPLES, require_jax

NAMES = ["mlp_train_step", "transformer_block", "conv_layer"]   # transformer_train_step: same code, 4x the time


def strip_shardings(text: str) -> str:
    """``text`` without its ``sharding={...}`` fields (the Shardy side: XLA falls back to GSPMD otherwise)."""
    module = parse_module(text)
    for ins in module.all_instructions():
        ins.sharding = None
    return print_module(module)


def solved_text(name: str) -> tuple[str, object]:
    module = parse_file(str(SAMPLES / f"{name}.shardy.pre.hlo"))
    solve_module(module, DeviceMesh.parse("2x4"), keep="io", time_limit=10.0, deterministic=True)
    annotate_module(module)
    return print_module(module), module


def test_module_mesh_of_samples():
    m = parse_file(str(SAMPLES / "mlp_train_step.shardy.pre.hlo"))
    assert module_mesh(m) == (("data", "model"), (2, 4))
    assert module_mesh(parse_file(str(SAMPLES / "mlp_train_step.pre.hlo"))) is None
    # several meshes (XLA's round-trip form): the one the shardings name wins; a maximal mesh has no axes
    text = ('HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["a"=8, "b"=8]>, '
            'mesh2 = #sdy.mesh<["a"=1, "b"=4]>, maximal_mesh = #sdy.mesh<[], device_ids=[0]>}}\n'
            'ENTRY e {\n  ROOT p = f32[4] parameter(0), frontend_attributes='
            '{xla.sdy.sharding="#sdy.sharding<@mesh2, [{\\"b\\"}]>"}\n}\n')
    m = parse_module(text)
    assert sorted(module_meshes(m)) == ["maximal_mesh", "mesh", "mesh2"]
    assert module_meshes(m)["maximal_mesh"].device_ids == (0,)
    assert module_mesh(m) == (("a", "b"), (1, 4))


def test_dim_axes_hand_derived():
    mesh = SdyMesh("mesh", ("data", "model"), (2, 4))
    # devices=[2,4]<=[8]: dim 0 advances with 'data' (device +4), dim 1 with 'model' (device +1)
    assert dim_axes(HloSharding.parse("{devices=[2,4]<=[8]}"), 2, mesh) == [['"data"'], ['"model"']]
    # [1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate: model on dim 1, data replicated (jax's P(None,'model'))
    assert dim_axes(HloSharding.parse("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"), 2, mesh) == \
        [[], ['"model"']]
    # [8,1]<=[8]: dim 0 over data then model (major to minor)
    assert dim_axes(HloSharding.parse("{devices=[8,1]<=[8]}"), 2, mesh) == [['"data"', '"model"'], []]
    # [4,1,2]<=[8] last_tile_dim_replicate: devices 0,1 | 2,3 | 4,5 | 6,7 per tile: dim 0 = data and the
    # major half of model, the minor half of model replicated -> sub-axis "model":(1)2
    assert dim_axes(HloSharding.parse("{devices=[4,1,2]<=[8] last_tile_dim_replicate}"), 2, mesh) == \
        [['"data"', '"model":(1)2'], []]
    # [2,2,2]<=[2,2,2]T(... ) model split across two dims: dim 0 model:(1)2, dim 1 model:(2)2, data replicated
    assert to_sdy(HloSharding.parse("{devices=[2,2,2]<=[2,2,2]T(1,2,0) last_tile_dim_replicate}"), 2, mesh) == \
        '<@mesh, [{"model":(1)2}, {"model":(2)2}]>'
    assert to_sdy(HloSharding.replicated(), 3, mesh) == "<@mesh, [{}, {}, {}]>"


def test_dim_axes_rejects_what_no_axes_produce():
    from hloshard.sdy import NotExpressible

    mesh = SdyMesh("mesh", ("data", "model"), (2, 4))
    with pytest.raises(NotExpressible):
        dim_axes(HloSharding.parse("{devices=[8,1]1,0,3,2,5,4,7,6}"), 2, mesh)
    with pytest.raises(NotExpressible):
        dim_axes(HloSharding.parse("{devices=[4,1]<=[4]}"), 2, mesh)
    with pytest.raises(NotExpressible):
        dim_axes(HloSharding.parse("{maximal device=1}"), 2, mesh)


def _pairs(module):
    """(name, sharding text, xla.sdy.sharding per-value text, dims) of every array instruction that got both."""
    from hloshard.sdy import SDY_SHARDING, _frontend

    out = []
    for comp in module.computations:
        for ins in comp.instructions:
            v = _frontend(ins).get(SDY_SHARDING)
            if ins.sharding is None or v is None or ins.shape.is_tuple:
                continue
            m = re.fullmatch(r"#sdy\.sharding(?:_per_value<\[(<.*>)\]>|(<.*>))", v)
            out.append((ins.name, str(ins.sharding), m.group(1) or m.group(2), ins.shape.dims))
    return out


@pytest.mark.oracle
def test_sdy_attributes_match_shardings_through_xla():
    """Every xla.sdy.sharding hloshard writes, converted by XLA (StableHLO -> HLO), equals the
    sharding={...} beside it (xla_client.HloSharding equality); XLA's Shardy partitioner compiles the
    output from the sdy attributes alone and takes the same entry parameter shardings."""
    require_jax()
    from tests import xla_oracle

    total = 0
    for name in NAMES:
        text, module = solved_text(name)
        mesh = module_sdy_mesh(module)
        pairs = _pairs(module)
        annotated = [i for c in module.computations for i in c.instructions
                     if i.sharding is not None and not i.shape.is_tuple and i.opcode != "parameter"]
        assert len(pairs) >= len(annotated), (name, len(pairs), len(annotated))
        converted = xla_oracle.sdy_to_hlo_shardings(mesh.text()[len("#sdy.mesh"):],
                                                     [(v, d) for _, _, v, d in pairs], mesh_name=mesh.name)
        # XLA prints no sharding= for a fully replicated argument: compare it as {replicated}
        res = xla_oracle.shardings_from_strings([a for _, a, _, _ in pairs],
                                                [c or "{replicated}" for c in converted])
        bad = [(p[0], p[1], c) for p, c, r in zip(pairs, converted, res) if not r.get("equal")]
        assert not bad, (name, bad[:5])
        total += len(pairs)
        # Shardy (sdy attributes only; with sharding={...} present XLA falls back to GSPMD) compiles it
        imported, _ = xla_oracle.shardy_partition(strip_shardings(text))
        got = {}
        for ins in parse_module(imported).entry.instructions:
            if ins.opcode == "parameter":
                got[ins.parameter_number] = str(ins.sharding)
        params = module.entry.parameters
        res = xla_oracle.shardings_from_strings([str(p.sharding) for p in params],
                                                [got[p.parameter_number] for p in params])
        assert all(r.get("equal") for r in res), name
    assert total > 150, total


@pytest.mark.oracle
def test_shardy_ignores_attributes_on_ordinary_instructions():
    """Recorded XLA behaviour (jaxlib 0.10.2) the README states: an ``xla.sdy.sharding`` on an ``add``
    does not reach Shardy's partitioning; the parameter's does."""
    require_jax()
    from tests import xla_oracle

    text = """HloModule tiny, entry_computation_layout={(f32[16,16]{1,0})->f32[16,16]{1,0}}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}}

ENTRY main {
  p0 = f32[16,16]{1,0} parameter(0), frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"data\\"}, {}]>"}
  ROOT a = f32[16,16]{1,0} add(p0, p0), frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{}, {\\"model\\"}]>]>"}
}
"""
    imported, _ = xla_oracle.shardy_partition(text)
    got = {i.name.split(".")[0]: str(i.sharding) for i in parse_module(imported).entry.instructions}
    assert got["p0"] == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert got["a"] == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"   # not [{}, {"model"}] = [1,4,2]
