from __future__ import annotations

from ..collectives import problems_of
from ..rule import Rule


class CollectiveResultShape(Rule):
    """A collective's result shape does not follow from its operands and group size.

    Per operand i (variadic forms return one tuple element per operand): all-gather returns the
    operand with dimension d multiplied by the group size; reduce-scatter returns it with d divided
    by the group size, which must divide it; all-reduce and all-to-all return the operand's shape
    (an array-form all-to-all also needs d divisible by the group size). Element types never
    change. The group size is the size of each replica group -- times num_partitions in
    cross-replica-and-partition mode (channel_id without use_global_device_ids) -- or all
    participants for ``replica_groups={}``; when it cannot be known (num_partitions unknown), the
    factor must at least be the same for every element.

    **Bad**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[6] parameter(1)
          ROOT rs = (f32[2,8], f32[2]) reduce-scatter(a, b), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=sum
        }

    **Good**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[6] parameter(1)
          ROOT rs = (f32[2,8], f32[3]) reduce-scatter(a, b), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=sum
        }
    """

    code = "HS303"
    name = "collective-result-shape"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for p in problems_of(context, "HS303"):   # hloshard.hlo.collective_checks
            yield self.finding(context, p.instr, p.message, key=p.key)
