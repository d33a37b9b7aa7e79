"""``hloshard diff``: per-instruction differences and totals of two plans, priced as `hloshard cost`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT

SAMPLES = ROOT / "samples"

CHAIN = """HloModule chain
ENTRY e {
  a = f32[64,64] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[64,64] parameter(1), sharding={devices=[1,4]<=[4]}
  d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}
  ROOT n = f32[64,64] negate(d), sharding=%s
}
"""


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_one_moved_instruction_costs_its_resharding(tmp_path):
    """B shards the negate by columns while its operand stays row-sharded: the only difference is the
    resharding on the edge d -> n, f32[64,64] [4,1] -> [1,4] (an all-to-all, priced by hand below)."""
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(CHAIN % "{devices=[4,1]<=[4]}")
    b.write_text(CHAIN % "{devices=[1,4]<=[4]}")
    r = run(["diff", a, b, "--mesh", "4", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["differing"] == 1
    (row,) = rep["differences"]
    assert row["instruction"] == "n" and row["sharding_b"] == "{devices=[1,4]<=[4]}"
    # By hand (../shared/reference/xla_autosharding.md, ReshardingCost of a dim move: an all-to-all
    # of the FULL tensor bytes, AllToAllCost = round(alpha + beta*(n-1)/n/n*B*(n/2)) + 0.001): mesh 4
    # with the default alpha = beta = 1, n = 4, B = 64*64*4 = 16384:
    # round(1 + 3/4/4*16384*2) + 0.001 = round(1 + 6144) + 0.001 = 6145.001
    expected = 6145.001
    assert row["change"]["resharding"] == pytest.approx(expected, rel=1e-9)
    assert row["change"]["compute"] == 0 and row["change"]["communication"] == 0
    assert row["memory_change"] == 0      # 64x64 f32 split 4 ways either way: 4 KiB per device
    assert rep["totals"]["total"]["change"] == pytest.approx(expected, rel=1e-9)


def test_totals_are_the_two_costs_and_add_up(tmp_path):
    src = SAMPLES / "transformer_block.propagated.hlo"
    text = src.read_text()
    moved = tmp_path / "moved.hlo"
    # re-annotate two instructions replicated (a hand-made second plan of the same module)
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith(("dot_general.10 ", "%dot_general.10 ", "reshape.4 ", "%reshape.4 ")):
            head, _, _ = line.partition(", sharding=")
            line = head + ", sharding={replicated}" if "sharding=" in line else line
        lines.append(line)
    moved.write_text("\n".join(lines) + "\n")
    r = run(["diff", src, moved, "--mesh", "2x4", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    ca = json.loads(run(["cost", src, "--mesh", "2x4", "--format", "json"]).stdout)
    cb = json.loads(run(["cost", moved, "--mesh", "2x4", "--format", "json"]).stdout)
    assert rep["totals"]["total"]["a"] == pytest.approx(ca["total_cost"], rel=1e-9)
    assert rep["totals"]["total"]["b"] == pytest.approx(cb["total_cost"], rel=1e-9)
    assert rep["totals"]["peak_memory_per_device"]["b"] == cb["peak_memory_per_device"]
    names = {d["instruction"] for d in rep["differences"]}
    assert {"dot_general.10", "reshape.4"} <= names
    # the rows plus the instructions sharded alike account for the whole change, kind by kind
    for k in ("compute", "communication", "resharding"):
        total = sum(d["change"][k] for d in rep["differences"]) + rep["same_sharding_change"][k]
        assert total == pytest.approx(rep["totals"][k]["change"], rel=1e-6, abs=1e-6)
    changes = [abs(d["total_change"]) for d in rep["differences"]]
    assert changes == sorted(changes, reverse=True)
    text_out = run(["diff", src, moved, "--mesh", "2x4", "--top", "3"]).stdout
    assert "largest differences first" in text_out and "peak memory / device" in text_out


def test_not_the_same_module_is_refused(tmp_path):
    r = run(["diff", SAMPLES / "mlp_train_step.propagated.hlo", SAMPLES / "conv_layer.propagated.hlo",
             "--mesh", "2x4"])
    assert r.exit_code == 2 and "not two plans of one module" in r.stderr


def test_pins_only_in_the_solved_module_carry_their_cost(tmp_path):
    """diff of a module and its `solve` output (which adds `*.pin` instructions): the differences, the
    instructions sharded alike and the instructions only in one module add up to the total change
    (new-user trial: a -8,070.50 "alike" change balanced by pins listed by name only)."""
    src = SAMPLES / "transformer_train_step.pre.hlo"
    solved = tmp_path / "s.hlo"
    r = run(["solve", src, "--mesh", "2x4", "--deterministic", "--time-limit", "5", "-o", solved])
    assert r.exit_code == 0, r.output
    r = run(["diff", src, solved, "--mesh", "2x4", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["only_in_b"] and all(".pin" in n or ".tpin" in n for n in rep["only_in_b"])
    assert any(abs(v) > 1e-6 for v in rep["only_in_b_change"].values())
    for k in ("compute", "communication", "resharding"):
        total = (sum(d["change"][k] for d in rep["differences"]) + rep["same_sharding_change"][k]
                 + rep["only_in_a_change"][k] + rep["only_in_b_change"][k])
        assert total == pytest.approx(rep["totals"][k]["change"], rel=1e-6, abs=1e-6)
    text_out = run(["diff", src, solved, "--mesh", "2x4"]).stdout
    assert f"only in B ({len(rep['only_in_b']):,} instructions, adding " in text_out


def test_a_collective_whose_replica_groups_changed_is_named(tmp_path):
    """Two per-device programs differing only in one all-reduce's replica groups (pairs of neighbours vs
    pairs across the mesh): no instruction is sharded differently, and the change is the all-reduce's,
    named in ``same_sharding_largest`` and in the text (new user 18: "0 of 804 instructions are sharded
    differently ... change by -8.550 ms" with no row naming the all-reduce)."""
    from tests.test_per_device_program import PER_DEVICE

    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(PER_DEVICE)
    b.write_text(PER_DEVICE.replace("replica_groups={{0,1},{2,3},{4,5},{6,7}}",
                                    "replica_groups={{0,4},{1,5},{2,6},{3,7}}"))
    r = run(["diff", a, b, "--mesh", "4x2", "--beta", "10,1", "--format", "json"])   # axis 0 the slow one
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["differing"] == 0
    rows = rep["same_sharding_largest"]
    assert [x["instruction"] for x in rows] == ["r"] and rows[0]["change"]["communication"] != 0
    assert rows[0]["total_change"] == pytest.approx(rep["totals"]["total"]["change"])
    text = run(["diff", a, b, "--mesh", "4x2", "--beta", "10,1"])
    assert text.exit_code == 0 and "sharded alike, largest changes first" in text.output
    assert "│ r " in text.output


def test_diff_tie_and_the_note_on_state_layouts(tmp_path):
    """New user 25b, finding 5: a blank step completed untied (A) against solve's tied plan (B) looked like the
    solver lost; diff now says A and B treat the state differently, and ``--tie matching`` prices both tied."""
    import re

    text = re.sub(r", sharding=\{[^\n]*", "", (SAMPLES / "mlp_train_step.pre.hlo").read_text())
    a, b = tmp_path / "blank.hlo", tmp_path / "tied.hlo"
    a.write_text(text)
    r = run(["solve", a, "--mesh", "2x4", "--tie", "matching", "--deterministic", "--time-limit", "10", "-o", b,
             "--quiet"])
    assert r.exit_code == 0, r.output
    r = run(["diff", a, b, "--mesh", "2x4", "--format", "json"])
    rep = json.loads(r.stdout)
    assert rep["state"]["a"]["moved"] > 0 and rep["state"]["b"]["moved"] == 0, rep["state"]
    assert "treat the training step's state differently" in rep["state_note"] and rep["ties"] == "untied"
    text_out = run(["diff", a, b, "--mesh", "2x4"]).stdout
    assert "note: A and B were priced with the same ties" in text_out
    r = run(["diff", a, b, "--mesh", "2x4", "--format", "json", "--tie", "matching"])
    rep = json.loads(r.stdout)
    assert rep["state"]["a"]["moved"] == rep["state"]["b"]["moved"] == 0 and rep["state_note"] is None
    assert rep["ties"] == "--tie matching" and rep["totals"]["total"]["change"] == pytest.approx(0, abs=1e-6)
