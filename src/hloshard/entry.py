"""The ``hloshard`` console script (and ``python -m hloshard``): the CLI imported with Ctrl-C held.

Importing :mod:`hloshard.cli` (click; 0.1 s idle, more under load) comes before click's own error
handling, so a Ctrl-C in that window printed a ``KeyboardInterrupt`` traceback (new user 18, at 0.5 s).
Here it is held for the import (:func:`hloshard.interrupts.held_interrupts`) and then said as every
later Ctrl-C is: ``interrupted`` on stderr, exit 130.

When the command has ended (its outputs written and closed), the process ends with ``os._exit`` after
flushing standard output and error: the interpreter's own exit would first free the cost graphs a command
held (:func:`hloshard.commands.common.hold_until_exit`) object by object and collect their cycles, after
``solve``'s clock (round 30: decoder2's ``solve --time-limit 20`` exited 2.95 s after its last write at load 20,
0.87 s with the objects frozen for the collector, 0.66 s with ``os._exit``; the 48-layer transformer's 60 s solve
ended 0.6 s after its own clock on an idle core).  No exit handler of hloshard's is skipped (it registers none;
every output file is written and closed by :func:`hloshard.io.write_text_atomic` before the command returns).
The exit status is click's: 0, 1 (a usage message click printed), 2 (bad input), 3 (no plan), 130 (Ctrl-C).
"""

from __future__ import annotations

import gc
import os
import sys

from .interrupts import held_interrupts
from .io import whole_writes_to_stdout


def main() -> None:
    """Run the ``hloshard`` command line (:func:`hloshard.cli.main`)."""
    try:
        with held_interrupts():
            from .cli import main as cli_main   # the import this module exists to guard
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    whole_writes_to_stdout()   # a reader that leaves mid-write is seen (exit 1), not a silently cut output
    try:
        cli_main()
        code = 0
    except SystemExit as exc:   # click ends every command with it
        code = exc.code
    end_process(code)


def end_process(code) -> None:
    """Flush standard output and error and end the process with ``code`` (SystemExit's: None is 0, a message is
    printed to stderr and is 1) without the interpreter's teardown (the module docstring).  Never returns."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe (| head): nothing more can be said there
            pass
    gc.freeze()
    os._exit(int(code) & 0xFF)
