"""Reporters: SARIF validated against the 2.1.0 schema, JSON parsed, GitHub escaping, text lines."""

from __future__ import annotations

import json

import jsonschema
import pytest

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from hloshard.lint.registry import all_rules
from hloshard.lint.reporters import (escape_data, escape_property, fingerprint, render_github,
                                     render_json, render_sarif, render_text)
from hloshard.lint.rule import Finding
from tests.conftest import require_shared

TEXT = """HloModule m, num_partitions=4
ENTRY e {
  a = f32[10] parameter(0), sharding={devices=[4]<=[4]}
  b = f32[8] parameter(1), sharding={devices=[4]0,1,1,3}
  ROOT c = f32[8] negate(b)
}
"""


@pytest.fixture(scope="module")
def sarif_schema():
    return json.loads(require_shared("schemas", "sarif-schema-2.1.0.json").read_text())


def _findings(text=TEXT, path="dir/x.hlo"):
    return lint_text(text, path, LintOptions())


def test_sarif_is_valid_and_complete(sarif_schema):
    findings = _findings()
    assert {f.severity for f in findings} == {"error", "warning", "info"}
    log = json.loads(render_sarif(findings, all_rules()))
    jsonschema.validate(log, sarif_schema)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    assert all(r["fullDescription"]["text"] and r["shortDescription"]["text"] for r in rules)
    assert len(run["results"]) == len(findings)
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"HS202": "warning", "HS103": "error", "HS501": "note"}
    for res, f in zip(run["results"], findings):
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"] == f.code
        [loc] = res["locations"]
        region = loc["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"]) == (f.line, f.column)
        assert loc["physicalLocation"]["artifactLocation"] == {"uri": "dir/x.hlo", "uriBaseId": "%SRCROOT%"}
    fps = [r["partialFingerprints"]["hloshardFinding/v1"] for r in run["results"]]
    assert len(set(fps)) == len(fps)


def test_sarif_of_no_findings_is_valid(sarif_schema):
    log = json.loads(render_sarif([], all_rules()))
    jsonschema.validate(log, sarif_schema)
    assert log["runs"][0]["results"] == []


def test_fingerprints_do_not_move_with_lines():
    before = {f.code: fingerprint(f) for f in _findings()}
    shifted = TEXT.replace("ENTRY e {\n", "// a new comment\n\nENTRY e {\n")
    after_findings = _findings(shifted)
    assert [f.line for f in after_findings] != [f.line for f in _findings()]
    assert {f.code: fingerprint(f) for f in after_findings} == before
    # but another file or another instruction gives another fingerprint
    assert {fingerprint(f) for f in _findings(path="other.hlo")}.isdisjoint(before.values())


def test_sarif_absolute_path_outside_cwd_is_a_file_uri(tmp_path, monkeypatch, sarif_schema):
    monkeypatch.chdir(tmp_path)
    f = Finding("/nonexistent dir/a b.hlo", 3, 4, "HS101", "device-count-mismatch", "error", "m")
    log = json.loads(render_sarif([f], all_rules()))
    jsonschema.validate(log, sarif_schema)
    art = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert art == {"uri": "file:///nonexistent%20dir/a%20b.hlo"}


def test_json_reporter():
    """The whole document, written from TEXT and the rule definitions (was: compared with
    Finding.to_json, the function render_json calls): f32[10] over 4 shards is padded to ceil(10/4) = 3
    rows, held 3,3,3,1; the tile assignment 0,1,1,3 names device 1 twice; negate is the one
    unannotated instruction of three. Columns are those of `sharding=` (line 3/4) and the ROOT name."""
    data = json.loads(render_json(_findings()))
    assert data == [
        {"path": "dir/x.hlo", "line": 3, "column": 29, "code": "HS202", "name": "uneven-sharding",
         "severity": "warning", "message": "%a f32[10]: dim 0 (size 10) is not divisible by 4; every shard is "
                                           "padded to 3 (held: 3,3,3,1; shard 3 pads 2; 2 padding elements in all)"},
        {"path": "dir/x.hlo", "line": 4, "column": 28, "code": "HS103", "name": "duplicate-device-id",
         "severity": "error", "message": "device id 1 (2 times) appears more than once in the tile assignment"},
        {"path": "dir/x.hlo", "line": 5, "column": 8, "code": "HS501", "name": "partially-annotated",
         "severity": "info", "message": "%c (negate) has no sharding while 2 of 3 instructions in %e have one"},
    ]


def test_github_escaping_rules():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    f = Finding("we,ird:dir/x.hlo", 2, 5, "HS104", "device-id-out-of-range", "error", "100% bad\nreally")
    assert render_github([f]) == ("::error file=we%2Cird%3Adir/x.hlo,line=2,col=5,title=HS104::"
                                  "100%25 bad%0Areally [device-id-out-of-range]\n")


def test_github_errors_first():
    lines = render_github(_findings()).splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::warning", "::notice"]
    assert lines[0].startswith("::error file=dir/x.hlo,line=4,col=28,title=HS103::")


def test_text_reporter_plain_and_colored():
    findings = _findings()
    plain = render_text(findings, files=1)
    lines = plain.splitlines()
    assert lines[0].startswith("dir/x.hlo:3:29: HS202 ")
    assert lines[-1] == "Found 3 findings (1 error, 1 warning, 1 info) in 1 file."
    assert "\x1b[" not in plain
    colored = render_text(findings, files=1, color=True)
    assert "\x1b[" in colored and "HS103" in colored
    assert render_text([], files=2) == "All checks passed (2 files).\n"
