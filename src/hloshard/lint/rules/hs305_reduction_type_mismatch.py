from __future__ import annotations

from ..collectives import problems_of
from ..rule import Rule


class ReductionTypeMismatch(Rule):
    """The element types of an all-reduce / reduce-scatter do not match its reduction computation.

    The ``to_apply`` computation is typed: it takes two scalars of one element type T and returns
    a T, and it is applied element-wise to every operand -- so every operand (and in the variadic
    form every tuple element) must have element type T. A ``bf16`` gradient reduced with an ``f32``
    adder is rejected by XLA's shape inference.

    **Bad**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[8] parameter(0)
          b = bf16[8] parameter(1)
          ROOT ar = (f32[8], bf16[8]) all-reduce(a, b), replica_groups={}, to_apply=sum
        }

    **Good**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[8] parameter(0)
          b = f32[8] parameter(1)
          ROOT ar = (f32[8], f32[8]) all-reduce(a, b), replica_groups={}, to_apply=sum
        }
    """

    code = "HS305"
    name = "reduction-type-mismatch"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for p in problems_of(context, "HS305"):   # hloshard.hlo.collective_checks
            yield self.finding(context, p.instr, p.message, key=p.key)
