"""hloshard: sharding XLA HLO programs.

Data flows one way: text -> ``hlo`` (parser, IR, printer, HloSharding) -> ``mesh`` + ``cost``
(collectives, resharding planner, memory) -> ``strategy`` (handlers per op family) -> cost graph
(IOPDDL problem structure, ``costgraph``) -> ``solver`` (CP-SAT) -> shardings applied to the IR -> printer.
"""

__version__ = "0.1.0"
