"""``hloshard fmt``: canonical printing from files or stdin, atomic output, clean errors."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from hloshard.cli import main
from hloshard.hlo import parse_file, print_module
from tests.conftest import ROOT, SAMPLES

DATA = ROOT / "tests" / "data" / "hlo"
BAD = "HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT q = f32[8] add(p, missing)\n}\n"


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


# tests/data/hlo/nested.hlo in canonical form, written by hand from the input and XLA's text rules:
# nested operands become instructions of their own (innermost first, named <opcode>.anon) before
# their user, inline operand shapes are dropped, `v = abs(r)` gets its inferred shape f32[10], the
# ignore comment's codes are printed without spaces, and the no-% naming style is kept.
NESTED_CANONICAL = """HloModule nested_and_inline

ENTRY e {
  p0 = f32[10] parameter(0)
  p1 = f32[10] parameter(1)
  p2 = f32[10] parameter(2)
  m = f32[10] multiply(p1, p2) /* hloshard: ignore[HS101,HS2] */
  negate.anon = f32[10] negate(p2)
  multiply.anon = f32[10] multiply(p1, negate.anon)
  r = f32[10] add(p0, multiply.anon)
  constant.anon = f32[] constant(2)
  broadcast.anon = f32[10,10] broadcast(constant.anon)
  sq = f32[10,10] sqrt(broadcast.anon)
  v = f32[10] abs(r)
  ROOT t = (f32[10], f32[10], f32[10,10]) tuple(v, m, sq)
}
"""


def test_fmt_prints_canonical_text_to_stdout():
    res = run("fmt", str(DATA / "nested.hlo"))
    assert res.exit_code == 0
    assert res.output == NESTED_CANONICAL       # was: compared with print_module, the code fmt runs


def test_fmt_output_file_and_idempotence(tmp_path):
    out = tmp_path / "out.hlo"
    res = run("fmt", str(SAMPLES / "mlp_train_step.propagated.hlo"), "-o", str(out))
    assert res.exit_code == 0 and res.output == ""
    first = out.read_text()
    again = tmp_path / "again.hlo"
    assert run("fmt", str(out), "-o", str(again)).exit_code == 0
    assert again.read_text() == first
    assert run("fmt", "--check", str(out)).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.hlo", "out.hlo"]   # no temp files left


def test_fmt_reads_stdin_with_dash():
    text = (DATA / "inline.hlo").read_text()
    res = run("fmt", "-", input=text)
    assert res.exit_code == 0
    assert res.output.startswith("HloModule module_e\n")
    assert "to_apply=e.to_apply" in res.output


def test_fmt_check_reports_unformatted(tmp_path):
    res = run("fmt", "--check", str(DATA / "basics.hlo"))
    assert res.exit_code == 1
    assert "would be reformatted" in res.output


def test_fmt_bad_input_exits_2_with_one_block_and_writes_nothing(tmp_path):
    src = tmp_path / "bad.hlo"
    src.write_text(BAD)
    out = tmp_path / "out.hlo"
    out.write_text("previous content\n")
    res = CliRunner().invoke(main, ["fmt", str(src), "-o", str(out)])
    assert res.exit_code == 2
    assert f"{src}:4:26: error: instruction 'missing' is not defined" in res.output
    assert "^" in res.output and "Traceback" not in res.output
    assert out.read_text() == "previous content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hlo", "out.hlo"]


def test_fmt_missing_file_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["fmt", str(tmp_path / "nope.hlo")])
    assert res.exit_code == 2 and "cannot read" in res.output and "Traceback" not in res.output


def test_installed_tool_finds_its_grammar_from_any_directory(tmp_path):
    """The grammar is package data: run the CLI from an unrelated directory, grammar cache cold."""
    src = tmp_path / "in.hlo"
    src.write_text((ROOT / "samples" / "mlp_train_step.pre.hlo").read_text())   # one the verifier takes
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-m", "hloshard.cli", "fmt", str(src)], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == print_module(parse_file(str(src)))


def test_top_level_grammar_is_the_packaged_one():
    top = ROOT / "grammars" / "hlo.lark"
    assert top.is_symlink()
    assert top.resolve() == (ROOT / "src" / "hloshard" / "grammars" / "hlo.lark").resolve()
    from hloshard.hlo.parser import grammar_text

    assert grammar_text() == top.read_text()


# ---- canonical form: entry_computation_layout comments, no whitespace runs --------------------

import re  # noqa: E402

import pytest  # noqa: E402

from hloshard.hlo import parse_module  # noqa: E402


def _runs_of_spaces(text: str) -> list[str]:
    """Lines with two or more spaces between non-blank characters (string literals ignored)."""
    return [ln for ln in text.splitlines() if re.search(r"\S {2,}\S", re.sub(r'"(?:[^"\\]|\\.)*"', '""', ln))]


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.hlo")) + sorted(DATA.glob("*.hlo")), ids=lambda p: p.name)
def test_fmt_is_idempotent_single_spaced_and_passes_check(path, tmp_path):
    out = tmp_path / path.name
    res = run("fmt", str(path), "-o", str(out))
    if res.exit_code == 2:          # data files that are meant not to parse
        return
    first = out.read_text()
    assert _runs_of_spaces(first) == []
    assert print_module(parse_module(first)) == first
    assert run("fmt", "--check", str(out)).exit_code == 0
    src_head = path.read_text().splitlines()[0]
    if "entry_computation_layout" in src_head:   # XLA's header is already canonical: kept verbatim
        assert first.splitlines()[0] == src_head


def test_entry_computation_layout_index_comments_are_canonical():
    params = ", ".join(f"f32[{i + 1}]{{0}}" for i in range(7))
    messy = params.replace("f32[6]", "/*index=5*/   f32[6]").replace(", ", " ,  ")
    text = (f"HloModule m, entry_computation_layout={{({messy})->(f32[1]{{0}}, f32[2]{{0}})}}\n\n"
            "ENTRY e {\n  ROOT p = f32[1] parameter(0)\n}\n")
    head = print_module(parse_module(text)).splitlines()[0]
    assert head == ("HloModule m, entry_computation_layout={(f32[1]{0}, f32[2]{0}, f32[3]{0}, f32[4]{0}, "
                    "f32[5]{0}, /*index=5*/f32[6]{0}, f32[7]{0})->(f32[1]{0}, f32[2]{0})}")
    body = "\n\nENTRY e {\n  ROOT p = f32[1] parameter(0)\n}\n"
    # layout attributes (tiling, memory space) are printed without inner spaces
    tiled = "HloModule m, entry_computation_layout={(f32[1]{0},   /*index=5*/ f32[2]{0:T(8)  S(1)})->f32[]}"
    assert print_module(parse_module(tiled + body)).splitlines()[0] == \
        "HloModule m, entry_computation_layout={(f32[1]{0}, f32[2]{0:T(8)S(1)})->f32[]}"
    # not a program shape: kept as written, whitespace runs collapsed, still a fixed point
    odd = "HloModule m, entry_computation_layout={not   a  /* note */ layout}"
    once = print_module(parse_module(odd + body))
    assert once.splitlines()[0] == "HloModule m, entry_computation_layout={not a layout}"
    assert print_module(parse_module(once)) == once


def test_fmt_says_it_reads_hlo_text_only(tmp_path):
    """A StableHLO file (which solve and cost read through jaxlib) is one clear usage error, not a syntax
    error at '@' (new user 15); nothing is written."""
    src = SAMPLES / "mlp_train_step.stablehlo.mlir"
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["fmt", str(src), "-o", str(out)])
    assert r.exit_code == 2 and "fmt formats HLO text only" in r.output and "StableHLO" in r.output, r.output
    assert not out.exists()


def test_fmt_refuses_what_the_verifier_refuses(tmp_path):
    # one validity rule for every command: fmt wrote a dot of the wrong result shape, exit 0 (new user 16)
    src = tmp_path / "wrongdot.hlo"
    src.write_text("HloModule m\nENTRY e {\n  a = f32[4,3] parameter(0)\n  b = f32[3,5] parameter(1)\n"
                   "  ROOT d = f32[4,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    out = tmp_path / "out.hlo"
    for args in (["fmt", str(src), "-o", str(out)], ["fmt", "--check", str(src)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and f"{src}:5:8: error:" in res.output and "should be [4, 5]" in res.output
        assert "Traceback" not in res.output and not out.exists()
