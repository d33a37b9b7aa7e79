"""Engine behaviour: suppression comments, rule selection, files that do not parse, the lenient
sharding reader and the sanitizer that keeps positions."""

from __future__ import annotations

import pytest

from hloshard.errors import UsageError
from hloshard.lint.context import LintOptions
from hloshard.lint.engine import collect_paths, lint_paths, lint_text
from hloshard.lint.registry import get_rule, select_rules
from hloshard.lint.source import parse_sharding_text, sanitize, scan

UNEVEN = """HloModule m, num_partitions=4
ENTRY e {
  a = f32[10] parameter(0), sharding={devices=[4]<=[4]}{comment_a}
  b = f32[10] parameter(1), sharding={devices=[4]<=[4]}
  ROOT c = f32[10] add(a, b), sharding={devices=[4]<=[4]}
}
"""


def _lint(text, **kw):
    return [(f.code, f.line, f.column) for f in lint_text(text, "x.hlo", LintOptions(**kw))]


def test_suppression_comment_by_code_and_prefix_only_on_its_instruction():
    base = _lint(UNEVEN.replace("{comment_a}", ""))
    assert base == [("HS202", 3, 29), ("HS202", 4, 29), ("HS202", 5, 31)]
    for codes in ("HS202", "HS2", "hs202", "HS101, HS202"):
        got = _lint(UNEVEN.replace("{comment_a}", f" /* hloshard: ignore[{codes}] */"))
        assert got == [("HS202", 4, 29), ("HS202", 5, 31)], codes
    # another code does not suppress
    assert _lint(UNEVEN.replace("{comment_a}", " /* hloshard: ignore[HS201] */")) == base


def test_suppression_of_a_multi_line_instruction():
    text = """HloModule m, num_partitions=4
ENTRY e {
  ROOT a = f32[10] parameter(0),
      sharding={devices=[4]<=[4]} /* hloshard: ignore[HS202] */
}
"""
    assert _lint(text) == []
    assert _lint(text.replace(" /* hloshard: ignore[HS202] */", "")) == [("HS202", 4, 7)]


def test_suppression_of_a_syntax_error_on_its_line():
    text = "HloModule m\nENTRY e {\n  ROOT r = f32[8] add(p, q) /* hloshard: ignore[HS001] */\n}\n"
    assert _lint(text) == []
    assert _lint(text.replace("/* hloshard: ignore[HS001] */", "")) == [("HS001", 3, 23)]


def test_selection_by_prefix_name_and_specificity():
    codes = lambda rules: [r.code for r in rules]  # noqa: E731
    assert codes(select_rules(("HS1",))) == [f"HS10{i}" for i in range(1, 10)] + ["HS110", "HS111"]
    assert codes(select_rules(("HS2",), ("empty-shards",))) == ["HS202"]
    assert codes(select_rules(("HS",), ("HS1", "HS2", "HS3", "HS4", "HS5"))) == ["HS001", "HS002"]
    # the more specific selector wins
    assert codes(select_rules(("HS", "HS101"), ("HS1",))) == ["HS001", "HS002", "HS101"] + [
        r.code for r in select_rules(("HS2", "HS3", "HS4", "HS5"))]
    assert "HS501" in codes(select_rules(("ALL",)))
    with pytest.raises(UsageError, match="HS9"):
        select_rules(("HS9",))
    with pytest.raises(UsageError):
        select_rules(("HS",), ("nonexistent-rule",))
    assert get_rule("hs201").name == "empty-shards"
    assert get_rule("empty-shards").code == "HS201"


def test_file_that_does_not_parse_is_hs001_and_others_are_linted(tmp_path):
    (tmp_path / "a_broken.hlo").write_text("HloModule m\nENTRY e {\n  ROOT p = f32[8 parameter(0)\n}\n")
    (tmp_path / "b_uneven.txt").write_text(UNEVEN.replace("{comment_a}", ""))
    (tmp_path / "notes.md").write_text("not HLO")
    result = lint_paths([str(tmp_path)], LintOptions())
    assert [(f.path.rsplit("/", 1)[1], f.code, f.line) for f in result.findings] == [
        ("a_broken.hlo", "HS001", 3), ("b_uneven.txt", "HS202", 3), ("b_uneven.txt", "HS202", 4),
        ("b_uneven.txt", "HS202", 5)]
    assert result.exit_code("error") == 1
    assert result.exit_code("warning") == 1


