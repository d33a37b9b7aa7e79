"""Rich consoles for the text reports of ``cost``, ``diff``, ``explain`` and ``solve``'s summary (a consumer-level utility, like :mod:`hloshard.units`).

On a terminal a report uses the terminal's width and table cells that hold shardings wrap (``fold``)
instead of being cut. Anywhere else (a pipe, a file, a CI log) nothing is cut or wrapped inside a
table: :func:`print_table` widens the console to the table's natural width for that table, so a
sharding such as ``{devices=[2,1,4]<=[8] last_tile_dim_replicate}`` is printed whole and a line can
be searched for with grep. Plain text lines wrap at :data:`TEXT_WIDTH` there.
"""

from __future__ import annotations

import re

#: the width of plain text lines when the output is not a terminal
TEXT_WIDTH = 120


def report_console(file=None, stderr: bool = False, terminal: bool | None = None):
    """A rich Console for a text report written to ``file`` (a text stream; None: stdout, or stderr
    with ``stderr``). ``terminal``: whether the output is a terminal (None: ask the stream). Not a
    terminal: no colour, no control codes, plain text wrapped at :data:`TEXT_WIDTH`."""
    import sys

    from rich.console import Console

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if terminal is None:
        terminal = bool(getattr(stream, "isatty", lambda: False)())
    if terminal:
        if file is not None and not getattr(file, "isatty", lambda: False)():
            # a buffer whose text goes to a terminal afterwards: the terminal's width and colours
            import shutil

            return Console(file=file, force_terminal=True, width=shutil.get_terminal_size().columns, highlight=False)
        return Console(file=stream, highlight=False)
    return Console(file=_NoTrailingSpaces(stream), width=TEXT_WIDTH, color_system=None, force_terminal=False,
                   soft_wrap=False, highlight=False)


_TRAILING = re.compile(r"[ \t]+(?=\n)")


