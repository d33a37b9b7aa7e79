"""Error types shared by every layer.

Every error a user can cause derives from :class:`HloshardError`; the CLI prints its ``str()`` in one
short block and exits with ``exit_code`` (2 for usage / input errors), never with a traceback.
"""

from __future__ import annotations


class HloshardError(Exception):
    """Base class of all user-facing errors. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class UsageError(HloshardError):
    """Bad command-line arguments or options (unknown mesh spec, bad byte size, ...). Exit code 2."""


class InputError(HloshardError):
    """Input that parses but does not make sense (shape/sharding mismatch, unknown instruction ...). Exit 2."""


class HloSyntaxError(HloshardError):
    """Malformed HLO text (or a semantic error the parser can see).

    Attributes: ``filename``, ``line`` and ``column`` (1-based), ``message`` (what was expected),
    ``source_line`` (the offending line of text, without newline) or None.
    ``str()`` gives ``file:line:col: message`` followed by the offending line and a caret.
    """

    def __init__(self, message: str, filename: str = "<string>", line: int = 0, column: int = 0,
                 source_line: str | None = None):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"{self.filename}:{self.line}:{self.column}: error: {self.message}"
        if self.source_line is None:
            return head
        text = self.source_line.rstrip("\n")
        if len(text) > 200:  # keep the block short for huge one-line constants
            start = max(0, self.column - 100)
            text = text[start:start + 200]
            caret = max(0, self.column - 1 - start)
        else:
            caret = max(0, self.column - 1)
        return f"{head}\n  {text}\n  {' ' * caret}^"


class SolveFailed(HloshardError):
    """The solver found no feasible solution (infeasible memory budget, or time limit before any
    solution). Exit code 3."""

    exit_code = 3
