"""``hloshard explain-reshape`` end to end through the CLI: the seed (openxla/xla issue #12392) in text
and JSON (validated against the documented schema), the module form, listing output shardings, the
accounting, alternatives, ``--xla`` and one-line errors (exit 2) on bad input."""

from __future__ import annotations

import json

import jsonschema
import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.explain import JSON_SCHEMA
from tests.conftest import ROOT, require_jax

SEED_FLAGS = ["--operand", "f16[32,16,1000,256]", "--operand-sharding", "{devices=[2,4,1,1]0,1,2,3,4,5,6,7}",
              "--shape", "f16[512,1000,256]",
              "--sharding", "{devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
              "--mesh", "2x4", "--alpha", "1,1", "--beta", "0.01,1"]

SEED_MODULE = """HloModule module, num_partitions=8

ENTRY %entry {
  %parameter1 = f16[32,16,1000,256]{3,1,2,0} parameter(0), sharding={devices=[2,4,1,1]0,1,2,3,4,5,6,7}
  %add = f16[32,16,1000,256]{3,1,2,0} add(%parameter1, %parameter1), sharding={devices=[2,4,1,1]0,1,2,3,4,5,6,7}
  ROOT %reshape = f16[512,1000,256] reshape(%add), sharding={devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}
}
"""


def run(args, **kw):
    return CliRunner().invoke(main, ["explain-reshape", *args], catch_exceptions=False, **kw)