class _NoTrailingSpaces:
    """A text stream wrapper that drops the spaces rich pads each line of a grid or table to the console
    width with (plain-text reports in a pipe or a file carry no trailing whitespace)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_TRAILING.sub("", text))
        return len(text)

    def flush(self) -> None:
        flush = getattr(self._stream, "flush", None)
        if flush is not None:
            flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._stream, name)


# a figure and the unit after it: the space between them never breaks a line (fresh-clone check, round 30: a
# warning wrapped at 120 columns split "1.5" / "MiB", and a grep for "1.5 MiB" found nothing)
_FIGURE_UNIT = re.compile(r"(?<=\d) (?=(?:[KMGTPE]i?B|[kMGTP]B|B|bytes|TFLOP/s|[GT]B/s|ms|us|µs|ns|s|%)(?![\w/]))")
_GLUE = "\u00a0"   # textwrap splits at ASCII whitespace only, so a no-break space holds the pair together


def wrap_keeping_units(text: str, width: int, indent: str = "") -> str:
    """``text`` wrapped to ``width`` columns by :mod:`textwrap` (no word broken, no break at a hyphen: a sharding,
    a path or a flag stays whole), never between a figure and its unit (``1.5 MiB``, ``60 s``, ``-3.8%``);
    each line of ``text`` is wrapped on its own, and ``indent`` (e.g. ``"warning: "``) stands before the first
    line.  Plain text in, plain text out (the same characters: the pairs are held by a no-break space only
    while wrapping)."""
    import textwrap

    out = []
    for i, line in enumerate(text.split("\n")):
        glued = _FIGURE_UNIT.sub(_GLUE, line)
        wrapped = textwrap.fill(glued, width=max(20, width), initial_indent=indent if i == 0 else "",
                                break_long_words=False, break_on_hyphens=False) or (indent if i == 0 else "")
        out.append(wrapped.replace(_GLUE, " "))
    return "\n".join(out)


def print_labelled(console, label: str, text: str, style: str | None = None) -> None:
    """Print ``label text`` (``warning: ...``, ``note: ...``) on ``console``, wrapped by
    :func:`wrap_keeping_units` to the console's width (a terminal's, or :data:`TEXT_WIDTH` in a pipe or a
    file), ``label`` in ``style``; ``text`` is plain (a ``[...]`` in it is printed, not read as rich markup)."""
    from rich.text import Text

    body = wrap_keeping_units(text, console.width, indent=f"{label} ")[len(label):]
    console.print(Text.assemble((label, style or ""), body), soft_wrap=True)


def tuple_elements(text: str) -> list[str] | None:
    """The top-level elements of a tuple written as ``(a, b, ...)`` (an HLO tuple shape) or ``{a, b, ...}``
    (a tuple HloSharding), split at the commas outside any bracket; None when ``text`` is not one."""
    text = text.strip()
    if len(text) < 2 or (text[0], text[-1]) not in (("(", ")"), ("{", "}")):
        return None
    parts, depth, start = [], 0, 1
    for i, ch in enumerate(text[1:-1], start=1):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:-1].strip())
    if text[0] == "{" and len(parts) == 1 and not parts[0].startswith("{"):
        return None   # a single sharding such as {devices=[2,4]<=[8]}, not a tuple of them
    return [p for p in parts if p]


def abbreviate_tuple(text: str, max_chars: int = 100) -> str:
    """``text`` unchanged when it is at most ``max_chars`` long or not a tuple (see
    :func:`tuple_elements`); otherwise its first elements that fit, then ``... N elements`` (so a root
    tuple's shape or sharding does not make a table row thousands of characters wide); a tuple sharding also
    says how many of its elements are replicated (``... 110 elements, 31 replicated``: new user 30 F13, three
    replicated first elements read as "every output replicated" where 79 were split).  The JSON
    report keeps the whole text."""
    if len(text) <= max_chars:
        return text
    parts = tuple_elements(text)
    if not parts:
        return text
    kept: list[str] = []
    for part in parts:
        if kept and len(", ".join(kept + [part])) + 2 > max_chars // 2:
            break
        kept.append(part)
    count = f"{len(parts)} elements"
    if text[0] == "{":   # a tuple sharding: how many of all its elements are replicated
        count += f", {sum(p.replace(' ', '') == '{replicated}' for p in parts)} replicated"
    return f"{text[0]}{', '.join(kept)}, ... {count}{text[-1]}"


def print_table(console, table) -> None:
    """Print ``table`` whole: on a terminal as rich lays it out (columns made with ``overflow="fold"``
    wrap), elsewhere at its natural width, however wide, so no cell is cut to ``...`` or wrapped."""
    if console.is_terminal:
        console.print(table)
        return
    natural = console.measure(table, options=console.options.update_width(1_000_000)).maximum
    old = console.width
    console.width = max(old, natural)
    try:
        console.print(table)
    finally:
        console.width = old


def _seconds_words(x: float) -> str:
    """``8 us``, ``1.5 ms``, ``2 s``: a latency for the mesh line (4 significant digits)."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x * 1e9:.4g} ns"


def mesh_words(report: dict) -> str:
    """The mesh line of a report (``solve``'s summary and HTML page): the user's mesh (names, sizes,
    where it came from), then the internal refinement the cost graph uses when there is one, and
    alpha / beta, e.g. ``2x4 from --mesh; refined internally to 2x2x2 [0, 1:(1)2, 1:(2)2] (see the
    note), alpha 1,1,1, beta 1,1,1 per internal axis``. ``report["mesh"]``: ``DeviceMesh.to_json()``;
    ``report["mesh_description"]``: ``DeviceMesh.describe()``."""
    mesh = report["mesh"]
    if not isinstance(mesh, dict):
        return str(mesh)
    text = report.get("mesh_description")
    user = mesh.get("user_shape") or mesh.get("shape", ())
    refined = list(user) != list(mesh.get("shape", ()))
    if not text:
        text = "x".join(str(x) for x in mesh.get("shape", ()))
        names = mesh.get("axis_names")
        if names:
            text += f" (axes {', '.join(map(str, names))})"
    elif refined:
        text = text.replace(", refined internally", "; refined internally") + " (see the note)"
    a, b = mesh.get("alpha"), mesh.get("beta")
    spu = (report.get("step_time") or {}).get("seconds_per_unit")
    if a is not None and b is not None and spu:
        # --device: alpha / beta are cost units of the device's time scale; said as the latency and bandwidth they
        # stand for (fresh-clone check 33: "alpha 7.72656e+06,5.79492e+06, beta 19.3164,2.14627" had no unit)
        lat = ",".join(_seconds_words(x * spu) for x in a)
        bw = ",".join(f"{1.0 / (x * spu) / 1e9:,.4g} GB/s" if x > 0 else "-" for x in b)
        text += f", {'per internal axis' if refined else 'per axis'} latency {lat} and bandwidth {bw} (alpha, beta)"
    elif a is not None and b is not None:
        text += f", alpha {','.join(f'{x:g}' for x in a)}, beta {','.join(f'{x:g}' for x in b)}"
        if refined:
            text += " per internal axis"
    return text


def _ids_text(ids: list, limit: int = 8) -> str:
    return "[" + ", ".join(map(str, ids[:limit])) + (", ..." if len(ids) > limit else "") + "]"


def mesh_difference(axes: dict, ids: list, want_axes: dict, want_ids: list, want: str = "`mesh`") -> str:
    """How a mesh (``axes``: axis name -> size, ``ids``: its device ids, row-major) differs from the one wanted
    (``want_axes``, ``want_ids``; ``want`` names it), as the end of "... is sharded on a mesh ...": other axes, other
    devices, or the same axes and devices in another order (reversed, or the first position that differs).  New
    user 36 F9: a mesh of ``jax.devices()[::-1]`` was refused with "on a mesh with axes {'data': 2, 'model': 4}, not on
    `mesh` ({'data': 2, 'model': 4}, its devices in the same order)", which read as the same mesh twice."""
    axes, want_axes = dict(axes), dict(want_axes)
    ids, want_ids = [int(i) for i in ids], [int(i) for i in want_ids]
    if list(axes.items()) != list(want_axes.items()):
        return f"a mesh with axes {axes}, not on {want} ({want_axes})"
    if sorted(ids) != sorted(want_ids):
        return (f"a mesh of the same axes {axes} as {want} but other devices ({_ids_text(sorted(ids))}; {want} has "
                f"{_ids_text(sorted(want_ids))})")
    if ids == want_ids:
        return f"a mesh of the same axes {axes} and devices as {want}, not {want} itself"
    if ids == want_ids[::-1]:
        order = "reversed"
    else:
        k = next(n for n, (a, b) in enumerate(zip(ids, want_ids)) if a != b)
        order = f"from position {k} on: device {ids[k]} where {want} has {want_ids[k]}"
    return (f"a mesh of the same axes {axes} and devices as {want}, in another order ({order}: its devices "
            f"{_ids_text(ids)}, {want}'s {_ids_text(want_ids)}); a layout names positions on the mesh, so the same "
            f"spec puts other data on each device")


def jax_mesh_difference(mesh, want, want_name: str = "`mesh`") -> str:
    """:func:`mesh_difference` of two ``jax.sharding.Mesh`` objects (read by their ``shape`` and ``devices``; jax is
    not imported here)."""
    return mesh_difference(dict(mesh.shape), [d.id for d in mesh.devices.flat], dict(want.shape),
                           [d.id for d in want.devices.flat], want_name)
