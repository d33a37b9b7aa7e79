"""What every command shares besides options: the input it is about (for error locations), output
paths checked before the work starts, the stderr progress display, and Ctrl-C.

* :func:`note_input` records the file and module a command works on; the CLI's error handler then
  prints ``FILE:LINE:COL: error: ...`` for errors that name an instruction, and the file name for
  all others (:func:`hloshard.errors.locate_in_module`).
* :func:`check_outputs` fails at once (exit 2) for an output that cannot be written, before a
  long solve (:func:`hloshard.io.check_output_path`).
* :func:`step` shows a rich spinner with a label on stderr while a step runs, only when stderr is a
  terminal (never in pipes, files or CI logs).
* :func:`stop_on_interrupt` (:func:`hloshard.interrupts.stop_on_interrupt`, re-exported) turns Ctrl-C into a
  stopped CP-SAT search: the signal is noticed by a watcher thread even while the main thread is inside the
  solver's C++ code, which sets :data:`hloshard.interrupts.STOP`; the search returns at once and the pending
  KeyboardInterrupt surfaces in the main thread (the CLI prints ``interrupted`` and exits 130, writing nothing).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import click

from .. import IMPORTED_AT
from ..interrupts import stop_on_interrupt  # noqa: F401 - the CLI's Ctrl-C (cli.py): one place, interrupts.py
from ..errors import UsageError
from ..hlo.partitioned import is_per_device_program
from ..io import check_output_path, same_file
from ..xla_check import require_jax

META_KEY = "hloshard.input"


#: what the last command asked to outlive it (:func:`hold_until_exit`)
_HELD: list = []


def hold_until_exit(*objs) -> None:
    """Keep ``objs`` -- a command's module, cost graphs and result: on a 48-layer transformer about a GB of Python
    objects -- alive after the command returns, in place of what an earlier command in this process held, so
    that freeing them is left to the process's end, which the console script makes with ``os._exit`` once the
    outputs are flushed (:func:`hloshard.entry.main`): freed one by one, they took 0.6 s after the last write on
    an idle core and 2-3 s at load 20 (round 30: ``solve --time-limit 60`` of the 48-layer transformer at 4x2
    ended 60.05 s after its start, its own clock at 59.46 s).  In a process that goes on (tests, a notebook)
    only the last command's objects are held."""
    _HELD[:] = objs


def process_started() -> float:
    """The ``time.monotonic()`` instant the running command started: when the process was started for
    it (``hloshard COMMAND ...`` or ``python -m hloshard COMMAND ...``: the command's name is the
    process's first argument), the first import of the ``hloshard`` package
    (:data:`hloshard.IMPORTED_AT`), so that a wall-clock promise (``solve --time-limit``) counts the
    imports; the interpreter's own start-up before it (tens of ms) is not counted. Not the process's
    start time: a shell that ``exec``s the command (``bash -c "... && hloshard ..."``) would pass its
    own earlier work on as the command's. Otherwise (a command run inside a longer-lived process, e.g.
    click's test runner) now."""
    now = time.monotonic()
    ctx = click.get_current_context(silent=True)
    if ctx is None or sys.argv[1:2] != [ctx.info_name]:
        return now
    return min(now, IMPORTED_AT)


def note_input(filename: str, module=None) -> None:
    """Record the input ``filename`` (``-`` is shown as ``<stdin>``) and its parsed ``module`` for the
    error handler of :mod:`hloshard.cli`. A no-op outside a click context."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().meta[META_KEY] = ("<stdin>" if filename == "-" else filename, module)


def noted_input(ctx) -> tuple:
    """(filename, module) recorded by :func:`note_input`, or (None, None)."""
    return ctx.find_root().meta.get(META_KEY, (None, None))


def check_outputs(inputs=(), **paths) -> None:
    """``check_outputs(inputs=(MODULE,), output=..., report=...)``: :func:`hloshard.io.check_output_path`
    for each path that is given (keyword = what the file is, used in the message), and a UsageError
    (exit 2) when one of them names the same file as one of ``inputs``: a result never silently
    replaces the module it was computed from (``fmt`` alone formats in place)."""

    given = []
    for what, path in paths.items():
        check_output_path(path, what.replace("_", " "))
        for src in inputs:
            if path not in (None, "-") and src not in (None, "-") and same_file(path, src):
                raise UsageError(f"{path}: the {what.replace('_', ' ')} would overwrite the input {src}; "
                                 f"give another file", filename=path)
        if path in (None, "-"):
            continue
        for other_what, other in given:   # two results into one file: the later would replace the first
            if same_file(path, other) or os.path.realpath(path) == os.path.realpath(other):
                raise UsageError(f"{path}: the {what.replace('_', ' ')} and the {other_what.replace('_', ' ')} "
                                 f"would be written to the same file; give each its own", filename=path)
        given.append((what, path))


def print_warnings(warnings, said=(), words=None) -> None:
    """Each of ``warnings`` on stderr as ``warning: ...``, the one way ``solve`` (``--format json``) and ``cost``
    give them (README: warnings go to stderr, the product to stdout); one in ``said`` (printed at once while the
    command ran) is not given again; ``words(w)``: the text shown for ``w`` (default: as it is)."""
    for w in warnings:
        if w not in said:
            click.echo(f"warning: {words(w) if words is not None else w}", err=True)


def show_progress(quiet: bool = False) -> bool:
    """Whether progress may be drawn: stderr is a terminal and the user did not ask for quiet."""
    return not quiet and sys.stderr.isatty()


@contextlib.contextmanager
def step(label: str, enabled: bool):
    """A transient rich spinner ``label`` on stderr while the block runs (nothing when disabled)."""
    if not enabled:
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(label, spinner="dots"):
        yield


class _Spinner:
    """A started :func:`step` that is stopped explicitly (idempotent), or when the command ends."""

    def __init__(self, label: str, enabled: bool):
        self._cm = step(label, enabled)
        self._cm.__enter__()
        self._open = True
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(self.stop)

    def stop(self) -> None:
        if self._open:
            self._open = False
            self._cm.__exit__(None, None, None)


def start_step(label: str, enabled: bool) -> _Spinner:
    """Like :func:`step`, for code that cannot be indented under a ``with``: call ``.stop()``."""
    return _Spinner(label, enabled)


def xla_ready(module, filename: str) -> None:
    """The check every ``--xla`` runs before its work: jax is importable
    (:func:`hloshard.xla_check.require_jax`), and ``module`` is not already a per-device program
    (:func:`hloshard.hlo.partitioned.is_per_device_program`: XLA's SPMD partitioner does not partition one
    again, it fails inside with a RET_CHECK).  Raises UsageError (exit 2) naming the file."""

    if is_per_device_program(module):
        raise UsageError("--xla partitions the module with XLA's SPMD partitioner, and this module is already "
                         "a per-device program (its collectives cross partitions), which XLA does not partition "
                         "again: its collectives are the ones written, priced as they are without --xla",
                         filename=filename)
    require_jax()