def check_seed_json(data):
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["required_operand_sharding"] in (
        "{devices=[2,1,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
        "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}")
    assert data["required_operand"]["tile_assignment_dims"] == [2, 1, 1, 1, 4]
    (step,) = data["plan"]
    assert step["kind"] == "all-gather"
    assert step["dims"] == [1] and step["mesh_axes"] == [1]
    assert step["replica_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert step["bytes_per_device"] == 98_304_000
    assert step["cost"] == pytest.approx(98_304_001.1)
    assert data["total_cost"] == pytest.approx(98_304_001.1)
    assert data["memory_per_device"] == {"before": 32_768_000, "peak": 163_840_000, "after": 131_072_000}
    assert data["operand"]["bytes_per_device"] == 32_768_000 and data["operand"]["per_device_shape"] == [16, 4, 1000, 256]
    assert data["result"]["bytes_per_device"] == 131_072_000
    acc = data["accounting"]
    assert acc["charged_on"] == "operand_edge"
    assert acc["operand_edge"]["communication_cost"] == pytest.approx(98_304_001.1)
    assert acc["operand_edge"]["memory_cost"] == 98_304_000
    der = acc["derived_from_operand"]
    assert der["result_tile_assignment_dims"] == [2, 1, 1, 4]
    assert der["edge_cost"] == 0 and der["communication_cost"] == 0
    assert der["actual_cost"] == pytest.approx(98_304_001.1) and der["charged_nowhere"] is True
    assert der["matches_result"] is True
    alts = data["alternatives"]
    assert alts and all(a["result_sharding"] != data["result"]["sharding"] for a in alts)
    costs = [a["total_cost"] for a in alts]
    assert costs == sorted(costs)
    # an all-to-all that keeps the data sharded is cheaper than the all-gather
    assert alts[0]["collectives"] == ["all-to-all"] and alts[0]["total_cost"] < data["total_cost"]
    assert alts[0]["memory_per_device"]["after"] == 32_768_000


def test_seed_json():
    r = run([*SEED_FLAGS, "--format", "json"])
    assert r.exit_code == 0, r.output
    check_seed_json(json.loads(r.output))


def test_seed_text():
    r = run(SEED_FLAGS)
    assert r.exit_code == 0, r.output
    out = r.output
    assert "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}" in out
    assert "all-gather" in out and "[[0, 1, 2, 3], [4, 5, 6, 7]]" in out
    assert "98,304,000" in out and "98,304,001.1" in out
    assert "before 32,768,000  peak 163,840,000  after 131,072,000" in out
    assert "operand edge" in out and "charged nowhere" in out
    # tile maps: before, every device holds its own quarter of dim 1; after, groups of 4 hold dim 1 whole
    assert "d0-d3" in out and "dim 1 [12:16)" in out


def test_seed_module_form(tmp_path):
    f = tmp_path / "seed.hlo"
    f.write_text(SEED_MODULE)
    out = tmp_path / "report.json"
    r = run([str(f), "--instruction", "reshape", "--mesh", "2x4", "--alpha", "1,1", "--beta", "0.01,1",
             "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    check_seed_json(data)
    assert data["instruction"] == "reshape" and data["operand"]["name"] == "add"


def test_module_form_default_mesh_is_inferred_from_the_shardings(tmp_path):
    # issue 14's precedence: without --mesh or a Shardy mesh, the mesh the shardings imply (2x4 here)
    # comes before the 1-D mesh of num_partitions
    f = tmp_path / "seed.hlo"
    f.write_text(SEED_MODULE)
    r = run([str(f), "--instruction", "%reshape", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["mesh"]["shape"] == [2, 4]
    assert [s["kind"] for s in data["plan"]] == ["all-gather"]
    assert data["plan"][0]["replica_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_without_sharding_lists_best_outputs():
    flags = SEED_FLAGS[:SEED_FLAGS.index("--sharding")] + SEED_FLAGS[SEED_FLAGS.index("--mesh"):]
    r = run([*flags, "--format", "json", "--alternatives", "3"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["result"]["given"] is False
    assert len(data["alternatives"]) == 3
    assert all(a["total_cost"] >= data["total_cost"] for a in data["alternatives"])
    assert data["total_cost"] < 98_304_001.1  # cheaper than the seed's requested output


def test_reshard_after_reshape_when_gspmd_does():
    r = run(["--operand", "f32[2048]", "--operand-sharding", "{devices=[8]<=[8]}", "--shape", "f32[64,32]",
             "--sharding", "{devices=[1,8]<=[8]}", "--mesh", "8", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["plan_tensor"] == "result" and data["natural_result_sharding"] == "{devices=[8,1]<=[8]}"
    assert [s["kind"] for s in data["plan"]] == ["all-to-all"]
    assert data["accounting"]["operand_edge"]["communication_cost"] > data["total_cost"]


def test_deterministic_output():
    a = run([*SEED_FLAGS, "--format", "json"]).output
    b = run([*SEED_FLAGS, "--format", "json"]).output
    assert a == b


@pytest.mark.parametrize("args,needle", [
    (["--operand", "f16[32,16,1000,256]", "--operand-sharding", "{devices=[2,4,1]0,1,2,3,4,5,6,7}",
      "--shape", "f16[512,1000,256]", "--mesh", "2x4"], "rank"),
    (["--operand", "f16[32,16,1000,256]", "--operand-sharding", "{devices=[2,2,1,1]0,1,2,3}",
      "--shape", "f16[512,1000,256]", "--mesh", "2x4"], "devices but the mesh"),
    (["--operand", "f16[32,16,1000,256]", "--operand-sharding", "{devices=[2,4,1,1]<=[8]}",
      "--shape", "f16[512,1000,255]", "--mesh", "2x4"], "element count"),
    (["--operand", "f16[32,16,1000,256]", "--operand-sharding", "{devices=[2,4,1,1]<=[8]}",
      "--shape", "f16[512,1000,256]", "--sharding", "{devices=[2,1,4]<=[8]}", "--mesh", "2x2"], "devices but the mesh"),
    (["--operand", "f16[32,16", "--operand-sharding", "{replicated}", "--shape", "f16[512]", "--mesh", "2x4"],
     "--operand"),
    (["--operand", "f16[32]", "--operand-sharding", "{devices=[2", "--shape", "f16[32]", "--mesh", "2x4"],
     "--operand-sharding"),
    (["--operand", "f16[32]", "--shape", "f16[32]", "--mesh", "2x4"], "--operand-sharding"),
    (["--operand", "f16[32]", "--operand-sharding", "{replicated}", "--shape", "f16[32]"], "--mesh"),
])
def test_bad_input_one_line_exit_2(args, needle):
    r = CliRunner().invoke(main, ["explain-reshape", *args])
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = [line for line in r.output.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("hloshard: error:"), r.output
    assert needle in lines[0]
    assert "Traceback" not in r.output


@pytest.mark.parametrize("instr,needle", [("nope", "no instruction named"), ("add", "is not a reshape (its opcode is add)")])
def test_bad_instruction(tmp_path, instr, needle):
    f = tmp_path / "seed.hlo"
    f.write_text(SEED_MODULE)
    r = CliRunner().invoke(main, ["explain-reshape", str(f), "--instruction", instr, "--mesh", "2x4"])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_module_form_rejects_direct_flags(tmp_path):
    f = tmp_path / "seed.hlo"
    f.write_text(SEED_MODULE)
    r = CliRunner().invoke(main, ["explain-reshape", str(f), "--instruction", "reshape", "--shape", "f16[8]"])
    assert r.exit_code == 2 and "cannot be combined" in r.output


@pytest.mark.oracle
def test_xla_agrees_on_the_seed():
    require_jax()
    r = run([*SEED_FLAGS, "--format", "json", "--xla"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    jsonschema.validate(data, JSON_SCHEMA)
    x = data["xla"]
    assert x["agrees"] is True and x["differences"] == []
    assert [(c["kind"], c["replica_groups"]) for c in x["collectives"]] == \
        [("all-gather", [[0, 1, 2, 3], [4, 5, 6, 7]])]
    # jax is imported only in the child: check in a fresh interpreter
    import subprocess
    import sys

    script = ("import sys; from click.testing import CliRunner; from hloshard.cli import main; "
              f"r = CliRunner().invoke(main, ['explain-reshape', *{SEED_FLAGS!r}, '--xla']); "
              "print(r.output); print('JAX_IMPORTED' if 'jax' in sys.modules else 'NO_JAX')")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300).stdout
    assert "agrees with the plan" in out
    assert out.strip().endswith("NO_JAX")


# ------------------------------------------------------------------------------------------------
# hloshard.xla_check text scanning (no jax needed)


def test_expand_replica_groups_all_forms():
    from hloshard.xla_check import expand_replica_groups as expand

    assert expand("{{0,1},{2,3}}") == [[0, 1], [2, 3]]
    assert expand("{}") == []
    assert expand("[2,4]<=[8]") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert expand("[4,2]<=[2,4]T(1,0)") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert expand("mesh['axis_0'=2,'axis_1'=4,'axis_2'=1,'axis_3'=1] {'axis_1'}") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert expand("mesh['axis_0'=2,'axis_1'=4] {'axis_0'}") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # device_ids permute the mesh positions; 'axis_1':(2)2 is the minor half of axis_1 (pre-size 2)
    assert expand("mesh['axis_0'=2,'axis_1'=4], device_ids=([2,2,2]T(0,2,1)) {'axis_1':(2)2}") == \
        [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert expand("mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) {'axis_0':(2)2}") == \
        [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError):
        expand("nonsense")


def test_parse_collectives_and_data_slices():
    from hloshard.xla_check import data_dynamic_slices, parse_collectives

    text = """ENTRY %main {
  %p = f32[16,64]{1,0} parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  %constant.3 = s32[8]{0} constant({0, 0, 16, 16, 32, 32, 48, 48})
  %partition-id = u32[] partition-id()
  %dynamic-slice.1 = s32[1]{0} dynamic-slice(%constant.3, %partition-id), dynamic_slice_sizes={1}
  %dynamic-slice.4 = f32[16,32]{1,0} dynamic-slice(%p, %x, %y), dynamic_slice_sizes={16,32}, metadata={op_name="c"}
  %all-to-all = f32[16,2,16]{2,1,0} all-to-all(%r), channel_id=1, replica_groups=[4,2]<=[8], dimensions={1}, metadata={op_name="c"}
  ROOT %collective-permute = f32[32,16]{1,0} collective-permute(%t), channel_id=2, source_target_pairs={{0,0},{2,1},{1,2}}, metadata={op_name="d"}
}"""
    cols = parse_collectives(text)
    assert [(c.kind, c.dims, c.op_name) for c in cols] == [("all-to-all", (1,), "c"), ("collective-permute", (), "d")]
    assert cols[0].replica_groups == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert cols[1].source_target_pairs == [(0, 0), (2, 1), (1, 2)]
    assert data_dynamic_slices(text) == [("f32[16,32]{1,0}", "c")]  # the s32[1] offset lookup is skipped


def test_other_meshes_and_device_ids():
    # 2x2x2 mesh: the operand's 4-way split of dim 1 spans two mesh axes
    r = run(["--operand", "f32[32,16,64]", "--operand-sharding", "{devices=[2,4,1]<=[8]}", "--shape", "f32[512,64]",
             "--mesh", "2x2x2", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["operand"]["mesh_axes"] == [[0], [1, 2], []]
    assert data["total_cost"] == min([data["total_cost"]] + [a["total_cost"] for a in data["alternatives"]])
    # a reversed device order: the free carry-over is found even though it matches no mesh-axis order
    r = run(["--operand", "f32[64,64]", "--operand-sharding", "{devices=[8,1]<=[8]}", "--shape", "f32[4096]",
             "--mesh", "2x4", "--device-ids", "7,6,5,4,3,2,1,0", "--format", "json"])
    data = json.loads(r.output)
    assert data["result"]["sharding"] == "{devices=[8]<=[8]}" and data["plan"] == [] and data["total_cost"] == 0
    assert data["result"]["mesh_axes"] is None and "matches no assignment" in data["result"]["mesh_axes_note"]


def test_module_without_shardings(tmp_path):
    f = tmp_path / "plain.hlo"
    f.write_text("HloModule m\n\nENTRY %e {\n  %p = f32[64,32] parameter(0)\n"
                 "  ROOT %r = f32[2048] reshape(%p)\n}\n")
    r = run([str(f), "--instruction", "r", "--mesh", "2x4", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["operand"]["sharding"] == "{replicated}"
    assert any("treated as replicated" in n for n in data["notes"])
    # from a replicated operand every output is a local slice: the most split one is reported
    assert data["result"]["given"] is False and data["total_cost"] == 0
    assert [s["kind"] for s in data["plan"]] == ["dynamic-slice"]
    assert data["result"]["bytes_per_device"] == 2048 * 4 // 8
    # without --mesh and without num_partitions: a clear error
    r = CliRunner().invoke(main, ["explain-reshape", str(f), "--instruction", "r"])
    assert r.exit_code == 2 and "--mesh" in r.output


@pytest.mark.oracle
def test_hs401_and_explain_reshape_report_xla_bytes_for_the_same_all_to_all(tmp_path):
    """The reshape of the seed with its output split [8,1,1] (HS401's suggestion) or [2,1,4]: XLA's
    partitioner inserts one all-to-all over groups of 4 on the operand tile (f16 32*16*1000*256 / 8 =
    32,768,000 bytes per device), ring bytes 3/4 * 32,768,000 = 24,576,000 (23.4 MiB).  Lint HS401 and
    explain-reshape both report that figure (cost.collectives.total_ring_bytes); explain-reshape's cost
    column is the alpha-beta cost, 49,152,001 (XLA auto-sharding's n/2 penalty), not bytes."""
    require_jax()
    from hloshard.lint.engine import lint_text
    from hloshard.lint.context import LintOptions
    from hloshard.xla_check import parse_collectives
    from hloshard.xla_compare import xla_ring_bytes
    from tests.xla_oracle import spmd_partition

    seed = (ROOT / "samples" / "reshape_seed.hlo").read_text()
    for out in ("{devices=[8,1,1]<=[8]}", "{devices=[2,1,4]<=[8]}"):
        text = seed.replace("sharding={devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
                            f"sharding={out}").replace("HloModule module", "HloModule module, num_partitions=8")
        assert out in text
        xla = [c for c in parse_collectives(spmd_partition(text, 8))]
        assert [c.kind for c in xla] == ["all-to-all"], xla
        xla_bytes = sum(xla_ring_bytes(c, 8) for c in xla)
        assert xla_bytes == 24_576_000.0
        src = tmp_path / "m.hlo"
        src.write_text(text)
        d = json.loads(CliRunner().invoke(main, ["explain-reshape", str(src), "--instruction", "reshape", "--mesh",
                                                 "2x4", "--format", "json"]).stdout)
        assert d["ring_bytes_per_device"] == xla_bytes
        assert any(a["ring_bytes_per_device"] == xla_bytes for a in d["alternatives"]
                   if a["result_sharding"] == "{devices=[8,1,1]<=[8]}") or out == "{devices=[8,1,1]<=[8]}"
        findings = [f for f in lint_text(text, str(src), LintOptions(select=("HS401",), mesh="2x4", reshard_threshold=1 << 20))
                    if f.code == "HS401"]
        assert len(findings) == 1 and "moves 23.4 MiB per device" in findings[0].message, findings
