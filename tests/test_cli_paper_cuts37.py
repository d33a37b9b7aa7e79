"""Issue 24's newcomer items in the CLI (round 37, helper cli): new user 36's F8 and F9, and the fresh-clone check
36's nits 8a (collective kinds read as disagreeing where the bytes agree) and 8b (the budget warning twice).  Each
test reads a message or a figure the command gives and fails on the round-36 main (F5's tests are in
tests/test_manual_regions_oracle.py)."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from hloshard.cli import main
from hloshard.commands.cost import render_comparison
from hloshard.xla_compare import CollectiveRecord, Comparison, InstructionComparison, match_collectives
from tests.conftest import ROOT, require_jax

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
    ring = nbytes if kind == "collective-permute" else nbytes * (n - 1) / n   # a permute: the bytes sent
    return CollectiveRecord(kind=kind, group_size=n, nbytes=nbytes, ring_bytes=ring, source=source)


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
    # a collective-permute pairs by bytes alone: the prediction counts its group as 1, XLA's record every partition
    # (the transformer_block sample's split collective-permutes: 2 of 10 paired before, 9 of 10 now)
    cp = InstructionComparison("split.5", "slice", 1.0, predicted=[_rec("collective-permute", 1, 131072.0)],
                               xla=[_rec("collective-permute", 8, 131072.0)])
    assert match_collectives([cp]).in_place == 1


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


# --------------------------------------------------------------------------- F9: binary inputs named

DATA = ROOT / "tests" / "data" / "cli"


def test_a_binary_hlo_protobuf_or_mlir_bytecode_is_named():
    """New user 36 F9: a serialized HloModuleProto (``bad/module.hlo.pb``) got ``not UTF-8 text (byte 22: invalid
    continuation byte)`` alone.  The files: that one, XLA's ``--xla_dump_hlo_as_proto`` dump (an HloProto) and
    ``jax.export``'s serialized StableHLO (MLIR bytecode), all of jax 0.10.2."""
    for name, words in (("module.hlo.pb", "this looks like a binary HLO protobuf"),
                        ("dump.before_optimizations.hlo.pb", "this looks like a binary HLO protobuf"),
                        ("export.mlirbc", "this looks like MLIR bytecode")):
        path = DATA / name
        for cmd in (["cost", path, "--mesh", "2x4"], ["solve", path, "--mesh", "2x4"]):
            r = run(cmd)
            assert r.exit_code == 2 and r.stderr.startswith(f"{path}:"), r.output
            assert "not UTF-8 text" in r.stderr and words in r.stderr and "Traceback" not in r.output, r.stderr
        r = run(["lint", path])
        assert r.exit_code == 1 and " HS001 " in r.output and words in r.output, r.output
    assert "as_text(dialect='hlo')" in run(["cost", DATA / "module.hlo.pb"]).stderr
    junk = bytes(range(128, 256)) * 4   # binary, but neither: the plain message
    from hloshard.io import binary_kind

    assert binary_kind(junk) is None and binary_kind(b"\x0a\x03abc\x12") is not None


# --------------------------------------------------------------------------- F9: a mesh of the same axes, devices reordered

def test_a_reordered_mesh_is_said_to_be_reordered():
    """New user 36 F9: ``auto_shard`` refused an argument on ``Mesh(jax.devices()[::-1] ...)`` with "on a mesh with
    axes {'data': 2, 'model': 4}, not on `mesh` ({'data': 2, 'model': 4}, its devices in the same order)"."""
    from hloshard.textout import mesh_difference

    axes = {"data": 2, "model": 4}
    ids = list(range(8))
    words = mesh_difference(axes, ids[::-1], axes, ids)
    assert words.startswith("a mesh of the same axes {'data': 2, 'model': 4} and devices as `mesh`, in another order "
                            "(reversed: its devices [7, 6, 5, 4, 3, 2, 1, 0], `mesh`'s [0, 1, 2, 3, 4, 5, 6, 7])"), words
    assert "(from position 2 on: device 3 where `mesh` has 2" in mesh_difference(axes, [0, 1, 3, 2, 4, 5, 6, 7], axes, ids)
    assert mesh_difference({"x": 8}, ids, axes, ids) == "a mesh with axes {'x': 8}, not on `mesh` ({'data': 2, 'model': 4})"
    assert "other devices ([8, 9, 10, 11, 12, 13, 14, 15]; `mesh` has [0, 1, 2" in mesh_difference(axes, range(8, 16), axes, ids)


REORDERED = r'''
import numpy as np, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax.api import _is_sharded
from hloshard.jax.layout import spec_sharding
from hloshard.mesh import DeviceMesh
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
back = Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("data", "model"))
x = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(back, P("data")))
try:
    _is_sharded(x, mesh, "[1]")
except ValueError as e:
    print("arg", e)
try:
    spec_sharding(NamedSharding(back, P("data")), 2, DeviceMesh.parse("data=2,model=4"), ("data", "model"), "in_shardings[0]")
except ValueError as e:
    print("spec", e)
'''


@pytest.mark.oracle
def test_auto_shard_names_the_device_order():
    require_jax()
    import os
    import subprocess
    import sys

    from hloshard.xla_check import child_argv

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(child_argv(["-c", REORDERED], env), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert out["arg"].startswith("example argument [1] is sharded (P('data',)) on a mesh of the same axes "
                                 "{'data': 2, 'model': 4} and devices as `mesh`, in another order (reversed"), out["arg"]
    assert "in another order (reversed" in out["spec"] and "the plan's mesh" in out["spec"], out["spec"]