def test_text_rules_still_run_on_a_file_that_does_not_parse():
    text = "HloModule m, num_partitions=4\nENTRY e {\n  a = f32[8] parameter(0), sharding={devices=[4]0,1,1,2}\n  ROOT b = f32[8] add(a, zz)\n}\n"
    assert _lint(text) == [("HS103", 3, 28), ("HS001", 4, 26)]


def test_parser_rejected_sharding_is_reported_with_its_own_code_and_rest_is_linted():
    # the parser rejects an iota whose product is wrong; lint reports HS102 and still sees the
    # uneven split on the next line (positions unchanged by the sanitizer)
    text = """HloModule m, num_partitions=4
ENTRY e {
  a = f32[8] parameter(0), sharding={devices=[4]<=[2,3]T(1,0)}
  ROOT b = f32[10] parameter(1), sharding={devices=[4]<=[4]}
}
"""
    assert _lint(text) == [("HS102", 3, 28), ("HS202", 4, 34)]


def test_sanitize_keeps_every_position():
    text = "HloModule m\nENTRY e {\n  a = f32[8] parameter(0), sharding={devices=[4]<=[3]}, metadata={op_name=\"x\"}\n  ROOT b = f32[8] negate(a)\n}\n"
    s = scan(text)
    clean = sanitize(text, s.sites)
    assert len(clean) == len(text)
    assert clean.splitlines()[2].startswith("  a = f32[8] parameter(0), sharding={unknown}")
    assert [len(x) for x in clean.splitlines()] == [len(x) for x in text.splitlines()]
    assert clean.splitlines()[3] == text.splitlines()[3]


def test_scan_ignores_sharding_text_in_strings_and_comments():
    text = ('HloModule m\nENTRY e {\n  // sharding={devices=[3]0,1,2}\n'
            '  ROOT a = f32[8] parameter(0), frontend_attributes={xla.sdy.sharding="sharding={x}"}, '
            'metadata={op_name="sharding={devices=[2]0,0}"} /* sharding={maximal device=9} */\n}\n')
    assert scan(text).sites == []


def test_lenient_reader_forms():
    spec = parse_sharding_text("{devices=[2,2,2]<=[2,4]T(1,0) last_tile_dims={manual} metadata={op_name=\"}\"}}")
    assert spec.kind == "tiled" and spec.devices == (0, 4, 1, 5, 2, 6, 3, 7) and spec.num_subgroup_dims == 1
    assert parse_sharding_text("{{replicated}, /*index=1*/{maximal device=3}}").leaves()[1].maximal_device == 3
    assert parse_sharding_text("{devices=[4]<=[2,2]}").problems  # T(...) required with 2 reshape dims
    assert parse_sharding_text("{bogus}").kind == "unparsed"
    assert parse_sharding_text("{mesh[x=2], [{x}]}").kind == "named"


def test_collect_paths_recurses_sorted_and_skips_hidden(tmp_path):
    (tmp_path / "z").mkdir()
    (tmp_path / ".git").mkdir()
    for p in ("z/b.hlo", "a.txt", "c.py", ".git/x.hlo", "z/.hidden.hlo"):
        (tmp_path / p).write_text("x")
    files, missing = collect_paths([str(tmp_path), str(tmp_path / "missing.hlo")])
    assert [f[len(str(tmp_path)) + 1:] for f in files] == ["a.txt", "z/b.hlo"]
    assert missing == [(str(tmp_path / "missing.hlo"), "cannot read: No such file or directory")]


