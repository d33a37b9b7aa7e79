"""A module that is already a per-device program (XLA's SPMD partitioner wrote its collectives; its
shapes are one device's shard) is priced as it runs by ``cost``, ``diff`` and ``explain``: every
instruction whole on each device, each written collective by the axes its replica groups cross --
not completed as a logical module, which would split the shards again (issue 26: a 128-partition
program at 16x8 went from > 10 minutes and 3 GB to seconds)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from hloshard.autoshard import evaluate_as_written, is_per_device_program
from hloshard.cli import main
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh

# as XLA's after_spmd-partitioning dump writes it: per-device shapes, the parameters keep their global
# shardings, collectives with replica groups (the all-reduce pairs devices along `model`, the
# all-gather runs along `data` of a data=4, model=2 mesh)
PER_DEVICE = """HloModule pd, num_partitions=8

add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}

ENTRY e {
  x = bf16[512,1024] parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  w = bf16[1024,1024] parameter(1), sharding={devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}
  d = bf16[512,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = bf16[512,1024] all-reduce(d), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=add
  ROOT g = bf16[512,4096] all-gather(r), channel_id=2, replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={1}, use_global_device_ids=true
}
"""

# the same computation as a logical module: no collectives written, so cost completes it
LOGICAL = """HloModule lg, num_partitions=8

ENTRY e {
  x = bf16[512,1024] parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  w = bf16[1024,1024] parameter(1), sharding={devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}
  ROOT d = bf16[512,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

MIB = 1 << 20


def _json(tmp_path, command, *args, text=PER_DEVICE):
    path = tmp_path / "m.hlo"
    path.write_text(text)
    r = CliRunner().invoke(main, [command, str(path), *args, "--format", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_detects_per_device_programs():
    assert is_per_device_program(parse_module(PER_DEVICE))
    assert not is_per_device_program(parse_module(LOGICAL))
    # a GSPMD module that writes a collective beside an annotated instruction is logical: kept as annotated
    annotated = PER_DEVICE.replace("d = bf16[512,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                                   "d = bf16[512,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                                   "sharding={replicated}")
    assert annotated != PER_DEVICE and not is_per_device_program(parse_module(annotated))
    # an optimised (compiled) module keeps a fused instruction's sharding inside its fusion computation:
    # still a per-device program (new user 15: `cost` of plan.jit()'s compiled step priced as logical)
    fused = PER_DEVICE.replace("ENTRY e {", """fc {
  p = bf16[1024,1024] parameter(0)
  ROOT c = bf16[1024,1024] copy(p), sharding={devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}
}

ENTRY e {""").replace("d = bf16[512,1024] dot(x, w),", "wc = bf16[1024,1024] fusion(w), kind=kLoop, calls=fc\n"
                      "  d = bf16[512,1024] dot(x, wc),")
    assert "calls=fc" in fused and is_per_device_program(parse_module(fused))
    # the same copy outside a fusion is an annotation of a logical module
    unfused = fused.replace("wc = bf16[1024,1024] fusion(w), kind=kLoop, calls=fc",
                            "wc = bf16[1024,1024] copy(w), sharding={devices=[1,2,4]<=[4,2]T(1,0) "
                            "last_tile_dim_replicate}")
    assert not is_per_device_program(parse_module(unfused))


def test_cost_prices_the_written_collectives_only(tmp_path):
    rep = _json(tmp_path, "cost", "--mesh", "data=4,model=2")
    assert rep["completion"]["method"] == "per-device"
    # ring formulas of what is written: all-reduce of 1 MiB over 2 = 2 (1/2) 1 MiB; all-gather to 4 MiB
    # over 4 = (3/4) 4 MiB; nothing else moves (the parameters' global shardings are not re-applied)
    assert rep["predicted_bytes_per_device"] == 1 * MIB + 3 * MIB
    assert rep["breakdown"]["resharding"] == 0
    by_name = {row["name"]: row for row in rep["instructions"]}
    assert by_name["d"]["predicted_bytes_per_device"] == 0
    assert sorted(rep["unannotated"]) == ["d", "g", "r"]


def test_logical_module_is_still_completed():
    result = evaluate_as_written(parse_module(LOGICAL), DeviceMesh.parse("data=4,model=2"))
    assert result.method in ("exact", "heuristic", "fixed")


def test_diff_prices_both_sides_as_cost_does(tmp_path):
    """diff of the per-device program against itself: each side's total is cost's, nothing resharded."""
    cost = _json(tmp_path, "cost", "--mesh", "data=4,model=2")
    a = tmp_path / "a.hlo"
    a.write_text(PER_DEVICE)
    r = CliRunner().invoke(main, ["diff", str(a), str(a), "--mesh", "data=4,model=2", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["totals"]["total"]["a"] == rep["totals"]["total"]["b"] == cost["total_cost"]
    assert rep["totals"]["resharding"]["a"] == 0
    assert "per-device program" in rep["completion"]["a"]


def test_explain_lists_no_alternatives_for_a_shard(tmp_path):
    rep = _json(tmp_path, "explain", "--instruction", "d", "--mesh", "data=4,model=2")
    assert rep["completion"]["method"] == "per-device"
    assert rep["alternatives"] == [] and rep["sharding_used"] == "{replicated}"
    assert any("no alternative sharding of d" in n for n in rep["notes"]), rep["notes"]
    # the text says the value is one device's shard, not "replicated" (new user 14)
    path = tmp_path / "m.hlo"
    r = CliRunner().invoke(main, ["explain", str(path), "--instruction", "d", "--mesh", "data=4,model=2"])
    assert r.exit_code == 0, r.output
    assert "already one device's shard" in r.output and "whole on each device" in r.output
    assert "replicated" not in r.output and "chosen as" not in r.output, r.output


def test_solve_warns_that_the_input_is_already_partitioned(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(PER_DEVICE)
    out = tmp_path / "out.hlo"
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "data=4,model=2", "-o", str(out), "--format", "json",
                                  "--deterministic", "--time-limit", "5"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert any("already a per-device program" in w for w in rep["warnings"]), rep["warnings"]
    logical = tmp_path / "l.hlo"
    logical.write_text(LOGICAL)
    r = CliRunner().invoke(main, ["solve", str(logical), "--mesh", "data=4,model=2", "-o", str(out), "--format",
                                  "json", "--deterministic", "--time-limit", "5"])
    assert r.exit_code == 0, r.output
    assert not any("per-device" in w for w in json.loads(r.stdout)["warnings"])


def test_xla_refused_alike_by_every_command(tmp_path):
    """``--xla`` on a per-device program: one clear refusal, exit 2, from cost, explain and solve (explain
    printed XLA's RET_CHECK and exited 0; new user 17, finding 7).  The check runs before jax is needed."""
    path = tmp_path / "p.hlo"
    path.write_text(PER_DEVICE)
    for args in (["cost", str(path), "--mesh", "4x2", "--xla"],
                 ["explain", str(path), "--mesh", "4x2", "--instruction", "d", "--xla"],
                 ["solve", str(path), "--mesh", "4x2", "--xla", "-o", str(tmp_path / "o.hlo")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, (args[0], r.output)
        assert "already a per-device program" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "o.hlo").exists()
