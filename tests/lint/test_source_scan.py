"""Both sharding scanners of ``hloshard.lint.source`` find the same sites.

The possessive-quantifier scanner is used only where the ``re`` module runs it correctly (Python
3.11.0-3.11.4 silently match nothing, which made ``hloshard lint`` print "All checks passed" on
every file); elsewhere the portable one-match-per-token scanner is used.  Both must agree exactly.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from hloshard.lint import source
from tests.conftest import SAMPLES

CASES = pathlib.Path(__file__).parent / "cases"
FILES = sorted(p for d in (SAMPLES, CASES) for p in d.iterdir() if p.suffix in (".hlo", ".txt"))


def _sites(text: str) -> tuple[list, list]:
    scan = source.scan(text)
    return ([(s.offset, s.line, s.column, s.text) for s in scan.sites],
            [(c.offset, c.line, c.codes) for c in scan.ignores])


@pytest.fixture(params=["in-use", "portable"])
def scanner(request, monkeypatch):
    if request.param == "portable":
        monkeypatch.setattr(source, "_SCAN", source._PORTABLE_SCAN)
    return request.param


def test_self_test_sample_finds_every_site(scanner):
    sites, ignores = _sites(source._SELF_TEST)
    # shardings on p, q and r; not the one in a string, not xsharding=, not the one in a comment
    assert [t for _, _, _, t in sites] == ["{devices=[2]<=[2]}", "{replicated}", "{devices=[2]0,1}"]
    assert [codes for _, _, codes in ignores] == [("HS201",)]


def test_portable_scanner_agrees_on_every_sample(monkeypatch):
    assert len(FILES) > 40
    total = 0
    for path in FILES:
        text = path.read_text()
        fast = _sites(text)
        monkeypatch.setattr(source, "_SCAN", source._PORTABLE_SCAN)
        portable = _sites(text)
        monkeypatch.undo()
        assert fast == portable, path.name
        total += len(fast[0])
    assert total > 100   # the samples are not trivially empty


def test_fast_scanner_dropped_when_it_disagrees(monkeypatch):
    """A broken ``re`` (as on 3.11.0-3.11.4) makes the self-test fall back to the portable scanner."""
    real_compile = re.compile

    class Broken:
        def __init__(self, pattern):
            self.pattern = pattern

        def finditer(self, text):
            return iter(())

    def fake_compile(pattern, flags=0):
        return Broken(pattern) if "*+" in pattern else real_compile(pattern, flags)

    monkeypatch.setattr(source.re, "compile", fake_compile)
    assert source._possessive_scan() is None


def test_fast_scanner_used_where_re_works():
    import sys
    if sys.version_info >= (3, 11, 5):
        assert source._FAST_SCAN is not None and source._SCAN is source._FAST_SCAN
    else:
        assert source._SCAN is source._PORTABLE_SCAN
