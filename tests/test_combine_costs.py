"""``hloshard combine``'s cost report is ``hloshard cost``'s pricing: for every module, the communication
``hloshard cost`` reports before and after combining equals combine's ``cost_before`` / ``cost_after``,
and the difference of the two totals is its ``latency_saved``. Cases the old private coster got wrong:
cross-replica collectives (no ``channel_id``) with one replica, irregular replica groups, collectives
in a while body (run trip-count times)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.combine import combine_module, execution_counts
from hloshard.cost import collectives as cc
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.collectives import group_axes

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def round_trip(tmp_path, text, *mesh_args, totals=True):
    """cost, combine -o, cost through the CLI; asserts the three agree and returns the documents.
    ``totals``: also compare the total costs (not only the communication) with ``latency_saved``."""
    src, out = tmp_path / "m.hlo", tmp_path / "m.combined.hlo"
    src.write_text(text)
    runner = CliRunner()

    def cost(path):
        res = runner.invoke(main, ["cost", str(path), "--format", "json", *mesh_args])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    before = cost(src)
    res = runner.invoke(main, ["combine", str(src), "-o", str(out), "--format", "json", *mesh_args])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    after = cost(out)
    assert before["breakdown"]["communication"] == pytest.approx(rep["cost_before"], abs=1e-6)
    assert after["breakdown"]["communication"] == pytest.approx(rep["cost_after"], abs=1e-6)
    if not totals:      # per-instruction rows hold compute too
        return before, rep, after
    assert before["total_cost"] - after["total_cost"] == pytest.approx(rep["latency_saved"], abs=1e-6)
    rows = {r["name"]: r["cost"] for r in before["instructions"]}
    rows_after = {r["name"]: r["cost"] for r in after["instructions"]}
    for g in rep["groups"]:      # per group: the members' rows before, the combined op's row after
        assert g["cost_before"] == pytest.approx(sum(rows[m] for m in g["members"]), abs=1e-6)
        assert g["cost_after"] == pytest.approx(rows_after[g["name"]], abs=1e-6)
    return before, rep, after


def cross_replica(header: str) -> str:
    m = "sharding={manual}"
    return f"""HloModule xr{header}

{ADD}
ENTRY %e {{
  %x = f32[2,8] parameter(0), {m}
  %y = f32[4,8] parameter(1), {m}
  %ax = f32[8,8] all-gather(%x), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, {m}
  %ay = f32[16,8] all-gather(%y), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, {m}
  %rx = f32[2,8] all-reduce(%x), replica_groups={{}}, to_apply=%add, {m}
  %ry = f32[4,8] all-reduce(%y), replica_groups={{}}, to_apply=%add, {m}
  ROOT %t = (f32[8,8], f32[16,8], f32[2,8], f32[4,8]) tuple(%ax, %ay, %rx, %ry), sharding={{{{manual}},{{manual}},{{manual}},{{manual}}}}
}}
"""


def test_cross_replica_collectives_with_one_replica_cost_nothing(tmp_path):
    """No channel_id: the groups are replica ids; with one replica every group is one replica and the
    op moves nothing. Combining still merges them (one op instead of four), but saves no latency."""
    for header in ("", ", replica_count=1"):
        before, rep, _ = round_trip(tmp_path, cross_replica(header), "--mesh", "4", "--alpha", "5")
        assert rep["merged"] == 4 and rep["combined"] == 2
        assert rep["cost_before"] == 0 and rep["cost_after"] == 0 and rep["latency_saved"] == 0
        assert all(g["cost_before"] == 0 and g["cost_after"] == 0 for g in rep["groups"])
        assert before["breakdown"]["communication"] == 0


def test_cross_replica_collectives_with_replicas_save_one_alpha_per_merge(tmp_path):
    """With replica_count=4 the replica ids are charged as mesh devices (the shared approximation)."""
    _, rep, _ = round_trip(tmp_path, cross_replica(", replica_count=4"), "--mesh", "4", "--alpha", "5",
                           "--beta", "0.5")
    # XLA auto-sharding formulas (../shared/reference/xla_autosharding.md 1.2), n = 4, alpha 5, beta 0.5:
    # all-gather round(a + b*(n-1)/n*B) + 0.1: B=256 -> round(5+96)=101.1, B=512 -> round(5+192)=197.1
    # all-reduce round(a + b*2(n-1)/n*B) + 0.01: B=64 -> round(5+48)=53.01, B=128 -> round(5+96)=101.01
    assert rep["cost_before"] == pytest.approx(101.1 + 197.1 + 53.01 + 101.01)
    # variadic: one alpha over the summed bytes: all-gather B=768 -> round(5+288)=293.1,
    # all-reduce B=192 -> round(5+144)=149.01
    assert rep["cost_after"] == pytest.approx(293.1 + 149.01)
    # byte counts keep beta terms integral: merging saves exactly one alpha (+ tie-break) per kind
    assert rep["latency_saved"] == pytest.approx(2 * 5 + cc.ALL_GATHER_TIE_BREAK + cc.ALL_REDUCE_TIE_BREAK)


# device d of the 2x4 mesh sits at (d // 4, d % 4): {0,1} varies along axis 1 only, {2,6} along axis 0
IRREGULAR = "replica_groups={{0,1},{2,6},{3,7},{4,5}}"


def irregular_module() -> str:
    m = "sharding={manual}"
    mode = "use_global_device_ids=true"
    return f"""HloModule irr, num_partitions=8

