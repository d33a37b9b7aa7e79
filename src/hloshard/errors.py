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


#: a glog fatal line (``F1207 22:25:27.848348   19979 array.h:543] Check failed: ...``): XLA's C++ CHECK
_GLOG_FATAL = None
#: a frame of the CHECK's stack that names the XLA pass it ran in (``xla::ShardingPropagation::RunImpl()``)
_PASS_FRAME = None


def child_failure(stderr: str | None, returncode: int) -> str:
    """What a child process that failed (``returncode`` != 0) said, in one line, from its ``stderr``: a C++
    CHECK that aborted XLA as ``XLA aborted (a C++ CHECK at FILE:LINE, in xla::PASS::...): Check failed: ...`` --
    its stack trace's addresses left out (new user 36 F5: ``cost --xla`` said only ``@ 0x7f4ebf0a71f5
    (unknown)``, the trace's last line) --, a Python error as its last line (``ValueError: ...``), else the last
    line that is not a stack frame, else the signal or exit code.  Used for every jax / XLA child
    (:func:`hloshard.xla_check.run_jax_child`, :func:`hloshard.xla_cost.tpu_cost`)."""
    import re

    global _GLOG_FATAL, _PASS_FRAME
    if _GLOG_FATAL is None:
        _GLOG_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ ([\w.\-]+:\d+)\] (.*\S)")
        _PASS_FRAME = re.compile(r"@\s+0x[0-9a-f]+\s+(xla::(?:\w+::)*\w*(?:Propagation|Partition|Pass|Visitor|"
                                 r"Verifier|Normalizer|Expander|Simplifier)\w*::\w+)")
    lines = [ln.rstrip() for ln in (stderr or "").splitlines() if ln.strip()]
    signal = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    for k, ln in enumerate(lines):
        m = _GLOG_FATAL.match(ln.strip())
        if m:
            where = next((f.group(1) for f in map(_PASS_FRAME.search, lines[k + 1:]) if f), None)
            return (f"XLA aborted the child process on a C++ CHECK at {m.group(1)}"
                    + (f", in {where}" if where else "") + f": {m.group(2)}")
    rest = [ln for ln in lines if not re.match(r"^\s*(@\s+0x|\*\*\* |File \"|Current thread|Thread 0x|"
                                                r"Fatal Python error|Extension modules:)", ln)]
    if rest:
        return rest[-1].strip()
    return signal
