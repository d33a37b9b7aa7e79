"""The ``hloshard`` console script (and ``python -m hloshard``): the CLI imported with Ctrl-C held.

Importing :mod:`hloshard.cli` (click; 0.1 s idle, more under load) comes before click's own error
handling, so a Ctrl-C in that window printed a ``KeyboardInterrupt`` traceback (new user 18, at 0.5 s).
Here it is held for the import (:func:`hloshard.interrupts.held_interrupts`) and then said as every
later Ctrl-C is: ``interrupted`` on stderr, exit 130.
"""

from __future__ import annotations

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
    cli_main()
