"""Output formats of ``hloshard lint``: text, json, sarif (2.1.0) and github (workflow commands).

Every reporter is a pure function ``findings -> str`` (deterministic: findings come sorted; the
text reporter's colors are only added when asked for).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
from typing import Sequence
from urllib.parse import quote

from .. import __version__
from .rule import SEVERITY_RANK, Finding, Rule

FORMATS = ("text", "json", "sarif", "github")

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}
_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _summary(findings: Sequence[Finding], files: int) -> str:
    if not findings:
        return f"All checks passed ({files} file{'s' if files != 1 else ''})."
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITY_RANK}
    parts = ", ".join(f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in counts.items() if n)
    return f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} ({parts}) in {files} file{'s' if files != 1 else ''}."


def render_text(findings: Sequence[Finding], files: int = 1, color: bool = False) -> str:
    """``path:line:col: CODE message`` per finding, then a summary line. With ``color`` the code is
    colored by severity (rich markup rendered for a terminal)."""
    if not color:
        lines = [f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}" for f in findings]
        lines.append(_summary(findings, files))
        return "\n".join(lines) + "\n"
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="standard", width=100_000,
                      highlight=False, soft_wrap=True)
    for f in findings:
        t = Text()
        t.append(f"{f.path}:{f.line}:{f.column}:", style="bold")
        t.append(" ")
        t.append(f.code, style=_STYLE[f.severity])
        t.append(f" {f.message}")
        console.print(t)
    console.print(Text(_summary(findings, files), style="bold"))
    return buf.getvalue()


def render_json(findings: Sequence[Finding]) -> str:
    """A JSON list of ``{path, line, column, code, name, severity, message}``."""
    return json.dumps([f.to_json() for f in findings], indent=2) + "\n"


# ------------------------------------------------------------------------------------------------
# SARIF
# ------------------------------------------------------------------------------------------------
def _uri(path: str) -> tuple[str, bool]:
    """(uri, relative?) of a finding path: relative paths stay relative (posix, percent-encoded)
    and are resolved against %SRCROOT%; absolute ones become file:// URIs."""
    p = pathlib.Path(path)
    if p.is_absolute():
        try:
            rel = p.relative_to(pathlib.Path(os.getcwd()))
            return quote(rel.as_posix()), True
        except ValueError:
            return p.as_uri(), False
    return quote(pathlib.PurePath(path).as_posix()), True


def fingerprint(f: Finding) -> str:
    """Position-independent fingerprint: sha256 of code, path and the finding's key (instruction,
    computation, which part), so a finding keeps its identity when lines move."""
    text = f"{f.code}|{pathlib.PurePath(f.path).as_posix()}|{f.key or f.message}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _rule_descriptor(rule: type[Rule]) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": rule.explanation()},
        "help": {"text": rule.explanation(), "markdown": rule.explanation()},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {"tags": list(rule.groups)},
    }


def _artifact(path: str) -> dict:
    uri, relative = _uri(path)
    artifact = {"uri": uri}
    if relative:
        artifact["uriBaseId"] = "%SRCROOT%"
    return artifact


def render_sarif(findings: Sequence[Finding], rules: Sequence[type[Rule]],
                 unreadable: Sequence[tuple[str, str]] = ()) -> str:
    """A SARIF 2.1.0 log: one run, the rules' metadata in ``tool.driver.rules``, one result per
    finding with one physical location and a stable ``partialFingerprints`` entry.

    ``unreadable`` lists the inputs that could not be read as ``(path, message)``: each becomes an
    error-level ``toolExecutionNotification`` of ``invocations[0]`` located at the path, and
    ``executionSuccessful`` is then false (a code-scanning upload must not read the run as clean).
    """
    rules = sorted({r.code: r for r in rules}.values(), key=lambda r: r.code)
    index = {r.code: i for i, r in enumerate(rules)}
    seen: dict[str, int] = {}
    results = []
    for f in findings:
        fp = fingerprint(f)
        n = seen.get(fp, 0)
        seen[fp] = n + 1
        if n:
            fp = f"{fp}:{n}"
        artifact = _artifact(f.path)
        result = {
            "ruleId": f.code,
            "level": SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": {"startLine": max(1, f.line), "startColumn": max(1, f.column)},
                },
            }],
            "partialFingerprints": {"hloshardFinding/v1": fp},
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "hloshard",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule_descriptor(r) for r in rules],
            }},
            "invocations": [{
                "executionSuccessful": not unreadable,
                "toolExecutionNotifications": [{
                    "level": "error",
                    "message": {"text": message},
                    "locations": [{"physicalLocation": {"artifactLocation": _artifact(path)}}],
                } for path, message in unreadable],
            }],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"


# ------------------------------------------------------------------------------------------------
# GitHub workflow commands
# ------------------------------------------------------------------------------------------------
def escape_data(text: str) -> str:
    """Escape a workflow-command message: ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow-command property value: as :func:`escape_data`, plus ``:`` -> ``%3A`` and
    ``,`` -> ``%2C``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding]) -> str:
    """``::error file=..,line=..,col=..,title=CODE::message`` per finding (``warning``/``notice``
    for the other severities), errors first, then warnings, then notices."""
    ordered = sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity],) + f.sort_key())
    lines = []
    for f in ordered:
        props = (f"file={escape_property(pathlib.PurePath(f.path).as_posix())},line={max(1, f.line)},"
                 f"col={max(1, f.column)},title={escape_property(f.code)}")
        lines.append(f"::{GITHUB_LEVEL[f.severity]} {props}::{escape_data(f'{f.message} [{f.name}]')}")
    return "\n".join(lines) + ("\n" if lines else "")


def render(fmt: str, findings: Sequence[Finding], rules: Sequence[type[Rule]], files: int = 1,
           color: bool = False, unreadable: Sequence[tuple[str, str]] = ()) -> str:
    """Dispatch on ``fmt`` (one of FORMATS); ``unreadable`` ((path, message) pairs) is reported by
    the SARIF format only (the other formats leave it to the CLI's stderr messages)."""
    if fmt == "text":
        return render_text(findings, files, color)
    if fmt == "json":
        return render_json(findings)
    if fmt == "sarif":
        return render_sarif(findings, rules, unreadable)
    if fmt == "github":
        return render_github(findings)
    raise ValueError(f"unknown format {fmt!r}")