{ADD}
ENTRY %e {{
  %x = f32[2,8] parameter(0), {m}
  %y = f32[4,8] parameter(1), {m}
  %ax = f32[4,8] all-gather(%x), channel_id=1, {IRREGULAR}, dimensions={{0}}, {mode}, {m}
  %ay = f32[8,8] all-gather(%y), channel_id=2, {IRREGULAR}, dimensions={{0}}, {mode}, {m}
  %rx = f32[2,8] all-reduce(%x), channel_id=3, {IRREGULAR}, {mode}, to_apply=%add, {m}
  %ry = f32[4,8] all-reduce(%y), channel_id=4, {IRREGULAR}, {mode}, to_apply=%add, {m}
  ROOT %t = (f32[4,8], f32[8,8], f32[2,8], f32[4,8]) tuple(%ax, %ay, %rx, %ry), sharding={{{{manual}},{{manual}},{{manual}},{{manual}}}}
}}
"""


def test_irregular_groups_are_priced_over_every_axis_any_group_varies_along(tmp_path):
    """Groups that match no whole mesh axis cost over every axis some group varies along (max alpha,
    max beta, n = group size), not just the first group's axes."""
    args = ("--mesh", "2x4", "--alpha", "7,3", "--beta", "1,0.25")
    mesh = DeviceMesh.parse("2x4", alpha="7,3", beta="1,0.25")
    groups = [[0, 1], [2, 6], [3, 7], [4, 5]]
    assert group_axes(mesh, groups) == ((0, 1), 2)
    _, rep, _ = round_trip(tmp_path, irregular_module(), *args)
    assert rep["merged"] == 4 and rep["combined"] == 2
    # over axes (0, 1): alpha = max(7, 3) = 7, beta = max(1, 0.25) = 1, n = group size 2 (hand-derived):
    # all-gather results 128 / 256 B: round(7 + 0.5*128) + 0.1 = 71.1, round(7 + 0.5*256) + 0.1 = 135.1
    # all-reduce 64 / 128 B: round(7 + 1*64) + 0.01 = 71.01, round(7 + 1*128) + 0.01 = 135.01
    assert rep["cost_before"] == pytest.approx(71.1 + 135.1 + 71.01 + 135.01)
    # the first group alone ({0,1}: axis 1, alpha 3, beta 0.25) would price the all-reduces at
    # round(3 + 0.25*64) + 0.01 = 19.01 and round(3 + 0.25*128) + 0.01 = 35.01: cheaper, and wrong
    assert cc.all_reduce_cost(mesh, 64, 1, group_size=2) == pytest.approx(19.01)
    # merged: all-gather B=384 -> round(7+192)+0.1 = 199.1, all-reduce B=192 -> round(7+192)+0.01 = 199.01
    assert rep["latency_saved"] == pytest.approx((71.1 + 135.1 + 71.01 + 135.01) - (199.1 + 199.01), abs=1e-6)


def while_module(trips: int) -> str:
    m = "sharding={manual}"
    t = "sharding={{manual},{manual},{manual}}"
    g = "replica_groups={{0,1,2,3}}, use_global_device_ids=true"
    return f"""HloModule w, num_partitions=4

{ADD}
%cond (s: (s32[], f32[2,8], f32[4,8])) -> pred[] {{
  %s = (s32[], f32[2,8], f32[4,8]) parameter(0), {t}
  %i = s32[] get-tuple-element(%s), index=0, {m}
  %n = s32[] constant({trips}), {m}
  ROOT %lt = pred[] compare(%i, %n), direction=LT, {m}
}}

%body (s: (s32[], f32[2,8], f32[4,8])) -> (s32[], f32[2,8], f32[4,8]) {{
  %s = (s32[], f32[2,8], f32[4,8]) parameter(0), {t}
  %i = s32[] get-tuple-element(%s), index=0, {m}
  %one = s32[] constant(1), {m}
  %i2 = s32[] add(%i, %one), {m}
  %x = f32[2,8] get-tuple-element(%s), index=1, {m}
  %y = f32[4,8] get-tuple-element(%s), index=2, {m}
  %rx = f32[2,8] all-reduce(%x), channel_id=1, {g}, to_apply=%add, {m}
  %ry = f32[4,8] all-reduce(%y), channel_id=2, {g}, to_apply=%add, {m}
  ROOT %t = (s32[], f32[2,8], f32[4,8]) tuple(%i2, %rx, %ry), {t}
}}

ENTRY %main {{
  %x0 = f32[2,8] parameter(0), {m}
  %y0 = f32[4,8] parameter(1), {m}
  %z = s32[] constant(0), {m}
  %init = (s32[], f32[2,8], f32[4,8]) tuple(%z, %x0, %y0), {t}
  ROOT %w = (s32[], f32[2,8], f32[4,8]) while(%init), condition=%cond, body=%body, backend_config={{"known_trip_count":{{"n":"{trips}"}}}}, {t}
}}
"""


