from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class TupleShardingArity(Rule):
    """A tuple sharding has a different number of elements than its tuple shape has leaves.

    A tuple sharding lists one sharding per leaf of the (possibly nested) tuple shape, flattened in
    pre-order, and exactly one element for an empty tuple. A tuple sharding on an array shape is
    also invalid. XLA rejects both; a single (non-tuple) sharding on a tuple shape is fine and
    applies to every leaf.

    **Bad**::

        ENTRY e {
          a = f32[8] parameter(0)
          ROOT t = (f32[8], f32[8]) tuple(a, a), sharding={{replicated}}
        }

    **Good**::

        ENTRY e {
          a = f32[8] parameter(0)
          ROOT t = (f32[8], f32[8]) tuple(a, a), sharding={{replicated}, {replicated}}
        }
    """

    code = "HS106"
    name = "tuple-sharding-arity"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        yield from site_findings(self, context)
