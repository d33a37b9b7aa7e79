"""Run the lint rules over HLO files.

Per file: read the text, scan its ``sharding=`` attributes and suppression comments
(:mod:`hloshard.lint.source`), blank out shardings whose tile assignment cannot be built (so that the
parser accepts the rest, positions unchanged), parse, then run every selected rule and drop the
findings a ``/* hloshard: ignore[CODE] */`` comment suppresses. A file that does not parse gives an
HS001 finding (plus the text-only rules' findings); the other files are still linted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import HloSyntaxError, UsageError
from .context import LintContext, LintOptions
from .registry import select_rules
from .rule import SEVERITY_RANK, Finding, Rule
from .source import sanitize, scan

#: file name suffixes linted when a directory is given
LINT_SUFFIXES = (".hlo", ".txt")


@dataclass
class LintResult:
    """Findings of a run (sorted by path, line, column, code), the files linted, and the inputs that
    could not be read (``path: reason``)."""

    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def exit_code(self, fail_on: str) -> int:
        """2 when an input could not be read, 1 when a finding is at or above ``fail_on``, else 0."""
        if self.unreadable:
            return 2
        return 1 if failing(self.findings, fail_on) else 0


def failing(findings: Iterable[Finding], fail_on: str) -> bool:
    limit = SEVERITY_RANK[fail_on]
    return any(SEVERITY_RANK[f.severity] <= limit for f in findings)


def _parse(text: str, path: str):
    from ..hlo import parse_module

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


def collect_paths(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """Expand the command-line paths: files as given; directories recursively, keeping ``*.hlo``
    and ``*.txt`` files, skipping hidden directories, sorted. Returns (files, unreadable messages)."""
    files: list[str] = []
    missing: list[str] = []
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
            files.extend(sorted(found))
        elif os.path.exists(p):
            files.append(p)
        else:
            missing.append(f"{p}: no such file or directory")
    # keep the first occurrence of each file
    unique = list(dict.fromkeys(files))
    return unique, missing


def lint_paths(paths: Sequence[str], options: LintOptions | None = None) -> LintResult:
    """Lint files and directories (directories: every ``*.hlo`` / ``*.txt`` below, sorted; ``-``
    reads standard input). Inputs that are missing or cannot be read as UTF-8 are recorded in
    ``LintResult.unreadable`` (the CLI exits 2) and the rest are linted. Raises UsageError for a
    bad rule selection."""
    from ..io import read_text

    options = options or LintOptions()
    rules = select_rules(options.select, options.ignore)
    files, unreadable = collect_paths(paths)
    result = LintResult(unreadable=unreadable)
    for path in files:
        try:
            text = read_text(path)
        except UsageError as exc:
            result.unreadable.append(str(exc))
            continue
        result.files.append(path)
        result.findings.extend(lint_text(text, "<stdin>" if path == "-" else path, options, rules))
    result.findings.sort(key=Finding.sort_key)
    return result
