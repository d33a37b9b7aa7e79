"""Issue 24's newcomer items in the CLI and API (round 38, helper cli): the fresh-clone check 37's findings 7-10 and
new user 37's F7, F13 and F14.  Each test reads a message, an exit status or a figure and fails on main 45f5e17e."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "cli"


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
