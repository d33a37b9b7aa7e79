"""The bundled samples (samples/*.hlo, written by scripts/make_samples.py) are real, current XLA text."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES, require_jax

MODELS = ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer"]
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S")


def _files():
    return sorted(SAMPLES.glob("*.hlo"))


def test_every_model_has_three_forms_and_samples_are_small():
    names = {p.name for p in _files()}
    for m in MODELS:
        assert {f"{m}.pre.hlo", f"{m}.propagated.hlo", f"{m}.shardy.pre.hlo"} <= names
    assert "reshape_seed.hlo" in names
    assert sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file()) < 5 * 2**20


@pytest.mark.parametrize("model", MODELS)
def test_propagated_dump_annotates_every_entry_instruction(model):
    text = (SAMPLES / f"{model}.propagated.hlo").read_text()
    entry = text[text.index("\nENTRY "):]
    entry = entry[:entry.index("\n}")]
    instrs = [ln for ln in entry.splitlines()[1:] if _INSTR.match(ln)]
    assert len(instrs) > 5
    # GSPMD annotates everything except some scalar constants (reduce init values)
    missing = [ln for ln in instrs if "sharding={" not in ln and " constant(" not in ln]
    assert missing == []
    assert sum("sharding={" in ln for ln in instrs) >= 0.9 * len(instrs)
    pre = (SAMPLES / f"{model}.pre.hlo").read_text()
    assert "xla.sdy" not in pre and "sharding={" in pre
    assert "xla.sdy.sharding" in (SAMPLES / f"{model}.shardy.pre.hlo").read_text()


def test_no_absolute_paths_in_samples():
    for p in _files():
        assert "/work/" not in p.read_text() and "/tmp/" not in p.read_text(), p.name


@pytest.mark.oracle
def test_xla_parses_every_sample():
    require_jax()
    from tests import xla_oracle

    files = _files()
    results = xla_oracle.parse_many([p.read_text() for p in files])
    bad = [(p.name, msg[:200]) for p, (ok, msg) in zip(files, results) if not ok]
    assert bad == []


@pytest.mark.oracle
def test_samples_are_current_and_deterministic(tmp_path):
    """Regenerating (conv_layer, the cheapest model) reproduces the committed files byte for byte."""
    require_jax()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_samples.py"), "--out", str(tmp_path),
                           "--only", "conv_layer"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ["conv_layer.pre.hlo", "conv_layer.propagated.hlo", "conv_layer.shardy.pre.hlo",
                 "reshape_seed.hlo"]:
        assert (tmp_path / name).read_text() == (SAMPLES / name).read_text(), name


@pytest.mark.oracle
def test_make_transformer_writes_pre_and_propagated(tmp_path):
    """The benchmark generator (stops XLA right after sharding propagation) writes both forms."""
    require_jax()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_transformer.py"), "--layers", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from hloshard.hlo import parse_file

    pre = parse_file(str(tmp_path / "transformer_2l.pre.hlo"))
    prop = parse_file(str(tmp_path / "transformer_2l.propagated.hlo"))
    n_pre, n_prop = len(pre.entry.instructions), len(prop.entry.instructions)
    assert 500 < n_prop < 900 and abs(n_pre - n_prop) < 50
    annotated = sum(i.sharding is not None for i in prop.entry.instructions)
    assert annotated >= 0.9 * n_prop
    assert sum(i.sharding is not None for i in pre.entry.instructions) < 0.2 * n_pre
    assert "/work/" not in (tmp_path / "transformer_2l.propagated.hlo").read_text()
