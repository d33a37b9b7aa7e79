"""Linting samples/ gives exactly the findings committed in tests/lint/samples_expected.json.

Regenerate (after reviewing the difference) with::

    python -m tests.lint.test_samples_lint --write
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_paths
from tests.conftest import ROOT, SAMPLES

EXPECTED = pathlib.Path(__file__).parent / "samples_expected.json"


def current() -> dict:
    """{sample file name: [finding json, ...]} for every file in samples/ (default options)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = lint_paths(["samples"], LintOptions())
    finally:
        os.chdir(cwd)
    assert result.unreadable == []
    out = {pathlib.Path(f).name: [] for f in result.files}
    for f in result.findings:
        out[pathlib.Path(f.path).name].append(f.to_json())
    return dict(sorted(out.items()))


def test_samples_lint_exactly_as_expected():
    expected = json.loads(EXPECTED.read_text())
    got = current()
    assert sorted(got) == sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".hlo", ".txt"))
    assert got == expected


def test_seed_sample_reports_the_reshape_all_gather():
    findings = json.loads(EXPECTED.read_text())["reshape_seed.hlo"]
    assert [(f["code"], f["line"]) for f in findings] == [("HS401", 4)]
    assert "all-gather dim 1" in findings[0]["message"]


if __name__ == "__main__" and "--write" in sys.argv:
    EXPECTED.write_text(json.dumps(current(), indent=2) + "\n")
