"""Error types shared by every layer.

Every error a user can cause derives from :class:`HloshardError`; the CLI prints its ``str()`` in one
short block and exits with ``exit_code`` (2 for usage / input errors), never with a traceback.
"""

from __future__ import annotations


class HloshardError(Exception):
    """Base class of all user-facing errors. ``exit_code`` is what the CLI exits with.

    ``filename``, ``line`` and ``column`` (1-based; 0 = unknown) locate the error when known: the
    CLI prints ``FILE:LINE:COL: error: MESSAGE`` then (:func:`format_error`). Set them with the
    keyword arguments or later with :meth:`locate`.
    """

    exit_code = 2

    def __init__(self, *args, filename: str | None = None, line: int = 0, column: int = 0):
        super().__init__(*args)
        self.filename = filename
        self.line = line
        self.column = column

    def locate(self, filename: str | None, line: int = 0, column: int = 0) -> "HloshardError":
        """Record where the error is (keeps an existing, more precise location). Returns self."""
        if getattr(self, "filename", None) is None:
            self.filename = filename
        if not getattr(self, "line", 0) and line:
            self.line, self.column = line, column
        return self


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
        Exception.__init__(self, self._format())

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
        # a control character (NUL, ESC, ...) echoed to a terminal is not shown as itself: '?' in its place, one
        # column, so the caret stays under it (round 30's fresh-clone check: 200 raw NULs written to stderr)
        text = "".join(ch if ch == "\t" or ch.isprintable() else "?" for ch in text)
        return f"{head}\n  {text}\n  {' ' * caret}^"


class SolveFailed(HloshardError):
    """The solver found no feasible solution (infeasible memory budget, or time limit before any
    solution). Exit code 3."""

    exit_code = 3


def format_error(exc: HloshardError) -> str:
    """The one error style of the CLI.

    ``FILE:LINE:COL: error: MESSAGE`` when the location is known (an :class:`HloSyntaxError` adds
    the offending line and a caret), ``hloshard: error: FILE: MESSAGE`` when only the file is known,
    ``hloshard: error: MESSAGE`` otherwise.
    """
    if isinstance(exc, HloSyntaxError):
        return str(exc)
    text = str(exc)
    filename = getattr(exc, "filename", None)
    line = getattr(exc, "line", 0) or 0
    if filename and line:
        return f"{filename}:{line}:{getattr(exc, 'column', 0) or 1}: error: {text}"
    import re

    located = re.match(r"^([^\s:][^:]*):(\d+):(\d+): (?!error: )(.*)$", text, re.S)
    if located:  # a message that already starts with FILE:LINE:COL (the verifier's): the same style
        return f"{located.group(1)}:{located.group(2)}:{located.group(3)}: error: {located.group(4)}"
    if filename and not text.startswith(f"{filename}:") and not text.startswith(f"{filename} "):
        return f"hloshard: error: {filename}: {text}"
    return f"hloshard: error: {text}"


_NAMED = None  # compiled on first use


def locate_in_module(exc: HloshardError, filename: str | None, module=None) -> HloshardError:
    """Give ``exc`` the file it is about and, when its message starts with an instruction name of
    ``module`` (``NAME: ...`` or ``NAME (line N): ...``, the form the cost-graph builder uses), that
    instruction's line and column.  Returns ``exc``."""
    import re

    global _NAMED
    if isinstance(exc, HloSyntaxError):
        return exc
    if getattr(exc, "line", 0):  # located at raise (e.g. the sharding validity rule): add the file
        return exc.locate(filename)
    if module is not None and not getattr(exc, "line", 0):
        if _NAMED is None:
            _NAMED = re.compile(r"^%?([A-Za-z_][\w.\-]*)(?: \(line (\d+)\))?: ")
        m = _NAMED.match(str(exc))
        if m:
            instr = _find_instruction(module, m.group(1))
            if instr is not None and getattr(instr, "line", 0):
                exc.locate(filename, instr.line, getattr(instr, "column", 0) or 1)
                if m.group(2):  # the location moves to the front: drop the "(line N)"
                    rest = str(exc)[m.end():]
                    exc.args = (f"{m.group(1)}: {rest}",)
    return exc.locate(filename)


def _find_instruction(module, name: str):
    for comp in getattr(module, "computations", ()):
        for instr in comp.instructions:
            if instr.name == name or instr.name.lstrip("%") == name:
                return instr
    return None
