"""``hloshard lint`` on the command line: exit codes, formats, options, pyproject configuration."""

from __future__ import annotations

import json
import pathlib

import pytest
from click.testing import CliRunner

from hloshard.cli import main

CASES = pathlib.Path(__file__).parent / "cases"
WARN_ONLY = "HloModule m, num_partitions=4\nENTRY e {\n  ROOT a = f32[10] parameter(0), sharding={devices=[4]<=[4]}\n}\n"
CLEAN = (CASES / "hs202_good.hlo").read_text()
ERROR = (CASES / "hs103_bad.hlo").read_text()


def run(args):
    result = CliRunner().invoke(main, ["lint", *args], catch_exceptions=False)
    return result


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above tmp
    (tmp_path / "clean.hlo").write_text(CLEAN)
    (tmp_path / "warn.hlo").write_text(WARN_ONLY)
    (tmp_path / "error.hlo").write_text(ERROR)
    return tmp_path


def test_exit_codes(files):
    assert run(["clean.hlo"]).exit_code == 0
    assert run(["warn.hlo"]).exit_code == 0                      # default --fail-on error
    assert run(["warn.hlo", "--fail-on", "warning"]).exit_code == 1
    assert run(["warn.hlo", "--fail-on", "info"]).exit_code == 1
    assert run(["error.hlo"]).exit_code == 1
    assert run(["error.hlo", "--ignore", "HS103"]).exit_code == 0
    assert run(["clean.hlo", "--select", "HS1,HS2", "--select", "HS501"]).exit_code == 0


