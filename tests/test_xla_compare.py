"""``hloshard.xla_compare``, ``cost --xla`` and ``solve --xla``: XLA's collectives matched per instruction.

Expected values come from XLA's own partitioned HLO (oracle tests) or are derived by hand below from
the ring formulas (bytes per device, ``n`` the replica-group size).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES, require_jax

#: f32[64,256] x f32[256,128] with the contracting dim split 8 ways and a replicated result: XLA's dot
#: handler computes partial products and all-reduces them over all 8 devices (one all-reduce).
DOT_CONTRACTING = """HloModule dot_contracting, num_partitions=8
ENTRY e {
  a = f32[64,256]{1,0} parameter(0), sharding={devices=[1,8]<=[8]}
  b = f32[256,128]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT d = f32[64,128]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
"""
# all-reduce of f32[64,128] = 32,768 bytes over n = 8: 2 * 7/8 * 32,768 = 57,344 bytes per device
DOT_ALL_REDUCE_BYTES = 57_344

#: a row-sharded operand whose user is replicated: XLA all-gathers the operand while partitioning the
#: user, so the collective carries the user's metadata (edge resharding belongs to the user).
GATHER_INTO_USER = """HloModule gather_into_user, num_partitions=8
ENTRY e {
  p = f32[64,128]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}
  ROOT n = f32[64,128]{1,0} negate(p), sharding={replicated}
}
"""
# all-gather to f32[64,128] = 32,768 bytes (result) over n = 8: 7/8 * 32,768 = 28,672 bytes per device
GATHER_BYTES = 28_672


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


_CASES = {"dot": (DOT_CONTRACTING, None), "gather": (GATHER_INTO_USER, None),
          "scan": ((SAMPLES / "scan_mlp_train_step.pre.hlo").read_text(), "2x4")}


@pytest.fixture(scope="module")
def compared():
    """The comparisons of :data:`_CASES`, XLA run once for all of them (one child process)."""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.xla_compare import compare_module, run_xla, tag_module_text

    modules = {k: parse_module(t) for k, (t, _) in _CASES.items()}
    tagged = {k: tag_module_text(m) for k, m in modules.items()}
    results = dict(zip(tagged, run_xla([t for t, _ in tagged.values()], 8)))
    out = {}
    for k, m in modules.items():
        mesh = DeviceMesh.for_module(m, _CASES[k][1])
        out[k] = compare_module(m, mesh, evaluate_module(m, mesh), xla=(results[k], tagged[k][1]))
    return out


# ---------------------------------------------------------------------------------------------
# no jax needed


def test_xla_bytes_follow_the_ring_formulas():
    from hloshard.xla_check import parse_collectives
    from hloshard.xla_compare import xla_nbytes, _record

    text = """HloModule m
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
%body.1 (p: f32[8,128]) -> f32[8,128] {
  %p = f32[8,128]{1,0} parameter(0)
  ROOT %cp = f32[8,128]{1,0} collective-permute(%p), channel_id=3, source_target_pairs={{0,1},{1,0}}, metadata={op_name="hloshard.7"}
}
ENTRY %main (x: f32[64,128]) -> f32[8,128] {
  %x = f32[64,128]{1,0} parameter(0)
  %rs = f32[8,128]{1,0} reduce-scatter(%x), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=%add, metadata={op_name="hloshard.2"}
  ROOT %ag = f32[32,128]{1,0} all-gather(%rs), channel_id=2, replica_groups=[2,4]<=[8], dimensions={0}
}
"""
    cols = parse_collectives(text)
    assert [(c.kind, c.computation, c.op_name) for c in cols] == [
        ("collective-permute", "body.1", "hloshard.7"), ("reduce-scatter", "main", "hloshard.2"),
        ("all-gather", "main", None)]
    # collective-permute: bytes sent = its f32[8,128] = 4,096
    # reduce-scatter: operand = 8 x result f32[8,128] = 32,768 bytes, n = 8: 7/8 * 32,768 = 28,672
    # all-gather: result f32[32,128] = 16,384 bytes, groups of 4: 3/4 * 16,384 = 12,288
    assert [xla_nbytes(c, 8) for c in cols] == [(4096.0, 8), (32768.0, 8), (16384.0, 4)]
    assert [_record(c, 8, 1.0).ring_bytes for c in cols] == [4096.0, 28672.0, 12288.0]
    assert _record(cols[0], 8, 4.0).total_bytes == 4 * 4096.0


def test_tagging_does_not_change_the_module():
    from hloshard.hlo import parse_module, print_module
    from hloshard.xla_compare import tag_module_text

    m = parse_module(open(SAMPLES / "mlp_train_step.propagated.hlo").read())
    before = print_module(m)
    text, tags = tag_module_text(m)
    assert print_module(m) == before
    n = sum(1 for _ in m.all_instructions())
    assert len(tags) == n and text.count('op_name="hloshard.') == n
    assert sorted(i.name for i in tags.values()) == sorted(i.name for i in m.all_instructions())


def test_cost_json_predicted_bytes_per_device():
    """reshape_seed: the reshape needs its operand f16[32,16,1000,256] ([2,4,1,1]) gathered on dim 1 within
    groups of 4: the gathered tile f16[16,16,1000,256] is 131,072,000 bytes, 3/4 of it moves: 98,304,000."""
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "reshape_seed.hlo"), "--mesh", "2x4", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["predicted_bytes_per_device"] == 98_304_000
    rows = {x["name"]: x for x in rep["instructions"]}
    assert rows["reshape"]["predicted_bytes_per_device"] == 98_304_000
    (c,) = rows["reshape"]["predicted_collectives"]
    assert (c["kind"], c["group_size"], c["source"]) == ("all-gather", 4, "reshard parameter1")
    assert rows["parameter1"]["predicted_bytes_per_device"] == 0
    assert "xla_bytes_per_device" not in rep


def _fake_jax_path(tmp_path, monkeypatch):
    """A ``jax`` package that cannot be imported, first on the child's path: jax is 'not installed'."""
    import os

    import hloshard
    from hloshard import xla_check

    fake = tmp_path / "nojax"
    (fake / "jax").mkdir(parents=True)
    (fake / "jax" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'jax'\")\n")
    src = os.path.dirname(os.path.dirname(hloshard.__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), src]))
    monkeypatch.setattr(xla_check, "_JAX_OK", None)


