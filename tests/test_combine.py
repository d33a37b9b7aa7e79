"""hloshard combine: bucketing collectives into variadic ones (no XLA here; see test_combine_oracle.py)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.combine import REPORT_SCHEMA, collective_bytes, combine_module, parse_kinds
from hloshard.combine import replica_group_problems as combine_replica_group_problems
from hloshard.errors import InputError, UsageError
from hloshard.hlo import parse_module, print_module
from hloshard.mesh import DeviceMesh
from tests.gen_fsdp import fsdp_module

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""
ADD2 = """%add.other (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(%x, %y)
}
"""
MUL = """%mul (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %prod = f32[] multiply(%x, %y)
}
"""
G8 = "replica_groups={{0,1,2,3,4,5,6,7}}"


def module(body: str, comps: str = ADD, header: str = "HloModule m, num_partitions=8") -> str:
    lines = "\n".join("  " + ln.strip() for ln in body.strip().splitlines())
    return f"{header}\n\n{comps}\nENTRY %main {{\n{lines}\n}}\n"


def ag(name, src, rows, cols=8, ch=1, extra="", dim=0, groups=G8):
    return (f"%{name} = f32[{rows * 8},{cols}] all-gather(%{src}), channel_id={ch}, {groups}, "
            f"dimensions={{{dim}}}, use_global_device_ids=true{extra}")


def check_order(mod):
    """Every operand and control predecessor is defined earlier in its computation."""
    for comp in mod.computations:
        seen = set()
        for i in comp.instructions:
            for o in i.operands:
                assert id(o) in seen, f"{i.name} uses {o.name} before its definition"
            seen.add(id(i))
        names = [i.name for i in comp.instructions]
        assert len(names) == len(set(names))


def combined(mod, kind=None):
    return [i for i in mod.all_instructions() if i.opcode in ("all-gather", "reduce-scatter", "all-reduce")
            and i.shape.is_tuple and (kind is None or i.opcode == kind)]


def run(text, **kw):
    mod = parse_module(text)
    rep = combine_module(mod, **kw)
    check_order(mod)
    out = print_module(mod)
    assert print_module(parse_module(out)) == out  # re-parses to a fixed point
    return mod, rep, out


# ---- basic combining ----------------------------------------------------------------------------

TWO_AG = module(f"""
%p0 = f32[2,8] parameter(0), sharding={{manual}}
%p1 = f32[4,8] parameter(1), sharding={{manual}}
{ag('ag0', 'p0', 2, ch=1, extra=', sharding={manual}, metadata={op_name="w0"}')}
{ag('ag1', 'p1', 4, ch=2, extra=', sharding={manual}')}
ROOT %t = (f32[16,8], f32[32,8]) tuple(%ag0, %ag1)
""")


def test_two_all_gathers_become_one_variadic_with_tuple_sharding():
    mod, rep, out = run(TWO_AG, mesh=DeviceMesh.parse("8"))
    (c,) = combined(mod)
    assert [o.name for o in c.operands] == ["p0", "p1"]
    assert str(c.shape) == "(f32[16,8], f32[32,8])"
    assert str(c.sharding) == "{{manual}, {manual}}"
    assert c.channel_id == 1 and c.dimensions == [0] and c.replica_groups == [list(range(8))]
    g0, g1 = mod.entry.get("ag0"), mod.entry.get("ag1")
    assert (g0.opcode, g0.attrs["index"], g0.operands[0] is c) == ("get-tuple-element", 0, True)
    assert g1.attrs["index"] == 1 and str(g1.sharding) == "{manual}"
    assert 'op_name="w0"' in str(g0.attrs["metadata"])   # metadata stays with the member's GTE
    assert [u.name for u in mod.entry.root.operands] == ["ag0", "ag1"]
    # report: one alpha saved (mesh 8, alpha = beta = 1): round(1 + 7/8*B) + 0.1 per all-gather
    assert rep.merged == 2 and len(rep.groups) == 1 and rep.collectives_before == 2 and rep.collectives_after == 1
    assert rep.cost_before == pytest.approx((1 + 448 + 0.1) + (1 + 896 + 0.1))
    assert rep.cost_after == pytest.approx(1 + 1344 + 0.1)
    assert rep.latency_saved == pytest.approx(1.1)
    assert rep.groups[0].bytes == 16 * 8 * 4 + 32 * 8 * 4
    # liveness (hloshard.cost.liveness: entry parameters are caller-owned and live throughout): before,
    # the peak is p0 + p1 + ag0 + ag1 = 64 + 128 + 512 + 1024 = 1728 at ag1; after, both parameters are
    # live while the combined all-gather writes both results: 64 + 128 + 1536 = 1728
    assert rep.peak_bytes == {"main": (1728, 1728)}
    assert "peak live bytes per device in main: 1.7 KiB -> 1.7 KiB" in rep.to_text()


def test_bucket_bytes_limit_and_zero():
    body = "\n".join([f"%p{i} = f32[4,8] parameter({i})" for i in range(3)]
                     + [ag(f"ag{i}", f"p{i}", 4, ch=i + 1) for i in range(3)]
                     + ["ROOT %t = (f32[32,8], f32[32,8], f32[32,8]) tuple(%ag0, %ag1, %ag2)"])
    text = module(body)
    one = 32 * 8 * 4
    mod, rep, _ = run(text, bucket_bytes=2 * one)
    assert [g.members for g in rep.groups] == [["ag0", "ag1"]]
    mod, rep, _ = run(text, bucket_bytes=3 * one)
    assert [g.members for g in rep.groups] == [["ag0", "ag1", "ag2"]]
    mod, rep, _ = run(text, bucket_bytes=0)
    assert rep.groups == [] and rep.collectives_after == 3


def test_direct_and_transitive_dependencies_are_never_combined():
    text = module(f"""
