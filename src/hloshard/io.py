"""File input/output helpers: atomic writes, reading text with clear errors."""

from __future__ import annotations

import os
import sys
import tempfile

from .errors import UsageError


def read_text(path: str) -> str:
    """Read a UTF-8 text file; ``-`` reads standard input.

    Raises UsageError (exit 2) when the file cannot be read.
    """
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror if isinstance(exc, OSError) else exc}") from None


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same directory, then rename);
    ``-`` writes to standard output. Never leaves a partial file behind.

    Raises UsageError when the directory is not writable.
    """
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hloshard-", dir=directory)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
