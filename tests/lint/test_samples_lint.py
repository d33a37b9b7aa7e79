"""Linting samples/ gives exactly the findings tests/lint/samples_expected.json states. That file is
written from the rule definitions, each finding (and each clean file) with its reason; it is never
regenerated from a lint run. Where XLA has a verdict it is asked: every sample (and the MaxText
module of the corpus) that XLA compiles for 8 partitions must have no error-level finding.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_paths, lint_text
from tests.conftest import ROOT, SAMPLES, require_jax, require_shared

EXPECTED = pathlib.Path(__file__).parent / "samples_expected.json"


def current() -> dict:
    """{sample file name: [finding, ...]} for every file in samples/ (default options)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = lint_paths(["samples"], LintOptions())
    finally:
        os.chdir(cwd)
    assert result.unreadable == []
    out = {pathlib.Path(f).name: [] for f in result.files}
    for f in result.findings:
        out[pathlib.Path(f.path).name].append(f)
    return out


def test_samples_lint_exactly_as_expected():
    expected = {k: v for k, v in json.loads(EXPECTED.read_text()).items() if not k.startswith("_")}
    got = current()
    assert sorted(got) == sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".hlo", ".txt"))
    assert sorted(expected) == sorted(got)
    for name, entry in expected.items():
        assert entry["reason"] and all(f["reason"] for f in entry["findings"]), name
        want = [(f["code"], f["line"], f["column"]) for f in entry["findings"]]
        assert [(f.code, f.line, f.column) for f in got[name]] == want, name


def test_seed_sample_reports_the_reshape_all_gather():
    [f] = current()["reshape_seed.hlo"]
    # hand-derived in samples_expected.json: 98,304,000 B = 93.75 MiB received per device
    assert "all-gather dim 1 in groups of 4" in f.message and "93.8 MiB" in f.message


@pytest.mark.oracle
def test_no_error_on_any_module_xla_compiles_for_8_partitions():
    require_jax()
    from tests import xla_oracle

    paths = sorted(p for p in SAMPLES.iterdir() if p.suffix == ".hlo")
    paths.append(require_shared("corpus", "xla_benchmarks", "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo"))
    texts = [p.read_text() for p in paths]
    results = xla_oracle.compile_many(texts, timeout=900)
    compiled = 0
    for path, text, (ok, msg) in zip(paths, texts, results):
        if not ok:
            continue
        compiled += 1
        errors = [f for f in lint_text(text, str(path), LintOptions()) if f.severity == "error"]
        assert errors == [], (path.name, [(f.code, f.line, f.message) for f in errors][:5])
    assert compiled >= 13
