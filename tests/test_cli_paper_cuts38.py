"""Issue 24's newcomer items in the CLI and API (round 38, helper cli): the fresh-clone check 37's findings 7-10 and
new user 37's F7, F13 and F14.  Each test reads a message, an exit status or a figure and fails on main 45f5e17e."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT, require_jax
from tests.test_guard_your_layout import solved  # noqa: F401 (the fixture: the MLP sample solved, its layouts)

DATA = ROOT / "tests" / "data" / "cli"
MLP_PRE = ROOT / "samples" / "mlp_train_step.pre.hlo"


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# --------------------------------------------------------------------------- fresh37 #8: inputs that are not HLO text

def test_jax_export_bytes_gzip_and_utf16_are_named_with_what_to_give():
    """Fresh-clone check 37, finding 8: ``jax.export``'s ``Exported.serialize()`` (a flatbuffer with the MLIR bytecode
    inside, jax 0.10.2: ``export.jax_exported``), a gzipped HLO text file and a UTF-16 file got only ``not UTF-8 text
    (byte N ...)``; each now says what it looks like and what to run instead, in ``cost``, ``solve`` and lint's HS001."""
    cases = (("export.jax_exported", "this looks like jax.export's serialized Exported",
              "jax.export.deserialize(open("),
             ("small.hlo.gz", "this looks like a gzip-compressed file", "gunzip -c "),
             ("small_utf16.hlo", "this looks like UTF-16 (little-endian) text (its byte-order mark FF FE)",
              "iconv -f UTF-16 -t UTF-8 "))
    for name, what, then in cases:
        path = DATA / name
        for cmd in (["cost", path, "--mesh", "2x4"], ["solve", path, "--mesh", "2x4"]):
            r = run(cmd)
            assert r.exit_code == 2 and r.stderr.startswith(f"{path}:1:"), r.output
            assert what in r.stderr and then + str(path) in r.stderr.replace("'", "") and "Traceback" not in r.output, \
                r.stderr
        r = run(["lint", path])
        assert r.exit_code == 1 and " HS001 " in r.output and what in r.output, r.output
    # the bare MLIR bytecode is no longer called "as jax.export writes it": jax.export writes the flatbuffer above
    r = run(["cost", DATA / "export.mlirbc"])
    assert "MLIR bytecode" in r.stderr and "as jax.export writes it" not in r.stderr, r.stderr


def test_utf16_without_a_byte_order_mark_is_named_at_its_nul():
    """UTF-16 text without its mark decodes as UTF-8 with a NUL beside each character: the parser's NUL error says
    what the file looks like (the conversion keeps no mark: iconv's UTF-16LE, not UTF-16)."""
    from hloshard.io import binary_kind

    text = (DATA / "small_utf16.hlo").read_bytes()[2:]   # the same text, its mark taken off
    words = binary_kind(text, "m.hlo")
    assert words.startswith("UTF-16 (little-endian) text without a byte-order mark") and "UTF-16LE" in words, words
    assert binary_kind(b"HloModule m\n" * 8) is None and binary_kind(bytes(range(128, 256)) * 4) is None


# --------------------------------------------------------------------------- fresh37 #9: explain and diff warn as cost does

def test_explain_and_diff_warn_of_a_guessed_trip_count_as_cost_does(tmp_path):
    """Fresh-clone check 37, finding 9: ``explain`` and ``diff`` priced a ``while`` whose trip count is a guess (100)
    with no warning, where ``cost`` and ``solve`` warn.  The one warning text (``hlo.loops.execution_counts``), on
    stderr in every format and in the JSON (``warnings``; ``diff``: per side)."""
    from tests.test_cli_paper_cuts37 import WHILE_DYN

    path = tmp_path / "while_dyn.hlo"
    path.write_text(WHILE_DYN)
    cost = run(["cost", path, "--mesh", "2x4", "--format", "json"])
    said = json.loads(cost.stdout)["warnings"]
    assert cost.exit_code == 0 and len(said) == 1 and "trip count unknown" in said[0], cost.output
    for fmt in ("text", "json"):
        r = run(["explain", path, "--mesh", "2x4", "--instruction", "d", "--alternatives", "1", "--format", fmt])
        assert r.exit_code == 0 and r.stderr.count("warning: ") == 1 and f"warning: {said[0]}" in r.stderr, r.stderr
        if fmt == "json":
            assert json.loads(r.stdout)["warnings"] == said
        r = run(["diff", path, path, "--mesh", "2x4", "--format", fmt])
        assert r.exit_code == 0 and r.stderr.count("warning: ") == 1 and f"warning: {said[0]}" in r.stderr, r.stderr
        if fmt == "json":
            assert json.loads(r.stdout)["warnings"] == {"a": said, "b": said}
    from hloshard.commands.diff import side_warnings

    assert side_warnings({"a": ["w"], "b": []}, "A.hlo", "B.hlo") == ["A.hlo: w"]


