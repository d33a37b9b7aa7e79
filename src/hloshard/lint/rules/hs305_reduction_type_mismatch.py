from __future__ import annotations

from ..collectives import collectives_of
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
        for coll in collectives_of(context):
            instr = coll.instr
            if coll.family not in ("all-reduce", "reduce-scatter"):
                continue
            comp = instr.attr("to_apply")
            if comp is None or not hasattr(comp, "parameters"):
                continue
            params = comp.parameters
            root = comp.root
            ptypes = [p.shape.element_type for p in params if not p.shape.is_tuple]
            if len(params) != 2 or len(ptypes) != 2 or any(p.shape.rank for p in params) or root.shape.is_tuple:
                sig = ", ".join(str(p.shape) for p in params)
                yield self.finding(context, instr, f"%{instr.name}: the reduction computation %{comp.name} must "
                                                   f"take two scalars of one type and return one, it takes "
                                                   f"({sig}) -> {root.shape}", key="signature")
                continue
            t = ptypes[0]
            if ptypes[1] != t or root.shape.element_type != t:
                yield self.finding(context, instr, f"%{instr.name}: the reduction computation %{comp.name} mixes "
                                                   f"types ({ptypes[0]}, {ptypes[1]}) -> {root.shape.element_type}",
                                   key="signature")
                continue
            for i, shape in enumerate(coll.operands):
                if not shape.is_tuple and shape.element_type != t:
                    yield self.finding(context, instr,
                                       f"%{instr.name} ({instr.opcode}): operand {i} %{instr.operands[i].name} "
                                       f"is {shape.element_type} but the reduction computation %{comp.name} "
                                       f"reduces {t}", key=str(i))
