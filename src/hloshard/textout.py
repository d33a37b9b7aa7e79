"""Rich consoles for the text reports of ``cost``, ``diff``, ``explain`` and ``solve``'s summary (a consumer-level utility, like :mod:`hloshard.units`).

On a terminal a report uses the terminal's width and table cells that hold shardings wrap (``fold``)
instead of being cut. Anywhere else (a pipe, a file, a CI log) nothing is cut or wrapped inside a
table: :func:`print_table` widens the console to the table's natural width for that table, so a
sharding such as ``{devices=[2,1,4]<=[8] last_tile_dim_replicate}`` is printed whole and a line can
be searched for with grep. Plain text lines wrap at :data:`TEXT_WIDTH` there.
"""

from __future__ import annotations

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

            return Console(file=file, force_terminal=True, width=shutil.get_terminal_size().columns)
        return Console(file=stream)
    return Console(file=stream, width=TEXT_WIDTH, color_system=None, force_terminal=False, soft_wrap=False)


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
