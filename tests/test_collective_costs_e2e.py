"""Existing collectives priced end to end: ``hloshard cost`` / the solve objective charge every explicit
collective (manual regions included; variadic; async start/done pairs once) through the cost model."""

from __future__ import annotations

import math

import json

import pytest
from click.testing import CliRunner

from hloshard.autoshard import build_graph, evaluate_module, solve_module
from hloshard.cli import main
from hloshard.combine import combine_module
from hloshard.cost import collectives as cc
from hloshard.hlo import parse_module, print_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import StrategyGroup
from hloshard.strategy.collectives import group_axes
from tests.gen_fsdp import fsdp_module


def cost_json(tmp_path, text, *args, name="m.hlo"):
    p = tmp_path / name
    p.write_text(text)
    res = CliRunner().invoke(main, ["cost", str(p), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def by_name(report):
    return {r["name"]: r for r in report["instructions"]}


# ---- FSDP: cost, combine, cost again ----------------------------------------------------------------

# XLA auto-sharding formulas by hand (../shared/reference/xla_autosharding.md 1.2), n = 8, alpha 5,
# beta 0.5: all-gather round(5 + 0.5*7/8*B) + 0.1 and reduce-scatter the same + 0.001 with B = din*dout*4
# (gathered / unscattered bytes), all-reduce round(5 + 0.5*2*7/8*B) + 0.01 with B = 2*dout*4.
# (16, 24): B 1536 -> 5 + 672; ar B 192 -> 5 + 168.  (24, 32): 3072 -> 1344; 256 -> 224.
# (32, 40): 5120 -> 2240; 320 -> 280.  (40, 16): 2560 -> 1120; 128 -> 112.
FSDP_BY_HAND = {(16, 24): (677.1, 677.001, 173.01), (24, 32): (1349.1, 1349.001, 229.01),
                (32, 40): (2245.1, 2245.001, 285.01), (40, 16): (1125.1, 1125.001, 117.01)}


def test_fsdp_collectives_cost_and_combine_saves_exactly_the_alphas(tmp_path):
    layers = 6
    text = fsdp_module(layers=layers, all_reduce=True)
    mesh_args = ("--mesh", "8", "--alpha", "5", "--beta", "0.5")
    before = cost_json(tmp_path, text, *mesh_args, name="before.hlo")
    rows = by_name(before)
    mesh = DeviceMesh.parse("8", alpha="5", beta="0.5")
    # each collective costs its own formula over the per-device (manual) shapes
    widths = [16, 24, 32, 40] * 2
    expect_comm = 0.0
    for i in range(layers):
        din, dout = widths[i], widths[i + 1]
        ag, rs, ar = FSDP_BY_HAND[(din, dout)]
        assert rows[f"ag{i}"]["cost"] == pytest.approx(ag)
        assert rows[f"rs{i}"]["cost"] == pytest.approx(rs)
        assert rows[f"ar{i}"]["cost"] == pytest.approx(ar)
        assert ag > 5 and rs > 5 and ar > 5
        expect_comm += ag + rs + ar
    assert before["breakdown"]["communication"] == pytest.approx(expect_comm)

    mod = parse_module(text)
    rep = combine_module(mod, mesh=mesh)
    kinds = {}
    for g in rep.groups:
        kinds[g.kind] = kinds.get(g.kind, 0) + len(g.members) - 1
    # the per-layer all-reduces form a dependency chain (layer i+1 reads layer i's): never combined
    assert kinds == {"all-gather": layers - 1, "reduce-scatter": layers - 1}
    after = cost_json(tmp_path, print_module(mod), *mesh_args, name="after.hlo")
    saved = before["total_cost"] - after["total_cost"]
    # byte counts are multiples of 16, so beta*(n-1)/n*B is integral and rounding changes nothing: merging
    # k collectives into one saves (k-1) alphas plus (k-1) tie-break constants
    want = sum(k * (5 + tb) for k, tb in ((kinds["all-gather"], cc.ALL_GATHER_TIE_BREAK),
                                          (kinds["reduce-scatter"], cc.REDUCE_SCATTER_TIE_BREAK)))
    assert saved == pytest.approx(want, abs=1e-6)
    assert saved == pytest.approx(rep.latency_saved, abs=1e-6)     # the same model as combine's report
    assert after["breakdown"]["compute"] == pytest.approx(before["breakdown"]["compute"])
    assert after["breakdown"]["resharding"] == pytest.approx(before["breakdown"]["resharding"])


def test_partial_bucket_saves_alpha_per_merge_on_a_2d_mesh(tmp_path):
    """Groups of all 8 devices on a 2x4 mesh cost over both axes (max alpha, max beta, n=8)."""
    text = fsdp_module(layers=4)
    rows = by_name(cost_json(tmp_path, text, "--mesh", "2x4", "--alpha", "3,7", "--beta", "0.25,1"))
    assert rows["ag1"]["cost"] == pytest.approx(round(7 + 1 * 7 / 8 * 24 * 32 * 4) + 0.1)


# ---- kinds, groups, async -------------------------------------------------------------------------

ASYNC = """HloModule m, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%agc (p: f32[2,8]) -> f32[16,8] {
  %p = f32[2,8] parameter(0)
  ROOT %ag = f32[16,8] all-gather(%p), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
}

ENTRY %e {
  %x = f32[2,8] parameter(0), sharding={manual}
  %y = f32[4,8] parameter(1), sharding={manual}
  %st = ((f32[2,8]), f32[16,8]) async-start(%x), calls=%agc
  %d = f32[16,8] async-done(%st)
  %cp = f32[2,8] collective-permute(%x), channel_id=2, source_target_pairs={{0,1},{1,2}}
  %st2 = (f32[2,8], f32[8,8]) all-gather-start(%x), channel_id=3, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true
  %d2 = f32[8,8] all-gather-done(%st2)
  %ars = (f32[2,8], f32[4,8]) all-reduce-start(%x, %y), channel_id=4, replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=%add
  %ard = (f32[2,8], f32[4,8]) all-reduce-done(%ars)
  %pairs = f32[4,8] all-reduce(%y), channel_id=5, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=%add
  %odd = f32[4,8] all-reduce(%y), channel_id=6, replica_groups={{0,1,4,5},{2,3,6,7}}, use_global_device_ids=true, to_apply=%add
  %a2a = (f32[2,8], f32[4,8]) all-to-all(%x, %y), channel_id=7, replica_groups={{0,1,2,3},{4,5,6,7}}
  %xr = f32[4,8] all-reduce(%y), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %one = f32[4,8] all-reduce(%y), channel_id=8, replica_groups={{0},{1},{2},{3},{4},{5},{6},{7}}, use_global_device_ids=true, to_apply=%add
  ROOT %out = (f32[16,8], f32[2,8], f32[8,8], (f32[2,8], f32[4,8]), f32[4,8], f32[4,8], (f32[2,8], f32[4,8]), f32[4,8], f32[4,8]) tuple(%d, %cp, %d2, %ard, %pairs, %odd, %a2a, %xr, %one), sharding={{manual},{manual},{manual},{manual},{manual},{manual},{manual},{manual},{manual},{manual},{manual}}
}
"""


def test_every_kind_priced_by_its_groups_and_async_pairs_once(tmp_path):
    rows = by_name(cost_json(tmp_path, ASYNC, "--mesh", "2x4", "--alpha", "2,3", "--beta", "0.5,1"))
    # async-start wrapping an all-gather of all 8 devices (both axes), gathered bytes 16*8*4
    assert rows["st"]["cost"] == pytest.approx(round(3 + 1 * 7 / 8 * 512) + 0.1)
    assert rows["d"]["cost"] == 0.0
    # all-gather-start over axis 1 (groups {0..3},{4..7}): gathered = operand bytes * 4
    assert rows["st2"]["cost"] == pytest.approx(round(3 + 1 * 3 / 4 * 256) + 0.1)
    assert rows["d2"]["cost"] == 0.0
    # variadic all-reduce-start over axis 0: one alpha, summed bytes (64 + 128)
    assert rows["ars"]["cost"] == pytest.approx(round(2 + 0.5 * 2 * 1 / 2 * 192) + 0.01)
    assert rows["ard"]["cost"] == 0.0
    # collective-permute (0->1, 1->2 differ along axis 1): alpha_1 + beta_1 * 64
    assert rows["cp"]["cost"] == pytest.approx(3 + 64)
    # pairs inside axis 1 (size 4): no whole axis; n = 2 with axis 1's alpha / beta
    assert rows["pairs"]["cost"] == pytest.approx(round(3 + 1 * 2 * 1 / 2 * 128) + 0.01)
    # {0,1,4,5}: varies along both axes, matches none: n = 4, most expensive alpha / beta of the two
    assert rows["odd"]["cost"] == pytest.approx(round(3 + 1 * 2 * 3 / 4 * 128) + 0.01)
    # variadic all-to-all over axis 1: one alpha over 64 + 128 bytes
    # round(alpha + beta*(n-1)/n/n*B*n/2) + 0.001 = round(3 + 1*3/16*192*2) + 0.001 = 75.001
    assert rows["a2a"]["cost"] == pytest.approx(75.001)
    # cross-replica (no channel_id) with one replica, and singleton groups: no communication
    assert rows["xr"]["cost"] == 0.0
    assert rows["one"]["cost"] == 0.0


def test_async_pair_costs_the_same_as_the_synchronous_op(tmp_path):
    sync = ASYNC.replace(
        "%st2 = (f32[2,8], f32[8,8]) all-gather-start(%x)", "%d2 = f32[8,8] all-gather(%x)").replace(
        "  %d2 = f32[8,8] all-gather-done(%st2)\n", "")
    a = by_name(cost_json(tmp_path, ASYNC, "--mesh", "2x4", name="a.hlo"))
    s = by_name(cost_json(tmp_path, sync, "--mesh", "2x4", name="s.hlo"))
    assert "st2" not in s and s["d2"]["opcode"] == "all-gather"
    assert s["d2"]["cost"] == pytest.approx(a["st2"]["cost"] + a["d2"]["cost"]) and s["d2"]["cost"] > 0


def test_group_axes_mapping():
    mesh = DeviceMesh.parse("2x4")
    assert group_axes(mesh, [[0, 1, 2, 3], [4, 5, 6, 7]]) == ((1,), None)
    assert group_axes(mesh, [[0, 4], [1, 5], [2, 6], [3, 7]]) == ((0,), None)
    assert group_axes(mesh, None) == ((0, 1), None)
    assert group_axes(mesh, []) == ((0, 1), None)
    assert group_axes(mesh, [[0, 1], [2, 3], [4, 5], [6, 7]]) == ((1,), 2)
    assert group_axes(mesh, [[0, 1, 4, 5], [2, 3, 6, 7]]) == ((0, 1), 4)
    assert group_axes(mesh, [[d] for d in range(8)]) is None
    assert group_axes(mesh, [[0, 9]]) == ((0, 1), 2)      # ids outside the mesh: every axis, n = group size


def test_collective_inside_a_while_body_is_scaled_by_the_trip_count(tmp_path):
    text = """HloModule w, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0), sharding={{manual},{manual}}
  %i = s32[] get-tuple-element(%p), index=0, sharding={manual}
  %one = s32[] constant(1), sharding={manual}
  %i2 = s32[] add(%i, %one), sharding={manual}
  %v = f32[8] get-tuple-element(%p), index=1, sharding={manual}
  %r = f32[8] all-reduce(%v), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add, sharding={manual}
  ROOT %t = (s32[], f32[8]) tuple(%i2, %r), sharding={{manual},{manual}}
}

%cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0), sharding={{manual},{manual}}
  %i = s32[] get-tuple-element(%p), index=0, sharding={manual}
  %n = s32[] constant(5), sharding={manual}
  ROOT %lt = pred[] compare(%i, %n), direction=LT, sharding={manual}
}

ENTRY %e {
  %x = f32[8] parameter(0), sharding={manual}
  %z = s32[] constant(0), sharding={manual}
  %t0 = (s32[], f32[8]) tuple(%z, %x), sharding={{manual},{manual}}
  ROOT %w = (s32[], f32[8]) while(%t0), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}, sharding={{manual},{manual}}
}
"""
    rep = cost_json(tmp_path, text, "--mesh", "4")
    one = 49.01   # all-reduce of 32 bytes over 4, alpha = beta = 1: round(1 + 2*3/4*32) + 0.01
    assert rep["breakdown"]["communication"] == pytest.approx(5 * one)


# ---- strategies outside manual regions --------------------------------------------------------------

OUTSIDE = """HloModule o, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e {
  %x = f32[16,32] parameter(0)
  %y = f32[8,32] parameter(1)
  %e1 = f32[16,32] exponential(%x)
  %xr = f32[16,32] all-reduce(%e1), replica_groups={}, to_apply=%add
  %ag = f32[128,32] all-gather(%y), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  %v = (f32[16,32], f32[8,32]) all-reduce(%x, %y), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %v0 = f32[16,32] get-tuple-element(%v), index=0
  %s = f32[16,32] add(%xr, %v0)
  ROOT %out = (f32[16,32], f32[128,32], (f32[16,32], f32[8,32])) tuple(%s, %ag, %v)
}
"""


def test_outside_manual_strategies_are_consistent_and_costed():
    mesh = DeviceMesh.parse("2x4")
    g = build_graph(parse_module(OUTSIDE), mesh, keep="none")
    groups = g.ctx.groups
    e = {i.name: i for i in g.schedule}
    # cross-replica all-reduce (elementwise in XLA) follows its operand: every layout of e1, same in and out
    xr = groups[e["xr"]]
    assert isinstance(xr, StrategyGroup) and len(xr.strategies) > 1 and xr.follow is not None
    assert all(st.inputs == (st.out,) and st.comm == 0.0 for st in xr.strategies)
    # all-gather: result replicated (the gathered dim is never split over the gathering axes), operand
    # replicated, charged over the full gathered bytes on both axes
    ag = groups[e["ag"]]
    assert [st.out for st in ag.strategies] == [((), ())]
    assert ag.strategies[0].inputs == (((), ()),)
    # n = 8, alpha = beta = 1, B = 16384 gathered bytes: round(1 + 7/8*16384) + 0.1
    assert ag.strategies[0].comm == pytest.approx(14337.1)
    # variadic all-reduce: per-element specs (one per tuple element), one alpha over the summed bytes
    v = groups[e["v"]]
    assert v.multi and [st.out for st in v.strategies] == [(((), ()), ((), ()))]
    # one alpha over 2048 + 1024 bytes: round(1 + 2*7/8*3072) + 0.01 = 5377.01; two separate all-reduces
    # would cost round(1 + 3584) + 0.01 + round(1 + 1792) + 0.01 = 5378.02
    assert v.strategies[0].comm == pytest.approx(5377.01)


def test_follow_all_reduce_charges_per_device_bytes_of_its_layout():
    text = OUTSIDE.replace("num_partitions=8", "num_partitions=8, replica_count=2")
    mod = parse_module(text)
    assert mod.num_replicas == 2
    mesh = DeviceMesh.parse("2x4")
    g = build_graph(mod, mesh, keep="none")
    xr = g.ctx.groups[[i for i in g.schedule if i.name == "xr"][0]]
    for st in xr.strategies:
        per_dev = g.ctx.minfo.bytes_per_device(parse_module(text).entry.get("xr").shape, st.out)
        # n = 8, alpha = beta = 1: round(1 + 2*7/8*B) + 0.01, C rounding (halves away from zero)
        assert st.comm == pytest.approx(math.floor(1 + 1.75 * per_dev + 0.5) + 0.01)
    assert len({st.comm for st in xr.strategies}) > 1   # a sharded layout moves fewer bytes


# ---- solve: objective includes the collectives; output compiles -------------------------------------

def test_solve_objective_equals_cost_of_its_output():
    text = fsdp_module(layers=3, all_reduce=True, chain_every=2)
    mesh = DeviceMesh.parse("2x4")
    m = parse_module(text)
    res = solve_module(m, mesh, time_limit=10, deterministic=True)
    assert res.evaluation.communication > 0
    again = evaluate_module(parse_module(print_module(m)), mesh)
    assert again.total_cost == pytest.approx(res.objective, rel=1e-9)
    ref = evaluate_module(parse_module(text), mesh)
    assert res.evaluation.communication >= ref.evaluation.communication - 1e-6  # the collectives are paid


@pytest.mark.oracle
def test_solved_fsdp_modules_compile_with_xla():
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle as xo

    texts = []
    for mesh in ("8", "2x4"):
        m = parse_module(fsdp_module(layers=3, all_reduce=True, chain_every=2))
        solve_module(m, DeviceMesh.parse(mesh), time_limit=10, deterministic=True)
        texts.append(print_module(m))
    # combined all-gathers (variadic, manual region): solved, then the oracle's known jaxlib workaround
    m = parse_module(fsdp_module(layers=4))
    combine_module(m, kinds=["all-gather"])
    assert any(i.opcode == "all-gather" and i.shape.is_tuple for i in m.all_instructions())
    solve_module(m, DeviceMesh.parse("2x4"), time_limit=10, deterministic=True)
    texts.append(xo.strip_variadic_collective_shardings(print_module(m)))
    results = xo.compile_many(texts)
    for (ok, msg), t in zip(results, texts):
        assert ok, msg[-2000:]


@pytest.mark.oracle
def test_jax_shard_map_fsdp_step_costs_like_the_generated_one(tmp_path):
    """jax's own shard_map FSDP step (collectives inside the called shmap body) is charged the same
    communication as tests/gen_fsdp.py's module with the same widths and per-device shapes."""
    from tests.conftest import require_jax

    require_jax()
    from tests.gen_fsdp import jax_fsdp_module

    widths = (16, 24, 32, 40, 16)
    real = cost_json(tmp_path, jax_fsdp_module(widths), "--mesh", "8", name="jax.hlo")
    gen = cost_json(tmp_path, fsdp_module(layers=4, widths=widths), "--mesh", "8", name="gen.hlo")
    assert real["breakdown"]["communication"] > 0
    assert real["breakdown"]["communication"] == pytest.approx(gen["breakdown"]["communication"])


@pytest.mark.oracle
def test_solved_collectives_outside_manual_regions_compile():
    """XLA's partitioner rejects a channel (cross-partition) all-reduce whose sharding is tiled ("must be
    in (partial) manual partitioning mode"); a cross-replica one is elementwise. The solver, pushed to
    shard by sharded parameters, must keep the first replicated and may shard the second."""
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle as xo

    text = """HloModule o, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e {
  %x = f32[64,256] parameter(0), sharding={devices=[8,1]<=[8]}
  %y = f32[8,256] parameter(1), sharding={devices=[8,1]<=[8]}
  %e1 = f32[64,256] exponential(%x)
  %xr = f32[64,256] all-reduce(%e1), replica_groups={}, to_apply=%add
  %cr = f32[64,256] all-reduce(%e1), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %ag = f32[64,256] all-gather(%y), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  %s = f32[64,256] add(%xr, %cr)
  %t = f32[64,256] add(%s, %ag)
  ROOT %out = f32[64,256] tanh(%t), sharding={devices=[8,1]<=[8]}
}
"""
    outs = []
    for mesh in ("8", "2x4"):
        m = parse_module(text)
        solve_module(m, DeviceMesh.parse(mesh), time_limit=10, deterministic=True)
        e = m.entry
        assert e.get("cr").sharding.is_replicated and e.get("ag").sharding.is_replicated
        assert not e.get("xr").sharding.is_replicated      # follows exponential's sharded layout
        outs.append(print_module(m))
    for ok, msg in xo.compile_many(outs):
        assert ok, msg[-2000:]


def test_partially_manual_collective_charges_its_tile(tmp_path):
    """``last_tile_dims={manual}`` with a tiled data dim: the bytes are the tile (dim 1 split 2 ways),
    not the shape as written (which is what a fully manual value charges)."""
    sh = "{devices=[1,2,4]<=[8] last_tile_dims={manual}}"
    text = f"""HloModule pm, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

ENTRY %e {{
  %x = f32[4,16] parameter(0), sharding={sh}
  ROOT %r = f32[4,16] all-reduce(%x), channel_id=1, replica_groups={{{{0,2,4,6}},{{1,3,5,7}}}}, use_global_device_ids=true, to_apply=%add, sharding={sh}
}}
"""
    part = by_name(cost_json(tmp_path, text, "--mesh", "2x4", name="p.hlo"))["r"]["cost"]
    full = by_name(cost_json(tmp_path, text.replace(sh, "{manual}"), "--mesh", "2x4", name="f.hlo"))["r"]["cost"]
    # {0,2,4,6} spans axis 0 and half of axis 1: n = 4 with the dearer axis
    # alpha = beta = 1, n = 4: tile B = 128 -> round(1 + 1.5*128) + 0.01; full B = 256 -> round(1 + 384) + 0.01
    assert part == pytest.approx(193.01)
    assert full == pytest.approx(385.01)
    assert part < full


def test_kept_user_sharding_on_a_collective_keeps_its_cost(tmp_path):
    """A GSPMD-style module whose collectives carry tiled shardings (kept by ``cost``): the collective
    still runs on replicated operands (XLA's DefaultAction), so it is charged over the full bytes; the
    tuple sharding of a variadic one is kept element by element."""
    text = """HloModule fx, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e {
  %y = f32[8,256] parameter(0), sharding={replicated}
  %ag = f32[64,256] all-gather(%y), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true, sharding={devices=[8,1]<=[8]}
  %v = (f32[8,256], f32[64,256]) all-reduce(%y, %ag), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add, sharding={{replicated}, {devices=[1,8]<=[8]}}
  ROOT %t = f32[64,256] get-tuple-element(%v), index=1, sharding={devices=[1,8]<=[8]}
}
"""
    rep = cost_json(tmp_path, text, "--mesh", "8")
    rows = by_name(rep)
    assert rows["ag"]["sharding"] == "{devices=[8,1]<=[8]}"
    assert rows["v"]["sharding"] == "{{replicated}, {devices=[1,8]<=[8]}}"
    ag = 57345.1    # n = 8, alpha = beta = 1, B = 65536: round(1 + 7/8*65536) + 0.1
    ar = 129025.01  # variadic, B = 8192 + 65536: round(1 + 2*7/8*73728) + 0.01
    assert rep["breakdown"]["communication"] == pytest.approx(ag + ar)
    # the variadic all-reduce needs its operands replicated: the tiled all-gather result is gathered again
    assert [(x["operand"], x["to"]) for x in rows["v"]["reshardings"]] == [("ag", "{replicated}")]
    assert rep["breakdown"]["resharding"] == pytest.approx(rows["v"]["reshardings"][0]["cost"])


def test_send_with_source_target_pairs_is_charged_once(tmp_path):
    text = """HloModule sr, num_partitions=8

ENTRY %e {
  %x = f32[2,8] parameter(0), sharding={manual}
  %tk = token[] after-all()
  %sd = (f32[2,8], u32[], token[]) send(%x, %tk), channel_id=1, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,5}}"}
  %rv = (f32[2,8], u32[], token[]) recv(%tk), channel_id=1, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,5}}"}
  %sdd = token[] send-done(%sd), channel_id=1
  %rvd = (f32[2,8], token[]) recv-done(%rv), channel_id=1
  ROOT %o = f32[2,8] get-tuple-element(%rvd), index=0
}
"""
    rows = by_name(cost_json(tmp_path, text, "--mesh", "2x4", "--alpha", "2,3", "--beta", "0.5,1"))
    # 0->1 differs along axis 1 (3 + 64), 1->5 along axis 0 (2 + 0.5*64): the max pair
    assert rows["sd"]["cost"] == pytest.approx(3 + 64)
    assert rows["rv"]["cost"] == rows["sdd"]["cost"] == rows["rvd"]["cost"] == 0.0
    no_pairs = text.replace(', frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,5}}"}', "")
    assert by_name(cost_json(tmp_path, no_pairs, "--mesh", "2x4", name="n.hlo"))["sd"]["cost"] == 0.0


def test_cli_cost_combine_cost_round_trip(tmp_path):
    """The three commands as a user runs them: cost, combine -o, cost; the difference of the two totals
    is combine's reported latency_saved, and the communication is all collectives (nothing else moves)."""
    src = tmp_path / "fsdp.hlo"
    out = tmp_path / "fsdp.combined.hlo"
    src.write_text(fsdp_module(layers=5, dtypes=("f32", "bf16")))
    runner = CliRunner()
    args = ["--mesh", "2x4", "--alpha", "4,4", "--beta", "1,1"]
    before = json.loads(runner.invoke(main, ["cost", str(src), "--format", "json", *args]).output)
    res = runner.invoke(main, ["combine", str(src), "-o", str(out), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    after = json.loads(runner.invoke(main, ["cost", str(out), "--format", "json", *args]).output)
    assert rep["merged"] > 0 and rep["latency_saved"] > 0
    assert before["breakdown"]["communication"] == pytest.approx(rep["cost_before"])
    assert after["breakdown"]["communication"] == pytest.approx(rep["cost_after"])
    assert before["total_cost"] - after["total_cost"] == pytest.approx(rep["latency_saved"], abs=1e-6)
