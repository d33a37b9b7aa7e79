"""hloshard: sharding XLA HLO programs.

Data flows one way: text -> ``hlo`` (parser, IR, printer, HloSharding) -> ``mesh`` + ``cost``
(collectives, resharding planner, memory) -> ``strategy`` (handlers per op family) -> cost graph
(IOPDDL problem structure, ``costgraph``) -> ``solver`` (CP-SAT) -> shardings applied to the IR -> printer.
"""

import time as _time

#: ``time.monotonic()`` when the package was first imported: the start of a ``hloshard`` command for
#: its wall-clock promises (``commands.common.process_started``), interpreter start-up aside
IMPORTED_AT = _time.monotonic()

__version__ = "0.1.0"