@pytest.mark.parametrize("cmd", ["cost", "solve"])
def test_xla_without_jax_exits_2_naming_the_extra(tmp_path, monkeypatch, cmd):
    _fake_jax_path(tmp_path, monkeypatch)
    src = _write(tmp_path, "m.hlo", DOT_CONTRACTING)
    out = tmp_path / "out.hlo"
    args = [cmd, str(src), "--xla"] + (["-o", str(out), "--quiet"] if cmd == "solve" else [])
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "pip install 'hloshard[xla]'" in r.output and "Traceback" not in r.output
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# oracle: XLA's partitioner


@pytest.mark.oracle
def test_contracting_dot_gets_exactly_one_all_reduce_matched_to_it(compared):
    c = compared["dot"]
    assert c.xla_error is None and c.unmatched == []
    rows = {i.name: i for i in c.instructions}
    (ar,) = rows["d"].xla
    assert (ar.kind, ar.group_size, ar.replica_groups) == ("all-reduce", 8, (tuple(range(8)),))
    assert ar.ring_bytes == DOT_ALL_REDUCE_BYTES
    assert all(not rows[n].xla for n in ("a", "b"))
    assert c.xla_bytes == DOT_ALL_REDUCE_BYTES


@pytest.mark.oracle
def test_operand_resharding_is_matched_to_the_user_on_both_sides(compared):
    c = compared["gather"]
    rows = {i.name: i for i in c.instructions}
    (ag,) = rows["n"].xla
    assert (ag.kind, ag.group_size, ag.ring_bytes) == ("all-gather", 8, GATHER_BYTES)
    (pred,) = rows["n"].predicted
    assert (pred.kind, pred.group_size, pred.ring_bytes, pred.source) == ("all-gather", 8, GATHER_BYTES, "reshard p")
    assert rows["n"].kinds_agree is True and c.kind_agreement == 1.0
    assert rows["n"].groups_agree is True      # both: one group of all 8 devices
    assert c.predicted_bytes == c.xla_bytes == GATHER_BYTES


@pytest.mark.oracle
def test_collectives_in_a_scan_body_count_once_per_trip(compared):
    """scan_mlp_train_step scans 4 stacked blocks (``layers=4`` in scripts/sample_models.py): every XLA
    collective inside a while body runs 4 times, the ones outside once."""
    c = compared["scan"]
    assert c.xla_error is None
    recs = [r for i in c.instructions for r in i.xla] + list(c.unmatched)
    assert recs
    # XLA names the partitioned entry main.19_spmd and the while bodies region_N.M_spmd
    in_body = [r for r in recs if not r.computation.startswith("main")]
    assert len(in_body) >= 2 and all(r.executions == 4 for r in in_body)
    assert all(r.executions == 1 for r in recs if r.computation.startswith("main"))
    # inside the bodies XLA composes op_names through inlined calls (caller/callee): still matched
    assert all(any(r in i.xla for i in c.instructions) for r in in_body)
    assert c.xla_bytes == pytest.approx(sum(r.ring_bytes * r.executions for r in recs))