%p0 = f32[2,8] parameter(0)
{ag('ag0', 'p0', 2, ch=1)}
%s = f32[2,8] slice(%ag0), slice={{[0:2], [0:8]}}
%n = f32[2,8] negate(%s)
{ag('ag1', 'n', 2, ch=2)}
{ag('ag2', 's', 2, ch=3)}
ROOT %t = (f32[16,8], f32[16,8]) tuple(%ag1, %ag2)
""")
    mod, rep, _ = run(text)
    # ag1 and ag2 both depend on ag0 (transitively) but not on each other
    assert [g.members for g in rep.groups] == [["ag1", "ag2"]]


def test_cross_bucket_cycle_is_avoided():
    """a1 -> b2 and b1 -> a2: combining both pairs would make the two combined ops depend on each
    other. Only the first pair may combine."""
    text = module(f"""
%p0 = f32[2,8] parameter(0)
%p1 = f32[16,8] parameter(1)
%p2 = f32[16,8] parameter(2)
%q = f32[2,8] parameter(3)
{ag('a1', 'p0', 2, ch=1)}
%b1 = f32[16,8] all-reduce(%p1), channel_id=2, {G8}, use_global_device_ids=true, to_apply=%add
%b1s = f32[2,8] slice(%b1), slice={{[0:2], [0:8]}}
%a1s = f32[16,8] negate(%a1)
%b2 = f32[16,8] all-reduce(%a1s), channel_id=3, {G8}, use_global_device_ids=true, to_apply=%add
{ag('a2', 'b1s', 2, ch=4)}
ROOT %t = (f32[16,8], f32[16,8], f32[16,8]) tuple(%b2, %a2, %p2)
""")
    mod, rep, _ = run(text)
    assert len(rep.groups) == 1, [g.members for g in rep.groups]
    assert rep.groups[0].members in (["a1", "a2"], ["b1", "b2"])


def test_keys_separate_groups_dims_modes_and_reducers():
    text = module(f"""
%p0 = f32[16,8] parameter(0)
%p1 = f32[16,8] parameter(1)
%p2 = f32[16,8] parameter(2)
%p3 = f32[16,8] parameter(3)
%p4 = f32[16,8] parameter(4)
%p5 = bf16[16,8] parameter(5)
%r0 = f32[16,8] all-reduce(%p0), channel_id=1, {G8}, use_global_device_ids=true, to_apply=%add
%r1 = f32[16,8] all-reduce(%p1), channel_id=2, {G8}, use_global_device_ids=true, to_apply=%add.other
%r2 = f32[16,8] all-reduce(%p2), channel_id=3, {G8}, use_global_device_ids=true, to_apply=%mul
%r3 = f32[16,8] all-reduce(%p3), channel_id=4, replica_groups={{{{0,1,2,3}},{{4,5,6,7}}}}, use_global_device_ids=true, to_apply=%add
%r4 = f32[16,8] all-reduce(%p4), {G8}, to_apply=%add
%c0 = f32[2,8] parameter(6)
%c1 = f32[16,2] parameter(7)
{ag('g0', 'c0', 2, ch=5)}
%g1 = f32[16,16] all-gather(%c1), channel_id=6, {G8}, dimensions={{1}}, use_global_device_ids=true
ROOT %t = (f32[16,8], f32[16,8], f32[16,8], f32[16,8], f32[16,8], f32[16,8], f32[16,16], bf16[16,8]) tuple(%r0, %r1, %r2, %r3, %r4, %g0, %g1, %p5)
""", comps=ADD + ADD2 + MUL)
    mod, rep, _ = run(text)
    # only r0 and r1 share everything (identical add reducers under different names)
    assert [g.members for g in rep.groups] == [["r0", "r1"]]
    (c,) = combined(mod)
    assert c.attrs["to_apply"].name == "add"


def test_variadic_members_are_flattened_and_users_reindexed():
    text = module(f"""
