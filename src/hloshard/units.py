"""Byte sizes on the command line: plain integers or IEC/SI suffixes (``64MiB``, ``1.5GB``; :data:`UNIT_RULE`)."""

from __future__ import annotations

import math
import re

from .errors import UsageError

#: One rule for every byte size hloshard reads (new user 37 F7: ``5mb`` was 5,000,000 B and ``5m`` 5 MiB): a unit
#: with an ``i`` is a power of 1024 (IEC: KiB, MiB, GiB ..., or Ki, Mi, Gi ...), any other a power of 1000 (SI:
#: kB, MB, GB ..., or k, M, G ...), whatever the case -- as hloshard's own figures write MB (10**6) and MiB (2**20).
#: :data:`UNIT_RULE` says it in words, for ``--help`` and errors.
_UNITS = {"": 1, "b": 1}
for _k, _p in (("k", 1), ("m", 2), ("g", 3), ("t", 4), ("p", 5), ("e", 6)):
    _UNITS.update({_k: 1000 ** _p, _k + "b": 1000 ** _p, _k + "i": 1024 ** _p, _k + "ib": 1024 ** _p})

#: the unit rule in words (``--memory-budget`` / ``--bucket-bytes`` help, the unknown-unit error)
UNIT_RULE = ("KiB, MiB, GiB, TiB (or Ki, Mi, Gi, Ti) are powers of 1024; kB, MB, GB, TB (or k, M, G, T) powers "
             "of 1000; case is ignored, so 5mb = 5M = 5,000,000 B and 5MiB = 5Mi = 5,242,880 B")