def test_usage_errors_exit_2(files):
    for args in (["--format", "xml", "clean.hlo"], ["--select", "HS999", "clean.hlo"], [],
                 ["--reshard-threshold", "lots", "clean.hlo"], ["--mesh", "2xq", "clean.hlo"],
                 ["--num-partitions", "0", "clean.hlo"], ["--explain", "HS999"],
                 ["--device-ids", "0,1", "clean.hlo"]):
        result = run(args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_unreadable_input_exits_2_but_lints_the_rest(files):
    result = run(["missing.hlo", "error.hlo", "--format", "json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == ["HS103"]
    assert "hloshard: error: missing.hlo: cannot read: No such file or directory\n" in result.stderr


def test_syntax_error_file_is_a_finding_and_other_files_are_linted(files):
    (files / "broken.hlo").write_text("HloModule m\nENTRY e {\n  ROOT p = f32[8] bogus-op(\n}\n")
    result = run([".", "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [(d["path"], d["code"]) for d in data] == [("broken.hlo", "HS001"), ("error.hlo", "HS103"),
                                                      ("warn.hlo", "HS202")]
    assert data[0]["line"] >= 3 and data[0]["column"] > 0


def test_text_output_format(files):
    result = run(["error.hlo"])
    assert result.stdout.splitlines()[0] == (
        "error.hlo:4:35: HS103 device id 1 (2 times) appears more than once in the tile assignment")


def test_sarif_and_github_formats_and_output_file(files):
    assert run(["error.hlo", "warn.hlo", "--format", "sarif", "-o", "out.sarif"]).exit_code == 1
    log = json.loads((files / "out.sarif").read_text())
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["HS103", "HS202"]
    gh = run(["warn.hlo", "error.hlo", "--format", "github"]).stdout.splitlines()
    assert gh[0].startswith("::error file=error.hlo,line=4,col=35,title=HS103::")
    assert gh[1].startswith("::warning file=warn.hlo,line=3,col=34,title=HS202::")


def test_explain_and_list_rules(files):
    result = run(["--explain", "hs201"])
    assert result.exit_code == 0
    assert result.stdout.startswith("HS201 empty-shards (warning; divisibility)")
    assert "\nBad:\n" in result.stdout and "\nGood:\n" in result.stdout   # plain text, not reStructuredText
    assert "**" not in result.stdout and "``" not in result.stdout
    listing = run(["--list-rules"]).stdout.splitlines()
    assert listing[0].split()[:3] == ["HS001", "syntax-error", "error"]
    assert len(listing) == len({line.split()[0] for line in listing}) >= 20


def test_num_partitions_option_overrides_header(files):
    (files / "np.hlo").write_text(WARN_ONLY.replace(", num_partitions=4", ""))
    assert run(["np.hlo", "--select", "HS101"]).exit_code == 0
    result = run(["np.hlo", "--select", "HS101", "--num-partitions", "8"])
    assert result.exit_code == 1 and "--num-partitions=8" in result.stdout


def test_reshard_threshold_option(files):
    (files / "seed.hlo").write_text((CASES / "hs401_bad.hlo").read_text())
    out = run(["seed.hlo", "--select", "HS401", "--format", "json"]).stdout
    assert [d["line"] for d in json.loads(out)] == [7, 8]
    out = run(["seed.hlo", "--select", "HS401", "--format", "json", "--reshard-threshold", "100MiB"]).stdout
    assert [d["line"] for d in json.loads(out)] == [8]
    out = run(["seed.hlo", "--select", "HS401", "--format", "json", "--reshard-threshold", "1GiB"]).stdout
    assert json.loads(out) == []


def test_config_from_nearest_pyproject(files, monkeypatch):
    (files / "pyproject.toml").write_text(
        '[tool.hloshard.lint]\nselect = ["HS2"]\nfail-on = "warning"\nreshard-threshold = "1GiB"\n')
    sub = files / "sub" / "deeper"
    sub.mkdir(parents=True)
    (sub / "warn.hlo").write_text(WARN_ONLY)
    (sub / "error.hlo").write_text(ERROR)
    monkeypatch.chdir(sub)
    result = run(["."])
    assert result.exit_code == 1  # warning fails under fail-on=warning
    assert "HS202" in result.stdout and "HS103" not in result.stdout  # select = HS2 only
    # the command line wins over the file
    assert run([".", "--fail-on", "error"]).exit_code == 0
    assert "HS103" in run([".", "--select", "HS1"]).stdout
    # --no-config ignores it
    assert "HS103" in run([".", "--no-config"]).stdout
    # a nearer pyproject.toml without the section means defaults
    (files / "sub" / "pyproject.toml").write_text("[project]\nname='x'\n")
    assert "HS103" in run(["."]).stdout


def test_config_errors_exit_2(files):
    for body in ('[tool.hloshard.lint]\nselct = ["HS1"]\n', '[tool.hloshard.lint]\nfail-on = "fatal"\n',
                 '[tool.hloshard.lint]\nnum-partitions = -1\n', '[tool.hloshard.lint\n',
                 '[tool.hloshard.lint]\nselect = ["HS77"]\n'):
        (files / "pyproject.toml").write_text(body)
        result = run(["clean.hlo"])
        assert result.exit_code == 2, body
        assert "Traceback" not in result.output


def test_config_mesh_and_num_partitions(files):
    (files / "pyproject.toml").write_text('[tool.hloshard.lint]\nnum-partitions = 8\nselect = ["HS101"]\n')
    (files / "np.hlo").write_text(WARN_ONLY.replace(", num_partitions=4", ""))
    assert run(["np.hlo"]).exit_code == 1
    (files / "pyproject.toml").write_text('[tool.hloshard.lint]\nmesh = "2x2"\nselect = ["HS101"]\n')
    assert run(["np.hlo"]).exit_code == 0


def test_unreadable_only_prints_no_success_line(files):
    (files / "dangling.hlo").symlink_to(files / "nowhere.hlo")
    result = run(["dangling.hlo"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (f"hloshard: error: dangling.hlo: cannot read: No such file or directory (a symbolic link to "
                             f"{files / 'nowhere.hlo'}, which does not exist)\n")


@pytest.mark.parametrize("data,line,column,byte", [
    (b"\xff\xfeH\x00l\x00", 1, 1, 0),                       # UTF-16 with a byte-order mark
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\xa0", 1, 13, 12),   # binary
    ("HloModule m\n\nENTRY e {\n  ROOT p = f32[8] parameter(0) /* caf\u00e9 */\n}\n".encode("latin-1"),
     4, 38, 60),                                               # Latin-1 comment
])
def test_non_utf8_file_is_an_hs001_finding(files, data, line, column, byte):
    (files / "bad.hlo").write_bytes(data)
    result = run(["bad.hlo", "clean.hlo", "--format", "json"])
    assert result.exit_code == 1 and result.stderr == ""
    [finding] = json.loads(result.stdout)
    assert (finding["path"], finding["line"], finding["column"], finding["code"]) == ("bad.hlo", line, column, "HS001")
    assert finding["message"].startswith(f"not UTF-8 text (byte {byte}: ")
    assert run(["bad.hlo", "--ignore", "HS001"]).exit_code == 0


def test_empty_directory_is_an_error(files):
    (files / "emptydir").mkdir()
    (files / "emptydir" / "notes.md").write_text("x")
    result = run(["emptydir/"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "hloshard: error: no HLO files (*.hlo, *.txt) found under emptydir/\n"
    result = run(["emptydir", "clean.hlo"])                    # the rest is still linted
    assert result.exit_code == 2 and "All checks passed" in result.stdout


def test_sarif_reports_unreadable_inputs_as_notifications(files):
    import jsonschema

    from tests.conftest import require_shared

    schema = json.loads(require_shared("schemas", "sarif-schema-2.1.0.json").read_text())
    (files / "dangling.hlo").symlink_to(files / "nowhere.hlo")
    (files / "emptydir").mkdir()
    result = run(["error.hlo", "dangling.hlo", "missing.hlo", "emptydir", "--format", "sarif", "-o", "out.sarif"])
    assert result.exit_code == 2
    log = json.loads((files / "out.sarif").read_text())
    jsonschema.validate(log, schema)
    run0 = log["runs"][0]
    assert [r["ruleId"] for r in run0["results"]] == ["HS103"]
    [invocation] = run0["invocations"]
    assert invocation["executionSuccessful"] is False
    notes = invocation["toolExecutionNotifications"]
    assert [n["level"] for n in notes] == ["error"] * 3
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes] == [
        "dangling.hlo", "missing.hlo", "emptydir"]
    assert notes[1]["message"]["text"] == "missing.hlo: cannot read: No such file or directory"
    clean = json.loads(run(["clean.hlo", "--format", "sarif"]).stdout)
    jsonschema.validate(clean, schema)
    assert clean["runs"][0]["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_pre_commit_hook_definition_runs_the_linter(files):
    import re
    import shlex

    hooks = (pathlib.Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^- id: hloshard-lint$", hooks, re.M)
    entry = shlex.split(re.search(r"^  entry: (.+)$", hooks, re.M).group(1))
    files_re = re.compile(re.search(r"^  files: (.+)$", hooks, re.M).group(1))
    assert entry[0] == "hloshard" and re.search(r"^  language: python$", hooks, re.M)
    staged = [p for p in ("clean.hlo", "warn.hlo", "error.hlo", "notes.md", "dump.txt") if files_re.search(p)]
    assert staged == ["clean.hlo", "warn.hlo", "error.hlo", "dump.txt"]
    (files / "dump.txt").write_text(CLEAN)
    # pre-commit appends the staged file names to the entry
    result = CliRunner().invoke(main, entry[1:] + staged)
    assert result.exit_code == 1 and "error.hlo:4:35: HS103" in result.stdout


@pytest.mark.parametrize("body,expected", [
    (b'[tool.hloshard.lint]\nmesh = "2xq"\n',
     "[tool.hloshard.lint] mesh = '2xq' is invalid: expected axis sizes separated by 'x'"),
    (b'[tool.hloshard.lint]\nmesh = "0x2"\n', "[tool.hloshard.lint] mesh = '0x2' is invalid: axis sizes must be positive"),
    (b'[tool.hloshard.lint]\nreshard-threshold = "lots"\n',
     "[tool.hloshard.lint] reshard-threshold = 'lots' is invalid: expected an integer or a size"),
    (b"# caf\xe9\n[tool.hloshard.lint]\n", "not UTF-8 text (byte 5: invalid continuation byte)"),
])
def test_bad_config_names_file_and_key(files, body, expected):
    (files / "pyproject.toml").write_bytes(body)
    result = run(["clean.hlo"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"hloshard: error: {files / 'pyproject.toml'}: "), result.stderr
    assert expected in result.stderr
    assert run(["clean.hlo", "--no-config"]).exit_code == 0


def test_stdin_and_crlf_files_read_like_text_mode(files):
    (files / "crlf.hlo").write_bytes(ERROR.replace("\n", "\r\n").encode())
    lf = json.loads(run(["error.hlo", "--format", "json"]).stdout)
    crlf = json.loads(run(["crlf.hlo", "--format", "json"]).stdout)
    assert [(d["line"], d["column"], d["code"]) for d in crlf] == [(d["line"], d["column"], d["code"]) for d in lf]
    result = CliRunner().invoke(main, ["lint", "-", "--format", "json"], input=b"\xff\xfe")
    assert result.exit_code == 1
    assert [(d["path"], d["line"], d["code"]) for d in json.loads(result.stdout)] == [("<stdin>", 1, "HS001")]
