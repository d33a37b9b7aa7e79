"""Base types of the linter: severities, findings and the :class:`Rule` base class.

A rule is a class (one per module under ``hloshard/lint/rules/``) whose metadata are class
attributes and whose docstring is the user-facing explanation (``hloshard lint --explain CODE``)::

    class DeviceCountMismatch(Rule):
        '''One-paragraph rationale.

        **Bad**::

            ...

        **Good**::

            ...
        '''
        code = "HS101"
        name = "device-count-mismatch"
        severity = "error"
        groups = ("validity",)

        def evaluate(self, context):
            yield self.finding(context, instr_or_position, "message")
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from .context import LintContext

#: severities from most to least severe; ``--fail-on X`` fails on X and everything before it
SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True, order=False)
class Finding:
    """One problem found in one file.

    ``line``/``column`` are 1-based (0 when the position is unknown). ``key`` identifies the finding
    independently of its position (the instruction name, computation, and which part of it), so that
    SARIF ``partialFingerprints`` stay stable when lines move. ``instruction`` is the name of the
    instruction the finding is about, or None.
    """

    path: str
    line: int
    column: int
    code: str
    name: str
    severity: str
    message: str
    key: str = ""
    instruction: str | None = field(default=None, compare=False)
    #: what the finding was reported on (Instruction, ShardingSite or (line, column)); for suppression
    anchor: object = field(default=None, compare=False, repr=False)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)

    def to_json(self) -> dict:
        """The JSON reporter's record: path, line, column, code, name, severity, message."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
        }


class Rule:
    """Base class of every lint rule.

    Subclasses set ``code`` (``HS`` + three digits; the hundreds digit is the group: 0 syntax,
    1 validity, 2 divisibility, 3 collectives, 4 cost, 5 consistency), ``name`` (kebab-case),
    ``severity`` (``error`` | ``warning`` | ``info``) and ``groups``, write the docstring
    (rationale + **Bad**/**Good** examples) and implement :meth:`evaluate`.
    """

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[str] = "error"
    groups: ClassVar[tuple[str, ...]] = ()
    #: True when the rule only needs the source text (it also runs on files that do not parse)
    text_only: ClassVar[bool] = False

    def evaluate(self, context: "LintContext") -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------------
    def finding(self, context: "LintContext", where, message: str, key: str = "",
                severity: str | None = None) -> Finding:
        """Build a finding of this rule.

        ``where`` is an :class:`~hloshard.hlo.ir.Instruction` (its line/column), a
        :class:`~hloshard.lint.source.ShardingSite` (the position of its ``sharding=``), or a
        ``(line, column)`` pair. ``key`` (optional) is appended to the fingerprint key. ``severity``
        (optional) lowers this one finding below the rule's :attr:`severity` (a rule whose findings
        differ in consequence, e.g. HS202 on an entry argument vs an intermediate); the rule's own
        severity stays the SARIF ``defaultConfiguration`` level.
        """
        line, column, instr_name, base_key = context.locate(where)
        return Finding(
            path=context.path,
            line=line,
            column=column,
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            key=f"{base_key}|{key}" if key else base_key,
            instruction=instr_name,
            anchor=where,
        )

    @classmethod
    def summary(cls) -> str:
        """First line of the docstring (used by ``--list-rules`` and SARIF shortDescription)."""
        doc = inspect.getdoc(cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else cls.name

    @classmethod
    def explanation(cls) -> str:
        """The full dedented docstring (``--explain``, SARIF fullDescription/help)."""
        return (inspect.getdoc(cls) or cls.name).strip()
