"""Run the lint rules over HLO files.

Per file: read the text, scan its ``sharding=`` attributes and suppression comments
(:mod:`hloshard.lint.source`), blank out shardings whose tile assignment cannot be built (so that the
parser accepts the rest, positions unchanged), parse, then run every selected rule and drop the
findings a ``/* hloshard: ignore[CODE] */`` comment suppresses. A file that does not parse gives an
HS001 finding (plus the text-only rules' findings); the other files are still linted.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import HloSyntaxError, UsageError
from ..io import binary_kind, read_limited, undecodable_position, unreadable_reason
from .context import LintContext, LintOptions
from .registry import select_rules
from .rule import SEVERITY_RANK, Finding, Rule
from .source import sanitize, scan
from ..hlo import parse_module
from .rules.hs001_syntax_error import SyntaxErrorRule

#: file name suffixes linted when a directory is given
LINT_SUFFIXES = (".hlo", ".txt")


@dataclass
class LintResult:
    """Findings of a run (sorted by path, line, column, code), the files linted, and the inputs that
    could not be read: ``unreadable`` holds the messages (``path: reason``), ``unreadable_inputs``
    the same as ``(path, message)`` pairs (the SARIF reporter's tool execution notifications)."""

    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    unreadable_inputs: list[tuple[str, str]] = field(default_factory=list)

    def add_unreadable(self, path: str, reason: str, message: str | None = None) -> None:
        """Record an input that could not be read (or a path naming no HLO file); ``message``
        defaults to ``path: reason``."""
        message = message or f"{path}: {reason}"
        self.unreadable.append(message)
        self.unreadable_inputs.append((path, message))

    def exit_code(self, fail_on: str) -> int:
        """2 when an input could not be read, 1 when a finding is at or above ``fail_on``, else 0."""
        if self.unreadable:
            return 2
        return 1 if failing(self.findings, fail_on) else 0


def failing(findings: Iterable[Finding], fail_on: str) -> bool:
    limit = SEVERITY_RANK[fail_on]
    return any(SEVERITY_RANK[f.severity] <= limit for f in findings)


def _parse(text: str, path: str):
    try:
        return parse_module(text, path), None
    except HloSyntaxError as exc:
        return None, exc
    except RecursionError:
        return None, HloSyntaxError("input nested too deeply", path, 1, 1)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not crash a CI lint run
        return None, HloSyntaxError(f"the HLO parser failed unexpectedly ({type(exc).__name__}: {exc}); "
                                    f"please report this", path, 1, 1)


def build_context(text: str, path: str, options: LintOptions) -> LintContext:
    """Scan, sanitize and parse one file's text into a :class:`LintContext` (never raises on bad
    HLO: the syntax error is kept on the context)."""
    source = scan(text)
    # shardings the parser refused: blanked and the file parsed again (identical sharding texts are
    # blanked together, so a dump that repeats one bad sharding is re-parsed once, not per use)
    rejected: dict[str, object] = {}
    while True:
        extra = [s for s in source.sites if s.text in rejected] if rejected else []
        module, error = _parse(sanitize(text, source.sites, extra), path)
        if error is None or len(rejected) >= MAX_SHARDING_RETRIES:
            break
        site = _site_at(source, error)
        if (site is None or not site.spec.structurally_valid or site.text in rejected
                or site.value_end - site.value_start < len("{unknown}")):
            break
        rejected[site.text] = error
    context = LintContext(path, source, module, error, options)
    context.rejected_shardings = [(s, rejected[s.text]) for s in source.sites if s.text in rejected]
    return context


#: how many distinct sharding texts the parser may reject (each is blanked and the file re-parsed)
#: before the file is reported as one syntax error
MAX_SHARDING_RETRIES = 16


def _site_at(source, error):
    """The sharding site whose ``{...}`` value contains the error position, or None."""
    if not error.line:
        return None
    offset = source.offset(error.line, error.column)
    for site in source.sites:
        if site.value_start <= offset < site.value_end:
            return site
    return None


def lint_text(text: str, path: str = "<string>", options: LintOptions | None = None,
              rules: Sequence[type[Rule]] | None = None) -> list[Finding]:
    """Lint one file's text (``path`` is only used in the findings).

    ``rules`` defaults to the options' selection. Returns the unsuppressed findings sorted by
    (line, column, code); bad HLO gives HS001 findings, never an exception. Raises UsageError only
    for a bad selection in ``options`` (unknown rule code or prefix).
    """
    options = options or LintOptions()
    if rules is None:
        rules = select_rules(options.select, options.ignore)
    context = build_context(text, path, options)
    out: list[Finding] = []
    seen: set[tuple] = set()
    for rule_cls in rules:
        if context.module is None and not rule_cls.text_only:
            continue
        for f in rule_cls().evaluate(context):
            if context.is_suppressed(f.code, f.line, f.anchor if f.anchor is not None else (f.line, f.column)):
                continue
            ident = (f.line, f.column, f.code, f.message)
            if ident not in seen:
                seen.add(ident)
                out.append(f)
    out.sort(key=Finding.sort_key)
    return out


def collect_paths(paths: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Expand the command-line paths: files as given; directories recursively, keeping ``*.hlo``
    and ``*.txt`` files, skipping hidden directories, sorted, each file once. Returns (files,
    problems as ``(path, reason)``): a path that does not exist, or a directory holding no HLO
    file. ``lint_paths(..., collected=)`` takes the pair, so a caller that needs the file list
    first (the CLI's output check) walks the directories once."""
    return _collect(paths)


def _message(path: str, reason: str) -> str:
    """``path: reason``, or the reason alone when it names the path already."""
    return reason if reason.endswith(f" {path}") else f"{path}: {reason}"


def _collect(paths: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    files: list[str] = []
    problems: list[tuple[str, str]] = []
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            found = []
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in names:
                    if n.endswith(LINT_SUFFIXES) and not n.startswith("."):
                        found.append(os.path.normpath(os.path.join(root, n)))
            if not found:  # a wrong path in CI must not pass silently
                problems.append((p, f"no HLO files ({', '.join('*' + s for s in LINT_SUFFIXES)}) found under {p}"))
            files.extend(sorted(found))
        elif os.path.exists(p):
            files.append(p)
        else:   # missing, or a dangling link: the message every command gives (hloshard.io.cannot_read)
            problems.append((p, unreadable_reason(p)))
    # keep the first occurrence of each file
    unique = list(dict.fromkeys(files))
    return unique, problems


def _read(path: str) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``hloshard.io.max_input_bytes()``;
    raises OSError, or UsageError for a larger (or endless) input."""
    if path == "-":
        return read_limited(sys.stdin.buffer, "<stdin>")
    with open(path, "rb") as fh:
        return read_limited(fh, path)


def undecodable_finding(path: str, data: bytes, exc: UnicodeDecodeError) -> Finding:
    """The HS001 finding for a file that is not UTF-8 text (binary, UTF-16, Latin-1 ...): at the
    line and column of the first byte that does not decode (line 1, column 1 for a UTF-16 byte-order
    mark or most binary files)."""

    line, column = undecodable_position(data, exc)
    kind = binary_kind(data, path)   # the CLI's read_text names it the same way (new user 36 F9)
    message = f"not UTF-8 text (byte {exc.start}: {exc.reason}); " + (
        f"this looks like {kind}" if kind else "HLO text files are UTF-8")
    rule = SyntaxErrorRule
    return Finding(path, line, column, rule.code, rule.name, rule.severity, message, key="not-utf-8")


def lint_paths(paths: Sequence[str], options: LintOptions | None = None, *,
               collected: tuple[list[str], list[tuple[str, str]]] | None = None) -> LintResult:
    """Lint files and directories (directories: every ``*.hlo`` / ``*.txt`` below, sorted; ``-``
    reads standard input). Inputs that are missing or cannot be opened, and directories holding no
    HLO file, are recorded in ``LintResult.unreadable`` (the CLI exits 2) and the rest are linted.
    A file that is not UTF-8 text is linted: it gives one HS001 finding (when HS001 is selected).
    ``collected``: ``collect_paths(paths)``'s answer when the caller has it already.
    Raises UsageError for a bad rule selection."""
    options = options or LintOptions()
    rules = select_rules(options.select, options.ignore)
    files, problems = collected if collected is not None else _collect(paths)
    result = LintResult()
    for path, reason in problems:
        result.add_unreadable(path, reason, _message(path, reason))
    for path in files:
        try:
            data = _read(path)
        except OSError as exc:
            result.add_unreadable(path, unreadable_reason(path, exc))
            continue
        except UsageError as exc:
            result.add_unreadable(path, str(exc).split(": ", 1)[-1])
            continue
        shown = "<stdin>" if path == "-" else path
        result.files.append(path)
        try:
            # universal newlines, as text-mode reading (hloshard.io.read_text) gives
            text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        except UnicodeDecodeError as exc:
            if any(r.code == "HS001" for r in rules):
                result.findings.append(undecodable_finding(shown, data, exc))
            continue
        result.findings.extend(lint_text(text, shown, options, rules))
    result.findings.sort(key=Finding.sort_key)
    return result
