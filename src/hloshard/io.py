"""File input/output helpers: atomic writes, reading text with clear errors."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from .errors import UsageError


def read_text(path: str) -> str:
    """Read a UTF-8 text file; ``-`` reads standard input.

    Raises UsageError (exit 2) when the file cannot be read or is not UTF-8 text.
    """
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _target_mode(path: str) -> int:
    """Permission bits the written file gets: those of the file it replaces, else 0666 less the umask
    (what ``open(path, 'w')`` would give)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``-`` writes to standard output.
    See :func:`write_bytes_atomic` for the guarantees and errors."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, then rename);
    ``-`` writes to standard output. Never leaves a partial file behind. A symbolic link is followed
    (its target is replaced, the link kept); the file keeps the permissions of the one it replaces, or
    gets the usual umask-based ones when new.

    Raises UsageError when the path is a directory or its directory is not writable.
    """
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise UsageError(f"{path}: is a directory; give a file path for the output")
    directory = os.path.dirname(real)
    mode = _target_mode(real)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hloshard-", dir=directory)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
        raise
