from __future__ import annotations

from ..collectives import problems_of
from ..rule import Rule


class CollectiveDimensionOutOfRange(Rule):
    """The gather / scatter / split dimension of a collective is not a dimension of every operand.

    all-gather concatenates and reduce-scatter splits along ``dimensions={d}``, which must name
    exactly one dimension with ``0 <= d < rank`` of *every* operand (variadic forms share one d).
    The same holds for an all-to-all with ``dimensions={d}``. XLA's verifier checks
    ``dimension >= 0``; shape inference checks the upper bound, operand by operand.

    **Bad**::

        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[4] parameter(1)
          ROOT ag = (f32[4,16], f32[8]) all-gather(a, b), channel_id=1, replica_groups={{0,1}}, dimensions={1}, use_global_device_ids=true
        }

    **Good**::

        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[4] parameter(1)
          ROOT ag = (f32[8,8], f32[8]) all-gather(a, b), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
        }
    """

    code = "HS302"
    name = "collective-dimension-out-of-range"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for p in problems_of(context, "HS302"):   # hloshard.hlo.collective_checks
            yield self.finding(context, p.instr, p.message, key=p.key)
