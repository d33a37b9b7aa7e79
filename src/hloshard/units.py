"""Byte sizes on the command line: plain integers or IEC/SI suffixes (``64MiB``, ``1.5GB``)."""

from __future__ import annotations

import re

from .errors import UsageError

_UNITS = {
    "": 1, "b": 1,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str) -> int:
    """Parse a byte size: ``1048576``, ``64MiB``, ``2GiB``, ``1.5GB`` (IEC suffixes are powers of two,
    SI suffixes powers of ten, bare K/M/G/T powers of two). Returns bytes (int).

    Raises UsageError on anything else (negative, unknown suffix, empty).
    """
    m = _RE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"invalid byte size {text!r}: expected an integer or a size like 64MiB, 2GiB, 1.5GB")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    return int(round(value))


def format_bytes(n: float) -> str:
    """Human-readable IEC size, e.g. ``125.0 MiB`` (for display only)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
