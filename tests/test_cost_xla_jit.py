"""``cost --xla`` of a jax dump partitions what ``jax.jit`` runs (new user 27, F2), and plain ``cost`` of a
partial plan says that XLA's propagation, not hloshard's completion, decides the open instructions (F3).

``tests/data/hlo/tied_embedding_fsdp.hlo``: jax 0.10.2 ``jax.jit(step, in_shardings=..., out_shardings=...)
.lower(...).as_text(dialect="hlo")`` with ``jax_use_shardy_partitioner=False`` (plain ``sharding={...}``, which
GSPMD reads as jax.jit hands them over) of one SGD step of a tied-embedding masked-LM head: ``emb f32[1024,64]``
and ``w f32[64,64]`` FSDP over ``('data','model')`` of a 2x4 mesh, tokens / positions / labels over the batch;
``x = take(emb, tokens)``, ``h = tanh(x @ w)``, ``take_along_axis`` of 4 positions, ``logits = h @ emb.T``,
``log_softmax``, the label's ``take_along_axis``, a ``where`` mask, ``mean``.  jax writes ``take``, ``where``,
``log_softmax``'s pieces as ``call``s (11): the F2 mechanism.  jax.jit's own compile of it moves 840,567 B of
ring bytes per device (840,119 after the partitioner; all-reduce 545,447 with the full ``f32[1024,64]``
gradient of ``emb``)."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT

TIED = ROOT / "tests" / "data" / "hlo" / "tied_embedding_fsdp.hlo"


def _key(kind: str, shape: str) -> tuple[str, str]:
    return kind.replace("-start", ""), re.sub(r"\{[^{}]*\}", "", shape).strip()


@pytest.mark.oracle
def test_complete_xla_then_xla_partitions_what_jax_jit_runs(oracle, tmp_path):
    """``cost --complete xla --xla`` hands XLA the module with XLA's own propagation written on it; the
    collectives XLA then makes are those of GSPMD on the file as jax lowered it (jax.jit's partitioning),
    the embedding's full all-reduce included.  On main the callees of jax's ``call``s stayed open in the
    completion, XLA re-propagated them against everything else pinned and moved 152,103 B, not 840,119.
    The prediction follows: 1,026,151 B with the fix (356,391 on main, which priced hloshard's choice for
    the callee instructions)."""
    text = TIED.read_text()
    jit = Counter(_key(c["kind"], c["shape"]) for c in oracle.collectives(oracle.spmd_partition(text, 8)))
    assert jit[("all-reduce", "f32[1024,64]")] >= 1, jit   # the tied embedding's gradient, at full size

    out = tmp_path / "cx.json"
    r = CliRunner().invoke(main, ["cost", str(TIED), "--mesh", "data=2,model=4", "--complete", "xla", "--xla",
                                  "--format", "json", "--quiet", "-o", str(out)])
    assert r.exit_code == 0, r.output
    rep = json.loads(out.read_text())
    assert rep["xla_error"] is None and rep["xla_compile_error"] is None
    ours = Counter(_key(c["kind"], c["shape"]) for i in rep["instructions"] for c in i.get("xla_collectives", []))
    ours.update(_key(c["kind"], c["shape"]) for c in rep["xla_unmatched_collectives"])
    # one difference, documented (README, cost --xla): hloshard's text has jax's calls inlined (as it prices
    # them), so XLA's partitioner reuses one all-gather of a value two former callees read (the token ids'
    # s32[8,16,1], for take's gather and its transpose's scatter) where jax.jit's compile, inlining the
    # calls itself, makes one per call (448 B here)
    assert rep["xla_inlined_calls"] == 11   # said in the output (JSON here; a note line in text)
    assert set(ours) == set(jit) and not ours - jit, (ours - jit, jit - ours)
    assert all(k[0] == "all-gather" for k in jit - ours) and sum((jit - ours).values()) <= 1, jit - ours
    # instructions of jax's callees (here _take's clamp, 'lt.2') were completed by XLA's propagation too
    assert "lt.2" in rep["completion"]["xla_propagated"] and "lt.2" not in rep["unannotated"]
    assert "xla_propagation_note" not in rep["completion"]


def test_partial_plan_notes_xla_propagation(tmp_path):
    """Plain ``cost`` of a plan that shards parameters and leaves the body open: one summary line and, in
    --format json, ``completion.open_to_xla`` / ``completion.xla_propagation_note`` pointing to
    ``--complete xla``; the figures are those without the note (the note changes nothing).  A blank module
    (nothing tiled written: XLA would replicate) gets no note."""
    out = tmp_path / "c.json"
    r = CliRunner().invoke(main, ["cost", str(TIED), "--mesh", "data=2,model=4", "--format", "json", "--quiet",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    rep = json.loads(out.read_text())
    comp = rep["completion"]
    assert comp["open_to_xla"] == len(rep["unannotated"]) > 100
    assert "--complete xla" in comp["xla_propagation_note"]
    r = CliRunner().invoke(main, ["cost", str(TIED), "--mesh", "data=2,model=4", "--quiet", "--top", "0"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())   # the console wraps long lines
    assert flat.count("instructions left open") == 1, r.output
    assert f"note: {len(rep['unannotated']):,} instructions left open" in flat and "--complete xla prices" in flat

    blank = tmp_path / "blank.hlo"
    blank.write_text(re.sub(r", sharding=\{[^{}]*\}|, sharding=\{(?:\{[^{}]*\}[, ]*(?:/\*index=\d+\*/)?)*\}", "",
                            TIED.read_text()))
    assert "sharding=" not in blank.read_text()
    out2 = tmp_path / "b.json"
    r = CliRunner().invoke(main, ["cost", str(blank), "--mesh", "data=2,model=4", "--format", "json", "--quiet",
                                  "-o", str(out2)])
    assert r.exit_code == 0, r.output
    assert "xla_propagation_note" not in json.loads(out2.read_text())["completion"]