%p0 = f32[2,8] parameter(0), sharding={{manual}}
%p1 = f32[4,8] parameter(1), sharding={{manual}}
%p2 = f32[1,8] parameter(2), sharding={{manual}}
{ag('single', 'p2', 1, ch=1, extra=', sharding={manual}')}
%v = (f32[16,8], f32[32,8]) all-gather(%p0, %p1), channel_id=2, {G8}, dimensions={{0}}, use_global_device_ids=true, sharding={{{{manual}}, {{manual}}}}
%v1 = f32[32,8] get-tuple-element(%v), index=1, sharding={{manual}}
ROOT %t = (f32[8,8], f32[32,8], (f32[16,8], f32[32,8])) tuple(%single, %v1, %v)
""")
    mod, rep, out = run(text)
    (c,) = combined(mod)
    assert [o.name for o in c.operands] == ["p2", "p0", "p1"]
    assert str(c.sharding) == "{{manual}, {manual}, {manual}}"
    v1 = mod.entry.get("v1")
    assert v1.operands[0] is c and v1.attrs["index"] == 2
    v = mod.entry.get("v")        # the whole-tuple use is rebuilt as a tuple of GTEs
    assert v.opcode == "tuple" and [o.attrs["index"] for o in v.operands] == [1, 2]
    assert str(v.sharding) == "{{manual}, {manual}}"
    assert rep.merged == 2


def test_control_dependencies_are_left_alone():
    text = module(f"""
%p0 = f32[2,8] parameter(0)
%p1 = f32[2,8] parameter(1)
{ag('ag0', 'p0', 2, ch=1)}
%ag1 = f32[16,8] all-gather(%p1), channel_id=2, {G8}, dimensions={{0}}, use_global_device_ids=true, control-predecessors={{%ag0}}
ROOT %t = (f32[16,8], f32[16,8]) tuple(%ag0, %ag1)
""")
    mod, rep, _ = run(text)
    assert rep.groups == []


def test_kinds_filter_and_parse_kinds():
    text = fsdp_module(layers=3)
    _, rep, _ = run(text, kinds=["reduce-scatter"])
    assert {g.kind for g in rep.groups} == {"reduce-scatter"}
    assert parse_kinds("all-gather, all-reduce") == ["all-gather", "all-reduce"]
    with pytest.raises(UsageError, match="all-to-all"):
        parse_kinds("all-to-all")


def test_combined_op_placed_after_operands_and_before_first_user():
    text = module(f"""
