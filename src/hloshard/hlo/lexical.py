"""Lexical helpers and limits shared by the attribute decoders (:mod:`.attributes`) and HloSharding's
parser (:mod:`.sharding`); below both, so that neither imports the other for them.

    MAX_DEVICES                         # most device ids an iota / mesh form may expand to
    brace_block_end(text, start) -> int # index just past the ``}`` matching ``text[start] == '{'``
"""

from __future__ import annotations

__all__ = ["MAX_DEVICES", "brace_block_end"]

#: Most device ids an iota / mesh form (replica groups, tile assignment) may expand to. The forms are
#: a few characters long but name ``prod(dims)`` devices, so untrusted text could otherwise ask for
#: terabytes; real meshes have at most tens of thousands of devices.
MAX_DEVICES = 1_000_000


def brace_block_end(text: str, start: int) -> int:
    """Index just past the ``}`` that closes the ``{`` at ``text[start]``; double-quoted strings (with
    backslash escapes) are skipped. Raises ValueError("unterminated string") or
    ValueError("unbalanced braces")."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                raise ValueError("unterminated string")
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced braces")