@pytest.mark.oracle
def test_cost_and_solve_xla_flag_through_the_cli(tmp_path):
    require_jax()
    src = _write(tmp_path, "dot.hlo", DOT_CONTRACTING)
    r = CliRunner().invoke(main, ["cost", str(src), "--xla", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["xla_bytes_per_device"] == DOT_ALL_REDUCE_BYTES and rep["xla_error"] is None
    rows = {x["name"]: x for x in rep["instructions"]}
    assert [x["kind"] for x in rows["d"]["xla_collectives"]] == ["all-reduce"]
    assert rows["d"]["xla_bytes_per_device"] == DOT_ALL_REDUCE_BYTES
    text = CliRunner().invoke(main, ["cost", str(src), "--xla"])
    assert text.exit_code == 0 and "predicted vs XLA collectives" in text.output and "all-reduce {0,1,2,3,4,5,6,7}x1" in text.output
    assert re.search(r"peak memory per device: predicted [0-9.]+ \S+, XLA CPU ", text.output), text.output
    # with a TPU profile the prediction is the TPU layout's and XLA's figure the CPU backend's: the line
    # says which is which (a new user read the two as one figure 9x off)
    tpu = CliRunner().invoke(main, ["cost", str(src), "--xla", "--device", "tpu-v5e"])
    assert tpu.exit_code == 0, tpu.output
    assert re.search(r"predicted for tpu-v5e [0-9.]+ \S+, XLA CPU ", tpu.output) and "two backends" in tpu.output

    out, report = tmp_path / "solved.hlo", tmp_path / "report.json"
    r = CliRunner().invoke(main, ["solve", str(src), "--xla", "-o", str(out), "--report", str(report),
                                  "--time-limit", "10", "--deterministic", "--quiet"])
    assert r.exit_code == 0, r.output
    xla = json.loads(report.read_text())["xla"]
    # --keep-shardings io keeps the split operands and the replicated result: XLA must all-reduce the dot
    assert xla["xla_error"] is None and xla["xla_bytes_per_device"] == DOT_ALL_REDUCE_BYTES
    assert [i["name"] for i in xla["instructions"]] == ["d"]


@pytest.mark.oracle
def test_gspmd_propagated_module_keeps_the_tags():
    """XLA's propagated module (``propagated=True``) renames instructions after their op_name on the way
    through StableHLO but keeps the tags: its dot is found again and XLA's all-reduce matches it."""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.xla_compare import compare_module, run_xla, tag_module_text, tags_in_metadata

    pre = parse_module(DOT_CONTRACTING.replace(", sharding={replicated}", ""))
    text, tags = tag_module_text(pre)
    (res,) = run_xla([text], 8, propagated=True)
    assert res.error is None and res.propagated
    prop = parse_module(res.propagated)
    back = tags_in_metadata(prop, like=tags)
    assert {t: i.opcode for t, i in back.items()} == {t: i.opcode for t, i in tags.items()}
    mesh = DeviceMesh.for_module(prop, None)
    c = compare_module(prop, mesh, evaluate_module(prop, mesh), xla=(res, back))
    dot = back[next(t for t, i in tags.items() if i.name == "d")]
    (row,) = [i for i in c.instructions if i.name == dot.name]
    assert [(r.kind, r.ring_bytes) for r in row.xla] == [("all-reduce", DOT_ALL_REDUCE_BYTES)]


@pytest.mark.oracle
def test_xla_totals_agree_with_the_test_side_byte_counter():
    """The product's XLA figures (matched per instruction) total what the independent test-side counter
    (tests/xla_bytes.py) reads from the same partitioned HLO, on samples with a gather, top-k,
    collective-permutes and all-reduces.  (Loops are checked above: the raw partitioned text of a jax
    scan carries no known_trip_count, which that counter requires.)"""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.xla_compare import compare_module, run_xla, tag_module_text
    from tests.xla_bytes import collective_bytes

    names = ["mlp_train_step.propagated", "transformer_block.propagated", "embedding_lookup.propagated",
             "moe_layer.propagated", "attention_6heads.propagated"]
    modules = [parse_module((SAMPLES / f"{n}.hlo").read_text()) for n in names]
    tagged = [tag_module_text(m) for m in modules]
    results = run_xla([t for t, _ in tagged], 8)
    for name, m, (_, tags), res in zip(names, modules, tagged, results):
        assert res.error is None, name
        mesh = DeviceMesh.for_module(m, "2x4")
        c = compare_module(m, mesh, evaluate_module(m, mesh), xla=(res, tags))
        expected = sum(x["bytes"] for x in collective_bytes(res.partitioned))
        assert expected > 0, name
        assert c.xla_bytes == pytest.approx(expected, rel=1e-9), name


@pytest.mark.oracle
def test_xla_errors_say_where_they_arose():
    """A text XLA's HLO parser rejects fails at 'parse'; one it parses but cannot partition at 'compile'
    (a PartitionId in an SPMD module, as the Llama corpus step has); the good module beside them is still
    partitioned (one bad text does not hide the others)."""
    require_jax()
    from hloshard.xla_compare import run_xla

    partition_id = """HloModule pid, num_partitions=8
ENTRY e {
  ROOT p = u32[] partition-id(), sharding={replicated}
}
"""
    bad, pid, good = run_xla(["HloModule broken\nENTRY e { this is not HLO }\n", partition_id, DOT_CONTRACTING], 8)
    assert (bad.error is not None, bad.error_stage) == (True, "parse")
    assert pid.error_stage == "compile" and "PartitionId" in pid.error
    assert good.error is None and [c.kind for c in good.collectives] == ["all-reduce"]
