"""Issue 24's newcomer items in the CLI (round 37, helper cli): new user 36's F8 and F9, and the fresh-clone check
36's nits 8a (collective kinds read as disagreeing where the bytes agree) and 8b (the budget warning twice).  Each
test reads a message or a figure the command gives and fails on the round-36 main (F5's tests are in
tests/test_manual_regions_oracle.py)."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner
from rich.console import Console

from hloshard.cli import main
from hloshard.commands.cost import render_comparison
from hloshard.xla_compare import CollectiveRecord, Comparison, InstructionComparison, match_collectives
from tests.conftest import ROOT

MLP_PRE = ROOT / "samples" / "mlp_train_step.pre.hlo"


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# --------------------------------------------------------------------------- F8: cost warns as solve does

WHILE_DYN = """HloModule wd, num_partitions=8
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
body {
  t = (s32[], f32[64,512], f32[512,512]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  x = f32[64,512] get-tuple-element(t), index=1
  w = f32[512,512] get-tuple-element(t), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  d = f32[64,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (s32[], f32[64,512], f32[512,512]) tuple(i2, d, w)
}
cond {
  t = (s32[], f32[64,512], f32[512,512]) parameter(0)
  x = f32[64,512] get-tuple-element(t), index=1
  z = f32[] constant(0)
  s = f32[] reduce(x, z), dimensions={0,1}, to_apply=add
  lim = f32[] constant(1e6)
  ROOT c = pred[] compare(s, lim), direction=LT
}
ENTRY e {
  x = f32[64,512] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
  w = f32[512,512] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[64,512], f32[512,512]) tuple(z, x, w)
  wh = (s32[], f32[64,512], f32[512,512]) while(t), condition=cond, body=body
  ROOT o = f32[64,512] get-tuple-element(wh), index=1
}
"""

GUESS = ("warning: while wh (line 30): trip count unknown (the condition does not compare a loop-state element with a "
         "constant); assumed 100 iterations")


def test_cost_warns_of_a_guessed_trip_count_as_solve_does(tmp_path):
    """New user 36 F8: ``cost`` priced 100 trips of a data-dependent loop (820,801.98) without a word, where
    ``solve`` of the same file warned.  One warning (hlo.loops.execution_counts), on stderr in both commands, and
    in cost's JSON."""
    src = tmp_path / "while_dyn.hlo"
    src.write_text(WHILE_DYN)
    r = run(["cost", src, "--mesh", "2x4"])
    assert r.exit_code == 0, r.output
    assert r.stderr.count(GUESS) == 1 and GUESS not in r.stdout, r.stderr
    r = run(["cost", src, "--mesh", "2x4", "--format", "json"])
    assert r.exit_code == 0 and GUESS in r.stderr, r.output
    assert json.loads(r.stdout)["warnings"] == [GUESS.removeprefix("warning: ")]
    r = run(["solve", src, "--mesh", "2x4", "--time-limit", "5", "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 0 and " ".join(GUESS.split()) in " ".join(r.stderr.split()), r.stderr


# --------------------------------------------------------------------------- nit 8b: one warning, printed once

def test_a_budget_of_another_device_is_warned_once(tmp_path):
    """Fresh-clone check 36, nit 8b: ``--device h100-sxm --memory-budget tpu-v5e`` printed its warning at once and
    again under the summary."""
    for fmt in ("text", "json"):
        r = run(["solve", MLP_PRE, "--mesh", "2x4", "--device", "h100-sxm", "--memory-budget", "tpu-v5e",
                 "--time-limit", "10", "--format", fmt, "-o", tmp_path / "o.hlo"])
        assert r.exit_code == 0, r.output
        assert " ".join(r.stderr.split()).count("--memory-budget tpu-v5e is that device's HBM") == 1, (fmt, r.stderr)
        if fmt == "json":   # the report keeps it
            assert any("is that device's HBM" in w for w in json.loads(r.stdout)["warnings"])


# --------------------------------------------------------------------------- nit 8a: collectives paired across the program

def _rec(kind, n, nbytes, source="xla"):
    return CollectiveRecord(kind=kind, group_size=n, nbytes=nbytes, ring_bytes=nbytes * (n - 1) / n, source=source)


def _rows():
    ag = _rec("all-gather", 4, 3072.0)
    return [InstructionComparison("while.15", "custom-call", 1.0, predicted=[ag]),     # XLA makes it on while.9
            InstructionComparison("while.9", "while", 1.0, xla=[ag]),
            InstructionComparison("dot.1", "dot", 64.0, predicted=[_rec("all-gather", 4, 3072.0)],
                                  xla=[_rec("all-gather", 4, 3072.0)]),
            InstructionComparison("add.3", "add", 1.0, predicted=[_rec("all-reduce", 2, 512.0)],
                                  xla=[_rec("all-to-all", 2, 512.0)])]                 # a real disagreement


def test_collectives_pair_across_the_program():
    """Fresh-clone check 36 (``dus/cx_kv_feat``): the pre-loop all-gather placed on ``while.15`` by the prediction and
    on ``while.9`` by XLA counted as two disagreements beside 195.0 = 195.0 KiB."""
    rows = _rows()
    untagged = _rec("all-gather", 8, 4096.0)
    rows[3].predicted.append(untagged)   # XLA makes it too, without an instruction's tag
    m = match_collectives(rows, [untagged, _rec("collective-permute", 2, 64.0)])
    assert (m.predicted, m.xla, m.in_place, m.moved) == (4, 5, 1, 2)
    assert m.moved_rows == {"while.15", "while.9"}          # add.3's all-reduce / all-to-all stay a disagreement
    assert m.unmatched_partners == ("add.3", None)
    assert m.share == 2 * 3 / 9


def test_the_report_says_what_the_agreement_counts():
    c = Comparison("m", 8, _rows())
    buf = io.StringIO()
    render_comparison(Console(file=buf, width=400, force_terminal=False), c, 10)
    text = buf.getvalue()
    head = text.splitlines()[0]
    assert ("2 of 3 predicted collectives and 2 of XLA's 3 pair up across the program by kind, group size and bytes, "
            "1 pair not on one instruction") in head, head
    assert "instruction by instruction, collective kinds agree on 25% of 4 instructions" in head, head
    agree = {ln.split("│")[1].strip(): ln.split("│")[-2].strip() for ln in text.splitlines() if ln.startswith("│")}
    assert agree == {"while.15": "moved", "while.9": "moved", "dot.1": "yes", "add.3": "no"}, agree
    assert c.to_json()["collective_match"]["moved_instructions"] == ["while.15", "while.9"]