def test_collectives_in_a_while_body_count_once_per_iteration(tmp_path):
    _, rep, _ = round_trip(tmp_path, while_module(6), "--mesh", "4", "--alpha", "5", "--beta", "0.5")
    ((g),) = rep["groups"]
    assert g["computation"] == "body" and g["members"] == ["rx", "ry"]
    # per trip (n = 4, alpha 5, beta 0.5): round(5 + 0.75*64) + 0.01 = 53.01, round(5 + 0.75*128) + 0.01 = 101.01
    assert g["cost_before"] == pytest.approx(6 * (53.01 + 101.01))
    assert rep["latency_saved"] == pytest.approx(6 * (5 + cc.ALL_REDUCE_TIE_BREAK))


def test_execution_counts_follow_the_call_graph():
    mod = parse_module(while_module(3))
    w = execution_counts(mod)
    assert w[id(mod.entry)] == 1.0
    assert w[id(mod.get_computation("body"))] == 3.0 and w[id(mod.get_computation("cond"))] == 3.0
    assert id(mod.get_computation("add")) not in w      # a reducer: never charged on its own


def test_collectives_outside_charged_computations_are_reported_uncosted():
    """A computation nothing calls is never executed: ``hloshard cost`` charges nothing there, so the
    report leaves its collectives out of the totals and counts them as uncosted."""
    dead = """%dead (p: f32[2,8]) -> f32[2,8] {
  %p = f32[2,8] parameter(0), sharding={manual}
  ROOT %r = f32[2,8] all-reduce(%p), channel_id=9, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add, sharding={manual}
}

"""
    text = while_module(2).replace("ENTRY %main", dead + "ENTRY %main")
    mesh = DeviceMesh.parse("4", alpha="5", beta="0.5")
    rep = combine_module(parse_module(text), mesh=mesh)
    assert rep.uncosted == 1
    assert rep.cost_before == pytest.approx(2 * (53.01 + 101.01))   # the while body's two, twice (as above)


OUTSIDE = """HloModule nm, num_partitions=8

""" + ADD + """
ENTRY %e {
  %x = f32[16,32] parameter(0)
  %y = f32[8,32] parameter(1)
  %ex = f32[16,32] exponential(%x)
  %ey = f32[8,32] exponential(%y)
  %ax = f32[128,32] all-gather(%ex), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  %ay = f32[64,32] all-gather(%ey), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  %rx = f32[16,32] all-reduce(%ex), channel_id=3, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %ry = f32[8,32] all-reduce(%ey), channel_id=4, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %s = f32[16,32] add(%rx, %ex)
  ROOT %out = (f32[128,32], f32[64,32], f32[16,32], f32[8,32]) tuple(%ax, %ay, %s, %ry)
}
"""


def test_collectives_outside_manual_regions_are_priced_on_full_bytes(tmp_path):
    """Outside manual regions an explicit channel collective is replicated (XLA's DefaultAction), so
    ``hloshard cost`` charges its written (full) bytes, as combine does. A collective carries no compute
    cost, array-shaped or variadic, so the totals drop by exactly the latency saved."""
    _, rep, _ = round_trip(tmp_path, OUTSIDE, "--mesh", "2x4", "--alpha", "4,6", "--beta", "1,0.5")
    assert rep["merged"] == 4
    # all-gathers over all 8 devices (axes 0 and 1: alpha max 6, beta max 1, n 8), full written bytes:
    # f32[128,32] = 16384 B: round(6 + 7/8*16384) + 0.1 = 14342.1; f32[64,32] = 8192 B: 7174.1
    # all-reduces over {0..3},{4..7} (axis 1: alpha 6, beta 0.5, n 4): 2048 B: round(6 + 0.5*1.5*2048) + 0.01
    # = 1542.01; 1024 B: round(6 + 768) + 0.01 = 774.01
    assert rep["cost_before"] == pytest.approx(14342.1 + 7174.1 + 1542.01 + 774.01)