%p0 = f32[2,8] parameter(0)
{ag('ag0', 'p0', 2, ch=1)}
%use0 = f32[16,8] negate(%ag0)
%late = f32[2,8] parameter(1)
%late2 = f32[2,8] exponential(%late)
{ag('ag1', 'late2', 2, ch=2)}
ROOT %t = (f32[16,8], f32[16,8]) tuple(%use0, %ag1)
""")
    mod, rep, _ = run(text)
    names = [i.name for i in mod.entry.instructions]
    c = combined(mod)[0].name
    assert names.index("late2") < names.index(c) < names.index("ag0") < names.index("use0")


# ---- FSDP-like modules --------------------------------------------------------------------------

def _ancestors(mod):
    """name -> set of collective names it depends on (original graph)."""
    anc = {}
    for i in mod.entry.post_order():
        s = set()
        for o in i.operands:
            s |= anc[o.name]
            if o.opcode in ("all-gather", "reduce-scatter", "all-reduce"):
                s.add(o.name)
        anc[i.name] = s
    return anc


@pytest.mark.parametrize("seed", range(6))
def test_random_fsdp_modules_stay_valid(seed):
    rnd = random.Random(seed)
    layers = rnd.randint(2, 12)
    text = fsdp_module(layers=layers, dtypes=rnd.choice([("f32",), ("f32", "bf16"), ("bf16", "f32", "f16")]),
                       chain_every=rnd.choice([0, 1, 2, 3]), all_reduce=rnd.random() < 0.5,
                       pad_ops=rnd.randint(0, 2))
    anc = _ancestors(parse_module(text))
    bucket = rnd.choice([2048, 8192, 25 * 2**20])
    mod, rep, _ = run(text, bucket_bytes=bucket, mesh=DeviceMesh.parse("2x4"))
    for g in rep.groups:
        assert g.bytes <= bucket
        for a in g.members:            # no member depends on another member
            assert not (anc[a] & set(g.members)), (a, g.members)
    assert rep.collectives_after == rep.collectives_before - rep.merged + len(rep.groups)
    assert rep.latency_saved is not None and rep.latency_saved >= 0
    assert rep.collectives_after == sum(1 for i in mod.all_instructions()
                                        if i.opcode in ("all-gather", "reduce-scatter", "all-reduce"))


def test_fsdp_all_gathers_merge_when_unchained():
    text = fsdp_module(layers=6)
    mod, rep, _ = run(text)
    kinds = sorted((g.kind, len(g.members)) for g in rep.groups)
    assert kinds == [("all-gather", 6), ("reduce-scatter", 6)]


def test_collective_bytes():
    mod = parse_module(fsdp_module(layers=1))
    agi = mod.entry.get("ag0")
    rsi = mod.entry.get("rs0")
    assert collective_bytes(agi) == 16 * 24 * 4      # gathered result
    assert collective_bytes(rsi) == 16 * 24 * 4      # unscattered operand


# ---- invalid collectives ------------------------------------------------------------------------

BAD = {
    "zero operands": ("%ag = () all-gather(), replica_groups={}, dimensions={0}", "no operands"),
    "dimension out of range": (f"%ag = f32[16] all-gather(%p), {G8}, dimensions={{1}}", "out of range"),
    "gathered size": (f"%ag = f32[12] all-gather(%p), {G8}, dimensions={{0}}", "expected 16"),
    "element type": (f"%ag = bf16[16] all-gather(%p), {G8}, dimensions={{0}}", "element type"),
    "typed reduction": (f"%ar = (f32[2], bf16[2]) all-reduce(%p, %q), {G8}, to_apply=%add", "typed f32"),
    "result count": (f"%ar = (f32[2], f32[2]) all-reduce(%p), {G8}, to_apply=%add", "1 operands"),
    "scatter size": (f"%rs = f32[2] reduce-scatter(%p), {G8}, dimensions={{0}}, to_apply=%add", "reduce-scatter result"),
    "duplicate id": ("%ar = f32[2] all-reduce(%p), channel_id=1, replica_groups={{0,0,1,2,3,4,5,6}}, "
                     "use_global_device_ids=true, to_apply=%add", "id 0 appears more than once"),
    "unequal groups": ("%ar = f32[2] all-reduce(%p), replica_groups={{0,1},{2}}, to_apply=%add",
                       r"different sizes \[1, 2\]"),
    "empty group": ("%ar = f32[2] all-reduce(%p), replica_groups={{0,1},{}}, to_apply=%add", "group 1 is empty"),
    "id out of range": ("%ar = f32[2] all-reduce(%p), channel_id=1, replica_groups={{0,8}}, "
                        "use_global_device_ids=true, to_apply=%add", r"id 8 outside \[0, 8\)"),
    "huge iota out of range": ("%ar = f32[2] all-reduce(%p), replica_groups=[1,1000000]<=[1000000], to_apply=%add",
                               r"ids up to 999999, outside \[0, 8\)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_collectives_are_refused(case, tmp_path):
    line, msg = BAD[case]
    text = module(f"%p = f32[2] parameter(0)\n%q = bf16[2] parameter(1)\n{line}\n"
                  "ROOT %t = (f32[2], bf16[2]) tuple(%p, %q)")
    with pytest.raises(InputError, match=msg):
        combine_module(parse_module(text))
    src = tmp_path / "bad.hlo"
    src.write_text(text)
    out = tmp_path / "out.hlo"
    res = CliRunner().invoke(main, ["combine", str(src), "-o", str(out)])
    assert res.exit_code == 2
    assert "refusing to combine" in res.output and "line 12: %" in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_replica_group_problems_checks_iota_from_its_numbers():
    """The iota form is judged from [G,S] alone: a 1,000,000-id iota is refused without expanding it."""
    import tracemalloc

    from hloshard.hlo.attributes import ReplicaGroups

    text = module("%p = f32[2] parameter(0)\n"
                  "ROOT %ar = f32[2] all-reduce(%p), replica_groups=[1000,1000]<=[1000,1000]T(1,0), to_apply=%add")
    mod = parse_module(text)
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="ids up to 999999"):
            combine_module(mod)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20, peak         # the expanded groups would take > 30 MB
    rg = ReplicaGroups.iota(2, 4, [2, 4], [1, 0])
    assert combine_replica_group_problems(rg, 8) == [] and rg.groups == [[0, 4, 1, 5], [2, 6, 3, 7]]
    assert combine_replica_group_problems(rg, 7) == ["replica groups [2,4]<=[2,4]T(1,0) name ids up to 7, "
                                                     "outside [0, 7)"]
    assert combine_replica_group_problems([], 8) == []
    assert combine_replica_group_problems(ReplicaGroups.iota(0, 4, [0]), 8) == [
        "replica groups [0,4]<=[0] are empty (no groups)"]
    assert combine_replica_group_problems(ReplicaGroups.iota(2, 0, [0]), 8) == [
        "replica groups [2,0]<=[0] are empty (group size 0)"]
    assert combine_replica_group_problems([[3, 1], [1, 9, 2]], 4) == [
        "replica groups have different sizes [2, 3]; all groups must be equally large",
        "id 1 appears more than once in the replica groups",
        "replica group id 9 outside [0, 4)"]


@pytest.mark.parametrize("attrs, header, bound", [
    ("", "num_partitions=8", 8),                                        # replica ids, one replica: mesh devices
    ("", "num_partitions=8, replica_count=4", 4),                       # replica ids
    ("channel_id=1, ", "num_partitions=8, replica_count=2", 2),         # cross-replica-and-partition
    ("channel_id=1, use_global_device_ids=true, ", "num_partitions=8, replica_count=2", 16),  # flattened
])
def test_replica_id_bound_follows_the_collective_mode(attrs, header, bound):
    from hloshard.combine import replica_id_bound

    text = module("%p = f32[2] parameter(0)\n"
                  f"ROOT %ar = f32[2] all-reduce(%p), {attrs}replica_groups={{{{0,1}}}}, to_apply=%add",
                  header=f"HloModule m, {header}")
    assert replica_id_bound(parse_module(text).entry.root) == bound


def test_iota_beyond_the_device_cap_is_a_syntax_error_not_a_slow_combine(tmp_path):
    src = tmp_path / "big.hlo"
    src.write_text(module("%p = f32[2] parameter(0)\n%q = f32[2] parameter(1)\n"
                          "%a = f32[2] all-reduce(%p), replica_groups=[1,10000000]<=[10000000], to_apply=%add\n"
                          "%b = f32[2] all-reduce(%q), replica_groups=[1,10000000]<=[10000000], to_apply=%add\n"
                          "ROOT %t = (f32[2], f32[2]) tuple(%a, %b)"))
    out = tmp_path / "out.hlo"
    res = CliRunner().invoke(main, ["combine", str(src), "-o", str(out)])
    assert res.exit_code == 2 and "too many devices" in res.output and "Traceback" not in res.output
    assert not out.exists()


# ---- CLI ----------------------------------------------------------------------------------------

def test_cli_json_report_and_output_file(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(fsdp_module(layers=4))
    out = tmp_path / "c.hlo"
    res = CliRunner().invoke(main, ["combine", str(src), "-o", str(out), "--format", "json", "--mesh", "2x4",
                                    "--alpha", "10,10", "--beta", "0.001,0.001"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    jsonschema.validate(rep, REPORT_SCHEMA)
    assert rep["merged"] == 8 and rep["combined"] == 2 and rep["mesh"] == "2x4"
    assert rep["collectives_before"] == 8 and rep["collectives_after"] == 2
    assert rep["latency_saved"] == pytest.approx(rep["cost_before"] - rep["cost_after"])
    assert rep["latency_saved"] > 50      # 6 alphas of 10 saved, minus rounding
    text = out.read_text()
    assert text.count("all-gather(") == 1 and "all-gather-combined" in text
    parse_module(text)


def test_cli_text_report_only_and_bad_options(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(fsdp_module(layers=2))
    r = CliRunner().invoke(main, ["combine", str(src), "--report-only"])
    assert r.exit_code == 0 and "merged 4 into 2 variadic collectives" in r.output
    assert "latency saved" in r.output and "HloModule" not in r.output
    r = CliRunner().invoke(main, ["combine", str(src), "--kinds", "all-to-all"])
    assert r.exit_code == 2 and "unknown collective" in r.output
    r = CliRunner().invoke(main, ["combine", str(src), "--bucket-bytes", "lots"])
    assert r.exit_code == 2
    r = CliRunner().invoke(main, ["combine", str(src), "--mesh", "2x2"])
    assert r.exit_code == 2 and "num_partitions" in r.output


def test_no_mesh_reports_unknown_latency():
    text = TWO_AG.replace(", num_partitions=8", "")
    _, rep, _ = run(text)
    assert rep.latency_saved is None and rep.merged == 2
    assert "unknown" in rep.to_text()
    doc = rep.to_json()
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert doc["cost_before"] is None and doc["groups"][0]["cost_after"] is None


def test_report_schema_rejects_bad_documents():
    _, rep, _ = run(TWO_AG, mesh=DeviceMesh.parse("8"))
    doc = rep.to_json()
    jsonschema.validate(doc, REPORT_SCHEMA)
    for bad in ({**doc, "merged": -1}, {**doc, "extra": 1}, {**doc, "kinds": ["all-to-all"]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, REPORT_SCHEMA)


def test_collectives_in_a_while_body_combine_there_only():
    text = f"""HloModule w, num_partitions=8