# --------------------------------------------------------------------------- fresh37 #10f: cost --xla when XLA fails

def _xla_says(monkeypatch, **failure):
    """``cost --xla`` with XLA's side replaced by a comparison that carries ``failure`` (``xla_error`` or
    ``xla_compile_error``), the rest as compare_module builds it (no jax child)."""
    import hloshard.commands.cost as cost_cmd
    from hloshard.xla_compare import Comparison

    import hloshard.commands.timing as timing_cmd
    from hloshard.xla_cost import XlaCost

    monkeypatch.setattr(cost_cmd, "xla_ready", lambda *a, **k: None)
    monkeypatch.setattr(timing_cmd, "xla_cost", lambda texts, n: [XlaCost(error="not measured here")])
    monkeypatch.setattr(cost_cmd, "compare_module",
                        lambda module, mesh, result: Comparison(module.name, mesh.num_devices, [], **failure))


def test_cost_xla_exits_2_when_xla_cannot_partition(monkeypatch):
    """Fresh-clone check 37, #10f: ``cost --xla`` exited 0 on a RET_CHECK of XLA's partitioner ("XLA cost analysis
    failed: ... RET_CHECK", then the prediction alone) and 2 on a C++ CHECK.  One rule: no figure of XLA's is an
    error, exit 2, nothing written; a failure after the partitioner ran writes the report (XLA's collectives are
    in it), then exits 2."""
    _xla_says(monkeypatch, xla_error="JaxRuntimeError: INTERNAL: RET_CHECK failure (spmd_partitioner.cc:6456) x.")
    for fmt in ("text", "json"):
        r = run(["cost", MLP_PRE, "--mesh", "2x4", "--xla", "--format", fmt])
        assert r.exit_code == 2 and r.stdout == "", r.output
        assert (f"error: {MLP_PRE}: XLA could not partition the module, so --xla has no figure of XLA's: "
                "JaxRuntimeError: INTERNAL: RET_CHECK failure (spmd_partitioner.cc:6456) x; hloshard cost without "
                "--xla gives the prediction alone") in r.stderr, r.stderr
    _xla_says(monkeypatch, xla_compile_error="XlaRuntimeError: UNIMPLEMENTED: a pass")
    r = run(["cost", MLP_PRE, "--mesh", "2x4", "--xla", "--format", "json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["xla_compile_error"] == "XlaRuntimeError: UNIMPLEMENTED: a pass"
    assert "then a later compile pass failed, so XLA cannot run it: XlaRuntimeError: UNIMPLEMENTED" in r.stderr


# --------------------------------------------------------------------------- fresh37 #7: which program each column prices



def test_cost_xla_says_the_columns_price_different_programs_and_names_the_like_for_like_flag(monkeypatch):
    """Fresh-clone check 37, finding 7: ``cost samples/mlp_train_step.pre.hlo --mesh 2x4 --xla`` (the quick start's
    input) printed "predicted 162.0 KiB, XLA 3.1 MiB" with no word that XLA partitioned its own propagation of the
    61 open instructions (and returned the open outputs replicated) while the prediction priced hloshard's
    completion.  The note is under the headline and in the JSON; a module with nothing open (XLA's propagation,
    every instruction annotated) gets none."""
    _xla_says(monkeypatch)
    r = run(["cost", MLP_PRE, "--mesh", "2x4", "--xla"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    head = text.index("collective bytes per device: predicted")
    note = text.index("note: the two columns price different programs: XLA partitioned the 61 instructions the "
                      "module leaves open with its own propagation from the written shardings and returned the "
                      "module's outputs replicated")
    assert head < note and "--complete xla --xla compares like with like" in text[note:], text
    rep = json.loads(run(["cost", MLP_PRE, "--mesh", "2x4", "--xla", "--format", "json"]).stdout)
    assert rep["xla_programs_note"].startswith("the two columns price different programs")
    annotated = ROOT / "samples" / "conv_layer.propagated.hlo"   # every instruction annotated: no note
    rep = json.loads(run(["cost", annotated, "--mesh", "2x4", "--xla", "--format", "json"]).stdout)
    assert "xla_programs_note" not in rep and rep["unannotated"] == [], rep["unannotated"]


# --------------------------------------------------------------------------- new user 37 F7: one unit rule

def test_one_unit_rule_5mb_is_5m_and_5mib_is_5mi():
    """New user 37 F7: ``--memory-budget 5mb`` was 5,000,000 B but ``5m`` 5 MiB.  One rule (``units.UNIT_RULE``,
    in ``--help``): a unit with an ``i`` is a power of 1024, any other a power of 1000, in any case."""
    from hloshard.units import UNIT_RULE, parse_bytes, parse_memory_budget

    assert {parse_bytes(t) for t in ("5mb", "5MB", "5m", "5M", "5 Mb")} == {5_000_000}
    assert {parse_bytes(t) for t in ("5MiB", "5mib", "5Mi", "5 mi")} == {5 * 2**20}
    assert parse_bytes("2k") == parse_bytes("2kB") == 2000 and parse_bytes("1.5G") == 1_500_000_000
    assert parse_bytes("1Ti") == 2**40 and parse_memory_budget("5m") == parse_memory_budget("5mb")
    for cmd, option in (("solve", "--memory-budget"), ("combine", "--bucket-bytes")):
        help_text = " ".join(run([cmd, "--help"]).output.split())
        assert option in help_text and UNIT_RULE in help_text, help_text


# --------------------------------------------------------------------------- fresh37 #10a: lint's note on a file XLA refuses

def test_lint_proposes_no_xla_run_of_a_file_with_an_error(tmp_path):
    """Fresh-clone check 37, #10a: lint's "6 of 82 instructions carry a sharding" note proposed ``hloshard cost FILE
    --complete xla --xla`` for a file with an HS111 error, on which that command exits 2.  A file with an error
    finding (here HS103, a device named twice) gets no such note; the same module without the error does."""
    text = MLP_PRE.read_text()
    bad = tmp_path / "dup.hlo"
    bad.write_text(text.replace("sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}",
                                "sharding={devices=[2,1,4]0,1,2,3,4,5,6,6 last_tile_dim_replicate}", 1))
    good = tmp_path / "good.hlo"
    good.write_text(text)
    r = run(["lint", bad])
    assert r.exit_code == 1 and " HS103 " in r.stdout and "--complete xla --xla" not in r.stderr, r.output
    r = run(["lint", good])
    assert r.exit_code == 0 and f"`hloshard cost {good} --complete xla --xla`" in r.stderr, r.output


# --------------------------------------------------------------------------- new user 37 F13: the keep warning

def test_the_guard_off_warning_does_not_keep_a_plan_it_replaces(solved):
    """New user 37 F13: ``auto_shard(..., keep_shardings="io")`` warned "the plan found is kept (32.5 MiB per device,
    predicted)" and at its end "your layout returned instead".  The guard off, the plan found costing more than your
    layout: the warning says what the guard-off rule would have kept, then what was returned -- once."""
    import dataclasses
    import time
    import types

    from hloshard.jax import guard
    from tests.test_guard_your_layout import _Answered, _dearer_lower

    module, mesh, first, found = solved
    dear = dataclasses.replace(first, evaluation=types.SimpleNamespace(
        total=2.0 * float(first.evaluation.total) + 1.0, peak_memory=int(first.evaluation.peak_memory)))
    out, info = guard.guard_plan(dear, module, mesh, "io", 4.0, 0, False, deadline=time.monotonic() - 1.0,
                                 known_plans=[_dearer_lower(first)], pending={"user": _Answered(found)}, pareto=False,
                                 write="keep")
    note = info["note"]
    assert info["your_layout"]["taken"] == "your layout" and info["unguarded"], info
    assert "is kept" not in note and "the guard-off rule would keep the plan found (" in note, note
    assert note.count("returned instead") == 1 and note.index("would keep") < note.index("your layout returned"), note


# --------------------------------------------------------------------------- new user 37 F14: plan.check() of a constrained step

CONSTRAINED = r'''
import os, json, types
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax.check import check_plan, program

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x, y):   # MaxText style: an activation constrained to the mesh inside the step
    def loss(p):
        h = jax.lax.with_sharding_constraint(jax.nn.relu(x @ p["up"]), NamedSharding(mesh, P("data", "model")))
        return jnp.mean((h @ p["down"] - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, {k: params[k] - 0.1 * g[k] for k in params}

rng = np.random.default_rng(0)
args = ({"up": rng.normal(size=(64, 128)).astype(np.float32) / 8,
         "down": rng.normal(size=(128, 32)).astype(np.float32) / 11},
        rng.normal(size=(16, 64)).astype(np.float32), rng.normal(size=(16, 32)).astype(np.float32))
leaves, in_tree = jax.tree_util.tree_flatten(args)
out_tree = jax.tree_util.tree_structure(jax.eval_shape(step, *args))
closed = jax.make_jaxpr(lambda *a: step(*jax.tree_util.tree_unflatten(in_tree, a)))(*leaves)
sh = lambda spec: NamedSharding(mesh, spec)
# a plan as auto_shard returns it: the step's program, its arguments and results split over 'data' or replicated
plan = types.SimpleNamespace(
    source_fn=step, program=(closed, in_tree, out_tree, {}, {}, {}), fn=program(closed, out_tree), ties=[],
    in_shardings=({"down": sh(P()), "up": sh(P())}, sh(P("data")), sh(P("data"))),
    out_shardings=(sh(P()), {"down": sh(P()), "up": sh(P())}))
rep = check_plan(plan, args, 1e-4, True)
print(json.dumps({"ok": rep.ok, "float64": rep.float64, "reference": rep.reference, "text": str(rep)}))
'''


@pytest.mark.oracle
def test_check_runs_a_step_that_constrains_its_own_values():
    """New user 37 F14: ``plan.check()`` of a step that writes its own ``with_sharding_constraint`` (MaxText style)
    failed with jax's "Received incompatible devices for jitted computation" (the unsharded reference ran on one
    device).  The reference now runs on the plan's mesh, arguments replicated, and the report says so."""
    require_jax()
    import os
    import subprocess

    from hloshard.xla_check import child_argv

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(child_argv(["-c", CONSTRAINED], env), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["float64"], out["text"]
    assert out["reference"].startswith("your function constrains values to a mesh of 8 devices"), out
    assert out["text"].endswith("reference: " + out["reference"]), out["text"]


# --------------------------------------------------------------------------- fresh37 #10d (round 36 finding 5)

def test_solve_reports_the_peak_cost_gives_of_its_written_module(tmp_path):
    """Fresh-clone checks 36 #5 and 37 #10d: ``solve tiny_step.hlo --mesh data=2,model=4 --tie matching
    --deterministic`` (a jax dump of a small training step) said the written module "peaks at 349.1 KiB per device
    (as hloshard cost evaluates it)" -- 357,484 B -- and ``cost`` of it said 365,676 B.  Its local moves gave
    ``mul.53`` its pin's layout, which makes the pin forward and fuse; the breadth-first schedule cached on the module
    (``build.program_orders``, keyed without shardings) was reused, so the re-pricing placed the pin as before."""
    out, report = tmp_path / "ts.hlo", tmp_path / "ts.json"
    r = run(["solve", DATA / "tiny_step.hlo", "--mesh", "data=2,model=4", "--tie", "matching", "--deterministic",
             "-o", out, "--report", report, "--quiet"])
    assert r.exit_code == 0, r.output
    solved = json.loads(report.read_text())
    priced = json.loads(run(["cost", out, "--format", "json"]).stdout)
    assert solved["peak_memory_per_device"] == priced["peak_memory_per_device"] == 365_676, \
        (solved["peak_memory_per_device"], priced["peak_memory_per_device"])
    assert abs(solved["objective"] - priced["total_cost"]) < 1e-6 * abs(priced["total_cost"])