_RE = re.compile(r"^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str) -> int:
    """Parse a byte size: ``1048576``, ``64MiB``, ``2GiB``, ``1.5GB``, ``1e9``, by one rule (:data:`UNIT_RULE`): a
    unit with an ``i`` is a power of 1024, any other a power of 1000, in any case (``5mb`` = ``5M`` = 5,000,000;
    until round 38 a bare ``5m`` was 5 MiB). Returns bytes (int).

    Raises UsageError on anything else (unknown suffix, empty), on a negative size, on a fraction of a
    byte (``1.5``, ``1.5B``: a whole number of bytes or a unit, ``1.5GiB``), and on one of 2**63 bytes
    (8 EiB) or more, which no device holds.
    """
    expected = f"invalid byte size {text!r}: expected an integer or a size like 64MiB, 2GiB, 1.5GB"
    neg = re.match(r"^\s*-(.*)$", str(text))
    if neg:   # a minus sign: -0 is zero, any other size is negative
        m = _RE.match(neg.group(1))
        if m is None:
            raise UsageError(expected)
        if float(m.group(1)) != 0.0:
            raise UsageError(f"invalid byte size {text!r}: negative")
        text = neg.group(1)
    m = _RE.match(str(text))
    if m and not math.isfinite(float(m.group(1))):   # 1e999: a float overflows to infinity
        raise UsageError(f"invalid byte size {text!r}: 8 EiB or more, larger than any device holds")
    if m and m.group(2).lower() in ("", "b") and float(m.group(1)) != int(float(m.group(1))):
        raise UsageError(f"invalid byte size {text!r}: a fraction of a byte; give a whole number of bytes "
                         f"or a unit (e.g. {m.group(1)}GiB)")
    if m and m.group(2).lower() not in _UNITS:   # a number with a unit we do not know: say which units we do
        raise UsageError(f"invalid byte size {text!r}: unknown unit {m.group(2)!r}; expected B, KiB, MiB, GiB, TiB, "
                         f"PiB (or Ki, Mi, Gi, Ti, Pi: powers of 1024) or kB, MB, GB, TB, PB (or k, M, G, T, P: powers "
                         f"of 1000), in any case")
    if not m:
        raise UsageError(expected)
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value >= 2**63:
        raise UsageError(f"invalid byte size {text!r}: 8 EiB or more, larger than any device holds")
    out = int(round(value))
    if out == 0 and value > 0:
        raise UsageError(f"invalid byte size {text!r}: less than one byte")
    return out


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 device``, ``8 devices``, ``1,024 nodes``: ``n`` (thousands separated) with the noun in singular or plural (``plural`` when the
    plural is not ``noun + 's'``), for messages."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def format_bytes(n: float) -> str:
    """Human-readable IEC size, e.g. ``125.0 MiB`` (for display only)."""
    n = float(n)
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    for unit in units:
        if abs(n) < 1024 or unit == units[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable: the last unit returns")


class _DeviceTable(dict):
    """A dict of device name -> HBM bytes whose lookup ``table[name]`` also takes a short or older name of
    :data:`DEVICE_ALIASES` (``h100-80gb`` -> ``h100-sxm``); iterating it gives the listed names only."""

    def __missing__(self, key):
        name = DEVICE_ALIASES.get(str(key).lower())
        if name is None or name not in self:
            raise KeyError(key)
        return self[name]


#: The one table of device names, for ``--device`` and ``--memory-budget`` alike (new user 30: the two took
#: different sets, ``h100-80gb`` for one and ``h100-sxm`` for the other): the published HBM capacity per chip
#: (TPU) or per GPU, in bytes.  The names of the device profiles (:data:`hloshard.devices.PROFILES`, which
#: ``--device`` takes; :data:`PROFILE_NAMES`) come first, spelled as there, then parts with no time profile
#: that a memory budget may still name.  Sources are listed in the README ("Memory budgets by device"). HBM
#: stacks come in binary sizes, so "80 GB" parts hold 80 GiB; XLA and the runtime reserve part of it, so a
#: budget a little below the device size is safer.
DEVICE_MEMORY = _DeviceTable({
    "h100-sxm": 80 * 2**30,
    "h200": 141 * 2**30,
    "a100-80gb": 80 * 2**30,
    "b200": 180 * 2**30,
    "tpu-v4": 32 * 2**30,
    "tpu-v5e": 16 * 2**30,
    "tpu-v5p": 95 * 2**30,
    "tpu-v6e": 32 * 2**30,
    # memory only (no --device profile)
    "tpu-v2": 16 * 2**30,
    "tpu-v3": 32 * 2**30,
    "v100-16gb": 16 * 2**30,
    "v100-32gb": 32 * 2**30,
    "a100-40gb": 40 * 2**30,
    "h100-94gb": 94 * 2**30,
})

#: The names of :data:`DEVICE_MEMORY` that have a device profile (``--device``), in the profiles' order.
PROFILE_NAMES = ("h100-sxm", "h200", "a100-80gb", "b200", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e")

#: Short and older names of devices, for ``--device`` and ``--memory-budget`` alike
#: (:func:`hloshard.devices.get_profile`, :func:`parse_memory_budget`); older spellings of a profile's part
#: (``h100-80gb``, ``h200-141gb``, ``b200-180gb``) are still read, the listed name is the profile's.
DEVICE_ALIASES = {"h100": "h100-sxm", "h100-80gb": "h100-sxm", "h200-141gb": "h200", "b200-180gb": "b200",
                  "a100": "a100-80gb", "v4": "tpu-v4", "v5e": "tpu-v5e", "v5p": "tpu-v5p", "v6e": "tpu-v6e"}


def device_names_words() -> str:
    """The device names in words, for an error that lists them: the profiles' names as ``--device``'s error
    lists them (``h100-sxm, h200, ..., tpu-v6e``), then the memory-only ones."""
    memory_only = [n for n in DEVICE_MEMORY if n not in PROFILE_NAMES]
    return f"{', '.join(PROFILE_NAMES)}; for a memory budget only also {', '.join(memory_only)}"


def budget_device_note(budget, device: str | None, device_name: str | None = None) -> str | None:
    """A warning when a memory ``budget`` given as a device's name (``--memory-budget tpu-v5e``: a
    :func:`parse_memory_budget` result whose ``device`` is set) is another device's HBM than the one the plan is
    priced for (``--device``; ``device_name``: its profile's name when known, e.g. from a TOML file), else None.
    Fresh-clone check 33: ``--device h100-sxm --memory-budget tpu-v5e`` held an H100 plan to 16.0 GiB, silently."""
    given = getattr(budget, "device", None)
    if given is None or device is None:
        return None
    key = str(device_name or device).strip().lower()
    key = key if key in DEVICE_MEMORY else DEVICE_ALIASES.get(key, key)
    if key == given:
        return None
    own = DEVICE_MEMORY.get(key)
    return (f"--memory-budget {given} is that device's HBM ({format_bytes(int(budget))}), but the plan is priced for "
            f"{device_name or device}" + (f" ({format_bytes(own)} of HBM)" if own else "")
            + f": the plan is held to {given}'s memory; --memory-budget {device_name or device} (or a byte size) holds "
              f"it to the device it runs on")


class GivenBytes(int):
    """Bytes read from a size written with a unit or a device name (``400KiB``, ``tpu-v5e``): an ``int`` that
    remembers it was not a bare number, so that a message can tell a unitless budget (``12``: 12 bytes, new
    user 30 F10) from a small one given with its unit (fresh-clone check 32: ``400KiB`` was told what
    ``409600GiB`` means)."""

    unit_given = True


def parse_memory_budget(text: str) -> int:
    """A memory budget per device: a device name from :data:`DEVICE_MEMORY` (``tpu-v5e``, ``h100-sxm``: the
    names ``--device`` takes, and a few memory-only parts; case-insensitive; or a short or older name of
    :data:`DEVICE_ALIASES`, ``h100``, ``v5e``, ``h100-80gb``) or a byte size as :func:`parse_bytes` reads it.
    Returns bytes.

    Returns a :class:`GivenBytes` when the text names a unit or a device, a plain ``int`` for a bare number.
    Raises UsageError naming the known devices (:func:`device_names_words`) when it is neither.
    """
    key = str(text).strip().lower()
    key = key if key in DEVICE_MEMORY else DEVICE_ALIASES.get(key, key)
    if key in DEVICE_MEMORY:
        out = GivenBytes(DEVICE_MEMORY[key])
        out.device = key   # the device it is the HBM of (budget_device_note)
        return out
    try:
        size = parse_bytes(text)
        return size if re.fullmatch(r"\s*\+?[0-9_]+\s*", str(text)) else GivenBytes(size)
    except UsageError as exc:
        if re.match(r"\s*[-+]?[0-9.]", str(text)):   # a size, out of range or malformed: parse_bytes says which
            raise UsageError(f"invalid memory budget {text!r}: {str(exc).split(': ', 1)[-1]}") from None
        raise UsageError(f"invalid memory budget {text!r}: expected a byte size like 64MiB or a device name "
                         f"({device_names_words()})") from None
