from __future__ import annotations

from ..collectives import problems_of
from ..rule import Rule


class CollectiveOperandCount(Rule):
    """A collective has no operand, or an array-form all-to-all has more than one.

    all-gather, reduce-scatter, all-reduce and all-to-all take one operand or, in their variadic
    form, several (returning a tuple with one element per operand); zero operands is meaningless
    and XLA's verifier rejects it (``operand_count() >= 1``, added with variadic all-gather and
    reduce-scatter). An all-to-all with ``dimensions={d}`` splits and concatenates one array, so it
    takes exactly one operand; the tuple form (no ``dimensions``) takes any positive number.

    **Bad**::

        ENTRY e {
          ROOT ag = () all-gather(), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
        }

    **Good**::

        ENTRY e {
          a = f32[4] parameter(0)
          ROOT ag = f32[8] all-gather(a), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
        }
    """

    code = "HS301"
    name = "collective-operand-count"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for p in problems_of(context, "HS301"):   # hloshard.hlo.collective_checks
            yield self.finding(context, p.instr, p.message, key=p.key)