def test_lint_is_deterministic_across_processes(tmp_path):
    """Same input, same output bytes in two fresh interpreters with different string-hash seeds (the
    order of a set or dict of names differs between them; within one process it never would, so
    comparing two calls in this process proved nothing). The input has findings of several rules on
    several instructions, so any hash-ordered traversal would show."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    src = tmp_path / "m.hlo"
    src.write_text("""HloModule m, num_partitions=4
ENTRY e {
  a = f32[10] parameter(0), sharding={devices=[4]<=[4]}
  b = f32[8] parameter(1), sharding={devices=[4]0,1,1,3}
  c = f32[10] parameter(2), sharding={devices=[4]<=[4]}
  d = f32[10] add(a, c), sharding={devices=[4]3,2,1,0}
  ROOT t = (f32[8], f32[10]) tuple(b, d)
}
""")
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.run([sys.executable, "-m", "hloshard.cli", "lint", str(src), "--format", "json"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 1, proc.stderr[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    import json

    # by the rule definitions, in line order: HS202 (10 rows over 4 shards hold 3,3,3,1) on a, c and d;
    # HS103 (device 1 twice) on b; HS501 on the tuple, the one unannotated instruction of five
    assert [(d["code"], d["line"]) for d in json.loads(outs[0])] == [
        ("HS202", 3), ("HS103", 4), ("HS202", 5), ("HS202", 6), ("HS501", 7)]


def test_a_sharding_the_parser_rejects_is_hs001_where_the_parser_points_and_the_rest_is_linted():
    """HS001 of a rejected sharding is where the parser points in it -- where ``solve`` and ``cost`` report the same
    error (fresh-clone check 33: lint said 41:40, the ``sharding=``, and solve 41:71, the misspelt word); the other
    rules' findings on it stay at its ``sharding=``."""
    text = """HloModule m, num_partitions=2
ENTRY e {
  a = f32[8] parameter(0), sharding={devices=[1]0}
  ROOT b = f32[7] parameter(1), sharding={devices=[2]0,1}
}
"""
    findings = lint_text(text, "x.hlo", LintOptions())
    assert [(f.code, f.line, f.column) for f in findings] == [("HS101", 3, 28), ("HS001", 3, 49), ("HS202", 4, 33)]
    assert "more than one device" in findings[1].message
    assert "holds 1 device id but num_partitions=2" in findings[0].message
    # a real syntax error elsewhere is its own HS001 (and the IR rules cannot run)
    broken = text.replace("parameter(1)", "parameter(1")
    assert [(f.code, f.line) for f in lint_text(broken, "x.hlo", LintOptions())] == [
        ("HS101", 3), ("HS001", 3), ("HS001", 4)]


def test_repeated_rejected_sharding_is_reported_at_every_use():
    text = """HloModule m, num_partitions=2
ENTRY e {
  a = f32[8] parameter(0), sharding={devices=[1]0}
  b = f32[8] parameter(1), sharding={devices=[1]0}
  ROOT c = f32[8] add(a, b), sharding={devices=[2]0,1}
}
"""
    findings = lint_text(text, "x.hlo", LintOptions(select=("HS001",)))
    assert [(f.code, f.line, f.column) for f in findings] == [("HS001", 3, 49), ("HS001", 4, 49)]


def test_iota_forms_xla_rejects_are_hs102():
    for shape, bad in (("f32[8]", "{devices=[4]<=[4]T(0)}"), ("f32[8,8]", "{devices=[2,2]<=[2,2]}"),
                       ("f32[8,8]", "{devices=[2,2]<=[2,2]T(0,2)}")):
        text = f"HloModule m, num_partitions=4\nENTRY e {{\n  ROOT a = {shape} parameter(0), sharding={bad}\n}}\n"
        assert _lint(text) == [("HS102", 3, 31 + len(shape) - 4)], bad


def test_crlf_line_endings_keep_positions_and_suppression():
    text = UNEVEN.replace("{comment_a}", " /* hloshard: ignore[HS202] */").replace("\n", "\r\n")
    assert _lint(text) == [("HS202", 4, 29), ("HS202", 5, 31)]