{ADD}
%cond (s: (s32[], f32[2,8], f32[4,8])) -> pred[] {{
  %s = (s32[], f32[2,8], f32[4,8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}}

%body (s: (s32[], f32[2,8], f32[4,8])) -> (s32[], f32[2,8], f32[4,8]) {{
  %s = (s32[], f32[2,8], f32[4,8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %x = f32[2,8] get-tuple-element(%s), index=1
  %y = f32[4,8] get-tuple-element(%s), index=2
  %rx = f32[2,8] all-reduce(%x), channel_id=1, {G8}, use_global_device_ids=true, to_apply=%add
  %ry = f32[4,8] all-reduce(%y), channel_id=2, {G8}, use_global_device_ids=true, to_apply=%add
  ROOT %t = (s32[], f32[2,8], f32[4,8]) tuple(%i2, %rx, %ry)
}}

ENTRY %main {{
  %x0 = f32[2,8] parameter(0)
  %y0 = f32[4,8] parameter(1)
  %z = s32[] constant(0)
  %init = (s32[], f32[2,8], f32[4,8]) tuple(%z, %x0, %y0)
  %w = (s32[], f32[2,8], f32[4,8]) while(%init), condition=%cond, body=%body
  %wx = f32[2,8] get-tuple-element(%w), index=1
  %r0 = f32[2,8] all-reduce(%wx), channel_id=3, {G8}, use_global_device_ids=true, to_apply=%add
  ROOT %out = (f32[2,8], (s32[], f32[2,8], f32[4,8])) tuple(%r0, %w)
}}
"""
    mod, rep, out = run(text)
    assert [(g.computation, g.members) for g in rep.groups] == [("body", ["rx", "ry"])]
    body = mod.get_computation("body")
    (c,) = [i for i in body.instructions if i.opcode == "all-reduce"]
    assert [o.name for o in c.operands] == ["x", "y"]
    assert mod.entry.get("r0").opcode == "all-reduce"


@pytest.mark.parametrize("line,ok", [
    ("%c = f32[16] all-gather(%p), channel_id=1, replica_groups={}, dimensions={0}", True),   # 8 partitions
    ("%c = f32[8] all-gather(%p), channel_id=1, replica_groups={}, dimensions={0}", False),
    ("%c = f32[16] all-gather(%p), channel_id=1, replica_groups={}, dimensions={0}, use_global_device_ids=true",
     True),
    ("%c = f32[6] all-gather(%p), replica_groups={}, dimensions={0}", True),    # replicas unknown: a multiple
    ("%c = f32[5] all-gather(%p), replica_groups={}, dimensions={0}", False),
])
def test_empty_replica_groups_follow_the_collective_mode(line, ok):
    text = module(f"%p = f32[2] parameter(0)\n{line}\nROOT %t = (f32[2]) tuple(%p)")
    mod = parse_module(text)
    if ok:
        combine_module(mod)
    else:
        with pytest.raises(InputError, match="all-gather result dimension 0"):
            combine_module(mod)
