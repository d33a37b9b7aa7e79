"""The lint cases against real XLA (jaxlib, in a child process).

Every passing case is HLO that XLA's parser accepts; HS001's failing case is rejected by it. The
sharding errors lint reports statically (HS101 device count, HS102 malformed tile assignment, HS103
duplicate device, HS105 tile rank) pass XLA's *parser* -- which is the point of linting -- and are
rejected only when XLA compiles the module for its partitions; their fixed versions compile.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.conftest import require_jax

CASES = pathlib.Path(__file__).parent / "cases"
COMPILE_CHECKED = ["hs101", "hs102", "hs103", "hs105"]


@pytest.mark.oracle
def test_good_cases_parse_in_xla_and_the_syntax_error_case_does_not():
    require_jax()
    from tests import xla_oracle

    good = sorted(CASES.glob("*_good*.hlo"))
    # the sharding errors below are not syntax errors for XLA
    semantic = [CASES / f"{name}_bad.hlo" for name in COMPILE_CHECKED]
    bad = CASES / "hs001_bad.hlo"
    results = xla_oracle.parse_many([p.read_text() for p in good + semantic + [bad]])
    for path, (ok, msg) in zip(good + semantic, results):
        assert ok, (path.name, msg)
    assert results[-1][0] is False


@pytest.mark.oracle
@pytest.mark.parametrize("name", COMPILE_CHECKED)
def test_xla_does_not_compile_what_lint_reports_and_compiles_the_fix(name):
    require_jax()
    from tests import xla_oracle

    bad = (CASES / f"{name}_bad.hlo").read_text()
    good = (CASES / f"{name}_good.hlo").read_text()
    n = int(re.search(r"num_partitions=(\d+)", good).group(1))
    bad_ok, bad_msg = xla_oracle.compile_spmd(bad, num_partitions=n)
    good_ok, good_msg = xla_oracle.compile_spmd(good, num_partitions=n)
    assert not bad_ok, bad_msg
    assert good_ok, good_msg
