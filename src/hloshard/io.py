"""File input/output helpers: atomic writes, reading text with clear errors."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from .errors import UsageError


#: Largest input hloshard reads (bytes): a bigger (or endless, like /dev/zero) input is a usage error,
#: not a hang. Parsing needs a few times the text's size in memory. Override with the environment
#: variable HLOSHARD_MAX_INPUT_BYTES.
MAX_INPUT_BYTES = 512 * 2**20


def max_input_bytes() -> int:
    try:
        return int(os.environ.get("HLOSHARD_MAX_INPUT_BYTES", MAX_INPUT_BYTES))
    except ValueError:
        return MAX_INPUT_BYTES


def read_limited(fh, name: str, limit: int | None = None) -> bytes:
    """Read a binary stream to its end, at most ``limit`` bytes (default :func:`max_input_bytes`).

    Raises UsageError when the stream holds more (an endless device such as /dev/zero included).
    """
    limit = max_input_bytes() if limit is None else limit
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{name}: input larger than {limit:,} bytes (set HLOSHARD_MAX_INPUT_BYTES to raise the limit)")
    return data


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """Read a file (``-``: standard input) as bytes, at most ``limit`` bytes (see :func:`read_limited`).

    Raises UsageError when it cannot be read or is too large.
    """
    if path == "-":
        return read_limited(sys.stdin.buffer, "<stdin>", limit)
    try:
        with open(path, "rb") as fh:
            return read_limited(fh, path, limit)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


def read_text(path: str) -> str:
    """Read a UTF-8 text file; ``-`` reads standard input. Line endings are normalised to ``\\n``.

    Raises UsageError (exit 2) when the file cannot be read, is larger than :func:`max_input_bytes`,
    or is not UTF-8 text.
    """
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


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
