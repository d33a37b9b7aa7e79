"""The ``hloshard`` console script (and ``python -m hloshard``): the CLI imported with Ctrl-C held.

Importing :mod:`hloshard.cli` (click; 0.1 s idle, more under load) comes before click's own error
handling, so a Ctrl-C in that window printed a ``KeyboardInterrupt`` traceback (new user 18, at 0.5 s).
Here it is held for the import (:func:`hloshard.interrupts.held_interrupts`) and then said as every
later Ctrl-C is: ``interrupted`` on stderr, exit 130.

When the command has ended (its outputs written and closed), the objects left are frozen for the garbage
collector (``gc.freeze``): the interpreter's exit then skips the last collection of the cost graphs' cycles,
which ran after ``solve``'s clock (round 30: decoder2's ``solve --time-limit 20`` exited 2.95 s after its last
write at load 20, 0.87 s frozen; ``os._exit`` 0.66 s).  Exit handlers and files are unaffected.
"""

from __future__ import annotations

import gc
import sys

from .interrupts import held_interrupts


def main() -> None:
    """Run the ``hloshard`` command line (:func:`hloshard.cli.main`)."""
    try:
        with held_interrupts():
            from .cli import main as cli_main   # the import this module exists to guard
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    try:
        cli_main()
    finally:   # the process ends here (click exits): nothing is collected after this
        gc.freeze()
